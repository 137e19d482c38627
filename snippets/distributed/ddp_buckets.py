# --8<-- [start:lesson]
import torch
from launch import launch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    grads, ids = {}, []
    for way in ("summed", "two_backward"):
        torch.manual_seed(0)
        ddp = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), bucket_cap_mb=1e-6)
        ddp.register_comm_hook(  # (1)!
            ids, lambda ids, bucket: ids.append(bucket.index()) or allreduce_hook(None, bucket))
        for _ in range(2):  # (2)!
            ddp.zero_grad()
            loss1, loss2 = (y := ddp(x)).pow(2).mean(), y.sum(dim=1).tanh().mean()
            if way == "summed":
                (loss1 + loss2).backward()
            else:
                loss1.backward(retain_graph=True)  # (3)!
                loss2.backward()
        grads[way] = torch.cat([p.grad.flatten() for p in ddp.module.parameters()])
    return grads, ids


if __name__ == "__main__":
    for way in (results := launch(on_every_rank))[0][0]:
        print(f"{way} | same_grads_on_both_ranks:", torch.equal(*(r[0][way] for r in results)))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc
import os
import sys
import tempfile

import torch.distributed as dist


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def grad_of(loss_index, x):
    model = mlp()
    y = model(x)
    loss = (y.pow(2).mean(), y.sum(dim=1).tanh().mean())[loss_index]
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])


shards = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(2)
expected = sum(grad_of(i, torch.cat(shards)) for i in (0, 1))
loss1_averaged = (grad_of(0, shards[0]) + grad_of(0, shards[1])) / 2
assert [r[1] for r in results] == [[0, 0, 1, 2, 3] * 2] * 2  # (1)!
summed, twice = ([r[0][way] for r in results] for way in results[0][0])
tol = {"rtol": 1e-5, "atol": 1e-6}
assert torch.equal(*summed) and all(torch.allclose(g, expected, **tol) for g in summed)  # (2)!
assert not torch.equal(*twice)
for g, shard in zip(twice, shards, strict=True):
    assert not torch.allclose(g, expected, **tol)
    assert torch.allclose(g, loss1_averaged + grad_of(1, shard), **tol)


def log_allreduce(log, bucket):
    log.append([p.label for p in bucket.parameters()])
    return allreduce_hook(None, bucket)


def logs(model, steps=2, two_passes=False, **settings):
    for name, p in model.named_parameters():
        p.label = name
        p.register_post_accumulate_grad_hook(lambda p: log.append(p.label))
    ddp, log, per_step = DDP(model, bucket_cap_mb=1e-6, **settings), [], []
    ddp.register_comm_hook(log, log_allreduce)
    for _ in range(steps):
        log.clear()
        y = ddp(shards[0])
        y.pow(2).mean().backward(retain_graph=two_passes)
        if two_passes:
            y.sum(dim=1).tanh().mean().backward()
        per_step.append(list(log))
    return per_step


def sizes(model, **settings):
    return [[len(e) for e in log if isinstance(e, list)] for log in logs(model, **settings)]


class Reversed(nn.Sequential):
    def forward(self, x):
        return self[0](self[1](x))


one, four = [4], [1, 1, 1, 1]
arrival = ["0.bias", "0.weight", "1.bias", "1.weight"]
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (3)!
try:
    assert sizes(mlp()) == sizes(mlp(), two_passes=True) == [one, four]  # (4)!
    with tempfile.TemporaryFile() as stderr_copy:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(stderr_copy.fileno(), 2)
        try:
            steps = logs(Reversed(nn.Linear(4, 4), nn.Linear(4, 4)), find_unused_parameters=True)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        stderr_copy.seek(0)
        assert all(b"did not find any unused" in line for line in stderr_copy if line.strip())
    for log in steps:
        assert [e for e in log if isinstance(e, str)] == arrival  # (5)!
        assert [e for e in log if isinstance(e, list)] == [
            ["1.bias"],
            ["1.weight"],
            ["0.bias"],
            ["0.weight"],
        ]
        assert log.index("0.bias") < log.index("1.bias") < log.index(["0.bias"])
    step1, step2 = logs(Reversed(nn.Linear(4, 4), nn.Linear(4, 4)))  # (6)!
    assert len([e for e in step1 if isinstance(e, list)]) == 1
    assert [e for e in step2 if isinstance(e, list)] == [[n] for n in arrival]
    assert sizes(mlp(), steps=3) == [one, four, four]
    assert sizes(mlp(), steps=3, bucket_cap_mb_list=[1e-6]) == [four] * 3
    assert sizes(mlp(), steps=3, static_graph=True) == [one, one, four]
finally:
    gc.collect()  # (7)!
    assert not [o for o in gc.get_objects() if type(o) is DDP]
    dist.destroy_process_group()
# --8<-- [end:proof]
