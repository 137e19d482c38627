import torch

torch.manual_seed(0)

x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)

# --8<-- [start:show]
h = (x @ W1).tanh()
loss = (h @ W2).pow(2).mean()

(grad_h,) = torch.autograd.grad(loss, h)  # (1)!
h.backward(grad_h)  # (2)!
print("backward from h, after grad(loss, h): ran")
try:
    torch.autograd.grad(loss, W2)  # (3)!
except RuntimeError as error:
    message = str(error)
# --8<-- [end:show]
else:
    raise AssertionError("the nodes between loss and h were freed by the first call")
assert message.startswith("Trying to backward through the graph a second time")
print("grad(loss, W2) afterwards:", message.split(" (")[0])

# The backward pass from h gave W1 the full chain-rule gradient, and never reached W2.
(reference,) = torch.autograd.grad((((x @ W1).tanh() @ W2).pow(2).mean()), W1)
assert torch.allclose(W1.grad, reference, rtol=1e-5, atol=1e-7)
assert W2.grad is None

# The same steps again, looking at the saved tensors after the first call.
h = (x @ W1).tanh()
loss = (h @ W2).pow(2).mean()
torch.autograd.grad(loss, h)
pow_node = loss.grad_fn.next_functions[0][0]
assert type(pow_node).__name__ == "PowBackward0"
try:
    _ = pow_node._saved_self  # a node between loss and h: run, and freed
except RuntimeError:
    pass
else:
    raise AssertionError("PowBackward0 should have been freed")
assert type(h.grad_fn).__name__ == "TanhBackward0"
assert torch.equal(h.grad_fn._saved_result, h)  # the node behind h: not run, still saved
print("after grad(loss, h): PowBackward0 freed, TanhBackward0 (behind h) still saved")

# backward(inputs=[h]) goes one node further than grad(loss, h): for a non-leaf input it also
# runs that tensor's own node, here TanhBackward0, and frees its saved tensors. The node behind
# it, the matrix product with W1, is still not run and keeps x.
h = (x @ W1).tanh()
loss = (h @ W2).pow(2).mean()
(expected_grad_h,) = torch.autograd.grad(loss, h, retain_graph=True)
assert torch.equal(h.grad_fn._saved_result, h)  # still saved before the backward call
W1_grad_before = W1.grad.clone()
loss.backward(inputs=[h])
assert torch.allclose(h.grad, expected_grad_h, rtol=1e-5, atol=1e-7)
try:
    _ = h.grad_fn._saved_result
except RuntimeError:
    pass
else:
    raise AssertionError("backward(inputs=[h]) should have freed TanhBackward0")
mm_node = h.grad_fn.next_functions[0][0]
assert type(mm_node).__name__ == "MmBackward0" and torch.equal(mm_node._saved_self, x)
assert torch.equal(W1.grad, W1_grad_before) and W2.grad is None  # no parameter was reached
print("after loss.backward(inputs=[h]): TanhBackward0 (h's own node) freed too, MmBackward0 kept")
