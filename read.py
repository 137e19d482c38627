import torch

w = torch.ones(3, requires_grad=True)
y = torch.tanh(w)
y.sum().backward(retain_graph=True)
name = '_sav'
name += 'ed_result'
print(getattr(y.grad_fn, name))
