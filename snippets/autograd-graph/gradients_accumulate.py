import torch

torch.manual_seed(0)

x = torch.randn(8, 3)
w = torch.randn(3, requires_grad=True)


def loss_fn():
    return (x @ w).tanh().sum()


one = torch.autograd.grad(loss_fn(), w)[0]  # (1)!

for step in range(1, 4):
    loss_fn().backward()  # (2)!
    assert torch.allclose(w.grad, step * one)
    calls = "call " if step == 1 else "calls"
    print(f"after {step} backward {calls}: w.grad / one gradient = {(w.grad / one).round()}")

w.grad = None  # (3)!
loss_fn().backward()
assert torch.allclose(w.grad, one)
print("after w.grad = None and one more backward:", (w.grad / one).round())
