# --8<-- [start:lesson]
import torch


def graph_size(loss):
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
    running_mean = 0.9 * running_mean.detach() + 0.1 * features.mean(0)  # (1)!
    loss = (features - running_mean).pow(2).mean()
    optimizer.zero_grad()
    sizes.append(graph_size(loss))
    loss.backward()  # (2)!
    optimizer.step()
print("graph nodes each backward pass walks:", sizes)
# --8<-- [end:lesson]


# --8<-- [start:proof]
def nodes_run_by(loss):  # (1)!
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
    loss.backward()
    for handle in handles:
        handle.remove()
    return count


torch.manual_seed(0)
model = torch.nn.Linear(4, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
running_mean, counts = torch.zeros(8), []
for _ in range(6):
    features = model(torch.randn(16, 4))
    running_mean = 0.9 * running_mean.detach() + 0.1 * features.mean(0)
    loss = (features - running_mean).pow(2).mean()
    optimizer.zero_grad()
    counts.append(nodes_run_by(loss))
    optimizer.step()
assert counts == sizes  # (2)!
assert sizes == [sizes[0]] * 6  # (3)!
# --8<-- [end:proof]
