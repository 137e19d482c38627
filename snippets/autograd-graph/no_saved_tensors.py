import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
loss = (w + b - 0.5).sum()  # (1)!


def saved_tensors(node):
    return [a for a in dir(node) if a.startswith("_raw_saved_")]  # (2)!


seen, stack = [], [loss.grad_fn]
while stack:  # every node of the graph
    node = stack.pop()
    if node is not None and all(node is not s for s in seen):
        seen.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
assert len(seen) == 5 and all(saved_tensors(n) == [] for n in seen)

loss.backward()
loss.backward()  # (3)!
loss.backward()

assert torch.equal(w.grad, torch.full((3,), 3.0))  # (4)!
assert torch.equal(b.grad, torch.full((3,), 3.0))
for n in seen:
    print(f"{type(n).__name__:<15} saved tensors: {saved_tensors(n)}")
print("three backward calls, no retain_graph; w.grad =", w.grad)
