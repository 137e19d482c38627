# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, target = torch.randn(16, 4), torch.randn(16, 2)

out = model(x)
loss_a = F.mse_loss(out, target)
loss_b = out.abs().mean()

optimizer.zero_grad()
loss_a.backward(retain_graph=True)
optimizer.step()  # (1)!
try:
    loss_b.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
    print(message.replace(": [", ":\n[").replace(". ", ".\n"))  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
import re

assert message.startswith(
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)
versions = re.search(r"is at version (\d+); expected version (\d+)", message)
found, expected = map(int, versions.groups())
assert found == expected + 1  # (1)!
assert "[torch.FloatTensor [8, 2]]" in message  # (2)!
assert [tuple(p.shape) for p in model.parameters() if p.numel() == 16] == [(2, 8)]

assert "which is output 0 of AsStrided," in message  # (3)!
assert "Addmm" not in message and "Linear" not in message and " of T," not in message

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
weight = model[2].weight
saved = model(x).grad_fn._saved_mat2  # (4)!
assert saved._base is weight and saved.shape == (8, 2)
assert type(saved.grad_fn).__name__ == "TBackward0"
before = weight._version
with torch.no_grad():
    weight.add_(1.0)
assert saved._version == weight._version == before + 1  # (5)!
assert type(saved.grad_fn).__name__ == "AsStridedBackward0"
view = weight.t()
with torch.no_grad():
    view.mul_(1.0)
assert weight._version == before + 2  # (6)!


def message_of(backward):
    try:
        backward()
    except RuntimeError as error:
        return str(error)
    raise AssertionError("the backward pass should have failed")


a = torch.randn(3, requires_grad=True)
h = a.tanh()
product = h * h
h.add_(1.0)
assert "which is output 0 of Add," in message_of(product.sum().backward)  # (7)!
h = a.tanh()
product = h * h
h.pow_(torch.tensor(2.0))
assert type(h.grad_fn).__name__ == "PowBackward1"
assert "which is output 0 of Pow1," in message_of(product.sum().backward)  # (8)!
h = a.tanh()
product = h * h
with torch.no_grad():
    h.add_(1.0)
assert "which is output 0 of Tanh," in message_of(product.sum().backward)  # (9)!
w = torch.randn(3, requires_grad=True)
square = w * w
with torch.no_grad():
    w.add_(1.0)
text = message_of(square.sum().backward)
assert "[torch.FloatTensor [3]] is at version" in text and "which is output" not in text  # (10)!

with torch.inference_mode():
    frozen = torch.ones(3)
no_counter = message_of(lambda: frozen._version)
assert no_counter == "Inference tensors do not track version counter."  # (11)!
# --8<-- [end:proof]
