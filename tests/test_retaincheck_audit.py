"""retaincheck.audit(): verdicts, bytes, leaks, and that it never changes results.

Every verdict on a fixture is checked against ground truth: the same script with that one
``retain_graph=True`` turned into ``retain_graph=False``. If the audit says "not needed", that
script must run and give bit-identical results; if it says "needed", that script must fail with
PyTorch's "backward through the graph a second time" error.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import sys
from pathlib import Path

import pytest
import snippetcheck
import torch

import retaincheck

FIXTURES = Path(__file__).parent / "fixtures" / "retaincheck"

# fixture -> [(needed, history_leak), ...] per call site, in file-then-line order
EXPECTED = {
    "article_example_1.py": [(False, False)],
    "article_example_3.py": [(False, False)],
    "article_example_4.py": [(False, False)],
    "two_losses.py": [(True, False)],
    "shared_subgraph.py": [(True, False)],
    "repeated_grad.py": [(True, False)],
    "gradient_penalty.py": [(True, False)],
    "double_backward_only.py": [(False, False)],
    "jacobian_rows.py": [(True, False)],
    "gan_step.py": [(True, False)],
    "rnn_leak.py": [(True, True)],
    "rnn_detached.py": [(False, False)],
    "no_saved_tensors.py": [(False, False)],
    "no_retain.py": [],
    "generator_roots.py": [(True, False)],  # roots given as a one-shot map(...)
    "hook_reentrant.py": [(True, False)],  # reused by a hook while the call still runs
    # the reuse executes only SumBackward0, which saves no tensor: freeing changes nothing
    "reuse_without_saved_tensors.py": [(False, False)],
}


def test_every_fixture_has_an_expectation():
    assert sorted(p.name for p in FIXTURES.glob("*.py")) == sorted(EXPECTED)


def run_script(path: Path, audited: bool):
    """Run a script in this process, seeded; return (its globals, report or None)."""
    torch.manual_seed(0)
    if not audited:
        return runpy.run_path(str(path), run_name="__main__"), None
    with retaincheck.audit() as report:
        result = runpy.run_path(str(path), run_name="__main__")
    return result, report


def results_of(namespace: dict) -> dict[str, torch.Tensor]:
    """Every tensor a script left behind, every parameter, and all their gradients."""
    out = {}
    for name, value in namespace.items():
        if isinstance(value, torch.Tensor):
            out[name] = value.detach()
            if value.is_leaf and value.grad is not None:
                out[name + ".grad"] = value.grad
        elif isinstance(value, torch.nn.Module):
            for pname, p in value.named_parameters():
                out[f"{name}.{pname}"] = p.detach()
                out[f"{name}.{pname}.grad"] = p.grad
        elif isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
            for i, t in enumerate(value):
                out[f"{name}[{i}]"] = t.detach()
    return out


def assert_identical(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        if a[key] is None or b[key] is None:
            assert a[key] is None and b[key] is None, key
        else:
            assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdicts(name):
    _, report = run_script(FIXTURES / name, audited=True)
    got = [(c.needed, c.history_leak) for c in report.calls]
    assert got == EXPECTED[name], report.format()
    for call in report.calls:
        assert call.file.endswith(name) and "retain_graph=True" in _statement(FIXTURES / name, call)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_results_are_identical_with_and_without_the_audit(name):
    plain, _ = run_script(FIXTURES / name, audited=False)
    audited, _ = run_script(FIXTURES / name, audited=True)
    assert_identical(results_of(plain), results_of(audited))


def _statement(path: Path, call) -> str:
    """The source of the call: from its line up to the line holding its closing parenthesis."""
    lines = path.read_text(encoding="utf-8").splitlines()
    text, depth = "", 0
    for line in lines[call.line - 1 :]:
        text += line + "\n"
        depth += line.count("(") - line.count(")")
        if depth <= 0:
            break
    return text


def _without_retain(path: Path, call, tmp_path: Path) -> Path:
    """A copy of the script where this call site says retain_graph=False."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for i in range(call.line - 1, len(lines)):
        if "retain_graph=True" in lines[i]:
            lines[i] = lines[i].replace("retain_graph=True", "retain_graph=False")
            break
    else:
        raise AssertionError(f"no retain_graph=True at or after {call.site}")
    copy = tmp_path / path.name
    copy.write_text("".join(lines), encoding="utf-8")
    return copy


@pytest.mark.parametrize("name", sorted(n for n, calls in EXPECTED.items() if calls))
def test_verdicts_agree_with_running_the_script_without_the_retain(name, tmp_path):
    """The ground truth: "not needed" means the script works, identically, without it."""
    original = FIXTURES / name
    _, report = run_script(original, audited=True)
    plain, _ = run_script(original, audited=False)
    for call in report.calls:
        copy = _without_retain(original, call, tmp_path)
        if call.needed:
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                run_script(copy, audited=False)
        else:
            without, _ = run_script(copy, audited=False)
            assert_identical(results_of(plain), results_of(without))


def test_a_call_site_in_a_loop_is_one_record():
    _, report = run_script(FIXTURES / "jacobian_rows.py", audited=True)
    (call,) = report.calls
    assert call.executions == 3 and call.kind == "grad"
    assert call.reused_by == [call.site]
    _, report = run_script(FIXTURES / "rnn_leak.py", audited=True)
    (call,) = report.calls
    assert call.executions == 4 and call.history_leak
    assert "detach" in call.suggestion and call.verdict.startswith("needed only because")


