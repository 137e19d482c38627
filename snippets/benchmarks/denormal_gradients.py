import torch
from torch import nn

# --8<-- [start:show]
torch.manual_seed(0)  # the benchmark's recurrent model and data, same sizes and seed
inp, rec, out = nn.Linear(32, 128), nn.Linear(128, 128, bias=False), nn.Linear(128, 1)
xs = torch.randn(300, 5, 16, 32)  # 300 chunks of 5 time steps, batch 16
tiny = torch.finfo(torch.float32).tiny  # the smallest normal float32, about 1.2e-38


def gradient_through_24_chunks():
    """Gradient of the mean output after 24 chunks (120 time steps) w.r.t. the first state."""
    h0 = torch.zeros(16, 128, requires_grad=True)
    h = h0
    for chunk in xs[:24]:
        for x in chunk:
            h = torch.tanh(inp(x) + rec(h))
    (g,) = torch.autograd.grad(out(h).mean(), h0)
    return g


g = gradient_through_24_chunks()
flushed = torch.set_flush_denormal(True)  # (1)!
g_flushed = gradient_through_24_chunks()
torch.set_flush_denormal(False)
# --8<-- [end:show]
assert flushed  # this CPU supports the setting (x86 with SSE3, or AArch64)
denormal = (g != 0) & (g.abs() < tiny)
assert g.abs().max() < tiny  # no value of the gradient is a normal float32 any more...
assert denormal.float().mean() > 0.9  # ...and almost all of them are denormal, not zero
assert torch.equal(g_flushed, torch.zeros_like(g))  # flushed: every one of them is zero
print("flush off: every value below the smallest normal float32:", bool(g.abs().max() < tiny))
print("           more than 90 % of them denormal (nonzero):", bool(denormal.float().mean() > 0.9))
print("flush on:  every value exactly zero:", torch.equal(g_flushed, torch.zeros_like(g)))
