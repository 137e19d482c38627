"""Time and memory of retaining a graph vs recomputing vs one summed backward.

One command runs everything and writes the results as data::

    python benchmarks/retain_bench.py            # full run (a few minutes)
    python benchmarks/retain_bench.py --quick    # small sizes, seconds (the test suite runs this)
    python benchmarks/retain_bench.py --memory-only  # memory columns again, timings kept

then ``python benchmarks/plot_retain_bench.py`` turns the results file into the site's
figures and tables.

What is measured
----------------
A model with a shared trunk and two heads produces two losses. Five ways to get the
gradients of both (``STRATEGIES``):

1. ``retain``: one forward, ``loss1.backward(retain_graph=True)``, ``loss2.backward()``;
2. ``recompute``: forward + backward for ``loss1``, then forward + backward for ``loss2``;
3. ``summed``: one forward, ``(loss1 + loss2).backward()``;
4. ``autograd_grad``: one forward, ``torch.autograd.grad`` once per loss (when the two
   gradients are needed separately);
5. ``article``: the popular article's pattern as written: forward, ``loss1.backward(
   retain_graph=True)``, then a second forward for ``loss2`` anyway.

Time: ``torch.utils.benchmark`` (median of the per-run times), and the ratio to ``summed``
measured in the same process, interleaved in rounds so that load on the machine hits all
strategies alike.

Memory, exactly: every tensor autograd saves for the backward pass goes through a
``torch.autograd.graph.saved_tensors_hooks`` pack hook. The hook wraps it in a handle that
counts its storage once, however many nodes save it (or views of it), and uncounts it when
the last handle is released, i.e. when the graph frees it (after a backward without
``retain_graph``) or when the graph itself is deleted. Storages that live anyway, the
parameters and the input batch, are not counted: what is left is what the graphs hold.
For each step we record the peak bytes held during the step and the bytes still held after
it, while the variables a training loop would still have in scope (the losses) are alive.

Memory, as the allocator saw it: the saved-tensor count leaves out the gradients the step
allocates and the temporary tensors of the backward pass, so it cannot say whether a
strategy raises the process's peak. The step therefore also runs under
``torch.profiler.profile(profile_memory=True)``. c10's CPU allocator reports every
allocation and free of tensor memory to the profiler (``c10/core/CPUAllocator.cpp``,
``ProfiledCPUMemoryReporter::New`` and ``Delete``); summing those events in order gives the
bytes of CPU tensor memory allocated above the start of the step at every moment, and its
maximum is the step's real peak. It is measured twice: with the gradients set to ``None``
before the step (what ``optimizer.zero_grad()`` does by default) and with gradient buffers
that already exist (``zero_grad(set_to_none=False)``).
On CUDA the script also records ``torch.cuda.max_memory_allocated`` above the baseline.

Two loop experiments:

(a) ``retain_graph=True`` left on by mistake in an ordinary training loop: bytes held after
    each iteration, with and without keeping the loss tensor in a history list;
(b) truncated BPTT: hidden state not detached plus ``retain_graph=True`` vs detached: time
    and bytes held per step over 300 steps.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
import torch.utils.benchmark as tbench
from torch import nn
from torch._C._profiler import _EventType

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
SEED = 0

# --- Exact accounting of the bytes held by graphs ------------------------------------


class SavedTensorMeter:
    """Counts the bytes of the storages that autograd graphs hold as saved tensors.

    Use ``with meter.recording():`` around forward passes; graphs recorded there report
    their saved tensors here for as long as they hold them.
    """

    def __init__(self, ignore: Iterable[torch.Tensor] = ()):
        self._ignored = {self._key(t) for t in ignore}
        self._live: dict[int, list[int]] = {}  # storage key -> [handles alive, nbytes]
        self.current = 0
        self.peak = 0

    @staticmethod
    def _key(t: torch.Tensor) -> int:
        return t.untyped_storage().data_ptr()

    def ignore(self, tensors: Iterable[torch.Tensor]) -> None:
        self._ignored.update(self._key(t) for t in tensors)

    def reset_peak(self) -> None:
        self.peak = self.current

    def _acquire(self, t: torch.Tensor) -> int | None:
        key = self._key(t)
        if key in self._ignored or key == 0:
            return None
        entry = self._live.get(key)
        if entry is None:
            entry = self._live[key] = [0, t.untyped_storage().nbytes()]
            self.current += entry[1]
            self.peak = max(self.peak, self.current)
        entry[0] += 1
        return key

    def _release(self, key: int) -> None:
        entry = self._live[key]
        entry[0] -= 1
        if entry[0] == 0:
            del self._live[key]
            self.current -= entry[1]

    @contextmanager
    def recording(self):
        meter = self

        class Handle:
            __slots__ = ("tensor", "key")

            def __init__(self, t):
                self.tensor = t.detach()  # the same storage; no grad_fn, so no reference cycle
                self.key = meter._acquire(t)

            def __del__(self):  # the graph released this saved tensor
                if self.key is not None:
                    meter._release(self.key)

        with torch.autograd.graph.saved_tensors_hooks(Handle, lambda h: h.tensor):
            yield self


# --- The allocator's real peak, from the profiler's memory events ----------------------


@contextmanager
def _quiet_profiler():
    """Kineto prints two lines to stderr when a profile starts and stops; level 6 mutes them."""
    old = os.environ.get("KINETO_LOG_LEVEL")
    os.environ["KINETO_LOG_LEVEL"] = "6"
    try:
        yield
    finally:
        if old is None:
            del os.environ["KINETO_LOG_LEVEL"]
        else:
            os.environ["KINETO_LOG_LEVEL"] = old


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node.children)


def allocator_trace(fn: Callable[[], object]) -> tuple[list[int], object]:
    """Run ``fn()`` under the profiler; the running total of CPU tensor bytes after each event.

    Every CPU tensor storage comes from c10's CPU allocator, which reports each allocation
    (+bytes) and each free (-bytes) to the profiler while ``profile_memory=True``
    (``c10/core/CPUAllocator.cpp``: ``ProfiledCPUMemoryReporter::New``/``Delete``). A block
    allocated before profiling began is not reported when it is freed, or is reported with
    a size left over from an earlier profile, so only frees of blocks allocated within this
    trace are counted: the callers make sure that the measured step frees no older block,
    and the cycle collector is kept from freeing one in the middle. Returns the totals
    relative to the start, in event order, and ``fn()``'s result (kept alive past it).
    """
    # Python's cycle collector could free older tensors in the middle of the step: collect
    # first and keep it off while profiling, so that only the step's own frees are seen.
    gc.collect()
    gc.disable()
    try:
        with _quiet_profiler(), torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
        ) as prof:
            result = fn()
    finally:
        gc.enable()
    events = sorted(
        (e for e in _walk(prof.profiler.kineto_results.experimental_event_tree())
         if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu"),
        key=lambda e: e.start_time_ns,
    )
    totals, running, allocated_here = [], 0, set()
    for i, e in enumerate(events):
        size, ptr = e.extra_fields.alloc_size, e.extra_fields.ptr
        if size > 0:
            allocated_here.add(ptr)
            running += size
        elif ptr in allocated_here:  # a block this trace saw allocated: its size is right
            allocated_here.discard(ptr)
            running += size
        totals.append(running)
        if i:  # the allocator's own running total agrees with the order we sorted into
            step = e.extra_fields.total_allocated - events[i - 1].extra_fields.total_allocated
            assert step == e.extra_fields.alloc_size, "memory events out of order"
    return totals, result


def allocator_peak(fn: Callable[[], object]) -> tuple[int, int, object]:
    """(peak, final) CPU tensor bytes above the start while ``fn()`` ran, and its result."""
    totals, result = allocator_trace(fn)
    return max([0, *totals]), (totals[-1] if totals else 0), result


def cuda_peak_extra_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """``torch.cuda.max_memory_allocated`` during ``fn()`` above what was allocated before.

    ``None`` on any other device (without running ``fn``: the saved-tensor figures are the
    exact ones there), so a CPU run goes through the same code.
    """
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    baseline = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    result = fn()
    torch.cuda.synchronize(device)
    del result
    return torch.cuda.max_memory_allocated(device) - baseline


# --- The model and the five strategies -----------------------------------------------


class TwoLossNet(nn.Module):
    """A trunk of ``depth`` Linear+Tanh layers of ``width`` units, and two small heads."""

    def __init__(self, width: int, depth: int, classes: int = 10):
        super().__init__()
        self.trunk = nn.Sequential(
            *(m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh()))
        )
        self.head1 = nn.Linear(width, 1)  # a regression head
        self.head2 = nn.Linear(width, classes)  # a classification head

    def forward(self, x):
        z = self.trunk(x)
        return self.head1(z), self.head2(z)


def losses(model, x, y1, y2):
    out1, out2 = model(x)
    return F.mse_loss(out1, y1), F.cross_entropy(out2, y2)


def step_retain(model, x, y1, y2):
    loss1, loss2 = losses(model, x, y1, y2)
    loss1.backward(retain_graph=True)
    loss2.backward()
    return loss1, loss2


def step_recompute(model, x, y1, y2):
    loss1 = losses(model, x, y1, y2)[0]  # the unused loss and its head are dropped at once
    loss1.backward()
    loss2 = losses(model, x, y1, y2)[1]
    loss2.backward()
    return loss1, loss2


def step_summed(model, x, y1, y2):
    loss1, loss2 = losses(model, x, y1, y2)
    (loss1 + loss2).backward()
    return loss1, loss2


def step_autograd_grad(model, x, y1, y2):
    params = [p for p in model.parameters()]
    loss1, loss2 = losses(model, x, y1, y2)
    # Each loss leaves the other head's parameters unused: their gradient is zeros.
    grads1 = torch.autograd.grad(loss1, params, retain_graph=True, materialize_grads=True)
    grads2 = torch.autograd.grad(loss2, params, materialize_grads=True)
    for p, g1, g2 in zip(params, grads1, grads2, strict=True):
        p.grad = g1 + g2  # the same .grad the other strategies leave
    return loss1, loss2


def step_article(model, x, y1, y2):
    # As the article writes it: keep the graph, then build a new one anyway.
    loss1 = losses(model, x, y1, y2)[0]
    loss1.backward(retain_graph=True)
    loss2 = losses(model, x, y1, y2)[1]
    loss2.backward()
    return loss1, loss2


STRATEGIES: dict[str, Callable] = {
    "retain": step_retain,
    "recompute": step_recompute,
    "summed": step_summed,
    "autograd_grad": step_autograd_grad,
    "article": step_article,
}
BASELINE = "summed"


@dataclass(frozen=True)
class Size:
    name: str
    width: int
    depth: int
    batch: int


FULL_SIZES = (
    Size("narrow-shallow", 256, 4, 1024),
    Size("narrow-deep", 256, 16, 1024),
    Size("wide-shallow", 1024, 4, 1024),
    Size("wide-deep", 1024, 16, 1024),
)
QUICK_SIZES = (
    Size("narrow-shallow", 16, 2, 32),
    Size("narrow-deep", 16, 6, 32),
    Size("wide-shallow", 64, 2, 32),
    Size("wide-deep", 64, 6, 32),
)


def make_problem(size: Size, device: torch.device, classes: int = 10):
    torch.manual_seed(SEED)
    model = TwoLossNet(size.width, size.depth, classes).to(device)
    x = torch.randn(size.batch, size.width, device=device)
    y1 = torch.randn(size.batch, 1, device=device)
    y2 = torch.randint(0, classes, (size.batch,), device=device)
    return model, x, y1, y2


def measure_memory(strategy: str, size: Size, device: torch.device) -> dict:
    """Exact bytes held by graphs during and after one step of ``strategy``."""
    model, x, y1, y2 = make_problem(size, device)
    meter = SavedTensorMeter(ignore=[*model.parameters(), x, y1, y2])
    step = STRATEGIES[strategy]
    with meter.recording():
        model.zero_grad(set_to_none=True)
        kept = step(model, x, y1, y2)  # what a loop body would still have in scope
        held_after = meter.current
    peak = meter.peak
    del kept
    assert meter.current == 0, "every graph is gone once its outputs are"
    grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad(set_to_none=True)
    cuda_peak = cuda_peak_extra_bytes(lambda: step(model, x, y1, y2), device)
    # On CUDA, torch.cuda.max_memory_allocated above is the allocator's figure.
    alloc = allocator_memory(strategy, size, device) if device.type == "cpu" else dict.fromkeys(
        ("alloc_peak_bytes", "alloc_after_bytes", "alloc_peak_grads_zeroed_bytes"))
    return {
        "peak_bytes": peak,
        "held_after_bytes": held_after,
        **alloc,
        "cuda_max_allocated_extra_bytes": cuda_peak,
        "_grads": grads,
    }


def allocator_memory(strategy: str, size: Size, device: torch.device) -> dict:
    """The real peak of CPU tensor memory during one step, from the allocator's events.

    Both peaks are bytes above what was allocated when the step began (the parameters, the
    batch and, in the second case, the gradient buffers).
    """
    model, x, y1, y2 = make_problem(size, device)
    params = list(model.parameters())
    step = STRATEGIES[strategy]
    step(model, x, y1, y2)  # warm-up: anything allocated once per process happens here

    # Gradients set to None, as optimizer.zero_grad() does by default.
    model.zero_grad(set_to_none=True)
    peak_none, after_none, kept = allocator_peak(lambda: step(model, x, y1, y2))
    del kept

    # Gradient buffers that exist already, as after zero_grad(set_to_none=False). They are
    # allocated first, in the same trace, so that the trace counts them if the step frees
    # them; the step's peak is measured from the total once they exist.
    model.zero_grad(set_to_none=True)

    def buffers_then_step():
        for p in params:
            p.grad = torch.zeros_like(p)  # one allocation each
        return step(model, x, y1, y2)

    totals, kept = allocator_trace(buffers_then_step)
    del kept
    start = totals[len(params) - 1]
    assert start == sum(p.grad.nbytes for p in params), "the buffers come first"
    peak_zeroed = max(totals[len(params):]) - start
    return {
        "alloc_peak_bytes": peak_none,
        "alloc_after_bytes": after_none,
        "alloc_peak_grads_zeroed_bytes": peak_zeroed,
    }


def _run_times(measurement) -> list[float]:
    return list(measurement.times)


def measure_times(size: Size, device: torch.device, budget_s: float, rounds: int) -> dict:
    """Median seconds per step of every strategy, interleaved in ``rounds``."""
    model, x, y1, y2 = make_problem(size, device)
    times: dict[str, list[float]] = {name: [] for name in STRATEGIES}
    sync = "torch.cuda.synchronize()" if device.type == "cuda" else "pass"
    for step in STRATEGIES.values():  # warm-up
        model.zero_grad(set_to_none=True)
        step(model, x, y1, y2)
    for _ in range(rounds):
        for name, step in STRATEGIES.items():
            timer = tbench.Timer(
                stmt=f"model.zero_grad(set_to_none=True); step(model, x, y1, y2); {sync}",
                globals={"model": model, "step": step, "x": x, "y1": y1, "y2": y2,
                         "torch": torch},
                num_threads=torch.get_num_threads(),
                label=size.name,
                sub_label=name,
            )
            times[name].extend(_run_times(timer.blocked_autorange(min_run_time=budget_s)))
    return {name: statistics.median(t) for name, t in times.items()} | {
        "_runs": {name: len(t) for name, t in times.items()}
    }


def strategy_rows(sizes, device, budget_s, rounds, log=print) -> list[dict]:
    rows = []
    for size in sizes:
        log(f"[strategies] {size.name}: width {size.width}, depth {size.depth}, "
            f"batch {size.batch}")
        memory = {name: measure_memory(name, size, device) for name in STRATEGIES}
        reference = memory[BASELINE].pop("_grads")
        for name in STRATEGIES:
            grads = memory[name].pop("_grads", reference)
            for g, r in zip(grads, reference, strict=True):
                torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)
        timing = measure_times(size, device, budget_s, rounds)
        base = timing[BASELINE]
        for name in STRATEGIES:
            row = {
                "size": size.name,
                "width": size.width,
                "depth": size.depth,
                "batch": size.batch,
                "strategy": name,
                "median_s": timing[name],
                "ratio_to_summed": timing[name] / base,
                "timed_runs": timing["_runs"][name],
                **memory[name],
            }
            rows.append(row)
            log(f"  {name:14s} {row['median_s'] * 1e3:9.2f} ms  x{row['ratio_to_summed']:.2f}"
                f"  peak {row['peak_bytes'] / 2**20:8.2f} MiB"
                f"  held after {row['held_after_bytes'] / 2**20:8.2f} MiB"
                f"  allocator peak {(row['alloc_peak_bytes'] or 0) / 2**20:8.2f} MiB"
                f" / {(row['alloc_peak_grads_zeroed_bytes'] or 0) / 2**20:8.2f} MiB")
    return rows


# --- Loop experiment (a): retain_graph=True left on by mistake -------------------------

LOOP_VARIANTS = {
    # name: (retain_graph, keep the loss tensor itself in a history list)
    "correct": (False, False),
    "retain": (True, False),
    "retain_keep_loss": (True, True),
    "keep_loss": (False, True),
}


def forgotten_retain_loop(size: Size, iterations: int, device: torch.device) -> dict:
    """Bytes held by graphs after each iteration of an ordinary training loop."""
    out = {}
    for name, (retain, keep_tensor) in LOOP_VARIANTS.items():
        model, x, y1, y2 = make_problem(size, device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        meter = SavedTensorMeter(ignore=[*model.parameters(), x, y1, y2])
        history, held, peaks = [], [], []
        with meter.recording():
            for _ in range(iterations):
                meter.reset_peak()
                opt.zero_grad()
                loss1, loss2 = losses(model, x, y1, y2)
                loss = loss1 + loss2
                loss.backward(retain_graph=retain)
                opt.step()
                history.append(loss if keep_tensor else loss.item())
                del loss1, loss2
                held.append(meter.current)
                peaks.append(meter.peak)
            del loss
            held_at_end_of_scope = meter.current
        del history
        assert meter.current == 0
        out[name] = {
            "retain_graph": retain,
            "keeps_loss_tensor": keep_tensor,
            "held_after_iteration_bytes": held,
            "peak_in_iteration_bytes": peaks,
            "held_after_loss_dropped_bytes": held_at_end_of_scope,
        }
    return out


# --- Loop experiment (b): truncated BPTT -----------------------------------------------


class RNNCellNet(nn.Module):
    def __init__(self, n_in: int, hidden: int):
        super().__init__()
        self.inp = nn.Linear(n_in, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, 1)

    def forward(self, xs, h):
        ys = []
        for x in xs:  # xs: (time, batch, n_in)
            h = torch.tanh(self.inp(x) + self.rec(h))
            ys.append(self.out(h))
        return torch.stack(ys), h


@dataclass(frozen=True)
class BPTTSize:
    n_in: int
    hidden: int
    batch: int
    chunk: int
    steps: int


FULL_BPTT = BPTTSize(n_in=32, hidden=128, batch=16, chunk=5, steps=300)
QUICK_BPTT = BPTTSize(n_in=4, hidden=8, batch=2, chunk=3, steps=20)


def bptt_data(size: BPTTSize, device):
    torch.manual_seed(SEED)
    model = RNNCellNet(size.n_in, size.hidden).to(device)
    xs = torch.randn(size.steps, size.chunk, size.batch, size.n_in, device=device)
    ys = torch.randn(size.steps, size.chunk, size.batch, 1, device=device)
    return model, xs, ys


def truncated_bptt(size: BPTTSize, device: torch.device) -> dict:
    """Per step: seconds and bytes held, hidden state detached or not (plus retain_graph).

    Neither variant calls ``optimizer.step()``: the not-detached one cannot (see
    ``optimizer_step_error``), so both just compute gradients, and the work differs only in
    how far back each backward reaches.
    """
    # Through hundreds of tanh steps the gradient of the oldest steps shrinks into denormal
    # floats, which x86 CPUs compute on a slow path; flushing them to zero keeps the time a
    # measure of how much graph each backward walks.
    flushed = torch.set_flush_denormal(True)
    try:
        out = _truncated_bptt(size, device)
    finally:
        torch.set_flush_denormal(False)
    out["flush_denormal"] = flushed
    out["optimizer_step_error"] = bptt_optimizer_step_error(size, device)
    return out


def _truncated_bptt(size: BPTTSize, device: torch.device) -> dict:
    out = {}
    for name, detach in (("not_detached_retain", False), ("detached", True)):
        model, xs, ys = bptt_data(size, device)
        meter = SavedTensorMeter(ignore=[*model.parameters(), xs, ys])
        h = torch.zeros(size.batch, size.hidden, device=device)
        seconds, held = [], []
        with meter.recording():
            for t in range(size.steps):
                start = time.perf_counter()
                if detach:
                    h = h.detach()
                model.zero_grad(set_to_none=True)
                pred, h = model(xs[t], h)
                loss = F.mse_loss(pred, ys[t])
                loss.backward(retain_graph=not detach)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                seconds.append(time.perf_counter() - start)
                held.append(meter.current)
            del h, pred, loss
        assert meter.current == 0
        out[name] = {"seconds_per_step": seconds, "held_after_step_bytes": held}
    return out


def bptt_optimizer_step_error(size: BPTTSize, device: torch.device) -> str:
    """The first line of the error the not-detached loop hits once it steps the optimizer."""
    model, xs, ys = bptt_data(size, device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    h = torch.zeros(size.batch, size.hidden, device=device)
    try:
        for t in range(2):
            opt.zero_grad()
            pred, h = model(xs[t], h)
            F.mse_loss(pred, ys[t]).backward(retain_graph=True)
            opt.step()
    except RuntimeError as error:
        return str(error).splitlines()[0]
    raise AssertionError("the second step should have failed")


# --- Running it all ------------------------------------------------------------------


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    try:
        info["load_average_at_start"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        pass
    if torch.cuda.is_available():
        info["cuda_device"] = torch.cuda.get_device_name()
    return info


def run(quick: bool = False, device: str = "cpu", threads: int = 1, log=print) -> dict:
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    # Each memory measurement starts with gc.collect(), which walks every Python object in the
    # process: with torch imported, 0.18 s a call, 7 of the quick run's 12.6 s. Objects that
    # exist before the run are frozen (gc.freeze: left out of collections), so a collection
    # walks only what the run made; cycles the run makes are still collected. Memory is
    # measured by torch's allocator, which this does not touch.
    gc.collect()
    gc.freeze()
    try:
        return _run(quick, torch.device(device), log)
    finally:
        gc.unfreeze()
        torch.set_num_threads(threads_before)


def _run(quick: bool, dev: torch.device, log) -> dict:
    started = time.perf_counter()
    sizes = QUICK_SIZES if quick else FULL_SIZES
    loop_size = sizes[0]
    bptt = QUICK_BPTT if quick else FULL_BPTT
    results = {
        "benchmark": "retain_bench",
        "mode": "quick" if quick else "full",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": str(dev),
        "machine": machine(),
        "sizes": [asdict(s) for s in sizes],
        "strategies": strategy_rows(
            sizes, dev, budget_s=0.02 if quick else 0.3, rounds=1 if quick else 4, log=log
        ),
    }
    log(f"[loop a] retain_graph=True left on, size {loop_size.name}")
    results["forgotten_retain"] = {
        "size": asdict(loop_size),
        "iterations": 5 if quick else 20,
        "variants": forgotten_retain_loop(loop_size, 5 if quick else 20, dev),
    }
    log(f"[loop b] truncated BPTT, {bptt.steps} steps")
    results["truncated_bptt"] = {"size": asdict(bptt), **truncated_bptt(bptt, dev)}
    results["total_seconds"] = time.perf_counter() - started
    log(f"done in {results['total_seconds']:.1f} s")
    return results


CSV_FIELDS = (
    "size", "width", "depth", "batch", "strategy", "median_s", "ratio_to_summed",
    "peak_bytes", "held_after_bytes", "alloc_peak_bytes", "alloc_after_bytes",
    "alloc_peak_grads_zeroed_bytes", "cuda_max_allocated_extra_bytes",
)


def write(results: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "retain_bench.json"
    csv_path = out_dir / "retain_bench.csv"
    json_path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    lines = [",".join(CSV_FIELDS)]
    for row in results["strategies"]:
        lines.append(",".join("" if row[k] is None else str(row[k]) for k in CSV_FIELDS))
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return json_path, csv_path


MEMORY_FIELDS = (
    "peak_bytes", "held_after_bytes", "alloc_peak_bytes", "alloc_after_bytes",
    "alloc_peak_grads_zeroed_bytes", "cuda_max_allocated_extra_bytes",
)


def rerun_memory(results: dict, device: str = "cpu", threads: int = 1, log=print) -> dict:
    """Measure the memory columns again into ``results``; leave its timings as they are.

    Memory figures do not depend on the machine's load, timings do: this adds new memory
    columns to a full run made on a quiet machine without timing again on a busy one. The
    saved-tensor figures must come out as before; the date of this rerun is recorded.
    """
    dev = torch.device(device)
    assert results["device"] == str(dev), "rerun on the device of the full run"
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for row in results["strategies"]:
            size = Size(row["size"], row["width"], row["depth"], row["batch"])
            memory = measure_memory(row["strategy"], size, dev)
            memory.pop("_grads")
            for key in ("peak_bytes", "held_after_bytes"):
                assert memory[key] == row[key], (row["size"], row["strategy"], key)
            row.update({k: memory[k] for k in MEMORY_FIELDS})
            log(f"  {row['size']:15s} {row['strategy']:14s} allocator peak "
                f"{(row['alloc_peak_bytes'] or 0) / 2**20:8.2f} MiB"
                f" / {(row['alloc_peak_grads_zeroed_bytes'] or 0) / 2**20:8.2f} MiB")
        # Recorded before the finally restores the caller's thread count, so that the file
        # says how many threads measured. (Until this fix it was read after the restore: the
        # committed results' memory_rerun records the process default, 2, not the 1 used.)
        rerun_machine = machine()
    finally:
        torch.set_num_threads(threads_before)
    results["memory_rerun"] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": rerun_machine,
        "fields": list(MEMORY_FIELDS),
    }
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the results (default benchmarks/results, or "
                             "benchmarks/results/quick with --quick)")
    parser.add_argument("--memory-only", action="store_true",
                        help="measure the memory columns again into the existing results "
                             "file, keeping its timings (see rerun_memory)")
    args = parser.parse_args(argv)
    out = args.out or (RESULTS_DIR / "quick" if args.quick else RESULTS_DIR)
    if args.memory_only:
        results = json.loads((out / "retain_bench.json").read_text(encoding="utf-8"))
        results = rerun_memory(results, device=args.device, threads=args.threads)
    else:
        results = run(quick=args.quick, device=args.device, threads=args.threads)
    for path in write(results, out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