def test_the_suggestions_name_the_fix():
    def suggestion(name):
        return run_script(FIXTURES / name, audited=True)[1].calls[0].suggestion

    assert suggestion("article_example_1.py").startswith("remove retain_graph=True")
    assert "sum the losses" in suggestion("two_losses.py")
    assert "all the inputs in one call" in suggestion("repeated_grad.py")
    assert "is_grads_batched" not in suggestion("repeated_grad.py")
    assert "is_grads_batched" not in suggestion("jacobian_rows.py")  # other outputs each row
    assert "retain_graph=False" in suggestion("double_backward_only.py")
    assert "h.detach()" in suggestion("rnn_leak.py")


def test_bytes_count_each_storage_once_and_leave_out_parameters():
    torch.manual_seed(0)
    x = torch.randn(1000, requires_grad=True)  # a leaf: not counted
    inputs = torch.randn(1000)
    with retaincheck.audit() as report:
        y = (x * inputs).exp()  # MulBackward saves x (leaf) and inputs; ExpBackward saves y
        z = (y * y).sum()  # saves y twice: the same storage, counted once
        z.backward(retain_graph=True)
    (call,) = report.calls
    assert call.retained_bytes == 1000 * 4 + 1000 * 4  # inputs + y

    lin = torch.nn.Linear(100, 50)
    batch = torch.randn(8, 100)
    with retaincheck.audit() as report:
        lin(batch).relu().sum().backward(retain_graph=True)
    (call,) = report.calls
    # addmm saves the batch (weight.t() is the parameter's storage); relu saves its output
    assert call.retained_bytes == 8 * 100 * 4 + 8 * 50 * 4


def test_no_saved_tensors_means_zero_bytes_and_an_empty_script_an_empty_report():
    _, report = run_script(FIXTURES / "no_saved_tensors.py", audited=True)
    assert [c.retained_bytes for c in report.calls] == [0]
    _, report = run_script(FIXTURES / "no_retain.py", audited=True)
    assert report.calls == [] and report.to_dict() == {
        "completed": True, "stopped_by": None, "total_retained_bytes": 0,
        "backward_calls": report.backward_calls, "calls": [],
    }
    assert report.backward_calls == 3  # no_retain.py's three backward() calls
    assert "no backward() or autograd.grad() call used retain_graph=True" in report.format()


def test_a_name_bound_before_the_audit_is_seen_at_the_engine():
    """A reuse through a name bound before the audit counts and is named (issue 27: the audit
    stands in front of Variable._execution_engine.run_backward)."""
    from torch.autograd import grad as bound_early

    x = torch.randn(3, requires_grad=True)
    with retaincheck.audit() as report:
        y = (x * x).exp().sum()
        y.backward(retain_graph=True)
        line = sys._getframe().f_lineno + 1
        bound_early(y, x)
    assert [(c.needed, c.reused_by) for c in report.calls] == [
        (True, [f"tests/test_retaincheck_audit.py:{line}"])
    ]
    assert report.backward_calls == 2


def test_the_call_site_is_the_users_line():
    x = torch.randn(3, requires_grad=True)
    y = (x * 2).exp().sum()
    with retaincheck.audit() as report:
        line = sys._getframe().f_lineno + 1
        torch.autograd.backward(y, retain_graph=True)
        y.backward()
    (call,) = report.calls
    assert call.line == line and call.file.endswith("test_retaincheck_audit.py")
    assert call.function == "test_the_call_site_is_the_users_line"
    assert call.code == "torch.autograd.backward(y, retain_graph=True)"
    assert call.needed and call.kind == "backward"


def test_everything_is_restored_also_when_the_block_raises():
    backward, grad, tensor_backward = (
        torch.autograd.backward,
        torch.autograd.grad,
        torch.Tensor.backward,
    )
    x = torch.randn(3, requires_grad=True)
    y = (x * 2).exp().sum()
    with pytest.raises(ZeroDivisionError):
        with retaincheck.audit() as report:
            assert torch.autograd.backward is not backward  # patched inside
            y.backward(retain_graph=True)
            raise ZeroDivisionError("the block fails")
    assert torch.autograd.backward is backward and torch.autograd.grad is grad
    assert torch.Tensor.backward is tensor_backward
    # The hooks are gone: a later reuse outside the block changes nothing.
    assert report.calls[0].needed is False
    y.backward()
    assert report.calls[0].needed is False
    assert "retaincheck" not in y.grad_fn.metadata
    assert "retaincheck" not in y.grad_fn.next_functions[0][0].metadata


def test_audits_do_not_nest():
    with retaincheck.audit():
        with pytest.raises(RuntimeError, match="do not nest"):
            with retaincheck.audit():
                pass
    with retaincheck.audit() as report:  # and the failed attempt left nothing behind
        pass
    assert report.calls == []


@pytest.mark.proof  # .ci/run only: 3 s of CPU (it imports the whole package and libcst)
def test_importing_retaincheck_patches_nothing():
    """In a process that has not imported retaincheck (a fork of the snippets' warm
    interpreter, which has imported only torch), importing it changes none of the functions
    an audit patches."""
    code = (
        "import sys\n"
        "import torch\n"
        "assert not any(m.split('.')[0] == 'retaincheck' for m in sys.modules)\n"
        "before = (torch.autograd.backward, torch.autograd.grad, torch.Tensor.backward,\n"
        "          torch.autograd.graph._engine_run_backward)\n"
        "import retaincheck, retaincheck.__main__\n"
        "after = (torch.autograd.backward, torch.autograd.grad, torch.Tensor.backward,\n"
        "         torch.autograd.graph._engine_run_backward)\n"
        "assert all(a is b for a, b in zip(before, after))\n"
        "print('ok')\n"
    )
    run = snippetcheck.run_code(code)
    assert run.returncode == 0 and run.stdout == "ok\n", run.stderr


