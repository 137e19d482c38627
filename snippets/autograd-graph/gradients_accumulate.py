# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(8, 3)
w = torch.randn(3, requires_grad=True)


def loss_fn():
    return (x @ w).tanh().sum()


one = torch.autograd.grad(loss_fn(), w)[0]  # (1)!
for step in range(1, 4):
    loss_fn().backward()  # (2)!
    print(f"step: {step} | w.grad / one:", (w.grad / one).round())

w.grad = None  # (3)!
loss_fn().backward()
print("w.grad = None | step: 1 | w.grad / one:", (w.grad / one).round())
# --8<-- [end:lesson]

# --8<-- [start:proof]
import warnings  # noqa: E402

assert torch.allclose(w.grad, one)
w.grad = None
for step in range(1, 4):
    loss_fn().backward()
    assert torch.allclose(w.grad, step * one)  # (1)!
w.grad = None
loss_fn().backward()
assert torch.allclose(w.grad, one)
assert torch.allclose(one, ((1 - (x @ w).tanh() ** 2)[:, None] * x).sum(0).detach())  # (2)!
kept = w.grad
loss_fn().backward()
assert w.grad is kept and torch.allclose(w.grad, 2 * one)  # (3)!
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    loss_fn().backward(create_graph=True)
assert w.grad is not kept and torch.allclose(w.grad, 3 * one)  # (4)!
assert torch.allclose(kept, 2 * one)
w.grad = None
# --8<-- [end:proof]
