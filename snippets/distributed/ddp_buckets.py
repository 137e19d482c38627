# --8<-- [start:lesson]
import torch
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    grads = {}
    for way in ("sum of losses", "two backward passes"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        ddp = DDP(model, bucket_cap_mb=1e-6)  # (1)!
        for _ in range(2):  # (2)!
            ddp.zero_grad()
            y = ddp(x)
            loss1, loss2 = y.pow(2).mean(), y.sum(dim=1).tanh().mean()
            if way == "sum of losses":
                (loss1 + loss2).backward()
            else:
                loss1.backward(retain_graph=True)  # (3)!
                loss2.backward()
        grads[way] = torch.cat([p.grad.flatten() for p in model.parameters()])
    return grads


if __name__ == "__main__":
    results = launch(on_every_rank)
    for way in results[0]:
        print(f"{way}: same gradients on both ranks:", torch.equal(*(r[way] for r in results)))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import os
import sys
import tempfile

import torch.distributed as dist
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


batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
shards = batch.chunk(2)
expected = grad_of(0, batch) + grad_of(1, batch)
summed = [r["sum of losses"] for r in results]
twice = [r["two backward passes"] for r in results]
assert torch.equal(summed[0], summed[1])  # (1)!
assert all(torch.allclose(g, expected, rtol=1e-5, atol=1e-6) for g in summed)
assert not torch.equal(twice[0], twice[1])
loss1_averaged = (grad_of(0, shards[0]) + grad_of(0, shards[1])) / 2
for g, shard in zip(twice, shards, strict=True):
    assert not torch.allclose(g, expected, rtol=1e-5, atol=1e-6)
    assert torch.allclose(g, loss1_averaged + grad_of(1, shard), rtol=1e-5, atol=1e-6)


def logging_allreduce(state, bucket):
    log, name_of = state
    log.append(("all-reduce", [name_of[p] for p in bucket.parameters()]))
    return allreduce_hook(None, bucket)


def events(model, x, way="sum", steps=2, **settings):
    name_of = {p: name for name, p in model.named_parameters()}
    log = []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: log.append(("ready", name_of[p])))
    ddp = DDP(model, **settings)
    ddp.register_comm_hook((log, name_of), logging_allreduce)
    per_step = []
    for _ in range(steps):
        log.clear()
        y = ddp(x)
        if way == "sum":
            sum(two_losses(y)).backward()
        else:
            loss1, loss2 = two_losses(y)
            loss1.backward(retain_graph=True)
            loss2.backward()
        per_step.append(list(log))
    return per_step


def sizes(per_step):
    return [[len(e[1]) for e in log if e[0] == "all-reduce"] for log in per_step]


class Reversed(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.first(self.second(x))


def reversed_model():
    torch.manual_seed(0)
    return Reversed()


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (2)!
try:
    one, four = [4], [1, 1, 1, 1]
    for way in ("sum", "two backward passes"):  # (3)!
        assert sizes(events(make_model(), shards[0], way, bucket_cap_mb=1e-6)) == [one, four]

    ready_order = ["first.bias", "first.weight", "second.bias", "second.weight"]
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(2))
    with tempfile.TemporaryFile() as stderr_copy:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(stderr_copy.fileno(), 2)
        try:
            logs = events(reversed_model(), x, find_unused_parameters=True, bucket_cap_mb=1e-6)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        stderr_copy.seek(0)
        lines = [line for line in stderr_copy.read().decode().splitlines() if line.strip()]
    assert all("did not find any unused parameters" in line for line in lines)
    for log in logs:
        assert [e[1] for e in log if e[0] == "ready"] == ready_order  # (4)!
        reduced = [e[1] for e in log if e[0] == "all-reduce"]
        assert reduced == [["second.bias"], ["second.weight"], ["first.bias"], ["first.weight"]]
        assert (
            log.index(("ready", "first.bias"))
            < log.index(("ready", "second.bias"))
            < log.index(("all-reduce", ["first.bias"]))
        )
    step1, step2 = events(reversed_model(), x, bucket_cap_mb=1e-6)  # (5)!
    assert sizes([step1]) == [one]
    assert [e[1] for e in step2 if e[0] == "all-reduce"] == [[name] for name in ready_order]

    assert sizes(events(make_model(), x, steps=3, bucket_cap_mb=1e-6)) == [one, four, four]
    assert sizes(events(make_model(), x, steps=3, bucket_cap_mb_list=[1e-6])) == [four] * 3
    assert sizes(events(make_model(), x, steps=3, bucket_cap_mb=1e-6, static_graph=True)) == [
        one,
        one,
        four,
    ]
finally:
    dist.destroy_process_group()
# --8<-- [end:proof]
