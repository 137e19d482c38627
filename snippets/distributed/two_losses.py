import torch
import torch.distributed as dist
from launch import launch  # (1)!
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model():
    torch.manual_seed(0)  # the same starting weights on every rank
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def two_losses(y):
    return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


def flat_grad(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def counting_allreduce(calls, bucket):  # (2)!
    calls["all-reduce"] += 1
    return allreduce_hook(None, bucket)


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]  # each rank sees its own 4 rows

    reference = make_model()  # one process, the full batch, no DDP
    sum(two_losses(reference(full_batch))).backward()

    plain = make_model()  # without DDP, the two ways give the same gradients
    loss1, loss2 = two_losses(plain(full_batch))
    loss1.backward(retain_graph=True)
    loss2.backward()
    same_without_ddp = torch.allclose(flat_grad(plain), flat_grad(reference), atol=1e-6)
    assert same_without_ddp
    if rank == 0:
        print("without DDP, both ways give the same gradients:", same_without_ddp)

    for style in ("sum of losses, one backward", "two backwards, retain_graph=True"):
        model = make_model()
        ddp = DDP(model)
        calls = {"all-reduce": 0}
        ddp.register_comm_hook(calls, counting_allreduce)
        loss1, loss2 = two_losses(ddp(x))
        if style.startswith("sum"):
            (loss1 + loss2).backward()  # (3)!
        else:
            loss1.backward(retain_graph=True)  # (4)!
            loss2.backward()
        grad = flat_grad(model)
        both = [torch.empty_like(grad) for _ in range(world_size)]
        dist.all_gather(both, grad)
        identical = all(torch.equal(g, both[0]) for g in both)
        correct = torch.allclose(grad, flat_grad(reference), atol=1e-6)

        # What the second style really computed: loss1's gradient averaged over the
        # ranks, plus loss2's gradient from this rank's data alone.
        plain = make_model()
        g1 = torch.autograd.grad(two_losses(plain(x))[0], list(plain.parameters()))
        g2 = torch.autograd.grad(two_losses(plain(x))[1], list(plain.parameters()))
        g1 = torch.cat([g.flatten() for g in g1])
        dist.all_reduce(g1)
        local_loss2 = g1 / world_size + torch.cat([g.flatten() for g in g2])
        loss2_local_only = torch.allclose(grad, local_loss2, atol=1e-6)

        torch.optim.SGD(model.parameters(), lr=0.1).step()
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        all_params = [torch.empty_like(params) for _ in range(world_size)]
        dist.all_gather(all_params, params)
        same_model = all(torch.equal(p, all_params[0]) for p in all_params)

        assert calls["all-reduce"] == 1  # this small model fits in one bucket
        assert same_model == identical
        if style.startswith("sum"):
            assert identical and correct
        else:
            assert not identical and not correct and loss2_local_only  # (5)!
        if rank == 0:
            print(style)
            print("  all-reduce calls:                       ", calls["all-reduce"])
            print("  gradients identical on both ranks:      ", identical)
            print("  equal to one process on the full batch: ", correct)
            print("  loss2's gradient left out of all-reduce:", loss2_local_only)
            print("  same model on both ranks after a step:  ", same_model)


if __name__ == "__main__":
    launch(on_every_rank)
