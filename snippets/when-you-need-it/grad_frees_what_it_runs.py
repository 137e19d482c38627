# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)

h = (x @ W1).tanh()
loss = (h @ W2).pow(2).mean()

(grad_h,) = torch.autograd.grad(loss, h)  # (1)!
h.backward(grad_h)  # (2)!
print(f"grad_h_norm:  {grad_h.norm().item():.4g}")
print(f"W1.grad_norm: {W1.grad.norm().item():.4g}")
print("W2.grad:", W2.grad)
# --8<-- [end:lesson]

# --8<-- [start:proof]
try:
    torch.autograd.grad(loss, W2)  # (1)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the nodes between loss and h were freed by the first call")
assert message.startswith("Trying to backward through the graph a second time")

(reference,) = torch.autograd.grad((((x @ W1).tanh() @ W2).pow(2).mean()), W1)
assert torch.allclose(W1.grad, reference, rtol=1e-5, atol=1e-7)  # (2)!
assert W2.grad is None

h = (x @ W1).tanh()
loss = (h @ W2).pow(2).mean()
torch.autograd.grad(loss, h)
pow_node = loss.grad_fn.next_functions[0][0]  # (3)!
assert type(pow_node).__name__ == "PowBackward0"
try:
    _ = pow_node._saved_self
except RuntimeError:
    pass
else:
    raise AssertionError("PowBackward0 should have been freed")
mm_w2_node = pow_node.next_functions[0][0]
assert type(mm_w2_node).__name__ == "MmBackward0"
for name in ("_saved_self", "_saved_mat2"):
    try:
        getattr(mm_w2_node, name)
    except RuntimeError as error:
        assert str(error).startswith("Trying to backward through the graph a second time")
    else:
        raise AssertionError(f"MmBackward0.{name} should have been freed")
assert type(h.grad_fn).__name__ == "TanhBackward0"
assert torch.equal(h.grad_fn._saved_result, h)

h = (x @ W1).tanh()
loss = (h @ W2).pow(2).mean()
(expected_grad_h,) = torch.autograd.grad(loss, h, retain_graph=True)
assert torch.equal(h.grad_fn._saved_result, h)
W1_grad_before = W1.grad.clone()
loss.backward(inputs=[h])  # (4)!
assert torch.allclose(h.grad, expected_grad_h, rtol=1e-5, atol=1e-7)
try:
    _ = h.grad_fn._saved_result
except RuntimeError:
    pass
else:
    raise AssertionError("backward(inputs=[h]) should have freed TanhBackward0")
mm_node = h.grad_fn.next_functions[0][0]
assert type(mm_node).__name__ == "MmBackward0" and torch.equal(mm_node._saved_self, x)
assert torch.equal(W1.grad, W1_grad_before) and W2.grad is None
# --8<-- [end:proof]
