import torch
from torch import nn

torch.manual_seed(0)

layer1, layer2 = nn.Linear(4, 8), nn.Linear(8, 1)
x = torch.randn(16, 4)

# With retain_graph: the gradient for an activation first, then backward for training.
hidden = layer1(x).tanh()
loss = layer2(hidden).pow(2).mean()
(g_hidden_1,) = torch.autograd.grad(loss, hidden, retain_graph=True)  # (1)!
loss.backward()
g_params_1 = [p.grad.clone() for p in (*layer1.parameters(), *layer2.parameters())]

# Instead: one call that returns every gradient you ask for, activation included.
params = [*layer1.parameters(), *layer2.parameters()]
for p in params:
    p.grad = None
hidden = layer1(x).tanh()
loss = layer2(hidden).pow(2).mean()
g_hidden_2, *g_params_2 = torch.autograd.grad(loss, [hidden, *params])  # (2)!

assert all(p.grad is None for p in params)  # returned, not accumulated into .grad
assert torch.allclose(g_hidden_1, g_hidden_2)
same = all(torch.allclose(a, b) for a, b in zip(g_params_1, g_params_2, strict=True))
assert same
print("same activation gradient:", torch.allclose(g_hidden_1, g_hidden_2))
print("same parameter gradients:", same)
print("shapes:", tuple(g_hidden_2.shape), [tuple(g.shape) for g in g_params_2])
print(".grad of every parameter still None:", all(p.grad is None for p in params))
