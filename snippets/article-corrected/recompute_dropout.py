import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Dropout(p=0.5), torch.nn.Linear(5, 2)
)
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

masks = []  # what Dropout let through on each forward pass, recorded by a hook
net[2].register_forward_hook(lambda module, args, out: masks.append(out != 0))


def grad_of_first_layer():
    grad = net[0].weight.grad.clone()
    net.zero_grad()
    return grad


# Retain: both backward passes go through the one graph, with its one dropout mask.
torch.manual_seed(1)
loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)
loss.backward()
retained, retained_mask = grad_of_first_layer(), masks[-1]

# Recompute: the second forward pass draws a new dropout mask.
torch.manual_seed(1)
loss = criterion(net(inputs), labels)
loss.backward()
loss = criterion(net(inputs), labels)  # (1)!
loss.backward()
recomputed, new_mask = grad_of_first_layer(), masks[-1]

# Recompute with the generators forked: the same mask again.
torch.manual_seed(1)
# --8<-- [start:fork]
devices = [inputs.device] if inputs.device.type == "cuda" else []
with torch.random.fork_rng(devices=devices):  # (2)!
    loss = criterion(net(inputs), labels)
    loss.backward()
loss = criterion(net(inputs), labels)  # (3)!
loss.backward()
# --8<-- [end:fork]
replayed = grad_of_first_layer()
first_mask, replayed_mask = masks[-2], masks[-1]


# torch.utils.checkpoint restores the state for its recompute (preserve_rng_state=True).
def first_layer_grad(run_forward):
    torch.manual_seed(2)
    criterion(run_forward(), labels).backward()
    return grad_of_first_layer()


plain = first_layer_grad(lambda: net(inputs))
checkpointed = first_layer_grad(lambda: checkpoint(net, inputs, use_reentrant=False))
not_preserved = first_layer_grad(
    lambda: checkpoint(net, inputs, use_reentrant=False, preserve_rng_state=False)
)

assert not torch.equal(retained_mask, new_mask)
assert not torch.allclose(retained, recomputed)
assert torch.equal(first_mask, retained_mask) and torch.equal(replayed_mask, retained_mask)
assert torch.equal(retained, replayed)
assert torch.equal(plain, checkpointed)
assert not torch.allclose(plain, not_preserved)

rows = [
    ("new dropout mask,", torch.allclose(retained, recomputed)),
    ("RNG forked, same mask,", torch.equal(retained, replayed)),
    ("checkpoint, default,", torch.equal(plain, checkpointed)),
    ("checkpoint, preserve_rng_state=False,", torch.allclose(plain, not_preserved)),
]
for label, same in rows:
    print(f"{label:<37} same gradient: {same}")
