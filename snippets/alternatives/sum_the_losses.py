# --8<-- [start:shown]
import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x, y = torch.randn(16, 4), torch.randn(16, 2)

# With retain_graph: two losses from one forward, two backward passes.
out = model(x)
loss1, loss2 = nn.functional.mse_loss(out, y), out.abs().mean()
loss1.backward(retain_graph=True)  # (1)!
loss2.backward()
with_retain = [p.grad.clone() for p in model.parameters()]

# Instead: add the losses, one backward pass.
model.zero_grad()
out = model(x)
loss = nn.functional.mse_loss(out, y) + out.abs().mean()  # (2)!
loss.backward()  # (3)!

pairs = zip(with_retain, model.parameters(), strict=True)
same = all(torch.allclose(a, p.grad, rtol=1e-6, atol=1e-7) for a, p in pairs)
assert same
print("same gradients (rtol=1e-6, atol=1e-7):", same)

# Weights work the same way: the gradient of w1 * loss1 + w2 * loss2 is w1 * g1 + w2 * g2.
w1, w2 = 0.3, 2.0
model.zero_grad()
out = model(x)
(w1 * nn.functional.mse_loss(out, y) + w2 * out.abs().mean()).backward()
params = [*model.parameters()]
g1 = torch.autograd.grad(nn.functional.mse_loss(model(x), y), params)
g2 = torch.autograd.grad(model(x).abs().mean(), params)
pairs = zip(model.parameters(), g1, g2, strict=True)
weighted = all(torch.allclose(p.grad, w1 * a + w2 * b) for p, a, b in pairs)
assert weighted
assert not torch.allclose(model[0].weight.grad, g1[0] + g2[0])  # the weights do matter
print("weighted sum, same gradients:", weighted)

# Why a tolerance: two passes multiply each loss's gradient through a layer and add the products;
# the sum adds the gradients first and multiplies once.
a, b, c = (torch.tensor(v, dtype=torch.float32) for v in (0.1, 0.7, 3.0))
same_bits = torch.equal(a * c + b * c, (a + b) * c)  # (4)!
assert not same_bits
print("float32: 0.1 * 3 + 0.7 * 3 == (0.1 + 0.7) * 3:", same_bits)
# --8<-- [end:shown]

# What note 4 says, checked here: the rounding rule is fixed, but which bits come out depends on
# the order of the additions. The last layer's weight gradient is a sum over the 16 samples of
# one product each; add the same 16 float32 products in two orders, one elementwise addition
# at a time. Most of the 16 elements come out different (11 or 12, on the CPU kernels tried),
# so the first assertion does not hang on a single bit.
out = model(x)
g_out = torch.autograd.grad(nn.functional.mse_loss(out, y), out)[0]
h = model[1](model[0](x)).detach()
products = [torch.outer(g_out[i], h[i]) for i in range(len(x))]
in_order, reverse_order = products[0], products[-1]
for p in products[1:]:
    in_order = in_order + p
for p in products[-2::-1]:
    reverse_order = reverse_order + p
assert not torch.equal(in_order, reverse_order)  # another order, other last bits
assert torch.allclose(in_order, reverse_order, rtol=1e-6, atol=1e-7)
g_weight = torch.autograd.grad(nn.functional.mse_loss(model(x), y), model[2].weight)[0]
assert torch.allclose(g_weight, in_order, rtol=1e-6, atol=1e-7)  # the same gradient, summed
