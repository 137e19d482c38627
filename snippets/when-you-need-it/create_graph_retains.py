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


def next_call_fails(first_call):
    """Build y's graph anew, run first_call on it, then try grad(y, x) once more."""
    y = (x.exp() * x).sum()
    first_call(y)
    try:
        torch.autograd.grad(y, x)
    except RuntimeError as error:
        return str(error).startswith("Trying to backward through the graph a second time")
    return False


def second_derivative(y, retain):
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    return torch.autograd.grad(g.sum(), x, retain_graph=retain)


checks = [
    ("grad(y, x, create_graph=True)", lambda y: torch.autograd.grad(y, x, create_graph=True)),
    ("plain grad(y, x)", lambda y: torch.autograd.grad(y, x)),
    ("second derivative, retain_graph=True", lambda y: second_derivative(y, retain=True)),
    ("second derivative, without it", lambda y: second_derivative(y, retain=False)),
]
fails = [next_call_fails(first_call) for _, first_call in checks]
assert fails == [False, True, False, True]
for (label, _), failed in zip(checks, fails, strict=True):
    print(f"after {label + ',':<38} the next grad(y, x) fails: {failed}")
