# --8<-- [start:lesson]
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
net = nn.Sequential(
    nn.Linear(1000, 500), nn.ReLU(), nn.Linear(500, 100), nn.ReLU(), nn.Linear(100, 10)
)
calls = []
net.register_forward_pre_hook(lambda module, args: calls.append(1))
inputs, labels = torch.randn(3, 1000), torch.LongTensor([1, 0, 1])

outputs = checkpoint(net, inputs, use_reentrant=False)  # (1)!
loss = nn.functional.cross_entropy(outputs, labels)
print("forward_passes_after_forward:", len(calls))
loss.backward()  # (2)!
print("forward_passes_after_backward:", len(calls))
# --8<-- [end:lesson]

# --8<-- [start:proof]
checkpointed = [p.grad.clone() for p in net.parameters()]
net.zero_grad()
nn.functional.cross_entropy(net(inputs), labels).backward()  # (1)!
pairs = zip(net.parameters(), checkpointed, strict=True)
assert all(torch.equal(p.grad, g) for p, g in pairs)
assert len(calls) == 3

calls.clear()
loss = nn.functional.cross_entropy(checkpoint(net, inputs, use_reentrant=False), labels)
assert len(calls) == 1
loss.backward()  # (2)!
assert len(calls) == 2
# --8<-- [end:proof]
