# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = x.sin()  # (1)!
outputs = [y[0] * y[1], y[1] * y[2], y[2] * y[0]]

grads = []
for i, out in enumerate(outputs):
    last = i == len(outputs) - 1
    (g,) = torch.autograd.grad(out, x, retain_graph=not last)  # (2)!
    grads.append(g)
print("grad_norms:", [round(g.norm().item(), 4) for g in grads])
# --8<-- [end:lesson]

# --8<-- [start:proof]
import weakref

for i, g in enumerate(grads):
    fresh = x.sin()
    (expected,) = torch.autograd.grad(
        [fresh[0] * fresh[1], fresh[1] * fresh[2], fresh[2] * fresh[0]][i], x
    )
    assert torch.equal(g, expected)  # (1)!

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

sin_node = outputs[2].grad_fn.next_functions[0][0].next_functions[0][0]  # (3)!
assert type(sin_node).__name__ == "SinBackward0"


def freed(node, name):
    try:
        getattr(node, name)
    except RuntimeError:
        return True
    return False


assert freed(sin_node, "_saved_self") and freed(outputs[2].grad_fn, "_saved_self")
assert not freed(outputs[0].grad_fn, "_saved_self")
assert not freed(outputs[1].grad_fn, "_saved_self")
held = weakref.ref(outputs[0].grad_fn._saved_self)  # (4)!
assert held() is not None
del outputs, out
assert held() is None
# --8<-- [end:proof]
