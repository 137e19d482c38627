# --8<-- [start:flags]
import os

os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"  # (1)!

import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

SETTINGS = {
    "default": {},
    "find_unused_parameters=True": {"find_unused_parameters": True},
    "static_graph=True": {"static_graph": True},
}


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x):
        y = self.net(x)
        return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk, self.head1, self.head2 = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)

    def forward(self, x):
        z = self.trunk(x).tanh()
        return self.head1(z).pow(2).mean(), self.head2(z).pow(2).mean()


def train(model_class, settings, x, steps=3, summed=False, expected=None):
    torch.manual_seed(0)
    ddp = DDP(model_class(), **settings)
    seen = []
    for step in range(1, steps + 1):
        ddp.zero_grad()
        try:
            loss1, loss2 = ddp(x)
            if summed:
                (loss1 + loss2).backward()  # (2)!
            else:
                loss1.backward(retain_graph=True)
                loss2.backward()
        except RuntimeError as error:
            first_sentence = str(error).split(". ")[0].rstrip(".")
            seen.append(f"step {step}: RuntimeError: {first_sentence}.")  # (3)!
            break
        grad = torch.cat([p.grad.flatten() for p in ddp.parameters()])
        both = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
        dist.all_gather(both, grad)
        seen.append("same" if torch.equal(both[0], both[1]) else "differ")  # (4)!
        if expected is not None:  # (5)!
            seen[-1] += " = full batch" if torch.allclose(grad, expected, atol=1e-6) else ""
    return seen


def full_batch_grad(model_class, full_batch):
    torch.manual_seed(0)
    model = model_class()
    loss1, loss2 = model(full_batch)
    (loss1 + loss2).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    results = {}
    for model_class in (Shared, TwoHeads):
        for name, settings in SETTINGS.items():
            results[model_class.__name__, name] = train(model_class, settings, x)
    results["TwoHeads", "default, one backward of loss1 + loss2"] = train(
        TwoHeads, {}, x, summed=True, expected=full_batch_grad(TwoHeads, full_batch)
    )
    if rank == 0:
        for (model, name), seen in results.items():
            print(f"{model}, {name}:")
            print("   ", ", ".join(seen))

    differ = ["differ"] * 3
    assert all(results["Shared", name] == differ for name in SETTINGS)
    summed = results["TwoHeads", "default, one backward of loss1 + loss2"]
    assert summed == ["same = full batch"] * 3
    assert results["TwoHeads", "default"] == [
        "step 1: RuntimeError: Expected to mark a variable ready only once."
    ]
    assert results["TwoHeads", "find_unused_parameters=True"] == [
        "differ", "step 2: RuntimeError: Encountered gradient which is undefined, "
        "but still allreduced by DDP reducer."
    ]
    assert results["TwoHeads", "static_graph=True"] == [
        "differ", "step 2: RuntimeError: Your training graph has changed in this iteration, "
        "e.g., one parameter is unused in first iteration, but then got used in the second "
        "iteration."
    ]
# --8<-- [end:flags]


# What the page says about which backward pass decides, checked here: the FIRST one.
class AllFirst(TwoHeads):  # loss1 reaches every parameter, loss2 misses head1
    def forward(self, x):
        z = self.trunk(x).tanh()
        loss_head1, loss_head2 = self.head1(z).pow(2).mean(), self.head2(z).pow(2).mean()
        return loss_head1 + loss_head2, loss_head2


class PartFirst(AllFirst):  # the same two losses, the other way round
    def forward(self, x):
        return tuple(reversed(super().forward(x)))


class Disjoint(nn.Module):  # loss1 reaches only `first`, loss2 only `second`
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(4, 1), nn.Linear(4, 1)

    def forward(self, x):
        return self.first(x).pow(2).mean(), self.second(x).tanh().pow(2).mean()


def allreduces_per_pass(model_class, x):
    """All-reduce calls during the first and during the second backward pass."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def counting_allreduce(calls, bucket):
        calls.append(bucket.index())
        return allreduce_hook(None, bucket)

    torch.manual_seed(0)
    ddp = DDP(model_class())
    calls = []
    ddp.register_comm_hook(calls, counting_allreduce)
    loss1, loss2 = ddp(x)
    loss1.backward(retain_graph=True)
    after_first = len(calls)
    loss2.backward()
    return after_first, len(calls) - after_first


def the_first_pass_decides(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    # The first pass reaches every parameter: no error, the ranks differ, and neither
    # rank equals the full batch (allclose, atol=1e-6), whatever the second pass reaches;
    # the one bucket is all-reduced once, during the first pass.
    for model_class in (Shared, AllFirst):
        expected = full_batch_grad(model_class, full_batch)
        assert train(model_class, {}, x, expected=expected) == ["differ"] * 3
        assert allreduces_per_pass(model_class, x) == (1, 0)
    # The first pass leaves head1 unreached and the second reaches the trunk again: error,
    # raised by the second pass.
    assert train(PartFirst, {}, x) == [
        "step 1: RuntimeError: Expected to mark a variable ready only once."
    ]
    for model_class in (TwoHeads, PartFirst):
        torch.manual_seed(0)
        ddp = DDP(model_class())  # kept alive: its reducer must outlive the backward passes
        loss1, loss2 = ddp(x)
        loss1.backward(retain_graph=True)  # no error here
        try:
            loss2.backward()
            raise AssertionError("the second pass should raise")
        except RuntimeError as error:
            assert str(error).startswith("Expected to mark a variable ready only once.")
    # The first pass leaves some parameters unreached, the second reaches only those: each
    # parameter is marked ready once, and the gradients are right.
    expected = full_batch_grad(Disjoint, full_batch)
    assert train(Disjoint, {}, x, expected=expected) == ["same = full batch"] * 3


def main(rank, world_size):
    on_every_rank(rank, world_size)
    the_first_pass_decides(rank, world_size)


if __name__ == "__main__":
    launch(main)
