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
    return {name: p.grad for name, p in net.named_parameters()}


once = run(1)
article = run(2)  # (2)!
corrected = run(2, zero_grad_between=True)

assert all(torch.equal(article[name], 2 * once[name]) for name in once)  # exactly doubled
assert all(torch.equal(corrected[name], once[name]) for name in once)

print("fc2.bias.grad after one backward:      ", once["fc2.bias"].numpy().round(4))
print("after the article's two backwards:     ", article["fc2.bias"].numpy().round(4))
print("after two backwards with zero_grad():  ", corrected["fc2.bias"].numpy().round(4))
