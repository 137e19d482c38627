import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
WIDTH, DEPTH, BATCH, CLASSES = 64, 6, 32, 10


class Handle:  # (1)!
    def __init__(self, meter, t):
        self.meter, self.t = meter, t.detach()  # same storage; no cycle through grad_fn
        self.key, self.size = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
        if meter.live.get(self.key, 0) == 0:  # each storage is counted once
            meter.current += self.size
            meter.peak = max(meter.peak, meter.current)
        meter.live[self.key] = meter.live.get(self.key, 0) + 1

    def __del__(self):  # (2)!
        self.meter.live[self.key] -= 1
        if self.meter.live[self.key] == 0:
            self.meter.current -= self.size


class Meter:
    def __init__(self, ignore):
        self.ignored = {t.untyped_storage().data_ptr() for t in ignore}
        self.live, self.current, self.peak = {}, 0, 0

    def pack(self, t):
        ignored = t.untyped_storage().data_ptr() in self.ignored
        return t if ignored else Handle(self, t)

    def unpack(self, packed):
        return packed if isinstance(packed, torch.Tensor) else packed.t


trunk = nn.Sequential(*(m for _ in range(DEPTH) for m in (nn.Linear(WIDTH, WIDTH), nn.Tanh())))
head1, head2 = nn.Linear(WIDTH, 1), nn.Linear(WIDTH, CLASSES)
x, y1 = torch.randn(BATCH, WIDTH), torch.randn(BATCH, 1)
y2 = torch.randint(0, CLASSES, (BATCH,))
params = [*trunk.parameters(), *head1.parameters(), *head2.parameters()]


def forward():
    z = trunk(x)
    return F.mse_loss(head1(z), y1), F.cross_entropy(head2(z), y2)


def retain():
    loss1, loss2 = forward()
    loss1.backward(retain_graph=True)
    loss2.backward()
    return loss1, loss2


def recompute():
    loss1 = forward()[0]
    loss1.backward()
    loss2 = forward()[1]
    loss2.backward()
    return loss1, loss2


def summed():
    loss1, loss2 = forward()
    (loss1 + loss2).backward()
    return loss1, loss2


def autograd_grad():
    loss1, loss2 = forward()
    g1 = torch.autograd.grad(loss1, params, retain_graph=True, materialize_grads=True)
    g2 = torch.autograd.grad(loss2, params, materialize_grads=True)
    for p, a, b in zip(params, g1, g2, strict=True):
        p.grad = a + b
    return loss1, loss2


def article():  # (3)!
    loss1 = forward()[0]
    loss1.backward(retain_graph=True)
    loss2 = forward()[1]
    loss2.backward()
    return loss1, loss2


held = {}
for step in (retain, recompute, summed, autograd_grad, article):
    meter = Meter(ignore=[*params, x, y1, y2])  # (4)!
    for p in params:
        p.grad = None
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
        kept = step()  # (5)!
        peak, after = meter.peak, meter.current
    del kept
    assert meter.current == 0  # every graph is gone with the losses
    held[step.__name__] = (peak, after)
    print(f"{step.__name__:14s} peak {peak:6d} B   held after the step {after:6d} B")

act = 4 * BATCH * WIDTH  # one float32 activation of the trunk, in bytes
graph = DEPTH * act + 4 * BATCH + 4 * BATCH * CLASSES + 4  # (6)!
assert held["summed"] == held["recompute"] == (graph, 0)
assert held["retain"] == held["autograd_grad"] == (graph, act + 4 * BATCH)
assert held["article"] == (graph + DEPTH * act + 4 * BATCH, DEPTH * act + 4 * BATCH)
print("one graph:", graph, "B")
