# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
encoder, decoder = nn.Linear(4, 8), nn.Linear(8, 4)
x = torch.randn(16, 4)

hidden = encoder(x).relu()  # (1)!
loss = decoder(hidden).pow(2).mean()
loss.backward(inputs=[hidden])  # (2)!
params = [*encoder.parameters(), *decoder.parameters()]
print("hidden.grad_norm:", round(hidden.grad.norm().item(), 4))
print("params_with_grad:", sum(p.grad is not None for p in params))
print("hidden.retains_grad:", hidden.retains_grad)  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
fresh = encoder(x).relu()
(expected,) = torch.autograd.grad(decoder(fresh).pow(2).mean(), fresh)
assert torch.equal(hidden.grad, expected)  # (1)!
assert all(p.grad is None for p in params)

hidden = encoder(x).relu()
loss = decoder(hidden).pow(2).mean()
assert not hidden.is_leaf and not hidden.retains_grad
loss.backward(inputs=[hidden], retain_graph=True)
assert hidden.retains_grad  # (2)!
first = hidden.grad.clone()
loss.backward()
assert torch.equal(hidden.grad, first + expected)  # (3)!
assert all(p.grad is not None for p in params)
# --8<-- [end:proof]
