import weakref

# --8<-- [start:show]
import torch

torch.manual_seed(0)

x = torch.randn(3, requires_grad=True)
y = x.sin()  # sin() saves x for its backward
outputs = [y[0] * y[1], y[1] * y[2], y[2] * y[0]]

grads = []
for i, out in enumerate(outputs):
    last = i == len(outputs) - 1
    (g,) = torch.autograd.grad(out, x, retain_graph=not last)  # (1)!
    grads.append(g)
print("three gradients, one graph:", [g.shape for g in grads])

# Forget retain_graph on a call that is not the last, and the next call fails.
y = x.sin()
first, second = y[0] * y[1], y[1] * y[2]
torch.autograd.grad(first, x)  # (2)!
try:
    torch.autograd.grad(second, x)
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second call should have failed")
assert message.startswith("Trying to backward through the graph a second time")
print(message.split(" (")[0])
# --8<-- [end:show]

# What the last call of the loop freed, and what it did not. It ran, and freed, the node of
# sin() that all three outputs share and the node of its own product. The products of the first
# two outputs are not on its path: they keep their saved tensors until `outputs` is deleted.
sin_node = outputs[2].grad_fn.next_functions[0][0].next_functions[0][0]
assert type(sin_node).__name__ == "SinBackward0"


def freed(node, name):
    try:
        getattr(node, name)
    except RuntimeError:
        return True
    return False


assert freed(sin_node, "_saved_self") and freed(outputs[2].grad_fn, "_saved_self")
assert not freed(outputs[0].grad_fn, "_saved_self") and not freed(outputs[1].grad_fn, "_saved_self")
held = weakref.ref(outputs[0].grad_fn._saved_self)  # y[0], held by the first product's node
del outputs, out
assert held() is None  # deleting the outputs frees what the loop left behind
print("after the loop: sin() and the last product freed; the first two products held until del")
