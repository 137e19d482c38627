import contextlib
import copy

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointError, checkpoint

torch.manual_seed(0)
template = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(16, 4)


def train_step(forward):
    """One training step on a fresh copy of the model: gradients and BatchNorm buffers after it."""
    model = copy.deepcopy(template)
    forward(model).pow(2).mean().backward()
    grads = [p.grad for p in model.parameters()]
    return grads, dict(model[1].named_buffers())


# --8<-- [start:shown]
@contextlib.contextmanager
def restore_buffers(module):  # (1)!
    saved = {name: b.clone() for name, b in module.named_buffers()}
    try:
        yield
    finally:
        for name, b in module.named_buffers():
            b.copy_(saved[name])


def plain(model):
    return model(x)


def checkpointed(model):  # (2)!
    return checkpoint(model, x, use_reentrant=False)


def checkpointed_restoring(model):  # (3)!
    return checkpoint(
        model, x, use_reentrant=False,
        context_fn=lambda: (contextlib.nullcontext(), restore_buffers(model)),
    )


def batchnorm_outside(model):  # (4)!
    hidden = model[1](checkpoint(model[0], x, use_reentrant=False))
    return checkpoint(model[2:], hidden, use_reentrant=False)
# --8<-- [end:shown]


def recompute_in_eval_mode(model):  # a wrong fix
    @contextlib.contextmanager
    def eval_mode():
        model[1].eval()
        try:
            yield
        finally:
            model[1].train()

    return checkpoint(
        model, x, use_reentrant=False,
        context_fn=lambda: (contextlib.nullcontext(), eval_mode()),
    )


ref_grads, ref_buffers = train_step(plain)


def same_grads(grads):
    return all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))


def same_buffers(buffers):
    return all(torch.equal(buffers[k], ref_buffers[k]) for k in ref_buffers)


# The problem: right gradients, buffers updated twice.
grads, buffers = train_step(checkpointed)
assert same_grads(grads) and not same_buffers(buffers)
assert (ref_buffers["num_batches_tracked"].item(), buffers["num_batches_tracked"].item()) == (1, 2)
# The second update is one more momentum step towards the same batch statistics.
with torch.no_grad():
    h = template[0](x)
momentum = template[1].momentum
once_more = (1 - momentum) * ref_buffers["running_mean"] + momentum * h.mean(0)
assert torch.allclose(buffers["running_mean"], once_more, rtol=1e-6, atol=1e-7)
print("checkpointed:  same gradients", same_grads(grads), "| same buffers", same_buffers(buffers),
      "| num_batches_tracked", buffers["num_batches_tracked"].item(), "instead of 1")

for name, forward in [("restoring", checkpointed_restoring), ("BN outside", batchnorm_outside)]:
    grads, buffers = train_step(forward)
    assert same_grads(grads) and same_buffers(buffers)
    label = f"{name}:"
    print(f"{label:14} same gradients", same_grads(grads), "| same buffers", same_buffers(buffers))

# The recompute in eval mode would normalise with the running statistics, not the batch's: other
# values than the forward pass saved. The checkpoint's default determinism check refuses it.
try:
    train_step(recompute_in_eval_mode)
    refused = None
except CheckpointError as error:
    refused = str(error)
assert "Recomputed values for the following tensors have different metadata" in refused
assert "'shape': torch.Size([8])" in refused and "'shape': torch.Size([0])" in refused
print("eval recompute: CheckpointError")

# The reentrant variant recomputes the same way and updates the buffers twice too.
xr = x.clone().requires_grad_()
grads, buffers = train_step(lambda model: checkpoint(model, xr, use_reentrant=True))
assert buffers["num_batches_tracked"].item() == 2 and not same_buffers(buffers)
print("use_reentrant=True: num_batches_tracked", buffers["num_batches_tracked"].item())
