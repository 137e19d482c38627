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

loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)
optimizer.step()  # (1)!
try:
    loss.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
    print(message.split(": [")[0])
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert "message" in globals(), "backward through the old graph should have failed"
assert "modified by an inplace operation" in message
assert "[torch.FloatTensor [5, 2]]" in message  # (1)!
assert "is at version 2; expected version 1 instead" in message

torch.manual_seed(0)
old_net = Net()
criterion(old_net(inputs), labels).backward()
old_grad = old_net.fc1.weight.grad.clone()
assert not torch.equal(old_net.fc2.weight, net.fc2.weight)

optimizer.zero_grad()
loss = criterion(net(inputs), labels)  # (2)!
loss.backward()
assert not torch.allclose(old_grad, net.fc1.weight.grad)
# --8<-- [end:proof]
