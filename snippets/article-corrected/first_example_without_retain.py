import torch


class Net(torch.nn.Module):  # the article's model, unchanged
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = self.fc2(x)
        return x


def graph_nodes(loss):
    """Every node reachable from loss.grad_fn (each node object once)."""
    seen, stack = [], [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or any(node is s for s in seen):
            continue
        seen.append(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return seen


def article_example(retain):
    torch.manual_seed(0)
    net = Net()
    criterion = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(3, 10)
    labels = torch.LongTensor([1, 0, 1])

    loss = criterion(net(inputs), labels)
    loss.backward(retain_graph=retain)  # (1)!
    first = loss

    loss = criterion(net(inputs), labels)  # (2)!
    loss.backward()
    return net, first, loss


net_with, first_with, second_with = article_example(retain=True)
net_without, first_without, second_without = article_example(retain=False)

# The same gradients, bit for bit, with and without retain_graph=True.
same = all(
    torch.equal(a.grad, b.grad)
    for a, b in zip(net_with.parameters(), net_without.parameters(), strict=True)
)
assert same

# Two forward passes, two graphs: the losses have different grad_fn objects.
assert second_without.grad_fn is not first_without.grad_fn

# With or without retain_graph, the second forward builds every operation node anew.
for first, second in [(first_with, second_with), (first_without, second_without)]:
    old = graph_nodes(first)
    assert sum(not any(n is m for m in old) for n in graph_nodes(second)) == 7

first_nodes = graph_nodes(first_without)
second_nodes = graph_nodes(second_without)
shared = [n for n in second_nodes if any(n is m for m in first_nodes)]
new = [n for n in second_nodes if not any(n is m for m in first_nodes)]
# The only nodes found in both graphs are the AccumulateGrad nodes of the four
# parameters (weights and biases of fc1 and fc2); every operation node is new.
assert [type(n).__name__ for n in shared] == ["AccumulateGrad"] * 4  # (3)!
assert len(new) == 7 and not any(type(n).__name__ == "AccumulateGrad" for n in new)


def saved_attributes(node):
    return [a for a in dir(node) if a.startswith("_raw_saved_")]


# The shared AccumulateGrad nodes hold no saved tensors; the operation nodes do.
assert all(not saved_attributes(n) for n in shared)
assert any(saved_attributes(n) for n in new)

print("same gradients with and without retain_graph:", same)
print("same grad_fn for both losses:", second_without.grad_fn is first_without.grad_fn)
print("operation nodes built by the second forward:", len(new))
print("  ", sorted(type(n).__name__ for n in new))
print("nodes found in both graphs:", len(shared), "x AccumulateGrad (one per parameter)")
print("saved tensors held by them:", sum(len(saved_attributes(n)) for n in shared))
