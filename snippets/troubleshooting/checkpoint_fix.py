# --8<-- [start:lesson]
import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
x = torch.randn(2, 4, requires_grad=True)

out = checkpoint(block, x, use_reentrant=False)  # (1)!
(by_grad,) = torch.autograd.grad(out.sum(), x)
print("autograd.grad:       ", by_grad[0].round(decimals=4))

out = checkpoint(block, x, use_reentrant=False)
out.sum().backward(inputs=[x])  # (2)!
print("backward(inputs=[x]):", x.grad[0].round(decimals=4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
plain = torch.autograd.grad(block(x).sum(), x)[0]  # (1)!
assert torch.allclose(by_grad, plain)
assert torch.allclose(x.grad, plain)
assert all(p.grad is None for p in block.parameters())  # (2)!
docs = " ".join(checkpoint.__doc__.split())
assert "It is recommended that you use ``use_reentrant=False``" in docs  # (3)!
# --8<-- [end:proof]
