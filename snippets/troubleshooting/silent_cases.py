# --8<-- [start:lesson]
import copy

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
x, target = torch.randn(16, 4), torch.randn(16, 2)
old_model = copy.deepcopy(model)  # (1)!

out = model(x)
loss_a, loss_b = F.mse_loss(out, target), out.pow(2).mean()
loss_a.backward(retain_graph=True)
optimizer.step()  # (2)!
optimizer.zero_grad()
loss_b.backward()  # (3)!
print("second_backward | error:", None)

for name, reference in (("old", old_model), ("new", model)):
    params = list(reference.parameters())
    expected = torch.autograd.grad(reference(x).pow(2).mean(), params)  # (4)!
    pairs = zip(model.parameters(), expected, strict=True)
    same = all(torch.allclose(p.grad, e, rtol=1e-5, atol=1e-6) for p, e in pairs)
    print(f"grad_at_{name}_params: {same}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
from torch.autograd.graph import save_on_cpu, saved_tensors_hooks
from torch.nn.utils import parameters_to_vector
from torch.utils.checkpoint import checkpoint


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def sgd(model):
    torch.optim.SGD(model.parameters(), lr=0.1).step()


def adam(model):
    torch.optim.Adam(model.parameters(), lr=0.1).step()


def fused_adam(model):
    torch.optim.Adam(model.parameters(), lr=0.1, fused=True).step()


def through_data(model):
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)


def vector_to_parameters(model):
    params = list(model.parameters())
    vector = parameters_to_vector(params) - 0.1 * parameters_to_vector([p.grad for p in params])
    torch.nn.utils.vector_to_parameters(vector, params)


def through_numpy(model):
    for p in model.parameters():
        p.detach().numpy()[...] -= 0.1 * p.grad.numpy()


def through_dlpack(model):
    for p in model.parameters():
        torch.from_dlpack(p.detach()).add_(p.grad, alpha=-0.1)


def through_storage(model):
    for p in model.parameters():
        p.untyped_storage().copy_((p - 0.1 * p.grad).detach().untyped_storage())


def first_layer_only(model):
    torch.optim.SGD(model[0].parameters(), lr=0.1).step()


def with_(context, model):
    with context:
        return model(x).float()


FORWARD = {
    "plain": lambda model: model(x),
    "hooks, keep": lambda model: with_(saved_tensors_hooks(lambda t: t, lambda t: t), model),
    "hooks, copy": lambda model: with_(saved_tensors_hooks(torch.clone, lambda t: t), model),
    "save_on_cpu": lambda model: with_(save_on_cpu(), model),
    "save_on_cpu, pinned": lambda model: with_(save_on_cpu(pin_memory=True), model),
    "checkpoint": lambda model: checkpoint(model, x, use_reentrant=False),
    "autocast": lambda model: with_(torch.autocast("cpu", dtype=torch.bfloat16), model),
}


def second_backward(forward, update):  # (1)!
    model = make_model()
    out = FORWARD[forward](model)
    loss_a, loss_b = F.mse_loss(out, target), out.pow(2).mean()
    loss_a.backward(retain_graph=True)
    update(model)
    model.zero_grad()
    try:
        loss_b.backward()
    except RuntimeError as error:
        return model, str(error)
    return model, [p.grad for p in model.parameters()]


def grads_at(model, forward):
    out = FORWARD[forward](model)
    return torch.autograd.grad(out.pow(2).mean(), list(model.parameters()))


def same(grads, reference):
    return all(
        torch.allclose(g, r, rtol=1e-5, atol=1e-6) for g, r in zip(grads, reference, strict=True)
    )


def far(grads, reference):
    return max((g - r).abs().max().item() for g, r in zip(grads, reference, strict=True)) > 1e-3


def verdict(forward, update):  # (2)!
    model, result = second_backward(forward, update)
    if isinstance(result, str):
        assert result.startswith(
            "one of the variables needed for gradient computation has been modified by an inplace"
        )
        return "error"
    old = grads_at(make_model(), forward)
    new = grads_at(model, forward)
    assert far(new, old)
    if same(result, old):
        assert far(result, new)
        return "old parameters"
    assert far(result, old) and far(result, new)
    return "a mix"


EXPECTED = {  # (3)!
    ("plain", sgd): "error",
    ("plain", adam): "error",
    ("plain", fused_adam): "a mix",
    ("plain", through_data): "a mix",
    ("plain", vector_to_parameters): "old parameters",
    ("plain", through_numpy): "a mix",
    ("plain", through_dlpack): "a mix",
    ("plain", through_storage): "a mix",
    ("hooks, keep", sgd): "a mix",
    ("save_on_cpu", sgd): "a mix",
    ("checkpoint", sgd): "a mix",
    ("hooks, copy", sgd): "old parameters",
    ("save_on_cpu, pinned", sgd): "old parameters",
    ("autocast", sgd): "old parameters",
    ("plain", first_layer_only): "old parameters",
}
for (forward, update), expected in EXPECTED.items():
    found = verdict(forward, update)
    assert found == expected, (forward, update.__name__, found)

