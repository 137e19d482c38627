"""Issue 27's cases, each verdict checked against the truth found by switching the flag off.

Each fixture in ``tests/fixtures/retaincheck/truth/`` has one ``retain_graph=True`` tagged
``# site: <name>``. As in test_retaincheck_real_code.py, the truth is re-derived every run: the
same script with that flag switched to ``retain_graph=False``; if that raises "backward
through the graph a second time" or changes the outcome (its results, or the error that
stops it), the flag is needed. The audit's verdict and label are asserted, and "not needed"
where the flag is needed must never happen.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

import pytest
import torch
from test_retaincheck_real_code import NEEDED, NOT_NEEDED, same, sites
from test_retaincheck_real_code import run as run_fixture

import retaincheck
from retaincheck._sizes import saved_tensor_names

FIXTURES = Path(__file__).parent / "fixtures" / "retaincheck" / "truth"
EARLY_GRAD = torch.autograd.grad  # bound at import, before any audit
LEAK, COULD_NOT_TELL = "needed only because history leaks", "could not tell: kept"

# fixture -> (truth, verdict, completed)
EXPECTED = {
    "saved_read.py": (NEEDED, COULD_NOT_TELL, True),  # item 1: grad_fn._saved_result
    "saved_read_ctx.py": (NEEDED, COULD_NOT_TELL, True),  # item 1: ctx.saved_tensors outside
    "custom_function_not_needed.py": (NOT_NEEDED, NOT_NEEDED, True),  # its own backward only
    "node_called_directly.py": (NEEDED, COULD_NOT_TELL, True),  # item 1: y.grad_fn(g)
    "early_bound_grad.py": (NEEDED, NEEDED, True),  # item 3: a name bound before the audit
    "rnn_step_plain.py": (NEEDED, LEAK, False),  # item 4: the step's in-place error stops it
    "rnn_step_fused.py": (NEEDED, LEAK, True),  # item 4: a fused step, no error
    "leak_with_trained_tensor.py": (NEEDED, LEAK, True),  # the leak advice's second half
    "grad_read_between.py": (NEEDED, NEEDED, True),  # item 5: x.grad read between the calls
    "hook_per_loss.py": (NEEDED, NEEDED, True),  # S1: a hook records each loss's gradient
    "copy_slices.py": (NEEDED, NEEDED, True),  # item 6: CopySlices holds saved tensors
    "function_saves_none.py": (NEEDED, NEEDED, True),  # F1: a Function that saved None
    "function_saves_nothing.py": (NEEDED, NEEDED, True),  # F1: ... or nothing at all
    "node_called_by_alias.py": (NEEDED, COULD_NOT_TELL, True),  # F2: fn = y.grad_fn; fn(g)
    "graph_walk.py": (NEEDED, COULD_NOT_TELL, True),  # F2: nodes popped from a stack, called
    "saved_by_getattr.py": (NEEDED, COULD_NOT_TELL, True),  # F2: getattr(n, "saved_tensors")
    "trainer_backward.py": (NEEDED, COULD_NOT_TELL, True),  # F2: a method named backward
    "node_call_caught.py": (NEEDED, COULD_NOT_TELL, True),  # y.grad_fn(g) in try/except
    "saved_read_caught.py": (NEEDED, COULD_NOT_TELL, True),  # grad_fn._saved_* in try/except
    "exec_read.py": (NEEDED, COULD_NOT_TELL, True),  # F5: a node call in exec'd code
    "exec_clean.py": (NOT_NEEDED, NOT_NEEDED, True),  # F5: exec'd code that reads no graph
    "gradient_edge_call.py": (NEEDED, COULD_NOT_TELL, True),  # rev27e N1: get_gradient_edge
    "saved_name_in_pieces.py": (NEEDED, COULD_NOT_TELL, True),  # rev27e N3: "_sav" + "ed_result"
    # rev27e F3: a second backward() behind `if step % 50 == 0` that a five-step run never takes
    "periodic_second_backward.py": (NOT_NEEDED, COULD_NOT_TELL, True),
}


def run(path: Path, source: str | None = None, audited: bool = False):
    """(results or the exception that stopped the script, report); the fixtures see EARLY_GRAD."""
    return run_fixture(path, source, audited, EARLY_GRAD=EARLY_GRAD)


def truth(path: Path, baseline) -> str:
    source = path.read_text(encoding="utf-8")
    assert source.count("retain_graph=True") == 1, path.name
    outcome, _ = run(path, source.replace("retain_graph=True", "retain_graph=False"))
    if isinstance(outcome, RuntimeError) and "backward through the graph a second time" in str(
        outcome
    ):
        return NEEDED
    return NOT_NEEDED if same(outcome, baseline) else NEEDED


def test_every_fixture_has_an_expectation():
    assert sorted(p.name for p in FIXTURES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict_and_label_match_the_truth(name):
    path = FIXTURES / name
    baseline, _ = run(path)
    audited, report = run(path, audited=True)
    assert same(baseline, audited), "the audit changed the outcome"
    want_truth, want_verdict, completed = EXPECTED[name]
    got_truth = truth(path, baseline)
    (call,) = report.calls
    assert call.line == next(iter(sites(path).values()))
    assert not (got_truth == NEEDED and call.verdict.startswith("not needed")), report.format()
    assert (got_truth, call.verdict) == (want_truth, want_verdict), report.format()
    assert report.completed == completed
    assert (call.verdict in (NEEDED, LEAK)) == call.needed
    if want_verdict == LEAK:
        assert call.history_leak and "h = h.detach()" in call.suggestion
        assert f"NEEDED ONLY BECAUSE HISTORY LEAKS: walked again by {call.site}" in report.format()
    lines = path.read_text().splitlines()
    untaken = [f"{call.file}:{i}" for i, text in enumerate(lines, 1) if text.endswith("# untaken")]
    assert call.unseen_calls == untaken
    if untaken:
        assert "but the backward()/grad() call at " + ", ".join(untaken) + (
            " did not run after this one first ran") in report.format()
        assert call.to_dict()["unseen_calls"] == untaken
    elif want_verdict == COULD_NOT_TELL:
        # the line after the site, or the lines marked "# read" / "(read)" / "# exec'd read"
        marked = [i for i, text in enumerate(lines, 1)
                  if text.endswith(("# read", "(read)", "# exec'd read"))] or [call.line + 1]
        reads = [f"{call.file}:{i}" + (" (exec'd code)" if lines[i - 1].endswith("exec'd read")
                                       else "") for i in marked]
        assert call.unseen_reads == reads
        assert f"COULD NOT TELL: KEPT: no later backward() or grad() walked this graph, but " \
               f"saved tensors may be read at {', '.join(reads)}" in report.format()
        assert call.to_dict()["verdict"] == COULD_NOT_TELL


def test_no_sum_is_offered_where_a_gradient_is_read_between_the_calls(tmp_path):
    _, report = run(FIXTURES / "grad_read_between.py", audited=True)
    (call,) = report.calls
    assert "sum the losses" not in call.suggestion, call.suggestion
    assert "reads, zeroes or steps with a gradient" in call.suggestion
    # the same two losses with nothing between them: summing is offered, on its condition
    source = (FIXTURES / "grad_read_between.py").read_text(encoding="utf-8")
    plain = source.replace("step = 0.1 * x.grad.sign()", "step = 0.1 * x.detach().sign()")
    plain = plain.replace("x.grad = None\n", "")
    (tmp_path / "plain.py").write_text(plain, encoding="utf-8")  # the source is read back
    _, report = run(tmp_path / "plain.py", audited=True)
    assert "sum the losses" in report.calls[0].suggestion


def test_no_sum_is_offered_where_a_gradient_hook_sees_each_loss(tmp_path):
    """Issue 27 S1: summing hook_per_loss.py's two losses gives w the same gradient, but its
    hook one norm instead of two (both forms run here): "sum the losses" must not be offered."""
    path = FIXTURES / "hook_per_loss.py"
    source = path.read_text(encoding="utf-8")
    two, report = run(path, audited=True)
    summed_source = source.replace("l1.backward(retain_graph=True)  # site: first\nl2.backward()",
                                   "(l1 + l2).backward()")
    assert summed_source != source
    summed, _ = run(path, summed_source)
    assert torch.allclose(two[0], summed[0])  # the same gradient ...
    assert (len(two[1]), len(summed[1])) == (2, 1)  # ... but the hook saw one, not two
    (call,) = report.calls
    assert "sum the losses" not in call.suggestion, call.suggestion
    assert "reads, zeroes or steps with a gradient" in call.suggestion


def test_a_detach_hint_is_a_check_the_user_makes():
    """gan_step.py: the generator loss must train the generator through D; a detach() there is
    only offered as a check, never as the fix."""
    gan = Path(__file__).parent / "fixtures" / "retaincheck" / "gan_step.py"
    _, report = run(gan, gan.read_text(encoding="utf-8") + "result = []\n", audited=True)
    text = report.calls[0].suggestion
    assert "sum the losses" not in text
    assert "A check only you can make: if the first loss must not train the shared part" in text


def test_the_search_for_reads_is_what_makes_saved_read_safe(monkeypatch):
    """Without the search for saved-tensor reads the audit says "not needed" on saved_read.py,
    where the flag is needed: the rule is what this test guards."""
    import retaincheck._reads as reads

    monkeypatch.setattr(reads, reads.lines_reading_saved_tensors.__name__,
                        lambda source, own=True: ())
    monkeypatch.setattr(reads, "_cache", {})
    _, report = run(FIXTURES / "saved_read.py", audited=True)
    assert report.calls[0].verdict == NOT_NEEDED


def test_the_leak_advice_for_a_tensor_trained_every_step():
    """The leak suggestion's second half (docs/retaincheck.md, "needed only because history
    leaks"): detaching the hidden state is not enough while a tensor computed once before the
    loop is walked by every step; detaching that tensor too stops its gradient; computed
    inside the loop it needs no flag and gets the same gradients (the same operations in the
    same order, so equal to the last bit)."""
    path = FIXTURES / "leak_with_trained_tensor.py"
    _, report = run(path, audited=True)
    (call,) = report.calls
    assert call.verdict == LEAK and call.suggestion.endswith(
        "(a tensor computed once before the loop and trained through every step), compute it "
        "inside the loop instead")
    once = "prompt = embed(torch.tensor([1, 2, 3])).mean(0, keepdim=True)  # computed once\n"
    source = path.read_text(encoding="utf-8")
    assert source.count(once) == 1
    detached = source.replace("    h = cell(", "    h = h.detach()\n    h = cell(")
    kept, _ = run(path, detached)  # the hidden state detached, the flag kept
    assert kept[0] is not None and kept[0].abs().sum() > 0
    without, _ = run(path, detached.replace("retain_graph=True", ""))
    assert isinstance(without, RuntimeError) and "a second time" in str(without)
    both, _ = run(path, detached.replace("keepdim=True)  # computed once",
                                         "keepdim=True).detach()").replace("retain_graph=True", ""))
    assert both[0] is None and torch.equal(both[1], kept[1])  # no gradient reaches embed
    inside = detached.replace(once, "").replace(
        "    h = h.detach()\n", "    h = h.detach()\n    " + once).replace("retain_graph=True", "")
    moved, _ = run(path, inside)
    assert same(moved, kept)


def test_a_leak_seen_before_the_pass_raises_is_still_a_leak():
    """The third chunk's backward reuses chunks 1 and 2 (two iterations: a leak), then a hook
    raises (standing for an out-of-memory error) before the pass returns."""
    cell = torch.nn.RNNCell(3, 5)
    h = torch.zeros(2, 5)
    fired = []

    def hook(grad):
        fired.append(None)
        if len(fired) == 3:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"), retaincheck.audit() as report:
        for chunk in range(4):
            for t in range(3):
                h = cell(torch.randn(2, 3), h)
                if chunk == 0 and t == 0:
                    h.register_hook(hook)
            h.pow(2).mean().backward(retain_graph=True)
    (call,) = report.calls
    assert (call.executions, call.verdict) == (2, LEAK)


CPP_FUNCTION = r"""
#include <torch/extension.h>
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A C++ custom autograd Function: its node (CppNode<Square>) shows Python no saved tensors.
struct Square : public torch::autograd::Function<Square> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();  // raises once release_variables freed them
    return {grads[0] * 2 * saved[0]};
  }
};

torch::Tensor square(torch::Tensor x) { return Square::apply(x); }
"""

CPP_PROGRAM = """\
import torch

