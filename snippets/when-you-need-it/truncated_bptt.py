# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
cell = nn.RNNCell(3, 8)
head = nn.Linear(8, 1)
opt = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
data = torch.randn(4, 5, 2, 3)  # (1)!

h = torch.zeros(2, 8)
for step, chunk in enumerate(data):
    h = h.detach()  # (2)!
    for x_t in chunk:
        h = cell(x_t, h)
    loss = head(h).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"chunk {step}: loss {loss.item():.4f}")
# --8<-- [end:lesson]


# --8<-- [start:proof]
def reachable(loss):  # (1)!
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return seen


def backward_counting(loss, **kwargs):  # (2)!
    executed = []
    handles = [n.register_prehook(lambda g, n=n: executed.append(n)) for n in reachable(loss)]
    loss.backward(**kwargs)
    for handle in handles:
        handle.remove()
    return len(executed)


def nodes_run_per_step(detach):
    counts = []
    h = torch.zeros(2, 8)
    for chunk in data:
        if detach:
            h = h.detach()
        for x_t in chunk:
            h = cell(x_t, h)
        loss = head(h).pow(2).mean()
        counts.append(backward_counting(loss, retain_graph=not detach))
    return counts


assert nodes_run_per_step(detach=True) == [40, 40, 40, 40]  # (3)!
assert nodes_run_per_step(detach=False) == [40, 70, 100, 130]

h = torch.zeros(2, 8)
try:
    for chunk in data:
        for x_t in chunk:
            h = cell(x_t, h)
        head(h).pow(2).mean().backward()  # (4)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second chunk should have failed")
assert message.startswith("Trying to backward through the graph a second time")

h = torch.zeros(2, 8)
try:
    for chunk in data:
        for x_t in chunk:
            h = cell(x_t, h)
        opt.zero_grad()
        head(h).pow(2).mean().backward(retain_graph=True)
        opt.step()  # (5)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second chunk should have failed")
assert "modified by an inplace operation" in message
# --8<-- [end:proof]
