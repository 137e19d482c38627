import gc
import inspect
import warnings
import weakref

import torch

torch.manual_seed(0)


def train_step(how):
    w = torch.randn(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = (w**3).sum()
        if how == "autograd.grad":
            (g,) = torch.autograd.grad(loss, w, create_graph=True)  # (1)!
            del g
        else:
            loss.backward(create_graph=True)  # (2)!
            if how == "backward, then .grad = None":
                w.grad = None  # (3)!
    alive = weakref.ref(w)
    del w, loss
    gc.collect()
    return caught, alive() is not None


caught, leaked = train_step("backward")
assert len(caught) == 1 and caught[0].category is UserWarning
message = str(caught[0].message)
assert message.startswith(
    "Using backward() with create_graph=True will create a reference cycle"
)
assert "make sure to reset the .grad fields of your parameters to None" in message
print("UserWarning:", message.split(" (Triggered")[0].replace(". ", ".\n  "))
print()

assert leaked  # even gc.collect() cannot free it: the cycle runs through C++ objects
print("backward(create_graph=True):  parameter still alive after del + gc:", leaked)

for how in ("backward, then .grad = None", "autograd.grad"):
    caught, leaked = train_step(how)
    assert not leaked
    print(f"{how + ':':29} parameter still alive after del + gc:", leaked)
assert not caught  # the last run, torch.autograd.grad, gave no warning

# optimizer.zero_grad() sets .grad to None by default, which also breaks the cycle.
assert inspect.signature(torch.optim.Optimizer.zero_grad).parameters["set_to_none"].default
