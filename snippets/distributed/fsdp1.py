# --8<-- [start:lesson]
import torch
from launch import launch
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    torch.manual_seed(0)
    model = FSDP(
        nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)),
        device_id=torch.device("cpu"),  # (1)!
        auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),  # (2)!
        use_orig_params=True,
    )
    y = model(x)
    loss = y.pow(2).mean() + y.sum(dim=1).tanh().mean()
    loss.backward()  # (3)!
    if rank == 0:
        print(f"rank: 0 | loss: {loss.item():.4g}")
    with FSDP.summon_full_params(model, with_grads=True):  # (4)!
        return [p.grad.clone() for p in model.parameters()]


if __name__ == "__main__":
    grads = launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import contextlib
import multiprocessing
import os
import tempfile
import traceback
import warnings
from unittest import mock

import torch.distributed as dist
from torch.distributed.fsdp import ShardingStrategy
from torch.profiler import ProfilerActivity, profile

TOL = {"rtol": 1e-5, "atol": 1e-6}
COLLECTIVES = {
    "all_gather": "all-gather",
    "reduce_scatter_single": "reduce-scatter",
    "all_reduce": "all-reduce",
}
PROFILER_OPS = {
    "all-gather": "c10d::allgather_",
    "reduce-scatter": "c10d::_reduce_scatter_base_",
    "all-reduce": "c10d::allreduce_",
}


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


def sharded(strategy):
    return FSDP(
        make_model(),
        device_id=torch.device("cpu"),
        sharding_strategy=strategy,
        auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
        use_orig_params=True,
    )


def step(model, x, way):
    loss1, loss2 = two_losses(model(x))
    if way == "sum of losses":
        (loss1 + loss2).backward()
    elif way == "two backwards":
        loss1.backward(retain_graph=True)
        loss2.backward()
    else:
        (loss1 + loss2).backward(create_graph=True)


@contextlib.contextmanager
def quiet_stderr():
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def counting():  # (1)!
    counts = dict.fromkeys(COLLECTIVES.values(), 0)
    with contextlib.ExitStack() as stack:
        for name, label in COLLECTIVES.items():
            collective = getattr(dist, name)

            def counted(*args, _collective=collective, _label=label, **kwargs):
                counts[_label] += 1
                return _collective(*args, **kwargs)

            stack.enter_context(mock.patch.object(dist, name, counted))
        yield counts


def flat(grads):
    return torch.cat([g.flatten() for g in grads])


def full_grad(model):
    with FSDP.summon_full_params(model, with_grads=True):
        return flat(p.grad.clone() for p in model.parameters())


def failing_line(error):
    frames = traceback.extract_tb(error.__traceback__)
    return next(f.line for f in reversed(frames) if f.name == "step").strip()


def every_way(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    reference = make_model()
    sum(two_losses(reference(full_batch))).backward()
    expected = flat(p.grad for p in reference.parameters())
    plain = make_model()
    g1 = flat(torch.autograd.grad(two_losses(plain(x))[0], list(plain.parameters())))
    g2 = flat(torch.autograd.grad(two_losses(plain(x))[1], list(plain.parameters())))
    dist.all_reduce(g1)
    loss1_averaged_loss2_local = g1 / world_size + g2  # (2)!

    rows, seen_warnings = {}, set()
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"):
        for way in ("sum of losses", "two backwards", "create_graph=True"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = sharded(ShardingStrategy[strategy])
                with counting() as counts:
                    try:
                        with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
                            step(model, x, way)
                    except RuntimeError as error:
                        message, line = str(error), failing_line(error)
                    else:
                        message, line = None, None
            seen_warnings.update(str(w.message).split(". ")[0] for w in caught)
            ops = [e.name for e in prof.events()]
            assert all(ops.count(PROFILER_OPS[name]) == n for name, n in counts.items())  # (3)!
            counts = {name: n for name, n in counts.items() if n}
            if message is None:
                grad = full_grad(model)
                every = [torch.empty_like(grad) for _ in range(world_size)]
                dist.all_gather(every, grad)
                same = all(torch.equal(g, every[0]) for g in every)
                right = torch.allclose(grad, expected, **TOL)
                local = torch.allclose(grad, loss1_averaged_loss2_local, **TOL)
                rows[strategy, way] = (same, right, local, counts)
            else:
                rows[strategy, way] = (message, line, counts)

    try:
        FSDP(make_model())  # (4)!
    except RuntimeError as error:
        no_device_id = str(error)
    else:
        no_device_id = "no error"
    return rows, seen_warnings, no_device_id


reference = make_model()  # (5)!
y = reference(torch.randn(8, 4, generator=torch.Generator().manual_seed(1)))
sum(two_losses(y)).backward()
assert len(grads) == 2
for on_rank in grads:
    for g, p in zip(on_rank, reference.parameters(), strict=True):
        assert torch.allclose(g, p.grad, **TOL)

fork = multiprocessing.get_context("fork")
with mock.patch("torch.multiprocessing.get_context", return_value=fork):  # (6)!
    every_rank = launch(every_way)
sums = {
    "FULL_SHARD": {"all-gather": 4, "reduce-scatter": 2},
    "SHARD_GRAD_OP": {"all-gather": 2, "reduce-scatter": 2},
    "NO_SHARD": {"all-reduce": 2},
}
for rows, seen_warnings, no_device_id in every_rank:
    for strategy, counts in sums.items():
        assert rows[strategy, "sum of losses"] == (True, True, False, counts)  # (7)!
        assert rows[strategy, "create_graph=True"][:2] == (  # (8)!
            "FSDP does not support gradients of gradients",
            "(loss1 + loss2).backward(create_graph=True)",
        )
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
        row = rows[strategy, "two backwards"]
        assert len(row) == 3 and row[1:] == ("loss2.backward()", sums[strategy])  # (9)!
        assert row[0].startswith("setStorage: ")
        assert row[0].endswith("out of bounds for storage of size 0")
    assert rows["NO_SHARD", "two backwards"] == (False, False, True, sums["NO_SHARD"])  # (10)!
    assert no_device_id.startswith("FSDP needs a non-CPU accelerator device")
    assert seen_warnings == {  # (11)!
        "The `NO_SHARD` sharding strategy is deprecated",
        "Using backward() with create_graph=True will create a reference cycle between "
        "the parameter and its gradient which can cause a memory leak",
    }
# --8<-- [end:proof]
