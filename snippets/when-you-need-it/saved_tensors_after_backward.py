import torch

torch.manual_seed(0)

x = torch.randn(3, requires_grad=True)
y = x.exp()  # ExpBackward0 saves its result
z = y.pow(2)  # PowBackward0 saves its input and the exponent
print("saved by pow():", sorted(n for n in dir(z.grad_fn) if n.startswith("_saved_")))

z.sum().backward(retain_graph=True)  # (1)!
assert torch.equal(z.grad_fn._saved_self, y)  # (2)!
assert torch.equal(y.grad_fn._saved_result, y)
print("after backward(retain_graph=True):", z.grad_fn._saved_self.detach().round(decimals=4))

z.sum().backward()  # (3)!
try:
    print(z.grad_fn._saved_self)
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the saved tensor should have been freed")
assert "after they have already been freed" in message
assert z.grad_fn._saved_exponent == 2  # (4)!
print("after a plain backward:", message.split(". ")[0] + ".")
print("plain numbers are kept:", z.grad_fn._saved_exponent)
