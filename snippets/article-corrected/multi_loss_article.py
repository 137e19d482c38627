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


def article_example(retain):
    torch.manual_seed(0)
    net = Net()
    criterion1 = torch.nn.CrossEntropyLoss()
    criterion2 = torch.nn.MSELoss()
    inputs = torch.randn(3, 10)
    labels1 = torch.LongTensor([1, 0, 1])
    labels2 = torch.randn(3, 2)

    loss1 = criterion1(net(inputs), labels1)  # (1)!
    loss1.backward(retain_graph=retain)

    loss2 = criterion2(net(inputs), labels2)  # (2)!
    loss2.backward()
    return net, loss1, loss2


net_with, _, _ = article_example(retain=True)
net_without, loss1, loss2 = article_example(retain=False)

same = all(
    torch.equal(a.grad, b.grad)
    for a, b in zip(net_with.parameters(), net_without.parameters(), strict=True)
)
assert same
assert loss1.grad_fn is not loss2.grad_fn

print("works without retain_graph, same gradients:", same)
