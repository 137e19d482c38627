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
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])
criterion = torch.nn.CrossEntropyLoss()


def gradients(net):
    net.zero_grad()
    criterion(net(inputs), labels).backward()
    return [p.grad.clone() for p in net.parameters()]


def with_step(make_optimizer):
    def change(net):
        optimizer = make_optimizer(net.parameters())
        for p in net.parameters():
            p.grad = torch.randn_like(p)
        optimizer.step()
    return change


# --8<-- [start:cases]
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
# --8<-- [end:cases]


def close(a, b):
    return all(torch.allclose(x, y, rtol=1e-5, atol=1e-6) for x, y in zip(a, b, strict=True))


def far(a, b):
    return any((x - y).abs().max() > 1e-3 for x, y in zip(a, b, strict=True))


outcomes, matches_old = {}, {}
for name, change in cases.items():
    torch.manual_seed(1)
    net = Net()
    at_old = gradients(net)  # reference: a new graph at the old parameters
    loss = criterion(net(inputs), labels)
    loss.backward(retain_graph=True)
    versions = [p._version for p in net.parameters()]
    change(net)
    bumped = [p._version for p in net.parameters()] != versions
    at_new = gradients(net)  # reference: a new graph at the new parameters
    net.zero_grad()
    try:
        loss.backward()  # the second backward pass through the retained graph
    except RuntimeError as error:
        assert "modified by an inplace operation" in str(error)
        outcomes[name] = (bumped, "error")
        continue
    second = [p.grad.clone() for p in net.parameters()]
    matches_old[name] = [close([x], [y]) for x, y in zip(second, at_old, strict=True)]
    if close(second, at_old) and far(second, at_new):
        outcomes[name] = (bumped, "no error, old parameters")
    elif far(second, at_old) and far(second, at_new):
        outcomes[name] = (bumped, "no error, a mix of old and new")
    else:
        outcomes[name] = (bumped, "unclear")

assert outcomes == {
    "SGD": (True, "error"),
    "Adam": (True, "error"),
    "Adam, fused=True": (False, "no error, a mix of old and new"),
    "p.data.add_()": (False, "no error, a mix of old and new"),
    "weights not saved": (True, "no error, old parameters"),
}
# The mix: fc2's gradients come from values saved before the change (relu's output,
# the log-probabilities) and equal those at the old parameters; fc1's gradients pass
# through the saved view of the new fc2.weight and match neither reference.
# Order: fc1.weight, fc1.bias, fc2.weight, fc2.bias.
assert matches_old["Adam, fused=True"] == [False, False, True, True]
assert matches_old["p.data.add_()"] == [False, False, True, True]

for name, (bumped, outcome) in outcomes.items():
    print(f"{name + ':':<18} version bumped: {bumped!s:<5}  {outcome}")
