# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

losses = F.mse_loss(model(x), y, reduction="none")
losses.mean().backward()  # (1)!
print("mean().backward():      ", model.weight.grad.round(decimals=4))

model.zero_grad()
losses = F.mse_loss(model(x), y, reduction="none")
losses.backward(gradient=torch.full_like(losses, 1 / losses.numel()))  # (2)!
print("backward(gradient=1/N): ", model.weight.grad.round(decimals=4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
by_gradient = model.weight.grad.clone()
(reduced,) = torch.autograd.grad(F.mse_loss(model(x), y, reduction="none").mean(), model.weight)
assert torch.allclose(by_gradient, reduced)  # (1)!
(default,) = torch.autograd.grad(F.mse_loss(model(x), y), model.weight)
assert torch.allclose(default, reduced)  # (2)!
# --8<-- [end:proof]
