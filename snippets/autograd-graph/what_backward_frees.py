# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)
y = torch.randn(2, 1)

h = (x @ W1).relu()
loss = ((h @ W2) - y).pow(2).mean()
pow_node = loss.grad_fn.next_functions[0][0]  # (1)!
print("ReluBackward0._saved_result == h:", torch.equal(h.grad_fn._saved_result, h))  # (2)!
W1_before, W2_before = W1.detach().clone(), W2.detach().clone()
loss.backward()  # (3)!

print("PowBackward0_linked:", loss.grad_fn.next_functions[0][0] is pow_node)  # (4)!
print("PowBackward0._saved_exponent:", pow_node._saved_exponent)  # (5)!
print("params_unchanged:", torch.equal(W1, W1_before) and torch.equal(W2, W2_before))  # (6)!
print("W2.grad:", [round(g, 2) for g in W2.grad.flatten().tolist()])
try:
    _ = pow_node._saved_self  # (7)!
except RuntimeError as error:
    print("PowBackward0._saved_self:", str(error).split(" (")[0])
# --8<-- [end:lesson]


# --8<-- [start:proof]
def freed(node, attribute):
    try:
        getattr(node, attribute)
    except RuntimeError as error:
        return str(error).startswith("Trying to backward through the graph a second time")
    return False


def chain(node):
    names = []
    while node is not None:
        names.append(type(node).__name__)
        node = node.next_functions[0][0] if node.next_functions else None
    return names


assert type(pow_node).__name__ == "PowBackward0" and type(h.grad_fn).__name__ == "ReluBackward0"
assert freed(pow_node, "_saved_self") and freed(h.grad_fn, "_saved_result")  # (1)!
assert pow_node._saved_exponent == 2
assert torch.equal(W1, W1_before) and torch.equal(W2, W2_before)
g_W1, g_W2 = torch.autograd.grad(((x @ W1).relu() @ W2 - y).pow(2).mean(), [W1, W2])
assert torch.allclose(W1.grad, g_W1) and torch.allclose(W2.grad, g_W2)  # (2)!

h = (x @ W1).relu()
loss = ((h @ W2) - y).pow(2).mean()
relu_node, path_before = h.grad_fn, chain(loss.grad_fn)
assert not freed(relu_node, "_saved_result")
loss.backward()  # (3)!
assert h.grad_fn is relu_node and freed(relu_node, "_saved_result")
assert chain(loss.grad_fn) == path_before
assert path_before == [
    "MeanBackward0",
    "PowBackward0",
    "SubBackward0",
    "MmBackward0",
    "ReluBackward0",
    "MmBackward0",
]
# --8<-- [end:proof]
