import warnings

import torch
import torch.distributed as dist
from launch import launch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

COLLECTIVES = {"all_gather_single": "all-gathers", "reduce_scatter_single": "reduce-scatters"}
COUNTS = dict.fromkeys(COLLECTIVES.values(), 0)


def count_calls(name):  # the same counting wrapper as in the example above
    collective = getattr(dist, name)

    def counted(*args, **kwargs):
        COUNTS[COLLECTIVES[name]] += 1
        return collective(*args, **kwargs)

    setattr(dist, name, counted)


for _name in COLLECTIVES:
    count_calls(_name)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def sharded(reshard_after_forward=True):
    model = make_model()
    for layer in (model[0], model[2]):
        fully_shard(layer, reshard_after_forward=reshard_after_forward)
    fully_shard(model, reshard_after_forward=reshard_after_forward)
    return model


# --8<-- [start:fix]
def input_penalty_loss(net, x):
    x = x.clone().requires_grad_(True)
    out = net(x)
    (grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)  # (1)!
    return out.mean() + ((grad_x.norm(dim=1) - 1) ** 2).mean()


def penalty_step(model, x):
    model.set_reshard_after_backward(False)  # (2)!
    input_penalty_loss(model, x).backward()
    assert not any(isinstance(p, DTensor) for p in model.parameters())
    for module in model.modules():  # (3)!
        if isinstance(module, FSDPModule):
            module.reshard()
# --8<-- [end:fix]


def full_grad(model):
    return torch.cat([p.grad.full_tensor().flatten() for p in model.parameters()])


def reset():
    for name in COUNTS:
        COUNTS[name] = 0


def on_every_rank(rank, world_size):
    full_batch = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    x = full_batch.chunk(world_size)[rank]
    reference = make_model()  # one process, the full batch, no FSDP
    input_penalty_loss(reference, full_batch).backward()
    expected = torch.cat([p.grad.flatten() for p in reference.parameters()])
    lines = []

    for reshard in (True, False):  # the default settings: the penalty fails
        model = sharded(reshard)
        try:
            input_penalty_loss(model, x).backward()
        except RuntimeError as error:
            message = str(error)
            failure = "setStorage: ... " + message[message.index("are out of bounds"):]
        else:
            failure = "none"
        assert failure.endswith("are out of bounds for storage of size 0")
        lines.append(f"reshard_after_forward={reshard}, default: RuntimeError: {failure}")

    for reshard in (True, False):
        model = sharded(reshard)
        reset()
        penalty_step(model, x)
        counts = dict(COUNTS)
        assert all(isinstance(p, DTensor) for p in model.parameters())  # shards again
        right = torch.allclose(full_grad(model), expected, rtol=1e-5, atol=1e-6)
        assert right
        lines.append(f"reshard_after_forward={reshard}, reshard_after_backward=False: "
                     f"{counts['all-gathers']} all-gathers, "
                     f"{counts['reduce-scatters']} reduce-scatters, = full batch: {right}")
        assert (counts["all-gathers"], counts["reduce-scatters"]) == ((4, 2) if reshard else (2, 2))

    # backward(create_graph=True) runs, but the gradient FSDP2 hands back has no graph.
    model = sharded()
    xx = x.clone().requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(xx).sum().backward(create_graph=True)
    assert caught and all(
        str(w.message).startswith("Using backward() with create_graph=True") for w in caught
    )
    plain = make_model()  # without FSDP the same call gives gradients with a graph
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        plain(x.clone().requires_grad_(True)).sum().backward(create_graph=True)
    assert plain[0].weight.grad.requires_grad
    has_graph = model[0].weight.grad.requires_grad
    assert not has_graph
    lines.append(f"backward(create_graph=True): runs; the gradient has a graph: {has_graph}")
    if rank == 0:
        print("\n".join(lines))


if __name__ == "__main__":
    launch(on_every_rank)
