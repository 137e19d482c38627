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
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

for step in (1, 2):
    criterion(net(inputs), labels).backward()  # (1)!
    print(f"backward: {step} | fc2.bias.grad:", net.fc2.bias.grad.numpy().round(4))
net.zero_grad()  # (2)!
criterion(net(inputs), labels).backward()
print("zero_grad(), backward: 3 | fc2.bias.grad:", net.fc2.bias.grad.numpy().round(4))
# --8<-- [end:lesson]


# --8<-- [start:proof]
def run(backwards, zero_grad_between):
    torch.manual_seed(0)
    net = Net()
    inputs, labels = torch.randn(3, 10), torch.LongTensor([1, 0, 1])
    for _ in range(backwards):
        if zero_grad_between:
            net.zero_grad()
        criterion(net(inputs), labels).backward()
    return {name: p.grad for name, p in net.named_parameters()}


once = run(1, zero_grad_between=False)
article = run(2, zero_grad_between=False)
corrected = run(2, zero_grad_between=True)
assert all(torch.equal(article[name], 2 * once[name]) for name in once)  # (1)!
assert all(torch.equal(corrected[name], once[name]) for name in once)
assert all(torch.equal(p.grad, once[name]) for name, p in net.named_parameters())
# --8<-- [end:proof]
