import torch
from torch.autograd.functional import hessian, hvp

torch.manual_seed(0)


def f(x):
    return (x.sin() * x.roll(1)).sum()


x = torch.randn(4, requires_grad=True)
v = torch.randn(4)

(g,) = torch.autograd.grad(f(x), x, create_graph=True)  # (1)!
(hv,) = torch.autograd.grad(g, x, grad_outputs=v)  # (2)!

_, reference = hvp(f, x.detach(), v)
explicit = hessian(f, x.detach()) @ v
assert torch.allclose(hv, reference, atol=1e-6)
assert torch.allclose(hv, explicit, atol=1e-6)
print("H v by double backward:", hv.round(decimals=4))
print("same as functional.hvp:", torch.allclose(hv, reference, atol=1e-6))
print("same as hessian(f) @ v:", torch.allclose(hv, explicit, atol=1e-6))
