import torch

torch.manual_seed(0)

x = torch.randn(3, requires_grad=True)
y = x.sin()  # sin() saves x for its backward
outputs = [y[0] * y[1], y[1] * y[2], y[2] * y[0]]

grads = []
for i, out in enumerate(outputs):
    last = i == len(outputs) - 1
    (g,) = torch.autograd.grad(out, x, retain_graph=not last)  # (1)!
    grads.append(g)
print("three gradients, one graph:", [g.shape for g in grads])

# Forget retain_graph on a call that is not the last, and the next call fails.
y = x.sin()
first, second = y[0] * y[1], y[1] * y[2]
torch.autograd.grad(first, x)  # (2)!
try:
    torch.autograd.grad(second, x)
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second call should have failed")
assert message.startswith("Trying to backward through the graph a second time")
print(message.split(" (")[0])
