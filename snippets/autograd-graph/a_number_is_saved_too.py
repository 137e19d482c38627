import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
loss = (2 * w).sum()  # (1)!

mul = loss.grad_fn.next_functions[0][0]
assert type(mul).__name__ == "MulBackward0"
saved = mul._saved_other  # (2)!
assert saved.dim() == 0 and saved.item() == 2.0
print("MulBackward0 saved:", repr(saved))

loss.backward()
try:
    loss.backward()  # (3)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
    print("second backward:", str(error).split(" (")[0])
else:
    raise AssertionError("the second backward should have failed")
