# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
encoder, decoder = nn.Linear(4, 8), nn.Linear(8, 4)
x = torch.randn(16, 4, requires_grad=True)  # (1)!

loss = (decoder(encoder(x).relu()) - x).pow(2).mean()
loss.backward(inputs=[x, *encoder.parameters()])  # (2)!
print("x.grad_norm:", round(x.grad.norm().item(), 4))
print("encoder.weight.grad_norm:", round(encoder.weight.grad.norm().item(), 4))
print("decoder_grads:", [p.grad for p in decoder.parameters()])  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
one_pass = [t.grad.clone() for t in (x, *encoder.parameters())]
x.grad = None
encoder.zero_grad()

loss = (decoder(encoder(x).relu()) - x).pow(2).mean()
loss.backward(inputs=[x], retain_graph=True)  # (1)!
loss.backward(inputs=list(encoder.parameters()))
with_retain = [t.grad for t in (x, *encoder.parameters())]
assert all(p.grad is None for p in decoder.parameters())

assert all(torch.allclose(a, b) for a, b in zip(with_retain, one_pass, strict=True))  # (2)!
(expected_x,) = torch.autograd.grad((decoder(encoder(x).relu()) - x).pow(2).mean(), x)
assert torch.allclose(one_pass[0], expected_x)
# --8<-- [end:proof]
