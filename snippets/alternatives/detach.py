# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
bce = nn.BCEWithLogitsLoss()
real, z = torch.randn(16, 2) + 3.0, torch.randn(16, 2)
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)

fake = G(z)
d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)  # (1)!
d_loss.backward()
opt_D.step()
print("d_step_wrote_G.grad:", any(p.grad is not None for p in G.parameters()))

D.zero_grad()
bce(D(fake), ones).backward()  # (2)!
print("G[0].weight.grad_norm:", round(G[0].weight.grad.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
torch.manual_seed(0)
G2 = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D2 = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_D2 = torch.optim.SGD(D2.parameters(), lr=0.1)
assert torch.equal(torch.randn(16, 2) + 3.0, real) and torch.equal(torch.randn(16, 2), z)

fake2 = G2(z)
d_loss2 = bce(D2(real), ones) + bce(D2(fake2), zeros)
d_loss2.backward(retain_graph=True)  # (1)!
assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in G2.parameters())
G2.zero_grad()
opt_D2.step()
D2.zero_grad()
bce(D2(fake2), ones).backward()

assert torch.allclose(d_loss, d_loss2)
pairs = zip([*D.parameters(), *G.parameters()], [*D2.parameters(), *G2.parameters()], strict=True)
for a, b in pairs:
    assert torch.allclose(a, b) and torch.allclose(a.grad, b.grad)  # (2)!
# --8<-- [end:proof]
