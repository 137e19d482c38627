import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x, y = torch.randn(16, 4), torch.randn(16, 2)

# With retain_graph: two losses from one forward, two backward passes.
out = model(x)
loss1, loss2 = nn.functional.mse_loss(out, y), out.abs().mean()
loss1.backward(retain_graph=True)  # (1)!
loss2.backward()
with_retain = [p.grad.clone() for p in model.parameters()]

# Instead: add the losses, one backward pass.
model.zero_grad()
out = model(x)
loss = nn.functional.mse_loss(out, y) + out.abs().mean()  # (2)!
loss.backward()  # (3)!

same = all(torch.allclose(a, p.grad) for a, p in zip(with_retain, model.parameters(), strict=True))
assert same
print("same gradients:", same)
