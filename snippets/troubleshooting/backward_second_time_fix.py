# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)

for step in range(3):
    x = torch.randn(1, 4)
    h = cell(x, h.detach())  # (1)!
    loss = h.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()  # (2)!
    optimizer.step()
    print(f"step: {step} | loss: {loss.item():.4f} | backward: ok")
# --8<-- [end:lesson]

# --8<-- [start:proof]
lesson_weights = [p.detach().clone() for p in cell.parameters()]
torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)
for step in range(3):
    x = torch.randn(1, 4)
    h_prev = h
    h_in = h.detach()
    h = cell(x, h_in)
    optimizer.zero_grad()
    h.pow(2).mean().backward()
    fresh = h_prev.detach().clone()
    params = list(cell.parameters())
    expected = torch.autograd.grad(cell(x, fresh).pow(2).mean(), params)
    assert all(torch.allclose(p.grad, e) for p, e in zip(params, expected, strict=True))  # (1)!
    assert torch.equal(h_in, h_prev) and h_in.grad_fn is None  # (2)!
    assert step == 0 or h_prev.grad_fn is not None  # (3)!
    optimizer.step()
pairs = zip(cell.parameters(), lesson_weights, strict=True)
assert all(torch.equal(p, q) for p, q in pairs)  # (4)!
# --8<-- [end:proof]
