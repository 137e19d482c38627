# The first example of a popular article, unchanged except for the seed and the last line.
import torch

torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 5)
        self.fc2 = torch.nn.Linear(5, 2)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = self.fc2(x)
        return x


net = Net()
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)  # (1)!

loss = criterion(net(inputs), labels)  # (2)!
loss.backward()
print(f"loss {loss.item():.4f}")
