# --8<-- [start:lesson]
import torch
import torch.distributed as dist
from launch import launch  # (1)!
from torch.nn.parallel import DistributedDataParallel as DDP


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    grads = {}
    for way in ("summed", "two_backward"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        ddp = DDP(model)
        y = ddp(x)
        loss1, loss2 = y.pow(2).mean(), y.sum(dim=1).tanh().mean()
        if way == "summed":
            (loss1 + loss2).backward()  # (2)!
        else:
            loss1.backward(retain_graph=True)  # (3)!
            loss2.backward()
        grads[way] = torch.cat([p.grad.flatten() for p in ddp.parameters()])
        every = [torch.empty_like(grads[way]) for _ in range(world_size)]
        dist.all_gather(every, grads[way])  # (4)!
        if rank == 0:
            print(f"{way} | same_grads_on_every_rank:", all(map(torch.equal, every, every[1:])))
    return grads


if __name__ == "__main__":
    results = launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc

from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


def grad_of(loss_index, x):
    model = make_model()
    loss = two_losses(model(x))[loss_index]
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])


shards = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(2)
expected = grad_of(0, torch.cat(shards)) + grad_of(1, torch.cat(shards))  # (1)!
plain = make_model()
loss1, loss2 = two_losses(plain(torch.cat(shards)))
loss1.backward(retain_graph=True)
loss2.backward()
assert torch.allclose(
    torch.cat([p.grad.flatten() for p in plain.parameters()]), expected, atol=1e-6
)

summed, twice = ([r[way] for r in results] for way in results[0])
assert torch.equal(*summed) and all(torch.allclose(g, expected, atol=1e-6) for g in summed)  # (2)!
assert not torch.equal(*twice)
loss1_averaged = (grad_of(0, shards[0]) + grad_of(0, shards[1])) / 2  # (3)!
for g, other, shard in zip(twice, summed, shards, strict=True):
    assert not torch.allclose(g, expected, atol=1e-6)
    assert torch.allclose(g, loss1_averaged + grad_of(1, shard), atol=1e-6)
    assert not torch.allclose(other, loss1_averaged + grad_of(1, shard), atol=1e-6)  # (4)!


def count_allreduce(calls, bucket):
    calls.append(len(bucket.parameters()))
    return allreduce_hook(None, bucket)


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (5)!
try:
    for two_passes in (False, True):
        ddp, calls = DDP(make_model()), []
        ddp.register_comm_hook(calls, count_allreduce)
        loss1, loss2 = two_losses(ddp(shards[0]))
        (loss1 if two_passes else loss1 + loss2).backward(retain_graph=two_passes)
        assert calls == [4]
        if two_passes:
            loss2.backward()
            assert calls == [4]
finally:
    ddp = None
    gc.collect()  # (6)!
    assert not [o for o in gc.get_objects() if type(o) is DDP]
    dist.destroy_process_group()
# --8<-- [end:proof]
