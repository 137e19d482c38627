# --8<-- [start:lesson]
import weakref

import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(  # (1)!
    nn.Linear(1000, 500), nn.ReLU(), nn.Linear(500, 100), nn.ReLU(), nn.Linear(100, 10)
)
inputs, labels = torch.randn(3, 1000), torch.LongTensor([1, 0, 1])
refs = []


def pack(tensor):
    refs.append(weakref.ref(detached := tensor.detach()))  # (2)!
    return detached


def held():
    storages = [t.untyped_storage() for r in refs if (t := r()) is not None]  # (3)!
    return sum({s.data_ptr(): s.nbytes() for s in storages}.values())


for retain in (True, False):
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = nn.functional.cross_entropy(net(inputs), labels)
    before = held()
    loss.backward(retain_graph=retain)
    print(f"retain_graph={retain} | saved_bytes: {before} | held_after_backward: {held()}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
fc1, fc2, fc3 = net[0], net[2], net[4]
alive_anyway = {t.untyped_storage().data_ptr() for t in [*net.parameters(), inputs, labels]}


def held_split():
    storages = [t.untyped_storage() for r in refs if (t := r()) is not None]
    sizes = {s.data_ptr(): s.nbytes() for s in storages}
    return sum(sizes.values()), sum(n for p, n in sizes.items() if p not in alive_anyway)


def forward():
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        return nn.functional.cross_entropy(net(inputs), labels)


del loss
assert held_split() == (0, 0)
net.zero_grad()
loss = forward()
before = held_split()
assert before == (223348, 7324)  # (1)!
anyway = [inputs, labels, fc2.weight, fc3.weight]
assert before[0] - before[1] == sum(t.nbytes for t in anyway) == 216024
loss.backward(retain_graph=True)
assert held_split() == before
del loss  # (2)!
assert held_split() == (0, 0)
loss = forward()
loss.backward(retain_graph=True)
assert held_split() == before
loss.backward()
assert held_split() == (0, 0)
del loss
loss = forward()
loss.backward()
assert held_split() == (0, 0)

for retain in (True, False):  # (3)!
    loss = forward()
    loss.backward(retain_graph=retain)
    new_loss = forward()
    expected = (before[0] + before[1], 2 * before[1]) if retain else before
    assert held_split() == expected
    loss = new_loss
    loss.backward()
    del loss, new_loss
assert before[1] * 2 == 14648

node = fc1(inputs).grad_fn  # (4)!
assert type(node).__name__ == "AddmmBackward0" and node._saved_mat2 is None
node = fc1(inputs.clone().requires_grad_()).grad_fn
assert node._saved_mat2.data_ptr() == fc1.weight.data_ptr()
del node

relu_outputs = (3 * 500 + 3 * 100) * 4  # (5)!
partial = (inputs.nbytes + fc2.weight.nbytes + relu_outputs, relu_outputs)
assert relu_outputs == 7200
loss = forward()
torch.autograd.grad(loss, [fc3.weight])
assert held_split() == partial
loss = forward()
loss.backward(inputs=[fc3.weight])
assert held_split() == partial
net.zero_grad()
del loss
assert held_split() == (0, 0)
loss = forward()
torch.autograd.grad(loss, [fc1.bias])
assert held_split() == (0, 0)

loss = forward()
torch.autograd.grad(loss, [*net.parameters()], create_graph=True)  # (6)!
assert held_split() == before
loss.backward()
net.zero_grad()
assert held_split() == (0, 0)
del loss


class Triple(torch.autograd.Function):  # (7)!
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.kept = x.exp()
        return 3 * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * grad


out = Triple.apply(torch.randn(1000, requires_grad=True))
kept = weakref.ref(out.grad_fn.kept)
out.sum().backward()
try:
    _ = out.grad_fn.saved_tensors
    raise AssertionError("backward should have freed what save_for_backward saved")
except RuntimeError as error:
    assert "backward through the graph a second time" in str(error)
assert kept() is not None
del out
assert kept() is None
# --8<-- [end:proof]
