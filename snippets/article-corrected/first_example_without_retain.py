# --8<-- [start:lesson]
import torch


class Net(torch.nn.Module):  # (1)!
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def graph(node):  # (2)!
    return {node}.union(*(graph(n) for n, _ in node.next_functions if n is not None))


torch.manual_seed(0)
net, criterion = Net(), torch.nn.CrossEntropyLoss()
inputs, labels = torch.randn(3, 10), torch.LongTensor([1, 0, 1])

loss = criterion(net(inputs), labels)
loss.backward()  # (3)!
first_loss = loss
loss = criterion(net(inputs), labels)  # (4)!
loss.backward()
old, new = graph(first_loss.grad_fn), graph(loss.grad_fn)
print("new_nodes:", len(new - old))
print("shared_nodes:", {type(n).__name__ for n in new & old})
# --8<-- [end:lesson]


# --8<-- [start:proof]
from torch.nn.utils import parametrize


def article_example():  # (1)!
    torch.manual_seed(0)
    net = Net()
    inputs, labels = torch.randn(3, 10), torch.LongTensor([1, 0, 1])
    loss = criterion(net(inputs), labels)
    loss.backward(retain_graph=True)
    first = loss
    loss = criterion(net(inputs), labels)
    loss.backward()
    return net, first, loss


net_with, first_with, second_with = article_example()
pairs = zip(net_with.parameters(), net.parameters(), strict=True)
assert all(torch.equal(a.grad, b.grad) for a, b in pairs)  # (2)!


def saves_tensors(node):
    return any(a.startswith("_raw_saved_") for a in dir(node))


rebuilt = [
    ("AddmmBackward0", True),
    ("AddmmBackward0", True),
    ("LogSoftmaxBackward0", True),
    ("NllLossBackward0", True),
    ("ReluBackward0", True),
    ("TBackward0", False),
    ("TBackward0", False),
]
for first, second in [(first_with, second_with), (first_loss, loss)]:  # (3)!
    old, new = graph(first.grad_fn), graph(second.grad_fn)
    shared, built = new & old, new - old
    assert [type(n).__name__ for n in shared] == ["AccumulateGrad"] * 4  # (4)!
    assert not any(saves_tensors(n) for n in shared)
    assert sorted((type(n).__name__, saves_tensors(n)) for n in built) == rebuilt

hidden = torch.relu(net.fc1(inputs))
criterion(net.fc2(hidden), labels).backward()
try:
    criterion(net.fc2(hidden), labels).backward()  # (5)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("a forward pass from the old graph's hidden should walk back into it")
criterion(net.fc2(hidden.detach()), labels).backward()


class Exp(torch.nn.Module):
    def forward(self, weight):
        return weight.exp()


parametrized = torch.nn.Linear(10, 2)
parametrize.register_parametrization(parametrized, "weight", Exp())
with parametrize.cached():
    criterion(parametrized(inputs), labels).backward()
    try:
        criterion(parametrized(inputs), labels).backward()  # (6)!
    except RuntimeError as error:
        assert str(error).startswith("Trying to backward through the graph a second time")
    else:
        raise AssertionError("the cached weight should lead back into the first graph")
criterion(parametrized(inputs), labels).backward()
criterion(parametrized(inputs), labels).backward()
# --8<-- [end:proof]