def test_roots_given_as_a_gradient_edge_are_walked():
    from torch.autograd.graph import get_gradient_edge

    x = torch.randn(3, requires_grad=True)
    with retaincheck.audit() as report:
        y = x.exp().sum()
        torch.autograd.backward(get_gradient_edge(y), torch.ones(()), retain_graph=True)
        y.backward()
    assert [c.needed for c in report.calls] == [True]


def test_inputs_given_as_a_dict_reach_torch_as_they_were_given():
    """torch (2.13 on) takes the values of a dict given as ``inputs`` and returns a dict of
    gradients (``torch.autograd.grad``, ``torch/autograd/__init__.py``); the audit, which
    made a tuple of every other kind of inputs, passed on the keys and the program raised."""
    def run():
        x = torch.ones(3, requires_grad=True)
        y = (x * x).sum()
        grads = torch.autograd.grad(y, {"x": x}, retain_graph=True)
        y.backward(inputs={"x": x})
        return grads, x.grad

    try:
        plain = run()
    except (TypeError, RuntimeError) as error:  # a torch before dict inputs
        pytest.skip(f"this torch takes no dict as inputs: {error}")
    with retaincheck.audit() as report:
        audited = run()
    assert audited[0].keys() == plain[0].keys() == {"x"}
    assert torch.equal(audited[0]["x"], plain[0]["x"]) and torch.equal(audited[1], plain[1])
    assert [c.needed for c in report.calls] == [True]


def test_a_reuse_during_the_retaining_call_through_an_unseen_name_counts():
    """The nested walk goes through a name bound early: the engine entry sees it and names it."""
    from torch.autograd import grad as bound_early

    x = torch.randn(4, requires_grad=True)
    seen = []

    def hook(g):
        if not seen:  # the nested call runs this hook too
            seen.append(None)
            seen[0] = bound_early(loss, x)

    with retaincheck.audit() as report:
        a = x.exp()
        loss = (a * a).sum()
        x.register_hook(hook)
        loss.backward(retain_graph=True)
    nested = hook.__code__.co_firstlineno + 3
    assert [(c.needed, c.reused_by) for c in report.calls] == [
        (True, [f"tests/test_retaincheck_audit.py:{nested}"])
    ]


def test_the_call_s_own_pass_does_not_count():
    x = torch.randn(4, requires_grad=True)
    with retaincheck.audit() as report:
        for _ in range(3):
            loss = (x.exp() * x).sum()
            loss.backward(retain_graph=True)
    (call,) = report.calls
    assert (call.executions, call.needed, call.history_leak) == (3, False, False)


def test_a_retaining_call_that_raises_did_not_complete():
    x = torch.randn(3)  # does not require grad: backward raises
    with retaincheck.audit() as report:
        with pytest.raises(RuntimeError):
            x.exp().sum().backward(retain_graph=True)
    (call,) = report.calls
    assert call.executions == 0 and call.verdict == "did not complete"
    assert "raised before it returned" in report.format()
    assert "NOT NEEDED" not in report.format() and "ran 0 times" not in report.format()
    assert call.to_dict()["verdict"] == "did not complete"


def test_frozen_parameters_and_buffers_are_counted_trainable_ones_are_not():
    x = torch.randn(100)
    frozen = torch.randn(100)  # like a frozen parameter or a buffer: no grad required
    w = torch.randn(100, requires_grad=True)
    with retaincheck.audit() as report:
        ((x * frozen).exp() * w).sum().backward(retain_graph=True)
    (call,) = report.calls
    # ExpBackward0 keeps its result e (400 bytes); Mul(e, w) keeps e and w: w is a trainable
    # leaf, not counted.
    assert call.retained_bytes == 400
    with retaincheck.audit() as report:
        (frozen * w).exp().sum().backward(retain_graph=True)
    (call,) = report.calls
    # Mul(frozen, w) keeps frozen (counted) and w (not); Exp keeps its result (counted).
    assert call.retained_bytes == 400 + 400


def _later_site(y):
    y.backward(retain_graph=True)  # an earlier line than the call in the test below


def test_sites_are_listed_in_file_then_line_order_in_text_and_json():
    x = torch.randn(3, requires_grad=True)
    with retaincheck.audit() as report:
        z = x.exp().sum()
        z.backward(retain_graph=True)  # runs first, but its line comes after _later_site's
        _later_site(x.sin().sum())
    lines = [c.line for c in report.calls]
    assert lines == sorted(lines) and len(lines) == 2
    assert [c["line"] for c in report.to_dict()["calls"]] == lines
    text = report.format()
    assert text.index(f":{lines[0]} ") < text.index(f":{lines[1]} ")


def test_the_text_report_starts_with_an_empty_line_and_sizes_read_in_kib_and_mib():
    from retaincheck._sizes import human

    assert (human(232), human(3584), human(5 * 1024 * 1024 + 1000)) == (
        "232 bytes", "3.5 KiB", "5.0 MiB"
    )
    x = torch.randn(896, requires_grad=True)
    with retaincheck.audit() as report:
        x.exp().sum().backward(retain_graph=True)
    text = report.format()
    assert text.startswith("\nretaincheck: 1 call site")
    assert "kept:    3.5 KiB of saved tensors" in text  # ExpBackward0's result: 896 * 4 bytes
    assert report.to_dict()["calls"][0]["retained_bytes"] == 3584  # exact bytes in JSON
    with retaincheck.audit() as empty:
        pass
    assert empty.format().startswith("\nretaincheck: no backward()")


