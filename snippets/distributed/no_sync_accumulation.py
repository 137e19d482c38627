# --8<-- [start:lesson]
import contextlib

import torch
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def on_every_rank(rank, world_size):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    ddp = DDP(model)
    batch = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    micro_batches = batch.chunk(world_size)[rank].chunk(4)
    for i, micro in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():  # (1)!
            loss = ddp(micro).pow(2).mean() / len(micro_batches)  # (2)!
            loss.backward()  # (3)!
        if i == 0:
            after_first = model[0].weight.grad.clone()
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    if rank == 0:
        print(f"micro_batches: {len(micro_batches)} | grad_norm: {grad.norm().item():.4g}")
    return after_first, grad


if __name__ == "__main__":
    results = launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


batch = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
reference = make_model()
reference(batch).pow(2).mean().backward()
expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
(first0, grad0), (first1, grad1) = results
assert not torch.equal(first0, first1)  # (1)!
assert torch.equal(grad0, grad1) and torch.allclose(grad0, expected, atol=1e-6)  # (2)!


def count_allreduce(calls, bucket):
    calls.append(1)
    return allreduce_hook(None, bucket)


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (3)!
try:
    ddp = DDP(make_model())
    calls = []
    ddp.register_comm_hook(calls, count_allreduce)
    micro_batches = batch.chunk(4)
    for i, micro in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss = ddp(micro).pow(2).mean() / len(micro_batches)
            loss.backward()
            try:
                loss.backward()  # (4)!
                raise AssertionError("each micro-batch's graph should be freed")
            except RuntimeError as error:
                assert str(error).startswith("Trying to backward through the graph a second time")
        assert len(calls) == (1 if last else 0)

    outside = DDP(make_model())
    calls = []
    outside.register_comm_hook(calls, count_allreduce)
    loss = outside(micro_batches[0]).pow(2).mean()
    with outside.no_sync():  # (5)!
        loss.backward()
    assert calls == [1]
finally:
    ddp = outside = None
    gc.collect()  # (6)!
    assert not [o for o in gc.get_objects() if type(o) is DDP]
    dist.destroy_process_group()
# --8<-- [end:proof]
