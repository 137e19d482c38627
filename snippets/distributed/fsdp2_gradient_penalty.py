# --8<-- [start:lesson]
import torch
from launch import launch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    for module in (model[0], model[2], model):
        fully_shard(module)
    model.set_reshard_after_backward(False)  # (1)!
    x.requires_grad_(True)
    out = model(x)
    (grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)  # (2)!
    loss = out.mean() + ((grad_x.norm(dim=1) - 1) ** 2).mean()
    loss.backward()
    for module in model.modules():  # (3)!
        if isinstance(module, FSDPModule):
            module.reshard()
    if rank == 0:
        print(f"rank: 0 | loss: {loss.item():.4g}")
    return [p.grad.full_tensor() for p in model.parameters()]


if __name__ == "__main__":
    grads = launch(on_every_rank)
# --8<-- [end:lesson]

# --8<-- [start:proof]
import multiprocessing
import warnings
from unittest import mock

import torch.distributed as dist
from torch.distributed.tensor import DTensor


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def sharded(reshard_after_forward=True):
    model = make_model()
    for module in (model[0], model[2], model):
        fully_shard(module, reshard_after_forward=reshard_after_forward)
    return model


def input_penalty_loss(net, x):
    x = x.clone().requires_grad_(True)
    out = net(x)
    (grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    return out.mean() + ((grad_x.norm(dim=1) - 1) ** 2).mean()


def reshard_all(model):
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def next_forward_uses_new_weights(x, reshard):
    model = sharded()
    model.set_reshard_after_backward(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    input_penalty_loss(model, x).backward()
    if reshard == "before step":
        reshard_all(model)
    optimizer.step()
    if reshard == "after step":
        reshard_all(model)
    out = model(x)
    updated = make_model()
    with torch.no_grad():
        shards = optimizer.param_groups[0]["params"]
        for p, shard in zip(updated.parameters(), shards, strict=True):
            p.copy_(shard.full_tensor())
    return torch.allclose(out, updated(x), rtol=1e-5, atol=1e-6)


def every_setting(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    grads = {}
    for reshard in (True, False):
        try:
            input_penalty_loss(sharded(reshard), x).backward()  # (1)!
            raise AssertionError("the default settings should fail")
        except RuntimeError as error:
            assert str(error).startswith("setStorage: ")
            assert str(error).endswith("are out of bounds for storage of size 0")

        model = sharded(reshard)
        model.set_reshard_after_backward(False)
        with (
            mock.patch.object(dist, "all_gather_single", wraps=dist.all_gather_single) as ag,
            mock.patch.object(
                dist, "reduce_scatter_single", wraps=dist.reduce_scatter_single
            ) as rs,
        ):
            input_penalty_loss(model, x).backward()
        assert (ag.call_count, rs.call_count) == ((4, 2) if reshard else (2, 2))  # (2)!
        assert not any(isinstance(p, DTensor) for p in model.parameters())  # (3)!
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.reshard()
        assert all(isinstance(p, DTensor) for p in model.parameters())
        grads[reshard] = [p.grad.full_tensor() for p in model.parameters()]

    model = sharded()
    with warnings.catch_warnings(record=True) as caught:  # (4)!
        warnings.simplefilter("always")
        model(x.clone().requires_grad_(True)).sum().backward(create_graph=True)
    assert caught and all(
        str(w.message).startswith("Using backward() with create_graph=True") for w in caught
    )
    assert not any(p.grad.requires_grad for p in model.parameters())
    assert next_forward_uses_new_weights(x, reshard="before step")
    assert next_forward_uses_new_weights(x, reshard="after step")
    assert not next_forward_uses_new_weights(x, reshard=None)
    return grads


reference = make_model()  # (5)!
input_penalty_loss(
    reference, torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
).backward()
expected = [p.grad for p in reference.parameters()]


def right(grads):
    return all(
        torch.allclose(g, e, rtol=1e-5, atol=1e-6) for g, e in zip(grads, expected, strict=True)
    )


assert len(grads) == 2 and all(right(on_rank) for on_rank in grads)  # (6)!

fork = multiprocessing.get_context("fork")
with mock.patch("torch.multiprocessing.get_context", return_value=fork):  # (7)!
    every_rank = launch(every_setting)
assert len(every_rank) == 2 and all(right(g) for r in every_rank for g in r.values())

plain = make_model()  # (8)!
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    plain(torch.randn(4, 4, requires_grad=True)).sum().backward(create_graph=True)
assert plain[0].weight.grad.requires_grad
# --8<-- [end:proof]
