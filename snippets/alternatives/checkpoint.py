import warnings

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64), nn.Tanh())
        self.forward_calls = 0

    def forward(self, x):
        self.forward_calls += 1
        return self.net(x)


block = Block()
x = torch.randn(32, 64, requires_grad=True)


# Storages that stay alive anyway, graph or no graph: the parameters and the input.
alive_anyway = {t.untyped_storage().data_ptr() for t in [*block.parameters(), x]}


def run(use_checkpoint):
    storages = {}

    def pack(t):  # called for every tensor autograd saves for the backward pass
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    block.zero_grad()
    x.grad = None
    block.forward_calls = 0
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if use_checkpoint:
            out = checkpoint(block, x, use_reentrant=False)  # (1)!
        else:
            out = block(x)
    out.pow(2).sum().backward()  # outside the hooks: only the block's saved tensors count
    grads = [x.grad.clone(), *(p.grad.clone() for p in block.parameters())]
    saved_bytes = sum(storages.values())  # each storage once: W1.t() is a view of W1
    extra = sum(n for ptr, n in storages.items() if ptr not in alive_anyway)
    return grads, saved_bytes, extra, block.forward_calls


plain, plain_bytes, plain_extra, plain_calls = run(use_checkpoint=False)
ckpt, ckpt_bytes, ckpt_extra, ckpt_calls = run(use_checkpoint=True)

same = all(torch.allclose(a, b) for a, b in zip(plain, ckpt, strict=True))
assert same  # (2)!
assert ckpt_bytes == x.numel() * x.element_size() < plain_bytes  # (3)!
weights = sum(layer.weight.nbytes for layer in (block.net[0], block.net[2]))
assert plain_bytes == weights + x.nbytes + plain_extra
assert (plain_extra, ckpt_extra) == (73728, 0)
assert (plain_calls, ckpt_calls) == (1, 2)  # (4)!
print("same gradients:", same)
print(f"bytes the block saves for backward: {plain_bytes} plain, {ckpt_bytes} checkpointed")
print(f"  of them intermediate values:       {plain_extra} plain, {ckpt_extra} checkpointed")
print(f"forward calls of the block:         {plain_calls} plain, {ckpt_calls} checkpointed")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    checkpoint(block, x)  # (5)!
message = str(caught[0].message)
assert "the use_reentrant parameter should be passed explicitly" in message
assert "use_reentrant=False is recommended" in message
print("without use_reentrant:", message.split(". ")[0] + ".")
