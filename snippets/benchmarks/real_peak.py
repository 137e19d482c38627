# --8<-- [start:lesson]
import torch
from peak_bytes import peak_bytes  # (1)!
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
trunk = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.Tanh())])
head1, head2 = nn.Linear(256, 1), nn.Linear(256, 10)
model = nn.ModuleList([trunk, head1, head2]).to(device)
x, y1 = torch.randn(1024, 256, device=device), torch.randn(1024, 1, device=device)
y2 = torch.randint(0, 10, (1024,), device=device)


def losses():
    z = trunk(x)
    return nn.functional.mse_loss(head1(z), y1), nn.functional.cross_entropy(head2(z), y2)


def retain():
    loss1, loss2 = losses()
    loss1.backward(retain_graph=True)  # (2)!
    loss2.backward()


def summed():
    sum(losses()).backward()  # (3)!


for step in (retain, summed):
    model.zero_grad(set_to_none=True)  # (4)!
    print(f"{step.__name__:7s} | peak_above_start: {peak_bytes(step, device) / 2**20:.2f} MiB")
# --8<-- [end:lesson]

# --8<-- [start:proof]
from peak_bytes import reference_peak  # noqa: E402


def measure(step):
    model.zero_grad(set_to_none=True)
    peak = peak_bytes(step, device)
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    if device.type == "cpu":
        assert reference_peak(step) == peak  # (1)!
    return peak, grads


grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
activation = x.numel() * x.element_size()
(peak_retain, g_retain), (peak_summed, g_summed) = measure(retain), measure(summed)
for a, b in zip(g_retain, g_summed, strict=True):
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)  # (2)!
assert peak_retain - peak_summed > grad_bytes  # (3)!
assert min(peak_retain, peak_summed) >= 4 * activation


def same_output():  # (4)!
    z = trunk(x)
    return z.square().mean(), z.abs().mean()


losses = same_output  # noqa: F811
(peak_retain, g_retain), (peak_summed, g_summed) = measure(retain), measure(summed)
for a, b in zip(g_retain, g_summed, strict=True):
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
assert abs((peak_summed - peak_retain) - activation) <= 0.01 * activation  # (5)!
# --8<-- [end:proof]
