# --8<-- [start:lesson]
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


torch.manual_seed(0)
net = Net()
criterion = torch.nn.CrossEntropyLoss()
inputs, labels = torch.randn(3, 10), torch.LongTensor([1, 0, 1])

criterion(net(inputs), labels).backward()
criterion(net(inputs), labels).backward()  # (3)!
print("net.calls:", net.calls)
print("len(net.feature_bank):", len(net.feature_bank))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert (net.calls, len(net.feature_bank)) == (2, 2)
assert torch.equal(net.feature_bank[0], net.feature_bank[1])  # (1)!

torch.manual_seed(0)
retained = Net()
loss = criterion(retained(inputs), labels)
loss.backward(retain_graph=True)  # (2)!
loss.backward()
assert (retained.calls, len(retained.feature_bank)) == (1, 1)
pairs = zip(retained.parameters(), net.parameters(), strict=True)
assert all(torch.equal(a.grad, b.grad) for a, b in pairs)
# --8<-- [end:proof]
