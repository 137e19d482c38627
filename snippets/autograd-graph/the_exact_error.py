# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
out = w.exp()  # (1)!
loss = out.sum()
loss.backward()

try:
    loss.backward()  # (2)!
except RuntimeError as error:
    second_backward = str(error)
try:
    _ = out.grad_fn._saved_result  # (3)!
except RuntimeError as error:
    read_saved = str(error)
print("same_message:", second_backward == read_saved)  # (4)!
print(read_saved.replace(". ", ".\n"))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert second_backward == read_saved
assert second_backward.startswith(
    "Trying to backward through the graph a second time "
    "(or directly access saved tensors after they have already been freed)."
)
assert "Specify retain_graph=True" in second_backward
assert type(out.grad_fn).__name__ == "ExpBackward0"
probe = w.exp()
assert torch.equal(probe.grad_fn._saved_result, probe)  # (1)!
# --8<-- [end:proof]
