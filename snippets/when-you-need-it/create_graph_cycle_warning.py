# --8<-- [start:lesson]
import warnings

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    (g,) = torch.autograd.grad((w**3).sum(), w, create_graph=True)  # (1)!
    print("torch.autograd.grad(create_graph=True) | warnings:", len(caught))
    (w**3).sum().backward(create_graph=True)  # (2)!
    print("backward(create_graph=True)            | warnings:", len(caught))
message = str(caught[0].message).split(" (Triggered")[0]
print(caught[0].category.__name__ + ":", message.replace(". ", ".\n  "))
w.grad = None  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc
import inspect
import weakref

assert len(caught) == 1 and caught[0].category is UserWarning
assert message.startswith("Using backward() with create_graph=True will create a reference cycle")
assert "make sure to reset the .grad fields of your parameters to None" in message
assert "Triggered internally at" in str(caught[0].message)
assert "torch/csrc/autograd/engine.cpp" in str(caught[0].message)


def cycle_warnings(loss):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss.backward(create_graph=True)
    return sum("will create a reference cycle" in str(w.message) for w in caught)


cubic, linear = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
c = torch.randn(3)
assert cycle_warnings((cubic**3).sum()) == 0  # (1)!
assert cubic.grad.requires_grad
warn_always = torch.is_warn_always_enabled()
torch.set_warn_always(True)
try:
    assert cycle_warnings((linear * c).sum()) == 1  # (2)!
finally:
    torch.set_warn_always(warn_always)
assert not linear.grad.requires_grad and linear.grad.grad_fn is None

node = cubic.grad.grad_fn  # (3)!
while type(node).__name__ != "PowBackward0":
    node = next(parent for parent, _ in node.next_functions if parent is not None)
assert node._saved_self is cubic


def parameter_leaks(how):
    w = torch.randn(3, requires_grad=True)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        loss = (w * torch.randn(3)).sum() if how == "linear" else (w**3).sum()
        if how == "autograd.grad":
            (g,) = torch.autograd.grad(loss, w, create_graph=True)
            del g
        else:
            loss.backward(create_graph=True)
            if how == "backward, then .grad = None":
                w.grad = None
    alive = weakref.ref(w)
    del w, loss
    gc.collect()
    return alive() is not None


assert parameter_leaks("backward")  # (4)!
assert not parameter_leaks("backward, then .grad = None")  # (5)!
assert not parameter_leaks("autograd.grad")  # (6)!
assert not parameter_leaks("linear")

assert inspect.signature(torch.optim.Optimizer.zero_grad).parameters["set_to_none"].default  # (7)!
# --8<-- [end:proof]
