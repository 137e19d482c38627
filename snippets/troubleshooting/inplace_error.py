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
