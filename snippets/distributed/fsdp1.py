import contextlib
import os
import tempfile
import traceback
import warnings

import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.profiler import ProfilerActivity, profile

TOL = {"rtol": 1e-5, "atol": 1e-6}  # ranks against one process on the whole batch
# The collectives FSDP1 makes on CPU tensors, counted like those of FSDP2 (see that example).
COLLECTIVES = {"all_gather": "all-gather", "reduce_scatter_single": "reduce-scatter",
               "all_reduce": "all-reduce"}
PROFILER_OPS = {"all-gather": "c10d::allgather_", "reduce-scatter": "c10d::_reduce_scatter_base_",
                "all-reduce": "c10d::allreduce_"}
COUNTS = dict.fromkeys(COLLECTIVES.values(), 0)


def count_calls(name):
    collective = getattr(dist, name)

    def counted(*args, **kwargs):
        COUNTS[COLLECTIVES[name]] += 1
        return collective(*args, **kwargs)

    setattr(dist, name, counted)


for _name in COLLECTIVES:
    count_calls(_name)


def make_model():
    torch.manual_seed(0)  # the same starting weights on every rank
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


# --8<-- [start:fsdp1]
def sharded(strategy):
    return FSDP(
        make_model(),
        device_id=torch.device("cpu"),  # (1)!
        sharding_strategy=strategy,
        auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),  # (2)!
        use_orig_params=True,
    )


def step(model, x, way):
    loss1, loss2 = two_losses(model(x))
    if way == "sum of losses":
        (loss1 + loss2).backward()
    elif way == "two backwards":
        loss1.backward(retain_graph=True)
        loss2.backward()  # (3)!
    else:
        (loss1 + loss2).backward(create_graph=True)
# --8<-- [end:fsdp1]


@contextlib.contextmanager
def quiet_stderr():
    """The profiler's C++ side writes start/stop lines to file descriptor 2: drop them."""
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def flat(grads):
    return torch.cat([g.flatten() for g in grads])


def full_grad(model):  # the whole gradient, gathered from the shards
    with FSDP.summon_full_params(model, with_grads=True):
        return flat(p.grad.clone() for p in model.parameters())


def failing_line(error):  # the line of step() that raised, without its comment
    frames = traceback.extract_tb(error.__traceback__)
    return next(f.line for f in reversed(frames) if f.name == "step").split("#")[0].strip()


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    reference = make_model()  # one process, the full batch, no FSDP
    sum(two_losses(reference(full_batch))).backward()
    expected = flat(p.grad for p in reference.parameters())
    plain = make_model()  # DDP's wrong answer: loss1 averaged over the ranks, loss2 local
    g1 = flat(torch.autograd.grad(two_losses(plain(x))[0], list(plain.parameters())))
    g2 = flat(torch.autograd.grad(two_losses(plain(x))[1], list(plain.parameters())))
    dist.all_reduce(g1)
    loss1_averaged_loss2_local = g1 / world_size + g2

    rows, seen_warnings = {}, set()
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"):
        for way in ("sum of losses", "two backwards", "create_graph=True"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = sharded(ShardingStrategy[strategy])
                for name in COUNTS:
                    COUNTS[name] = 0
                try:
                    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
                        step(model, x, way)
                except RuntimeError as error:
                    message, line = str(error), failing_line(error)
                else:
                    message, line = None, None
            seen_warnings.update(str(w.message).split(". ")[0] for w in caught)
            counts = {name: n for name, n in COUNTS.items() if n}
            ops = [e.name for e in prof.events()]
            assert all(ops.count(PROFILER_OPS[name]) == n for name, n in COUNTS.items())
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

    sums = {"FULL_SHARD": {"all-gather": 4, "reduce-scatter": 2},
            "SHARD_GRAD_OP": {"all-gather": 2, "reduce-scatter": 2},
            "NO_SHARD": {"all-reduce": 2}}
    for strategy, counts in sums.items():  # right, for one step's collectives
        assert rows[strategy, "sum of losses"] == (True, True, False, counts)
        assert rows[strategy, "create_graph=True"][:2] == (
            "FSDP does not support gradients of gradients",
            "(loss1 + loss2).backward(create_graph=True)")
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):  # the second backward raises
        row = rows[strategy, "two backwards"]
        assert len(row) == 3 and row[1:] == ("loss2.backward()", sums[strategy])
        assert row[0].startswith("setStorage: ")
        assert row[0].endswith("out of bounds for storage of size 0")
    # NO_SHARD: no error, the ranks disagree, loss2 never all-reduced: as under DDP
    assert rows["NO_SHARD", "two backwards"] == (False, False, True, sums["NO_SHARD"])

    try:  # without device_id
        FSDP(make_model())
    except RuntimeError as error:
        no_device_id = str(error)
    else:
        no_device_id = "no error"
    assert no_device_id.startswith("FSDP needs a non-CPU accelerator device")
    assert seen_warnings == {
        "The `NO_SHARD` sharding strategy is deprecated",
        "Using backward() with create_graph=True will create a reference cycle between "
        "the parameter and its gradient which can cause a memory leak",
    }
    if rank == 0:
        print("strategy      | way               | result")
        for (strategy, way), row in rows.items():
            counts = ", ".join(f"{n} {name}s" for name, n in row[-1].items())
            if len(row) == 4:
                same, right, local, _ = row
                result = ("= full batch" if right else "wrong, no error") + f" ({counts})"
                if not same:
                    result += "; ranks differ; loss2 not all-reduced" if local else "?"
            else:
                message, line, _ = row
                if message.startswith("setStorage"):
                    message = "setStorage: ... storage of size 0"
                result = ("second backward: " if line == "loss2.backward()" else "") + (
                    f"RuntimeError: {message}")
            print(f"{strategy:13} | {way:17} | {result}")
        print("without device_id: RuntimeError:", no_device_id)
        for warning in sorted(seen_warnings):
            print("warning:", warning)


if __name__ == "__main__":
    launch(on_every_rank)
