import torch

torch.manual_seed(0)

x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)
y = torch.randn(2, 1)


def forward():
    h = (x @ W1).relu()
    return ((h @ W2) - y).pow(2).mean()


def nodes(loss):  # (1)!
    """Every node reachable from loss.grad_fn, in the order a depth-first walk meets them."""
    seen = []
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or any(node is s for s in seen):
            continue
        seen.append(node)
        stack.extend(next_node for next_node, _ in reversed(node.next_functions))
    return seen


loss_a = forward()
loss_b = forward()  # (2)!

a, b = nodes(loss_a), nodes(loss_b)
names = [type(n).__name__ for n in a]
assert names == [type(n).__name__ for n in b]
assert torch.equal(loss_a, loss_b)

computing = [(m, n) for m, n in zip(a, b, strict=True) if type(m).__name__ != "AccumulateGrad"]
leaves = [(m, n) for m, n in zip(a, b, strict=True) if type(m).__name__ == "AccumulateGrad"]
assert len(computing) == 6 and all(m is not n for m, n in computing)  # (3)!
assert len(leaves) == 2 and all(m is n for m, n in leaves)  # (4)!
assert {leaves[0][0].variable is W1, leaves[1][0].variable is W1} == {True, False}

print("same loss value:", torch.equal(loss_a, loss_b))
for node_a, node_b in zip(a, b, strict=True):
    name = type(node_a).__name__
    if name == "AccumulateGrad":
        name += "(W1)" if node_a.variable is W1 else "(W2)"
    print(f"{name:<19} same object in both graphs: {node_a is node_b}")
