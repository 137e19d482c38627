# --8<-- [start:lesson]
import warnings

import torch
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def input_penalty_loss(net, x):  # (1)!
    x = x.clone().requires_grad_(True)
    out = net(x)
    (grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    return out.mean() + ((grad_x.norm(dim=1) - 1) ** 2).mean()


def on_every_rank(rank, world_size):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    ddp = DDP(model)  # (2)!
    with warnings.catch_warnings(record=True) as caught:  # (3)!
        warnings.simplefilter("always")
        input_penalty_loss(ddp, x).backward()  # (4)!
    return torch.cat([p.grad.flatten() for p in model.parameters()]), caught


if __name__ == "__main__":
    results = launch(on_every_rank)
    print("rank: 0 | warning:", *sorted({str(w.message).split(".")[0] for w in results[0][1]}))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import os
import sys
import tempfile

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
torch.manual_seed(0)
reference = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
input_penalty_loss(reference, batch).backward()
expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
(grad0, caught0), (grad1, caught1) = results
assert torch.equal(grad0, grad1) and torch.allclose(grad0, expected, atol=1e-6)  # (1)!
for caught in (caught0, caught1):
    assert [w.category for w in caught] == [UserWarning]
    assert str(caught[0].message).startswith("Grad strides do not match bucket view strides")
    assert "This is not an error, but may impair performance" in str(caught[0].message)


def count_allreduce(calls, bucket):
    calls.append(1)
    return allreduce_hook(None, bucket)


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (2)!
with tempfile.TemporaryFile() as stderr_copy:
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(stderr_copy.fileno(), 2)
    try:
        torch.manual_seed(0)
        ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
        calls = []
        ddp.register_comm_hook(calls, count_allreduce)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            input_penalty_loss(ddp, batch).backward()
        assert calls == [1]

        ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
        calls = []
        ddp.register_comm_hook(calls, count_allreduce)
        loss = input_penalty_loss(ddp, batch)
        del ddp
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            loss.backward()
        assert calls == []  # (3)!

        ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                ddp(batch).pow(2).mean().backward(create_graph=True)  # (4)!
                raise AssertionError("backward(create_graph=True) through DDP should raise")
            except RuntimeError as error:
                message = str(error)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        dist.destroy_process_group()
    stderr_copy.seek(0)
    cpp_lines = stderr_copy.read().decode().splitlines()
assert message == "a leaf Variable that requires grad is being used in an in-place operation."
assert [str(w.message).split(" which")[0] for w in caught] == [
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient"
]
cpp_warning = "Using DistributedDataParallel with create_graph=True is not well-supported."
assert cpp_lines and all(cpp_warning in " ".join(line.split()) for line in cpp_lines)  # (5)!
# --8<-- [end:proof]
