# --8<-- [start:lesson]
import torch
from launch import launch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class SharedBlock(torch.nn.Sequential):
    def forward(self, x):
        embed, block = self
        h = checkpoint(block, embed(x), use_reentrant=True)  # (1)!
        return checkpoint(block, h.tanh(), use_reentrant=True)


def on_every_rank(rank, world_size):
    torch.manual_seed(0)
    ddp = DDP(SharedBlock(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)), static_graph=True)  # (2)!
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    grads = []
    for _ in range(2):
        ddp.zero_grad()
        ddp(x).pow(2).mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in ddp.parameters()]))
    return grads


if __name__ == "__main__":
    results = launch(on_every_rank)
    print("rank: 0 | grad_norm_per_step:", [f"{g.norm().item():.4g}" for g in results[0]])
# --8<-- [end:lesson]

# --8<-- [start:proof]
import torch.distributed as dist


class Plain(SharedBlock):
    def __init__(self, use_reentrant):
        super().__init__(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
        self.use_reentrant = use_reentrant

    def forward(self, x):
        embed, block = self
        h = checkpoint(block, embed(x), use_reentrant=self.use_reentrant)
        return checkpoint(block, h.tanh(), use_reentrant=self.use_reentrant)


def two_steps(model, x):
    grads = []
    for _ in range(2):
        model.zero_grad()
        model(x).pow(2).mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return grads


batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
torch.manual_seed(0)
expected = two_steps(Plain(use_reentrant=False), batch)[0]  # (1)!
assert all(torch.allclose(g, expected, atol=1e-6) for grads in results for g in grads)

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # (2)!
try:
    torch.manual_seed(0)
    try:
        two_steps(DDP(Plain(use_reentrant=True)), batch)  # (3)!
        raise AssertionError("reentrant checkpointing under DDP should raise")
    except RuntimeError as error:
        assert str(error).startswith("Expected to mark a variable ready only once.")
    torch.manual_seed(0)
    grads = two_steps(DDP(Plain(use_reentrant=False)), batch)  # (4)!
    assert all(torch.allclose(g, expected, atol=1e-6) for g in grads)
finally:
    dist.destroy_process_group()
# --8<-- [end:proof]
