# --8<-- [start:lesson]
import torch

torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = self.fc2(x)
        return x


net = Net()
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)  # (1)!

loss = criterion(net(inputs), labels)  # (2)!
loss.backward()
print(f"loss {loss.item():.4f}")
# --8<-- [end:lesson]


# --8<-- [start:proof]
def nodes(loss):
    found, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if (
            node is not None
            and node not in found
            and node.name() != "torch::autograd::AccumulateGrad"
        ):
            found.add(node)
            todo += [child for child, _ in node.next_functions]
    return found


first = criterion(net(inputs), labels)
second = criterion(net(inputs), labels)
assert len(nodes(first)) == len(nodes(second)) == 7
assert not nodes(first) & nodes(second)  # (1)!

with_flag = [p.grad.clone() for p in net.parameters()]
torch.manual_seed(0)
fresh = Net()
fresh_inputs = torch.randn(3, 10)
criterion(fresh(fresh_inputs), labels).backward()  # (2)!
criterion(fresh(fresh_inputs), labels).backward()
pairs = zip(with_flag, fresh.parameters(), strict=True)
assert all(torch.equal(a, p.grad) for a, p in pairs)
# --8<-- [end:proof]
