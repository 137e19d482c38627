# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)

losses = {}
with torch.no_grad():  # (1)!
    losses["no_grad"] = F.mse_loss(model(x), y)
frozen = torch.nn.Linear(3, 1).requires_grad_(False)  # (2)!
losses["frozen_model"] = F.mse_loss(frozen(x), y)
losses["tensor(loss.item())"] = torch.tensor(F.mse_loss(model(x), y).item())  # (3)!

for name, loss in losses.items():
    print(f"{name:21} requires_grad={loss.requires_grad}  grad_fn={loss.grad_fn}")
    try:
        loss.backward()
    except RuntimeError as error:
        message = str(error)
print(message)
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert len(losses) == 3
for loss in losses.values():
    assert not loss.requires_grad and loss.grad_fn is None  # (1)!
    for retain_graph in (False, True):  # (2)!
        try:
            loss.backward(retain_graph=retain_graph)
        except RuntimeError as error:
            message = str(error)
        else:
            raise AssertionError("backward should have failed")
        assert message == "element 0 of tensors does not require grad and does not have a grad_fn"
# --8<-- [end:proof]
