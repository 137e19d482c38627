import copy

import torch

# --8<-- [start:shown]
import torch._functorch.config

torch._functorch.config.donated_buffer = False  # (1)!

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
reference = copy.deepcopy(model)  # runs eagerly, for the check below
compiled = torch.compile(model, backend="aot_eager")
x = torch.randn(16, 4)

compiled(x).pow(2).mean().backward()  # an ordinary step compiles the backward
model.zero_grad()

loss = compiled(x).pow(2).mean()
loss.backward(retain_graph=True)  # (2)!
loss.backward()
# --8<-- [end:shown]

eager_loss = reference(x).pow(2).mean()
eager_loss.backward(retain_graph=True)
eager_loss.backward()
for p, q in zip(model.parameters(), reference.parameters(), strict=True):
    assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7)
print("two backward passes through one compiled graph = eager mode's gradients:", True)
