import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
out = w.exp()  # (1)!
loss = out.sum()
loss.backward()


def message_of(action):
    try:
        action()
    except RuntimeError as error:
        return str(error)
    raise AssertionError("expected a RuntimeError")


second_backward = message_of(lambda: loss.backward())  # (2)!
read_saved = message_of(lambda: out.grad_fn._saved_result)  # (3)!

assert second_backward == read_saved  # (4)!
assert second_backward.startswith(
    "Trying to backward through the graph a second time "
    "(or directly access saved tensors after they have already been freed)."
)
assert "Specify retain_graph=True" in second_backward
print(read_saved.replace(". ", ".\n"))
