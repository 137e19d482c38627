# --8<-- [start:show]
import re

import torch
import torch.nn.functional as F

torch.manual_seed(0)

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, target = torch.randn(16, 4), torch.randn(16, 2)

out = model(x)  # one forward pass, two losses
loss_a = F.mse_loss(out, target)
loss_b = out.abs().mean()

optimizer.zero_grad()
loss_a.backward(retain_graph=True)
optimizer.step()  # (1)!
try:
    loss_b.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second backward should have failed")

assert message.startswith(
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)
versions = re.search(r"is at version (\d+); expected version (\d+)", message)
found, expected = map(int, versions.groups())
assert found == expected + 1  # step() changed it once since the forward pass saved it
assert "[torch.FloatTensor [8, 2]]" in message  # (3)!
assert [tuple(p.shape) for p in model.parameters() if p.numel() == 16] == [(2, 8)]
print(message.replace(": [", ":\n[").replace(". ", ".\n"))
# --8<-- [end:show]

# What the message names (torch/csrc/autograd/saved_variable.cpp, SavedVariable::unpack): the
# saved tensor's grad_fn as the backward pass finds it, minus "Backward0"
# (torch/csrc/autograd/function.cpp, Node::forward_op_name). Here not an operation this code ran.
assert "which is output 0 of AsStrided," in message
assert "Addmm" not in message and "Linear" not in message and " of T," not in message

# Why AsStrided: the graph saved the weight's transpose, a view of the weight. A view shares
# its base's version counter, so the step's change to the weight reaches it, and autograd
# rebuilds the grad_fn of a view whose base changed as AsStridedBackward0.
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
weight = model[2].weight
saved = model(x).grad_fn._saved_mat2  # what the last layer's addmm saved
assert saved._base is weight and saved.shape == (8, 2)
assert type(saved.grad_fn).__name__ == "TBackward0"  # made by t() during the forward pass
before = weight._version
with torch.no_grad():
    weight.add_(1.0)  # what step() does to it
assert saved._version == weight._version == before + 1  # a change to the base moves the view
assert type(saved.grad_fn).__name__ == "AsStridedBackward0"
view = weight.t()
with torch.no_grad():
    view.mul_(1.0)  # and a change through a view moves the base
assert weight._version == before + 2


def message_of(backward):
    try:
        backward()
    except RuntimeError as error:
        return str(error)
    raise AssertionError("the backward pass should have failed")


# A tensor changed by add_() with grad mode on is named Add: the in-place operation becomes its
# grad_fn. Changed under no_grad(), it keeps the name of the operation that produced it, Tanh.
a = torch.randn(3, requires_grad=True)
h = a.tanh()
product = h * h  # saves h
h.add_(1.0)
assert "which is output 0 of Add," in message_of(product.sum().backward)
h = a.tanh()
product = h * h
with torch.no_grad():
    h.add_(1.0)
assert "which is output 0 of Tanh," in message_of(product.sum().backward)
# A leaf has no grad_fn, and the message names no node.
w = torch.randn(3, requires_grad=True)
square = w * w  # saves w itself
with torch.no_grad():
    w.add_(1.0)
text = message_of(square.sum().backward)
assert "[torch.FloatTensor [3]] is at version" in text and "which is output" not in text
