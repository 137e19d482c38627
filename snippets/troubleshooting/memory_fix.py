# --8<-- [start:lesson]
import weakref

import torch

torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
held = weakref.WeakValueDictionary()


def pack(tensor):
    saved = tensor.detach()
    held[id(saved)] = saved
    return saved


total_loss, history = 0.0, []
with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved):
    for _ in range(5):
        loss = torch.tanh(model(torch.randn(32, 64))).mean()
        optimizer.zero_grad()
        loss.backward()  # (1)!
        optimizer.step()
        total_loss += loss.item()  # (2)!
        history.append(sum(t.nbytes for t in held.values()))
print("saved_bytes_per_step:", history)
print("isinstance(total_loss, float):", isinstance(total_loss, float))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert history == [0] * 5
assert type(total_loss) is float


def held_after_each_step(steps, retain_graph):  # (1)!
    history = []
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved):
        for _ in range(steps):
            loss = torch.tanh(model(torch.randn(32, 64))).mean()
            optimizer.zero_grad()
            loss.backward(retain_graph=retain_graph)
            optimizer.step()
            history.append(sum(t.nbytes for t in held.values()))
    return history


assert held_after_each_step(5, retain_graph=False) == [0] * 5
retained = held_after_each_step(5, retain_graph=True)
assert retained == [2 * 8192] * 5  # (2)!


def reachable(tensor):
    seen, todo = set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


total, nodes, saved = 0, [], []
with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved):
    for _ in range(5):
        loss = torch.tanh(model(torch.randn(32, 64))).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss  # (3)!
        nodes.append(reachable(total))
        saved.append(sum(t.nbytes for t in held.values()))
assert saved == [0] * 5 and nodes == [7, 12, 17, 22, 27]
# --8<-- [end:proof]
