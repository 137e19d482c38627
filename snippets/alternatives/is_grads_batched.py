import gc
import os
import warnings

import torch
from torch import nn
from torch._C._profiler import _EventType

torch.manual_seed(0)

# --8<-- [start:shown]
trunk = nn.Sequential(nn.Linear(64, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh())
heads = nn.ModuleList(nn.Linear(512, 1) for _ in range(3))
x, targets = torch.randn(256, 64), torch.randn(3, 256, 1)
shared = list(trunk.parameters())


def task_losses():
    features = trunk(x)
    losses = [(head(features) - t).pow(2).mean() for head, t in zip(heads, targets, strict=True)]
    return torch.stack(losses)


def loop():  # with retain_graph: one backward pass per task over the shared trunk
    losses = task_losses()
    return [torch.autograd.grad(losses[i], shared, retain_graph=i < 2) for i in range(3)]  # (1)!


def batched():  # one call; row i of the identity picks task i's loss
    losses = task_losses()
    return torch.autograd.grad(
        losses, shared, grad_outputs=torch.eye(3), is_grads_batched=True  # (2)!
    )
# --8<-- [end:shown]


per_task_loop = torch.stack([torch.cat([g.flatten() for g in grads]) for grads in loop()])
per_task = torch.cat([g.flatten(start_dim=1) for g in batched()], dim=1)
assert torch.allclose(per_task, per_task_loop, rtol=1e-5, atol=1e-7)
print("per-task gradients:", tuple(per_task.shape))
print("same as the loop (rtol=1e-5, atol=1e-7):", True)

# Experimental: it runs on the legacy vmap prototype. Every backward operator without a batching
# rule goes through a fallback that PyTorch only reports when asked to.
torch._C._debug_only_display_vmap_fallback_warnings(True)
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batched()
finally:
    torch._C._debug_only_display_vmap_fallback_warnings(False)
fallbacks = sorted(
    {str(w.message).split("batching rule for ")[1].split(".")[0] for w in caught
     if "we have not yet implemented the batching rule" in str(w.message)}
)
assert "aten::tanh_backward" in fallbacks
assert all("legacy vmap prototype" in str(w.message) for w in caught)
print("fallback warnings (when enabled):", ", ".join(fallbacks))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    batched()
assert caught == []  # silent by default


def cpu_peak_bytes(step):
    """Peak tensor memory allocated above the start while step() runs, from the profiler's
    memory events: c10's CPU allocator reports every allocation (+bytes) and free (-bytes) when
    profile_memory=True (c10/core/CPUAllocator.cpp, ProfiledCPUMemoryReporter). Only frees of
    blocks allocated during the profile count, and the cycle collector is off meanwhile."""

    def walk(nodes):
        for node in nodes:
            yield node
            yield from walk(node.children)

    os.environ["KINETO_LOG_LEVEL"] = "6"  # kineto would print start/stop lines to stderr
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
        (e for e in walk(prof.profiler.kineto_results.experimental_event_tree())
         if e.tag == _EventType.Allocation),
        key=lambda e: e.start_time_ns,
    )
    running, peak, allocated_here = 0, 0, set()
    for e in events:
        size, ptr = e.extra_fields.alloc_size, e.extra_fields.ptr
        if size > 0:
            allocated_here.add(ptr)
        elif ptr not in allocated_here:
            continue
        else:
            allocated_here.discard(ptr)
        running += size
        peak = max(peak, running)
    return peak


def known_sizes():  # the method, on allocations of known size: 16000 bytes at the peak
    a = torch.empty(1000)
    b = torch.empty(3000)
    del a, b
    torch.empty(500)


assert cpu_peak_bytes(known_sizes) == 16000

# Memory: the forward pass and the gradients of the three tasks, peak above the start.
loop_peak, batched_peak = cpu_peak_bytes(loop), cpu_peak_bytes(batched)
assert batched_peak > 1.3 * loop_peak
mib = 2**20
print(f"peak tensor memory: loop {loop_peak / mib:.1f} MiB, batched {batched_peak / mib:.1f} MiB")
print(f"batched / loop: {batched_peak / loop_peak:.1f}")
