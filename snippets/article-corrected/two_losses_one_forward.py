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


torch.manual_seed(0)
net = Net()
criterion1 = torch.nn.CrossEntropyLoss()
criterion2 = torch.nn.MSELoss()
inputs = torch.randn(3, 10)
labels1 = torch.LongTensor([1, 0, 1])
labels2 = torch.randn(3, 2)


def losses():
    outputs = net(inputs)  # ONE forward pass, two losses on its output
    return criterion1(outputs, labels1), criterion2(outputs, labels2)


def grads():
    result = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    return result


# --8<-- [start:fails]
loss1, loss2 = losses()
loss1.backward()
try:
    loss2.backward()  # the graph's saved tensors are already freed
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the second backward should have failed")
assert message.startswith("Trying to backward through the graph a second time")
net.zero_grad()
# --8<-- [end:fails]

# --8<-- [start:retain]
loss1, loss2 = losses()
loss1.backward(retain_graph=True)  # keep them for the second backward
loss2.backward()
with_retain = grads()
# --8<-- [end:retain]

# --8<-- [start:sum]
loss1, loss2 = losses()
(loss1 + loss2).backward()  # one backward pass through the shared graph
with_sum = grads()
# --8<-- [end:sum]

# torch.autograd.grad frees the graph the same way: every call but the last needs the flag.
params = list(net.parameters())
loss1, loss2 = losses()
torch.autograd.grad(loss1, params)
try:
    torch.autograd.grad(loss2, params)
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("the second autograd.grad should have failed")
loss1, loss2 = losses()
separate = [
    torch.autograd.grad(loss1, params, retain_graph=True),
    torch.autograd.grad(loss2, params),
]
# Exactly: the same two gradients, added once, in .grad or here.
assert all(
    torch.equal(g1 + g2, total)
    for g1, g2, total in zip(*separate, with_retain, strict=True)
)

# Within a tolerance, not exactly: the sum adds the two losses' gradients at the
# output and multiplies through the layers once; two backward passes multiply
# through each and add in .grad. Equal in exact arithmetic, not always in float32.
pairs = list(zip(with_retain, with_sum, strict=True))
same = all(torch.allclose(a, b, rtol=1e-6, atol=1e-6) for a, b in pairs)
assert same

print("without retain_graph:", message.split(" (")[0])
print("retain_graph=True and (loss1 + loss2).backward() give the same gradients")
print("  within rtol=1e-6, atol=1e-6 (torch.allclose):", same)
