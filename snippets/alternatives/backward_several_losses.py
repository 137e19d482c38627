# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
trunk, head1, head2 = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)

features = trunk(x).tanh()
calls = []
features.register_hook(lambda grad: calls.append(grad.clone()))  # (1)!
loss1 = (head1(features) - y).pow(2).mean()
loss2 = head2(features).abs().mean()
torch.autograd.backward([loss1, loss2])  # (2)!
print("shared_hook_calls:", len(calls))
print("trunk.weight.grad_norm:", round(trunk.weight.grad.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
params = [*trunk.parameters(), *head1.parameters(), *head2.parameters()]


def forward():
    features = trunk(x).tanh()
    calls = []
    features.register_hook(lambda grad: calls.append(grad.clone()))
    loss1 = (head1(features) - y).pow(2).mean()
    loss2 = head2(features).abs().mean()
    return loss1, loss2, calls


def grads():
    result = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return result


one_pass, one_pass_calls = grads(), calls

loss1, loss2, two_pass_calls = forward()
loss1.backward(retain_graph=True)  # (1)!
loss2.backward()
two_passes = grads()
assert (len(two_pass_calls), len(one_pass_calls)) == (2, 1)
assert torch.allclose(one_pass_calls[0], two_pass_calls[0] + two_pass_calls[1])

loss1, loss2, _ = forward()
(loss1 + loss2).backward()
summed = grads()
assert all(torch.equal(a, b) for a, b in zip(one_pass, summed, strict=True))  # (2)!
close = zip(one_pass, two_passes, strict=True)
assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in close)

loss1, loss2, _ = forward()
torch.autograd.backward([loss1, loss2])
grads()
try:
    loss1.backward()  # (3)!
    second = None
except RuntimeError as error:
    second = str(error)
assert "Trying to backward through the graph a second time" in second

w1, w2 = 0.3, 2.0
loss1, loss2, _ = forward()
try:
    torch.autograd.backward([loss1, loss2], grad_tensors=[w1, w2])  # (4)!
except TypeError as error:
    assert str(error) == "gradients can be either Tensors or None, but got float"
else:
    raise AssertionError("grad_tensors should refuse Python floats")
torch.autograd.backward([loss1, loss2], grad_tensors=[torch.tensor(w1), torch.tensor(w2)])  # (5)!
weighted = grads()
loss1, loss2, _ = forward()
(w1 * loss1 + w2 * loss2).backward()
close = zip(weighted, grads(), strict=True)
assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in close)
# --8<-- [end:proof]
