import torch
import torch.nn.functional as F

torch.manual_seed(0)

model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

losses = F.mse_loss(model(x), y, reduction="none")
losses.mean().backward()  # (1)!
reduced = model.weight.grad.clone()

model.zero_grad()
losses = F.mse_loss(model(x), y, reduction="none")
losses.backward(gradient=torch.full_like(losses, 1 / losses.numel()))  # (2)!
assert torch.allclose(model.weight.grad, reduced)

model.zero_grad()
F.mse_loss(model(x), y).backward()  # the default reduction="mean"
assert torch.allclose(model.weight.grad, reduced)
print("weight.grad:", reduced.round(decimals=4))