@pytest.mark.parametrize(
    ("exc", "completed", "stopped_by"),
    [
        (KeyboardInterrupt(), False, "KeyboardInterrupt"),
        (SystemExit(3), False, "SystemExit(3)"),
        (SystemExit("bad config"), False, "SystemExit('bad config')"),
        (RuntimeError("boom\nsecond line"), False, "RuntimeError: boom"),
        (SystemExit(0), True, None),
        (SystemExit(None), True, None),
    ],
)
def test_a_block_that_stops_early_cannot_prove_not_needed(exc, completed, stopped_by):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(type(exc)):
        with retaincheck.audit() as report:
            x.exp().sum().backward(retain_graph=True)
            raise exc
    (call,) = report.calls
    assert (report.completed, report.stopped_by) == (completed, stopped_by)
    data = report.to_dict()
    assert (data["completed"], data["stopped_by"]) == (completed, stopped_by)
    assert call.needed is False
    if completed:
        assert call.verdict == "not needed" and "stopped early" not in report.format()
    else:
        so_far = "not needed so far (run stopped early)"
        assert call.verdict == data["calls"][0]["verdict"] == so_far
        assert "run the script to completion" in call.suggestion
        assert f"stopped early ({stopped_by})" in report.format().splitlines()[1]


def test_mark_stopped_is_for_code_that_catches_the_exception_itself():
    x = torch.randn(3, requires_grad=True)
    with retaincheck.audit() as report:
        try:
            x.exp().sum().backward(retain_graph=True)
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            report.mark_stopped(exc)
    assert report.calls[0].verdict == "not needed so far (run stopped early)"
    assert report.stopped_by == "KeyboardInterrupt"


def test_grad_with_non_leaf_inputs_never_frees_the_graph_behind_them():
    """autograd.grad(loss, feat) executes only the nodes between loss and feat (exec_info_):
    ExpBackward0 behind feat is neither run nor freed, so a later pass through it works."""
    w = torch.randn(100, requires_grad=True)
    with retaincheck.audit() as report:
        feat = w.exp()  # ExpBackward0 saves feat: behind the inputs of the grad() below
        loss = (feat * feat).sum()
        (g,) = torch.autograd.grad(loss, feat, retain_graph=True)
        feat.sum().backward()  # runs ExpBackward0 (never run before), not MulBackward0
    (call,) = report.calls
    assert (call.needed, call.verdict) == (False, "not needed")
    assert call.retained_bytes == 400  # what grad() ran and would have freed: Mul's feat
    # the truth: without the flag, the same calls work and give the same gradient
    w2 = w.detach().clone().requires_grad_(True)
    feat2 = w2.exp()
    (g2,) = torch.autograd.grad((feat2 * feat2).sum(), feat2, retain_graph=False)
    feat2.sum().backward()
    assert torch.equal(g, g2) and torch.equal(w.grad, w2.grad)


def test_peak_bytes_count_only_retained_graphs_still_alive():
    x = torch.randn(1000, requires_grad=True)  # a trainable leaf: not counted
    with retaincheck.audit() as report:
        kept = []
        for _ in range(3):
            loss = x.exp().sum()  # ExpBackward0 saves its result: 4000 bytes
            loss.backward(retain_graph=True)
            kept.append(loss)  # every graph stays alive
    (call,) = report.calls
    got = (call.retained_bytes, call.peak_bytes, report.total_retained_bytes)
    assert got == (4000, 12000, 12000)
    with retaincheck.audit() as report:
        for _ in range(3):
            loss = x.exp().sum()  # the previous graph dies here
            loss.backward(retain_graph=True)
    (call,) = report.calls
    got = (call.retained_bytes, call.peak_bytes, report.total_retained_bytes)
    assert got == (4000, 4000, 4000)
    assert "4000 bytes" not in report.format() and "3.9 KiB at most at once" in report.format()


def test_a_functions_locals_the_program_kept_stay_as_they_were():
    """The audit reads the locals of the functions on the way (a loop over a graph made
    before it) and empties the copy Python keeps of them, which would keep the last graph
    alive (above). A copy the program itself holds, `saved = locals()`, is neither emptied
    nor brought up to date (rev52a L2: `json.dumps(hparams)` met itself in it)."""
    x = torch.randn(3, requires_grad=True)

    def step():
        saved = locals()
        loss = x.exp().sum()
        loss.backward(retain_graph=True)
        return saved

    with retaincheck.audit() as report:
        saved = step()
    assert report.calls and sorted(saved) == ["x"]


def test_reading_the_locals_on_the_way_changes_nothing_the_program_sees():
    """rev52a L2, L3, rev52b E1, E2: what the audit reads of the frames on the way to a site
    (their locals, for the loop rule) must not show: a name an `exec` put in a function's
    namespace stays; a line hook's function keeps its locals (Python writes the hook's view
    of them back); a tensor subclass's __torch_function__ sees no read of `grad_fn`."""
    import sys

    x = torch.randn(3, requires_grad=True)

    def configured():
        exec("scale = 2.0")
        (x * 3).sum().backward(retain_graph=True)
        return locals()["scale"]

    def traced():
        a = 5
        b = a + 1
        return a, b

    def tracer(frame, event, arg):
        if event == "line" and frame.f_code is traced.__code__ and frame.f_lineno == (
                traced.__code__.co_firstlineno + 2):
            (x * 2).sum().backward(retain_graph=True)
        return tracer

    class Counting(torch.Tensor):
        calls: list = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    seen: list = []

    class Watched(dict):  # (a container of the program's that logs each read of it)
        def values(self):
            seen.append("values")
            return super().values()

    def batch():
        feats = Watched(h=(x * 5).tanh())
        (x * 6).sum().backward(retain_graph=True)
        return feats

    def counted():
        y = torch.ones(3).as_subclass(Counting) * x  # a subclass tensor with a graph
        Counting.calls.clear()
        (x * 4).sum().backward(retain_graph=True)
        return list(Counting.calls), y.shape

    with retaincheck.audit() as report:
        scale = configured()
        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            pair = traced()
        finally:
            sys.settrace(previous)
        calls, _ = counted()
        batch()
    assert len(report.calls) == 4
    assert (scale, pair, calls, seen) == (2.0, (5, 6), [], [])


