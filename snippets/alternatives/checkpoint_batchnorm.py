# --8<-- [start:lesson]
import contextlib

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(16, 4)


@contextlib.contextmanager
def restore_buffers(module):  # (1)!
    saved = {name: b.clone() for name, b in module.named_buffers()}
    try:
        yield
    finally:
        for name, b in module.named_buffers():
            b.copy_(saved[name])


def forward_then_recompute():  # (2)!
    return contextlib.nullcontext(), restore_buffers(model)


out = checkpoint(model, x, use_reentrant=False, context_fn=forward_then_recompute)
out.pow(2).mean().backward()
print("num_batches_tracked:", model[1].num_batches_tracked.item())
print("running_mean_norm:", round(model[1].running_mean.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import copy

from torch.utils.checkpoint import CheckpointError

torch.manual_seed(0)
template = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
assert torch.equal(torch.randn(16, 4), x)


def train_step(forward):
    model = copy.deepcopy(template)
    forward(model).pow(2).mean().backward()
    return [p.grad for p in model.parameters()], dict(model[1].named_buffers())


ref_grads, ref_buffers = train_step(lambda model: model(x))  # (1)!


def same_grads(grads):
    return all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))


def same_buffers(buffers):
    return all(torch.equal(buffers[k], ref_buffers[k]) for k in ref_buffers)


assert same_grads([p.grad for p in model.parameters()])  # (2)!
assert same_buffers(dict(model[1].named_buffers()))

grads, buffers = train_step(lambda model: checkpoint(model, x, use_reentrant=False))  # (3)!
assert same_grads(grads) and not same_buffers(buffers)
assert (ref_buffers["num_batches_tracked"].item(), buffers["num_batches_tracked"].item()) == (1, 2)
with torch.no_grad():
    h = template[0](x)
momentum = template[1].momentum
once_more = (1 - momentum) * ref_buffers["running_mean"] + momentum * h.mean(0)
assert torch.allclose(buffers["running_mean"], once_more, rtol=1e-6, atol=1e-7)

xr = x.clone().requires_grad_()
grads, buffers = train_step(lambda model: checkpoint(model, xr, use_reentrant=True))  # (4)!
assert buffers["num_batches_tracked"].item() == 2 and not same_buffers(buffers)


def recompute_in_eval_mode(model):  # (5)!
    @contextlib.contextmanager
    def eval_mode():
        model[1].eval()
        try:
            yield
        finally:
            model[1].train()

    return checkpoint(
        model, x, use_reentrant=False, context_fn=lambda: (contextlib.nullcontext(), eval_mode())
    )


try:
    train_step(recompute_in_eval_mode)
    refused = None
except CheckpointError as error:
    refused = str(error)
assert "Recomputed values for the following tensors have different metadata" in refused
assert "'shape': torch.Size([8])" in refused and "'shape': torch.Size([0])" in refused

dropout = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5))


def dropout_grad(preserve_rng_state):  # (6)!
    dropout.zero_grad()
    torch.manual_seed(1)
    out = checkpoint(dropout, x, use_reentrant=False, preserve_rng_state=preserve_rng_state)
    out.sum().backward()
    return dropout[0].weight.grad.clone()


assert not torch.allclose(dropout_grad(True), dropout_grad(False))
# --8<-- [end:proof]
