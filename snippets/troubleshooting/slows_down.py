# --8<-- [start:lesson]
import torch


def graph_size(loss):  # (1)!
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


torch.manual_seed(0)
model = torch.nn.Linear(4, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
running_mean, sizes = torch.zeros(8), []
for _ in range(6):
    features = model(torch.randn(16, 4))
    running_mean = 0.9 * running_mean + 0.1 * features.mean(0)  # (2)!
    loss = (features - running_mean).pow(2).mean()
    optimizer.zero_grad()
    sizes.append(graph_size(loss))
    loss.backward(retain_graph=True)  # (3)!
    optimizer.step()
print("nodes_walked_per_backward:", sizes)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import itertools


def nodes_run_by(loss, **backward_kwargs):  # (1)!
    count = 0

    def one_more(grad_outputs):
        nonlocal count
        count += 1

    nodes, todo, handles = set(), [loss.grad_fn], []
    while todo:
        node = todo.pop()
        if node is None or node in nodes:
            continue
        nodes.add(node)
        handles.append(node.register_prehook(one_more))
        todo.extend(next_node for next_node, _ in node.next_functions)
    loss.backward(**backward_kwargs)
    for handle in handles:
        handle.remove()
    return count


def train(steps, retain_graph):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    running_mean = torch.zeros(8)
    counts = []
    for _ in range(steps):
        features = model(torch.randn(16, 4))
        running_mean = 0.9 * running_mean + 0.1 * features.mean(0)
        loss = (features - running_mean).pow(2).mean()
        optimizer.zero_grad()
        counts.append(nodes_run_by(loss, retain_graph=retain_graph))
        optimizer.step()
    return counts


try:
    train(2, retain_graph=False)  # (2)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("the second step should have failed")

assert train(6, retain_graph=True) == sizes  # (3)!
growth = [b - a for a, b in itertools.pairwise(sizes)]
assert len(set(growth)) == 1 and growth[0] > 0  # (4)!
# --8<-- [end:proof]
