# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)

for step in range(3):
    real, z = torch.randn(16, 2) + 3.0, torch.randn(16, 2)
    fake = G(z)  # (1)!

    d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)  # (2)!
    opt_D.zero_grad()
    d_loss.backward()  # (3)!
    opt_D.step()

    g_loss = bce(D(fake), ones)  # (4)!
    opt_G.zero_grad()
    g_loss.backward()  # (5)!
    opt_G.step()
    print(f"step: {step} | d_loss: {d_loss.item():.3f} | g_loss: {g_loss.item():.3f}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
lesson_G, lesson_D = G, D
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)

for _ in range(3):  # (1)!
    real, z = torch.randn(16, 2) + 3.0, torch.randn(16, 2)
    fake = G(z)
    g_grads = [None if p.grad is None else p.grad.clone() for p in G.parameters()]

    d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
    opt_D.zero_grad()
    d_loss.backward()
    opt_D.step()
    assert all(  # (2)!
        (p.grad is None and g is None) or (None not in (p.grad, g) and torch.equal(p.grad, g))
        for p, g in zip(G.parameters(), g_grads, strict=True)
    )

    g_loss = bce(D(fake), ones)
    opt_G.zero_grad()
    d_before = [p.grad.clone() for p in D.parameters()]
    g_loss.backward()
    opt_G.step()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in G.parameters())
    assert all(  # (3)!
        not torch.equal(p.grad, b) for p, b in zip(D.parameters(), d_before, strict=True)
    )

rerun = [*G.parameters(), *D.parameters()]
pairs = zip(rerun, [*lesson_G.parameters(), *lesson_D.parameters()], strict=True)
assert all(torch.equal(a, b) for a, b in pairs)  # (4)!
opt_D.zero_grad()
assert all(p.grad is None for p in D.parameters())
# --8<-- [end:proof]