w = torch.randn(4, requires_grad=True)
y = cpp.square(w)
y.sum().backward(retain_graph=True)  # site: first
(y * 3).sum().backward()
result = [w.grad]
"""


@pytest.mark.proof
def test_a_cpp_custom_function_counts_as_holding_saved_tensors(tmp_path):
    """Issue 27 item 6: a C++ custom Function's node (compiled here with g++ through
    torch.utils.cpp_extension.load_inline) shows Python no ``_raw_saved_*`` attribute, yet
    frees what it saved: the truth, found by switching the flag off, is "needed", and so must
    the verdict be (the rule in _sizes.saved_tensor_names: such a node is "opaque")."""
    from torch.utils.cpp_extension import load_inline

    build = tmp_path / "build"
    build.mkdir()
    cpp = load_inline("retaincheck_cpp_square", CPP_FUNCTION, functions=["square"],
                      build_directory=str(build), verbose=False)
    path = tmp_path / "cpp_function.py"
    path.write_text(CPP_PROGRAM, encoding="utf-8")
    baseline, _ = run_fixture(path, None, False, cpp=cpp)
    audited, report = run_fixture(path, None, True, cpp=cpp)
    assert same(baseline, audited)
    without, _ = run_fixture(path, CPP_PROGRAM.replace("retain_graph=True", "retain_graph=False"),
                             False, cpp=cpp)
    assert isinstance(without, RuntimeError) and "backward through the graph a second time" in str(
        without), without  # the truth: needed
    (call,) = report.calls
    assert (call.verdict, call.needed) == (NEEDED, True), report.format()
    node_type = type(cpp.square(torch.ones(1, requires_grad=True)).grad_fn)
    assert saved_tensor_names(node_type) == ((), True), node_type  # none seen: opaque


def test_only_calls_that_could_run_after_the_site_make_it_could_not_tell(tmp_path):
    """rev27e F3: a call that never ran counts when it could have walked the graph later:
    below the site, or above it inside a loop around both; not above it in straight code, not
    in another function."""
    from retaincheck._reads import untaken_calls

    path = tmp_path / "train.py"
    path.write_text(
        "def train(a, b, c, d, never):\n"
        "    if never:\n"
        "        d.backward()\n"  # 3: above the site, no loop around both: cannot follow it
        "    for step in range(3):\n"
        "        if never:\n"
        "            a.backward()\n"  # 6: above the site, in the loop: the next step's
        "        b.backward(retain_graph=True)\n"  # 7: the site
        "    if never:\n"
        "        torch.autograd.grad(c, [b])\n"  # 9: below the site
        "\n"
        "def other(e):\n"
        "    e.backward()\n"  # 12: another function
    )
    assert untaken_calls(str(path), 7, {(str(path), 7)}) == [6, 9]
    assert untaken_calls(str(path), 7, {(str(path), 7), (str(path), 6), (str(path), 9)}) == []
    # rev27s N7: two calls on one line: that the line ran does not say the other call did
    path.write_text(
        "for s in range(5):\n"
        "    y.backward(retain_graph=True)\n"  # 2: the site
        "    aux.backward() if s % 50 != 49 else (aux + y).backward()\n")  # 3
    assert untaken_calls(str(path), 2, {(str(path), 2), (str(path), 3)}) == [3]
    # rev27u R12: the untaken call starts a line above the one that ran
    path.write_text(
        "for s in range(5):\n"
        "    y.backward(retain_graph=True)\n"
        "    (aux + y\n"
        "     ).backward() if s % 50 == 49 else aux.backward()\n")
    assert untaken_calls(str(path), 2, {(str(path), 2), (str(path), 4)}) == [3, 4]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python keeps call places from 3.11")
@pytest.mark.parametrize("script, verdict", [
    # rev40b S1: both calls of the line ran; the line alone could not say which
    ("a = w.exp().sum(); b = w.exp().sum(); a.backward(retain_graph=True); "
     "b.backward(retain_graph=True)\n", NOT_NEEDED),
    # rev27s N7: only one branch of the line runs: the other may walk the graph on another path
    ("for s in range(3):\n    y = w.exp().sum()\n    y.backward(retain_graph=True)\n"
     "    w.sum().backward() if s < 50 else (w.sum() + y).backward()\n", COULD_NOT_TELL),
    # rev42b T1, T1b: the branch that did not run looks like the site (a flag, or three
    # arguments by position), and comes last on the line: it is no less a call that did not run
    ("for s in range(2):\n    y = w.exp().sum()\n    y.backward(retain_graph=True) if s < 50 "
     "else (y * 2).backward(retain_graph=True)\n", COULD_NOT_TELL),
    ("y = w.exp()\nfor v in [None]:\n    g, = torch.autograd.grad(y.sum(), w, retain_graph=True)"
     " if v is None else torch.autograd.grad(y, w, v)\n", COULD_NOT_TELL),
    # rev43b G1: a training loop written as a generator: the call in the loop's head made
    # what the loop drove, which ran the passes
    ("def fit():\n    for s in range(2):\n        (w * 2).sum().backward()\n"
     "        yield s\n\n\ny = w.exp().sum()\ny.backward(retain_graph=True)\n"
     "for s in fit():\n    pass\n", NOT_NEEDED),
    # rev43d L1, rev43b G2: another call of the line, no walker by its name, ran a pass; the
    # line was on that pass's stack, but the walker call's own place was not
    ("def check(t):\n    (w * 2).sum().backward()\n    return False\n\n\n"
     "for s in range(2):\n    y = w.exp().sum()\n    y.backward(retain_graph=True)\n"
     "    if all(c(y) for c in [check]): y.backward()\n", COULD_NOT_TELL),
    # rev40a F2: the walk that leads to the site and the call around it, on one line (not
    # "not needed" since rev60a A1: a generator expression's loop yields each item, and the
    # code that resumes it, torch's, runs between two: the loop watch ends at a yield)
    ("def loss_of(x):\n    x = x.clone().requires_grad_(True)\n"
     "    g, = torch.autograd.grad(x.tanh().sum(), x, retain_graph=True)\n"
     "    return (w * x).sum() + g.sum()\n"
     "torch.autograd.backward(loss_of(b) for b in [torch.ones(3), torch.zeros(3)])\n",
     COULD_NOT_TELL),
])
def test_of_two_calls_on_one_line_the_one_that_ran_is_told_by_its_place(
        tmp_path, script, verdict):
    """A call that no backward pass came from may walk the graph on another path; of two calls
    on one line, which ones were on a pass's stack is told by their places in the line."""
    source = "import torch\nw = torch.ones(3, requires_grad=True)\n" + script + \
        "result = [w.grad]\n"
    path = tmp_path / "train.py"
    path.write_text(source)
    outcome, report = run_fixture(path, source, audited=True)
    assert not isinstance(outcome, BaseException), outcome
    (site,) = report.calls
    assert site.verdict == verdict, report.format()
    # what the flag does here: nothing (each one removed, the run is the same)
    without, _ = run(path, source.replace("retain_graph=True", "retain_graph=False"))
    assert same(without, outcome)


