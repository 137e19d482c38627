"""How much slower is a training step under retaincheck.audit()?

Realistic CPU steps for an MLP and a small CNN, each in two versions: a plain step (one loss,
no retain_graph) and a step with two losses from one forward pass (the first backward retains
the graph, so the audit walks and hooks it). Plain and audited steps alternate in the same run,
and the ratio of their median times is reported. Run: ``python benchmarks/retaincheck_overhead.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
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
    worst = 0.0
    for name, factory in (("MLP 784-512-256-10, batch 128", mlp), ("CNN 2 conv, batch 64", cnn)):
        for two in (False, True):
            model, x = factory()
            plain, audited = measure(make_step(model, x, two))
            ratio = audited / plain
            worst = max(worst, ratio)
            kind = "two losses, retain_graph=True" if two else "one loss, no retain"
            print(f"{name:32s} {kind:31s} plain {plain * 1e3:7.2f} ms  "
                  f"audited {audited * 1e3:7.2f} ms  ratio {ratio:.3f}")
    print(f"worst ratio {worst:.3f}")


if __name__ == "__main__":
    main()
