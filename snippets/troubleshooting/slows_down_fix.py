import torch


def nodes_run_by(loss, **backward_kwargs):
    """Run loss.backward() and count the graph nodes it actually executes."""
    count = 0

    def one_more(grad_outputs):
        nonlocal count
        count += 1

    nodes, todo, handles = set(), [loss.grad_fn], []
    while todo:  # walk the graph that this backward will traverse
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
        x = torch.randn(16, 4)
        features = model(x)
        running_mean = 0.9 * running_mean.detach() + 0.1 * features.mean(0)  # (1)!
        loss = (features - running_mean).pow(2).mean()
        optimizer.zero_grad()
        counts.append(nodes_run_by(loss, retain_graph=retain_graph))
        optimizer.step()
    return counts


counts = train(6, retain_graph=False)  # (2)!
print("nodes run by each backward:", counts)
assert counts == [counts[0]] * 6  # (3)!
