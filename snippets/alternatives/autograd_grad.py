# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
layer1, layer2 = nn.Linear(4, 8), nn.Linear(8, 1)
params = [*layer1.parameters(), *layer2.parameters()]
x = torch.randn(16, 4)

hidden = layer1(x).tanh()
loss = layer2(hidden).pow(2).mean()
g_hidden, *g_params = torch.autograd.grad(loss, [hidden, *params])  # (1)!
print("g_hidden.shape:", tuple(g_hidden.shape), "| norm:", round(g_hidden.norm().item(), 4))
print("g_params_shapes:", [tuple(g.shape) for g in g_params])
print("all_p.grad_None:", all(p.grad is None for p in params))  # (2)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert all(p.grad is None for p in params)
hidden = layer1(x).tanh()
loss = layer2(hidden).pow(2).mean()
(g_hidden_retain,) = torch.autograd.grad(loss, hidden, retain_graph=True)  # (1)!
loss.backward()
g_params_retain = [p.grad for p in params]

assert torch.allclose(g_hidden, g_hidden_retain)  # (2)!
assert all(torch.allclose(a, b) for a, b in zip(g_params, g_params_retain, strict=True))
# --8<-- [end:proof]
