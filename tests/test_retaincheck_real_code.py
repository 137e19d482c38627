"""retaincheck on the shapes of real training code, each verdict checked against the truth.

Each fixture in ``tests/fixtures/real_code/`` is a cut-down public training script (the repo
and path it follows are named at its top), seeded, with tiny models, ending with ``result``:
the tensors it computed. Every ``retain_graph=True`` in it carries a ``# site: <name>`` tag.
The truth for a site is re-derived here, every run: the same script with that one flag
switched to ``retain_graph=False``. If that raises "backward through the graph a second
time" or changes a result, the flag is needed; if it runs with bit-identical results, it is
not. The audit's verdict on the unchanged script must agree, and "not needed" where the flag
is needed, the worst possible answer, must never happen.

The fixtures run in this process (torch is imported once; each run takes well under a second).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import retaincheck

FIXTURES = Path(__file__).parent / "fixtures" / "real_code"
SITE = re.compile(r"#\s*site:\s*(\w+)")

NEEDED, NOT_NEEDED, LEAK = "needed", "not needed", "needed only because history leaks"
SO_FAR = "not needed so far (run stopped early)"
STOPS = "the run stops before any reuse"  # the truth cannot be observed: the script exits early

# (fixture, site) -> (truth, verdict, executions, reused_executions)
EXPECTED = {
    ("crash_before_reuse.py", "first_loss"): (STOPS, SO_FAR, 1, 0),
    ("gan_shared_fake.py", "d_backward"): (NEEDED, NEEDED, 2, 2),
    ("hvp_power_iteration.py", "hvp"): (NEEDED, NEEDED, 4, 3),
    ("jacobian_rows_one_hot.py", "row"): (NEEDED, NEEDED, 4, 3),
    ("maml_first_order.py", "inner_grad"): (NOT_NEEDED, NOT_NEEDED, 8, 0),  # finding 1
    ("maml_second_order.py", "inner_grad"): (NEEDED, NEEDED, 4, 4),
    ("pcgrad_tasks.py", "task_grad"): (NEEDED, NEEDED, 6, 6),
    ("per_class_grads.py", "class_grad"): (NEEDED, NEEDED, 10, 8),
    ("style_transfer.py", "style_backward"): (NEEDED, NEEDED, 9, 9),  # finding 2
    ("style_transfer.py", "content_backward"): (NOT_NEEDED, NOT_NEEDED, 3, 0),
    ("tbptt_detached.py", "chunk_backward"): (NOT_NEEDED, NOT_NEEDED, 4, 0),
    ("tbptt_leak.py", "chunk_backward"): (NEEDED, LEAK, 4, 3),
    ("wgan_gp.py", "penalty_grad"): (NEEDED, NEEDED, 2, 2),
}


def sites(path: Path) -> dict[str, int]:
    """site name -> line number of its tag: the first line of the call (what the audit reports
    as the call's line); the flag is on that line or on one of the call's next lines."""
    found = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        match = SITE.search(line)
        if match:
            assert "retain_graph=True" in _call_text(lines, number), f"{path.name}:{number}"
            found[match.group(1)] = number
    return found


def _call_text(lines: list[str], number: int) -> str:
    """The call that starts on line ``number``, up to its closing parenthesis."""
    text, depth = "", 0
    for line in lines[number - 1 :]:
        code = line.split("#")[0]
        text += code + "\n"
        depth += code.count("(") - code.count(")")
        if depth <= 0:
            break
    return text


def run(path: Path, source: str | None = None, audited: bool = False, **names):
    """Run a fixture's source in a fresh namespace (with ``names`` in it): (result tensors or
    the exception, report)."""
    source = path.read_text(encoding="utf-8") if source is None else source
    code = compile(source, str(path), "exec")
    namespace = {"__name__": "__main__", "__file__": str(path), **names}
    torch.manual_seed(0)
    outcome, report = None, None
    try:
        if audited:
            with retaincheck.audit() as report:
                exec(code, namespace)
        else:
            exec(code, namespace)
        outcome = [t.detach().clone() if t is not None else None for t in namespace["result"]]
    except (Exception, SystemExit) as exc:
        outcome = exc
    return outcome, report


def same(a, b) -> bool:
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        return type(a) is type(b) and str(a) == str(b)
    return len(a) == len(b) and all(
        (x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
        for x, y in zip(a, b, strict=True)
    )


def truth(path: Path, line: int, baseline) -> str:
    """Switch that one flag off and look."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i in range(line - 1, len(lines)) if "retain_graph=True" in lines[i])
    lines[at] = lines[at].replace("retain_graph=True", "retain_graph=False", 1)
    outcome, _ = run(path, "".join(lines))
    if isinstance(baseline, BaseException):  # the original run stops: nothing to compare with
        assert same(outcome, baseline), outcome
        return STOPS
    twice = "backward through the graph a second time"
    if isinstance(outcome, RuntimeError) and twice in str(outcome):
        return NEEDED
    assert not isinstance(outcome, BaseException), f"another error: {outcome!r}"
    return NOT_NEEDED if same(outcome, baseline) else NEEDED


