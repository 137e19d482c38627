# --8<-- [start:lesson]
import torch


class Net(torch.nn.Module):  # (1)!
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
net = Net()
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

loss = criterion(net(inputs), labels)
loss.backward()  # (2)!
first_loss = loss
loss = criterion(net(inputs), labels)  # (3)!
loss.backward()
print("the second loss has a graph of its own:", loss.grad_fn is not first_loss.grad_fn)
# --8<-- [end:lesson]


# --8<-- [start:proof]
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
assert second_with.grad_fn is not first_with.grad_fn


def graph_nodes(loss):
    seen, stack = [], [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or any(node is s for s in seen):
            continue
        seen.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return seen


def saved_attributes(node):
    return [a for a in dir(node) if a.startswith("_raw_saved_")]


for first, second in [(first_with, second_with), (first_loss, loss)]:  # (3)!
    old = graph_nodes(first)
    shared = [n for n in graph_nodes(second) if any(n is m for m in old)]
    new = [n for n in graph_nodes(second) if not any(n is m for m in old)]
    assert [type(n).__name__ for n in shared] == ["AccumulateGrad"] * 4  # (4)!
    assert len(new) == 7 and "AccumulateGrad" not in [type(n).__name__ for n in new]
    assert all(not saved_attributes(n) for n in shared)
    assert any(saved_attributes(n) for n in new)
# --8<-- [end:proof]
