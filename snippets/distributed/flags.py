# --8<-- [start:lesson]
import os

import torch
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoHeads(nn.Sequential):
    def forward(self, x):
        return self[1](z := self[0](x).tanh()).pow(2).mean(), self[2](z).pow(2).mean()


def on_every_rank(rank, world_size):
    for option in ({}, {"find_unused_parameters": True}, {"static_graph": True}):
        ddp = DDP(TwoHeads(nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)), **option)
        try:
            for step in (1, 2, 3):  # noqa: B007
                ddp.zero_grad()
                loss1, loss2 = ddp(torch.randn(4, 4))
                loss1.backward(retain_graph=True)  # (1)!
                loss2.backward()
        except RuntimeError as error:
            if rank == 0:
                print(f"{option or 'default'}, step {step}: {str(error).split('. ')[0]}.")


if __name__ == "__main__":
    os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"  # (2)!
    launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import multiprocessing
import tempfile
from unittest import mock

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook


class Shared(nn.Sequential):
    def forward(self, x):
        y = super().forward(x)
        return y.pow(2).mean(), y.sum(dim=1).tanh().mean()


class AllFirst(TwoHeads):  # (1)!
    def forward(self, x):
        head1, head2 = super().forward(x)
        return head1 + head2, head2


class PartFirst(AllFirst):
    def forward(self, x):
        return tuple(reversed(super().forward(x)))


class Disjoint(nn.Sequential):
    def forward(self, x):
        return self[0](x).pow(2).mean(), self[1](x).tanh().pow(2).mean()


def make(cls):
    torch.manual_seed(0)
    if cls is Shared:
        return Shared(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    if cls is Disjoint:
        return Disjoint(nn.Linear(4, 1), nn.Linear(4, 1))
    return cls(nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1))


full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))


def train(cls, x, summed=False, **option):  # (2)!
    ddp, reference, seen = DDP(make(cls), **option), make(cls), []
    sum(reference(full_batch)).backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
    for step in (1, 2, 3):
        ddp.zero_grad()
        try:
            loss1, loss2 = ddp(x)
            if summed:
                (loss1 + loss2).backward()
            else:
                loss1.backward(retain_graph=True)
                loss2.backward()
        except RuntimeError as error:
            return [*seen, f"step {step}: {str(error).split('. ')[0].rstrip('.')}."]
        grad = torch.cat([p.grad.flatten() for p in ddp.parameters()])
        both = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
        dist.all_gather(both, grad)
        full = " = full batch" if torch.allclose(grad, expected, atol=1e-6) else ""
        seen.append(("same" if torch.equal(*both) else "differ") + full)
    return seen


def allreduces_per_pass(cls, x):  # (3)!
    ddp, calls = DDP(make(cls)), []
    ddp.register_comm_hook(
        calls, lambda calls, bucket: calls.append(1) or allreduce_hook(None, bucket)
    )
    loss1, loss2 = ddp(x)
    loss1.backward(retain_graph=True)
    after_first = len(calls)
    loss2.backward()
    return after_first, len(calls) - after_first


def every_case(rank, world_size):
    x = full_batch.chunk(world_size)[rank]
    for option in ({}, {"find_unused_parameters": True}, {"static_graph": True}):
        assert train(Shared, x, **option) == ["differ"] * 3  # (4)!
    assert train(TwoHeads, x) == ["step 1: Expected to mark a variable ready only once."]
    assert train(TwoHeads, x, find_unused_parameters=True) == [
        "differ",
        "step 2: Encountered gradient which is undefined, but still allreduced by DDP reducer.",
    ]
    assert train(TwoHeads, x, static_graph=True) == [
        "differ",
        "step 2: Your training graph has changed in this iteration, e.g., one parameter is "
        "unused in first iteration, but then got used in the second iteration.",
    ]
    assert train(TwoHeads, x, summed=True) == ["same = full batch"] * 3  # (5)!
    for cls in (Shared, AllFirst):
        assert train(cls, x) == ["differ"] * 3  # (6)!
        assert allreduces_per_pass(cls, x) == (1, 0)
    assert train(PartFirst, x) == ["step 1: Expected to mark a variable ready only once."]
    for cls in (TwoHeads, PartFirst):
        ddp = DDP(make(cls))
        loss1, loss2 = ddp(x)
        loss1.backward(retain_graph=True)
        try:
            loss2.backward()  # (7)!
            raise AssertionError("the second pass should raise")
        except RuntimeError as error:
            assert str(error).startswith("Expected to mark a variable ready only once.")
    assert train(Disjoint, x) == ["same = full batch"] * 3  # (8)!
    return True


fork = multiprocessing.get_context("fork")
with (
    tempfile.TemporaryFile() as sink,
    mock.patch("torch.multiprocessing.get_context", return_value=fork),  # (9)!
):
    saved = os.dup(2)
    os.dup2(sink.fileno(), 2)  # (10)!
    try:
        every_rank = launch(every_case)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
assert every_rank == [True, True]
# --8<-- [end:proof]
