"""How much slower is a training step under retaincheck.audit()?

Realistic CPU steps for an MLP and a small CNN, each in two versions: a plain step (one loss,
no retain_graph) and a step with two losses from one forward pass (the first backward retains
the graph, so the audit walks and hooks it). Plain and audited steps alternate in the same run,
and the ratio of their median times is reported. Run: ``python benchmarks/retaincheck_overhead.py``.
It also writes ``benchmarks/results/retaincheck_overhead.json`` (machine, torch, date, load
average, every ratio); the retaincheck page quotes the range of the committed ratios.
"""

from __future__ import annotations

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
sys.path.insert(0, str(ROOT / "src"))
import retaincheck  # noqa: E402


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


def make_step(model, x, two_losses):
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


def measure(step, rounds=15, steps_per_round=5):
    plain, audited = [], []
    for _ in range(3):
        step()
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps_per_round):
            step()
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with retaincheck.audit():
            for _ in range(steps_per_round):
                step()
        audited.append(time.perf_counter() - t0)
    p, a = statistics.median(plain), statistics.median(audited)
    return p / steps_per_round, a / steps_per_round


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; times are medians of per-step times")
    load_before = os.getloadavg()
    rows = []
    for name, factory in (("MLP 784-512-256-10, batch 128", mlp), ("CNN 2 conv, batch 64", cnn)):
        for two in (False, True):
            model, x = factory()
            plain, audited = measure(make_step(model, x, two))
            ratio = audited / plain
            kind = "two losses, retain_graph=True" if two else "one loss, no retain"
            rows.append({"model": name, "step": kind, "plain_ms": round(plain * 1e3, 3),
                         "audited_ms": round(audited * 1e3, 3), "ratio": round(ratio, 3)})
            print(f"{name:32s} {kind:31s} plain {plain * 1e3:7.2f} ms  "
                  f"audited {audited * 1e3:7.2f} ms  ratio {ratio:.3f}")
    ratios = [r["ratio"] for r in rows]
    print(f"ratios from {min(ratios):.2f} to {max(ratios):.2f}")
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": 1,
        "date": datetime.date.today().isoformat(),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "rows": rows,
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
