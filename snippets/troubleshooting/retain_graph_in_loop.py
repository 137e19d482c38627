# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)

for step in range(3):
    x = torch.randn(1, 4)
    h = cell(x, h)
    loss = h.pow(2).mean()
    optimizer.zero_grad()
    try:
        loss.backward(retain_graph=True)  # (1)!
    except RuntimeError as error:
        message = str(error)
        print(f"step: {step} | error:", message.split(":")[0])
        break
    print(f"step: {step} | backward: ok")
    optimizer.step()  # (2)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
from contextlib import nullcontext

from torch.autograd.graph import saved_tensors_hooks
from torch.nn.utils import parameters_to_vector, vector_to_parameters

assert step == 2  # (1)!
assert message.startswith("one of the variables needed for gradient computation has been modified")


def weights_saved(x, h):  # (2)!
    packed = []

    def pack(t):
        packed.append(t.untyped_storage().data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        cell(x, h)
    return [n for n, p in cell.named_parameters() if p.untyped_storage().data_ptr() in packed]


torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)
saved = []
for replayed in range(3):
    x = torch.randn(1, 4)
    saved.append(weights_saved(x, h))
    h = cell(x, h)
    optimizer.zero_grad()
    try:
        h.pow(2).mean().backward(retain_graph=True)
    except RuntimeError as error:
        assert str(error) == message
        failed_at = replayed
        break
    optimizer.step()
assert failed_at == step
assert saved == [[], ["weight_hh"], ["weight_hh"]]  # (3)!


def last_gradient(fused, copy_saved, update=lambda optimizer: optimizer.step()):  # (4)!
    torch.manual_seed(0)
    cell = torch.nn.RNNCell(4, 8)
    optimizer = torch.optim.SGD(cell.parameters(), lr=0.1, fused=fused)
    h, xs = torch.zeros(1, 8), []
    for _ in range(3):
        xs.append(torch.randn(1, 4))
        with saved_tensors_hooks(torch.clone, lambda t: t) if copy_saved else nullcontext():
            h = cell(xs[-1], h)
        optimizer.zero_grad()
        h.pow(2).mean().backward(retain_graph=True)
        if len(xs) < 3:
            update(optimizer)
    h = torch.zeros(1, 8)
    for x in xs:
        h = cell(x, h)
    now = torch.autograd.grad(h.pow(2).mean(), list(cell.parameters()))
    return [p.grad for p in cell.parameters()], now


def far(grads, reference):
    return max((g - r).abs().max().item() for g, r in zip(grads, reference, strict=True)) > 1e-4


def through_data(optimizer):
    for p in optimizer.param_groups[0]["params"]:
        p.data.add_(p.grad, alpha=-0.1)


fused, now = last_gradient(fused=True, copy_saved=False)
as_it_ran, _ = last_gradient(fused=False, copy_saved=True)
assert far(fused, as_it_ran) and far(fused, now)  # (5)!
through_data_grads, _ = last_gradient(fused=False, copy_saved=False, update=through_data)
assert far(through_data_grads, as_it_ran) and far(through_data_grads, now)


def assign(optimizer):
    params = optimizer.param_groups[0]["params"]
    vector = parameters_to_vector(params) - 0.1 * parameters_to_vector([p.grad for p in params])
    vector_to_parameters(vector, params)


assigned, _ = last_gradient(fused=False, copy_saved=False, update=assign)
assert not far(assigned, as_it_ran) and far(assigned, now)  # (6)!
# --8<-- [end:proof]
