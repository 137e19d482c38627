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

outputs = net(inputs)  # (1)!
loss1, loss2 = criterion1(outputs, labels1), criterion2(outputs, labels2)
(loss1 + loss2).backward()  # (2)!
print("fc2.bias.grad:", net.fc2.bias.grad.numpy().round(4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
with_sum = [p.grad.clone() for p in net.parameters()]
params = list(net.parameters())


def losses():
    outputs = net(inputs)
    return criterion1(outputs, labels1), criterion2(outputs, labels2)


net.zero_grad()
loss1, loss2 = losses()
loss1.backward()
try:
    loss2.backward()  # (1)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("the second backward should have failed")

net.zero_grad()
loss1, loss2 = losses()
loss1.backward(retain_graph=True)  # (2)!
loss2.backward()
with_retain = [p.grad.clone() for p in net.parameters()]
pairs = zip(with_retain, with_sum, strict=True)
assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-6) for a, b in pairs)  # (3)!
assert not all(torch.equal(a, b) for a, b in zip(with_retain, with_sum, strict=True))

loss1, loss2 = losses()
torch.autograd.grad(loss1, params)
try:
    torch.autograd.grad(loss2, params)  # (4)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("the second autograd.grad should have failed")

loss1, loss2 = losses()
g1 = torch.autograd.grad(loss1, params, retain_graph=True)
g2 = torch.autograd.grad(loss2, params)
assert all(torch.equal(a + b, t) for a, b, t in zip(g1, g2, with_retain, strict=True))  # (5)!

loss1, loss2 = losses()
batched = torch.autograd.grad(  # (6)!
    torch.stack([loss1, loss2]), params, grad_outputs=torch.eye(2), is_grads_batched=True
)
for b, a, c in zip(batched, g1, g2, strict=True):
    assert torch.allclose(b[0], a, rtol=1e-6, atol=1e-6)
    assert torch.allclose(b[1], c, rtol=1e-6, atol=1e-6)

hidden = torch.relu(net.fc1(inputs))
head2 = torch.nn.Linear(5, 2)
criterion1(net.fc2(hidden), labels1).backward()
try:
    criterion2(head2(hidden), labels2).backward()  # (7)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("two heads on one hidden layer share its graph")
# --8<-- [end:proof]
