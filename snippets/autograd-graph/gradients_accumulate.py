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
    print(f"step {step}: w.grad / one gradient =", (w.grad / one).round())

w.grad = None  # (3)!
loss_fn().backward()
print("w.grad = None, then one step:", (w.grad / one).round())
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert torch.allclose(w.grad, one)
w.grad = None
for step in range(1, 4):
    loss_fn().backward()
    assert torch.allclose(w.grad, step * one)  # (1)!
w.grad = None
loss_fn().backward()
assert torch.allclose(w.grad, one)
assert torch.allclose(one, ((1 - (x @ w).tanh() ** 2)[:, None] * x).sum(0).detach())  # (2)!
# --8<-- [end:proof]
