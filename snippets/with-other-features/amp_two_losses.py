import torch
import torch.nn.functional as F

# --8<-- [start:shown]
torch.manual_seed(0)
model0, model1 = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16)
params = [*model0.parameters(), *model1.parameters()]
optimizer = torch.optim.SGD(params, lr=0.01)
scaler = torch.amp.GradScaler("cpu")  # (1)!
x, target = torch.randn(32, 8), torch.randn(32, 16)


def losses():
    with torch.autocast("cpu", dtype=torch.bfloat16):  # (2)!
        out0, out1 = model0(x), model1(x)
        loss0 = F.mse_loss(2 * out0 + 3 * out1, target)  # (3)!
        loss1 = F.mse_loss(3 * out0 - 5 * out1, target)
    return loss0, loss1


loss0, loss1 = losses()
scaler.scale(loss0).backward(retain_graph=True)  # (4)!
scaler.scale(loss1).backward()
retained = [p.grad.clone() for p in params]

optimizer.zero_grad()
loss0, loss1 = losses()
scaler.scale(loss0 + loss1).backward()  # (5)!
summed = [p.grad.clone() for p in params]
scaler.step(optimizer)
scaler.update()
# --8<-- [end:shown]
import warnings  # noqa: E402


def close(a, b, share):
    """Every entry within `share` of the largest entry of b, tensor by tensor."""
    return all((p - q).abs().max() <= share * q.abs().max() for p, q in zip(a, b, strict=True))


# The CPU path really ran: the scaler is on, the layers ran in bfloat16, the losses in float32.
with torch.autocast("cpu", dtype=torch.bfloat16):
    out, loss = model0(x), F.mse_loss(model0(x), target)
assert scaler.is_enabled() and scaler.get_scale() == 65536.0
assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
print("CPU scaler enabled:", scaler.is_enabled(), "| scale:", scaler.get_scale())
print("layer output:", out.dtype, "| loss:", loss.dtype)

# Reference: the same two losses, same weights, in float32 without autocast, times the scale.
torch.manual_seed(0)
ref0, ref1 = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16)
out0, out1 = ref0(x), ref1(x)
total = F.mse_loss(2 * out0 + 3 * out1, target) + F.mse_loss(3 * out0 - 5 * out1, target)
(65536.0 * total).backward()
reference = [p.grad for p in (*ref0.parameters(), *ref1.parameters())]

# Retained and summed agree up to bfloat16 rounding, and each is as close to float32 as the other.
# They are not bit for bit equal.
assert not all(torch.equal(a, b) for a, b in zip(retained, summed, strict=True))
assert close(retained, summed, 0.02)
assert close(retained, reference, 0.02) and close(summed, reference, 0.02)
print("retained == summed, bit for bit:", False)
print("retained = summed, within 2 % of summed's largest entry:", True)

# In float32 the two ways agree to float32 rounding: the difference above is bfloat16's.
grads = []
for two_passes in (True, False):
    for p in ref0.parameters():
        p.grad = None
    for p in ref1.parameters():
        p.grad = None
    out0, out1 = ref0(x), ref1(x)
    l0, l1 = F.mse_loss(2 * out0 + 3 * out1, target), F.mse_loss(3 * out0 - 5 * out1, target)
    if two_passes:
        l0.backward(retain_graph=True)
        l1.backward()
    else:
        (l0 + l1).backward()
    grads.append([p.grad for p in (*ref0.parameters(), *ref1.parameters())])
assert close(grads[0], grads[1], 1e-5)

# The retain is needed because both losses go back through out0 and out1 ...
loss0, loss1 = losses()
scaler.scale(loss0).backward()
try:
    scaler.scale(loss1).backward()
    raise AssertionError("the second backward should need the retained graph")
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")

# ... and not needed when the two losses share no part of the graph.
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss0, loss1 = F.mse_loss(model0(x), target), F.mse_loss(model1(x), target)
scaler.scale(loss0).backward()
scaler.scale(loss1).backward()
print("losses that share no part of the graph need no retain:", True)

# bfloat16 has float32's exponent range; float16's smallest normal number is 2**-14.
assert torch.finfo(torch.bfloat16).tiny == torch.finfo(torch.float32).tiny
assert torch.finfo(torch.float16).tiny == 2**-14

# GradScaler() without a device is a CUDA scaler; without CUDA it switches itself off.
if not torch.cuda.is_available():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not torch.amp.GradScaler().is_enabled()
    assert any("CUDA is not available" in str(w.message) for w in caught)
