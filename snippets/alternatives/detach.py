import copy

import torch
from torch import nn

torch.manual_seed(0)

G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
bce = nn.BCEWithLogitsLoss()
real, z = torch.randn(16, 2) + 3.0, torch.randn(16, 2)
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)


def gan_step(G, D, use_detach):
    opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
    fake = G(z)
    if use_detach:
        d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)  # (1)!
        d_loss.backward()
        g_filled = any(p.grad is not None for p in G.parameters())
    else:
        d_loss = bce(D(real), ones) + bce(D(fake), zeros)
        d_loss.backward(retain_graph=True)  # (2)!
        g_filled = all(p.grad is not None and p.grad.abs().sum() > 0 for p in G.parameters())
        G.zero_grad()  # the D loss also filled G's .grad: throw it away
    d_grads = [p.grad.clone() for p in D.parameters()]
    opt_D.step()
    D.zero_grad()
    bce(D(fake), ones).backward()  # (3)!
    return d_grads, [p.grad.clone() for p in G.parameters()], g_filled


d_retain, g_retain, filled_retain = gan_step(copy.deepcopy(G), copy.deepcopy(D), use_detach=False)
d_detach, g_detach, filled_detach = gan_step(copy.deepcopy(G), copy.deepcopy(D), use_detach=True)
same_d = all(torch.allclose(a, b) for a, b in zip(d_retain, d_detach, strict=True))
same_g = all(torch.allclose(a, b) for a, b in zip(g_retain, g_detach, strict=True))
assert same_d and same_g
assert filled_retain and not filled_detach
print("same discriminator gradients:", same_d)
print("same generator gradients:    ", same_g)
print("D loss wrote into G's .grad:    ", filled_retain, "(retain),", filled_detach, "(detach)")
