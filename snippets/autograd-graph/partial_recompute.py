# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)

h = (x @ W1).relu()  # (1)!
loss_1 = (h @ W2).pow(2).mean()
loss_1.backward()

loss_2 = (h @ W2).pow(2).mean()  # (2)!
try:
    loss_2.backward()  # (3)!
except RuntimeError as error:
    message = str(error)
    print("recompute_head_only:", message.split(" (")[0])

h = (x @ W1).relu()  # (4)!
loss_3 = (h @ W2).pow(2).mean()
loss_3.backward()
print("recompute_from_leaves: ok")
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert loss_2.grad_fn is not loss_1.grad_fn
assert message.startswith("Trying to backward through the graph a second time")
g_W1, g_W2 = torch.autograd.grad(((x @ W1).relu() @ W2).pow(2).mean(), [W1, W2])
assert torch.allclose(W1.grad, 2 * g_W1, rtol=1e-6, atol=1e-7)  # (1)!
assert torch.allclose(W2.grad, 3 * g_W2, rtol=1e-6, atol=1e-7)

from torch.nn.utils import parametrize  # noqa: E402


class Exp(torch.nn.Module):
    def forward(self, weight):
        return weight.exp()


layer = torch.nn.Linear(3, 4)
parametrize.register_parametrization(layer, "weight", Exp())
with parametrize.cached():  # (2)!
    layer(x).pow(2).mean().backward()
    try:
        layer(x).pow(2).mean().backward()
    except RuntimeError as error:
        cached_message = str(error)
    else:
        raise AssertionError("the cached weight should lead back into the first graph")
assert cached_message.startswith("Trying to backward through the graph a second time")
layer(x).pow(2).mean().backward()
layer(x).pow(2).mean().backward()
# --8<-- [end:proof]
