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
    print(f"chunk: {step} | loss: {loss.item():.4f}")
# --8<-- [end:lesson]


# --8<-- [start:proof]
import copy
import unittest.mock


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


def two_chunks_retained(update):  # (6)!
    net = copy.deepcopy(nn.ModuleList([cell, head]))
    before = copy.deepcopy(net)
    h = torch.zeros(2, 8)
    for i in range(2):
        for x_t in data[i]:
            h = net[0](x_t, h)
        net.zero_grad()
        net[1](h).pow(2).mean().backward(retain_graph=True)
        if i == 0:
            update(list(net.parameters()))
    return [p.grad for p in net.parameters()], before, net


def grad_with(first, second):
    h = torch.zeros(2, 8)
    for net, chunk in ((first, data[0]), (second, data[1])):
        for x_t in chunk:
            h = net[0](x_t, h)
    params = [*first.parameters(), *second.parameters()]
    grads = torch.autograd.grad(second[1](h).pow(2).mean(), params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True)]
    if first is second:
        return grads[: len(grads) // 2]
    return [a + b for a, b in zip(grads[: len(grads) // 2], grads[len(grads) // 2 :], strict=True)]


def far(grads, reference):
    return max((g - r).abs().max().item() for g, r in zip(grads, reference, strict=True)) > 1e-4


def through_data(params):
    for p in params:
        p.data.add_(p.grad, alpha=-5.0)


def through_numpy(params):
    for p in params:
        p.detach().numpy()[...] -= 5.0 * p.grad.numpy()


def through_dlpack(params):
    for p in params:
        torch.from_dlpack(p.detach()).add_(p.grad, alpha=-5.0)


def through_storage(params):
    for p in params:
        p.untyped_storage().copy_((p - 5.0 * p.grad).detach().untyped_storage())


fused = lambda ps: torch.optim.SGD(ps, lr=5.0, fused=True).step()  # noqa: E731
for update in (fused, through_data, through_numpy, through_dlpack, through_storage):
    grads, before, after = two_chunks_retained(update)  # (7)!
    assert far(grads, grad_with(before, after)) and far(grads, grad_with(after, after))

try:
    two_chunks_retained(lambda ps: torch.optim.SGD(ps, lr=5.0, foreach=True).step())  # (8)!
except RuntimeError as error:
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("foreach=True should have raised the in-place error")


def assign(params):
    vector = torch.nn.utils.parameters_to_vector(params)
    vector = vector - 5.0 * torch.nn.utils.parameters_to_vector([p.grad for p in params])
    torch.nn.utils.vector_to_parameters(vector, params)


grads, before, after = two_chunks_retained(assign)  # (9)!
assert not far(grads, grad_with(before, after))
assert far(grads, grad_with(before, before)) and far(grads, grad_with(after, after))


def saves_weight(self, x, h):  # (10)!
    hidden = (h.unsqueeze(1) * self.weight_hh).sum(-1)
    return torch.tanh(x @ self.weight_ih.T + self.bias_ih + hidden + self.bias_hh)


with unittest.mock.patch.object(nn.RNNCell, "forward", saves_weight):
    grads, before, after = two_chunks_retained(assign)
    assert far(grads, grad_with(before, after)) and far(grads, grad_with(after, after))
    in_place = two_chunks_retained(through_data)[0]
    assert not far(grads, in_place)
# --8<-- [end:proof]
