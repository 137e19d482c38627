import functools
import warnings

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64), nn.Tanh())
        self.forward_calls = 0

    def forward(self, x):
        self.forward_calls += 1
        return self.net(x)


class KeptAlive(TorchDispatchMode):
    """Records every storage that any operator creates, below autograd: it sees the values inside
    a checkpointed block too, whatever saved-tensor hooks checkpoint installs there."""

    def __init__(self):
        super().__init__()
        self.made = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in tree_leaves(result):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                self.made[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())
        return result

    def bytes_alive(self, besides):
        """Bytes of the storages made in the block that are still alive, other than `besides`."""
        skip = {t.untyped_storage().data_ptr() for t in besides}
        alive = (n for ptr, (ref, n) in self.made.items() if not ref.expired() and ptr not in skip)
        return sum(alive)


# --8<-- [start:shown]
block = Block()
x = torch.randn(32, 64, requires_grad=True)


def run(use_checkpoint):
    block.zero_grad()
    x.grad = None
    block.forward_calls = 0
    with KeptAlive() as kept:  # sees every tensor any operator makes, inside checkpoint too
        if use_checkpoint:
            out = checkpoint(block, x, use_reentrant=False)  # (1)!
        else:
            out = block(x)
    kept_bytes = kept.bytes_alive(besides=[out, x, *block.parameters()])
    out.pow(2).sum().backward()
    grads = [x.grad.clone(), *(p.grad.clone() for p in block.parameters())]
    return grads, kept_bytes, block.forward_calls


plain, plain_bytes, plain_calls = run(use_checkpoint=False)
ckpt, ckpt_bytes, ckpt_calls = run(use_checkpoint=True)

assert all(torch.equal(a, b) for a, b in zip(plain, ckpt, strict=True))  # (2)!
assert (plain_bytes, ckpt_bytes) == (2 * 32 * 256 * 4, 0)  # (3)!
assert (plain_calls, ckpt_calls) == (1, 2)  # (4)!
print("same gradients, bit for bit:", True)
print(f"intermediate bytes kept after forward: {plain_bytes} plain, {ckpt_bytes} checkpointed")
print(f"forward calls of the block:            {plain_calls} plain, {ckpt_calls} checkpointed")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = checkpoint(block, x)  # (5)!
assert caught[0].category is UserWarning
assert "use_reentrant parameter should be passed explicitly" in str(caught[0].message)
assert "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise" in str(
    caught[0].message
)
assert type(out.grad_fn).__name__ == "CheckpointFunctionBackward"  # the reentrant variant
print("without use_reentrant: a UserWarning, then the", type(out.grad_fn).__name__, "variant")

try:
    torch.autograd.grad(out.pow(2).sum(), [x])  # (6)!
    refused = None
except RuntimeError as error:
    refused = str(error)
assert "incompatible with .grad() or passing an `inputs` parameter" in refused
print("use_reentrant=True and autograd.grad: RuntimeError")
# --8<-- [end:shown]

# The measurement can fail: told to save addmm's outputs, checkpoint keeps them, and KeptAlive
# sees both (32 x 256 and 32 x 64 float32), although no outer saved-tensor hook would.
policy = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.addmm.default])
with KeptAlive() as kept:
    out = checkpoint(block, x, use_reentrant=False, context_fn=policy)
policy_bytes = kept.bytes_alive(besides=[out, x, *block.parameters()])
assert policy_bytes == (32 * 256 + 32 * 64) * 4
print("checkpoint that saves addmm's outputs keeps:", policy_bytes, "bytes")

# The reentrant variant needs an input that requires grad; without one, no gradient, a warning.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = checkpoint(block, x.detach(), use_reentrant=True)
assert not out.requires_grad
assert "None of the inputs have requires_grad=True" in str(caught[0].message)
assert checkpoint(block, x.detach(), use_reentrant=False).requires_grad
print("input without requires_grad: output requires grad only with use_reentrant=False")

# use_reentrant=False works with torch.autograd.grad and backward(inputs=...): same gradients.
expected = torch.autograd.grad(block(x).pow(2).sum(), [x, block.net[0].weight])
got = torch.autograd.grad(
    checkpoint(block, x, use_reentrant=False).pow(2).sum(), [x, block.net[0].weight]
)
assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))
x.grad = None
checkpoint(block, x, use_reentrant=False).pow(2).sum().backward(inputs=[x])
assert torch.equal(x.grad, expected[0])
print("use_reentrant=False with autograd.grad and backward(inputs=...): same gradients")
