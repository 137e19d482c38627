import contextlib

import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def counting_allreduce(calls, bucket):
    calls["all-reduce"] += 1
    return allreduce_hook(None, bucket)


def on_every_rank(rank, world_size):
    full_batch = torch.randn(16, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]  # 8 rows per rank
    micro_batches = x.chunk(4)  # 4 micro-batches of 2 rows

    model = make_model()
    ddp = DDP(model)
    calls = {"all-reduce": 0}
    ddp.register_comm_hook(calls, counting_allreduce)

    graphs = []
    for i, micro in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():  # (1)!
            loss = ddp(micro).pow(2).mean() / len(micro_batches)  # (2)!
            loss.backward()  # (3)!
        graphs.append(loss.grad_fn)
        if i == 0:
            local = model[0].weight.grad.clone()
            both = [torch.empty_like(local) for _ in range(world_size)]
            dist.all_gather(both, local)
            in_sync_after_first = torch.equal(both[0], both[1])

    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    both = [torch.empty_like(grad) for _ in range(world_size)]
    dist.all_gather(both, grad)

    reference = make_model()  # one process, one big batch of all 16 rows
    reference(full_batch).pow(2).mean().backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])

    try:
        loss.backward()  # the last micro-batch's graph, a second time
    except RuntimeError as error:
        second_backward = str(error).split(" (")[0].split(".")[0]
    else:
        second_backward = "no error"

    # The same first micro-batch with its forward pass OUTSIDE no_sync(), backward inside.
    outside = make_model()
    ddp_outside = DDP(outside)
    calls_outside = {"all-reduce": 0}
    ddp_outside.register_comm_hook(calls_outside, counting_allreduce)
    loss = ddp_outside(micro_batches[0]).pow(2).mean()
    with ddp_outside.no_sync():  # (4)!
        loss.backward()
    grad_outside = torch.cat([p.grad.flatten() for p in outside.parameters()])
    gathered = [torch.empty_like(grad_outside) for _ in range(world_size)]
    dist.all_gather(gathered, grad_outside)
    outside_in_sync = torch.equal(gathered[0], gathered[1])

    assert second_backward == "Trying to backward through the graph a second time"
    assert calls_outside["all-reduce"] == 1 and outside_in_sync
    assert len({id(g) for g in graphs}) == 4  # a new graph for every micro-batch
    assert not in_sync_after_first  # no_sync: nothing was communicated yet
    assert calls["all-reduce"] == 1
    assert torch.equal(both[0], both[1])
    assert torch.allclose(grad, expected, atol=1e-6)
    if rank == 0:
        print("micro-batches per rank:           ", len(micro_batches))
        print("new graphs built:                 ", len({id(g) for g in graphs}))
        print("ranks in sync after micro-batch 1:", in_sync_after_first)
        print("all-reduce calls in the step:     ", calls["all-reduce"])
        print("gradients identical on both ranks:", torch.equal(both[0], both[1]))
        print("equal to one big batch of 16 rows:", torch.allclose(grad, expected, atol=1e-6))
        print("second backward, last micro-batch:", second_backward)
        print("forward outside no_sync(), backward inside:")
        print("  all-reduce calls:                ", calls_outside["all-reduce"])
        print("  ranks in sync after it:          ", outside_in_sync)


if __name__ == "__main__":
    launch(on_every_rank)
