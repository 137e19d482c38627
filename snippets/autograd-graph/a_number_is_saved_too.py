# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
loss = (2 * w).sum()  # (1)!
print("MulBackward0._saved_other:", repr(loss.grad_fn.next_functions[0][0]._saved_other))  # (2)!

loss.backward()
try:
    loss.backward()  # (3)!
except RuntimeError as error:
    message = str(error)
    print("second_backward:", message.split(" (")[0])
# --8<-- [end:lesson]

# --8<-- [start:proof]
mul = loss.grad_fn.next_functions[0][0]
assert type(mul).__name__ == "MulBackward0"
assert message.startswith("Trying to backward through the graph a second time")
probe = (2 * w).sum()
saved = probe.grad_fn.next_functions[0][0]._saved_other
assert saved.dim() == 0 and saved.item() == 2.0
# --8<-- [end:proof]
