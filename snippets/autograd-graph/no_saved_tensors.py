# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
loss = (w + b - 0.5).sum()  # (1)!

nodes, stack = [], [loss.grad_fn]
while stack:
    node = stack.pop()
    if node is not None and all(node is not n for n in nodes):
        nodes.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
for node in nodes:
    saved = [a for a in dir(node) if a.startswith("_raw_saved_")]  # (2)!
    print(f"{type(node).__name__:<15} saved_tensors: {saved}")

loss.backward()
loss.backward()  # (3)!
loss.backward()
print("backward_calls: 3 | retain_graph: False | w.grad:", w.grad)  # (4)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert len(nodes) == 5
assert all(not [a for a in dir(n) if a.startswith("_raw_saved_")] for n in nodes)
assert torch.equal(w.grad, torch.full((3,), 3.0))
assert torch.equal(b.grad, torch.full((3,), 3.0))
probe = (w * b).sum()
assert [a for a in dir(probe.grad_fn.next_functions[0][0]) if a.startswith("_raw_saved_")]  # (1)!
# --8<-- [end:proof]
