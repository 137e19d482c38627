import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
loss = (w * x).exp().sum()  # exp() saves its result for the backward pass

loss.backward()  # (1)!

try:
    loss.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second backward should have failed")

assert message.startswith("Trying to backward through the graph a second time")
assert "Specify retain_graph=True" in message
print(message.replace(". ", ".\n"))
