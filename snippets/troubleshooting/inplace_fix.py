import torch
import torch.nn.functional as F

torch.manual_seed(0)

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, target = torch.randn(16, 4), torch.randn(16, 2)
params = list(model.parameters())

out = model(x)
loss_a = F.mse_loss(out, target)
loss_b = out.abs().mean()

optimizer.zero_grad()
(loss_a + loss_b).backward()  # (1)!

# The same gradients as the two losses' separate gradients added together.
grads_a = torch.autograd.grad(F.mse_loss(model(x), target), params)
grads_b = torch.autograd.grad(model(x).abs().mean(), params)
for p, ga, gb in zip(params, grads_a, grads_b, strict=True):
    assert torch.allclose(p.grad, ga + gb)
before = [p.detach().clone() for p in params]
optimizer.step()  # (2)!
for p, old in zip(params, before, strict=True):
    assert torch.allclose(p, old - 0.1 * p.grad)
print("one backward, then step(): ok")

optimizer.zero_grad()
model(x).abs().mean().backward()  # (3)!
assert all(p.grad is not None for p in params)
print("new forward after step(), then backward: ok")
