# --8<-- [start:lesson]
import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
x = torch.randn(2, 4, requires_grad=True)

out = checkpoint(block, x, use_reentrant=True)  # (1)!
try:
    torch.autograd.grad(out.sum(), x)  # (2)!
except RuntimeError as error:
    by_grad = str(error)
    print(by_grad.replace(". ", ".\n"))

out = checkpoint(block, x, use_reentrant=True)
try:
    out.sum().backward(inputs=[x])  # (3)!
except RuntimeError as error:
    by_inputs = str(error)
    print("backward(inputs=[x]) | same_message:", by_inputs == by_grad)
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert by_inputs == by_grad
assert by_grad.startswith(
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad()"
)
# --8<-- [end:proof]
