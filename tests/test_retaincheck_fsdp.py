"""retaincheck's verdicts stay right when FSDP2's own hooks are on the graph.

FSDP2 (``fully_shard``) adds autograd hooks of its own: a pre-backward hook on each sharded
layer's output that all-gathers the parameters again, and a post-backward hook that
reduce-scatters the gradients and frees the whole parameters. The audit hooks the same graph.
This runs three call sites on 2 gloo ranks (through the launcher the distributed page uses)
and checks each verdict against the ground truth, as ``test_retaincheck_audit.py`` does for
single-process scripts: the same code with that one ``retain_graph=True`` turned off must
fail with "backward through the graph a second time" when the verdict is "needed", and must
give bit-identical gradients when it is "not needed". It also checks that the audit does not
change any gradient. One launch, bounded by the launcher's time limit and by the subprocess
timeout below.
"""

from __future__ import annotations

from pathlib import Path

import snippetcheck

LAUNCHER_DIR = snippetcheck.SNIPPETS_DIR / "distributed"
SRC_DIR = Path(__file__).resolve().parent.parent / "src"

PROGRAM = """\
import contextlib
import sys

sys.path[:0] = [{launcher_dir!r}, {src_dir!r}]
import retaincheck
import torch
from launch import launch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard


def make_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    for layer in (model[0], model[2]):
        fully_shard(layer)
    fully_shard(model)
    return model


def grads(model):
    return [p.grad.full_tensor() for p in model.parameters()]


def two_losses(model, x, retain):  # site A: the retain is needed
    y = model(x)
    y.pow(2).mean().backward(retain_graph=retain)
    y.tanh().mean().backward()


def one_loss(model, x, retain):  # site B: the retain is not needed
    model(x).pow(2).mean().backward(retain_graph=retain)


def penalty(model, x, retain):  # site C: the outer backward reuses the graph
    model.set_reshard_after_backward(False)
    x = x.clone().requires_grad_(True)
    out = model(x)
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True, retain_graph=retain)
    (out.mean() + gx.pow(2).mean()).backward()
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


SITES = [("A", two_losses, True), ("B", one_loss, False), ("C", penalty, True)]


def run(site, x, retain, audited):
    model = make_model()
    context = retaincheck.audit() if audited else contextlib.nullcontext()
    with context as report:
        site(model, x, retain)
    return grads(model), report


def on_every_rank(rank, world_size):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).chunk(world_size)[rank]
    for name, site, needed in SITES:
        audited, report = run(site, x, True, audited=True)
        plain, _ = run(site, x, True, audited=False)
        assert all(torch.equal(a, b) for a, b in zip(audited, plain, strict=True)), name
        verdicts = [call.needed for call in report.calls]
        assert verdicts == [needed], (name, report.format())
        try:  # the ground truth: the same code without this retain
            without, _ = run(site, x, False, audited=False)
        except RuntimeError as error:
            assert "backward through the graph a second time" in str(error), (name, error)
            outcome = "fails without the retain"
        else:
            assert all(torch.equal(a, b) for a, b in zip(without, plain, strict=True)), name
            outcome = "identical without the retain"
        assert outcome.startswith("fails") == needed, (name, outcome)
        if rank == 0:
            print(name, "needed" if needed else "not needed", outcome, flush=True)


if __name__ == "__main__":
    launch(on_every_rank, time_limit_s=90)
"""


def test_verdicts_under_fsdp2_on_two_ranks(tmp_path):
    program = tmp_path / "retaincheck_fsdp2.py"
    program.write_text(
        PROGRAM.format(launcher_dir=str(LAUNCHER_DIR), src_dir=str(SRC_DIR)), encoding="utf-8"
    )
    # Like a snippet: in a fork of the warm interpreter, its ranks forks of a clean one
    # (snippetserver.start_spawn_zygote); 6 s of CPU less than three new interpreters.
    run = snippetcheck.run_file(program, timeout=150, warm_spawn=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "A needed fails without the retain",
        "B not needed identical without the retain",
        "C needed fails without the retain",
    ], run.stdout + run.stderr
