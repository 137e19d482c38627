# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

losses = F.mse_loss(model(x), y, reduction="none")  # (1)!
print("losses.shape:", tuple(losses.shape))
try:
    losses.backward()
except RuntimeError as error:
    message = str(error)
    print(message)
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert message == "grad can be implicitly created only for scalar outputs"
assert losses.shape == (8, 1)
one_element = losses.sum().reshape(1, 1)
one_element.backward()  # (1)!
(by_sum,) = torch.autograd.grad(F.mse_loss(model(x), y, reduction="sum"), model.weight)
assert one_element.shape == (1, 1) and torch.allclose(model.weight.grad, by_sum)
# --8<-- [end:proof]
