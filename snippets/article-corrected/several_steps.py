# --8<-- [start:lesson]
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
net = Net()
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

for i in range(5):
    optimizer.zero_grad()
    loss = criterion(net(inputs), labels)  # (1)!
    loss.backward()  # (2)!
    optimizer.step()  # (3)!
    print(f"step: {i} | loss: {loss.item():.4f}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
lesson_last_loss = loss.item()
torch.manual_seed(0)
net = Net()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
losses, graphs, weights = [], [], []
for _ in range(5):
    optimizer.zero_grad()
    loss = criterion(net(inputs), labels)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    graphs.append(loss.grad_fn)
    weights.append(net.fc2.weight.detach().clone())

assert all(a is not b for i, a in enumerate(graphs) for b in graphs[i + 1 :])  # (1)!
assert all(not torch.equal(a, b) for a, b in zip(weights[:-1], weights[1:], strict=True))
assert all(a > b for a, b in zip(losses[:-1], losses[1:], strict=True))
assert losses[-1] == lesson_last_loss


def saved_tensors_freed(node):
    try:
        _ = node._saved_self  # (2)!
    except RuntimeError:
        return True
    return False


assert all(saved_tensors_freed(graph) for graph in graphs)
# --8<-- [end:proof]