def test_a_storage_two_sites_keep_counts_in_each_site_and_once_in_the_total():
    x = torch.randn(1000, requires_grad=True)
    with retaincheck.audit() as report:
        h = x.exp()  # ExpBackward0 saves h
        loss_a = h.sum()
        loss_b = (h * h).sum()  # MulBackward0 saves h twice: the same storage
        loss_a.backward(retain_graph=True)
        loss_b.backward(retain_graph=True)
        del loss_a
    first, second = report.calls
    assert (first.retained_bytes, second.retained_bytes) == (4000, 4000)
    assert (first.needed, second.needed) == (True, False)
    assert report.total_retained_bytes == 4000  # h, counted once
    assert "each storage counted once" in report.format()


def test_a_freed_node_without_saved_tensors_does_not_make_a_retain_needed():
    """Only a freed *saved tensor* raises (SavedVariable::unpack); SumBackward0 saves none."""
    x = torch.randn(4, requires_grad=True)
    with retaincheck.audit() as report:
        h = x.exp()
        s = h + 1  # AddBackward0: no saved tensors
        s.sum().backward(retain_graph=True)
        (s * 1.0).sum().backward()  # walks AddBackward0 and ExpBackward0 again
        t = x.sin() + 1
        t.sum().backward(retain_graph=True)
        torch.autograd.grad(t.sum(), t)  # walks only SumBackward0: no saved tensors
    first, second = report.calls
    assert (first.needed, second.needed) == (True, False)


def test_parameters_passed_as_a_generator_still_reach_torch():
    # grad(loss, model.parameters(), retain_graph=True) is common (GradNorm, PCGrad): the audit
    # reads the inputs, and must hand torch the same tensors, not an exhausted generator.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    x = torch.randn(5, 3)
    expected = torch.autograd.grad(model(x).pow(2).mean(), list(model.parameters()))
    with retaincheck.audit() as report:
        loss = model(x).pow(2).mean()
        got = torch.autograd.grad(loss, model.parameters(), retain_graph=True)
        loss.backward()
    assert len(got) == 4 and all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    (call,) = report.calls
    assert call.verdict == "needed"


def test_one_gradient_per_class_through_one_output_is_not_told_to_sum():
    # Grad-CAM for the top classes: backward(gradient=one_hot, retain_graph=True) once per
    # class on one output, the gradients read in between: summing would lose them.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    image = torch.randn(1, 3, requires_grad=True)
    with retaincheck.audit() as report:
        scores = model(image)
        maps = []
        for k in range(3):
            image.grad = None
            scores.backward(gradient=torch.nn.functional.one_hot(torch.tensor([k]), 3).float(),
                            retain_graph=True)
            maps.append(image.grad.clone())
    (call,) = report.calls
    assert call.verdict == "needed"
    assert "sum the losses" not in call.suggestion and "detach" not in call.suggestion
    assert "is_grads_batched=True" in call.suggestion


def _backward_in_child(loss):
    """A forked child's target: 0 when its backward() walked the graph, 3 when it was freed."""
    try:
        loss.backward()
    except RuntimeError as exc:
        os._exit(3 if "backward through the graph a second time" in str(exc) else 4)
    os._exit(0)


def test_a_reuse_in_a_forked_child_makes_the_site_needed():
    """rev27e N2: the child's hooks record in the child's memory; they tell the parent through
    a file, so the reuse is seen. The truth: without the flag the child's backward() fails."""
    fork = multiprocessing.get_context("fork")
    codes = []
    for retain in (True, False):
        with retaincheck.audit() as report:
            x = torch.ones(4, requires_grad=True)
            loss = x.exp().sum()
            loss.backward(retain_graph=retain)
            child = fork.Process(target=_backward_in_child, args=(loss,))
            child.start()
            child.join(timeout=60)
            codes.append(child.exitcode)
        if retain:
            (call,) = report.calls
            assert (call.verdict, call.reused_by) == ("needed", ["a forked child process"])
    assert codes == [0, 3]


def test_a_forked_child_still_running_at_the_end_means_could_not_tell():
    read, write = os.pipe()
    with retaincheck.audit() as report:
        x = torch.ones(4, requires_grad=True)
        loss = x.exp().sum()
        loss.backward(retain_graph=True)
        pid = os.fork()
        if pid == 0:  # waits until the parent closes the pipe, then leaves without cleanup
            os.close(write)
            os.read(read, 1)
            os._exit(0)
    os.close(read)
    os.close(write)
    os.waitpid(pid, 0)
    (call,) = report.calls
    assert (call.verdict, call.running_children) == ("could not tell: kept", [pid])
    assert f"a child process forked during the run (pid {pid}) was still running" in \
        report.format()


