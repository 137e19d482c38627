# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
real, z = torch.randn(16, 2) + 3.0, torch.randn(16, 2)

d_fake = D(G(z))  # (1)!
d_loss = bce(D(real), ones) + bce(d_fake, zeros)
opt_D.zero_grad()
d_loss.backward(retain_graph=True)  # (2)!
opt_D.step()  # (3)!

g_loss = bce(d_fake, ones)  # (4)!
try:
    g_loss.backward()
except RuntimeError as error:
    message = str(error)
    print(message.split(" Hint:")[0].replace(": [", ":\n[").replace(", is at", ",\nis at"))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert message.startswith(
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)
assert tuple(D[2].weight.shape) == (1, 8) and "[torch.FloatTensor [8, 1]]" in message  # (1)!
assert "is at version" in message and "expected version" in message

d_fake = D(G(z))
d_loss = bce(D(real), ones) + bce(d_fake, zeros)
opt_D.zero_grad()
d_loss.backward(retain_graph=True)
bce(d_fake, ones).backward()  # (2)!


def shortcut(fused, zero_g, step=True):  # (3)!
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_D = torch.optim.Adam(D.parameters(), lr=1e-3, fused=fused)
    d_fake = D(G(z))
    d_loss = bce(D(real), ones) + bce(d_fake, zeros)
    opt_D.zero_grad()
    d_loss.backward(retain_graph=True)
    if step:
        opt_D.step()
    if zero_g:
        G.zero_grad()
    bce(d_fake, ones).backward()
    got = torch.cat([p.grad.flatten() for p in G.parameters()])
    G.zero_grad()
    bce(D(G(z)), ones).backward()
    return got, torch.cat([p.grad.flatten() for p in G.parameters()])


got, right = shortcut(fused=True, zero_g=False)
assert (got - right).norm() > right.norm()  # (4)!
got_zeroed, right_zeroed = shortcut(fused=True, zero_g=True)
mixing = (got_zeroed - right_zeroed).norm()
assert 1e-6 < mixing < 0.01 * right.norm()  # (5)!
got_no_step, right_no_step = shortcut(fused=True, zero_g=False, step=False)
assert (got_no_step - right_no_step).norm() > right_no_step.norm()  # (6)!
error = (got_no_step - right_no_step) + (got_zeroed - right_zeroed)
assert torch.allclose(got - right, error, rtol=1e-4, atol=1e-7)
assert torch.allclose(*shortcut(fused=True, zero_g=True, step=False), rtol=1e-5, atol=1e-8)
# --8<-- [end:proof]
