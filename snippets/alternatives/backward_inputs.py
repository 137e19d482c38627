import torch
from torch import nn

torch.manual_seed(0)

encoder, decoder = nn.Linear(4, 8), nn.Linear(8, 4)
x = torch.randn(16, 4, requires_grad=True)  # e.g. for a saliency map or an adversarial step


def loss_fn():
    return (decoder(encoder(x).relu()) - x).pow(2).mean()


# With retain_graph: one backward for the input's gradient, another for the encoder.
loss = loss_fn()
loss.backward(inputs=[x], retain_graph=True)  # (1)!
loss.backward(inputs=list(encoder.parameters()))
with_retain = [t.grad.clone() for t in (x, *encoder.parameters())]
assert all(p.grad is None for p in decoder.parameters())  # (2)!

# Instead: one backward pass, into exactly the tensors you name.
x.grad = None
encoder.zero_grad()
loss_fn().backward(inputs=[x, *encoder.parameters()])  # (3)!
after = [t.grad for t in (x, *encoder.parameters())]

same = all(torch.allclose(a, b) for a, b in zip(with_retain, after, strict=True))
assert same and all(p.grad is None for p in decoder.parameters())
print("same gradients for x and the encoder:", same)
print("decoder .grad untouched:", all(p.grad is None for p in decoder.parameters()))
