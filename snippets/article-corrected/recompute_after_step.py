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

saved = net(inputs).grad_fn._saved_mat2
assert saved is not net.fc2.weight and saved._base is net.fc2.weight
version = saved._version
with torch.no_grad():
    net.fc2.weight.mul_(1)
assert saved._version == net.fc2.weight._version == version + 1

torch.manual_seed(0)
old_net = Net()
criterion(old_net(inputs), labels).backward()
new_net = Net()
new_net.load_state_dict(net.state_dict())
criterion(new_net(inputs), labels).backward()
assert not torch.equal(old_net.fc2.weight, net.fc2.weight)

optimizer.zero_grad()
loss = criterion(net(inputs), labels)  # (2)!
loss.backward()
for p, old, new in zip(net.parameters(), old_net.parameters(), new_net.parameters(), strict=True):
    assert torch.equal(p.grad, new.grad)
    assert not torch.allclose(p.grad, old.grad)
# --8<-- [end:proof]
