# --8<-- [start:lesson]
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
    seen, stack = [], [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and all(node is not s for s in seen):
            seen.append(node)
            stack.extend(next_node for next_node, _ in reversed(node.next_functions))
    return seen


loss_a, loss_b = forward(), forward()  # (2)!
print("same_loss_value:", torch.equal(loss_a, loss_b))
for a, b in zip(nodes(loss_a), nodes(loss_b), strict=True):
    print(f"{type(a).__name__:<15} same_object: {a is b}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
a, b = nodes(loss_a), nodes(loss_b)
names = [type(n).__name__ for n in a]
assert names == [type(n).__name__ for n in b]
assert torch.equal(loss_a, loss_b)
computing = [(m, n) for m, n in zip(a, b, strict=True) if type(m).__name__ != "AccumulateGrad"]
leaves = [(m, n) for m, n in zip(a, b, strict=True) if type(m).__name__ == "AccumulateGrad"]
assert len(computing) == 6 and all(m is not n for m, n in computing)  # (1)!
assert len(leaves) == 2 and all(m is n for m, n in leaves)  # (2)!
assert leaves[0][0].variable is W1 and leaves[1][0].variable is W2
# --8<-- [end:proof]
