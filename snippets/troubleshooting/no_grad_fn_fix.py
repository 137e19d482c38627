# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

loss = F.mse_loss(model(x), y)  # (1)!
loss.backward()
print("grad_fn:", type(loss.grad_fn).__name__)
print("weight.grad:", model.weight.grad.round(decimals=4))

running_total = 0.0
running_total += loss.item()  # (2)!
print("running_total:", round(running_total, 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert loss.requires_grad and loss.grad_fn is not None
residual = (x @ model.weight.T + model.bias - y).detach()
assert torch.allclose(model.weight.grad, 2 / len(x) * residual.T @ x)  # (1)!
assert type(running_total) is float
# --8<-- [end:proof]
