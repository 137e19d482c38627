import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)

block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
x = torch.randn(2, 4, requires_grad=True)

messages = []
out = checkpoint(block, x, use_reentrant=True)  # (1)!
try:
    torch.autograd.grad(out.sum(), x)  # (2)!
except RuntimeError as error:
    messages.append(str(error))

out = checkpoint(block, x, use_reentrant=True)
try:
    out.sum().backward(inputs=[x])  # (3)!
except RuntimeError as error:
    messages.append(str(error))

assert len(messages) == 2 and messages[0] == messages[1]
assert messages[0].startswith(
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad()"
)
print(messages[0].replace(". ", ".\n"))
