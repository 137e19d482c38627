# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(
    nn.Linear(1000, 500), nn.ReLU(), nn.Linear(500, 100), nn.ReLU(), nn.Linear(100, 10)
)
calls = []
net.register_forward_pre_hook(lambda module, args: calls.append(1))  # (1)!
inputs, labels = torch.randn(3, 1000), torch.LongTensor([1, 0, 1])

loss = nn.functional.cross_entropy(net(inputs), labels)
loss.backward()  # (2)!
loss = nn.functional.cross_entropy(net(inputs), labels)  # (3)!
loss.backward()
print("forward_passes:", len(calls))
print(f"net[0].weight.grad_norm: {net[0].weight.grad.norm().item():.4g}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
recomputed = [p.grad.clone() for p in net.parameters()]
net.zero_grad()
calls.clear()
loss = nn.functional.cross_entropy(net(inputs), labels)
loss.backward(retain_graph=True)  # (1)!
loss.backward()
assert len(calls) == 1
pairs = zip(net.parameters(), recomputed, strict=True)
assert all(torch.equal(p.grad, g) for p, g in pairs)  # (2)!
# --8<-- [end:proof]
