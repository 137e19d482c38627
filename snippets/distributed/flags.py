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
                print(f"{option or 'default'} | step: {step} | error: {str(error).split('. ')[0]}.")


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


MODELS = {
    "shared": lambda: Shared(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)),
    "two heads": lambda: TwoHeads(nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)),
    "apart": lambda: TwoHeads(
        nn.Linear(4, 8).requires_grad_(False), nn.Linear(8, 1), nn.Linear(8, 1)
    ),
}
ORDERS = {  # (1)!
    "as is": lambda a, b: (a, b),
    "all first": lambda a, b: (a + b, b),
    "part first": lambda a, b: (b, a + b),
    "sum": lambda a, b: (a + b,),
}
batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))


def train(model, order="as is", **option):  # (2)!
    torch.manual_seed(0)
    ddp, reference, seen = DDP(MODELS[model](), **option), MODELS[model](), []
    reference.load_state_dict(ddp.module.state_dict())
    sum(reference(batch)).backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters() if p.requires_grad])
    for step in (1, 2, 3):
        ddp.zero_grad()
        for n, loss in enumerate(ORDERS[order](*ddp(batch.chunk(2)[dist.get_rank()])), 1):
            try:
                loss.backward(retain_graph=n == 1)
            except RuntimeError as error:
                return [*seen, f"step {step}, pass {n}: {str(error).split('. ')[0]}."]
        grad = torch.cat([p.grad.flatten() for p in ddp.parameters() if p.requires_grad])
        both = [torch.empty_like(grad), torch.empty_like(grad)]
        dist.all_gather(both, grad)
        full = " = full batch" if torch.allclose(grad, expected, atol=1e-6) else ""
        seen.append(("same" if torch.equal(*both) else "differ") + full)
    return seen


def allreduces_per_pass(model, order):  # (3)!
    ddp, calls = DDP(MODELS[model]()), []
    ddp.register_comm_hook(
        calls, lambda calls, bucket: calls.append(1) or allreduce_hook(None, bucket)
    )
    first, second = ORDERS[order](*ddp(batch.chunk(2)[dist.get_rank()]))
    first.backward(retain_graph=True)
    after_first = len(calls)
    second.backward()
    return after_first, len(calls) - after_first


def every_case(rank, world_size):
    once = "Expected to mark a variable ready only once."
    for option in ({}, {"find_unused_parameters": True}, {"static_graph": True}):
        assert train("shared", **option) == ["differ"] * 3
    assert train("two heads") == [f"step 1, pass 2: {once}"]
    unused = train("two heads", find_unused_parameters=True)
    static = train("two heads", static_graph=True)
    assert unused[0] == static[0] == "differ" and len(unused) == len(static) == 2
    assert unused[1].startswith("step 2, pass 1: Encountered gradient which is undefined")
    assert static[1].startswith("step 2, pass 2: Your training graph has changed")
    assert train("two heads", "sum") == ["same = full batch"] * 3
    assert train("two heads", "all first") == ["differ"] * 3
    assert allreduces_per_pass("shared", "as is") == (1, 0)
    assert allreduces_per_pass("two heads", "all first") == (1, 0)
    assert train("two heads", "part first") == [f"step 1, pass 2: {once}"]
    assert train("apart") == ["same = full batch"] * 3
    return True


fork = multiprocessing.get_context("fork")
with tempfile.TemporaryFile() as sink, mock.patch("torch.multiprocessing.get_context") as start:
    start.return_value = fork  # (4)!
    saved = os.dup(2)
    os.dup2(sink.fileno(), 2)  # (5)!
    try:
        every_rank = launch(every_case)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    sink.seek(0)
    assert b"did not find any unused parameters" in sink.read()
assert every_rank == [True, True]
# --8<-- [end:proof]
