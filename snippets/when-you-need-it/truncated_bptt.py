import torch
from torch import nn

torch.manual_seed(0)

cell = nn.RNNCell(3, 8)
head = nn.Linear(8, 1)
params = [*cell.parameters(), *head.parameters()]
data = torch.randn(4, 5, 2, 3)  # 4 training steps, each a chunk of 5 time steps


def reachable(loss):
    """Every node the backward pass of ``loss`` can reach, found from loss.grad_fn."""
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return seen


def backward_counting(loss, **kwargs):
    """Run loss.backward() and count the graph nodes it really executes."""
    executed = []
    handles = [n.register_prehook(lambda g, n=n: executed.append(n)) for n in reachable(loss)]
    loss.backward(**kwargs)
    for h in handles:
        h.remove()
    return len(executed)


def train(detach):
    counts = []
    h = torch.zeros(2, 8)
    for chunk in data:
        if detach:
            h = h.detach()  # (1)!
        for x_t in chunk:
            h = cell(x_t, h)
        loss = head(h).pow(2).mean()
        counts.append(backward_counting(loss, retain_graph=not detach))  # (2)!
    return counts


detached, retained = train(detach=True), train(detach=False)
print("nodes executed per backward, h.detach():        ", detached)
print("nodes executed per backward, retain_graph=True: ", retained)
assert len(set(detached)) == 1  # the same work at every step
growth = [b - a for a, b in zip(retained[:-1], retained[1:], strict=True)]
assert retained[0] == detached[0] and growth == [growth[0]] * len(growth) and growth[0] > 0
print("extra nodes each step walks back through:", growth[0])

# Without detach and without retain_graph, the second step fails outright.
h = torch.zeros(2, 8)
try:
    for chunk in data:
        for x_t in chunk:
            h = cell(x_t, h)
        head(h).pow(2).mean().backward()
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second chunk should have failed")
assert message.startswith("Trying to backward through the graph a second time")
print("no detach, no retain_graph:", message.split(" (")[0])

# With retain_graph=True and an optimizer step between chunks, the old graph is stale.
opt = torch.optim.SGD(params, lr=0.1)
h = torch.zeros(2, 8)
try:
    for chunk in data:
        for x_t in chunk:
            h = cell(x_t, h)
        opt.zero_grad()
        head(h).pow(2).mean().backward(retain_graph=True)
        opt.step()  # (3)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second chunk should have failed")
assert "modified by an inplace operation" in message
print("retain_graph=True + opt.step():", message.split(":")[0])