def test_every_tagged_site_has_an_expectation_and_every_fixture_names_its_model():
    tagged = {(p.name, name) for p in FIXTURES.glob("*.py") for name in sites(p)}
    assert tagged == set(EXPECTED)
    for path in FIXTURES.glob("*.py"):
        head = path.read_text(encoding="utf-8").split('"""')[1]
        assert "Modelled on" in head, path.name


@pytest.mark.parametrize("name", sorted({f for f, _ in EXPECTED}))
def test_verdicts_match_the_truth(name):
    path = FIXTURES / name
    baseline, _ = run(path)
    audited, report = run(path, audited=True)
    assert same(baseline, audited), "the audit changed the script's results"
    by_line = {c.line: c for c in report.calls}
    assert sorted(by_line) == sorted(sites(path).values()), report.format()
    for site, line in sites(path).items():
        call = by_line[line]
        want_truth, want_verdict, runs, reused = EXPECTED[(name, site)]
        got_truth = truth(path, line, baseline)
        # The worst possible answer: "not needed" where switching the flag off breaks the run.
        assert not (got_truth == NEEDED and call.verdict in (NOT_NEEDED, SO_FAR)), report.format()
        assert (got_truth, call.verdict) == (want_truth, want_verdict), (site, report.format())
        assert (call.executions, call.reused_executions) == (runs, reused), site
        assert call.needed == (want_verdict in (NEEDED, LEAK))
        if want_verdict == LEAK:
            assert "detach" in call.suggestion
        else:
            assert "detach the hidden state" not in call.suggestion
    assert report.completed == (name != "crash_before_reuse.py")


def suggestion(name: str, site: str) -> str:
    _, report = run(FIXTURES / name, audited=True)
    line = sites(FIXTURES / name)[site]
    return next(c for c in report.calls if c.line == line).suggestion


def test_suggestions_fit_the_code():
    # several losses on one forward, no step in between: summing is offered, on a condition
    style = suggestion("style_transfer.py", "style_backward")
    assert "sum the losses" in style and "if the gradients are only added" in style
    # an optimizer step between the two backward() calls: summing would change training
    gan = suggestion("gan_shared_fake.py", "d_backward")
    assert "sum the losses" not in gan and "optimizer step ran between" in gan
    # is_grads_batched only for the same outputs and inputs with their own grad_outputs
    assert "is_grads_batched" in suggestion("jacobian_rows_one_hot.py", "row")
    assert "is_grads_batched" in suggestion("hvp_power_iteration.py", "hvp")
    assert "not a power iteration" in suggestion("hvp_power_iteration.py", "hvp")
    for name, site in (("per_class_grads.py", "class_grad"), ("pcgrad_tasks.py", "task_grad")):
        assert "is_grads_batched" not in suggestion(name, site)
        assert "sum the losses" not in suggestion(name, site)
    assert "run the script to completion" in suggestion("crash_before_reuse.py", "first_loss")
    assert suggestion("maml_first_order.py", "inner_grad").startswith("remove retain_graph=True")


def test_a_stopped_run_says_so_in_the_json_and_the_text():
    _, report = run(FIXTURES / "crash_before_reuse.py", audited=True)
    data = report.to_dict()
    assert data["completed"] is False and data["stopped_by"] == "SystemExit(3)"
    (call,) = data["calls"]
    assert call["verdict"] == SO_FAR and call["needed"] is False
    text = report.format()
    assert text.startswith("\n") and "stopped early (SystemExit(3))" in text.splitlines()[1]
