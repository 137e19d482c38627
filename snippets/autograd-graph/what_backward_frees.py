import torch

torch.manual_seed(0)

x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)
y = torch.randn(2, 1)

h = (x @ W1).relu()
loss = ((h @ W2) - y).pow(2).mean()

pow_node = loss.grad_fn.next_functions[0][0]  # (1)!
relu_node = h.grad_fn
W1_before, W2_before = W1.detach().clone(), W2.detach().clone()
assert type(pow_node).__name__ == "PowBackward0"
assert type(relu_node).__name__ == "ReluBackward0"
assert torch.equal(relu_node._saved_result, h)  # (2)!


def chain(node):
    names = []
    while node is not None:
        names.append(type(node).__name__)
        node = node.next_functions[0][0] if node.next_functions else None
    return names


path_before = chain(loss.grad_fn)
loss.backward()  # (3)!

assert loss.grad_fn is not None and h.grad_fn is relu_node  # (4)!
assert chain(loss.grad_fn) == path_before
assert pow_node._saved_exponent == 2  # (5)!
assert torch.equal(W1, W1_before) and torch.equal(W2, W2_before)  # (6)!
assert W1.grad is not None and W2.grad is not None

for node, attribute in [(pow_node, "_saved_self"), (relu_node, "_saved_result")]:
    try:
        getattr(node, attribute)  # (7)!
    except RuntimeError as error:
        assert str(error).startswith("Trying to backward through the graph a second time")
        print(f"{type(node).__name__}.{attribute}: freed")
    else:
        raise AssertionError(f"{attribute} should have been freed")

print("nodes still walk:   ", " -> ".join(path_before))
print("PowBackward0._saved_exponent:", pow_node._saved_exponent)
print("parameters unchanged:", torch.equal(W1, W1_before) and torch.equal(W2, W2_before))
print("W2.grad:", W2.grad.flatten().round(decimals=4))
