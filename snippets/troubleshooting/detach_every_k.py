# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
xs = torch.randn(6, 1, 4)
k = 3
h = torch.zeros(1, 8)

for start in range(0, len(xs), k):
    h = h.detach()  # (1)!
    loss = 0
    for x in xs[start : start + k]:
        h = cell(x, h)
        loss = loss + h.pow(2).mean()  # (2)!
    optimizer.zero_grad()
    loss.backward()  # (3)!
    optimizer.step()
    print(f"steps: {start}-{start + k - 1} | loss: {loss.item():.4f} | backward: ok")
# --8<-- [end:lesson]

# --8<-- [start:proof]
lesson_weights = [p.detach().clone() for p in cell.parameters()]
torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
params = list(cell.parameters())


def unroll(h, chunk, cut_every_step):
    loss = 0
    for x in chunk:
        h = cell(x, h.detach() if cut_every_step else h)
        loss = loss + h.pow(2).mean()
    return loss, h


h = torch.zeros(1, 8)
gaps = []
for start in range(0, len(xs), k):
    chunk = xs[start : start + k]
    fresh = h.detach().clone()
    whole = torch.autograd.grad(unroll(fresh, chunk, False)[0], params)  # (1)!
    one_step = torch.autograd.grad(unroll(fresh, chunk, True)[0], params)
    loss, h = unroll(h.detach(), chunk, False)
    optimizer.zero_grad()
    loss.backward()
    assert all(torch.allclose(p.grad, w) for p, w in zip(params, whole, strict=True))
    gaps.append(max((w - c).abs().max().item() for w, c in zip(whole, one_step, strict=True)))
    optimizer.step()
assert min(gaps) > 1e-3, gaps  # (2)!
pairs = zip(cell.parameters(), lesson_weights, strict=True)
assert all(torch.equal(p, q) for p, q in pairs)  # (3)!
# --8<-- [end:proof]
