import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Dropout(p=0.5), torch.nn.Linear(5, 2)
)
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])


def grad_of_first_layer():
    grad = net[0].weight.grad.clone()
    net.zero_grad()
    return grad


# Retain: both backward passes go through the one graph, with its one dropout mask.
loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)
loss.backward()
retained = grad_of_first_layer()

# Recompute: the second forward pass draws a new dropout mask.
loss = criterion(net(inputs), labels)
loss.backward()
loss = criterion(net(inputs), labels)  # (1)!
loss.backward()
recomputed = grad_of_first_layer()

# Recompute with the random state restored: the same mask again.
state = torch.get_rng_state()  # (2)!
loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)
loss.backward()
retained_again = grad_of_first_layer()
torch.set_rng_state(state)
loss = criterion(net(inputs), labels)
loss.backward()
torch.set_rng_state(state)
loss = criterion(net(inputs), labels)
loss.backward()
replayed = grad_of_first_layer()


# torch.utils.checkpoint restores the state for its recompute (preserve_rng_state=True).
def first_layer_grad(run_forward):
    torch.set_rng_state(state)
    criterion(run_forward(), labels).backward()
    return grad_of_first_layer()


plain = first_layer_grad(lambda: net(inputs))
checkpointed = first_layer_grad(lambda: checkpoint(net, inputs, use_reentrant=False))
not_preserved = first_layer_grad(
    lambda: checkpoint(net, inputs, use_reentrant=False, preserve_rng_state=False)
)

assert not torch.allclose(retained, recomputed)
assert torch.equal(retained_again, replayed)
assert torch.equal(plain, checkpointed)
assert not torch.allclose(plain, not_preserved)

rows = [
    ("new dropout mask,", torch.allclose(retained, recomputed)),
    ("RNG state restored,", torch.equal(retained_again, replayed)),
    ("checkpoint, default,", torch.equal(plain, checkpointed)),
    ("checkpoint, preserve_rng_state=False,", torch.allclose(plain, not_preserved)),
]
for label, same in rows:
    print(f"{label:<37} same gradient: {same}")
