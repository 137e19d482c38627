import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
loss = (w * x).exp().sum()  # exp() saves its result for the backward pass
exp_node = loss.grad_fn.next_functions[0][0]
assert exp_node.name() == "ExpBackward0"
assert torch.equal(exp_node._saved_result, (w * x).exp())  # still there before backward

loss.backward()  # (1)!

try:
    _ = exp_node._saved_result
except RuntimeError:
    print("exp()'s saved result freed by the first backward: True")
else:
    raise AssertionError("the first backward should have freed exp()'s saved result")

try:
    loss.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second backward should have failed")

assert message.startswith("Trying to backward through the graph a second time")
assert "Specify retain_graph=True" in message
print(message.replace(". ", ".\n"))
