import torch
import torch.nn.functional as F

torch.manual_seed(0)

model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

loss = F.mse_loss(model(x), y)  # (1)!
assert loss.requires_grad and loss.grad_fn is not None
loss.backward()

# The gradient of the mean squared error by hand: 2/N * (prediction - y)^T x
residual = (x @ model.weight.T + model.bias - y).detach()
assert torch.allclose(model.weight.grad, 2 / len(x) * residual.T @ x)
print("grad_fn:", type(loss.grad_fn).__name__)
print("weight.grad:", model.weight.grad.round(decimals=4))

running_total = 0.0
running_total += loss.item()  # (2)!
print("logged loss:", round(running_total, 4))
