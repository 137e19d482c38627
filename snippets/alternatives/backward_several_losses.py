import torch
from torch import nn

torch.manual_seed(0)

trunk, head1, head2 = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
params = [*trunk.parameters(), *head1.parameters(), *head2.parameters()]
x, y = torch.randn(16, 4), torch.randn(16, 1)


def forward():
    features = trunk(x).tanh()
    calls = []
    # The hook runs each time a backward pass computes the gradient of the shared activation.
    features.register_hook(lambda grad: calls.append(grad.clone()))
    loss1 = (head1(features) - y).pow(2).mean()
    loss2 = head2(features).abs().mean()
    return loss1, loss2, calls


def grads():
    result = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return result


# --8<-- [start:shown]
loss1, loss2, calls = forward()
loss1.backward(retain_graph=True)  # (1)!
loss2.backward()
two_passes, two_pass_calls = grads(), len(calls)

loss1, loss2, calls = forward()
torch.autograd.backward([loss1, loss2])  # (2)!
one_pass, one_pass_calls = grads(), len(calls)

loss1, loss2, _ = forward()
(loss1 + loss2).backward()  # (3)!
summed = grads()
# --8<-- [end:shown]

assert (two_pass_calls, one_pass_calls) == (2, 1)
assert all(torch.equal(a, b) for a, b in zip(one_pass, summed, strict=True))
close = zip(one_pass, two_passes, strict=True)
assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in close)
print(f"hook calls on the shared activation: {two_pass_calls} in 2 passes, {one_pass_calls} in 1")
print("backward([loss1, loss2]) == (loss1 + loss2).backward(), bit for bit:", True)
print("close to the two retained passes (rtol=1e-6, atol=1e-7):", True)

# One pass, and it frees the graph like any backward() without retain_graph.
loss1, loss2, _ = forward()
torch.autograd.backward([loss1, loss2])
grads()
try:
    loss1.backward()
    second = None
except RuntimeError as error:
    second = str(error)
assert "Trying to backward through the graph a second time" in second
print("graph freed after it:", True)

# Weights: grad_tensors scales each loss's gradient, like w1 * loss1 + w2 * loss2.
w1, w2 = torch.tensor(0.3), torch.tensor(2.0)
loss1, loss2, _ = forward()
torch.autograd.backward([loss1, loss2], grad_tensors=[w1, w2])
weighted = grads()
loss1, loss2, _ = forward()
(w1 * loss1 + w2 * loss2).backward()
close = zip(weighted, grads(), strict=True)
assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in close)
print("grad_tensors=[w1, w2] matches (w1 * loss1 + w2 * loss2).backward():", True)
