import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
loss = (w * x).exp().sum()

loss.backward(retain_graph=True)  # (1)!
first = w.grad.clone()

loss.backward()  # (2)!

assert torch.allclose(w.grad, 2 * first)  # (3)!
print("after one backward: ", first)
print("after two backwards:", w.grad)