lesson_grads = [p.grad for p in model.parameters()]
assert far(lesson_grads, grads_at(old_model, "plain"))  # (4)!
assert far(lesson_grads, grads_at(model, "plain"))


def fused_adamw(model):
    torch.optim.AdamW(model.parameters(), lr=0.1, fused=True).step()


def fused_sgd(model):
    torch.optim.SGD(model.parameters(), lr=0.1, fused=True).step()


def fused_adagrad(model):
    torch.optim.Adagrad(model.parameters(), lr=0.1, fused=True).step()


def foreach_sgd(model):
    torch.optim.SGD(model.parameters(), lr=0.1, foreach=True).step()


def foreach_adam(model):
    torch.optim.Adam(model.parameters(), lr=0.1, foreach=True).step()


checks = [(sgd, True), (adam, True), (foreach_sgd, True), (foreach_adam, True)]
checks += [(fused_adam, False), (fused_adamw, False), (fused_sgd, False), (fused_adagrad, False)]
checks += [(through_data, False), (vector_to_parameters, False), (through_numpy, False)]
checks += [(through_dlpack, False), (through_storage, False)]
for update, bumps in checks:  # (5)!
    model = make_model()
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    before = [p._version for p in model.parameters()]
    values = [p.detach().clone() for p in model.parameters()]
    update(model)
    after = [p._version for p in model.parameters()]
    pairs = zip(values, model.parameters(), strict=True)
    assert all((v - p).abs().min() > 1e-3 for v, p in pairs), update.__name__
    assert all(a > b for a, b in zip(after, before, strict=True)) == bumps, update.__name__
    assert all(a == b for a, b in zip(after, before, strict=True)) != bumps, update.__name__

p = make_model()[2].weight
assert p.data.data_ptr() == p.data_ptr()  # (6)!
before = p._version
p.data.add_(1.0)
assert p._version == before

assert x.cpu() is x  # (7)!

model = make_model()
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
saved_weight = out.grad_fn._saved_mat2  # (8)!
assert saved_weight.dtype == torch.bfloat16
assert saved_weight.untyped_storage().data_ptr() != model[2].weight.untyped_storage().data_ptr()

packed = []
with saved_tensors_hooks(lambda t: packed.append(t.untyped_storage().data_ptr()) or t, lambda t: t):
    model(x)
saved = [n for n, p in model.named_parameters() if p.untyped_storage().data_ptr() in packed]
assert saved == ["2.weight"], saved  # (9)!

FORWARD["autocast, bf16 model"] = lambda model: FORWARD["autocast"](model.to(torch.bfloat16))
model = make_model().to(torch.bfloat16)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
saved_weight = out.grad_fn._saved_mat2
assert saved_weight.untyped_storage().data_ptr() == model[2].weight.untyped_storage().data_ptr()
assert verdict("autocast, bf16 model", sgd) == "error"  # (10)!

FORWARD["checkpoint, first layers"] = lambda model: model[2](
    checkpoint(model[:2], x, use_reentrant=False)
)
assert verdict("checkpoint, first layers", sgd) == "error"  # (11)!
FORWARD["checkpoint, last layer"] = lambda model: checkpoint(
    model[2], model[:2](x), use_reentrant=False
)
assert verdict("checkpoint, last layer", sgd) == "a mix"  # (12)!

model = make_model()
out = model(x)
saved = out.grad_fn._saved_mat2.untyped_storage().data_ptr()
out.pow(2).mean().backward()
assert saved == model[2].weight.untyped_storage().data_ptr()
vector_to_parameters(model)
assert saved != model[2].weight.untyped_storage().data_ptr()  # (13)!

model = make_model()
out = model(x)
out.pow(2).mean().backward(retain_graph=True)
old_params, first = list(model.parameters()), [p.grad.clone() for p in model.parameters()]
moved = {k: v - 0.1 * v.grad for k, v in model.named_parameters()}
model.load_state_dict({k: v.detach().clone() for k, v in moved.items()}, assign=True)  # (14)!
out.pow(2).mean().backward()
assert all(p.grad is None for p in model.parameters())
assert not any(p is o for p, o in zip(model.parameters(), old_params, strict=True))
assert same([o.grad - f for o, f in zip(old_params, first, strict=True)], first)

model = make_model()
out = model(x)
out.pow(2).mean().backward(retain_graph=True)
first = [p.grad.clone() for p in model.parameters()]
model.double()  # (15)!
model.zero_grad()
out.pow(2).mean().backward()
assert all(p.dtype == torch.float64 for p in model.parameters())
assert all(p.grad.dtype == torch.float32 for p in model.parameters())
assert same([p.grad for p in model.parameters()], first)

holder = torch.nn.Module()
holder.w = torch.nn.Parameter(torch.randn(x.shape[-1], 3))
out = x.detach().requires_grad_() @ holder.w  # (16)!
out.pow(2).mean().backward(retain_graph=True)
holder.double()
try:
    out.pow(2).mean().backward()
    raised = ""
except RuntimeError as exc:
    raised = str(exc)
assert "dtype" in raised, raised
# --8<-- [end:proof]
