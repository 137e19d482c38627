import torch
from torch import nn

torch.manual_seed(0)

encoder, decoder = nn.Linear(4, 8), nn.Linear(8, 4)
x = torch.randn(16, 4)
hidden = encoder(x).relu()  # an activation, not a leaf
loss = decoder(hidden).pow(2).mean()
expected = torch.autograd.grad(loss, hidden, retain_graph=True)[0]  # the reference
assert not hidden.is_leaf and not hidden.retains_grad

loss.backward(inputs=[hidden], retain_graph=True)  # (1)!
assert torch.equal(hidden.grad, expected)
params = [*encoder.parameters(), *decoder.parameters()]
assert all(p.grad is None for p in params)  # (2)!
assert hidden.retains_grad  # (3)!

first = hidden.grad.clone()
loss.backward()  # a later, plain backward pass
assert torch.equal(hidden.grad, first + expected)  # (4)!
assert all(p.grad is not None for p in params)

print("hidden.grad equals autograd.grad:", torch.equal(first, expected))
print("hidden.retains_grad afterwards: ", hidden.retains_grad)
print("later backward() added to it:   ", torch.equal(hidden.grad, first + expected))
