# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)  # (1)!
inp, rec, out = nn.Linear(32, 128), nn.Linear(128, 128, bias=False), nn.Linear(128, 1)
xs = torch.randn(300, 5, 16, 32)  # (2)!
tiny = torch.finfo(torch.float32).tiny  # (3)!


def gradient_through_24_chunks():  # (4)!
    h0 = torch.zeros(16, 128, requires_grad=True)
    h = h0
    for chunk in xs[:24]:
        for x in chunk:
            h = torch.tanh(inp(x) + rec(h))
    (g,) = torch.autograd.grad(out(h).mean(), h0)
    return g


g = gradient_through_24_chunks()
flushed = torch.set_flush_denormal(True)  # (5)!
g_flushed = gradient_through_24_chunks()
torch.set_flush_denormal(False)
denormal = (g != 0) & (g.abs() < tiny)
print("flush_denormal: False | all_below_smallest_normal:", bool(g.abs().max() < tiny))
print("flush_denormal: False | denormal_over_90%:", bool(denormal.float().mean() > 0.9))
print("flush_denormal: True  | all_zero:", torch.equal(g_flushed, torch.zeros_like(g)))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert flushed  # (1)!
assert g.abs().max() < tiny
assert denormal.float().mean() > 0.9
assert torch.equal(g_flushed, torch.zeros_like(g))
# --8<-- [end:proof]
