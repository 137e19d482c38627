# --8<-- [start:lesson]
import warnings

import torch
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parameter_penalty_loss(net, x):  # (1)!
    loss = net(x).pow(2).mean()
    grads = torch.autograd.grad(loss, list(net.parameters()), create_graph=True)
    return loss + sum(g.pow(2).sum() for g in grads)


def on_every_rank(rank, world_size):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    ddp = DDP(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parameter_penalty_loss(ddp, x).backward()  # (2)!
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    if rank == 0:
        print(f"rank: 0 | grad_norm: {grad.norm().item():.4g}")
    return grad, caught


if __name__ == "__main__":
    results = launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook


def grad_of(x):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    parameter_penalty_loss(model, x).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
shards = batch.chunk(2)
(grad0, caught0), (grad1, caught1) = results
assert torch.equal(grad0, grad1)  # (1)!
assert not torch.allclose(grad0, grad_of(batch), atol=1e-6)  # (2)!
assert torch.allclose(grad0, (grad_of(shards[0]) + grad_of(shards[1])) / 2, atol=1e-6)
for caught in (caught0, caught1):
    assert [w.category for w in caught] == [UserWarning]
    assert str(caught[0].message).startswith("Grad strides do not match bucket view strides")


def count_allreduce(calls, bucket):
    calls.append(1)
    return allreduce_hook(None, bucket)


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (3)!
try:
    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    calls = []
    ddp.register_comm_hook(calls, count_allreduce)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        parameter_penalty_loss(ddp, batch).backward()
    assert calls == [1]
finally:
    ddp = None
    gc.collect()  # (4)!
    assert not [o for o in gc.get_objects() if type(o) is DDP]
    dist.destroy_process_group()
# --8<-- [end:proof]
