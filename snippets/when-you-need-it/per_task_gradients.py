import torch
from torch import nn

torch.manual_seed(2)

trunk = nn.Sequential(nn.Linear(4, 8), nn.Tanh())  # shared by both tasks
head_a, head_b = nn.Linear(8, 1), nn.Linear(8, 1)
shared = list(trunk.parameters())

x = torch.randn(16, 4)
y_a = torch.randn(16, 1)
y_b = torch.randn(16, 1)

features = trunk(x)  # (1)!
loss_a = nn.functional.mse_loss(head_a(features), y_a)
loss_b = nn.functional.mse_loss(head_b(features), y_b)

g_a = torch.autograd.grad(loss_a, shared, retain_graph=True)  # (2)!
g_b = torch.autograd.grad(loss_b, shared)  # (3)!

flat_a = torch.cat([g.flatten() for g in g_a])
flat_b = torch.cat([g.flatten() for g in g_b])
dot = torch.dot(flat_a, flat_b)
print("g_a . g_b =", round(dot.item(), 4))
assert dot < 0  # the two tasks pull the shared layer in conflicting directions

# PCGrad: when they conflict, remove from g_a its component along g_b.
projected = flat_a - dot / flat_b.dot(flat_b) * flat_b  # (4)!
print("after projection:", round(abs(projected.dot(flat_b).item()), 4))
assert abs(projected.dot(flat_b).item()) < 1e-6

# The same two gradients, added, are what one backward of the summed loss gives.
features = trunk(x)
total = nn.functional.mse_loss(head_a(features), y_a) + nn.functional.mse_loss(
    head_b(features), y_b
)
g_sum = torch.autograd.grad(total, shared)
assert all(torch.allclose(s, a + b) for s, a, b in zip(g_sum, g_a, g_b, strict=True))
print("g_a + g_b equals the gradient of loss_a + loss_b:", True)

# Without retain_graph=True on the first call, the second finds the trunk's graph freed.
features = trunk(x)
loss_a = nn.functional.mse_loss(head_a(features), y_a)
loss_b = nn.functional.mse_loss(head_b(features), y_b)
torch.autograd.grad(loss_a, shared)
try:
    torch.autograd.grad(loss_b, shared)
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second call should have failed")
assert message.startswith("Trying to backward through the graph a second time")
print("without retain_graph=True:", message.split(" (")[0])
