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
print("nodes_walked_per_backward:", sizes)
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


def gradients(detach):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    running_mean, grads = torch.zeros(8), []
    for _ in range(6):
        features = model(torch.randn(16, 4))
        carried = running_mean.detach() if detach else running_mean
        running_mean = 0.9 * carried + 0.1 * features.mean(0)
        loss = (features - running_mean).pow(2).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=not detach)
        grads.append([p.grad.clone() for p in model.parameters()])
        optimizer.step()
    return grads


gaps = [
    max((a - b).abs().max().item() for a, b in zip(cut, kept, strict=True))
    for cut, kept in zip(gradients(detach=True), gradients(detach=False), strict=True)
]
assert gaps[0] < 1e-6 and min(gaps[1:]) > 1e-3, gaps  # (4)!
# --8<-- [end:proof]
