# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)

loss = (w * x).exp().sum()
loss.backward()  # (1)!
try:
    loss.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
    print(message.replace(". ", ".\n"))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert message.startswith("Trying to backward through the graph a second time")
assert "Specify retain_graph=True" in message


def freed(node):
    try:
        _ = node._saved_result
    except RuntimeError:
        return True
    return False


assert freed(loss.grad_fn.next_functions[0][0])

probe = (w * x).exp().sum()
exp_node = probe.grad_fn.next_functions[0][0]
assert exp_node.name() == "ExpBackward0"
assert torch.equal(exp_node._saved_result, (w * x).exp()) and not freed(exp_node)  # (1)!
probe.backward()
assert freed(exp_node)  # (2)!
# --8<-- [end:proof]
