# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Dropout(p=0.5), nn.Linear(5, 2))
inputs, labels = torch.randn(3, 10), torch.LongTensor([1, 0, 1])
masks = []
net[2].register_forward_hook(lambda module, args, out: masks.append(out != 0))  # (1)!


def same_random_numbers(device):  # (2)!
    devices = [] if device.type == "cpu" else [device]
    return torch.random.fork_rng(devices=devices, device_type=device.type)


with same_random_numbers(inputs.device):
    loss = nn.functional.cross_entropy(net(inputs), labels)
    loss.backward()
loss = nn.functional.cross_entropy(net(inputs), labels)  # (3)!
loss.backward()
print("same_dropout_mask:", torch.equal(masks[0], masks[1]))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import unittest.mock  # noqa: E402

from torch.utils.checkpoint import checkpoint  # noqa: E402

assert len(masks) == 2 and torch.equal(masks[0], masks[1])


def first_layer_grad():
    grad = net[0].weight.grad.clone()
    net.zero_grad()
    return grad


def run(how, seed=1):
    torch.manual_seed(seed)
    if how == "retain":  # (1)!
        loss = nn.functional.cross_entropy(net(inputs), labels)
        loss.backward(retain_graph=True)
        loss.backward()
    elif how == "recompute":  # (2)!
        nn.functional.cross_entropy(net(inputs), labels).backward()
        nn.functional.cross_entropy(net(inputs), labels).backward()
    elif how == "fork":
        with torch.random.fork_rng(devices=[]):
            nn.functional.cross_entropy(net(inputs), labels).backward()
        nn.functional.cross_entropy(net(inputs), labels).backward()
    return first_layer_grad(), masks[-1]


net.zero_grad()
retained, retained_mask = run("retain")
recomputed, new_mask = run("recompute")
replayed, replayed_mask = run("fork")
assert not torch.equal(retained_mask, new_mask)
assert not torch.allclose(retained, recomputed)
assert torch.equal(masks[-2], retained_mask) and torch.equal(replayed_mask, retained_mask)
assert torch.equal(retained, replayed)  # (3)!


def grad_with(run_forward):
    torch.manual_seed(2)
    nn.functional.cross_entropy(run_forward(), labels).backward()
    return first_layer_grad()


plain = grad_with(lambda: net(inputs))
checkpointed = grad_with(lambda: checkpoint(net, inputs, use_reentrant=False))  # (4)!
not_preserved = grad_with(
    lambda: checkpoint(net, inputs, use_reentrant=False, preserve_rng_state=False)
)
assert torch.equal(plain, checkpointed)
assert not torch.allclose(plain, not_preserved)

assert inputs.device.type == "cpu"


class FakeDeviceModule:  # (5)!
    def __init__(self):
        self.calls = []

    def named(self, name):
        self.calls.append(("module", name))
        return self

    def get_rng_state(self, device):
        self.calls.append(("get", device))
        return torch.tensor(0)

    def set_rng_state(self, state, device):
        self.calls.append(("set", device))


for kind in ("cuda", "mps", "xpu"):
    fake, gpu = FakeDeviceModule(), torch.device(kind, 0)
    with unittest.mock.patch.object(torch, "get_device_module", fake.named):
        with same_random_numbers(gpu):
            pass
        assert fake.calls == [("module", kind), ("get", gpu), ("set", gpu)]
        fake.calls.clear()
        with torch.random.fork_rng(devices=[gpu], device_type=kind):
            pass
        assert fake.calls == [("module", kind), ("get", gpu), ("set", gpu)]
        with torch.random.fork_rng(devices=[], device_type=kind):
            pass
        assert fake.calls == [("module", kind), ("get", gpu), ("set", gpu), ("module", kind)]

fake = FakeDeviceModule()
with unittest.mock.patch.object(torch, "get_device_module", fake.named):
    with same_random_numbers(torch.device("cpu")):
        pass
assert fake.calls == [("module", "cpu")]
# --8<-- [end:proof]
