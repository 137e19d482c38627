import weakref

import torch


class Net(torch.nn.Module):  # the article's larger model, unchanged
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(1000, 500)
        self.fc2 = torch.nn.Linear(500, 100)
        self.fc3 = torch.nn.Linear(100, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = self.fc3(x)
        return x


torch.manual_seed(0)
net = Net()
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 1000)
labels = torch.LongTensor([1, 0, 1])


# --8<-- [start:measure]
class Saved:  # what the graph holds for one saved tensor
    def __init__(self, tensor):
        self.tensor = tensor.detach()  # (1)!


records = []  # a weak reference to every Saved the graph was given


def pack(tensor):
    saved = Saved(tensor)
    records.append(weakref.ref(saved))
    return saved


def unpack(saved):
    return saved.tensor


# Storages that stay alive anyway, graph or no graph: parameters, inputs, labels.
alive_anyway = {t.untyped_storage().data_ptr() for t in [*net.parameters(), inputs, labels]}


def held_by_graphs():
    """Bytes of saved tensors still held by a graph, each storage counted once."""
    storages = {}
    for ref in records:
        saved = ref()
        if saved is not None:  # (2)!
            storage = saved.tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    total = sum(storages.values())
    only_for_backward = sum(n for p, n in storages.items() if p not in alive_anyway)
    return total, only_for_backward


def forward():
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return criterion(net(inputs), labels)
# --8<-- [end:measure]


def show(label, held):
    print(f"{label:<44} {held[0]:>7} bytes saved, {held[1]:>5} of them intermediate results")


# --8<-- [start:one-graph]
one_graph = {}
for retain in (True, False):
    loss = forward()
    one_graph["before backward"] = held_by_graphs()
    loss.backward(retain_graph=retain)
    one_graph[f"after backward(retain_graph={retain})"] = held_by_graphs()
    del loss  # (1)!
    one_graph[f"  ... then del loss (retain_graph={retain})"] = held_by_graphs()
# --8<-- [end:one-graph]

# --8<-- [start:article]
peak = {}
for retain in (True, False):
    loss = forward()
    loss.backward(retain_graph=retain)
    new_loss = forward()  # (1)!
    peak[retain] = held_by_graphs()
    loss = new_loss
    loss.backward()
    del loss, new_loss
# --8<-- [end:article]

# --8<-- [start:caveats]
caveats = {}
loss = forward()
torch.autograd.grad(loss, [net.fc3.weight])  # (1)!
caveats["after autograd.grad(loss, [fc3.weight])"] = held_by_graphs()
loss = forward()  # (2)!
torch.autograd.grad(loss, [*net.parameters()], create_graph=True)  # (3)!
caveats["after autograd.grad(..., create_graph=True)"] = held_by_graphs()
del loss
# --8<-- [end:caveats]

before = one_graph["before backward"]
assert before == (223348, 7324)
# Held anyway: inputs, labels and the weights of fc2 and fc3. The 2 MB weight of fc1
# is not saved at all: inputs do not require grad, so no gradient needs it.
anyway = [inputs, labels, net.fc2.weight, net.fc3.weight]
assert before[0] - before[1] == sum(t.nbytes for t in anyway) == 216024
assert one_graph["after backward(retain_graph=True)"] == before
assert one_graph["  ... then del loss (retain_graph=True)"] == (0, 0)
assert one_graph["after backward(retain_graph=False)"] == (0, 0)
assert peak[True] == (before[0] + before[1], 2 * before[1])  # both graphs' results
assert peak[False] == before

# Why fc1's weight is not saved: nn.Linear runs addmm(bias, input, weight.t()). mat2, the weight,
# appears only in the formula for mat1's gradient, the input's, and the generated code saves it
# only when that gradient will be computed.
node = net.fc1(inputs).grad_fn
assert type(node).__name__ == "AddmmBackward0" and node._saved_mat2 is None
node = net.fc1(inputs.clone().requires_grad_()).grad_fn
assert node._saved_mat2.data_ptr() == net.fc1.weight.data_ptr()
del node

# A partial backward pass runs only the nodes on a path to what it was asked for, and only
# those free their saved tensors: both ReLU outputs (and fc2's weight, and the inputs) stay.
relu_outputs = (3 * 500 + 3 * 100) * 4
partial = (inputs.nbytes + net.fc2.weight.nbytes + relu_outputs, relu_outputs)
assert caveats["after autograd.grad(loss, [fc3.weight])"] == partial
loss = forward()
loss.backward(inputs=[net.fc3.weight])  # the same with backward(inputs=...)
assert held_by_graphs() == partial
net.zero_grad()
del loss  # ... until the graph is dropped
assert held_by_graphs() == (0, 0)
loss = forward()
torch.autograd.grad(loss, [net.fc1.bias])  # a path through the whole graph: all freed
assert held_by_graphs() == (0, 0)

# create_graph=True also sets retain_graph's default: everything is kept, and a second backward
# pass through the same graph works and frees it.
assert caveats["after autograd.grad(..., create_graph=True)"] == before
loss = forward()
torch.autograd.grad(loss, [*net.parameters()], create_graph=True)
loss.backward()
net.zero_grad()
assert held_by_graphs() == (0, 0)
del loss

for label, held in one_graph.items():
    show(label, held)
for label, held in caveats.items():
    show(label, held)
print("The article's code, after the second forward:")
show("  first backward with retain_graph=True", peak[True])
show("  first backward without it", peak[False])
