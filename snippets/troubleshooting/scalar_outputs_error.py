import torch
import torch.nn.functional as F

torch.manual_seed(0)

model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

losses = F.mse_loss(model(x), y, reduction="none")  # (1)!
try:
    losses.backward()
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("backward should have failed")

assert message == "grad can be implicitly created only for scalar outputs"
print("loss shape:", tuple(losses.shape))
print(message)
