import contextlib
import os
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def input_penalty_loss(net, x):  # (1)!
    x = x.clone().requires_grad_(True)
    out = net(x)
    (grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    return out.mean() + ((grad_x.norm(dim=1) - 1) ** 2).mean()


def parameter_penalty_loss(net, x):  # (2)!
    loss = net(x).pow(2).mean()
    grads = torch.autograd.grad(loss, list(net.parameters()), create_graph=True)
    return loss + sum(g.pow(2).sum() for g in grads)


@contextlib.contextmanager
def cpp_warnings():
    """Catch what torch's C++ side writes straight to stderr (file descriptor 2)."""
    lines = []
    with tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines.extend(tmp.read().decode().splitlines())


def counting_allreduce(calls, bucket):  # as in the two-losses example
    calls["all-reduce"] += 1
    return allreduce_hook(None, bucket)


def flat_grad(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    report = {}
    for name, loss_fn in [("input", input_penalty_loss), ("parameter", parameter_penalty_loss)]:
        model = make_model()
        ddp = DDP(model)
        calls = {"all-reduce": 0}
        ddp.register_comm_hook(calls, counting_allreduce)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss_fn(ddp, x).backward()  # (3)!
        grad = flat_grad(model)
        both = [torch.empty_like(grad) for _ in range(world_size)]
        dist.all_gather(both, grad)

        reference = make_model()  # one process, the full batch
        loss_fn(reference, full_batch).backward()
        per_rank = make_model()  # this rank's own loss, averaged over ranks by hand
        loss_fn(per_rank, x).backward()
        averaged = flat_grad(per_rank)
        dist.all_reduce(averaged)
        averaged /= world_size

        report[name] = {
            "all-reduce calls": calls["all-reduce"],
            "gradients identical on both ranks": torch.equal(both[0], both[1]),
            "equal to one process on the full batch": torch.allclose(
                grad, flat_grad(reference), atol=1e-6
            ),
            "equal to the average of per-rank losses": torch.allclose(
                grad, averaged, atol=1e-6
            ),
            "warnings": sorted({str(w.message).split(".")[0] for w in caught}),
        }
        assert all("This is not an error, but may impair performance" in str(w.message)
                   and w.category is UserWarning for w in caught)
    assert report["input"]["warnings"] == ["Grad strides do not match bucket view strides"]
    assert report["parameter"]["warnings"] == []

    model = make_model()
    ddp = DDP(model)
    with cpp_warnings() as lines, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ddp(x).pow(2).mean().backward(create_graph=True)  # (4)!
        except RuntimeError as error:
            failure = str(error)
        else:
            failure = "none"
    expected = "Using DistributedDataParallel with create_graph=True is not well-supported."
    unexpected = [ln for ln in lines if expected not in " ".join(ln.split())]
    sys.stderr.write("\n".join(unexpected))  # anything else stays visible, and fails the test
    assert len(lines) > len(unexpected)
    python_warnings = sorted({str(w.message).split(" which")[0] for w in caught})

    if rank == 0:
        print("backward(create_graph=True) through DDP:")
        print("  C++ warning:", expected)
        print("  Python warning:", *python_warnings)
        print("  RuntimeError:", failure)
        for name, facts in report.items():
            print(f"penalty on the {name} gradient:")
            for fact, value in facts.items():
                print(f"  {fact}: {value}")
    assert all(report["input"][k] for k in list(report["input"])[1:4])
    assert report["input"]["all-reduce calls"] == report["parameter"]["all-reduce calls"] == 1
    assert report["parameter"]["gradients identical on both ranks"]
    assert not report["parameter"]["equal to one process on the full batch"]  # (5)!
    assert report["parameter"]["equal to the average of per-rank losses"]
    assert python_warnings == [
        "Using backward() with create_graph=True will create a reference cycle between the "
        "parameter and its gradient"
    ]
    assert failure == "a leaf Variable that requires grad is being used in an in-place operation."


if __name__ == "__main__":
    launch(on_every_rank)
