# --8<-- [start:lesson]
import torch

torch.manual_seed(0)


def f(x):
    return (x.sin() * x.roll(1)).sum()


x = torch.randn(4, requires_grad=True)
v = torch.randn(4)

(g,) = torch.autograd.grad(f(x), x, create_graph=True)  # (1)!
(hv,) = torch.autograd.grad(g, x, grad_outputs=v)  # (2)!
print("H v:", *(f"{value:.4g}" for value in hv.tolist()))
# --8<-- [end:lesson]

# --8<-- [start:proof]
from torch.autograd.functional import hessian, hvp

_, reference = hvp(f, x.detach(), v)
explicit = hessian(f, x.detach()) @ v
assert torch.allclose(hv, reference, atol=1e-6)  # (1)!
assert torch.allclose(hv, explicit, atol=1e-6)
# --8<-- [end:proof]
