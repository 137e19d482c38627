# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = (x.exp() * x).sum()

(g,) = torch.autograd.grad(y, x, create_graph=True)  # (1)!
(h,) = torch.autograd.grad(g.sum(), x, retain_graph=True)  # (2)!
(again,) = torch.autograd.grad(y, x)  # (3)!
for name, t in [("grad", g), ("grad_again", again), ("second_grad", h)]:
    print(f"{name + ':':18}", *(f"{v:.4g}" for v in t.tolist()))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert torch.allclose(g, again)
assert torch.allclose(g, (x.exp() * (x + 1)).detach())  # (1)!
assert torch.allclose(h, (x.exp() * (x + 2)).detach())

try:
    torch.autograd.grad(g.sum(), x)  # (2)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the graph of g should have lost y's saved tensors")
assert message.startswith("Trying to backward through the graph a second time")


def next_call_fails(first_call):  # (3)!
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


first_calls = [
    lambda y: torch.autograd.grad(y, x, create_graph=True),
    lambda y: torch.autograd.grad(y, x),
    lambda y: second_derivative(y, retain=True),
    lambda y: second_derivative(y, retain=False),
]
assert [next_call_fails(call) for call in first_calls] == [False, True, False, True]  # (4)!
# --8<-- [end:proof]
