# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, target = torch.randn(16, 4), torch.randn(16, 2)

out = model(x)
loss_a = F.mse_loss(out, target)
loss_b = out.abs().mean()
optimizer.zero_grad()
(loss_a + loss_b).backward()  # (1)!
optimizer.step()  # (2)!
print("backward(), step(): ok")

optimizer.zero_grad()
model(x).abs().mean().backward()  # (3)!
print("step(), forward, backward(): ok")
# --8<-- [end:lesson]

# --8<-- [start:proof]
lesson_params = [p.detach().clone() for p in model.parameters()]
lesson_grads = [p.grad.clone() for p in model.parameters()]

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
params = list(model.parameters())
out = model(x)
optimizer.zero_grad()
(F.mse_loss(out, target) + out.abs().mean()).backward()
grads_a = torch.autograd.grad(F.mse_loss(model(x), target), params)
grads_b = torch.autograd.grad(model(x).abs().mean(), params)
for p, ga, gb in zip(params, grads_a, grads_b, strict=True):
    assert torch.allclose(p.grad, ga + gb)  # (1)!
before = [p.detach().clone() for p in params]
optimizer.step()
for p, old in zip(params, before, strict=True):
    assert torch.allclose(p, old - 0.1 * p.grad)  # (2)!
assert all(torch.equal(p, q) for p, q in zip(params, lesson_params, strict=True))  # (3)!

new_grads = torch.autograd.grad(model(x).abs().mean(), params)
assert all(g is not None for g in lesson_grads)
assert all(torch.equal(g, n) for g, n in zip(lesson_grads, new_grads, strict=True))  # (4)!
# --8<-- [end:proof]
