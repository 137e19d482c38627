"""How much slower is a step under retaincheck.audit()?

Two kinds of workload, each run plain and audited side by side in one process:

* **training steps** on CPU: an MLP (784-512-256-10, batch 128) and a small CNN (two
  convolutions, batch 64), each with one loss (no retain_graph) and with two losses from one
  forward pass (the first ``backward(retain_graph=True)``, so the audit walks and hooks it);
* **many small hooked calls**: a per-class gradient loop as in DeepFool-style attacks, one
  forward of a small CNN on one 3x32x32 image, then 40 ``torch.autograd.grad(logits[:, c].sum(),
  x, retain_graph=True)`` calls, one per class (issue 16's slow case), on a 3x64x64 image
  with 16 and 32 channels, and on a 3x32x32 image with 8 and 16 channels (calls of about
  0.2 ms each, where the audit's fixed cost per call weighs most).

Plain and audited blocks alternate (which goes first alternates too); each block's time is the
thread's CPU time (``time.thread_time``), so that other processes on a loaded machine do not
count; the ratio of a round is audited/plain and the result is the median over the rounds.
Run: ``python benchmarks/retaincheck_overhead.py [--quick] [--src DIR] [--out FILE]``
(``--src`` imports retaincheck from another checkout, to measure an older version). It writes
``benchmarks/results/retaincheck_overhead.json`` and ``.md`` unless ``--quick``.

``--real-code`` measures instead the whole run of each script in ``tests/fixtures/real_code/``
(cut-down public training scripts), plain and inside ``audit()`` side by side, the audit's
start and end (its search of the program's files for saved-tensor reads) included; it writes
``benchmarks/results/retaincheck_overhead_real_code.json`` and ``.md``. With ``--cli`` it
compares ``python script.py`` with ``python -m retaincheck script.py`` instead (new processes,
their CPU time: what a user waits for, the interpreter's start and torch's import included).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "retaincheck_overhead.json"


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10),
    ), torch.randn(128, 784)


def cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10),
    ), torch.randn(64, 1, 28, 28)


def training_step(model, x, two_losses):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    target = torch.randint(0, 10, (x.shape[0],))

    def step():
        opt.zero_grad()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, target)
        if two_losses:
            loss.backward(retain_graph=True)
            out.pow(2).mean().backward()
        else:
            loss.backward()
        opt.step()

    return step


def per_class_step(size=64, channels=(16, 32)):
    c1, c2 = channels
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, c1, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(c1, c2, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(), torch.nn.Linear(c2 * 16, 40),
    )
    image = torch.randn(1, 3, size, size)

    def step():
        x = image.clone().requires_grad_(True)
        logits = net(x)
        for c in range(40):
            torch.autograd.grad(logits[:, c].sum(), x, retain_graph=True)

    return step


def measure(step, audit, rounds, steps_per_block):
    """Median plain and audited CPU time per step, and the median of the rounds' ratios."""
    for _ in range(3):
        step()
    plain, audited, ratios = [], [], []
    for r in range(rounds):
        times = {}
        for audited_block in ((False, True) if r % 2 == 0 else (True, False)):
            t0 = time.thread_time()
            if audited_block:
                with audit():
                    for _ in range(steps_per_block):
                        step()
            else:
                for _ in range(steps_per_block):
                    step()
            times[audited_block] = (time.thread_time() - t0) / steps_per_block
        plain.append(times[False])
        audited.append(times[True])
        ratios.append(times[True] / times[False])
    return statistics.median(plain), statistics.median(audited), statistics.median(ratios)


WORKLOADS = [
    ("MLP 784-512-256-10, batch 128", "one loss, no retain", "training",
     lambda: training_step(*mlp(), two_losses=False)),
    ("MLP 784-512-256-10, batch 128", "two losses, retain_graph=True", "training",
     lambda: training_step(*mlp(), two_losses=True)),
    ("CNN 2 conv, batch 64", "one loss, no retain", "training",
     lambda: training_step(*cnn(), two_losses=False)),
    ("CNN 2 conv, batch 64", "two losses, retain_graph=True", "training",
     lambda: training_step(*cnn(), two_losses=True)),
    ("CNN 16-32 channels, one 3x64x64 image", "40 per-class autograd.grad(retain_graph=True)",
     "many small calls", per_class_step),
    ("CNN 8-16 channels, one 3x32x32 image", "40 per-class autograd.grad(retain_graph=True)",
     "many tiny calls", lambda: per_class_step(32, (8, 16))),
]


