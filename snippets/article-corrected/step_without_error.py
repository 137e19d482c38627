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
optimizer = torch.optim.Adam(net.parameters(), lr=0.1, fused=True)
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])

loss = criterion(net(inputs), labels)
loss.backward(retain_graph=True)
first = net.fc1.weight.grad.clone()
optimizer.step()  # (1)!
optimizer.zero_grad()
loss.backward()  # (2)!
difference = (net.fc1.weight.grad - first).abs().max().item()
print("error:", None, f"| fc1.weight.grad_diff: {difference:.2g}")
# --8<-- [end:lesson]


# --8<-- [start:proof]
def gradients(net):
    net.zero_grad()
    criterion(net(inputs), labels).backward()
    return [p.grad.clone() for p in net.parameters()]


def close(a, b):
    return all(torch.allclose(x, y, rtol=1e-5, atol=1e-6) for x, y in zip(a, b, strict=True))


def far(a, b):
    return any((x - y).abs().max() > 1e-3 for x, y in zip(a, b, strict=True))


lesson_second = [p.grad.clone() for p in net.parameters()]
lesson_at_new = gradients(net)
torch.manual_seed(0)
lesson_at_old = gradients(Net())
assert torch.equal(lesson_at_old[0], first)
assert difference > 1e-3
pairs = zip(lesson_second, lesson_at_old, lesson_at_new, strict=True)
assert [far([x], [o]) and far([x], [n]) for x, o, n in pairs] == [True, True, False, False]


def with_step(make_optimizer):
    def change(net):
        optimizer = make_optimizer(net.parameters())
        for p in net.parameters():
            p.grad = torch.randn_like(p)
        optimizer.step()

    return change


def through_data(net):
    for p in net.parameters():
        p.data.add_(0.1 * torch.randn_like(p))  # (1)!


def not_saved(net):
    with torch.no_grad():
        net.fc1.weight.add_(0.1 * torch.randn_like(net.fc1.weight))  # (2)!
        net.fc2.bias.add_(0.1 * torch.randn_like(net.fc2.bias))


cases = {
    "SGD": with_step(lambda ps: torch.optim.SGD(ps, lr=0.1)),
    "Adam": with_step(lambda ps: torch.optim.Adam(ps, lr=0.1)),
    "Adam, fused=True": with_step(lambda ps: torch.optim.Adam(ps, lr=0.1, fused=True)),  # (3)!
    "p.data.add_()": through_data,
    "weights not saved": not_saved,
}


outcomes, matches_old, far_from_both = {}, {}, {}
for name, change in cases.items():
    torch.manual_seed(1)
    net = Net()
    at_old = gradients(net)
    loss = criterion(net(inputs), labels)
    loss.backward(retain_graph=True)
    versions = [p._version for p in net.parameters()]
    change(net)
    bumped = [p._version for p in net.parameters()] != versions
    at_new = gradients(net)
    net.zero_grad()
    try:
        loss.backward()
    except RuntimeError as error:
        assert "modified by an inplace operation" in str(error)
        outcomes[name] = (bumped, "error")
        continue
    second = [p.grad.clone() for p in net.parameters()]
    matches_old[name] = [close([x], [y]) for x, y in zip(second, at_old, strict=True)]
    far_from_both[name] = [
        far([x], [o]) and far([x], [n]) for x, o, n in zip(second, at_old, at_new, strict=True)
    ]
    if close(second, at_old) and far(second, at_new):
        outcomes[name] = (bumped, "old parameters")
    elif far(second, at_old) and far(second, at_new):
        outcomes[name] = (bumped, "a mix of old and new")
    else:
        outcomes[name] = (bumped, "unclear")

assert outcomes == {  # (4)!
    "SGD": (True, "error"),
    "Adam": (True, "error"),
    "Adam, fused=True": (False, "a mix of old and new"),
    "p.data.add_()": (False, "a mix of old and new"),
    "weights not saved": (True, "old parameters"),
}
for name in ("Adam, fused=True", "p.data.add_()"):  # (5)!
    assert matches_old[name] == [False, False, True, True]
    assert far_from_both[name] == [True, True, False, False]
# --8<-- [end:proof]
