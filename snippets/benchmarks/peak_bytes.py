# --8<-- [start:lesson]
import gc
import itertools
import os

import torch

os.environ["KINETO_LOG_LEVEL"] = "6"  # (1)!


def peak_bytes(step, device):
    if device.type == "cuda":
        torch.nn.Linear(8, 8).to(device)(torch.ones(8, 8, device=device)).sum().backward()  # (2)!
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)  # (3)!
        torch.cuda.reset_peak_memory_stats(device)  # (4)!
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start  # (5)!
    gc.disable()  # (6)!
    with torch.profiler.profile(profile_memory=True) as prof:
        step()
    gc.enable()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    sizes = [e.nbytes() for e in sorted(events, key=lambda e: e.start_ns())]
    return max(itertools.accumulate(sizes, initial=0))  # (7)!


if __name__ == "__main__":
    w = torch.randn(1000, 1000, requires_grad=True)
    print("exp+backward | peak_bytes:", peak_bytes(lambda: w.exp().sum().backward(), w.device))
# --8<-- [end:lesson]

# --8<-- [start:proof]
from torch._C._profiler import _EventType  # noqa: E402


def reference_peak(step):  # (1)!
    gc.collect()
    gc.disable()
    try:
        cpu = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=cpu, profile_memory=True) as prof:
            step()
    finally:
        gc.enable()
    nodes, events = list(prof.profiler.kineto_results.experimental_event_tree()), []
    while nodes:
        node = nodes.pop()
        nodes += node.children
        if node.tag == _EventType.Allocation:
            events.append(node)
    running, peak, allocated_here = 0, 0, set()
    for e in sorted(events, key=lambda e: e.start_time_ns):
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


def known_sizes():
    a = torch.empty(1000)
    b = torch.empty(3000)
    del a, b
    torch.empty(500)


cpu_device = torch.device("cpu")
assert peak_bytes(known_sizes, cpu_device) == reference_peak(known_sizes) == 16000  # (2)!
v = torch.randn(1000, 1000, requires_grad=True)
exp_step = lambda: v.exp().sum().backward()  # noqa: E731
assert peak_bytes(exp_step, cpu_device) == 8000008  # (3)!
v.grad = None
assert reference_peak(exp_step) == 8000008
assert gc.isenabled()
# --8<-- [end:proof]
