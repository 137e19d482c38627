import torch
from torch.utils.checkpoint import checkpoint


class Net(torch.nn.Module):  # the article's larger model, plus a call counter
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(1000, 500)
        self.fc2 = torch.nn.Linear(500, 100)
        self.fc3 = torch.nn.Linear(100, 10)
        self.forward_calls = 0

    def forward(self, x):
        self.forward_calls += 1
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = self.fc3(x)
        return x


torch.manual_seed(0)
net = Net()
criterion = torch.nn.CrossEntropyLoss()
inputs = torch.randn(3, 1000)
labels = torch.LongTensor([1, 0, 1])


def grads():
    result = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net.forward_calls = 0
    return result


# --8<-- [start:both]
# Retain: one forward pass, its saved tensors kept between the two backward passes.
loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)  # (1)!
loss.backward()
retain_calls, retained = net.forward_calls, grads()

# Recompute: a second forward pass builds a second graph; nothing is kept in between.
loss = criterion(net(inputs), labels)
loss.backward()  # (2)!
loss = criterion(net(inputs), labels)
loss.backward()
recompute_calls, recomputed = net.forward_calls, grads()
# --8<-- [end:both]

# --8<-- [start:checkpoint]
loss = criterion(checkpoint(net, inputs, use_reentrant=False), labels)
calls_after_forward = net.forward_calls
loss.backward()  # (1)!
calls_after_backward = net.forward_calls
plain = [p.grad.clone() for p in net.parameters()]
# --8<-- [end:checkpoint]

assert (retain_calls, recompute_calls) == (1, 2)
same = all(torch.equal(a, b) for a, b in zip(retained, recomputed, strict=True))
assert same
assert (calls_after_forward, calls_after_backward) == (1, 2)
# A plain backward gives half of what the two backward passes added up.
plain_same = all(torch.equal(a, b / 2) for a, b in zip(plain, retained, strict=True))
assert plain_same

print("retain:    forward passes =", retain_calls)
print("recompute: forward passes =", recompute_calls)
print("same gradients:", same)
print(f"checkpoint: forward passes = {calls_after_forward} after forward, "
      f"{calls_after_backward} after backward")
print("checkpoint gives the same gradient as a plain backward:", plain_same)
