# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x, y = torch.randn(16, 4), torch.randn(16, 2)

out = model(x)
loss = nn.functional.mse_loss(out, y) + out.abs().mean()  # (1)!
loss.backward()  # (2)!
print("loss:", round(loss.item(), 4))
print("model[0].weight.grad_norm:", round(model[0].weight.grad.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
summed = [p.grad.clone() for p in model.parameters()]

model.zero_grad()
out = model(x)
loss1, loss2 = nn.functional.mse_loss(out, y), out.abs().mean()
loss1.backward(retain_graph=True)  # (1)!
loss2.backward()
pairs = zip(summed, model.parameters(), strict=True)
assert all(torch.allclose(s, p.grad, rtol=1e-6, atol=1e-7) for s, p in pairs)  # (2)!

w1, w2 = 0.3, 2.0  # (3)!
model.zero_grad()
out = model(x)
(w1 * nn.functional.mse_loss(out, y) + w2 * out.abs().mean()).backward()
params = [*model.parameters()]
g1 = torch.autograd.grad(nn.functional.mse_loss(model(x), y), params)
g2 = torch.autograd.grad(model(x).abs().mean(), params)
pairs = zip(model.parameters(), g1, g2, strict=True)
assert all(torch.allclose(p.grad, w1 * a + w2 * b) for p, a, b in pairs)
assert not torch.allclose(model[0].weight.grad, g1[0] + g2[0])

a, b, c = (torch.tensor(v, dtype=torch.float32) for v in (0.1, 0.7, 3.0))
assert not torch.equal(a * c + b * c, (a + b) * c)  # (4)!

out = model(x)
g_out = torch.autograd.grad(nn.functional.mse_loss(out, y), out)[0]
h = model[1](model[0](x)).detach()
products = [torch.outer(g_out[i], h[i]) for i in range(len(x))]
in_order, reverse_order = products[0], products[-1]
for p in products[1:]:
    in_order = in_order + p
for p in products[-2::-1]:
    reverse_order = reverse_order + p
assert not torch.equal(in_order, reverse_order)  # (5)!
assert torch.allclose(in_order, reverse_order, rtol=1e-6, atol=1e-7)
g_weight = torch.autograd.grad(nn.functional.mse_loss(model(x), y), model[2].weight)[0]
assert torch.allclose(g_weight, in_order, rtol=1e-6, atol=1e-7)
# --8<-- [end:proof]
