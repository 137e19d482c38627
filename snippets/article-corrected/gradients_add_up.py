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


def run(backwards, zero_grad_between=False):
    torch.manual_seed(0)
    net = Net()
    criterion = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(3, 10)
    labels = torch.LongTensor([1, 0, 1])
    for _ in range(backwards):
        if zero_grad_between:
            net.zero_grad()  # (1)!
        loss = criterion(net(inputs), labels)
        loss.backward()
    return net.fc2.bias.grad


once = run(1)
article = run(2)  # (2)!
corrected = run(2, zero_grad_between=True)

assert torch.equal(article, 2 * once)  # exactly doubled
assert torch.equal(corrected, once)

print("fc2.bias.grad after one backward:      ", once.numpy().round(4))
print("after the article's two backwards:     ", article.numpy().round(4))
print("after two backwards with zero_grad():  ", corrected.numpy().round(4))
