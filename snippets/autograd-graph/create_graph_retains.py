# --8<-- [start:lesson]
import warnings

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
loss = w.exp().sum()

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loss.backward(create_graph=True)  # (1)!
first = w.grad.detach().clone()
w.grad = None  # (2)!

loss.backward()  # (3)!
print("second_backward: ok | w.grad:", [round(g, 3) for g in w.grad.tolist()])
print("warning:", str(caught[0].message).split(".")[0] + ".")
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc  # noqa: E402
import weakref  # noqa: E402

assert torch.allclose(w.grad, first)
assert torch.allclose(first, w.exp().detach())  # (1)!
assert len(caught) == 1 and issubclass(caught[0].category, UserWarning)
assert "reference cycle" in str(caught[0].message)
assert "reset the .grad fields of your parameters to None" in str(caught[0].message)
probe = w.exp().sum()
probe.backward()
try:
    probe.backward()  # (2)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("without create_graph=True, the first backward frees the graph")

v = torch.randn(3, requires_grad=True)
with warnings.catch_warnings(record=True) as again:
    warnings.simplefilter("always")
    v.exp().sum().backward(create_graph=True)
still_there = weakref.ref(v)
del v
gc.collect()
assert again == [] and still_there() is not None  # (3)!
u = torch.randn(3, requires_grad=True)
u.exp().sum().backward()
freed = weakref.ref(u)
del u
assert freed() is None
# --8<-- [end:proof]
