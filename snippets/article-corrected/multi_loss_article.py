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
criterion1 = torch.nn.CrossEntropyLoss()
criterion2 = torch.nn.MSELoss()
inputs = torch.randn(3, 10)
labels1 = torch.LongTensor([1, 0, 1])
labels2 = torch.randn(3, 2)

loss1 = criterion1(net(inputs), labels1)  # (1)!
loss1.backward()
loss2 = criterion2(net(inputs), labels2)  # (2)!
loss2.backward()
print("two graphs:", loss1.grad_fn is not loss2.grad_fn)
print("fc2.bias.grad:", net.fc2.bias.grad.numpy().round(4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
torch.manual_seed(0)
article_net = Net()
inputs, labels1, labels2 = torch.randn(3, 10), torch.LongTensor([1, 0, 1]), torch.randn(3, 2)
criterion1(article_net(inputs), labels1).backward(retain_graph=True)  # (1)!
criterion2(article_net(inputs), labels2).backward()
pairs = zip(article_net.parameters(), net.parameters(), strict=True)
assert all(torch.equal(a.grad, b.grad) for a, b in pairs)
assert loss1.grad_fn is not loss2.grad_fn
# --8<-- [end:proof]
