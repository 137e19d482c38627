import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)
        self.calls = 0  # (1)!
        self.feature_bank = []  # (2)!

    def forward(self, x):
        self.calls += 1
        features = torch.relu(self.fc1(x))
        self.feature_bank.append(features.detach())
        return self.fc2(features)


def run(recompute):
    torch.manual_seed(0)
    net = Net()
    criterion = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(3, 10)
    labels = torch.LongTensor([1, 0, 1])

    loss = criterion(net(inputs), labels)
    if recompute:
        loss.backward()
        loss = criterion(net(inputs), labels)
        loss.backward()
    else:
        loss.backward(retain_graph=True)
        loss.backward()
    return net


retained, recomputed = run(recompute=False), run(recompute=True)

assert (retained.calls, recomputed.calls) == (1, 2)
assert (len(retained.feature_bank), len(recomputed.feature_bank)) == (1, 2)
assert torch.equal(recomputed.feature_bank[0], recomputed.feature_bank[1])  # a duplicate

print("forward calls,       retain:", retained.calls, " recompute:", recomputed.calls)
print("feature bank length, retain:", len(retained.feature_bank),
      " recompute:", len(recomputed.feature_bank), "(the same batch twice)")
