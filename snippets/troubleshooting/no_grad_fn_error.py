import torch
import torch.nn.functional as F

torch.manual_seed(0)

model = torch.nn.Linear(3, 1)
x, y = torch.randn(8, 3), torch.randn(8, 1)


def under_no_grad():
    with torch.no_grad():  # (1)!
        return F.mse_loss(model(x), y)


def frozen_model():
    frozen = torch.nn.Linear(3, 1).requires_grad_(False)  # (2)!
    return F.mse_loss(frozen(x), y)


def rebuilt_from_a_number():
    value = F.mse_loss(model(x), y).item()  # (3)!
    return torch.tensor(value)


for make_loss in (under_no_grad, frozen_model, rebuilt_from_a_number):
    loss = make_loss()
    assert not loss.requires_grad and loss.grad_fn is None
    try:
        loss.backward()
    except RuntimeError as error:
        message = str(error)
    else:
        raise AssertionError("backward should have failed")
    assert message == "element 0 of tensors does not require grad and does not have a grad_fn"
    try:
        loss.backward(retain_graph=True)  # no graph to retain: the same error
    except RuntimeError as error:
        assert str(error) == message
    else:
        raise AssertionError("backward should have failed")
    print(f"{make_loss.__name__:22} requires_grad={loss.requires_grad}  grad_fn={loss.grad_fn}")
print(message)
