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
assert torch.allclose(w.grad, first)

assert len(caught) == 1 and issubclass(caught[0].category, UserWarning)
assert "reference cycle" in str(caught[0].message)
assert "reset the .grad fields of your parameters to None" in str(caught[0].message)
print("second backward ran; w.grad =", w.grad.round(decimals=4))
print("warning:", str(caught[0].message).split(".")[0] + ".")
