import torch

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

assert not torch.allclose(retained, recomputed)
assert torch.equal(retained_again, replayed)

print("new dropout mask,   same gradient:", torch.allclose(retained, recomputed))
print("RNG state restored, same gradient:", torch.equal(retained_again, replayed))
