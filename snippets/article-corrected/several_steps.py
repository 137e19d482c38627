from itertools import pairwise

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


torch.manual_seed(0)
net = Net()
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

losses, graphs, weights = [], [], []
for _ in range(5):  # the article's loop, unchanged: no retain_graph anywhere
    optimizer.zero_grad()
    outputs = net(inputs)  # (1)!
    loss = criterion(outputs, labels)
    loss.backward()  # (2)!
    optimizer.step()  # (3)!
    losses.append(loss)
    graphs.append(loss.grad_fn)
    weights.append(net.fc2.weight.detach().clone())

# Five forward passes built five different graphs ...
assert all(a is not b for i, a in enumerate(graphs) for b in graphs[i + 1 :])
# ... each at different parameter values, and the loss went down every step.
assert all(not torch.equal(a, b) for a, b in pairwise(weights))
values = [round(loss.item(), 4) for loss in losses]
assert values == sorted(values, reverse=True) and len(set(values)) == 5


def saved_tensors_freed(node):
    try:
        _ = node._saved_self  # the log-probabilities NllLossBackward0 saved
    except RuntimeError:
        return True
    return False


# ... and each backward freed its own graph's saved tensors: nothing is kept for later.
assert all(saved_tensors_freed(graph) for graph in graphs)

print("different graphs built:", len(graphs))
print("loss at each step:", values)
print("graphs whose saved tensors were freed:", sum(saved_tensors_freed(g) for g in graphs))
