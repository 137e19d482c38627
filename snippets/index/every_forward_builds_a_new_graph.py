import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3)

loss_a = (w * x).exp().sum()
loss_a.backward()  # (1)!

loss_b = (w * x).exp().sum()  # (2)!
loss_b.backward()  # (3)!

assert loss_a.grad_fn is not loss_b.grad_fn
assert torch.equal(loss_a, loss_b)
print("same value:     ", torch.equal(loss_a, loss_b))
print("same graph node:", loss_a.grad_fn is loss_b.grad_fn)
