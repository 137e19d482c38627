import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class SharedBlock(nn.Module):
    """One layer applied twice, each time inside activation checkpointing."""

    def __init__(self, use_reentrant):
        super().__init__()
        self.embed, self.block = nn.Linear(4, 4), nn.Linear(4, 4)
        self.use_reentrant = use_reentrant

    def forward(self, x):
        h = self.embed(x)
        h = checkpoint(self.block, h, use_reentrant=self.use_reentrant)  # (1)!
        return checkpoint(self.block, h.tanh(), use_reentrant=self.use_reentrant)


def step(ddp, x):
    ddp.zero_grad()
    ddp(x).pow(2).mean().backward()
    return torch.cat([p.grad.flatten() for p in ddp.parameters()])


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    torch.manual_seed(0)
    reference = SharedBlock(use_reentrant=False)  # one process, the full batch
    reference(full_batch).pow(2).mean().backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])

    results = {}
    for name, use_reentrant, settings in [
        ("use_reentrant=True", True, {}),
        ("use_reentrant=True, static_graph=True", True, {"static_graph": True}),  # (2)!
        ("use_reentrant=False", False, {}),  # (3)!
    ]:
        torch.manual_seed(0)
        ddp = DDP(SharedBlock(use_reentrant), **settings)
        try:
            grads = [step(ddp, x) for _ in range(2)]
        except RuntimeError as error:
            results[name] = "RuntimeError: " + str(error).split(". ")[0] + "."
            continue
        ok = all(torch.allclose(g, expected, atol=1e-6) for g in grads)
        results[name] = "2 steps, gradients equal the full batch: " + str(ok)

    if rank == 0:
        for name, result in results.items():
            print(f"{name}:\n    {result}")
    assert results["use_reentrant=True"] == (
        "RuntimeError: Expected to mark a variable ready only once."
    )
    assert results["use_reentrant=True, static_graph=True"].endswith("full batch: True")
    assert results["use_reentrant=False"].endswith("full batch: True")
    dist.barrier()


if __name__ == "__main__":
    launch(on_every_rank)
