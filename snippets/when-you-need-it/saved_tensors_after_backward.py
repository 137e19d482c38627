# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = x.exp()  # (1)!
z = y.pow(2)
print("pow()_saved:", sorted(n for n in dir(z.grad_fn) if n.startswith("_saved_")))

z.sum().backward(retain_graph=True)  # (2)!
saved = z.grad_fn._saved_self  # (3)!
print("_saved_self:", *(f"{v:.4g}" for v in saved.tolist()))
z.sum().backward()  # (4)!
print("after backward() | _saved_exponent:", z.grad_fn._saved_exponent)  # (5)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert torch.equal(saved, y)  # (1)!
try:
    _ = z.grad_fn._saved_self  # (2)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the saved tensor should have been freed")
assert "after they have already been freed" in message
assert z.grad_fn._saved_exponent == 2

y2 = x.exp()
z2 = y2.pow(2)
z2.sum().backward(retain_graph=True)
assert torch.equal(z2.grad_fn._saved_self, y2)  # (3)!
assert torch.equal(y2.grad_fn._saved_result, y2)
# --8<-- [end:proof]
