# --8<-- [start:lesson]
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(16, 4)

hidden = model[1](checkpoint(model[0], x, use_reentrant=False))  # (1)!
out = checkpoint(model[2:], hidden, use_reentrant=False)
out.pow(2).mean().backward()
print("num_batches_tracked:", model[1].num_batches_tracked.item())
print("running_mean_norm:", round(model[1].running_mean.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
torch.manual_seed(0)
plain = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
assert torch.equal(torch.randn(16, 4), x)
plain(x).pow(2).mean().backward()  # (1)!

pairs = zip(model.parameters(), plain.parameters(), strict=True)
assert all(torch.equal(a.grad, b.grad) for a, b in pairs)  # (2)!
pairs = zip(model[1].buffers(), plain[1].buffers(), strict=True)
assert all(torch.equal(a, b) for a, b in pairs)
# --8<-- [end:proof]
