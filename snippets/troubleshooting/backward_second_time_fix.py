import torch

torch.manual_seed(0)

cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)

for step in range(3):
    x = torch.randn(1, 4)
    h_prev = h
    h_in = h.detach()  # (1)!
    h = cell(x, h_in)
    loss = h.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()  # (2)!

    # The gradient is exactly the gradient of this step alone, from the carried value.
    expected = torch.autograd.grad(cell(x, h_in).pow(2).mean(), cell.weight_hh)[0]
    assert torch.allclose(cell.weight_hh.grad, expected)
    assert torch.equal(h_in, h_prev) and h_in.grad_fn is None
    assert step == 0 or h_prev.grad_fn is not None  # the link that detach() cut
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}, backward ok")
