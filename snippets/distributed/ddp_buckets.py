import os

# The checks at the end use find_unused_parameters=True on a model without unused parameters,
# and DDP prints a C++ warning to stderr about the cost of that flag; it says nothing about
# correctness, so C++ warnings are silenced (errors still raise).
os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"

# --8<-- [start:buckets]
import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD_SIZE = 4


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


def flat(grads):
    return torch.cat([g.flatten() for g in grads])


def counting_allreduce(buckets, bucket):  # one entry per all-reduce: its parameter count
    buckets.append(len(bucket.parameters()))
    return allreduce_hook(None, bucket)


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]  # 2 rows per rank
    reference = make_model()
    sum(two_losses(reference(full_batch))).backward()
    expected = flat(p.grad for p in reference.parameters())
    plain = make_model()  # what the two-backward way computes: see "Two losses" above
    g1 = flat(torch.autograd.grad(two_losses(plain(x))[0], list(plain.parameters())))
    g2 = flat(torch.autograd.grad(two_losses(plain(x))[1], list(plain.parameters())))
    dist.all_reduce(g1)
    loss1_averaged_loss2_local = g1 / world_size + g2

    for style in ("sum of losses, one backward", "two backwards, retain_graph=True"):
        model = make_model()
        ddp = DDP(model, bucket_cap_mb=1e-6)  # (1)!
        buckets = []
        ddp.register_comm_hook(buckets, counting_allreduce)
        per_step = []
        for _ in range(2):  # (2)!
            model.zero_grad()
            buckets.clear()
            loss1, loss2 = two_losses(ddp(x))
            if style.startswith("sum"):
                (loss1 + loss2).backward()
            else:
                loss1.backward(retain_graph=True)
                loss2.backward()
            per_step.append(list(buckets))
        grad = flat(p.grad for p in model.parameters())
        every = [torch.empty_like(grad) for _ in range(world_size)]
        dist.all_gather(every, grad)
        identical = all(torch.equal(g, every[0]) for g in every)
        right = torch.allclose(grad, expected, rtol=1e-5, atol=1e-6)
        local = torch.allclose(grad, loss1_averaged_loss2_local, rtol=1e-5, atol=1e-6)

        assert per_step == [[4], [1, 1, 1, 1]]  # (3)!
        if style.startswith("sum"):
            assert identical and right
        else:
            assert not identical and not right and local  # (4)!
        if rank == 0:
            print(style)
            print("  parameters per all-reduce, step 1 and step 2:", *per_step)
            print("  gradients identical on all 4 ranks:     ", identical)
            print("  equal to one process on the full batch: ", right)
            print("  loss2's gradient left out of all-reduce:", local)
# --8<-- [end:buckets]


# What the page says about bucket order and the first iterations, checked here.
class Reversed(nn.Module):  # `second` runs first, so its gradients are ready last
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.first(self.second(x))


def logging_allreduce(state, bucket):
    log, name_of = state
    log.append(("all-reduce", [name_of[p] for p in bucket.parameters()]))
    return allreduce_hook(None, bucket)


def events(x, **settings):
    """Per step: when each gradient was ready and which parameters each all-reduce carried."""
    torch.manual_seed(0)
    model = Reversed()
    name_of = {p: name for name, p in model.named_parameters()}
    log = []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda p: log.append(("ready", name_of[p])))
    ddp = DDP(model, bucket_cap_mb=1e-6, **settings)
    ddp.register_comm_hook((log, name_of), logging_allreduce)
    steps = []
    for _ in range(2):
        log.clear()
        ddp(x).sum().backward()
        steps.append(list(log))
    return steps


def buckets_wait_for_earlier_ones(x):
    ready_order = ["first.bias", "first.weight", "second.bias", "second.weight"]
    # find_unused_parameters=True: buckets by size in reverse parameter order, never rebuilt
    for log in events(x, find_unused_parameters=True):
        assert [e[1] for e in log if e[0] == "ready"] == ready_order
        reduced = [e[1] for e in log if e[0] == "all-reduce"]
        assert reduced == [["second.bias"], ["second.weight"], ["first.bias"], ["first.weight"]]
        # bucket 2 (first.bias) was ready before bucket 0 (second.bias), and waited for it
        assert (log.index(("ready", "first.bias")) < log.index(("ready", "second.bias"))
                < log.index(("all-reduce", ["first.bias"])))
    # the default: one bucket, then rebuilt in the order the gradients arrived
    step1, step2 = events(x)
    assert [len(e[1]) for e in step1 if e[0] == "all-reduce"] == [4]
    assert [e[1] for e in step2 if e[0] == "all-reduce"] == [[name] for name in ready_order]


def parameters_per_allreduce(x, steps=3, **settings):
    ddp = DDP(make_model(), **settings)
    buckets = []
    ddp.register_comm_hook(buckets, counting_allreduce)
    per_step = []
    for _ in range(steps):
        buckets.clear()
        ddp(x).sum().backward()
        per_step.append(list(buckets))
    return per_step


def first_iterations(x):
    one, four = [4], [1, 1, 1, 1]
    assert parameters_per_allreduce(x, bucket_cap_mb=1e-6) == [one, four, four]
    assert parameters_per_allreduce(x, bucket_cap_mb_list=[1e-6]) == [four, four, four]
    assert parameters_per_allreduce(x, bucket_cap_mb=1e-6, static_graph=True) == [
        one, one, four]


def main(rank, world_size):
    on_every_rank(rank, world_size)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(2))
    buckets_wait_for_earlier_ones(x)
    first_iterations(x)


if __name__ == "__main__":
    launch(main, world_size=WORLD_SIZE)
