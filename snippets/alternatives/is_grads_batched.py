# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh())
heads = nn.ModuleList(nn.Linear(512, 1) for _ in range(3))
x, targets = torch.randn(256, 64), torch.randn(3, 256, 1)
shared = list(trunk.parameters())

features = trunk(x)
losses = torch.stack(
    [(head(features) - t).pow(2).mean() for head, t in zip(heads, targets, strict=True)]
)
eye = torch.eye(3)  # (1)!
grads = torch.autograd.grad(losses, shared, grad_outputs=eye, is_grads_batched=True)  # (2)!
per_task = torch.cat([g.flatten(start_dim=1) for g in grads], dim=1)  # (3)!
print("per_task.shape:", tuple(per_task.shape))
print("per_task_norms:", *(f"{n:.4g}" for n in per_task.norm(dim=1).tolist()))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc
import os
import warnings

from torch._C._profiler import _EventType


def task_losses():
    features = trunk(x)
    return torch.stack(
        [(head(features) - t).pow(2).mean() for head, t in zip(heads, targets, strict=True)]
    )


def loop():
    losses = task_losses()
    return [torch.autograd.grad(losses[i], shared, retain_graph=i < 2) for i in range(3)]  # (1)!


def batched():
    losses = task_losses()
    return torch.autograd.grad(losses, shared, grad_outputs=torch.eye(3), is_grads_batched=True)


per_task_loop = torch.stack([torch.cat([g.flatten() for g in grads]) for grads in loop()])
assert torch.allclose(per_task, per_task_loop, rtol=1e-5, atol=1e-7)  # (2)!

doc = " ".join(torch.autograd.grad.__doc__.split())
assert "We use the vmap prototype feature as the backend" in doc  # (3)!
assert "due to this feature being experimental, there may be performance cliffs" in doc
assert "legacy" not in doc
assert (
    "Please use ``torch._C._debug_only_display_vmap_fallback_warnings(True)`` "
    "to show any performance warnings" in doc
)

torch._C._debug_only_display_vmap_fallback_warnings(True)  # (4)!
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batched()
finally:
    torch._C._debug_only_display_vmap_fallback_warnings(False)
fallbacks = {
    str(w.message).split("batching rule for ")[1].split(".")[0]
    for w in caught
    if "we have not yet implemented the batching rule" in str(w.message)
}
assert "aten::tanh_backward" in fallbacks
assert all("You are using the legacy vmap prototype" in str(w.message) for w in caught)
assert all(
    "for better operator coverage and performance improvements" in str(w.message) for w in caught
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    batched()
assert caught == []


def cpu_peak_bytes(step):  # (5)!
    def walk(nodes):
        for node in nodes:
            yield node
            yield from walk(node.children)

    os.environ["KINETO_LOG_LEVEL"] = "6"  # (6)!
    gc.collect()
    gc.disable()
    try:
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
        ) as prof:
            step()
    finally:
        gc.enable()
    events = sorted(
        (
            e
            for e in walk(prof.profiler.kineto_results.experimental_event_tree())
            if e.tag == _EventType.Allocation
        ),
        key=lambda e: e.start_time_ns,
    )
    running, peak = 0, 0
    for e in events:
        running += e.extra_fields.alloc_size
        peak = max(peak, running)
    return peak


def known_sizes():
    a = torch.empty(1000)
    b = torch.empty(3000)
    del a, b
    torch.empty(500)


assert cpu_peak_bytes(known_sizes) == 16000  # (7)!

loop_peak, batched_peak = cpu_peak_bytes(loop), cpu_peak_bytes(batched)
assert batched_peak > 1.3 * loop_peak  # (8)!
assert 1.55 < batched_peak / loop_peak < 1.85
assert 4.7 * 2**20 < loop_peak < 4.9 * 2**20 and 7.9 * 2**20 < batched_peak < 8.1 * 2**20
# --8<-- [end:proof]
