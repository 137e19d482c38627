# --8<-- [start:lesson]
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model0, model1 = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16)
params = [*model0.parameters(), *model1.parameters()]
optimizer = torch.optim.SGD(params, lr=0.01)
scaler = torch.amp.GradScaler("cpu")  # (1)!
x, target = torch.randn(32, 8), torch.randn(32, 16)

with torch.autocast("cpu", dtype=torch.bfloat16):  # (2)!
    out0, out1 = model0(x), model1(x)
    loss0 = F.mse_loss(2 * out0 + 3 * out1, target)  # (3)!
    loss1 = F.mse_loss(3 * out0 - 5 * out1, target)

scaler.scale(loss0 + loss1).backward()  # (4)!
summed = [p.grad.clone() for p in params]
scaler.step(optimizer)
scaler.update()
print("scale:", scaler.get_scale(), "| out0.dtype:", out0.dtype, "| loss0.dtype:", loss0.dtype)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import warnings

assert scaler.is_enabled() and scaler.get_scale() == 65536.0
assert out0.dtype == torch.bfloat16 and loss0.dtype == torch.float32


def close(a, b, share):
    return all((p - q).abs().max() <= share * q.abs().max() for p, q in zip(a, b, strict=True))


def two_losses(m0, m1, autocast=True):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        o0, o1 = m0(x), m1(x)
        return F.mse_loss(2 * o0 + 3 * o1, target), F.mse_loss(3 * o0 - 5 * o1, target)


torch.manual_seed(0)
m0, m1 = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16)
l0, l1 = two_losses(m0, m1)
scaler.scale(l0).backward(retain_graph=True)  # (1)!
scaler.scale(l1).backward()
retained = [p.grad.clone() for p in (*m0.parameters(), *m1.parameters())]
assert not all(torch.equal(a, b) for a, b in zip(retained, summed, strict=True))
assert close(retained, summed, 0.02)  # (2)!

float32 = {}
for two_passes in (True, False):
    m0.zero_grad()
    m1.zero_grad()
    l0, l1 = two_losses(m0, m1, autocast=False)
    if two_passes:
        l0.backward(retain_graph=True)
        l1.backward()
    else:
        (l0 + l1).backward()
    float32[two_passes] = [65536.0 * p.grad for p in (*m0.parameters(), *m1.parameters())]
assert close(float32[True], float32[False], 1e-5)  # (3)!
assert close(retained, float32[False], 0.02) and close(summed, float32[False], 0.02)

l0, l1 = two_losses(model0, model1)
scaler.scale(l0).backward()
try:
    scaler.scale(l1).backward()  # (4)!
    raise AssertionError("the second backward should need the retained graph")
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")

with torch.autocast("cpu", dtype=torch.bfloat16):
    l0, l1 = F.mse_loss(model0(x), target), F.mse_loss(model1(x), target)
scaler.scale(l0).backward()  # (5)!
scaler.scale(l1).backward()

assert torch.finfo(torch.bfloat16).tiny == torch.finfo(torch.float32).tiny  # (6)!
assert torch.finfo(torch.float16).tiny == 2**-14

if not torch.cuda.is_available():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not torch.amp.GradScaler().is_enabled()  # (7)!
    assert any("CUDA is not available" in str(w.message) for w in caught)
# --8<-- [end:proof]
