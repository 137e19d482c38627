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

# --8<-- [start:old-graph]
loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)
old_grad = net.fc1.weight.grad.clone()
optimizer.step()  # (1)!
optimizer.zero_grad()
try:
    loss.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("backward through the old graph should have failed")
# --8<-- [end:old-graph]

# --8<-- [start:new-graph]
loss = criterion(net(inputs), labels)  # (1)!
loss.backward()
new_grad = net.fc1.weight.grad.clone()
# --8<-- [end:new-graph]

assert "modified by an inplace operation" in message
assert "[torch.FloatTensor [5, 2]]" in message  # fc2.weight.t(), saved by fc2
assert "is at version 2; expected version 1 instead" in message
assert not torch.allclose(old_grad, new_grad)

print(message.split(". Hint")[0].replace(": [", ":\n[", 1))
print("gradient after the step equals the old one:", torch.allclose(old_grad, new_grad))
