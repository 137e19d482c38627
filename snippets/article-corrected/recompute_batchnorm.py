# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(10, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
inputs, labels = torch.randn(3, 10), torch.LongTensor([1, 0, 1])

nn.functional.cross_entropy(net(inputs), labels).backward()
saved = [buffer.clone() for buffer in net.buffers()]  # (1)!
loss = nn.functional.cross_entropy(net(inputs), labels)
loss.backward()
for buffer, value in zip(net.buffers(), saved, strict=True):  # (2)!
    buffer.copy_(value)
print("num_batches_tracked:", net[1].num_batches_tracked.item())
print("running_mean:", net[1].running_mean.numpy().round(4))
# --8<-- [end:lesson]


# --8<-- [start:proof]
def new_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))


def run(how):
    net = new_net()
    loss = nn.functional.cross_entropy(net(inputs), labels)
    if how == "retain":  # (1)!
        loss.backward(retain_graph=True)
        loss.backward()
        return net
    loss.backward()
    if how == "eval":  # (2)!
        net.eval()
    if how == "keep buffers":
        saved = [buffer.clone() for buffer in net.buffers()]
    nn.functional.cross_entropy(net(inputs), labels).backward()
    if how == "keep buffers":
        for buffer, value in zip(net.buffers(), saved, strict=True):
            buffer.copy_(value)
    net.train()
    return net


def compare(net, reference):
    grads = zip(net.parameters(), reference.parameters(), strict=True)
    buffers = zip(net.buffers(), reference.buffers(), strict=True)
    max_diff = max((a.grad - b.grad).abs().max().item() for a, b in grads)
    return max_diff, all(torch.equal(a, b) for a, b in buffers)


reference = run("retain")
assert reference[1].num_batches_tracked == 1
assert run("plain")[1].num_batches_tracked == 2
assert compare(run("plain"), reference) == (0.0, False)  # (3)!
max_diff, same_buffers = compare(run("eval"), reference)
assert max_diff > 0.1 and abs(max_diff - 0.21) < 0.005 and same_buffers  # (4)!
assert compare(run("keep buffers"), reference) == (0.0, True)
assert compare(net, reference) == (0.0, True)

net = new_net()
nn.functional.cross_entropy(net(inputs), labels).backward()
saved = [buffer.clone() for buffer in net.buffers()]
loss = nn.functional.cross_entropy(net(inputs), labels)
for buffer, value in zip(net.buffers(), saved, strict=True):
    buffer.copy_(value)
try:
    loss.backward()  # (5)!
except RuntimeError as error:
    assert "modified by an inplace operation" in str(error)
    assert "[torch.FloatTensor [5]]" in str(error)
else:
    raise AssertionError("restoring the buffers before backward should have failed")

net = new_net()
nn.functional.cross_entropy(net(inputs), labels).backward()
saved = [buffer.clone() for buffer in net.buffers()]
loss = nn.functional.cross_entropy(net(inputs), labels)
for buffer, value in zip(net.buffers(), saved, strict=True):
    buffer.data.copy_(value)  # (6)!
loss.backward()
assert compare(net, reference) == (0.0, True)
# --8<-- [end:proof]
