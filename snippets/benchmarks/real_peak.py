import gc
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch._C._profiler import _EventType


# --8<-- [start:measure]
def peak_bytes(step, device):
    """Peak tensor memory allocated above the start while step() runs."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)  # (1)!
        torch.cuda.reset_peak_memory_stats(device)  # (2)!
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start  # (3)!
    return cpu_peak_bytes(step)  # (4)!
# --8<-- [end:measure]


def cpu_peak_bytes(step):
    """The same figure on CPU, from the profiler's memory events.

    c10's CPU allocator reports every allocation (+bytes) and free (-bytes) of tensor memory
    to the profiler when profile_memory=True (c10/core/CPUAllocator.cpp,
    ProfiledCPUMemoryReporter::New and ::Delete). Their running sum is the memory allocated
    above the start; its maximum is the peak. A block allocated before the profile is not
    reported when freed, or with a stale size, so only frees of blocks allocated during the
    profile count: step() must free no older block (the gradients start as None), and the
    cycle collector is kept off meanwhile.
    """

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
            continue  # allocated before the profile: its reported size may be stale
        else:
            allocated_here.discard(ptr)
        running += size
        peak = max(peak, running)
    return peak


def known_sizes():  # the method, on allocations of known size: 16000 bytes at the peak
    a = torch.empty(1000)  # 4000 bytes
    b = torch.empty(3000)  # 12000 bytes
    del a, b
    torch.empty(500)  # 2000 bytes


assert cpu_peak_bytes(known_sizes) == 16000

# --8<-- [start:use]
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
trunk = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.Tanh())])
head1, head2 = nn.Linear(256, 1), nn.Linear(256, 10)
model = nn.ModuleList([trunk, head1, head2]).to(device)
x = torch.randn(1024, 256, device=device)
y1 = torch.randn(1024, 1, device=device)
y2 = torch.randint(0, 10, (1024,), device=device)


def two_heads():  # the benchmark's model, smaller
    z = trunk(x)
    return F.mse_loss(head1(z), y1), F.cross_entropy(head2(z), y2)


def retain(losses=two_heads):
    loss1, loss2 = losses()
    loss1.backward(retain_graph=True)
    loss2.backward()


def summed(losses=two_heads):
    loss1, loss2 = losses()
    (loss1 + loss2).backward()


def measure(step):
    step()  # a warm-up step: one-time allocations stay out of the figure
    model.zero_grad(set_to_none=True)  # (1)!
    peak = peak_bytes(step, device)
    return peak, [p.grad.clone() for p in model.parameters() if p.grad is not None]


for step in (retain, summed):
    peak, _ = measure(step)
    print(f"{step.__name__:7s} peak above the start: {peak / 2**20:.2f} MiB")
# --8<-- [end:use]

MIB = 2**20
grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
activation = x.numel() * x.element_size()  # one (1024, 256) float32 tensor
print(f"gradients of the model:      {grad_bytes / MIB:.2f} MiB")

(peak_retain, g_retain), (peak_summed, g_summed) = measure(retain), measure(summed)
# The two strategies leave the same gradients (the reference for "works").
for a, b in zip(g_retain, g_summed, strict=True):
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
# Retaining raises the peak, by more than the size of the model's gradients: the whole graph is
# still held while the gradients arrive. Without retain_graph the backward pass frees each
# node's saved tensors once it has run, and the gradients take their place.
assert peak_retain - peak_summed > grad_bytes
# Both peaks hold at least the four Tanh outputs the graph saves.
assert min(peak_retain, peak_summed) >= 4 * activation


# Not a law: two losses on the trunk's full output. The summed backward runs both losses'
# backward at once, and their full-size temporary gradients coexist; retaining runs them
# one after the other.
def same_output():
    z = trunk(x)
    return z.square().mean(), z.abs().mean()


peak_retain2, g_retain2 = measure(lambda: retain(same_output))
peak_summed2, g_summed2 = measure(lambda: summed(same_output))
for a, b in zip(g_retain2, g_summed2, strict=True):
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
# Higher, by about one activation: within 1 % of one (1024, 256) float32 tensor.
assert abs((peak_summed2 - peak_retain2) - activation) <= 0.01 * activation
print(f"losses on the full output: retain {peak_retain2 / MIB:.2f} MiB, "
      f"summed {peak_summed2 / MIB:.2f} MiB")
print(f"device: {device.type}")
