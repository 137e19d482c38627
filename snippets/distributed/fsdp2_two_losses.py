# --8<-- [start:lesson]
import warnings

import torch
from launch import launch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.debug import CommDebugMode


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    for module in (model[0], model[2], model):
        fully_shard(module)  # (1)!
    with warnings.catch_warnings(), CommDebugMode() as comm:  # (2)!
        warnings.simplefilter("ignore")
        y = model(x)
        loss1, loss2 = y.pow(2).mean(), y.sum(dim=1).tanh().mean()
        (loss1 + loss2).backward()  # (3)!
    if rank == 0:
        print({str(op): n for op, n in comm.get_comm_counts().items()})
    return [p.grad.full_tensor() for p in model.parameters()]  # (4)!


if __name__ == "__main__":
    grads = launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import contextlib
import multiprocessing
import os
import tempfile
from unittest import mock

from torch.distributed.tensor import DTensor
from torch.profiler import ProfilerActivity, profile

ALL_GATHER, REDUCE_SCATTER = torch.ops.c10d._allgather_base_, torch.ops.c10d._reduce_scatter_base_


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


def step(model, x, way):
    loss1, loss2 = two_losses(model(x))
    if way == "sum of losses":
        (loss1 + loss2).backward()
    elif way == "two backwards":
        loss1.backward(retain_graph=True)
        loss2.backward()
    else:
        model.set_requires_gradient_sync(False)  # (1)!
        if way == "two, sync and reshard off for the first":
            model.set_reshard_after_backward(False)
        loss1.backward(retain_graph=True)
        model.set_requires_gradient_sync(True)
        model.set_reshard_after_backward(True)
        loss2.backward()


@contextlib.contextmanager
def quiet_stderr():  # (2)!
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def sharded(reshard):
    model = make_model()
    for module in (model[0], model[2], model):
        fully_shard(module, reshard_after_forward=reshard)
    return model


def every_way(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    rows = {}
    for reshard in (True, False):
        for way in (
            "sum of losses",
            "two backwards",
            "two, sync off for the first",
            "two, sync and reshard off for the first",
        ):
            model = sharded(reshard)
            with warnings.catch_warnings(), CommDebugMode() as comm:
                warnings.simplefilter("ignore")
                step(model, x, way)
            counts = comm.get_comm_counts()
            assert set(counts) == {ALL_GATHER, REDUCE_SCATTER}  # (3)!
            assert all(isinstance(p.grad, DTensor) for p in model.parameters())  # (4)!
            assert all(isinstance(p, DTensor) for p in model.parameters())
            with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
                step(sharded(reshard), x, way)
            ops = [e.name for e in prof.events()]
            assert counts[ALL_GATHER] == ops.count("c10d::_allgather_base_")
            assert counts[REDUCE_SCATTER] == ops.count("c10d::_reduce_scatter_base_")
            rows[reshard, way] = (
                (counts[ALL_GATHER], counts[REDUCE_SCATTER]),
                [p.grad.full_tensor() for p in model.parameters()],
            )
    return rows


reference = make_model()  # (5)!
full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
sum(two_losses(reference(full_batch))).backward()
expected = [p.grad for p in reference.parameters()]


def right(grads):
    return all(
        torch.allclose(g, e, rtol=1e-5, atol=1e-6) for g, e in zip(grads, expected, strict=True)
    )


assert len(grads) == 2 and all(right(on_rank) for on_rank in grads)  # (6)!

fork = multiprocessing.get_context("fork")
with mock.patch("torch.multiprocessing.get_context", return_value=fork):  # (7)!
    every_rank = launch(every_way)
for rows in every_rank:
    assert all(right(row_grads) for _, row_grads in rows.values())  # (8)!
    assert {key: counts for key, (counts, _) in rows.items()} == {  # (9)!
        (True, "sum of losses"): (4, 2),
        (True, "two backwards"): (6, 4),
        (True, "two, sync off for the first"): (6, 2),
        (True, "two, sync and reshard off for the first"): (4, 2),
        (False, "sum of losses"): (2, 2),
        (False, "two backwards"): (4, 4),
        (False, "two, sync off for the first"): (4, 2),
        (False, "two, sync and reshard off for the first"): (2, 2),
    }
# --8<-- [end:proof]
