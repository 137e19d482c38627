# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
x, target = torch.randn(16, 4), torch.randn(16, 2)

out = model(x)
loss_a, loss_b = F.mse_loss(out, target), out.pow(2).mean()
optimizer.zero_grad()
loss_a.backward(retain_graph=True)
loss_b.backward()  # (1)!
grads_before_step = [p.grad.clone() for p in model.parameters()]
optimizer.step()
print("backward(), backward(), step()  | grad_at: old_params")

optimizer.zero_grad()
model(x).pow(2).mean().backward()  # (2)!
grads_after_step = [p.grad.clone() for p in model.parameters()]
print("step(), forward, backward()     | grad_at: new_params")
# --8<-- [end:lesson]

# --8<-- [start:proof]
torch.manual_seed(0)
old_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
old_out = old_model(x)
reference_before = torch.autograd.grad(
    F.mse_loss(old_out, target) + old_out.pow(2).mean(), list(old_model.parameters())
)
reference_after = torch.autograd.grad(model(x).pow(2).mean(), list(model.parameters()))
for g, r in zip(grads_before_step, reference_before, strict=True):
    assert torch.allclose(g, r, rtol=1e-5, atol=1e-6)  # (1)!
for g, r in zip(grads_after_step, reference_after, strict=True):
    assert torch.allclose(g, r, rtol=1e-5, atol=1e-6)  # (2)!
assert any(not p.equal(q) for p, q in zip(model.parameters(), old_model.parameters(), strict=True))
# --8<-- [end:proof]