def test_site_packages_inside_the_standard_librarys_folder_is_still_searched(monkeypatch):
    """pyenv, python.org's builds and the python Docker image put site-packages inside the
    standard library's folder (lib/python3.X/site-packages): its packages were taken for the
    standard library's and never searched for saved-tensor reads, so an installed helper that
    read grad_fn._saved_result left the site "not needed" (found in review, rev30)."""
    import sysconfig

    from retaincheck import _reads

    lib = os.path.join(os.sep, "opt", "py", "lib", "python3.X")
    paths = {"stdlib": lib, "platstdlib": lib, "purelib": os.path.join(lib, "site-packages"),
             "platlib": os.path.join(lib, "site-packages")}
    monkeypatch.setattr(sysconfig, "get_paths", lambda: paths)
    monkeypatch.setattr(_reads, "_dirs", None)
    monkeypatch.setattr(_reads, "_kinds", {})
    assert _reads._kind(os.path.join(lib, "site-packages", "helper", "__init__.py")) == 1
    assert _reads._kind(os.path.join(lib, "json", "__init__.py")) == 0  # the standard library
    assert _reads._kind(torch.__file__) == 0 and _reads._kind(retaincheck.__file__) == 0
    assert _reads._kind(os.path.join(os.sep, "home", "me", "train.py")) == 2


