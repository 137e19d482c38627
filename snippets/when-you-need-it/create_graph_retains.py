import torch

torch.manual_seed(0)

x = torch.randn(3, requires_grad=True)
y = (x.exp() * x).sum()

(g,) = torch.autograd.grad(y, x, create_graph=True)  # (1)!
(h,) = torch.autograd.grad(g.sum(), x, retain_graph=True)  # (2)!
(again,) = torch.autograd.grad(y, x)  # (3)!

assert torch.allclose(g, again)
assert torch.allclose(h, (x.exp() * (x + 2)).detach())  # d2/dx2 of x*exp(x)
print("first derivative, twice:", torch.allclose(g, again))
print("second derivative:      ", h.round(decimals=4))

try:
    torch.autograd.grad(g.sum(), x)  # (4)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the graph of g should have lost y's saved tensors")
assert message.startswith("Trying to backward through the graph a second time")
print("graph of g after y's graph was freed:", message.split(" (")[0])