def run(audit, rounds, steps_per_block, quiet=False):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = []
    for model, step_name, kind, factory in WORKLOADS:
        plain, audited, ratio = measure(factory(), audit, rounds, steps_per_block)
        rows.append({"model": model, "step": step_name, "kind": kind,
                     "plain_ms": round(plain * 1e3, 3), "audited_ms": round(audited * 1e3, 3),
                     "ratio": round(ratio, 3)})
        if not quiet:
            print(f"{model:34s} {step_name:46s} plain {plain * 1e3:7.2f} ms  "
                  f"audited {audited * 1e3:7.2f} ms  ratio {ratio:.3f}", flush=True)
    return rows


REAL_CODE = ROOT / "tests" / "fixtures" / "real_code"


def script_step(path: Path):
    """One whole run of a script, as the real-code tests run it (seeded, in this process)."""
    code = compile(path.read_text(encoding="utf-8"), str(path), "exec")

    def step():
        torch.manual_seed(0)
        try:
            exec(code, {"__name__": "__main__", "__file__": str(path)})
        except SystemExit:  # crash_before_reuse.py stops early on purpose
            pass

    return step


def real_code(audit, rounds):
    """Per script: median plain and audited CPU time of a whole run, and their ratio; and the
    ratio of the totals."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = []
    for path in sorted(REAL_CODE.glob("*.py")):
        plain, audited, ratio = measure(script_step(path), audit, rounds, 1)
        rows.append({"script": path.name, "plain_ms": round(plain * 1e3, 3),
                     "audited_ms": round(audited * 1e3, 3), "ratio": round(ratio, 3)})
        print(f"{path.name:28s} plain {plain * 1e3:8.2f} ms  audited {audited * 1e3:8.2f} ms  "
              f"ratio {ratio:.3f}", flush=True)
    total = sum(r["audited_ms"] for r in rows) / sum(r["plain_ms"] for r in rows)
    print(f"all scripts: audited/plain {total:.3f}")
    return rows, total


def cli_run(path: Path, audited: bool, src: str) -> float:
    """CPU seconds (user + system) of one new process running the script."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, *(["-m", "retaincheck"] if audited else []), path.name]
    env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1"}
    subprocess.run(command, cwd=path.parent, env=env, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def real_code_cli(rounds: int, src: str):
    rows = []
    for path in sorted(REAL_CODE.glob("*.py")):
        plain, audited, ratios = [], [], []
        for r in range(rounds):
            times = {}
            for flag in ((False, True) if r % 2 == 0 else (True, False)):
                times[flag] = cli_run(path, flag, src)
            plain.append(times[False])
            audited.append(times[True])
            ratios.append(times[True] / times[False])
        row = {"script": path.name, "plain_ms": round(statistics.median(plain) * 1e3, 1),
               "audited_ms": round(statistics.median(audited) * 1e3, 1),
               "ratio": round(statistics.median(ratios), 3)}
        rows.append(row)
        print(f"{path.name:28s} python {row['plain_ms']:8.1f} ms  retaincheck "
              f"{row['audited_ms']:8.1f} ms  ratio {row['ratio']:.3f}", flush=True)
    total = sum(r["audited_ms"] for r in rows) / sum(r["plain_ms"] for r in rows)
    print(f"all scripts: audited/plain {total:.3f}")
    return rows, total


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="few rounds, write nothing")
    parser.add_argument("--src", default=str(ROOT / "src"), help="where retaincheck is")
    parser.add_argument("--out", default=None, help="JSON file to write (default: results)")
    parser.add_argument("--real-code", action="store_true",
                        help="whole runs of the real-code test scripts, plain and audited")
    parser.add_argument("--cli", action="store_true",
                        help="with --real-code: python script.py vs python -m retaincheck")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.src)
    import retaincheck

    if args.real_code:
        rounds = (3 if args.quick else 5) if args.cli else (5 if args.quick else 15)
        print(f"torch {torch.__version__}, 1 thread, retaincheck from {args.src}; "
              f"{rounds} interleaved rounds of one whole run, medians of CPU time")
        load_before = os.getloadavg()
        if args.cli:
            rows, total = real_code_cli(rounds, args.src)
        else:
            rows, total = real_code(retaincheck.audit, rounds)
        if not args.quick:
            result = {
                "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
                "python": platform.python_version(), "torch": torch.__version__, "threads": 1,
                "timer": "time.thread_time (CPU time of the benchmark's thread)",
                "rounds": rounds, "date": datetime.date.today().isoformat(),
                "load_average_before": [round(v, 2) for v in load_before],
                "load_average_after": [round(v, 2) for v in os.getloadavg()],
                "rows": rows, "total_ratio": round(total, 3),
                "max_ratio": max(r["ratio"] for r in rows),
            }
            name = "retaincheck_overhead_real_code" + ("_cli" if args.cli else "") + ".json"
            out = Path(args.out) if args.out else RESULT.with_name(name)
            result["how"] = (
                "python script.py vs python -m retaincheck script.py, new processes, CPU time"
                if args.cli else "exec of the script in this process, plain vs inside audit()"
            )
            out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            lines = [
                f"# retaincheck overhead on the real-code scripts ({result['date']}, torch "
                f"{result['torch']}, {result['machine']}, 1 thread)", "",
                "| script | plain ms | audited ms | ratio |", "|---|---:|---:|---:|",
                *(f"| {r['script']} | {r['plain_ms']:.2f} | {r['audited_ms']:.2f} | "
                  f"{r['ratio']:.3f} |" for r in rows),
                "", f"All scripts together: {total:.3f}. {result['how']}; median over the "
                "interleaved rounds. Load average before "
                f"{result['load_average_before']}, after {result['load_average_after']}.",
            ]
            out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
            print(f"wrote {out} and {out.with_suffix('.md').name}")
        return rows

    rounds, steps = (5, 3) if args.quick else (21, 3)
    print(f"torch {torch.__version__}, 1 thread, retaincheck from {args.src}; "
          f"{rounds} interleaved rounds of {steps} steps, medians of CPU time")
    load_before = os.getloadavg()
    rows = run(retaincheck.audit, rounds, steps)
    if args.quick:
        return rows
    training = [r["ratio"] for r in rows if r["kind"] == "training"]
    small = [r["ratio"] for r in rows if r["kind"] == "many small calls"]
    tiny = [r["ratio"] for r in rows if r["kind"] == "many tiny calls"]
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": 1,
        "timer": "time.thread_time (CPU time of the benchmark's thread)",
        "rounds": rounds,
        "steps_per_block": steps,
        "date": datetime.date.today().isoformat(),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "rows": rows,
        "min_ratio": min(training),
        "max_ratio": max(training),
        "many_small_calls_ratio": max(small),
        "many_tiny_calls_ratio": max(tiny),
    }
    out = Path(args.out) if args.out else RESULT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"# retaincheck overhead ({result['date']}, torch {result['torch']}, "
        f"{result['machine']}, 1 thread)",
        "",
        "| model | step | plain ms | audited ms | ratio |",
        "|---|---|---:|---:|---:|",
        *(f"| {r['model']} | {r['step']} | {r['plain_ms']:.2f} | {r['audited_ms']:.2f} | "
          f"{r['ratio']:.3f} |" for r in rows),
        "",
        f"Median over {rounds} interleaved rounds of {steps} steps, CPU time of the thread. "
        f"Load average before {result['load_average_before']}, after "
        f"{result['load_average_after']}.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.md').name}")
    return rows


if __name__ == "__main__":
    main()