class _Tagged(torch.Tensor):
    """A metadata tensor subclass (MONAI's MetaTensor pattern): every op, backward included,
    passes through its __torch_function__."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_tensor_subclass_leaves_the_site_where_the_flag_is_written():
    """rev34b F6: a loss of a tensor subclass reached backward() through the subclass's
    __torch_function__, which was taken for the site, named at the subclass's line. The site
    is the line that wrote the flag; and as the __torch_function__ sees the flag and may act
    on it (rev36a F1, F2: test_retaincheck_truth), "could not tell", saying so."""
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        loss = torch.tanh(w * torch.arange(3.0).as_subclass(_Tagged)).sum()
        assert type(loss) is _Tagged
        loss.backward(retain_graph=True)
    (call,) = report.calls
    assert call.code == "loss.backward(retain_graph=True)", report.format()
    assert (call.verdict, call.passed_through) == ("could not tell: kept", True)
    assert "the call went through a __torch_function__" in report.format()


def test_torchs_own_torch_function_modes_do_not_keep_a_site():
    """rev37a S2: torch.set_default_device (and ``with torch.device(...)``) runs every call
    through torch's DeviceContext, a TorchFunctionMode, and every literal site became "could
    not tell". A __torch_function__ of torch's own is not counted, as none reads
    retain_graph: no file of the installed torch that defines one names it (overrides.py
    lists Tensor.backward's signature; _tensor.py is Tensor.backward itself)."""
    root = os.path.dirname(torch.__file__)
    readers = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                if "def __torch_function__" in text and "retain_graph" in text:
                    readers.append(os.path.relpath(path, root))
    assert sorted(r for r in readers if not r.startswith("testing")) == [
        "_tensor.py", "overrides.py"]
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report, torch.device("cpu"):
        torch.tanh(w).sum().backward(retain_graph=True)
    (call,) = report.calls
    assert call.verdict == "not needed", report.format()


def test_a_profiler_that_sees_the_flag_keeps_the_site():
    """rev37a G7: a profile function that logs the options backward was called with prints
    another line without the flag; turning graph-keeping off at run time (the plugin's gate)
    does not show that. A profile or trace function of the program's, at a retaining call,
    makes the site "could not tell"; coverage.py's tracer does not."""
    import sys

    seen = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "backward":
            seen.append(frame.f_locals.get("retain_graph"))

    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        sys.setprofile(profile)
        try:
            torch.tanh(w).sum().backward(retain_graph=True)
        finally:
            sys.setprofile(None)
        torch.exp(w).sum().backward(retain_graph=True)  # (no profiler here)
    assert True in seen  # the truth: it saw the flag
    watched, plain = report.calls
    assert (watched.verdict, watched.passed_through) == ("could not tell: kept", True)
    assert "a profile or trace function of the program's" in report.format()
    assert plain.verdict == "not needed", report.format()
    # cProfile counts calls and times them: it does not count (rev38b C1)
    import cProfile

    profiler = cProfile.Profile()
    with retaincheck.audit() as report:
        profiler.enable()
        try:
            torch.tanh(w).sum().backward(retain_graph=True)
        finally:
            profiler.disable()
    (profiled,) = report.calls
    assert profiled.verdict == "not needed", report.format()


@pytest.mark.proof  # torch.compile's first run takes seconds
def test_a_step_under_torch_compile_is_read_from_its_file(tmp_path, monkeypatch):
    """rev38a S3: a training step under @torch.compile ran as the code dynamo rewrote, which
    the file's text does not compile to: "cannot be read". The code it was rewritten from
    is what the file must compile to (torch/_dynamo/utils.py, orig_code_map)."""
    (tmp_path / "compiled_step.py").write_text(
        "import torch\n\n\n@torch.compile(backend='eager')\ndef step(w):\n"
        "    loss = torch.tanh(w).sum()\n    loss.backward(retain_graph=True)\n"
        "    return loss.detach()\n")
    import importlib

    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("compiled_step")
        w = torch.ones(3, requires_grad=True)
        with retaincheck.audit() as report:
            for _ in range(2):
                module.step(w)
    finally:
        sys.modules.pop("compiled_step", None)  # (no later audit searches it)
        torch._dynamo.reset()
    (call,) = report.calls
    assert (call.verdict, call.code) == ("not needed", "loss.backward(retain_graph=True)"), \
        report.format()


@pytest.mark.proof  # torch.profiler takes 2 s to start
def test_torchs_profiler_does_not_keep_a_site():
    """rev38a S1: torch.profiler's stack recorder (with_stack=True) is a profile function too,
    which records which functions ran, not their arguments: it does not count."""
    import sys

    from torch.profiler import ProfilerActivity, profile

    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report, profile(activities=[ProfilerActivity.CPU],
                                                with_stack=True):
        assert type(sys.getprofile()).__name__ == "TraceContext"
        torch.tanh(w).sum().backward(retain_graph=True)
    (profiled,) = report.calls
    assert profiled.verdict == "not needed", report.format()


def test_two_copies_of_a_helper_are_two_sites(tmp_path, monkeypatch):
    """rev34a K2: the same function in helpers_a.py and helpers_b.py compiles to code objects
    that compare equal (their file names aside), and the two sites were merged under the
    first one's name: the second was never reported, nor fixed."""
    import importlib
    import sys

    for name in ("copy_a", "copy_b"):
        (tmp_path / f"{name}.py").write_text(
            "def step(loss):\n    loss.backward(retain_graph=True)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    a, b = importlib.import_module("copy_a"), importlib.import_module("copy_b")
    del sys.modules["copy_a"], sys.modules["copy_b"]  # the functions are enough
    assert a.step.__code__ == b.step.__code__  # what the audit must not rely on
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        a.step(torch.tanh(w).sum())
        b.step(torch.sigmoid(w).sum())
    assert sorted(os.path.basename(c.file) for c in report.calls) == ["copy_a.py", "copy_b.py"]


def test_an_audit_after_a_spy_kept_an_earlier_audits_wrapper_still_sees_every_call(
        monkeypatch):
    """After a spy wrapped torch.autograd.grad during one audit (a session fixture: rev34b
    F9), torch.autograd.grad is that spy for good; the next audit took the spy for the
    frame on the way to the engine, and a reuse through a name bound before any audit (the
    real grad) went unseen: the site would have been "not needed"."""
    real_grad = torch.autograd.grad
    monkeypatch.setattr(torch.autograd, "grad", torch.autograd.grad)  # put back after
    with retaincheck.audit():
        inner = torch.autograd.grad

        def spy(*args, **kwargs):
            return inner(*args, **kwargs)

        torch.autograd.grad = spy
    assert torch.autograd.grad is spy  # the spy stays, with the audit's wrapper inside
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        y = torch.exp(w).sum()
        real_grad(y, w, retain_graph=True)
        real_grad(y, w)
    (call,) = report.calls
    assert call.verdict == "needed", report.format()


def test_two_texts_compiled_under_one_name_are_not_read_for_either(tmp_path):
    """rev35a A2, rev35b NEW-3: two generated helpers compiled under one file name; the site
    is in the first (retain_graph=keep), and the rule read the last one compiled, whose line
    3 holds a literal True: "not needed". Which text ran cannot be told: "could not tell"."""
    name = str(tmp_path / "_generated_steps.py")  # no such file
    first = "def first(loss, keep):\n    # keep comes from the caller\n" \
            "    loss.backward(retain_graph=keep)\n"
    second = "def second(loss):\n    # a literal one\n    loss.backward(retain_graph=True)\n"
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        scope: dict = {}
        exec(compile(first, name, "exec"), scope)
        exec(compile(second, name, "exec"), scope)
        scope["first"](torch.tanh(w).sum(), True)
    (call,) = report.calls
    assert (call.verdict, call.passed_through) == ("could not tell: kept", True), \
        report.format()


def test_a_file_that_is_not_the_code_that_ran_is_not_read(tmp_path, monkeypatch):
    """rev35a A4, rev35b NEW-7: the helper's file was edited (or put back) while the run went
    on; the rule read the file as it was at the end, a literal True, for a site that had run
    retain_graph=keep. rev35b NEW-4: pytest-markdown-docs runs a fence of a module's docstring
    under the module's own file name; the rule read the module's line of that number. Either
    way: "could not tell"."""
    import importlib
    import sys

    helper = tmp_path / "edited_helper.py"
    helper.write_text("def step(loss, keep):\n    loss.backward(retain_graph=keep)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    step = importlib.import_module("edited_helper").step
    del sys.modules["edited_helper"]
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as edited:
        step(torch.tanh(w).sum(), True)
        helper.write_text("def step(loss, keep):\n    loss.backward(retain_graph=True)\n")
    module = tmp_path / "accum.py"  # its line 3 is a literal site that never runs here
    module.write_text("def probe(t):\n    # a literal one\n    t.backward(retain_graph=True)\n")
    fence = "keep = True\nw = torch.ones(3, requires_grad=True)\n" \
            "torch.exp(w).sum().backward(retain_graph=keep)\n"
    with retaincheck.audit() as docstring:
        exec(compile(fence, str(module), "exec"), {"torch": torch})
    for report in (edited, docstring):
        (call,) = report.calls
        assert (call.verdict, call.passed_through) == ("could not tell: kept", True), \
            report.format()


def test_a_read_in_a_string_compiled_under_a_python_files_name_is_seen(tmp_path):
    """rev35b NEW-4's other half: a docstring fence compiled under its module's name that
    reads a saved tensor was taken as the module's own code, which the search reads from the
    file (where there is no read): the site whose graph it read stayed "not needed"."""
    module = tmp_path / "accum2.py"
    module.write_text("def nothing():\n    return None\n")
    fence = "value = y.grad_fn._saved_result\n"
    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        y = torch.exp(w)
        y.sum().backward(retain_graph=True)
        exec(compile(fence, str(module), "exec"), {"y": y})
    (call,) = report.calls
    assert call.verdict == "could not tell: kept" and call.unseen_reads, report.format()


def test_a_script_run_by_a_relative_name_from_another_folder_is_read(tmp_path, monkeypatch):
    """rev35a S2: a launcher runs each experiment's script with os.chdir(exp) and
    runpy.run_path("train.py"); its code's file name is relative, and was looked up from the
    launcher's folder at the end: "cannot be read" for a literal site. rev37b S1: the lines
    that ran were known by the relative name only, and the later backward() "did not run"."""
    import runpy

    exp = tmp_path / "exp2"
    exp.mkdir()
    (exp / "train.py").write_text("import torch\n\nw = torch.ones(3, requires_grad=True)\n"
                                  "torch.tanh(w).sum().backward(retain_graph=True)\n"
                                  "torch.exp(w).sum().backward()\n")
    (tmp_path / "train.py").write_text("# the launcher\n")  # what "train.py" names from here
    monkeypatch.chdir(tmp_path)
    with retaincheck.audit() as report:
        os.chdir(exp)
        runpy.run_path("train.py", run_name="__main__")
        os.chdir(tmp_path)
    (call,) = report.calls
    assert (call.file, call.verdict) == ("exp2/train.py", "not needed"), report.format()


def test_two_scripts_run_by_one_relative_name_keep_their_own_lines(tmp_path, monkeypatch):
    """rev38a H6: a launcher runs exp1/main.py, then exp2/main.py, each as "main.py": the
    lines that ran in exp1 counted as exp2's, and exp2's grad() that never ran (on line 7,
    as exp1's backward() that ran) was taken for one that did: "not needed"."""
    import runpy

    head = "import torch\n\nw = torch.ones(3, requires_grad=True)\nloss = torch.tanh(w).sum()\n"
    for name, tail in (("exp1", "loss.backward(retain_graph=True)\nif True:\n"
                                "    loss.backward()\n"),
                       ("exp2", "loss.backward(retain_graph=True)\nif w.sum() > 9:\n"
                                "    torch.autograd.grad(loss, w)\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "main.py").write_text(head + tail)
    monkeypatch.chdir(tmp_path)
    with retaincheck.audit() as report:
        for name in ("exp1", "exp2"):
            os.chdir(name)
            runpy.run_path("main.py", run_name="__main__")
            os.chdir(tmp_path)
    first, second = report.calls
    assert (first.file, first.verdict) == ("exp1/main.py", "needed"), report.format()
    assert (second.file, second.verdict) == ("exp2/main.py", "could not tell: kept"), \
        report.format()


def test_a_relative_code_file_name_is_the_file_that_compiles_to_the_code(tmp_path,
                                                                         monkeypatch):
    """rev36a F5: runpy.run_path("main.py") runs a script that moves into its run folder,
    which holds an older main.py whose site line is a literal True; the relative name, taken
    from the folder at the call, named and read that copy: "not needed", and --fix rewrote
    it. The file meant is the one whose text compiles to the code that ran."""
    import runpy

    script = ("import os\n\nimport torch\n\nos.chdir('run')\n"
              "keep = True\nw = torch.ones(3, requires_grad=True)\n"
              "torch.tanh(w).sum().backward(retain_graph=keep)\n")
    (tmp_path / "main.py").write_text(script)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "main.py").write_text(script.replace("retain_graph=keep",
                                                             "retain_graph=True"))
    monkeypatch.chdir(tmp_path)
    with retaincheck.audit() as report:
        runpy.run_path("main.py", run_name="__main__")
    (call,) = report.calls
    assert (call.file, call.code) == ("main.py", "torch.tanh(w).sum().backward(retain_graph=keep)")
    assert (call.verdict, call.passed_through) == ("could not tell: kept", True), \
        report.format()
    # rev37a G3: a launcher that moved into exp/ first leaves one file the name could be, the
    # copy in exp/run/, which never ran: it too must compile to the code that ran
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp").mkdir()
    for name in ("main.py", "run"):
        os.rename(tmp_path / name, tmp_path / "exp" / name)
    with retaincheck.audit() as report:
        os.chdir("exp")
        runpy.run_path("main.py", run_name="__main__")
    (call,) = report.calls
    assert (call.verdict, call.passed_through) == ("could not tell: kept", True), \
        report.format()
    # rev37a S1: a literal main.py whose run folder holds a copy with another learning rate:
    # both compile to the site's function; the module's code that ran tells them apart
    script = ("import os\n\nimport torch\n\nos.chdir('run')\nrate = 0.1\n\n\n"
              "def step(w):\n    torch.tanh(w * rate).sum().backward(retain_graph=True)\n\n\n"
              "step(torch.ones(3, requires_grad=True))\n")
    (tmp_path / "exp" / "main.py").write_text(script)
    (tmp_path / "exp" / "run" / "main.py").write_text(script.replace("0.1", "0.05"))
    monkeypatch.chdir(tmp_path / "exp")
    with retaincheck.audit() as report:
        runpy.run_path("main.py", run_name="__main__")
    (call,) = report.calls
    assert (call.file, call.verdict) == ("main.py", "not needed"), report.format()
    # rev38a H3: a launcher that moved into exp/ first; the copy in exp/run/ differs only in a
    # function the run never calls, so both compile to what ran: the file the name named
    # when runpy compiled it is the one
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp" / "main.py").write_text(script + "\n\ndef unused():\n    return 1\n")
    (tmp_path / "exp" / "run" / "main.py").write_text(script + "\n\ndef unused():\n    return 2\n")
    with retaincheck.audit() as report:
        os.chdir("exp")
        runpy.run_path("main.py", run_name="__main__")
    (call,) = report.calls
    assert (call.file, call.verdict) == ("exp/main.py", "not needed"), report.format()
