# --8<-- [start:lesson]
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64), nn.Tanh())
x = torch.randn(32, 64, requires_grad=True)
runs = []
block.register_forward_pre_hook(lambda module, args: runs.append(1))

out = checkpoint(block, x, use_reentrant=False)  # (1)!
out.pow(2).sum().backward()  # (2)!
print(f"x.grad_norm: {x.grad.norm().item():.4g}")
print(f"block[0].weight.grad_norm: {block[0].weight.grad.norm().item():.4g}")
print("block_forward_runs:", len(runs))  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
import functools
import warnings

from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import create_selective_checkpoint_contexts

lesson_grads = [x.grad.clone(), *(p.grad.clone() for p in block.parameters())]
assert len(runs) == 2


class KeptAlive(TorchDispatchMode):  # (1)!
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
        skip = {t.untyped_storage().data_ptr() for t in besides}
        alive = (n for ptr, (ref, n) in self.made.items() if not ref.expired() and ptr not in skip)
        return sum(alive)


def run(use_checkpoint):
    block.zero_grad()
    x.grad = None
    runs.clear()
    with KeptAlive() as kept:
        out = checkpoint(block, x, use_reentrant=False) if use_checkpoint else block(x)
    kept_bytes = kept.bytes_alive(besides=[out, x, *block.parameters()])
    out.pow(2).sum().backward()
    grads = [x.grad.clone(), *(p.grad.clone() for p in block.parameters())]
    return grads, kept_bytes, len(runs)


plain, plain_bytes, plain_calls = run(use_checkpoint=False)
ckpt, ckpt_bytes, ckpt_calls = run(use_checkpoint=True)
assert all(torch.equal(a, b) for a, b in zip(plain, ckpt, strict=True))  # (2)!
assert all(torch.equal(a, b) for a, b in zip(lesson_grads, ckpt, strict=True))
assert (plain_bytes, ckpt_bytes) == (2 * 32 * 256 * 4, 0)  # (3)!
assert (plain_calls, ckpt_calls) == (1, 2)  # (4)!

policy = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.addmm.default])
with KeptAlive() as kept:
    out = checkpoint(block, x, use_reentrant=False, context_fn=policy)  # (5)!
assert kept.bytes_alive(besides=[out, x, *block.parameters()]) == (32 * 256 + 32 * 64) * 4

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = checkpoint(block, x)  # (6)!
assert caught[0].category is UserWarning
message = str(caught[0].message)
assert "use_reentrant parameter should be passed explicitly" in message
assert "calling checkpoint without use_reentrant will raise an exception" in message
before_2_15 = torch.__version__ < "2.15"
assert ("Starting in PyTorch 2.9, calling checkpoint" in message) == before_2_15
assert ("In a future release, calling checkpoint" in message) == (not before_2_15)
assert type(out.grad_fn).__name__ == "CheckpointFunctionBackward"

try:
    torch.autograd.grad(out.pow(2).sum(), [x])  # (7)!
    refused = None
except RuntimeError as error:
    refused = str(error)
assert "incompatible with .grad() or passing an `inputs` parameter" in refused
x.grad = None
try:
    checkpoint(block, x, use_reentrant=True).pow(2).sum().backward(inputs=[x])
    refused_inputs = None
except RuntimeError as error:
    refused_inputs = str(error)
assert refused_inputs == refused and x.grad is None

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = checkpoint(block, x.detach(), use_reentrant=True)  # (8)!
assert not out.requires_grad
assert "None of the inputs have requires_grad=True" in str(caught[0].message)
assert checkpoint(block, x.detach(), use_reentrant=False).requires_grad

expected = torch.autograd.grad(block(x).pow(2).sum(), [x, block[0].weight])  # (9)!
got = torch.autograd.grad(
    checkpoint(block, x, use_reentrant=False).pow(2).sum(), [x, block[0].weight]
)
assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))
x.grad = None
checkpoint(block, x, use_reentrant=False).pow(2).sum().backward(inputs=[x])
assert torch.equal(x.grad, expected[0])
# --8<-- [end:proof]
