import torch
import torch.nn.functional as F
from torch.autograd.graph import save_on_cpu, saved_tensors_hooks
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
x, target = torch.randn(16, 4), torch.randn(16, 2)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


# --8<-- [start:cases]
def sgd(model):
    torch.optim.SGD(model.parameters(), lr=0.1).step()


def adam(model):
    torch.optim.Adam(model.parameters(), lr=0.1).step()


def fused_adam(model):
    torch.optim.Adam(model.parameters(), lr=0.1, fused=True).step()  # (1)!


def through_data(model):
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)  # (2)!


def first_layer_only(model):
    torch.optim.SGD(model[0].parameters(), lr=0.1).step()  # (3)!


FORWARD = {  # how the forward pass runs
    "plain": lambda model: model(x),
    "hooks, keep": lambda model: with_(saved_tensors_hooks(lambda t: t, lambda t: t), model),
    "hooks, copy": lambda model: with_(saved_tensors_hooks(torch.clone, lambda t: t), model),
    "save_on_cpu": lambda model: with_(save_on_cpu(), model),  # (4)!
    "checkpoint": lambda model: checkpoint(model, x, use_reentrant=False),  # (5)!
    "autocast": lambda model: with_(torch.autocast("cpu", dtype=torch.bfloat16), model),  # (6)!
}


def with_(context, model):
    with context:
        return model(x).float()


def second_backward(forward, update):
    model = make_model()
    out = FORWARD[forward](model)
    loss_a, loss_b = F.mse_loss(out, target), out.pow(2).mean()
    loss_a.backward(retain_graph=True)
    update(model)  # the parameters change between the two backward passes
    model.zero_grad()
    try:
        loss_b.backward()
    except RuntimeError as error:
        return model, str(error)
    return model, [p.grad for p in model.parameters()]
# --8<-- [end:cases]


def grads_at(model, forward):
    """The gradient of loss_b from a new forward pass through `model` as it is now."""
    out = FORWARD[forward](model)
    return torch.autograd.grad(out.pow(2).mean(), list(model.parameters()))


def same(grads, reference):
    return all(
        torch.allclose(g, r, rtol=1e-5, atol=1e-6) for g, r in zip(grads, reference, strict=True)
    )


def far(grads, reference):
    return max((g - r).abs().max().item() for g, r in zip(grads, reference, strict=True)) > 1e-3


def verdict(forward, update):
    model, result = second_backward(forward, update)
    if isinstance(result, str):
        assert result.startswith(
            "one of the variables needed for gradient computation has been modified by an inplace"
        )
        return "error"
    old = grads_at(make_model(), forward)  # the parameters the forward pass saw
    new = grads_at(model, forward)  # the parameters after the update
    assert far(new, old)  # the update changed the gradient: the two references differ
    if same(result, old):
        assert far(result, new)
        return "no error: gradient at the old parameters"
    assert far(result, old) and far(result, new)  # not close to either reference
    return "no error: gradient at NEITHER, a mix"


EXPECTED = {
    ("plain", sgd): "error",
    ("plain", adam): "error",
    ("plain", fused_adam): "no error: gradient at NEITHER, a mix",
    ("plain", through_data): "no error: gradient at NEITHER, a mix",
    ("hooks, keep", sgd): "no error: gradient at NEITHER, a mix",
    ("save_on_cpu", sgd): "no error: gradient at NEITHER, a mix",
    ("checkpoint", sgd): "no error: gradient at NEITHER, a mix",
    ("hooks, copy", sgd): "no error: gradient at the old parameters",
    ("autocast", sgd): "no error: gradient at the old parameters",
    ("plain", first_layer_only): "no error: gradient at the old parameters",
}
for (forward, update), expected in EXPECTED.items():
    found = verdict(forward, update)
    assert found == expected, (forward, update.__name__, found)
    print(f"{forward:<12} {update.__name__:<17} {found}")

# Why, one mechanism at a time.
# 1. An optimizer step bumps the version of each parameter it changes; the fused kernel does not.
def fused_adamw(model):
    torch.optim.AdamW(model.parameters(), lr=0.1, fused=True).step()


def fused_sgd(model):
    torch.optim.SGD(model.parameters(), lr=0.1, fused=True).step()


checks = [(sgd, True), (adam, True), (fused_adam, False), (fused_adamw, False), (fused_sgd, False)]
for update, bumps in [*checks, (through_data, False)]:
    model = make_model()
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    before = [p._version for p in model.parameters()]
    update(model)
    after = [p._version for p in model.parameters()]
    assert all(a > b for a, b in zip(after, before, strict=True)) == bumps, update.__name__
    assert all(a == b for a, b in zip(after, before, strict=True)) != bumps, update.__name__
# 2. `.data` is a tensor with its own version counter, on the same memory.
p = make_model()[2].weight
assert p.data.data_ptr() == p.data_ptr()
p.data.add_(1.0)
assert p._version == 1  # only the initialisation bumped it; the add_ through .data did not
# 3. save_on_cpu packs `tensor.cpu()`, which is the tensor itself when it is already on the CPU.
assert x.cpu() is x
# 4. Under autocast the graph saves a bfloat16 copy of the last layer's weight, not the weight.
model = make_model()
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
saved_weight = out.grad_fn._saved_mat2
assert saved_weight.dtype == torch.bfloat16
assert saved_weight.untyped_storage().data_ptr() != model[2].weight.untyped_storage().data_ptr()
# 5. Without autocast the graph saves the last layer's weight, and no tensor of the first layer.
packed = []
with saved_tensors_hooks(lambda t: packed.append(t.untyped_storage().data_ptr()) or t, lambda t: t):
    model(x)
saved = [n for n, p in model.named_parameters() if p.untyped_storage().data_ptr() in packed]
assert saved == ["2.weight"], saved
# 6. Autocast copies only what it casts. With the model already in bfloat16, the graph saves the
#    weight itself under a bfloat16 autocast, and the same SGD step is caught.
FORWARD["autocast, bf16 model"] = lambda model: FORWARD["autocast"](model.to(torch.bfloat16))
model = make_model().to(torch.bfloat16)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
saved_weight = out.grad_fn._saved_mat2
assert saved_weight.untyped_storage().data_ptr() == model[2].weight.untyped_storage().data_ptr()
assert verdict("autocast, bf16 model", sgd) == "error"
# 7. A checkpoint recomputes only what is inside it. Checkpoint the first two layers and run the
#    last one plainly: that layer saves its weight as usual, and the SGD step is caught.
FORWARD["checkpoint, first layers"] = lambda model: model[2](
    checkpoint(model[:2], x, use_reentrant=False)
)
assert verdict("checkpoint, first layers", sgd) == "error"
# Checkpoint only the last layer instead: the recomputation reads the changed weight, unchecked.
FORWARD["checkpoint, last layer"] = lambda model: checkpoint(
    model[2], model[:2](x), use_reentrant=False
)
assert verdict("checkpoint, last layer", sgd) == "no error: gradient at NEITHER, a mix"