def test_each_function_on_the_way_is_searched_whichever_caller_came_first(tmp_path,
                                                                         monkeypatch):
    """rev42a F1: warmup() and train() reach the site through the same two innermost frames
    (steps.apply, steps.step); the stack was walked once per shape of those two, so train(),
    met second, was never searched for its backward() that this run did not take (its own
    plain backward() marked the script's line that calls it as one that ran): "not needed",
    proven, and --fix --write broke the run that takes it."""
    (tmp_path / "steps.py").write_text(
        "def step(loss):\n    loss.backward(retain_graph=True)\n\n\n"
        "def apply(loss):\n    step(loss)\n")
    (tmp_path / "loop.py").write_text(
        "from steps import apply\n\n\ndef warmup(w):\n    apply((w * 2).sum())\n\n\n"
        "def train(w, extra):\n    (w * w).sum().backward()\n    loss = (w * 3).sum()\n"
        "    apply(loss)\n    if extra:\n        loss.backward()\n")
    source = ("import torch\nfrom loop import train, warmup\n\n"
              "w = torch.ones(3, requires_grad=True)\nwarmup(w)\ntrain(w, False)\n"
              "result = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    with _imported(monkeypatch, tmp_path, "loop"):
        _, report = run_fixture(path, source, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL, report.format()
    assert site.unseen_calls[0].endswith("loop.py:13"), site.unseen_calls


_LOG_GRADS = ("def log_grads(w, loss, aux_weight):\n    (w * 0.5).sum().backward()\n"
              "    if aux_weight:\n        (aux_weight * loss).backward()\n"
              "    return w.grad.sum()\n\n\n")


def _step(call: str, run: str = "    return [train_step(w, aux_weight)]\n") -> str:
    """A train_step whose site is followed by ``call``, and the run() that calls it."""
    return ("def train_step(w, aux_weight):\n    loss = (w * 3).pow(2).sum()\n"
            f"    loss.backward(retain_graph=True)\n    return {call}\n\n\n"
            f"def run(w, aux_weight):\n{run}")


VARIANTS_AFTER_THE_SITE = {
    "by_its_name": _LOG_GRADS + _step("log_grads(w, loss, aux_weight)"),
    "alias": _LOG_GRADS + "log_fn = log_grads\n\n\n" + _step("log_fn(w, loss, aux_weight)"),
    "partial": "import functools\n\n\n" + _LOG_GRADS + _step(
        "functools.partial(log_grads, aux_weight=aux_weight)(w, loss)"),
    "injected": _LOG_GRADS + (
        "class Trainer:\n    def __init__(self, logger):\n        self.logger = logger\n\n"
        "    def after(self, w, loss, aux_weight):\n"
        "        return self.logger(w, loss, aux_weight)\n\n\n"
    ) + _step("Trainer(log_grads).after(w, loss, aux_weight)"),
    "getattr": _LOG_GRADS + "class Hooks:\n    on_step_end = staticmethod(log_grads)\n\n\n"
    + _step('getattr(Hooks, "on_step_end")(w, loss, aux_weight)'),
    "class_init": (
        "class GradReport:\n    def __init__(self, w, loss, aux_weight):\n"
        "        (w * 0.5).sum().backward()\n        if aux_weight:\n"
        "            (aux_weight * loss).backward()\n        self.norm = w.grad.sum()\n\n\n"
    ) + _step("GradReport(w, loss, aux_weight).norm"),
    "warm_up_before": _LOG_GRADS + _step(
        "log_grads(w, loss, aux_weight)",
        "    log_grads(w, (w * 1).sum(), 0.5)  # a warm-up: its aux pass runs\n"
        "    return [train_step(w, aux_weight)]\n"),
    "above_the_site_in_a_loop": (
        "def train_step(w, prev, aux_weight):\n    if aux_weight and prev is not None:\n"
        "        (aux_weight * prev).backward()\n    loss = (w * 3).pow(2).sum()\n"
        "    loss.backward(retain_graph=True)\n    return loss\n\n\n"
        "def run(w, aux_weight):\n    prev = None\n    for _ in range(2):\n"
        "        prev = train_step(w, prev, aux_weight)\n    return [w.grad]\n"),
    "called_through_reduce": (
        "import functools\n\n\ndef train_step(prev, w, aux_weight):\n"
        "    if aux_weight and prev is not None:\n        (aux_weight * prev).backward()\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    return loss\n\n\ndef run(w, aux_weight):\n"
        "    functools.reduce(lambda prev, _: train_step(prev, w, aux_weight), range(2), None)\n"
        "    return [w.grad]\n"),
    "called_again": (
        "def backward_step(loss, replay=False):\n    if replay:\n        loss.backward()\n"
        "        return\n    loss.backward(retain_graph=True)\n\n\n"
        "def run(w, aux_weight):\n    loss = (w * 3).pow(2).sum()\n    backward_step(loss)\n"
        "    backward_step(loss if aux_weight else (w * 2).sum(), replay=bool(aux_weight))\n"
        "    return [w.grad]\n"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS_AFTER_THE_SITE))
def test_code_that_may_run_after_the_site_is_searched_for_its_calls_that_did_not(
        tmp_path, monkeypatch, variant):
    """rev43d H1: a helper called after the site ran one backward pass (a probe) and not its
    ``if aux_weight:`` backward() on the step's loss, which nothing searched (only the
    functions on the way to the site were): "not needed", proven, and the path with
    aux_weight breaks without the flag. rev44b AL, rev45a F2, rev45b K1: the helper by an
    alias or a partial; rev44b INJ: injected as ``self.logger``; rev45a F3: through
    ``getattr`` with a constant name; rev45b K3: a class whose ``__init__`` runs the passes;
    rev45b K2, rev45a F1: the untaken call above the site in its own function, which a
    caller's loop runs again; rev44b SK: the site's helper called again from another line;
    rev44a G3: the helper's aux call ran once, before the site (a warm-up), and not after;
    rev46b M1, rev46a F2: the step called again by functools.reduce (no loop statement).
    The code that ran after the site is found by the frames on its passes' stacks, whatever
    name reached it."""
    (tmp_path / "after_steps.py").write_text(VARIANTS_AFTER_THE_SITE[variant])
    source = ("import torch\nfrom after_steps import run\n\n"
              "w = torch.ones(3, requires_grad=True)\nresult = run(w, 0.0)\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))  # train.py imports after_steps in the audit
    try:
        _, report = run_fixture(path, source, audited=True)
        # the truth: the path with aux_weight walks the graph again, and needs the flag
        sys.modules.pop("after_steps", None)
        taken = source.replace("run(w, 0.0)", "run(w, 1.0)")
        assert isinstance(run_fixture(path, taken)[0], list)
        steps = tmp_path / "after_steps.py"
        steps.write_text(steps.read_text().replace("retain_graph=True", "retain_graph=False"))
        sys.modules.pop("after_steps", None)
        broken, _ = run_fixture(path, taken)
        assert isinstance(broken, RuntimeError), broken
    finally:
        sys.modules.pop("after_steps", None)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_calls, report.format()


def test_a_walker_through_another_files_walker_is_one_too(tmp_path):
    (tmp_path / "logs.py").write_text(
        "def log_grads(loss):\n    loss.backward()\n")
    (tmp_path / "steps.py").write_text(
        "from logs import log_grads\n\n\ndef report(loss):\n    return log_grads(loss)\n")
    from retaincheck._reads import project_walkers

    assert "report" in project_walkers([str(tmp_path / "steps.py"), str(tmp_path / "logs.py")])


def test_an_unused_custom_functions_backward_is_no_call_after_the_site(tmp_path):
    """rev44b CK: a plain ``loss2.backward()`` after the site made every ``def backward`` of
    the program's files (a custom Function's, used by no call here) a helper to search: its
    ``torch.autograd.backward`` kept a site whose flag changes nothing."""
    source = ("import torch\n\n\nclass Checkpoint(torch.autograd.Function):\n"
              "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
              "    @staticmethod\n    def backward(ctx, grad):\n"
              "        torch.autograd.backward(torch.ones(1, requires_grad=True), grad[:1])\n"
              "        return grad * 2\n\n\n"
              "w = torch.ones(3, requires_grad=True)\nloss = (w * 3).pow(2).sum()\n"
              "loss.backward(retain_graph=True)\nloss2 = (w * 2).sum()\nloss2.backward()\n"
              "result = [w.grad]\n")
    _not_needed_as_the_truth_says(tmp_path / "train.py", source)


def test_the_function_on_the_way_is_not_searched_again_as_a_helper_that_ran(tmp_path,
                                                                          monkeypatch):
    """The call that led to the site ran, and counts as a call after the site on its own
    line; the function it called was searched from the site's line already: its untaken
    backward() above the site (on a path before it) is no call after the site."""
    (tmp_path / "way_steps.py").write_text(
        "def step(w, first):\n    if first:\n        (w * 2).sum().backward()\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    return w.grad.sum()\n")
    source = ("import torch\nfrom way_steps import step\n\n"
              "w = torch.ones(3, requires_grad=True)\nresult = [step(w, False)]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        _, report = run_fixture(path, source, audited=True)
    finally:
        sys.modules.pop("way_steps", None)
    (site,) = report.calls
    assert site.verdict == NOT_NEEDED, report.format()


@pytest.mark.parametrize("script", [
    # rev43a G3, rev43b G4, rev43d D1: a timing decorator's wrapper, the arguments by **cfg
    "import functools\n\n\ndef timed(fn):\n    @functools.wraps(fn)\n"
    "    def wrapper(*args, **kwargs):\n        return fn(*args, **kwargs)\n"
    "    return wrapper\n\n\n@timed\ndef penalty(w, weight=1.0):\n"
    "    (weight * (w * 2).pow(2).sum()).backward()\n\n\n"
    "cfg = {'weight': 0.5}\nloss = (w * 3).pow(2).sum()\nloss.backward(retain_graph=True)\n"
    "penalty(w, **cfg)\n",
    # rev43c H1: an async training step, awaited in a loop
    "import asyncio\n\n\nasync def train_step(x):\n    loss = (w * x).pow(2).sum()\n"
    "    loss.backward(retain_graph=True)\n\n\nasync def main():\n    for _ in range(2):\n"
    "        await train_step(torch.ones(3))\n\n\n"
    # (driven by hand: a test before this one in the process may leave an event loop running,
    # and asyncio.run() refuses to start under it)
    "def drive(coro):\n    try:\n        coro.send(None)\n    except StopIteration:\n"
    "        pass\n\n\ndrive(main())\n",
], ids=["decorated_helper_by_kwargs", "awaited_step"])
def test_a_call_that_ran_through_a_decorator_or_an_await_counts_as_run(tmp_path, script):
    """A walker call that ran, through a decorator's wrapper (the frame above the ``f(**kw)``
    call is ``wrapper``) or an ``await`` (the frame is at the await's send, no call), was
    "never ran", and the site kept, though removing its flag changes nothing."""
    source = "import torch\n\nw = torch.ones(3, requires_grad=True)\n" + script + \
        "result = [w.grad]\n"
    _not_needed_as_the_truth_says(tmp_path / "train.py", source)


@pytest.mark.parametrize("head", [
    "for v in (replay([loss]) if current else replay([(w * 2).sum()])):\n    pass\n",
    "for v in (replay([loss]) if current else probes):\n    pass\n",
    "list(itertools.chain(probes, replay([loss]) if current else []))\n",
    "for v in pick(replay([loss])):\n    pass\n",
], ids=["two_calls", "one_call_or_a_name", "chained", "through_a_function"])
def test_of_two_generator_calls_of_one_name_in_a_loops_head_neither_counts_as_run(tmp_path,
                                                                                  head):
    """rev46a F1: `for v in (replay(buffer + [loss]) if current else replay(buffer))`: the
    generator that ran a pass was made by one of the two calls, and both counted as run: the
    untaken one, which walks the retained graph again, was never searched ("not needed",
    proven, and --fix --write broke the run that takes it). rev47a R1: the same with one call
    beside a generator made elsewhere (`probes`), in a ternary or an itertools.chain; rev48a
    G1: or handed to a function of the program's, which may return another generator."""
    source = ("import itertools\n\nimport torch\n\n\ndef replay(losses):\n"
              "    for loss in losses:\n        loss.backward()\n        yield loss.detach()\n\n\n"
              "def pick(extra):\n    return extra if current else probes\n\n\n"
              "w = torch.ones(3, requires_grad=True)\ncurrent = False\n"
              "probes = replay([(w * 2).sum()])\n"
              "loss = (w * 3).pow(2).sum()\nloss.backward(retain_graph=True)\n"
              f"{head}result = [w.grad]\n")
    _kept_for_a_path_not_taken(tmp_path / "train.py", source,
                               source.replace("current = False", "current = True"))


@pytest.mark.parametrize("consumed", ["[loss for loss in fit(w)]", "list(fit(w))",
                                      "[i for i, loss in enumerate(fit(w))]",
                                      "sum(loss for loss in fit(w))"])
def test_a_generator_loop_consumed_by_a_call_or_a_comprehension_counts_as_run(tmp_path,
                                                                             consumed):
    """rev45b Q1, rev44a C1: a generator training loop driven by list(), sum(), enumerate()
    or a comprehension ran every pass, but only a bare ``for x in fit(...)`` credited its
    call: "the call never ran", and the site kept, though its flag changes nothing."""
    source = ("import torch\n\n\ndef fit(w):\n    for _ in range(3):\n"
              "        loss = (w * 2).sum()\n        loss.backward()\n"
              "        yield loss.detach()\n\n\nw = torch.ones(3, requires_grad=True)\n"
              "(w * 3).pow(2).sum().backward(retain_graph=True)\n"
              f"done = {consumed}\nresult = [w.grad]\n")
    _not_needed_as_the_truth_says(tmp_path / "train.py", source)


@pytest.mark.parametrize("unpacked", ["*hooks['extras'](w.sum(), False)",
                                      "**hooks['options'](w.sum(), False)",
                                      "*hooks['backward'](w.sum(), False)",
                                      "*map(operator.methodcaller('backward'), [w.sum(), None])",
                                      "*pending"])
def test_a_call_whose_unpacking_started_a_pass_and_raised_never_ran(tmp_path, unpacked):
    """rev42a F3: in ``loss.backward(*extras(aux, enabled))`` the generator started a backward
    pass of its own and raised before the call began: the call's place was on that pass's
    stack, so the call counted as one that ran, and the site above it was "not needed",
    proven, though the path where it runs walks the graph again. rev43a G2: so with a
    generator named backward, or a map of methodcallers (no frame of its own)."""
    source = ("import operator\nimport torch\nw = torch.ones(3, requires_grad=True)\n\n\n"
              "class Skip(Exception):\n    pass\n\n\n"
              "def extras(aux, enabled):\n    aux.backward()\n    if not enabled:\n"
              "        raise Skip\n    yield None\n\n\n"
              "class Options:\n    def __init__(self, aux):\n        self.aux = aux\n\n"
              "    def keys(self):\n        self.aux.backward()\n        raise Skip\n\n\n"
              "def options(aux, enabled):\n    return Options(aux)\n\n\n"
              "def backward(aux):\n    aux.backward()\n    raise Skip\n    yield None\n\n\n"
              "hooks = {'extras': extras, 'options': options, 'backward': extras}\n"
              "pending = backward(w.sum())\n"
              "loss = (w * 3).pow(2).sum()\nloss.backward(retain_graph=True)\ntry:\n"
              f"    loss.backward({unpacked})\nexcept (Skip, AttributeError):\n    pass\n"
              "result = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    _, report = run_fixture(path, source, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL, report.format()
    assert any(c.endswith(":41") for c in site.unseen_calls), site.unseen_calls


@pytest.mark.parametrize("script", [
    # rev43a G1: the step handed to a retry helper as a lambda, on the loop's line
    "def retry(fn):\n    return fn()\n\n\ndef step():\n    loss = (w * 3).sum()\n"
    "    loss.backward(retain_graph=True)\n    return loss\n\n\n"
    "for s in range(2):\n    loss = retry(lambda: step())\n    if s == 50:\n"
    "        loss.backward()\n",
    # rev43a G1b: a lambda on the site's own line (the trainable parameters)
    "def step(extra):\n    loss = (w * 3).sum()\n"
    "    g, = torch.autograd.grad(loss, list(filter(lambda p: p.requires_grad, [w])), "
    "retain_graph=True)\n    if extra:\n        loss.backward()\n\n\n"
    "for s in range(2):\n    step(False)\n",
], ids=["lambda_on_the_callers_line", "lambda_on_the_sites_line"])
def test_the_function_searched_is_the_one_that_ran_the_line(tmp_path, script):
    """rev43a G1, G1b: of the function and the lambda on one line, the innermost (the lambda)
    was searched for calls that did not run, also for the function's own frame, so the
    function's backward() on the path this run did not take was never looked for: "not
    needed", proven, and --fix --write broke that path."""
    source = "import torch\n\nw = torch.ones(3, requires_grad=True)\n\n\n" + script + \
        "result = [w.grad]\n"
    path = tmp_path / "train.py"
    path.write_text(source)
    _, report = run_fixture(path, source, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_calls, report.format()


def test_untaken_calls_through_other_files_and_partial_aliases(tmp_path):
    """rev27i u01, u03, g01, rev27j j2: a helper of another file of the program that calls
    backward(), a functools.partial of torch.autograd.grad, a method reached by getattr with a
    name that may be "backward" or cannot be told, called every 50 steps, never ran in a short
    run: each could walk the graph later."""
    from retaincheck._reads import project_walkers, untaken_calls

    (tmp_path / "losses.py").write_text(
        "def smoothness(out):\n    (out.diff(dim=0) ** 2).mean().backward()\n"
        "def report(out):\n    return out.mean().item()\n"
    )
    path = tmp_path / "train.py"
    path.write_text(
        "import functools\nimport torch\nimport losses\n"
        "g = functools.partial(torch.autograd.grad, retain_graph=False)\n"
        "for step in range(5):\n"
        "    loss.backward(retain_graph=True)\n"  # 6: the site
        "    if step % 50 == 0:\n"
        "        losses.smoothness(out)\n"  # 8: another file's helper
        "        g(loss, [w])\n"  # 9: the partial
        "        losses.report(out)\n"  # 10: a helper that walks nothing
        "        getattr(loss, AUX)()\n"  # 11: AUX = "backward" (rev27i g01)
        "        getattr(loss, sys.argv[1])()\n"  # 12: a name it cannot tell (rev27j j2)
        "        getattr(loss, 'item')()\n"  # 13: not a walker
        "AUX = 'back' + 'ward'\n"
    )
    walkers = project_walkers([str(tmp_path / "losses.py")])
    assert "smoothness" in walkers and "report" not in walkers
    assert untaken_calls(str(path), 6, {(str(path), 6)}, extra=walkers) == [8, 9, 11, 12]
    assert untaken_calls(str(path), 6, {(str(path), 6)}) == [9, 11, 12]  # not the other file


@pytest.mark.parametrize("read", [
    'getattr(y.grad_fn, "%sed_self" % "_sav")',
    'getattr(y.grad_fn, "{}{}".format("_sav", "ed_self"))',
    'getattr(y.grad_fn, "_saved_self" if flag else "_saved_other")',
    'getattr(y.grad_fn, PRE + "ed_self")',
    'getattr(y.grad_fn, "_".join(["", "saved", "self"]))',
    'edge_of(y).node(g)',
    'getattr(graph, "get_gradient" + "_edge")(y).node(g)',
])
def test_names_from_literal_pieces_and_aliases_are_reads(read):
    """rev27f c01-c04, c12: pieces joined by +, %, format, join or a branch, a module-level
    constant, and other names for get_gradient_edge, are found; a name built while the
    program runs is not (the documented limit the gate's rerun covers)."""
    from retaincheck._reads import lines_reading_saved_tensors

    head = ('from torch.autograd import graph\n'
            'from torch.autograd.graph import get_gradient_edge as edge_of\nPRE = "_sav"\n')
    assert lines_reading_saved_tensors(head + read + "\n") == (4,)
    assert lines_reading_saved_tensors('name = "_sav"\nname += "ed_self"\n'
                                       'getattr(y.grad_fn, name)\n') == ()


COMPILED_FIRST = """import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
compiled = torch.compile(model, backend="aot_eager")
compiled(torch.randn(5, 4)).mean().backward(retain_graph=True)  # nothing walks it again
out = compiled(torch.randn(5, 4))
out.sum().backward(retain_graph=KEEP)  # two losses on one forward pass
out.pow(2).sum().backward()
result = [p.grad for p in model.parameters()]
"""


@pytest.mark.proof  # torch.compile: dynamo's import and two compilations
def test_a_flag_that_torch_compile_reads_is_never_not_needed(tmp_path):
    """rev30b F-x11: AOTAutograd compiles a backward at its first run and reads that run's
    retain_graph (torch/_functorch/_aot_autograd/runtime_wrappers.py,
    CompiledFunction._backward_impl: saved_tensors_use_once); compiled without it, with donated
    buffers, a later retain_graph=True through the same code raises. The first flag, though
    nothing walks its graph again, was "not needed"."""
    import torch._dynamo

    path = tmp_path / "compiled.py"
    path.write_text(COMPILED_FIRST)

    def go(source, audited=False):
        torch._dynamo.reset()
        return run_fixture(path, source, audited, KEEP=True)

    baseline, _ = go(COMPILED_FIRST)
    assert not isinstance(baseline, BaseException), baseline
    without, _ = go(COMPILED_FIRST.replace("retain_graph=True", "retain_graph=False"))
    assert isinstance(without, RuntimeError) and "donated buffers" in str(without), without
    audited, report = go(COMPILED_FIRST, audited=True)
    assert same(audited, baseline)
    first = next(c for c in report.calls if c.line == 6)
    assert first.verdict == COULD_NOT_TELL and first.compiled, report.format()
    assert "torch.compile compiles at its first run" in report.format()


NAMED_FLAG = """import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
x = torch.randn(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def backward_step(loss, retain_graph=False):
    loss.backward(retain_graph=retain_graph)
    if not retain_graph:  # the last loss of this step: update the weights
        opt.step()
        opt.zero_grad()


losses = []
for step in range(3):
    first = model(x).pow(2).mean()
    backward_step(first, retain_graph=True)
    second = model(x).abs().mean()
    backward_step(second)
    losses += [first.detach(), second.detach()]
result = losses
"""


@contextlib.contextmanager
def _imported(monkeypatch, folder: Path, name: str):
    """``name`` imported from ``folder`` (a folder or a zip on sys.path), in sys.modules while
    the block runs, as a helper the program imported is; gone after, with its package's other
    modules, so that no later test's audit searches it."""
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    try:
        yield importlib.import_module(name)
    finally:
        top = name.split(".")[0]
        for key in [k for k in sys.modules if k == top or k.startswith(top + ".")]:
            del sys.modules[key]


def _not_needed_as_the_truth_says(path: Path, source: str):
    """Write ``source`` and audit it; the truth: with the flag removed the run is the same.
    Its one site must be "not needed"."""
    path.write_text(source)
    outcome, report = run_fixture(path, source, audited=True)
    without, _ = run_fixture(path, source.replace("retain_graph=True", "retain_graph=False"))
    assert same(without, outcome)  # the truth: the flag changes nothing
    (site,) = report.calls
    assert site.verdict == NOT_NEEDED, report.format()


def _kept_for_a_path_not_taken(path: Path, source: str, taken: str, modules=()):
    """Write ``source`` and audit it; the truth: ``taken`` (the same program on the path the
    audited run did not take) runs with the flag and raises without it. Its one site must be
    "could not tell: kept"; the site and the report. ``modules``: imported by the program,
    gone from sys.modules after (no later test's audit searches them)."""
    path.write_text(source)
    try:
        _, report = run_fixture(path, source, audited=True)
        broken, _ = run_fixture(path, taken.replace("retain_graph=True", "retain_graph=False"))
        assert isinstance(run_fixture(path, taken)[0], list) and isinstance(broken, RuntimeError)
    finally:
        for name in modules:
            sys.modules.pop(name, None)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL, report.format()
    return site, report


def _kept_though_it_matters(path: Path, source: str):
    """Write ``source``, show that removing its one retain_graph=True changes the results (the
    truth), and that its one site is "could not tell: kept" as written elsewhere; the site."""
    assert source.count("retain_graph=True") == 1
    path.write_text(source)
    baseline, _ = run_fixture(path)
    without, _ = run_fixture(path, source.replace("retain_graph=True", ""))
    assert not same(without, baseline)  # the truth: the flag matters
    _, report = run_fixture(path, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.passed_through, report.format()
    return site, report


def test_a_flag_that_its_helper_also_reads_is_never_not_needed(tmp_path):
    """rev31a F5: the site is the helper's loss.backward(retain_graph=retain_graph), whose
    graph nothing walks again, but the helper also reads the flag to decide when to step:
    removing the caller's retain_graph=True changes training. Turning graph-keeping off at the
    site (the proof) did not, and the gate exited 6."""
    call, report = _kept_though_it_matters(tmp_path / "named.py", NAMED_FLAG)
    assert call.line == 10 and "the flag is not the literal True here" in report.format()


@pytest.mark.parametrize("shape", ["closure", "attribute", "derived"])
def test_a_flag_not_written_at_the_site_is_never_not_needed(tmp_path, shape):
    """rev32a G1, G1b, G1d: the flag reaches the site as a closure's variable, an object's
    attribute or a name made from it; the program also reads it to decide when to step, so
    removing the caller's retain_graph=True changes training. Any flag that is not the literal
    True at the site is "could not tell: kept"."""
    site = {"closure": "loss.backward(retain_graph=retain_graph)",
            "attribute": "loss.backward(retain_graph=self.retain_graph)",
            "derived": "loss.backward(retain_graph=keep)"}[shape]
    helper = {
        "closure": ("def make(retain_graph=False):\n    def step(loss):\n"
                    f"        {site}\n        if not retain_graph:\n"
                    "            opt.step()\n            opt.zero_grad()\n    return step\n\n\n"
                    "more, last = make(retain_graph=True), make()\n"),
        "attribute": ("class Step:\n    def __init__(self, retain_graph=False):\n"
                      "        self.retain_graph = retain_graph\n\n    def __call__(self, loss):\n"
                      f"        {site}\n        if not self.retain_graph:\n"
                      "            opt.step()\n            opt.zero_grad()\n\n\n"
                      "more, last = Step(retain_graph=True), Step()\n"),
        "derived": ("def step(loss, retain_graph=False, accumulate=False):\n"
                    "    keep = retain_graph or accumulate\n"
                    f"    {site}\n    if not keep:\n"
                    "        opt.step()\n        opt.zero_grad()\n\n\n"
                    "def more(loss):\n    step(loss, retain_graph=True)\n\n\nlast = step\n"),
    }[shape]
    source = ("import torch\n\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1)\n"
              "x = torch.randn(8, 4)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\n"
              + helper + "\nlosses = []\nfor _ in range(3):\n"
              "    first = model(x).pow(2).mean()\n    more(first)\n"
              "    second = model(x).abs().mean()\n    last(second)\n"
              "    losses += [first.detach(), second.detach()]\nresult = losses\n")
    call, report = _kept_though_it_matters(tmp_path / f"{shape}.py", source)
    assert site in call.code, report.format()


@pytest.mark.parametrize("call", [
    "loss.backward(None, retain_graph)",  # positional
    "(\n            loss * 1\n        ).backward(retain_graph=retain_graph)",  # split, as black
    "run = functools.partial(loss.backward, retain_graph=retain_graph)\n        run()",
    "run = functools.partial(loss.backward, retain_graph=retain_graph)\n"
    "        run(create_graph=False)",
    "loss.backward(torch.ones(1).sum(0, True).squeeze(), retain_graph)",
    "gs = torch.autograd.grad(loss, list(model.parameters()), None, retain_graph, False, True)\n"
    "        for p, g in zip(model.parameters(), gs):\n"
    "            p.grad = g if p.grad is None else p.grad + g",
    "run = functools.partial(torch.autograd.grad, retain_graph=retain_graph)\n"
    "        gs = run(loss, list(model.parameters()), create_graph=True)\n"
    "        for p, g in zip(model.parameters(), gs):\n"
    "            p.grad = g.detach() if p.grad is None else p.grad + g.detach()",
    "grad = functools.partial(torch.autograd.grad, loss)\n"
    "        gs = grad(list(model.parameters()), None, retain_graph, True)\n"
    "        for p, g in zip(model.parameters(), gs):\n"
    "            p.grad = g.detach() if p.grad is None else p.grad + g.detach()",
    "objective = lambda: None\n"
    "        objective.backward = functools.partial(torch.autograd.backward, loss, None)\n"
    "        objective.backward(retain_graph, True)",
], ids=["positional", "split-over-lines", "partial", "partial-create-graph",
        "another-literal-true", "grad-positional", "partial-create-graph-true",
        "partial-shifts-positions", "attribute-partial"])
def test_a_flag_not_written_where_the_call_runs_is_never_not_needed(tmp_path, call):
    """rev33 H1, H2, H3: the rule for a flag that is not the literal True looked only at the
    retain_graph= keywords of calls starting on the running line: a positional flag, a call
    split over lines (its .backward( runs below its first line) and a functools.partial got
    past it, each a proven 6 where removing the caller's retain_graph=True changes training.
    rev34a J1, J2, J2b, rev34b F1-F3: then a create_graph= at the call let a partial's flag
    through, and any literal True on the line (keepdim, only_inputs) a positional one;
    rev35a A1, rev35b NEW-1: a create_graph=True at the call still did; rev36b F1: a
    partial that binds the loss shifts the positions (the True there is create_graph);
    rev37a G5, rev37b G1: so does one stored as an attribute named backward."""
    source = ("import functools\n\nimport torch\n\ntorch.manual_seed(0)\n"
              "model = torch.nn.Linear(4, 1)\nx = torch.randn(8, 4)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\n"
              "def make(retain_graph=False):\n    def step(loss):\n"
              f"        {call}\n        if not retain_graph:\n"
              "            opt.step()\n            opt.zero_grad()\n    return step\n\n\n"
              "more, last = make(retain_graph=True), make()\nlosses = []\nfor _ in range(3):\n"
              "    first = model(x).pow(2).mean()\n    more(first)\n"
              "    second = model(x).abs().mean()\n    last(second)\n"
              "    losses += [first.detach(), second.detach()]\nresult = losses\n")
    _kept_though_it_matters(tmp_path / "helper.py", source)


def test_a_flag_in_code_with_no_file_is_never_not_needed(tmp_path):
    """The helper that writes retain_graph=retain_graph is compiled from a string (exec): the
    rule above could not read its line and let the site through as "not needed", though
    removing the caller's retain_graph=True changes training. The string compiled is read
    (code that cannot be read at all is "could not tell: kept" too)."""
    helper = ("def make(retain_graph=False):\n    def step(loss):\n"
              "        loss.backward(retain_graph=retain_graph)\n        if not retain_graph:\n"
              "            opt.step()\n            opt.zero_grad()\n    return step\n")
    source = ("import torch\n\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1)\n"
              "x = torch.randn(8, 4)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              f"exec(compile({helper!r}, '<helper>', 'exec'))\n"
              "more, last = make(retain_graph=True), make()\nlosses = []\nfor _ in range(3):\n"
              "    first = model(x).pow(2).mean()\n    more(first)\n"
              "    second = model(x).abs().mean()\n    last(second)\n"
              "    losses += [first.detach(), second.detach()]\nresult = losses\n")
    call, report = _kept_though_it_matters(tmp_path / "from_a_string.py", source)
    assert call.file == "<helper>" and "the literal True here cannot be seen" in report.format()


def test_a_literal_flag_in_code_the_program_generated_is_never_not_needed(tmp_path):
    """rev43c S1: a step generated from a template, ``retain_graph={keep}`` formatted with
    the config's True: the compiled text has the literal True, though the program wrote it
    from a value that is False on another run (and reads it again to decide when to step):
    "not needed", and "remove retain_graph=True", a text that exists nowhere."""
    template = ("def train_step(loss):\n    loss.backward(retain_graph={keep})\n"
                "    if not {keep}:\n"
                "        opt.step()\n        opt.zero_grad()\n")
    source = ("import torch\n\nkeep = True\ntorch.manual_seed(0)\n"
              "model = torch.nn.Linear(4, 1)\nx = torch.randn(8, 4)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              f"exec(compile({template!r}.format(keep=keep), '<generated step>', 'exec'))\n"
              "losses = []\nfor _ in range(3):\n    loss = model(x).pow(2).mean()\n"
              "    train_step(loss)\n    losses.append(loss.detach())\nresult = losses\n")
    path = tmp_path / "generated.py"
    path.write_text(source)
    baseline, report = run_fixture(path, audited=True)
    other, _ = run_fixture(path, source.replace("keep = True", "keep = False"))
    assert not same(other, baseline)  # the truth: the value the flag is made from matters
    (site,) = report.calls
    assert site.file == "<generated step>" and site.verdict == COULD_NOT_TELL, report.format()


def test_code_python_keeps_in_linecache_is_read_as_a_file_is(tmp_path):
    """A notebook cell's code (and a doctest example's) lives in linecache, not in a file: the
    literal True there is read from it, and the site keeps its "not needed"."""
    import linecache

    cell = str(tmp_path / "ipykernel_1" / "cell.py")  # no such file: as ipykernel names a cell
    text = ("import torch\nw = torch.ones(3, requires_grad=True)\n"
            "(w * w).sum().backward(retain_graph=True)\n")
    linecache.cache[cell] = (len(text), None, text.splitlines(keepends=True), cell)
    try:
        with retaincheck.audit() as report:
            exec(compile(text, cell, "exec"), {})
    finally:
        linecache.cache.pop(cell, None)
    (call,) = report.calls
    assert (call.verdict, call.passed_through) == ("not needed", False), report.format()


@pytest.mark.parametrize("call", [
    "loss.backward(None, True)",
    "torch.autograd.backward(loss, None, True)",
    "torch.autograd.grad(loss, w, None, True)",
])
def test_a_literal_true_by_position_could_be_another_parameter(tmp_path, call):
    """rev37a G5, rev37b G1: a True at retain_graph's position in ``x.backward(...)`` was taken
    for the flag, but ``x.backward`` may be a partial of ``torch.autograd.backward`` or
    ``grad`` with arguments bound before it, which shifts the True to create_graph or
    only_inputs while the caller's flag is bound: only ``retain_graph=True`` by keyword is
    the flag, whatever was bound. So a positional True is "could not tell", even here where
    it is the real thing."""
    path = tmp_path / "literal.py"
    path.write_text("import torch\n\nw = torch.ones(3, requires_grad=True)\n"
                    f"loss = (w * w).sum()\n{call}\nresult = [w.grad]\n")
    _, report = run_fixture(path, audited=True)
    (site,) = report.calls
    assert (site.verdict, site.passed_through) == (COULD_NOT_TELL, True), report.format()


@pytest.mark.parametrize("form", ["bom", "latin-1", "zip"])
def test_a_read_in_a_file_python_reads_its_own_way_is_found(tmp_path, monkeypatch, form):
    """rev34a J5, J7, J8: a helper that reads a saved tensor, in a file saved with a UTF-8
    byte-order mark, in a latin-1 file that declares it, or imported from a zip, was never
    searched (the file did not parse as UTF-8, or could not be opened), and the literal site
    was "not needed"; without its flag the read raises."""
    import zipfile

    helper = "def peek(t):\n    return t.grad_fn._saved_result\n"
    name = f"peek_{form.replace('-', '_')}"
    if form == "bom":
        (tmp_path / f"{name}.py").write_bytes(b"\xef\xbb\xbf" + helper.encode())
    elif form == "latin-1":
        (tmp_path / f"{name}.py").write_bytes(
            ("# -*- coding: latin-1 -*-\ndéjà = 1\n" + helper).encode("latin-1"))
    else:
        with zipfile.ZipFile(tmp_path / "tools.zip", "w") as archive:
            archive.writestr(f"{name}.py", helper)
    folder = tmp_path / "tools.zip" if form == "zip" else tmp_path
    with _imported(monkeypatch, folder, name) as module:
        _found_though_it_matters(tmp_path, module)


def _found_though_it_matters(tmp_path, module):
    source = ("import torch\n\nw = torch.ones(3, requires_grad=True)\ny = torch.exp(w)\n"
              "y.sum().backward(retain_graph=True)\nresult = [w.grad, peek(y)]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    baseline, _ = run_fixture(path, peek=module.peek)
    without, _ = run_fixture(path, source.replace("retain_graph=True", ""), peek=module.peek)
    assert not same(without, baseline)  # the truth: the read needs the flag
    _, report = run_fixture(path, audited=True, peek=module.peek)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_reads, report.format()


def test_a_site_in_a_file_with_a_byte_order_mark_is_searched_for_untaken_calls(tmp_path):
    """rev34a J8: a script saved with a UTF-8 byte-order mark did not parse, so the backward()
    on a path this run did not take was never looked for, and the site was "not needed"."""
    source = ("import torch\n\nw = torch.ones(3, requires_grad=True)\nloss = torch.exp(w).sum()\n"
              "loss.backward(retain_graph=True)\nif w.grad.sum() < 0:  # never, here\n"
              "    loss.backward()\nresult = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + source.encode())
    _, report = run_fixture(path, source, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_calls, report.format()


def test_a_site_in_an_installed_package_is_searched_for_its_packages_untaken_calls(
        tmp_path, monkeypatch):
    """rev34a K3: a lab's training library installed in site-packages keeps the graph in one
    module (core.py) for a backward() in another (loop.py) that runs only with an auxiliary
    loss; without it the run said "not needed" and the gate exited 6, as only the program's
    own functions were searched for calls that did not run."""

    from retaincheck import _reads

    lib = tmp_path / "lib" / "trainlib_k3"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (lib / "core.py").write_text("def backward_keep(loss):\n    loss.backward(retain_graph=True)\n")
    (lib / "loop.py").write_text(
        "from .core import backward_keep\n\n\ndef fit_step(w, aux=None):\n"
        "    loss = torch.tanh(w).sum()\n    backward_keep(loss)\n    if aux is not None:\n"
        "        aux(loss).backward()\n    return w.grad\n\n\nimport torch\n")
    for name in ("__init__.py", "core.py", "loop.py"):  # as this interpreter's site-packages
        monkeypatch.setitem(_reads._kinds, str(lib / name), 1)
    with _imported(monkeypatch, tmp_path / "lib", "trainlib_k3.loop") as loop:
        w = torch.ones(3, requires_grad=True)
        with retaincheck.audit() as report:
            loop.fit_step(w)
        # the truth: the other path needs the flag
        loop.fit_step(torch.ones(3, requires_grad=True), aux=lambda loss: loss * 0.5)
        monkeypatch.setattr(loop, "backward_keep", lambda loss: loss.backward())
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loop.fit_step(torch.ones(3, requires_grad=True), aux=lambda loss: loss * 0.5)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_calls, report.format()
    assert site.unseen_calls[0].endswith("loop.py:8")


def test_a_helper_of_an_installed_package_that_ran_after_the_site_is_searched(tmp_path,
                                                                           monkeypatch):
    """rev46a F3: the gradient-logging helper of a pip-installed package ran its probe pass
    after the site and not its ``if aux_weight:`` backward(); installed packages were left
    out of the search: "not needed", proven, and the aux path broke."""
    from retaincheck import _reads

    lib = tmp_path / "lib" / "loglib_f3"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "def log_grads(w, loss, aux_weight):\n    (w * 0.5).sum().backward()\n"
        "    if aux_weight:\n        (aux_weight * loss).backward()\n    return w.grad.sum()\n")
    monkeypatch.setitem(_reads._kinds, str(lib / "__init__.py"), 1)  # as site-packages
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    source = ("import torch\nfrom loglib_f3 import log_grads\n\naux = 0.0\n"
              "w = torch.ones(3, requires_grad=True)\nloss = (w * 3).pow(2).sum()\n"
              "loss.backward(retain_graph=True)\nresult = [log_grads(w, loss, aux)]\n")
    site, report = _kept_for_a_path_not_taken(tmp_path / "train.py", source, source.replace(
        "aux = 0.0", "aux = 1.0"), modules=("loglib_f3",))
    assert site.unseen_calls, report.format()


_PENALTY = ("def penalty(loss, params, weight=0.0):\n    if not weight:\n"
            "        return 0.0\n    grads = torch.autograd.grad(loss, params, create_graph=True)\n"
            "    pen = weight * sum(g.pow(2).sum() for g in grads)\n    pen.backward()\n"
            "    return pen.item()\n")
INSTALLED_HELPERS = {  # (the package's __init__.py, its _impl.py, the import, the call)
    "from gradtools_n3 import penalty": (f"import torch\n\n\n{_PENALTY}", "",
                                         "from gradtools_n3 import penalty", "penalty"),
    "import gradtools_n3": (f"import torch\n\n\n{_PENALTY}", "", "import gradtools_n3",
                            "gradtools_n3.penalty"),
    "import gradtools_n3 as gt": (f"import torch\n\n\n{_PENALTY}", "",
                                  "import gradtools_n3 as gt", "gt.penalty"),
    # rev48a I1, rev48b I2: a method of an installed class
    "class_method": ("import torch\n\n\nclass Penalty:\n"
                     + "".join("    " + line + "\n" for line in _PENALTY.replace(
                         "def penalty(loss,", "def penalty(self, loss,").splitlines()),
                     "", "from gradtools_n3 import Penalty", "Penalty().penalty"),
    # rev49b B1: the installed function bound to another name before it is called
    "alias": (f"import torch\n\n\n{_PENALTY}", "",
              "from gradtools_n3 import penalty\nchk = penalty", "chk"),
    # rev49a I4: a default argument, a class's staticmethod; I5: a star import; I6: the
    # module under another name, getattr on it
    "default_argument": (f"import torch\n\n\n{_PENALTY}", "",
                         "from gradtools_n3 import penalty\n\n\n"
                         "def do_pen(loss, params, weight, pen=penalty):\n"
                         "    return pen(loss, params, weight)", "do_pen"),
    "staticmethod": (f"import torch\n\n\n{_PENALTY}", "",
                     "from gradtools_n3 import penalty\n\n\nclass Hooks:\n"
                     "    check = staticmethod(penalty)", "Hooks().check"),
    "star_import": (f"import torch\n\n\n{_PENALTY}", "", "from gradtools_n3 import *",
                    "penalty"),
    "module_alias": (f"import torch\n\n\n{_PENALTY}", "",
                     "import gradtools_n3\nreg = gradtools_n3", "reg.penalty"),
    "getattr": (f"import torch\n\n\n{_PENALTY}", "", "import gradtools_n3",
                "getattr(gradtools_n3, 'penalty')"),
    # rev48a I3: a helper decorated with @torch.enable_grad()
    "decorated": (f"import torch\n\n\n@torch.enable_grad()\n{_PENALTY}", "",
                  "from gradtools_n3 import penalty", "penalty"),
    # rev48a I2: the helper hands on to a private module of its package
    "one_module_in": ("from . import _impl\n\n\ndef penalty(loss, params, weight=0.0):\n"
                      "    return _impl.penalty(loss, params, weight)\n",
                      f"import torch\n\n\n{_PENALTY}", "from gradtools_n3 import penalty",
                      "penalty"),
}


@pytest.mark.parametrize("imported", sorted(INSTALLED_HELPERS))
def test_an_installed_helper_that_started_no_pass_is_searched_by_its_name(tmp_path,
                                                                         monkeypatch, imported):
    """rev47a N3, rev47b I1: a pip-installed gradient-penalty helper called after the site
    returns at once when its weight is 0; it started no pass, so it was never searched, and
    installed functions were no walkers by name: "not needed", proven, and --fix --write
    broke the run with a weight. rev48a I1, I2, I3, rev48b I2: a method of an installed
    class, a decorated helper, a helper that hands on to another module of its package."""
    from retaincheck import _reads

    lib = tmp_path / "lib" / "gradtools_n3"
    lib.mkdir(parents=True)
    init, impl, imported, call = INSTALLED_HELPERS[imported]
    (lib / "__init__.py").write_text(init)
    (lib / "_impl.py").write_text(impl)
    for name in ("__init__.py", "_impl.py"):  # as site-packages
        monkeypatch.setitem(_reads._kinds, str(lib / name), 1)
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    source = (f"import torch\n{imported}\n\nweight = 0.0\nw = torch.ones(3, requires_grad=True)\n"
              "for step in range(2):\n    loss = (w * 3).pow(2).sum()\n"
              f"    loss.backward(retain_graph=True)\n    {call}(loss, [w], weight)\n"
              "result = [w.grad]\n")
    site, report = _kept_for_a_path_not_taken(
        tmp_path / "train.py", source, source.replace("weight = 0.0", "weight = 0.1"),
        modules=("gradtools_n3", "gradtools_n3._impl"))
    assert site.unseen_calls, report.format()


@pytest.mark.parametrize("imported", ["import trainutils_k1", "from trainutils_k1 import train"])
def test_an_installed_walkers_name_is_no_method_of_the_same_name(tmp_path, monkeypatch,
                                                                 imported):
    """rev48a K1, rev48b C1 (cost): an installed package's `step()` or `train()` that calls
    backward() made every `opt.step()` and `model.train()` a walker by name: kept, "never
    ran", though the line ran and nothing needs the flag. Its name counts bare (`train(...)`)
    or on its module (`trainutils_k1.step(...)`) only."""
    from retaincheck import _reads

    lib = tmp_path / "lib" / "trainutils_k1"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "def step(loss, opt):\n    loss.backward()\n    opt.step()\n\n\n"
        "def train(model, loss):\n    loss.backward()\n")
    monkeypatch.setitem(_reads._kinds, str(lib / "__init__.py"), 1)  # as site-packages
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    source = (f"import torch\n{imported}\n\nmodel = torch.nn.Linear(3, 1)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\naccumulate = 2\n"
              "for i in range(2):\n    loss = model(torch.ones(2, 3)).pow(2).sum()\n"
              "    loss.backward(retain_graph=True)\n    if (i + 1) % accumulate == 0:\n"
              "        opt.step()\n    model.train()\nresult = [model.weight.detach()]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    try:
        _, report = run_fixture(path, source, audited=True)
        plain, _ = run_fixture(path, source)
        without, _ = run_fixture(path, source.replace("retain_graph=True", "retain_graph=False"))
    finally:
        sys.modules.pop("trainutils_k1", None)
    assert same(without, plain)  # the truth: not needed
    (site,) = report.calls
    assert site.verdict == NOT_NEEDED, report.format()


UNTAKEN_FORMS = {
    # rev49a L2: a debug decorator that runs the step a second time behind a flag
    "decorator_replay": ("import functools\n\n\ndef debug(fn):\n    @functools.wraps(fn)\n"
                         "    def wrapper(loss):\n        fn(loss)\n        if TAKEN:\n"
                         "            fn(loss)\n    return wrapper\n\n\n@debug\n"
                         "def step(loss):\n    loss.backward(retain_graph=True)\n\n\n"
                         "step((w * 3).pow(2).sum())\n"),
    # rev49a V1: an eval of a string that walks
    "eval": ("loss = (w * 3).pow(2).sum()\nloss.backward(retain_graph=True)\nif TAKEN:\n"
             "    eval('loss.backward()')\n"),
    # rev49a V2: torch's backward handed to map()
    "map_backward": ("loss = (w * 3).pow(2).sum()\nloss.backward(retain_graph=True)\nif TAKEN:\n"
                     "    list(map(torch.Tensor.backward, [loss]))\n"),
    # rev49a L1: the site in a loop that ran once (a benchmark's repeat count), and timeit's
    "loop_once": ("loss = (w * 3).pow(2).sum()\nfor _ in range(2 if TAKEN else 1):\n"
                  "    loss.backward(retain_graph=True)\n"),
    "timeit_once": ("import timeit\n\nloss = (w * 3).pow(2).sum()\n"
                    "timeit.timeit(lambda: loss.backward(retain_graph=True), "
                    "number=2 if TAKEN else 1)\n"),
    # rev50a M1: two sizes, each graph walked by the repeat loop (it ran twice in all)
    "nested_sizes_once": ("for size in (1, 2):\n    loss = (w * size).pow(2).sum()\n"
                          "    for _ in range(2 if TAKEN else 1):\n"
                          "        loss.backward(retain_graph=True)\n"),
    # rev51a K1: features made once per epoch, a fresh loss on them in each inner step
    "epoch_features_once": ("for epoch in range(2):\n    feats = torch.tanh(w * (epoch + 1))\n"
                            "    for _ in range(2 if TAKEN else 1):\n"
                            "        loss = (feats * 2).sum()\n"
                            "        loss.backward(retain_graph=True)\n"),
    # the same in a function's own loop (its locals are read, then let go)
    "main_features_once": ("def main():\n    for epoch in range(2):\n"
                           "        feats = torch.tanh(w * (epoch + 1))\n"
                           "        for _ in range(2 if TAKEN else 1):\n"
                           "            loss = (feats * 2).sum()\n"
                           "            loss.backward(retain_graph=True)\n\n\nmain()\n"),
    # rev51a K1 lself: a Trainer's features per epoch, a method's steps on them
    "trainer_features_once": ("class Trainer:\n    def step(self):\n"
                              "        (self.feats * 2).sum().backward(retain_graph=True)\n\n"
                              "    def fit(self):\n        for epoch in range(2):\n"
                              "            self.feats = torch.tanh(w * (epoch + 1))\n"
                              "            for _ in range(2 if TAKEN else 1):\n"
                              "                self.step()\n\n\nTrainer().fit()\n"),
    # the same, with an __init__ that sets the attribute to None
    "trainer_init_features_once": (
        "class Trainer:\n    def __init__(self):\n        self.feats = None\n\n"
        "    def step(self):\n        (self.feats * 2).sum().backward(retain_graph=True)\n\n"
        "    def fit(self):\n        for epoch in range(2):\n"
        "            self.feats = torch.tanh(w * (epoch + 1))\n"
        "            for _ in range(2 if TAKEN else 1):\n"
        "                self.step()\n\n\nTrainer().fit()\n"),
    # the same, the features set by another method before the inner loop
    "trainer_encode_once": (
        "class Trainer:\n    def encode(self, epoch):\n"
        "        self.feats = torch.tanh(w * (epoch + 1))\n\n"
        "    def step(self):\n        (self.feats * 2).sum().backward(retain_graph=True)\n\n"
        "    def fit(self):\n        for epoch in range(2):\n            self.encode(epoch)\n"
        "            for _ in range(2 if TAKEN else 1):\n"
        "                self.step()\n\n\nTrainer().fit()\n"),
    # rev53a M1: a dict attribute of the trainer filled before the inner loop
    "trainer_cache_once": (
        "class Trainer:\n    def __init__(self):\n        self.cache = {}\n\n"
        "    def step(self):\n"
        "        (self.cache['h'] * 2).sum().backward(retain_graph=True)\n\n"
        "    def fit(self):\n        for epoch in range(2):\n"
        "            self.cache['h'] = torch.tanh(w * (epoch + 1))\n"
        "            for _ in range(2 if TAKEN else 1):\n"
        "                self.step()\n\n\nTrainer().fit()\n"),
    # rev53a M2: a module's buffer set before the inner loop, read by a step function
    "module_buffer_once": (
        "head = torch.nn.Linear(3, 1)\nhead.register_buffer('feats', None)\n\n\n"
        "def step():\n    (head.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    head.feats = torch.tanh(w * (epoch + 1))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step()\n"),
    # rev53a M4: a functools.lru_cache of the features
    "lru_cache_once": (
        "import functools\n\n\n@functools.lru_cache(maxsize=1)\ndef feats_for(epoch):\n"
        "    return torch.tanh(w * (epoch + 1))\n\n\ndef step(epoch):\n"
        "    (feats_for(epoch) * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    for _ in range(2 if TAKEN else 1):\n        step(epoch)\n"),
    # rev53b K2: the same cache, called by a function's own loop (a global of its module)
    "lru_cache_in_a_function_once": (
        "import functools\n\n\n@functools.lru_cache(maxsize=1)\ndef feats_for(epoch):\n"
        "    return torch.tanh(w * (epoch + 1))\n\n\ndef main():\n"
        "    for epoch in range(2):\n        for _ in range(2 if TAKEN else 1):\n"
        "            (feats_for(epoch) * 2).sum().backward(retain_graph=True)\n\n\nmain()\n"),
    # rev53a M5: an iterator that yields the features made before the inner loop
    "repeat_iterator_once": (
        "import itertools\n\n\ndef step(it):\n"
        "    (next(it) * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    it = itertools.repeat(torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(it)\n"),
    # rev53a M6, rev53b K3: a plain object, a queue, a weak reference, holding the features
    "plain_object_once": (
        "class Feats:\n    def __init__(self, h):\n        self.h = h\n\n\n"
        "def step(f):\n    (f.h * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    f = Feats(torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(f)\n"),
    "queue_once": (
        "import queue\n\n\ndef step(q):\n"
        "    (q.queue[0] * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    q = queue.Queue()\n"
        "    q.put(torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(q)\n"),
    # rev53a M8: two levels of attributes, and an attribute set on a tensor
    "nested_attribute_once": (
        "class Model:\n    pass\n\n\nclass Trainer:\n    def __init__(self):\n"
        "        self.model = Model()\n\n    def step(self):\n"
        "        (self.model.ctx * 2).sum().backward(retain_graph=True)\n\n"
        "    def fit(self):\n        for epoch in range(2):\n"
        "            self.model.ctx = torch.tanh(w * (epoch + 1))\n"
        "            for _ in range(2 if TAKEN else 1):\n"
        "                self.step()\n\n\nTrainer().fit()\n"),
    "tensor_attribute_once": (
        "for epoch in range(2):\n    x = torch.zeros(3)\n"
        "    x.ctx = torch.tanh(w * (epoch + 1))\n    for _ in range(2 if TAKEN else 1):\n"
        "        (x.ctx * 2).sum().backward(retain_graph=True)\n"),
    # rev54a N1: a memoizing getter called in the loop sets the features once per epoch
    "memoized_getter_once": (
        "class Trainer:\n    def __init__(self):\n        self.feats, self.at = None, -1\n\n"
        "    def get(self, epoch):\n        if self.at != epoch:\n"
        "            self.feats, self.at = torch.tanh(w * (epoch + 1)), epoch\n"
        "        return self.feats\n\n    def fit(self):\n        for epoch in range(2):\n"
        "            for _ in range(2 if TAKEN else 1):\n"
        "                (self.get(epoch) * 2).sum().backward(retain_graph=True)\n\n\n"
        "Trainer().fit()\n"),
    # rev54a N2: setattr in the method that prepares the epoch
    "setattr_features_once": (
        "class Trainer:\n    def prepare(self, epoch):\n"
        "        setattr(self, 'feats', torch.tanh(w * (epoch + 1)))\n\n"
        "    def step(self):\n        (self.feats * 2).sum().backward(retain_graph=True)\n\n"
        "    def fit(self):\n        for epoch in range(2):\n            self.prepare(epoch)\n"
        "            for _ in range(2 if TAKEN else 1):\n                self.step()\n\n\n"
        "Trainer().fit()\n"),
    # rev54a N3: a bound method of an object that holds the features
    "bound_method_once": (
        "class Feats:\n    def __init__(self, h):\n        self.h = h\n\n"
        "    def loss(self):\n        return (self.h * 2).sum()\n\n\n"
        "for epoch in range(2):\n    fn = Feats(torch.tanh(w * (epoch + 1))).loss\n"
        "    for _ in range(2 if TAKEN else 1):\n        fn().backward(retain_graph=True)\n"),
    # rev54a N5, N6, N7, rev54b L1: an object of many attributes, a thread's locals, four
    # containers deep, a slots dataclass, a context variable
    "many_attributes_once": (
        "class Trainer:\n    def __init__(self):\n        for i in range(80):\n"
        "            setattr(self, f'opt{i}', i)\n\n    def fit(self):\n"
        "        for epoch in range(2):\n            self.feats = torch.tanh(w * (epoch + 1))\n"
        "            for _ in range(2 if TAKEN else 1):\n"
        "                (self.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "Trainer().fit()\n"),
    "thread_local_once": (
        "import threading\n\ntls = threading.local()\n\n\ndef step():\n"
        "    (tls.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    tls.feats = torch.tanh(w * (epoch + 1))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step()\n"),
    "four_deep_once": (
        "for epoch in range(2):\n"
        "    ctx = {'a': {'b': {'c': [torch.tanh(w * (epoch + 1))]}}}\n"
        "    for _ in range(2 if TAKEN else 1):\n"
        "        (ctx['a']['b']['c'][0] * 2).sum().backward(retain_graph=True)\n"),
    "slots_dataclass_once": (
        "import dataclasses\n\n\n@dataclasses.dataclass(slots=True)\nclass Batch:\n"
        "    h: torch.Tensor\n\n\ndef step(b):\n"
        "    (b.h * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    b = Batch(torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(b)\n"),
    "context_variable_once": (
        "import contextvars\n\nfeats = contextvars.ContextVar('feats')\n\n\n"
        "def step():\n    (feats.get() * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    feats.set(torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step()\n"),
    # rev55a P6, rev55b M1: a getter whose guard clause returns the features of the epoch
    "guard_clause_getter_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "class Trainer:\n    at = -1\n\n    def get(self, epoch):\n"
        "        if self.at == epoch:\n            return self.feats\n"
        "        self.feats, self.at = make(epoch), epoch\n        return self.feats\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    for _ in range(2 if TAKEN else 1):\n"
        "        (tr.get(epoch) * 2).sum().backward(retain_graph=True)\n"),
    # rev55b M1 a_ifexp: a getter that keeps the epoch's features by an if-expression
    "if_expression_getter_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "class Trainer:\n    at, feats = -1, None\n\n    def get(self, epoch):\n"
        "        self.feats = make(epoch) if self.at != epoch else self.feats\n"
        "        self.at = epoch\n        return self.feats\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    for _ in range(2 if TAKEN else 1):\n"
        "        (tr.get(epoch) * 2).sum().backward(retain_graph=True)\n"),
    # rev55a P8, P7: the features made in the loop only when missing, or kept by an
    # if-expression
    "made_when_missing_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "def fit():\n    for epoch in range(2):\n        feats = None\n"
        "        for _ in range(2 if TAKEN else 1):\n            if feats is None:\n"
        "                feats = make(epoch)\n"
        "            (feats * 2).sum().backward(retain_graph=True)\n\n\nfit()\n"),
    "kept_by_an_if_expression_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "def fit():\n    for epoch in range(2):\n        feats = None\n"
        "        for _ in range(2 if TAKEN else 1):\n"
        "            feats = make(epoch) if feats is None else feats\n"
        "            (feats * 2).sum().backward(retain_graph=True)\n\n\nfit()\n"),
    # rev55a P3, P4: attributes set through __dict__.update and setattr with a name
    "dict_update_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "class Trainer:\n    def update(self, **state):\n"
        "        self.__dict__.update(state)\n\n    def step(self):\n"
        "        (self.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    tr.update(feats=make(epoch))\n"
        "    for _ in range(2 if TAKEN else 1):\n        tr.step()\n"),
    "setattr_by_name_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "class Trainer:\n    def update(self, **state):\n"
        "        for k, v in state.items():\n            setattr(self, k, v)\n\n"
        "    def step(self):\n        (self.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    tr.update(feats=make(epoch))\n"
        "    for _ in range(2 if TAKEN else 1):\n        tr.step()\n"),
    # rev55b M1: an item of a state dict the step also writes to; another object's
    # attribute of the same name; rev55a P5: the last of many past values
    "state_item_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "class Trainer:\n    def __init__(self):\n        self.state = {}\n\n"
        "    def step(self):\n        loss = (self.state['feats'] * 2).sum()\n"
        "        loss.backward(retain_graph=True)\n"
        "        self.state['last'] = loss.detach()\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    tr.state['feats'] = make(epoch)\n"
        "    for _ in range(2 if TAKEN else 1):\n        tr.step()\n"),
    "same_name_elsewhere_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "class Batch:\n    pass\n\n\ndef collate(x):\n    b = Batch()\n"
        "    b.feats = x\n    return b\n\n\nclass Trainer:\n    def encode(self, epoch):\n"
        "        self.feats = make(epoch)\n\n    def step(self):\n"
        "        b = collate(torch.ones(3))\n"
        "        (self.feats * b.feats).sum().backward(retain_graph=True)\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    tr.encode(epoch)\n"
        "    for _ in range(2 if TAKEN else 1):\n        tr.step()\n"),
    "last_of_many_once": (
        "def make(epoch):\n    return torch.tanh(w * (epoch + 1))\n\n\n"
        "bank = [torch.zeros(3) for _ in range(300)]\nfor epoch in range(2):\n"
        "    bank.append(make(epoch))\n    for _ in range(2 if TAKEN else 1):\n"
        "        (bank[-1] * 2).sum().backward(retain_graph=True)\n"),
    # rev55b M2: a subclass of threading.local
    "thread_local_subclass_once": (
        "import threading\n\n\nclass State(threading.local):\n    pass\n\n\n"
        "state = State()\n\n\ndef step():\n"
        "    (state.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    state.feats = torch.tanh(w * (epoch + 1))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step()\n"),
    # rev56a N1, rev56b F1, F2: a name rebound to a value built from its own in the loop
    "rebound_to_itself_once": (
        "def main():\n    for epoch in range(2):\n        feats = torch.tanh(w * (epoch + 1))\n"
        "        for _ in range(2 if TAKEN else 1):\n            feats = feats.to('cpu')\n"
        "            (feats * 2).sum().backward(retain_graph=True)\n\n\nmain()\n"),
    "running_state_once": (
        "def main():\n    for epoch in range(2):\n        state = torch.tanh(w * (epoch + 1))\n"
        "        for _ in range(2 if TAKEN else 1):\n            state = 0.9 * state + w\n"
        "            state.sum().backward(retain_graph=True)\n\n\nmain()\n"),
    # rev56a N2, N3, N4: a collate function's other object, another class's method of the
    # same name, a cached value: none sets the trainer's features anew
    "other_holders_once": (
        "import functools\n\n\n@functools.lru_cache(maxsize=2)\ndef encode(epoch):\n"
        "    return torch.tanh(w * (epoch + 1))\n\n\nclass Batch:\n    pass\n\n\n"
        "def collate(b, x):\n    b.feats = x * 1\n\n\nclass Probe:\n    def step(self):\n"
        "        self.feats = torch.zeros(3)\n\n\nclass Trainer:\n    def step(self, epoch):\n"
        "        collate(Batch(), w)\n        self.feats = encode(epoch)\n"
        "        (self.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    for _ in range(2 if TAKEN else 1):\n"
        "        tr.step(epoch)\n"),
    # rev57a M1, M2, rev57b G1: the same through another name
    "rebound_through_another_name_once": (
        "def main():\n    for epoch in range(2):\n        state = torch.tanh(w * (epoch + 1))\n"
        "        for _ in range(2 if TAKEN else 1):\n            new = 0.9 * state + w\n"
        "            state = new\n            state.sum().backward(retain_graph=True)\n\n\n"
        "main()\n"),
    # rev57b G3: a hand-written memo of the epoch's features, a dict and a caching object
    "memo_dict_once": (
        "_memo = {}\n\n\ndef encode(epoch):\n    if epoch not in _memo:\n"
        "        _memo[epoch] = torch.tanh(w * (epoch + 1))\n    return _memo[epoch]\n\n\n"
        "class Trainer:\n    def step(self, epoch):\n        self.feats = encode(epoch)\n"
        "        (self.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    for _ in range(2 if TAKEN else 1):\n"
        "        tr.step(epoch)\n"),
    "memo_object_once": (
        "class Encoder:\n    def __init__(self):\n        self.memo = {}\n\n"
        "    def __call__(self, epoch):\n        if epoch not in self.memo:\n"
        "            self.memo[epoch] = torch.tanh(w * (epoch + 1))\n"
        "        return self.memo[epoch]\n\n\nencode = Encoder()\n\n\n"
        "class Trainer:\n    def step(self, epoch):\n        self.feats = encode(epoch)\n"
        "        (self.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "tr = Trainer()\nfor epoch in range(2):\n    for _ in range(2 if TAKEN else 1):\n"
        "        tr.step(epoch)\n"),
    # rev51a K1 lcomp: the inner steps in a comprehension
    "comprehension_once": ("for epoch in range(2):\n    feats = torch.tanh(w * (epoch + 1))\n"
                           "    [(feats * 2).sum().backward(retain_graph=True)\n"
                           "     for _ in range(2 if TAKEN else 1)]\n"),
    # rev52a L1: a `global` set each epoch by another function, read by the step
    "global_features_once": (
        "def prepare(epoch):\n    global feats\n    feats = torch.tanh(w * (epoch + 1))\n\n"
        "\ndef step():\n    (feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    prepare(epoch)\n"
        "    for _ in range(2 if TAKEN else 1):\n        step()\n"),
    # rev52a L1: a class's own attribute as the features' namespace
    "class_attribute_once": (
        "class Cache:\n    feats = None\n\n\ndef step():\n"
        "    (Cache.feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n    Cache.feats = torch.tanh(w * (epoch + 1))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step()\n"),
    # rev52a/b L1: a functools.partial over the features
    "partial_features_once": (
        "import functools\n\n\ndef step(f):\n"
        "    (f * 2).sum().backward(retain_graph=True)\n\n\nfor epoch in range(2):\n"
        "    run = functools.partial(step, torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        run()\n"),
    # rev52b L1: a step closing over the features, made each epoch
    "closure_features_once": (
        "def main():\n    for epoch in range(2):\n        h = torch.tanh(w * (epoch + 1))\n"
        "\n        def step():\n            (h * 2).sum().backward(retain_graph=True)\n\n"
        "        for _ in range(2 if TAKEN else 1):\n            step()\n\n\nmain()\n"),
    # rev52a/b L1, rev52b L2: a batch that is a list of lists, a dict of dicts
    "nested_batch_once": (
        "def step(batch):\n"
        "    (batch[0]['feats']['h'] * 2).sum().backward(retain_graph=True)\n\n\n"
        "for epoch in range(2):\n"
        "    batch = [{'feats': {'h': torch.tanh(w * (epoch + 1))}}]\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(batch)\n"),
    # rev52a/b L1: a dataclass batch made each epoch
    "dataclass_batch_once": (
        "import dataclasses\n\n\n@dataclasses.dataclass\nclass Batch:\n"
        "    h: torch.Tensor\n\n\ndef step(batch):\n"
        "    (batch.h * 2).sum().backward(retain_graph=True)\n\n\nfor epoch in range(2):\n"
        "    batch = Batch(torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(batch)\n"),
    # rev52b L2: a SimpleNamespace made each epoch
    "namespace_batch_once": (
        "import types\n\n\ndef step(st):\n"
        "    (st.h * 2).sum().backward(retain_graph=True)\n\n\nfor epoch in range(2):\n"
        "    st = types.SimpleNamespace(h=torch.tanh(w * (epoch + 1)))\n"
        "    for _ in range(2 if TAKEN else 1):\n        step(st)\n"),
    # rev52a L1, rev52b L2: a nonlocal refreshed by a helper each epoch
    "nonlocal_features_once": (
        "def fit():\n    feats = None\n\n    def prepare(epoch):\n        nonlocal feats\n"
        "        feats = torch.tanh(w * (epoch + 1))\n\n    def step():\n"
        "        (feats * 2).sum().backward(retain_graph=True)\n\n"
        "    for epoch in range(2):\n        prepare(epoch)\n"
        "        for _ in range(2 if TAKEN else 1):\n            step()\n\n\nfit()\n"),
    # rev52a L2: a function that keeps its own locals() is not read; any name it assigns before the
    # loop counts
    "own_locals_once": (
        "def main():\n    hparams = locals()\n    for epoch in range(2):\n"
        "        feats = torch.tanh(w * (epoch + 1))\n"
        "        for _ in range(2 if TAKEN else 1):\n"
        "            (feats * 2).sum().backward(retain_graph=True)\n    return hparams\n\n"
        "\nmain()\n"),
    # rev51a K2: the loop's own target walks the graph made before the loop
    "loop_target_once": ("for epoch in range(2):\n    shared = (w * (epoch + 1)).pow(2).sum()\n"
                         "    for loss in [shared] * (2 if TAKEN else 1):\n"
                         "        loss.backward(retain_graph=True)\n"),
    # rev50a M2: a warm-up on another graph, then the timed loop over the graph made before it
    "warm_up_once": ("def bwd(loss):\n    loss.backward(retain_graph=True)\n\n\n"
                     "bwd((w * 1).sum())\nloss = (w * 3).pow(2).sum()\n"
                     "for _ in range(2 if TAKEN else 1):\n    bwd(loss)\n"),
    # rev50a M3, rev50b M4: a loop of the standard library's (sched's; a thread pool's worker)
    "stdlib_loop_once": ("import sched\n\nloss = (w * 3).pow(2).sum()\n\n\ndef fit():\n"
                         "    loss.backward(retain_graph=True)\n\n\n"
                         "s = sched.scheduler()\nfor _ in range(2 if TAKEN else 1):\n"
                         "    s.enter(0, 1, fit)\ns.run()\n"),
    # rev51b R1: a retry loop that ends in a break, with a continue that runs it again
    "retry_once": ("h = torch.tanh(w)\nfor attempt in range(3):\n"
                   "    (h * 2).sum().backward(retain_graph=True)\n"
                   "    if TAKEN and attempt == 0:\n        continue\n    break\n"),
    # rev50b M1: a spy around the step, a part of the graph made before the loop
    "mock_wraps_once": ("from unittest import mock\n\nh = torch.tanh(w)\n\n\ndef step(i):\n"
                        "    (h * (i + 1)).sum().backward(retain_graph=True)\n\n\n"
                        "spy = mock.Mock(wraps=step)\nfor i in range(2 if TAKEN else 1):\n"
                        "    spy(i)\n"),
}


ONCE_NO_LOOP = {
    # rev50a C1: run once, through a decorator's wrapper or an optimizer's closure: no loop
    "enable_grad": "@torch.enable_grad()\ndef step(loss):\n    loss.backward(retain_graph=True)"
                   "\n\n\nstep((w * 3).pow(2).sum())\n",
    "closure": "opt = torch.optim.SGD([w], lr=0.01)\n\n\ndef closure():\n    opt.zero_grad()\n"
               "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
               "    return loss\n\n\nopt.step(closure)\n",
    # rev50b C1: a smoke test's loop that ends in a plain break
    "break": "for x in [torch.ones(3)] * 3:\n    (w * x).pow(2).sum().backward(retain_graph=True)\n"
             "    break\n",
    # a loop that makes its graph each iteration, run twice
    "fresh_graphs": "for i in range(2):\n    (w * i).pow(2).sum().backward(retain_graph=True)\n",
    # the same in a function, and a model whose forward, called in the loop, sets the
    # attributes the step walks (a CycleGAN-style model.optimize(x))
    "fresh_graphs_in_a_function": ("def main():\n    for i in range(2):\n"
                                   "        feats = torch.tanh(w * i)\n"
                                   "        (feats * 2).sum().backward(retain_graph=True)\n\n\n"
                                   "main()\n"),
    # rev52a C1: an attribute reset to None before the loop, set by the step each batch
    "logged_loss_attribute": ("class Trainer:\n    def step(self, x):\n"
                              "        self.loss = (w * x).pow(2).sum()\n"
                              "        self.loss.backward(retain_graph=True)\n\n"
                              "    def fit(self):\n        self.loss = None\n"
                              "        for x in (1.0, 2.0):\n            self.step(x)\n\n\n"
                              "Trainer().fit()\n"),
    # the same, set to a tensor before the loop: the step, another function, sets it too
    "logged_loss_initialised": ("class Trainer:\n    def step(self, x):\n"
                                "        self.loss = (w * x).pow(2).sum()\n"
                                "        self.loss.backward(retain_graph=True)\n\n"
                                "    def fit(self):\n        self.loss = torch.zeros(())\n"
                                "        for x in (1.0, 2.0):\n            self.step(x)\n\n\n"
                                "Trainer().fit()\n"),
    # a loss module whose forward, called in the loop, sets the loss the loop walks
    "loss_module_attribute": ("class Loss(torch.nn.Module):\n    def forward(self, x):\n"
                              "        self.loss = (w * x).pow(2).sum()\n        return x\n\n\n"
                              "crit = Loss()\nfor i in range(2):\n    crit(i + 1.0)\n"
                              "    crit.loss.backward(retain_graph=True)\n"),
    # rev54a C1: a model that keeps an activation, handed to the step as a parameter
    "activation_kept_by_a_model": (
        "class Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        self.hidden = torch.tanh(w * x)\n        return self.hidden * 2\n\n\n"
        "def train_step(m, x):\n    m(x).sum().backward(retain_graph=True)\n\n\n"
        "model = Net()\nfor x in (1.0, 2.0):\n    train_step(model, x)\n"),
    # a hidden state detached into another name each step: a fresh graph each time
    "detached_through_another_name": (
        "def main():\n    h = torch.tanh(w)\n    for x in (1.0, 2.0):\n"
        "        h_next = torch.tanh(h.detach() * x + w)\n        h = h_next\n"
        "        h.sum().backward(retain_graph=True)\n\n\nmain()\n"),
    "model_attributes": ("class Model:\n    def forward(self, x):\n"
                         "        self.fake = torch.tanh(w * x)\n\n"
                         "    def optimize(self, x):\n        self.forward(x)\n"
                         "        (self.fake * 2).sum().backward(retain_graph=True)\n\n\n"
                         "model = Model()\nfor i in range(2):\n    model.optimize(i + 1.0)\n"),
}


@pytest.mark.parametrize("form", sorted(ONCE_NO_LOOP))
def test_a_site_no_loop_runs_again_on_its_graph_is_not_needed(tmp_path, form):
    """rev50a C1, rev50b C1 (cost): a site run once through a decorator's wrapper, an
    optimizer's closure or a loop that ends in a break, and a loop that makes its graph each
    iteration: nothing repeats it on a graph it kept; "not needed", as the truth says."""
    source = ("import torch\n\nw = torch.ones(3, requires_grad=True)\n" + ONCE_NO_LOOP[form]
              + "result = [w.grad]\n")
    _not_needed_as_the_truth_says(tmp_path / "train.py", source)


@pytest.mark.parametrize("form", sorted(UNTAKEN_FORMS))
def test_a_walk_on_a_path_not_taken_keeps_the_site_whatever_its_form(tmp_path, form):
    """rev49a L1, L2, V1, V2: a second walk on a path this run did not take, in a form no
    name showed (a parameter called again, a string, torch's backward as a value, another
    iteration of the site's own loop): "not needed", proven, and the other path broke."""
    source = ("import torch\n\nTAKEN = False\nw = torch.ones(3, requires_grad=True)\n"
              + UNTAKEN_FORMS[form] + "result = [w.grad]\n")
    site, report = _kept_for_a_path_not_taken(tmp_path / "train.py", source,
                                              source.replace("TAKEN = False", "TAKEN = True"))
    assert site.ran_once_in_a_loop == form.endswith("_once"), report.format()


def test_another_modules_attribute_set_before_the_loop_keeps_the_site(tmp_path, monkeypatch):
    """rev53a M3: a shared `store` module of the program holds the features of an epoch;
    the inner loop's step reads `store.feats`. Kept."""
    (tmp_path / "store_m3.py").write_text("feats = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = ("import torch\n\nimport store_m3\n\nTAKEN = False\n"
              "w = torch.ones(3, requires_grad=True)\n\n\ndef step():\n"
              "    (store_m3.feats * 2).sum().backward(retain_graph=True)\n\n\n"
              "for epoch in range(2):\n    store_m3.feats = torch.tanh(w * (epoch + 1))\n"
              "    for _ in range(2 if TAKEN else 1):\n        step()\nresult = [w.grad]\n")
    site, report = _kept_for_a_path_not_taken(
        tmp_path / "train.py", source, source.replace("TAKEN = False", "TAKEN = True"),
        modules=("store_m3",))
    assert site.ran_once_in_a_loop, report.format()


def test_a_trainer_of_another_file_that_prepares_the_features_keeps_the_site(
        tmp_path, monkeypatch):
    """rev54b D1: the Trainer lives in trainer_d1.py, whose prepare() sets self.feats once
    per epoch; train.py's inner loop calls its step(), which walks them. The class's file is
    searched for what sets the attribute: kept."""
    module = tmp_path / "trainer_d1.py"
    trainer = ("import torch\n\n\nclass Trainer:\n    def prepare(self, w, epoch):\n"
               "        self.feats = torch.tanh(w * (epoch + 1))\n\n    def step(self):\n"
               "        (self.feats * 2).sum().backward(retain_graph=True)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = ("import torch\n\nfrom trainer_d1 import Trainer\n\nTAKEN = False\n"
              "w = torch.ones(3, requires_grad=True)\ntr = Trainer()\n"
              "for epoch in range(2):\n    tr.prepare(w, epoch)\n"
              "    for _ in range(2 if TAKEN else 1):\n        tr.step()\nresult = [w.grad]\n")
    path, taken = tmp_path / "train.py", source.replace("TAKEN = False", "TAKEN = True")
    path.write_text(source)
    runs = []
    try:
        for text, program, audited in ((trainer, source, True), (trainer, taken, False), (
                trainer.replace("retain_graph=True", ""), taken, False)):
            module.write_text(text)
            sys.modules.pop("trainer_d1", None)
            runs.append(run_fixture(path, program, audited=audited))
    finally:
        sys.modules.pop("trainer_d1", None)
    (_, report), (with_flag, _), (without, _) = runs
    assert isinstance(with_flag, list) and isinstance(without, RuntimeError)  # the truth
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.ran_once_in_a_loop, report.format()


def test_a_model_of_another_file_that_keeps_an_activation_is_not_needed(tmp_path,
                                                                         monkeypatch):
    """rev54a C1 (cost): the model, in nets_c1.py, keeps its activation in forward; the
    step gets it as a parameter and calls it: a fresh graph each batch, "not needed", as
    the truth says."""
    (tmp_path / "nets_c1.py").write_text(
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def __init__(self, w):\n"
        "        super().__init__()\n        self.w = w\n\n    def forward(self, x):\n"
        "        self.hidden = torch.tanh(self.w * x)\n        return self.hidden * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = ("import torch\n\nfrom nets_c1 import Net\n\n"
              "w = torch.ones(3, requires_grad=True)\nmodel = Net(w)\n\n\n"
              "def train_step(m, x):\n    m(x).sum().backward(retain_graph=True)\n\n\n"
              "for x in (1.0, 2.0):\n    train_step(model, x)\nresult = [w.grad]\n")
    try:
        _not_needed_as_the_truth_says(tmp_path / "train.py", source)
    finally:
        sys.modules.pop("nets_c1", None)


def test_a_backward_whose_inputs_left_out_what_a_later_pass_walks_is_kept(tmp_path):
    """rev52b I1: `backward(retain_graph=True, inputs=head_params)`, then a pass through the
    features behind it, which that call did not run; with `inputs=None` (another option) it
    runs and frees them, and the later pass raises. Kept, `partly_run`."""
    source = ("import torch\n\nTAKEN = False\ntorch.manual_seed(0)\n"
              "enc, head = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)\n"
              "h = enc(torch.ones(2, 3)).tanh()\n"
              "inputs = None if TAKEN else list(head.parameters())\n"
              "head(h).pow(2).sum().backward(retain_graph=True, inputs=inputs)\n"
              "h.pow(2).sum().backward()\nresult = [enc.weight.grad, head.weight.grad]\n")
    site, report = _kept_for_a_path_not_taken(tmp_path / "train.py", source,
                                              source.replace("TAKEN = False", "TAKEN = True"))
    assert site.partly_run and "inputs left out" in report.format(), report.format()


STEP_REPLAYS = ("import torch\n\ncfg = {'replay': False}\nprev = [None]\n\n\n"
                "def train_step(w, x):\n    if prev[0] is not None and cfg['replay']:\n"
                "        (0.1 * prev[0]).backward()\n    loss = (w * x).pow(2).sum()\n"
                "    loss.backward(retain_graph=True)\n    prev[0] = loss\n"
                "    return loss.item()\n")


@pytest.mark.parametrize("through", ["installed_map", "tree_map", "exec"])
def test_a_step_mapped_again_by_code_not_the_programs_is_searched_whole(tmp_path, monkeypatch,
                                                                      through):
    """rev47a N1, N2: the step (in a module of its own) replays the previous step's loss above
    its site behind an option, and is called again by ``map()`` inside a pip-installed
    trainer's ``fit`` or torch's ``tree_map``; only the program's own callers were looked at
    for a call through code with no frame: "not needed", proven, and the replaying run broke."""
    from retaincheck import _reads

    lib = tmp_path / "lib" / "minitrain_n1"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "def fit(step, batches):\n    return list(map(step, batches))\n")
    monkeypatch.setitem(_reads._kinds, str(lib / "__init__.py"), 1)  # as site-packages
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.syspath_prepend(str(tmp_path))
    call = {
        "installed_map": "from minitrain_n1 import fit\n\n"
                         "fit(functools.partial(steps_n1.train_step, w), [torch.tensor(1.0)] * 3)",
        "tree_map": "from torch.utils._pytree import tree_map\n\n"
                    "tree_map(functools.partial(steps_n1.train_step, w), "
                    "{'a': torch.tensor(1.0), 'b': torch.tensor(2.0)})",
        # rev48a E1: the map() in code compiled from a string (a launcher's driver)
        "exec": "exec('list(map(step, batches))', {'step': functools.partial("
                "steps_n1.train_step, w), 'batches': [torch.tensor(1.0)] * 3})",
    }[through]
    source = ("import functools\n\nimport steps_n1\nimport torch\n\nREPLAY = False\n"
              "steps_n1.cfg['replay'] = REPLAY\nw = torch.ones(3, requires_grad=True)\n"
              f"{call}\nresult = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)

    def run_with(steps: str, text: str, audited: bool = False):
        (tmp_path / "steps_n1.py").write_text(steps)
        for name in ("steps_n1", "minitrain_n1"):
            sys.modules.pop(name, None)
        importlib.invalidate_caches()
        try:
            return run_fixture(path, text, audited=audited)
        finally:
            for name in ("steps_n1", "minitrain_n1"):
                sys.modules.pop(name, None)

    _, report = run_with(STEP_REPLAYS, source, audited=True)
    taken = source.replace("REPLAY = False", "REPLAY = True")
    broken, _ = run_with(STEP_REPLAYS.replace("retain_graph=True", "retain_graph=False"), taken)
    assert isinstance(run_with(STEP_REPLAYS, taken)[0], list)
    assert isinstance(broken, RuntimeError)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_calls, report.format()


def test_a_site_in_a_file_the_program_wrote_is_never_not_needed(tmp_path, monkeypatch):
    """rev48a G2: a step module written from a template (`retain_graph={keep}`, a second walk
    only with an option) and imported: its file holds a literal True, read as any file, "not
    needed", proven, and --fix --write edited a file the next run writes again."""
    monkeypatch.syspath_prepend(str(tmp_path))
    source = ("import importlib\nimport sys\n\nimport torch\n\ndouble = False\n"
              "TEMPLATE = 'def step(loss):\\n    loss.backward(retain_graph={keep})\\n{extra}'\n"
              f"with open({str(tmp_path / 'gen_step_g2.py')!r}, 'w') as f:\n"
              "    f.write(TEMPLATE.format(keep=KEEP, extra='    loss.backward()\\n' if double "
              "else ''))\nsys.modules.pop('gen_step_g2', None)\nimportlib.invalidate_caches()\n"
              "gen_step_g2 = importlib.import_module('gen_step_g2')\n"
              "w = torch.ones(3, requires_grad=True)\ngen_step_g2.step((w * 3).pow(2).sum())\n"
              "result = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    try:
        _, report = run_fixture(path, source.replace("KEEP", "True"), audited=True)
        taken = source.replace("double = False", "double = True")
        broken, _ = run_fixture(path, taken.replace("KEEP", "False"))
        assert isinstance(run_fixture(path, taken.replace("KEEP", "True"))[0], list)
        assert isinstance(broken, RuntimeError)
    finally:
        sys.modules.pop("gen_step_g2", None)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site._unread == "generated", report.format()
    assert "was written while the program ran" in report.format()


UNITTEST_CASE = """import os
import unittest

import torch


class T(unittest.TestCase):
    def setUp(self):
        self.w = torch.ones(3, requires_grad=True)
        self.loss = (self.w * 3).pow(2).sum()
        self.loss.backward(retain_graph=True)

    def test_again(self):
        if os.environ.get("AGAIN"):
            self.loss.backward()
        self.assertTrue(self.w.grad.sum() > 0)
"""


UNITTEST_VARIANTS = {
    "setUp": UNITTEST_CASE,
    # rev48a U1: the probe in setUpClass, which the suite runs outside TestCase.run
    "setUpClass": UNITTEST_CASE.replace(
        "    def setUp(self):\n        self.w", "    @classmethod\n    def setUpClass(self):\n"
        "        self.w"),
    # rev48a U2, rev48b U2: the second walk in a cleanup handed to addCleanup
    "addCleanup": UNITTEST_CASE.replace(
        "class T(", "def again(loss):\n    if os.environ.get('AGAIN'):\n        loss.backward()\n"
        "\n\nclass T(").replace(
        "        if os.environ.get(\"AGAIN\"):\n            self.loss.backward()\n",
        "        self.addCleanup(again, self.loss)\n"),
    # rev49b H2: the cleanup registered by a mixin of a helpers module
    "mixin": UNITTEST_CASE.replace(
        "import torch\n", "import torch\nfrom mixin_h2 import Checks\n").replace(
        "class T(unittest.TestCase)", "class T(Checks, unittest.TestCase)").replace(
        "        if os.environ.get(\"AGAIN\"):\n            self.loss.backward()\n",
        "        self.track(self.loss)\n"),
    # rev48b U1: the second walk in the module's tearDownModule
    "tearDownModule": UNITTEST_CASE.replace(
        "class T(", "KEPT = []\n\n\ndef tearDownModule():\n    if os.environ.get('AGAIN'):\n"
        "        KEPT.pop().backward()\n\n\nclass T(").replace(
        "        if os.environ.get(\"AGAIN\"):\n            self.loss.backward()\n",
        "        KEPT.append(self.loss)\n"),
}


@pytest.mark.parametrize("variant", sorted(UNITTEST_VARIANTS))
def test_a_test_cases_test_after_its_setup_is_searched_outside_pytest(tmp_path, monkeypatch,
                                                                      variant):
    """rev47a R2 (rev46b F1b under ``python -m retaincheck -m unittest``): a probe in setUp,
    a second walk in the test behind an environment variable; unittest calls the test by a
    name no frame shows, and it started no pass: "not needed", proven, and the variable's
    run broke. Fixed under pytest before; now wherever unittest runs the case. rev48a U1, U2,
    rev48b U1, U2: a probe in setUpClass; the walk in a cleanup or in tearDownModule."""
    import unittest

    source = UNITTEST_VARIANTS[variant]
    path = tmp_path / "test_ut_r2.py"
    (tmp_path / "mixin_h2.py").write_text(
        "import os\n\n\ndef again(loss):\n    if os.environ.get('AGAIN'):\n"
        "        loss.backward()\n\n\nclass Checks:\n    def track(self, loss):\n"
        "        self.addCleanup(again, loss)\n")

    def run_case(text):
        path.write_text(text)
        try:
            with _imported(monkeypatch, tmp_path, "test_ut_r2") as module:
                suite = unittest.defaultTestLoader.loadTestsFromModule(module)
                with retaincheck.audit() as report:
                    outcome = unittest.TextTestRunner(stream=open(os.devnull, "w")).run(suite)
        finally:
            sys.modules.pop("mixin_h2", None)
        return outcome.wasSuccessful(), report

    ok, report = run_case(source)
    assert ok
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.unseen_calls, report.format()
    # the truth: with the variable set, the flag is needed
    monkeypatch.setenv("AGAIN", "1")
    assert run_case(source)[0]
    assert not run_case(source.replace("retain_graph=True", ""))[0]


def test_a_base_pythons_site_packages_inside_its_standard_library_is_installed(tmp_path,
                                                                              monkeypatch):
    """rev47a N4: a venv made with --system-site-packages reads the base Python's
    site-packages, which lies inside the base's standard library folder: its packages were
    taken for the standard library, never searched (a helper there that ran after the site:
    "not needed", proven)."""
    import sysconfig

    from retaincheck import _reads

    base = tmp_path / "base" / "lib" / "python3"
    module = base / "site-packages" / "loglib" / "__init__.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    venv = tmp_path / "venv" / "lib" / "site-packages"
    venv.mkdir(parents=True)
    paths = {**sysconfig.get_paths(), "stdlib": str(base), "platstdlib": str(base),
             "purelib": str(venv), "platlib": str(venv)}
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)
    monkeypatch.setattr(sys, "path", [*sys.path, str(venv), str(base / "site-packages")])
    monkeypatch.setattr(_reads, "_dirs", None)
    monkeypatch.setattr(_reads, "_kinds", {})
    assert _reads._kind(str(module)) == 1  # installed: searched, as the venv's own packages
    assert _reads._kind(str(base / "os.py")) == 0  # the standard library itself: left out


STEPS = """import torch


def accumulate(loss, opt, keep=True):
    loss.backward(retain_graph=True)
    if not keep:
        opt.step()
        opt.zero_grad()
"""
PATCHED = ("import inspect\nimport textwrap\n\n\ndef configurable(fn):\n"
           "    text = textwrap.dedent(inspect.getsource(fn))\n"
           "    text = '\\n' * (fn.__code__.co_firstlineno - 1) + text.replace(\n"
           "        'retain_graph=True', 'retain_graph=keep')\n"
           "    scope = dict(fn.__globals__)\n"
           "    exec(compile(text, fn.__code__.co_filename, 'exec'), scope)\n"
           "    return scope[fn.__name__]\n\n\naccumulate_k = configurable(accumulate)\n")


@pytest.mark.parametrize("how", ["recompiled_at_import", "exec_by_relative_name"])
def test_a_site_whose_text_is_not_what_ran_is_never_not_needed(tmp_path, monkeypatch, how):
    """rev37b G2: a module compiles one of its functions again from its own text, patched
    (``retain_graph=keep``), under its own file name, at import, before the audit began;
    rev37a G4: a launcher exec's a patched copy of main.py compiled under the name "main.py".
    Both times the file's literal line was read for the site: "not needed", a proven 6,
    where the caller's flag matters. The text read must compile, on the site's lines, to
    the instructions that ran."""
    monkeypatch.chdir(tmp_path)

    def train(accumulate, keep):
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([w], lr=0.1)
        accumulate((torch.tanh(w) * 2).sum(), opt, keep)
        accumulate((w ** 2).sum(), opt, False)
        return w.detach()

    if how == "recompiled_at_import":
        (tmp_path / "steps_g2.py").write_text(STEPS + "\n\n" + PATCHED)
        with _imported(monkeypatch, tmp_path, "steps_g2") as steps:
            assert not torch.equal(train(steps.accumulate_k, True),
                                   train(steps.accumulate_k, False))  # the truth
            with retaincheck.audit() as report:
                train(steps.accumulate_k, True)
    else:
        (tmp_path / "main.py").write_text(STEPS)
        patched, scope = STEPS.replace("retain_graph=True", "retain_graph=keep"), {}
        exec(patched, scope)
        assert not torch.equal(train(scope["accumulate"], True),
                               train(scope["accumulate"], False))  # the truth
        with retaincheck.audit() as report:
            exec(compile(patched, "main.py", "exec"), scope)
            train(scope["accumulate"], True)
    (site,) = [c for c in report.calls if c.line == 5]
    assert site.verdict == COULD_NOT_TELL and site._unread, report.format()


def test_a_method_call_split_before_its_name_keeps_its_verdict(tmp_path):
    """rev37a G6: Python places a call split before ``.backward(`` (black's layout) from the
    method's name on, not from the call's first line; read as "no call of the line ran",
    every such literal site would be "could not tell"."""
    path = tmp_path / "split.py"
    path.write_text("import torch\n\nw = torch.ones(3, requires_grad=True)\nloss = (w * w).sum()\n"
                    "(loss\n .backward(retain_graph=True))\nresult = [w.grad]\n")
    _, report = run_fixture(path, audited=True)
    (site,) = report.calls
    assert (site.verdict, site.passed_through) == ("not needed", False), report.format()


@pytest.mark.parametrize("positions", [True, False], ids=["positions", "no_debug_ranges"])
@pytest.mark.parametrize("line", [
    "run(); (probe * 2).sum().backward(retain_graph=True)",
    "(probe * 2).sum().backward(run(), retain_graph=True)",
    "run(create_graph=(probe * 2).sum().backward(retain_graph=True) is not None)",
    "for _ in itertools.starmap(run, [()]): (probe * 2).sum().backward(retain_graph=True)",
    "((probe * 2).sum()\n         .backward(run(), retain_graph=True))",
    "(probe * 2).sum().backward(*itertools.starmap(run, [()]), retain_graph=True)",
    "@(lambda **options: operator.methodcaller('backward', None, retain_graph))("
    "retain_graph=True)\n        class Step:\n"
    "            backward = staticmethod(functools.partial(torch.autograd.backward, loss))",
    "it = itertools.starmap(run, [()])\n        total = (probe * 2).sum()\n"
    "        for _ in it: total.backward(retain_graph=True)",
    "torch.autograd.backward(itertools.chain(filter(None, itertools.starmap(run, [()])),\n"
    "                                                  [(probe * 2).sum()]), retain_graph=True)",
    "class Roots(list):\n            def __iter__(self):\n"
    "                return itertools.chain(filter(None, itertools.starmap(run, [()])),\n"
    "                                       list.__iter__(self))\n\n"
    "        torch.autograd.backward(Roots([(probe * 2).sum()]), retain_graph=True)",
    "probe_run = map(operator.attrgetter('no_such'), itertools.chain(\n"
    "            filter(None, itertools.starmap(run, [()])), itertools.repeat(None)))\n"
    "        Roots = type('Roots', (list,), {'__getattr__': functools.partial(next, probe_run)})\n"
    "        torch.autograd.backward(Roots([(probe * 2).sum()]), retain_graph=True)",
], ids=["beside", "inside", "around", "for_map", "split", "star", "decorator", "for_name",
        "roots_iterable", "roots_list_subclass", "roots_getattr"])
def test_a_call_beside_a_literal_site_may_be_the_one_that_kept_the_graph(tmp_path, monkeypatch,
                                                                         line, positions):
    """rev35a A3, rev35b NEW-2: a line that runs a partial-bound backward (a name that says
    neither backward nor grad) and a literal retain_graph=True call: the literal one was
    taken for the site's flag, and the partial's, written by the caller, went through as
    "not needed". rev36a F3: so it did inside or around the literal call. Each call of the
    line that ran (Python says which, by its place in the line) must write the literal
    True. rev37a G1: the instruction that ran may be no call (a for loop over a map); G2:
    where Python keeps no positions (-X no_debug_ranges), every call of the line must.
    rev38a H1, H2: a call's unpacking of *args, and a decorator's application, run code at
    the place of the literal call; rev39a F1: so does retaincheck's own reading of an
    iterable of roots (or inputs); rev41b X2: or its look-up of an attribute on them."""
    from retaincheck import _hooks

    if not positions:
        monkeypatch.setattr(_hooks, "_position", lambda frame: None)
    source = ("import functools\nimport itertools\nimport operator\n\nimport torch\n\n"
              "torch.manual_seed(0)\n"
              "model = torch.nn.Linear(4, 1)\nx = torch.randn(8, 4)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "probe = torch.ones(2, requires_grad=True)\n\n\n"
              "def make(retain_graph=False):\n    def step(loss):\n"
              "        run = functools.partial(loss.backward, None, retain_graph)\n"
              f"        {line}\n"
              "        if not retain_graph:\n            opt.step()\n            opt.zero_grad()\n"
              "    return step\n\n\n"
              "more, last = make(retain_graph=True), make()\nlosses = []\nfor _ in range(3):\n"
              "    first = model(x).pow(2).mean()\n    more(first)\n"
              "    second = model(x).abs().mean()\n    last(second)\n"
              "    losses += [first.detach(), second.detach()]\nresult = losses\n")
    path = tmp_path / "beside.py"
    path.write_text(source)
    baseline, _ = run_fixture(path)
    caller = "make(retain_graph=True), make()"
    without, _ = run_fixture(path, source.replace(caller, "make(), make()"))
    assert not same(without, baseline)  # the truth: the caller's flag matters
    _, report = run_fixture(path, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.passed_through, report.format()


@pytest.mark.parametrize("call", [
    "torch.autograd.backward(total.as_subclass(T), retain_graph=True)",
    "torch.autograd.grad(total.as_subclass(T), [w], retain_graph=True)",
])
def test_a_pass_that_the_audits_own_reading_of_a_root_starts_is_no_run_of_the_line(tmp_path,
                                                                                  call):
    """rev41a G1, G1b: a tensor subclass whose grad_fn is a property with a C getter (a
    partial of next over a filter of methodcallers) started, when the audit read the root's
    grad_fn to hook its graph, a backward pass with the caller's flag: it was counted as a run
    of the literal line ("ran 9 times"), which was "not needed", proven, 6. A pass started
    while the audit reads a call's roots or graph is kept whatever the line writes."""
    source = ("import functools\nimport itertools\nimport operator\n\nimport torch\n\n"
              "w = torch.ones(3, requires_grad=True)\n\n\n"
              "def make(retain_graph=False):\n    def step(loss):\n"
              "        hidden = filter(operator.methodcaller('backward', None, retain_graph),"
              " [loss])\n"
              "        total = (w * 2).sum()\n"
              "        T = type('T', (torch.Tensor,), {'grad_fn': property(functools.partial(\n"
              "            next, itertools.chain(hidden, [total.grad_fn])))})\n"
              f"        {call}\n"
              "    return step\n\n\n"
              "step = make(retain_graph=True)\nfor _ in range(3):\n    step(torch.exp(w).sum())\n"
              "result = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    _, report = run_fixture(path, source, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.passed_through, report.format()


def test_a_site_in_a_module_imported_from_a_zip_is_read_through_its_loader(tmp_path,
                                                                        monkeypatch):
    """rev35a S1: a literal site in a module imported from a zip (zipapp, pex) could not be
    read ("could not tell", with no code shown), nor could the module be searched for a
    backward() that did not run. Its source comes from its loader, as Python's tracebacks
    get it."""
    import zipfile

    with zipfile.ZipFile(tmp_path / "helpers.zip", "w") as archive:
        archive.writestr("zipped_steps.py", (
            "def plain(loss):\n    loss.backward(retain_graph=True)\n\n\n"
            "def periodic(loss, step):\n    loss.backward(retain_graph=True)\n"
            "    if step % 50 == 49:\n        loss.backward()\n"))
    with _imported(monkeypatch, tmp_path / "helpers.zip", "zipped_steps") as steps:
        w = torch.ones(3, requires_grad=True)
        # (apart: a periodic() that ran after plain's site, and held a call that did not,
        # would keep plain's too: rev43d H1)
        with retaincheck.audit() as first:
            for _ in range(3):
                steps.plain(torch.tanh(w).sum())
        (plain,) = first.calls
        with retaincheck.audit() as report:
            for step in range(3):
                steps.periodic(torch.sigmoid(w).sum(), step)
        (periodic,) = report.calls
    assert (plain.code, plain.verdict) == ("loss.backward(retain_graph=True)", "not needed"), \
        first.format()
    assert periodic.verdict == COULD_NOT_TELL and periodic.unseen_calls[0].endswith(":8")


@pytest.mark.parametrize("through", ["subclass", "mode"])
def test_a_torch_function_that_sees_the_flag_keeps_the_site(tmp_path, through):
    """rev36a F1, F2: a tensor subclass's __torch_function__ that steps the optimizer after
    the last backward of a step (when retain_graph is unset), a TorchFunctionMode that logs
    each backward's options: both see the flag, and removing it changes what they do, which
    turning graph-keeping off at run time (the gate's rerun) does not show; it exited 6."""
    hook = {
        "subclass": ("class Loss(torch.Tensor):\n    @classmethod\n"
                     "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                     "        kwargs = kwargs or {}\n"
                     "        out = super().__torch_function__(func, types, args, kwargs)\n"
                     "        keep = kwargs.get('retain_graph')\n"
                     "        if func is torch.Tensor.backward and not keep:\n"
                     "            opt.step()\n            opt.zero_grad()\n        return out\n\n\n"
                     "def wrap(t):\n    return t.as_subclass(Loss)\n\n\n"
                     "def watch():\n    return contextlib.nullcontext()\n"),
        "mode": ("class Count(TorchFunctionMode):\n"
                 "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
                 "        kwargs = kwargs or {}\n"
                 "        if getattr(func, '__name__', '') == 'backward':\n"
                 "            seen.append(bool(kwargs.get('retain_graph')))\n"
                 "        return func(*args, **kwargs)\n\n\n"
                 "def wrap(t):\n    return t\n\n\ndef watch():\n    return Count()\n"),
    }[through]
    source = ("import contextlib\n\nimport torch\nfrom torch.overrides import TorchFunctionMode\n\n"
              "torch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1)\nx = torch.randn(8, 4)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nseen = []\n\n\n" + hook +
              "\n\nlosses = []\nfor _ in range(3):\n    with watch():\n"
              "        first = wrap(model(x).pow(2).mean())\n"
              "        first.backward(retain_graph=True)\n"
              "        second = wrap(model(x).abs().mean())\n        second.backward()\n"
              "    losses += [first.item(), second.item()]\n"
              "result = [torch.tensor(losses), torch.tensor(seen)]\n")
    _kept_though_it_matters(tmp_path / f"{through}.py", source)
