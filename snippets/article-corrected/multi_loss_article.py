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
criterion1, criterion2 = torch.nn.CrossEntropyLoss(), torch.nn.MSELoss()
inputs, labels1, labels2 = torch.randn(3, 10), torch.LongTensor([1, 0, 1]), torch.randn(3, 2)
calls = []
net.register_forward_pre_hook(lambda module, args: calls.append(1))  # (1)!

loss1 = criterion1(net(inputs), labels1)  # (2)!
loss1.backward()
loss2 = criterion2(net(inputs), labels2)  # (3)!
loss2.backward()
print("forward_passes:", len(calls))
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


def graph(node):
    return {node}.union(*(graph(n) for n, _ in node.next_functions if n is not None))


def shared_types(a, b):
    return sorted(type(n).__name__ for n in graph(a.grad_fn) & graph(b.grad_fn))


assert shared_types(loss1, loss2) == ["AccumulateGrad"] * 4  # (2)!
outputs = net(inputs)
one_forward = shared_types(criterion1(outputs, labels1), criterion2(outputs, labels2))
assert one_forward.count("AddmmBackward0") == 2 and "ReluBackward0" in one_forward
# --8<-- [end:proof]
