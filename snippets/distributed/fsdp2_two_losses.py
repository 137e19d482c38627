import contextlib
import os
import tempfile

import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.profiler import ProfilerActivity, profile

# --8<-- [start:count]
COLLECTIVES = {"all_gather_single": "all-gathers", "reduce_scatter_single": "reduce-scatters"}
COUNTS = dict.fromkeys(COLLECTIVES.values(), 0)


def count_calls(name):  # (1)!
    collective = getattr(dist, name)

    def counted(*args, **kwargs):
        COUNTS[COLLECTIVES[name]] += 1
        return collective(*args, **kwargs)

    setattr(dist, name, counted)


for _name in COLLECTIVES:
    count_calls(_name)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


def sharded(reshard_after_forward):
    model = make_model()
    for layer in (model[0], model[2]):
        fully_shard(layer, reshard_after_forward=reshard_after_forward)  # (2)!
    fully_shard(model, reshard_after_forward=reshard_after_forward)
    return model
# --8<-- [end:count]


# --8<-- [start:step]
def step(model, x, style):
    loss1, loss2 = two_losses(model(x))
    if style == "sum of losses":
        (loss1 + loss2).backward()  # (1)!
    elif style == "two backwards":
        loss1.backward(retain_graph=True)  # (2)!
        loss2.backward()
    else:
        model.set_requires_gradient_sync(False)  # (3)!
        loss1.backward(retain_graph=True)
        model.set_requires_gradient_sync(True)
        loss2.backward()
# --8<-- [end:step]


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


def full_grad(model):  # each rank holds a shard of every gradient: gather the whole
    return torch.cat([p.grad.full_tensor().flatten() for p in model.parameters()])


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    reference = make_model()  # one process, the full batch, no FSDP
    sum(two_losses(reference(full_batch))).backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])

    rows = []
    for reshard in (True, False):
        for style in ("sum of losses", "two backwards", "two, sync off for the first"):
            model = sharded(reshard)
            for name in COUNTS:
                COUNTS[name] = 0
            with quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
                step(model, x, style)
            counts = dict(COUNTS)
            # The same count from the profiler: the c10d ops that really ran.
            ops = [e.name for e in prof.events()]
            assert counts["all-gathers"] == ops.count("c10d::_allgather_base_")
            assert counts["reduce-scatters"] == ops.count("c10d::_reduce_scatter_base_")

            assert all(isinstance(p.grad, DTensor) for p in model.parameters())  # shards
            grad = full_grad(model)
            right = torch.allclose(grad, expected, rtol=1e-5, atol=1e-6)
            assert right
            rows.append((reshard, style, counts["all-gathers"], counts["reduce-scatters"], right))

    expected_counts = {  # per step, for this model: 2 sharded layers
        (True, "sum of losses"): (4, 2),
        (True, "two backwards"): (6, 4),
        (True, "two, sync off for the first"): (6, 2),
        (False, "sum of losses"): (2, 2),
        (False, "two backwards"): (4, 4),
        (False, "two, sync off for the first"): (4, 2),
    }
    assert {(r, s): (ag, rs) for r, s, ag, rs, _ in rows} == expected_counts
    if rank == 0:
        print("reshard_after_forward | way                         | all-gathers | "
              "reduce-scatters | = full batch")
        for reshard, style, ag, rs, right in rows:
            print(f"{reshard!s:21} | {style:27} | {ag:11} | {rs:15} | {right}")


if __name__ == "__main__":
    launch(on_every_rank)
