# --8<-- [start:lesson]
import torch
from saved_bytes import SavedBytes  # (1)!
from torch import nn

trunk = nn.Sequential(*(m for _ in range(6) for m in (nn.Linear(64, 64), nn.Tanh())))
head1, head2 = nn.Linear(64, 1), nn.Linear(64, 10)
x, y1, y2 = torch.randn(32, 64), torch.randn(32, 1), torch.randint(0, 10, (32,))
keep = [*trunk.parameters(), *head1.parameters(), *head2.parameters(), x, y1, y2]  # (2)!


def losses():
    z = trunk(x)
    return nn.functional.mse_loss(head1(z), y1), nn.functional.cross_entropy(head2(z), y2)


with SavedBytes(*keep) as summed:
    loss1, loss2 = losses()
    (loss1 + loss2).backward()
print(f"summed  | peak: {summed.peak:6d} B | held_after_step: {summed.held():6d} B")  # (3)!
with SavedBytes(*keep) as retain:
    loss1, loss2 = losses()
    loss1.backward(retain_graph=True)
    loss2.backward()
print(f"retain  | peak: {retain.peak:6d} B | held_after_step: {retain.held():6d} B")
with SavedBytes(*keep) as article:  # (4)!
    loss1 = losses()[0]
    loss1.backward(retain_graph=True)
    loss2 = losses()[1]
    loss2.backward()
print(f"article | peak: {article.peak:6d} B | held_after_step: {article.held():6d} B")
# --8<-- [end:lesson]

# --8<-- [start:proof]
from saved_bytes import ReferenceMeter  # noqa: E402

BATCH, WIDTH, DEPTH, CLASSES = 32, 64, 6, 10
act = 4 * BATCH * WIDTH
graph = DEPTH * act + 4 * BATCH + 4 * BATCH * CLASSES + 4  # (1)!
assert summed.peak == retain.peak == graph
assert article.peak == graph + DEPTH * act + 4 * BATCH
assert article.held() == DEPTH * act + 4 * BATCH
params = keep[:-3]


def retain_step():
    loss1, loss2 = losses()
    loss1.backward(retain_graph=True)
    loss2.backward()
    return loss1, loss2


def recompute():
    loss1 = losses()[0]
    loss1.backward()
    loss2 = losses()[1]
    loss2.backward()
    return loss1, loss2


def summed_step():
    loss1, loss2 = losses()
    (loss1 + loss2).backward()
    return loss1, loss2


def autograd_grad():
    loss1, loss2 = losses()
    g1 = torch.autograd.grad(loss1, params, retain_graph=True, materialize_grads=True)
    g2 = torch.autograd.grad(loss2, params, materialize_grads=True)
    for p, a, b in zip(params, g1, g2, strict=True):
        p.grad = a + b
    return loss1, loss2


def article_step():
    loss1 = losses()[0]
    loss1.backward(retain_graph=True)
    loss2 = losses()[1]
    loss2.backward()
    return loss1, loss2


del loss1, loss2
held = {}
for step in (retain_step, recompute, summed_step, autograd_grad, article_step):
    for p in params:
        p.grad = None
    meter, reference = SavedBytes(*keep), ReferenceMeter(keep)
    with meter:
        kept = step()
        held[step.__name__] = (meter.peak, meter.held())
    del kept
    assert meter.held() == 0
    with torch.autograd.graph.saved_tensors_hooks(reference.pack, reference.unpack):
        kept = step()
        assert (reference.peak, reference.current) == held[step.__name__]  # (2)!
    del kept
assert held["summed_step"] == held["recompute"] == (graph, 0)  # (3)!
assert held["retain_step"] == held["autograd_grad"] == (graph, act + 4 * BATCH)  # (4)!
assert held["article_step"] == (graph + DEPTH * act + 4 * BATCH, DEPTH * act + 4 * BATCH)


def saved_storages(loss):
    nodes, seen, found = [loss.grad_fn], set(), set()
    while nodes:
        node = nodes.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        nodes += [n for n, _ in node.next_functions]
        for name in dir(node):
            value = getattr(node, name) if name.startswith("_saved_") else None
            if isinstance(value, torch.Tensor):
                found.add(value.untyped_storage().data_ptr())
    return found


with SavedBytes(*keep) as probe:
    loss1, loss2 = losses()
    found = saved_storages(loss1) | saved_storages(loss2)
assert found - probe.ignored == set(probe.live.keys())  # (5)!
# --8<-- [end:proof]
