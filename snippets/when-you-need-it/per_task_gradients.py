# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(2)
trunk = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
head_a, head_b = nn.Linear(8, 1), nn.Linear(8, 1)
shared = list(trunk.parameters())
x, y_a, y_b = torch.randn(16, 4), torch.randn(16, 1), torch.randn(16, 1)

features = trunk(x)  # (1)!
loss_a = nn.functional.mse_loss(head_a(features), y_a)
loss_b = nn.functional.mse_loss(head_b(features), y_b)

g_a = torch.autograd.grad(loss_a, shared, retain_graph=True)  # (2)!
g_b = torch.autograd.grad(loss_b, shared)  # (3)!

flat_a = torch.cat([g.flatten() for g in g_a])
flat_b = torch.cat([g.flatten() for g in g_b])
dot = flat_a.dot(flat_b)
print("g_a . g_b:", round(dot.item(), 4))
if dot < 0:
    flat_a = flat_a - dot / flat_b.dot(flat_b) * flat_b  # (4)!
print("after_projection | g_a . g_b:", round(abs(flat_a.dot(flat_b).item()), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import weakref

original_a = torch.cat([g.flatten() for g in g_a])
assert dot < 0  # (1)!
assert abs(flat_a.dot(flat_b).item()) < 1e-6
assert not torch.allclose(flat_a, original_a)


def freed(node, name):
    try:
        getattr(node, name)
    except RuntimeError:
        return True
    return False


tanh_node = features.grad_fn  # (2)!
trunk_linear = tanh_node.next_functions[0][0]
assert type(tanh_node).__name__ == "TanhBackward0"
assert freed(tanh_node, "_saved_result") and freed(trunk_linear, "_saved_mat1")
head_b_linear = loss_b.grad_fn.next_functions[0][0]
assert freed(loss_b.grad_fn, "_saved_self") and freed(head_b_linear, "_saved_mat1")
head_a_linear = loss_a.grad_fn.next_functions[0][0]
assert type(loss_a.grad_fn).__name__ == "MseLossBackward0"
assert type(head_a_linear).__name__ == "AddmmBackward0"
assert not freed(loss_a.grad_fn, "_saved_self") and not freed(loss_a.grad_fn, "_saved_target")
assert not freed(head_a_linear, "_saved_mat1")
held = weakref.ref(loss_a.grad_fn._saved_self)
assert held() is not None
del loss_a
assert held() is None

features = trunk(x)
total = nn.functional.mse_loss(head_a(features), y_a) + nn.functional.mse_loss(
    head_b(features), y_b
)
g_sum = torch.autograd.grad(total, shared)  # (3)!
assert all(torch.allclose(s, a + b) for s, a, b in zip(g_sum, g_a, g_b, strict=True))

features = trunk(x)
loss_a = nn.functional.mse_loss(head_a(features), y_a)
loss_b = nn.functional.mse_loss(head_b(features), y_b)
torch.autograd.grad(loss_a, shared)  # (4)!
try:
    torch.autograd.grad(loss_b, shared)
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second call should have failed")
assert message.startswith("Trying to backward through the graph a second time")
# --8<-- [end:proof]
