"""``python -m retaincheck --fix``: what it removes, what it keeps and why, and that the
rewritten program computes the same gradients.

Each proof reruns the program in a new interpreter that imports torch (about 1.5 s), so the
default run keeps one proven ``--fix --write``, one refused one (the file byte-identical) and
the caught-error proof; the other proofs are marked ``proof`` and run in ``.ci/run`` (``python
-m pytest tests/test_retaincheck_fix.py --proof -m proof``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import snippetcheck
from test_retaincheck_cli import CLI_FIXTURES, cli, ctrl_c_during_the_rerun

import retaincheck
from retaincheck._fix import refusal, remove_at

FIXABLE = CLI_FIXTURES / "fixable.py"

# fixable.py after --fix --write: sites 1-3 lose retain_graph=True, nothing else changes.
FIXED = (
    FIXABLE.read_text()
    .replace(
        "loss.backward(retain_graph=True)  # the article",
        "loss.backward()  # the article",
    )
    .replace("(out, w, retain_graph = True, allow_unused=False)", "(out, w, allow_unused=False)")
    .replace("    # y is a scalar: no grad_tensors\n    retain_graph=True,\n)",
             "    # y is a scalar: no grad_tensors\n)")
)

SITE_LINES = """\
  fixable.py:12  {verb} retain_graph=True (not needed in this run; code paths it did not \
take are not checked)
  fixable.py:16  {verb} retain_graph=True (not needed in this run; code paths it did not \
take are not checked)
  fixable.py:20  {verb} retain_graph=True (not needed in this run; code paths it did not \
take are not checked)
  fixable.py:28  kept: needed (walked again by fixable.py:29)
  fixable.py:33  kept: create_graph=True retains the graph anyway (retain_graph defaults to \
create_graph), so removing retain_graph=True frees nothing; write retain_graph=False by hand
  fixable.py:38  kept: retain_graph=keep is not the literal True (other runs may pass True for \
a reason)
"""


def _copy(tmp_path: Path, source: Path = FIXABLE) -> Path:
    copy = tmp_path / source.name
    copy.write_text(source.read_text())
    return copy


def _diff_of(fix: str) -> str:
    return fix.partition("\n\n")[2]


def _assert_the_diff(diff: str) -> None:
    assert diff.startswith("--- a/fixable.py\n+++ b/fixable.py\n@@ -9,18 +9,17 @@\n")
    removed = [line for line in diff.splitlines() if line.startswith("-") and line[1:2] != "-"]
    assert removed == [
        '-loss.backward(retain_graph=True)  # the article says this "reuses" the graph',
        "-(g1,) = torch.autograd.grad(out, w, retain_graph = True, allow_unused=False)",
        "-    retain_graph=True,",
    ]


@pytest.mark.proof
def test_fix_shows_a_diff_and_changes_nothing(tmp_path):
    script = _copy(tmp_path)
    proc = cli("--fix", script.name, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert script.read_text() == FIXABLE.read_text()  # nothing written
    fix = proc.stdout[proc.stdout.index("retaincheck --fix:") :]
    head, _, diff = fix.partition("\n\n")
    first, _, sites = head.partition("\n")
    assert re.fullmatch(
        r"retaincheck --fix: 3 changes in 1 file, proven: a rerun with the changes exited 0 as "
        r"the audited run did \(\d+\.\d s\) \(not written; add --write to apply\)", first
    ), first
    assert sites + "\n" == SITE_LINES.format(verb="remove")
    _assert_the_diff(diff)


@pytest.mark.proof  # three command-line runs (5-9 s); the page's fix_example.py does one
def test_fix_write_keeps_formatting_and_the_gradients(tmp_path):
    """The default run's end-to-end --fix --write: proven by a rerun, then written."""
    script = _copy(tmp_path)
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    before = proc.stdout.splitlines()[0]  # the audited run's own print, teed
    assert before.startswith("gradients ")
    assert re.search(
        r"retaincheck --fix: wrote 3 changes in 1 file, proven: a rerun with the changes exited 0 "
        r"as the audited run did \(\d+\.\d s\)\n" + re.escape(SITE_LINES.format(verb="removed")),
        proc.stdout,
    ), proc.stdout
    _assert_the_diff(_diff_of(proc.stdout[proc.stdout.index("retaincheck --fix:") :]))
    assert script.read_text() == FIXED  # comments, spacing, blank lines: all as they were
    # Rerun: the same gradients, bit for bit (the digest of their bytes), and no site that
    # --fix could remove is left.
    rerun = cli("--json", script.name, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stderr.splitlines()[0] == before
    calls = json.loads(rerun.stdout)["calls"]
    assert [(c["line"], c["verdict"]) for c in calls] == [
        (27, "needed"), (32, "not needed"), (37, "could not tell: kept")  # retain_graph=keep
    ]
    again = cli("--fix", script.name, cwd=tmp_path).stdout
    assert "retaincheck --fix: nothing to change\n" in again and "---" not in again


def test_fix_refuses_every_site_of_a_run_that_did_not_complete(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(FIXABLE.read_text() + "raise RuntimeError('out of memory')\n")
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 1
    assert script.read_text() == FIXABLE.read_text() + "raise RuntimeError('out of memory')\n"
    fix = proc.stdout[proc.stdout.index("retaincheck --fix:") :].splitlines()
    assert fix[0] == "retaincheck --fix: nothing to change"
    assert len(fix) == 7 and all(
        line.endswith("kept: the run did not complete (exit status 1), so no verdict is final")
        for line in fix[1:]
    )


def test_fix_refuses_after_ctrl_c(tmp_path):
    script = _copy(tmp_path, CLI_FIXTURES / "interrupted.py")
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 130
    assert "kept: the run did not complete (exit status 130)" in proc.stdout
    assert script.read_text() == (CLI_FIXTURES / "interrupted.py").read_text()


def _record(**fields):
    base = dict(executions=1, needed=False, reused_by=[], history_leak=False,
                create_graph=False, verdict="not needed")
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize(
    ("fields", "completed", "reason"),
    [
        ({}, True, None),
        ({}, False, "kept: the run did not complete"),
        ({"executions": 0, "verdict": "did not complete"}, True, "kept: did not complete"),
        ({"needed": True, "reused_by": ["a.py:3"], "verdict": "needed"}, True,
         "kept: needed (walked again by a.py:3)"),
        # rc-core's CallRecord.reused_executions: a reuse in some runs keeps the site
        ({"reused_executions": 2, "executions": 5, "reused_by": ["a.py:9"]}, True,
         "kept: needed (walked again in 2 of 5 runs by a.py:9)"),
        ({"history_leak": True}, True, "kept: needed only because history leaks"),
        # as an audit records a leak: needed and reused, and the refusal says why (revzh7a)
        ({"history_leak": True, "needed": True, "reused_executions": 3, "executions": 4,
          "reused_by": ["a.py:8"], "verdict": "needed only because history leaks"}, True,
         "kept: needed only because history leaks"),
        ({"create_graph": True}, True, "kept: create_graph=True retains the graph anyway"),
        ({"verdict": "not needed so far (run stopped early)"}, True, "kept: the verdict is"),
    ],
    ids=["fix", "stopped", "raised", "needed", "reused", "leak", "leak-reused", "create-graph",
         "so-far"],
)
def test_which_verdicts_are_fixed(fields, completed, reason):
    got = refusal(_record(**fields), completed, 1)
    assert got == reason if reason is None else got.startswith(reason)


@pytest.mark.parametrize(
    ("before", "line", "after"),
    [
        ("y.backward(retain_graph=True)\n", 1, "y.backward()\n"),
        ("y.backward(g, retain_graph=True)\n", 1, "y.backward(g)\n"),
        ("y.backward(retain_graph=True, create_graph=False)\n", 1,
         "y.backward(create_graph=False)\n"),
        ("grad(out, x, retain_graph=True , allow_unused=True)\n", 1,
         "grad(out, x, allow_unused=True)\n"),
        ("y.backward(\n    retain_graph=True,\n)\n", 1, "y.backward()\n"),
        ("grad(\n    out,\n    x,\n    retain_graph=True,\n)\n", 4, "grad(\n    out,\n    x,\n)\n"),
        ("grad(\n    out,\n    x,\n    retain_graph=True\n)\n", 4, "grad(\n    out,\n    x\n)\n"),
        ("(\n    y\n    .backward(retain_graph=True)\n)  # c\n", 3,
         "(\n    y\n    .backward()\n)  # c\n"),
        ("if ok:\n    y.backward(retain_graph=True)  # why\n", 2,
         "if ok:\n    y.backward()  # why\n"),
    ],
    ids=["only", "last", "first", "middle", "only-multiline", "trailing-comma", "no-trailing",
         "chained", "indented"],
)
def test_removal_keeps_the_rest_of_the_text(before, line, after):
    new, reason = remove_at(before.encode(), line)
    assert reason is None and new.decode() == after


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("y.backward(retain_graph=flag)\n", "kept: retain_graph=flag is not the literal True"),
        ("y.backward(retain_graph=1)\n", "kept: retain_graph=1 is not the literal True"),
        ("y.backward(None, True)\n", "kept: no retain_graph= keyword argument on this line"),
        ("y.backward(**options)\n", "kept: no retain_graph= keyword argument on this line"),
        ("a.backward(retain_graph=True); b.backward(retain_graph=True)\n",
         "kept: 2 calls pass retain_graph= here"),
        ("grad(out, x,  # inputs\n     retain_graph=True)\n", "kept: a comment"),
        ("y.backward(\n    retain_graph=True,  # keep it\n    create_graph=False)\n",
         "kept: a comment"),
    ],
    ids=["flag", "one", "positional", "kwargs", "two-calls", "comment-before", "comment-on"],
)
def test_removal_refuses_what_it_cannot_do_safely(source, reason):
    line = 2 if source.startswith("grad(out, x,  #") else 1
    new, why = remove_at(source.encode(), line)
    assert new is None and why.startswith(reason), why


HIDDEN = CLI_FIXTURES / "hidden_read.py"


def _fix_lines(proc) -> list[str]:
    return proc.stdout[proc.stdout.index("retaincheck --fix:") :].split("\n\n")[0].splitlines()


@pytest.mark.proof  # the fix_example.py lesson refuses such a fix in the test command
def test_a_fix_the_rerun_disproves_is_not_written(tmp_path):
    """Issue 27: hidden_read.py reads a saved tensor through a name the audit cannot see, so the
    audit says "not needed"; the proof's rerun fails and the file stays byte for byte."""
    script = _copy(tmp_path, HIDDEN)
    before = script.read_bytes()
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # Issue 27 B1: the failed rerun turns the audit's "not needed" into "needed" in the report
    assert "verdict: NEEDED: walked again by a rerun without retain_graph=True, which " \
           "failed" in proc.stdout, proc.stdout
    assert "NOT NEEDED" not in proc.stdout
    assert script.read_bytes() == before
    head, site = _fix_lines(proc)
    assert head.startswith(
        "retaincheck --fix: nothing written; 1 change in 1 file, NOT proven: the rerun failed "
        "(exit status 1): RuntimeError: Trying to backward through the graph a second time"
    ), head
    assert site == (
        "  hidden_read.py:9  kept: the rerun without retain_graph=True failed, so the verdict "
        "was wrong here (please report it)"
    )
    assert not list(tmp_path.glob("*.retaincheck-tmp"))
    alone = cli("--fail-on-unneeded", "--skip-proof", script.name, cwd=tmp_path)
    assert alone.returncode == 6  # the audit alone; the gate's own rerun: test_retaincheck_cli.py


@pytest.mark.proof
def test_a_disproved_fix_is_needed_in_the_json_and_the_gate(tmp_path):
    """--fix alone says the rerun failed and writes nothing; the JSON and the CI gate read the
    refuted site as needed (issue 27 B1: no exit 6 for a site the rerun proved needed)."""
    script = _copy(tmp_path, HIDDEN)
    before = script.read_bytes()
    alone = cli("--fix", script.name, cwd=tmp_path)
    assert _fix_lines(alone)[0].startswith("retaincheck --fix: nothing written; 1 change in 1 "
                                           "file, NOT proven: the rerun failed")
    assert script.read_bytes() == before
    gate = cli("--fix", "--fail-on-unneeded", "--json", script.name, cwd=tmp_path)
    assert gate.returncode == 0, gate.stderr
    (call,) = json.loads(gate.stdout)["calls"]
    assert (call["verdict"], call["needed"]) == ("needed", True), call
    assert "not needed (exit status 6)" not in gate.stderr
    assert script.read_bytes() == before


def test_skip_proof_writes_and_says_unproven(tmp_path):
    script = _copy(tmp_path, HIDDEN)
    proc = cli("--fix", "--write", "--skip-proof", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _fix_lines(proc) == [
        "retaincheck --fix: wrote 1 change in 1 file, unproven (--skip-proof: no rerun checked it)",
        "  hidden_read.py:9  removed retain_graph=True (not needed in this run, unproven; code "
        "paths it did not take are not checked)",
    ]
    assert "backward(retain_graph=True)" not in script.read_text()
    assert cli(script.name, cwd=tmp_path).returncode == 1  # what the proof would have caught


@pytest.mark.proof
def test_the_rerun_has_the_same_arguments_environment_and_working_directory(tmp_path):
    script = _copy(tmp_path, CLI_FIXTURES / "argv_env_cwd.py")
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.txt").write_text("x")
    env = {"RETAINCHECK_PROOF_TEST": "1"}
    run = snippetcheck.run_module(
        "retaincheck", ["--fix", "--write", "../argv_env_cwd.py", "--go"], work, environ=env
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert _fix_lines(run)[0].startswith("retaincheck --fix: wrote 1 change in 1 file, proven")
    assert "retain_graph=True)" not in script.read_text()


@pytest.mark.proof
def test_an_edited_module_is_what_the_rerun_imports(tmp_path):
    """The site is in a module the script imports: the rerun must import the edited copy (the
    original would pass and the change would be written)."""
    shutil.copy(HIDDEN, tmp_path / "helper.py")
    (tmp_path / "main.py").write_text("import helper  # noqa: F401\n")
    before = (tmp_path / "helper.py").read_bytes()
    proc = cli("--fix", "--write", "main.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _fix_lines(proc)[0].startswith("retaincheck --fix: nothing written; 1 change in 1 "
                                          "file, NOT proven: the rerun failed"), proc.stdout
    assert (tmp_path / "helper.py").read_bytes() == before


@pytest.mark.proof
def test_a_rerun_that_catches_the_freed_error_is_not_proven(tmp_path):
    """Issue 27 W1: the rerun without the flag exits 0 (the program catches the freed error)
    and prints another number: the change is refused (the caught error is seen first), and
    the site is kept. "could not tell": a caught error may be one the audited run met too
    (a test that asserts PyTorch's error: rev28b F9), so it shows no walk of this graph."""
    script = _copy(tmp_path, CLI_FIXTURES / "hidden_read_caught.py")
    before = script.read_bytes()
    def python(name):
        return subprocess.run([sys.executable, name], cwd=tmp_path, capture_output=True,
                              text=True, check=False, timeout=120)

    plain = python(script.name)
    (tmp_path / "without.py").write_bytes(before.replace(b"retain_graph=True", b""))
    without = python("without.py")  # the truth: exit 0, another number
    assert without.returncode == plain.returncode == 0, without.stderr
    assert without.stdout != plain.stdout and "scale 1.0" in without.stdout
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert script.read_bytes() == before
    assert proc.stdout.startswith(plain.stdout)  # the tee still prints the program's output
    assert _fix_lines(proc)[0].startswith(
        "retaincheck --fix: nothing written; 1 change in 1 file, NOT proven: the rerun raised "
        "a freed-graph error that the program caught: Trying to backward"), proc.stdout
    assert "verdict: COULD NOT TELL: KEPT" in proc.stdout, proc.stdout


@pytest.mark.proof
def test_a_rerun_whose_output_differs_is_not_proven(tmp_path):
    """Issue 27 W1: a rerun that exits as the audited run did, with no freed-graph error, but
    prints something else, is not a proof."""
    from retaincheck._proof import Program, prove

    script = tmp_path / "p.py"
    script.write_text("print('scale 0.5')\n")  # the original; the rerun runs the changed copy
    proof = prove({str(script): b"print('scale 1.0')\n"},
                  Program(script.name, None, [], str(tmp_path), 0, b"scale 0.5\n"))
    assert not proof.proven
    assert proof.reason == ("the rerun's standard output differs from the audited run's "
                            "(line 1: 'scale 0.5' became 'scale 1.0')"), proof.reason


CAUGHT = {  # what raises the freed-graph error that the program catches
    "backward": "    y.sum().backward()\n",  # the engine
    "node-call": "    y.grad_fn(torch.ones(3))\n",  # a node called directly (no engine)
    "saved-attribute": "    y.grad_fn._saved_result\n",  # a saved tensor's getter
}


@pytest.mark.parametrize("how", [
    pytest.param("backward", marks=pytest.mark.proof),
    "node-call",
    pytest.param("saved-attribute", marks=pytest.mark.proof),
])
def test_a_caught_freed_error_in_the_rerun_is_not_proven(tmp_path, how):
    """Issue 27 W1: the freed-graph error raised inside try/except, so the rerun exits 0 with
    the same (empty) output: the proof still sees it, from the engine (backward) and from the
    paths that unpack a saved tensor without it (a direct node call, a _saved_* getter)."""
    from retaincheck._proof import Program, prove

    source = (
        "import torch\n"
        "w = torch.randn(3, requires_grad=True)\n"
        "y = torch.tanh(w)\n"
        "y.sum().backward()\n"
        "try:\n"
        + CAUGHT[how] +
        "except RuntimeError:\n"
        "    pass\n"
    )
    script = tmp_path / "caught.py"
    script.write_text("import torch\n")  # the original; the rerun runs the changed copy
    proof = prove({str(script): source.encode()},
                  Program(script.name, None, [], str(tmp_path), 0, b""))
    assert not proof.proven
    assert proof.reason.startswith("the rerun raised a freed-graph error that the program "
                                   "caught: Trying to backward through the graph a second "
                                   "time"), proof.reason


@pytest.mark.proof
def test_the_proof_sees_the_prints_of_main_called_in_process(tmp_path):
    """W1's comparison of standard output: main() called in a process that redirected
    sys.stdout (as the page's snippets do) must still record the program's prints, or every
    proof of a program that prints would fail."""
    (tmp_path / "p.py").write_text(
        "import torch\n"
        "w = torch.ones(2, requires_grad=True)\n"
        "(w * w).sum().backward(retain_graph=True)\n"
        "print('grad', w.grad.tolist())\n"
    )
    code = (
        "import contextlib, io, sys\n"
        "from retaincheck.__main__ import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    status = main(['--fix', 'p.py'])\n"
        "sys.stdout.write(out.getvalue())\n"
        "sys.exit(status)\n"
    )
    src = str(Path(__file__).parent.parent / "src")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, check=False, timeout=180,
                          env={**__import__("os").environ, "PYTHONPATH": src})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("grad [2.0, 2.0]\n"), proc.stdout
    assert "1 change in 1 file, proven: a rerun" in proc.stdout, proc.stdout


@pytest.mark.proof
@pytest.mark.parametrize(("fixture", "said"), [
    ("hidden_read_raw_thread.py", ["retaincheck --fix: nothing written; 1 change in 1 file, NOT "
                                   "proven: the rerun raised a freed-graph error that the program "
                                   "caught"]),
    # (rev37a G7: a trace function of the program's sees the flag: kept by the audit itself)
    ("hidden_read_own_tracer.py", ["retaincheck --fix: nothing to change",
                                   "  hidden_read_own_tracer.py:12  kept: could not tell (a "
                                   "profile or trace function of the program's sees the flag)"]),
])
def test_the_proof_sees_a_caught_error_in_a_raw_thread_or_says_it_cannot(tmp_path, fixture,
                                                                          said):
    """rev27e W1: without the flag each program prints the same and exits 0, and writes another
    number to a file, which the proof does not compare. The caught freed-graph error in a
    thread of _thread.start_new_thread is seen; a program with its own trace function cannot
    be proven. Either way nothing is written."""
    script = _copy(tmp_path, CLI_FIXTURES / fixture)
    before = script.read_bytes()
    (tmp_path / "without.py").write_bytes(before.replace(b"retain_graph=True", b""))
    written = []
    for name in (script.name, "without.py"):  # the truth: same output and status, not file
        run = subprocess.run([sys.executable, name], cwd=tmp_path, capture_output=True,
                             text=True, check=False, timeout=120)
        assert (run.returncode, run.stdout) == (0, "done\n"), run.stderr
        written.append((tmp_path / "scale.txt").read_text())
    assert written[0] != written[1] == "1.0"
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert script.read_bytes() == before
    lines = _fix_lines(proc)
    assert [line[:len(s)] for line, s in zip(lines, said, strict=False)] == said, proc.stdout


def test_a_rerun_that_cannot_happen_refutes_nothing(tmp_path, monkeypatch):
    """Under torchrun (WORLD_SIZE > 1) a rank cannot be rerun alone: the gate's proof says so,
    and the site stays "not needed" (unproven) rather than "needed by a rerun that failed"."""
    from retaincheck._fix import prove_unneeded
    from retaincheck._proof import Program

    script = tmp_path / "train.py"
    script.write_text("import torch\nw = torch.ones(3, requires_grad=True)\n"
                      "(w * w).sum().backward(retain_graph=True)\n")
    monkeypatch.chdir(tmp_path)
    with retaincheck.audit() as report:
        exec(compile(script.read_text(), str(script), "exec"), {})
    monkeypatch.setenv("WORLD_SIZE", "2")
    line = prove_unneeded(report, True, 0, dirs=[str(tmp_path)], skip_proof=False,
                          program=Program("train.py", None, [], str(tmp_path)))
    assert line == ("retaincheck: checked without that 1 retain_graph=True (nothing written): "
                    "NOT proven: a rank of a distributed run (WORLD_SIZE > 1) cannot be rerun "
                    "alone")
    assert report.calls[0].verdict == "not needed"


@pytest.mark.proof
def test_the_proof_reaches_a_process_that_runs_the_file_again(tmp_path):
    """rev27f G2: without the flag the child process fails (exit 1); the audit sees only the
    parent, where nothing reused the graph. The rerun must fail too, so nothing is written."""
    script = _copy(tmp_path, CLI_FIXTURES / "reruns_itself.py")
    before = script.read_bytes()
    (tmp_path / "without.py").write_bytes(before.replace(b"retain_graph=True", b""))
    truth = subprocess.run([sys.executable, "without.py"], cwd=tmp_path, capture_output=True,
                           text=True, check=False, timeout=120)
    assert truth.returncode == 1 and "child status 1" in truth.stdout
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert script.read_bytes() == before
    assert _fix_lines(proc)[0].startswith(
        "retaincheck --fix: nothing written; 1 change in 1 file, NOT proven: the rerun exited "
        "with status 1"), proc.stdout


@pytest.mark.parametrize(("command", "free"), [
    (["git", "rev-parse", "HEAD"], True),
    (["/sbin/ldconfig", "-p"], True),
    (["/bin/sh", "-c", "git log -1 --format=%H 2>/dev/null"], True),
    (["/bin/sh", "-c", "PATH=./bin:/usr/bin git log -1"], False),  # rev27p P02
    (["no-such-program-here"], False),  # not a listed program
    (["python", "-W", "ignore", "-I", "x.py"], False),
    (["/bin/sh", "-c", "git log; python -I x.py"], False),
    (["/bin/sh", "-c", "git log $(python -I x.py)"], False),
    (["env", "git", "log"], False),
    (["./run.sh"], False),
    (["/bin/sh", "-c", "git --version >/dev/null\npython -I x.py"], False),  # rev27n F1
    (["/bin/sh", "-c", "which a#; python -I x.py"], False),  # rev27n F1b
])
def test_the_proof_guesses_only_which_commands_start_no_python(command, free):
    """rev27l, rev27m: a guess from a command's words (-I after -W ignore, a script file, a
    shell's own environment) missed Pythons the rerun cannot reach. The only guess left is a
    short list of programs that start none, run directly or as a shell's one simple command;
    every other command must show that the proof's module ran in it."""
    from retaincheck._proof_site import _starts_no_python

    assert _starts_no_python(command) is free


def test_a_script_named_like_a_listed_program_is_not_trusted(tmp_path, monkeypatch):
    """A `git` on PATH that is a script (it may run python -I) is not the real program."""
    from retaincheck._proof_site import _starts_no_python

    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\nexec python3 -I x.py\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert not _starts_no_python(["git", "log"])
    assert not _starts_no_python(["/bin/sh", "-c", "git log"])
    assert not _starts_no_python([str(fake), "log"])
    (tmp_path / "nvidia-smi").symlink_to(sys.executable)  # Python under a listed name
    assert not _starts_no_python(["nvidia-smi", "-I", "x.py"])


def test_only_the_systems_own_programs_under_a_clean_environment_are_trusted(tmp_path,
                                                                             monkeypatch):
    """rev27r: a listed program or a shell is trusted only as the system's own copy, found as
    the child finds it, under an environment that injects no code: BASH_ENV (P09), an exported
    bash function (N02), os.putenv's PATH (N03, N10), a `sh` or a script without `#!` under a
    listed name on PATH (N05, N06), a relative PATH entry seen from the child's folder (N11)."""
    from retaincheck._proof_site import _find, _starts_no_python

    clean = {"PATH": os.defpath}
    assert _starts_no_python(["/bin/sh", "-c", "git --version"], clean)
    assert not _starts_no_python(["/bin/sh", "-c", "git --version"],
                                 {**clean, "BASH_ENV": "hook.sh"})
    assert not _starts_no_python(["bash", "-c", "git --version"],
                                 {**clean, "BASH_FUNC_git%%": "() { python3 -I x.py; }"})
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in [("git", "python3 -I x.py\n"), ("sh", "#!/bin/bash\nexec /bin/sh \"$@\"\n")]:
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    mine = {"PATH": f"{tools}:{os.defpath}"}
    assert not _starts_no_python(["git", "--version"], mine)  # no `#!`: sh runs it (N06)
    assert not _starts_no_python(["sh", "-c", "git --version"], {**mine, "PATH": f"{tools}"})
    monkeypatch.setattr(os, "environ", dict(os.environ))  # os.putenv alone, as N03 did
    os.putenv("PATH", f"{tools}:{os.environ['PATH']}")
    try:
        assert not _starts_no_python(["/bin/sh", "-c", "git --version"])
    finally:
        os.putenv("PATH", os.environ["PATH"])
    assert _starts_no_python(["/bin/sh", "-c", "git --version"])
    (tmp_path / "sub" / "bin").mkdir(parents=True)
    (tmp_path / "sub" / "bin" / "git").write_text("#!/bin/sh\npython3 -I x.py\n")
    (tmp_path / "sub" / "bin" / "git").chmod(0o755)
    relative = {"PATH": f"bin:{os.defpath}"}
    assert _find("git", relative, tmp_path / "sub") == str(tmp_path / "sub" / "bin" / "git")
    assert not _starts_no_python(["git", "--version"], relative, tmp_path / "sub")
    assert _starts_no_python(["git", "--version"], relative, tmp_path)


def test_the_proof_holds_only_if_every_started_process_reached_it(tmp_path):
    """rev27l, rev27m: a started command counts as reached only if a process with its pid ran
    the proof's module after it was started (an exec keeps the pid: the line written before
    the exec does not count)."""
    from retaincheck._proof import _unreached

    reached, expected, other = (tmp_path / n for n in ("reached", "expected", "unreached"))
    reached.write_text("100 1 10.0\n200 100 12.5\n")
    expected.write_text("200 12.0 python child.py\n")
    assert _unreached(str(other), str(reached), str(expected)) is None
    expected.write_text("200 12.0 python child.py\n100 11.0 python -I again.py\n")
    assert _unreached(str(other), str(reached), str(expected)) == "started python -I again.py"
    expected.write_text("300 12.0 ./run.sh\n")
    assert _unreached(str(other), str(reached), str(expected)) == "started ./run.sh"
    expected.write_text("")
    other.write_text("os.system make\n")
    assert _unreached(str(other), str(reached), str(expected)) == "os.system make"


def test_a_site_in_code_with_no_file_is_never_a_gate_6(monkeypatch, tmp_path):
    """rev27i G1d: a call site in exec'd code cannot be rerun without its flag: the gate keeps
    it as "could not tell: kept", never an unproven 6. Compiled before the audit began, its
    text was never seen: the audit alone keeps it, as whether its flag is the literal True
    cannot be seen either."""
    from retaincheck._fix import prove_unneeded, refusal
    from retaincheck._proof import Program

    monkeypatch.chdir(tmp_path)
    code = compile("import torch\nw = torch.ones(3, requires_grad=True)\n"
                   "(w * w).sum().backward(retain_graph=True)\n", "<config>", "exec")
    with retaincheck.audit() as report:
        exec(code, {})
    (call,) = report.calls
    assert (call.verdict, call.passed_through, call._unread) == ("could not tell: kept", True,
                                                                 True)
    assert refusal(call, True).startswith("kept: could not tell")
    # The gate's own guard, as for a report that did not keep it (the audit alone said "not
    # needed" here before the rules above: code it did not see compiled, a line unread)
    call.passed_through = call._unread = False
    call.unseen_reads = []
    assert call.verdict == "not needed"
    line = prove_unneeded(report, True, 0, dirs=[str(tmp_path)], skip_proof=False,
                          program=Program("train.py", None, [], str(tmp_path)))
    assert line.endswith("NOT proven: the call site is in code with no file (exec, eval), so "
                         "no rerun can turn its flag off")
    assert report.calls[0].verdict == "could not tell: kept"


@pytest.mark.proof
@pytest.mark.parametrize(("child", "reason"), [
    ('[sys.executable, "-W", "ignore", "-I", __file__, "child"]',
     "NOT proven: part of the program ran out of the rerun's reach (started "),
    ('[sys.executable, __file__, "child"], env={"PATH": os.environ["PATH"]}',
     "NOT proven: part of the program ran out of the rerun's reach (started "),
    ('[sys.executable, shutil.copy(__file__, tempfile.mkdtemp()), "child"]',
     "NOT proven: the rerun exited with status 1"),
    ('[sys.executable, shifted(__file__), "child"]',
     "NOT proven: the rerun exited with status 1"),
], ids=["isolated", "environment", "copy", "shifted-copy"])
def test_the_proof_does_not_hold_for_a_process_it_cannot_reach(tmp_path, child, reason):
    """rev27i k02-k05, rev27j F1/F3, rev27l/rev27m: the program starts itself again with
    python -W ignore -I, with an environment of its own, from a copy in another folder, or from
    a copy one line lower; without the flag the child fails. A child the rerun cannot reach
    makes the proof fail (nothing written); a copy of the file has its forced line matched by
    its text, so the rerun fails as the truth does."""
    script = tmp_path / "reruns_itself.py"
    source = (CLI_FIXTURES / "reruns_itself.py").read_text()
    edited = source.replace('[sys.executable, __file__, "child"]', child).replace(
        "import subprocess\n", "import os\nimport shutil\nimport subprocess\nimport tempfile\n"
        "\n\ndef shifted(path):  # a copy one line lower (a run snapshot with a header)\n"
        "    copy = os.path.join(tempfile.mkdtemp(), 'snapshot.py')\n"
        "    with open(path) as f, open(copy, 'w') as out:\n"
        "        out.write('# snapshot\\n' + f.read())\n"
        "    return copy\n")
    assert edited != source
    script.write_text(edited)
    before = script.read_bytes()
    (tmp_path / "without.py").write_bytes(before.replace(b"retain_graph=True", b""))
    truth = subprocess.run([sys.executable, "without.py"], cwd=tmp_path, capture_output=True,
                           text=True, check=False, timeout=120)
    assert truth.returncode == 1 and "child status 1" in truth.stdout, truth.stdout
    proc = cli("--fix", "--write", "--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert script.read_bytes() == before
    assert _fix_lines(proc)[0].startswith(
        f"retaincheck --fix: nothing written; 1 change in 1 file, {reason}"), proc.stdout



MP_SPAWN = """import multiprocessing as mp
import os
import sys

import torch

x = torch.ones(3, requires_grad=True)
y = x * x
y.sum().backward(retain_graph=True)


def again():
    getattr(y.grad_fn, "".join(reversed("fles_devas_")))  # a name the audit cannot read


if __name__ == "__main__":
    print("grad", x.grad.tolist())
    os.environ.pop("PYTHONPATH", None)
    child = mp.get_context("spawn").Process(target=again)
    child.start()
    child.join()
    print("child", child.exitcode)
    sys.exit(child.exitcode)
"""


def test_a_shell_or_launcher_is_not_taken_for_the_python_it_execs(tmp_path):
    """rev27n F4: `sh -c "python -I child.py; exec python -c pass"` ends as a reached Python
    under sh's pid after running an isolated one; only a process that starts as Python may
    show it was reached. (Not `python3` from PATH: on a pyenv machine that is a shim, a bash
    script, rightly not Python.)"""
    from retaincheck._proof_site import _is_python

    (tmp_path / "python3").symlink_to(sys.executable)
    assert _is_python(sys.executable) and _is_python(str(tmp_path / "python3"))
    assert not _is_python("/bin/sh") and not _is_python("env")


@pytest.mark.proof
def test_the_proof_sees_multiprocessing_start_python(tmp_path):
    """rev27l W1, rev27m a15: multiprocessing's spawn starts Python through
    _posixsubprocess.fork_exec, not subprocess; with PYTHONPATH gone the child runs out of the
    rerun's reach, so the gate must not exit 6 (without the flag the child fails)."""
    script = tmp_path / "mp_spawn.py"
    script.write_text(MP_SPAWN)
    (tmp_path / "without.py").write_text(MP_SPAWN.replace("retain_graph=True", ""))
    truth = subprocess.run([sys.executable, "without.py"], cwd=tmp_path, capture_output=True,
                           text=True, check=False, timeout=120)
    assert truth.returncode == 1 and "child 1" in truth.stdout, truth.stdout
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: part of the program ran out of the rerun's reach (started " in proc.stderr


@pytest.mark.proof
def test_fix_and_the_gate_prove_their_sites_together(tmp_path):
    """rev27l X1: --fix --fail-on-unneeded proved the site it edits alone and the other alone,
    so it exited 6 though removing both fails. The gate's rerun keeps --fix's sites forced off."""
    script = _copy(tmp_path, CLI_FIXTURES / "either_graph.py")
    source = script.read_text()
    (tmp_path / "without.py").write_text(
        source.replace("retain_graph=True", "").replace("keep = True", "keep = False"))
    truth = subprocess.run([sys.executable, "without.py"], cwd=tmp_path, capture_output=True,
                           text=True, check=False, timeout=120)
    assert truth.returncode == 1 and "AttributeError" in truth.stderr, truth.stderr
    proc = cli("--fix", "--fail-on-unneeded", script.name, cwd=tmp_path)
    assert "1 change in 1 file, proven" in proc.stdout, proc.stdout
    verdicts = [line.split(":")[1].strip() for line in proc.stdout.splitlines()
                if line.strip().startswith("verdict:")]
    # the second is kept: its flag is a name (retain_graph=keep), written on another line
    # that the program may read (rev32a G1), so "could not tell" before any rerun
    assert verdicts == ["NOT NEEDED", "COULD NOT TELL"], proc.stdout
    assert "the flag is not the literal True here" in proc.stdout
    assert proc.returncode == 6  # the first alone: proven, as its truth is


STDIN_PATH = """import sys

import torch

mode = sys.stdin.read().strip()
x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
if mode == "check":
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))  # a name the audit cannot read
print("grad", x.grad.tolist())
"""


@pytest.mark.proof
def test_the_rerun_reads_the_same_standard_input(tmp_path):
    """rev27o R1: the program takes its path from standard input; with the rerun's input
    closed it took the other path, and the gate exited 6 though without the flag the run
    fails. The rerun gets the bytes the audited run could read."""
    script = tmp_path / "reads_stdin.py"
    script.write_text(STDIN_PATH)
    (tmp_path / "without.py").write_text(STDIN_PATH.replace("retain_graph=True", ""))
    truth = subprocess.run([sys.executable, "without.py"], cwd=tmp_path, input="check\n",
                           capture_output=True, text=True, check=False, timeout=120)
    assert truth.returncode == 1 and "second time" in truth.stderr, truth.stderr
    proc = subprocess.run([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                           script.name], cwd=tmp_path, input="check\n", capture_output=True,
                          text=True, check=False, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun failed (exit status 1)" in proc.stderr, proc.stderr


def test_standard_input_too_long_to_give_again_is_not_kept(monkeypatch):
    """Past its limit _StdinTee keeps nothing and says so (False): the proof then does not
    hold. What the program reads is passed through whole either way."""
    from retaincheck.__main__ import _StdinTee

    monkeypatch.setattr(_StdinTee, "LIMIT", 10)
    saved = os.dup(0)
    read, write = os.pipe()
    os.dup2(read, 0)
    os.close(read)
    try:
        tee = _StdinTee()
        os.write(write, b"0123456789abcdef")
        os.close(write)
        with os.fdopen(os.dup(0), "rb") as stdin:
            assert stdin.read() == b"0123456789abcdef"
        assert tee.close() is False
    finally:
        os.dup2(saved, 0)
        os.close(saved)


GETTRACE_PATH = """import sys

import torch

x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
if sys.gettrace() is None:  # no debugger attached
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))  # a name the audit cannot read
print("grad", x.grad.tolist())
"""


@pytest.mark.proof
def test_the_rerun_hides_its_trace_function(tmp_path):
    """rev27o R2: the rerun's trace function made sys.gettrace() not None, so a program that
    asks took another path there and the gate exited 6 though the run fails without the flag."""
    script = tmp_path / "asks_gettrace.py"
    script.write_text(GETTRACE_PATH)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun failed (exit status 1)" in proc.stdout + proc.stderr


STATE_PATH = """import os

import torch

x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
if not os.path.exists("checked.marker"):  # the first run checks the saved values once
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))  # a name the audit cannot read
    open("checked.marker", "w").close()
torch.save(x.grad, "grad.pt")  # written, then read back: the rerun's own file
print("grad", torch.load("grad.pt").tolist())
"""


@pytest.mark.proof
def test_the_rerun_does_not_start_from_what_the_audited_run_left(tmp_path):
    """rev27o R3: the audited run leaves a marker; the rerun found it and skipped the read
    the audit cannot see, and the gate exited 6 though a first run fails without the flag.
    The marker is set aside for the rerun, which takes the first path; a file the rerun
    writes itself (torch.save, then torch.load) is its own."""
    script = tmp_path / "leaves_state.py"
    script.write_text(STATE_PATH)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: NEEDED: walked again by a rerun" in proc.stdout, proc.stdout + proc.stderr
    (tmp_path / "checked.marker").unlink()
    plain = tmp_path / "no_marker.py"
    plain.write_text(STATE_PATH.replace('not os.path.exists("checked.marker")', "False"))
    proc = cli("--fail-on-unneeded", plain.name, cwd=tmp_path)
    assert proc.returncode == 6, proc.stdout + proc.stderr  # grad.pt: its own, read back


def test_a_copy_tagged_with_a_comment_has_the_same_code():
    """rev27n F6: a copy of a site's line with a comment added is still that line."""
    from retaincheck._proof_site import _code

    assert _code("    y.backward(retain_graph=True)\n") == _code(
        "y.backward(retain_graph = True)  # tagged")
    assert _code("y.backward(retain_graph=True)") != _code("y.backward()")
    # rev27p C06: the first line of a call that goes on, copied without its comment
    assert _code("    y.backward(retain_graph=True,  # keep it\n") == _code(
        "y.backward(retain_graph=True,")


SAME_TEXT = """import torch


def a():
    x = torch.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    return x


def b():
    x = torch.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x


print("a", a().grad.tolist())
print("b", b().grad.tolist())
"""


@pytest.mark.proof
def test_a_failure_that_a_line_of_the_same_text_may_cause_does_not_make_a_site_needed(tmp_path):
    """rev27n M1: a()'s flag is not needed, b()'s line has the same text and is needed;
    forcing a()'s text forces b()'s line too, so the rerun fails, but that failure does not
    show a() needed: "could not tell: kept", not "needed"."""
    script = tmp_path / "same_text.py"
    script.write_text(SAME_TEXT)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = [line.split(":")[1].strip() for line in proc.stdout.splitlines()
                if line.strip().startswith("verdict:")]
    assert verdicts == ["COULD NOT TELL", "NEEDED"], proc.stdout
    # rev41a S1, rev41b P1: the failure is named as that line's, not as the site's
    assert "(the flag was off at same_text.py:14 too, a line with the same code; the " \
        "failure may be that line's)" in proc.stderr, proc.stderr


RELAUNCH = """import os, subprocess, sys, time

import torch

x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
if len(sys.argv) == 2:  # the relaunched child, isolated: walks the graph's saved values
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))
    sys.exit(0)
if len(sys.argv) == 3:  # the launcher: a frozen clock, then itself again with python -I
    time.time = time.monotonic_ns = lambda: 0
    os.execv(sys.executable, [sys.executable, "-I", __file__, "child"])
print("grad", x.grad.tolist())
sys.exit(subprocess.run([sys.executable, __file__, "launch", "now"]).returncode)
"""


@pytest.mark.proof
def test_the_watch_keeps_its_own_clock(tmp_path):
    """rev27n F5: a launcher that froze time.time before exec'ing python -I made its exec
    look older than its own start, so the isolated Python passed as reached."""
    script = tmp_path / "relaunch.py"
    script.write_text(RELAUNCH)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: part of the program ran out of the rerun's reach" in proc.stderr


@pytest.mark.proof
def test_output_held_by_a_lingering_process_is_still_compared(tmp_path):
    """rev27n F8: a process the program started (a spawn Pool's resource tracker) still held
    standard output when the program ended; the audited run's output then was not kept and
    the proof compared nothing, so a change seen only in the output passed."""
    script = _copy(tmp_path, CLI_FIXTURES / "pool_holds_stdout.py")
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun's standard output differs" in proc.stderr, proc.stderr
    assert proc.seconds < 60


def test_a_started_process_still_running_after_the_program_is_not_proven(tmp_path,
                                                                          monkeypatch):
    """rev27n F7: a detached job may walk the graph after the rerun's output was compared."""
    from retaincheck import _proof
    from retaincheck._proof import _unreached

    monkeypatch.setattr(_proof, "GRACE", 0.2)

    reached, expected = tmp_path / "reached", tmp_path / "expected"
    reached.write_text(f"{os.getpid()} 1 20\n")
    expected.write_text(f"{os.getpid()} 10 python job.py\n")
    assert _unreached(str(tmp_path / "none"), str(reached), str(expected)) == (
        "still running after the program: python job.py")


ENV_SET = """import os

tuned = "RC_TUNED" in os.environ  # did the user choose?
os.environ.setdefault("RC_TUNED", "1")  # for the workers this script would start

import torch  # noqa: E402

x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
if not tuned:  # the default settings: check the saved values once
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))
print("grad", x.grad.tolist())
"""


@pytest.mark.proof
def test_the_rerun_gets_the_environment_the_program_started_with(tmp_path, monkeypatch):
    """rev27s N2: the rerun took os.environ as the program left it, so a program that sets a
    variable it first looked for took another path in the rerun."""
    monkeypatch.delenv("RC_TUNED", raising=False)
    script = tmp_path / "env_set.py"
    script.write_text(ENV_SET)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven" in proc.stderr or "NEEDED" in proc.stdout, proc.stdout + proc.stderr


def _gate_on_probe(tmp_path: Path, first_run: str, helpers: str) -> snippetcheck.Run:
    """The gate on STATE_PATH whose first-run test is ``first_run``, with ``helpers`` defined."""
    source = STATE_PATH.replace('not os.path.exists("checked.marker")', first_run).replace(
        '    open("checked.marker", "w").close()\n', "").replace(
        "import torch\n", "import torch\n\n\n" + helpers, 1)
    script = tmp_path / "probe.py"
    script.write_text(source)
    return cli("--fail-on-unneeded", script.name, cwd=tmp_path)


@pytest.mark.proof
@pytest.mark.parametrize("first_run", [
    'not os.path.isdir(".state") and os.makedirs(".state/x") is None',  # a hidden folder
    'mkdir_ok("out")',  # os.mkdir fails when the audited run made it
    'open_new("lock")',  # open(..., "x") likewise
    'no_folder("out")',  # os.chdir into what the audited run made (rev27r S21)
    'no_link("made")',  # os.link of it (rev27r S20)
    'symlink_new("latest")',  # os.symlink onto it (rev27s S26)
    'no_readlink("baseline")',  # os.readlink of it (rev27s N5)
    'appended_to_nothing("log.csv")',  # an append shows the size (rev27s N1)
    'git_cannot_hash("made2")',  # a listed program given it to read (rev27q Q13)
], ids=["hidden-folder", "mkdir-probe", "open-x-probe", "chdir-probe", "link-probe",
        "symlink-probe", "readlink-probe", "append-tell", "listed-program-reads"])
def test_what_the_audited_run_created_is_not_there_for_the_rerun(tmp_path, first_run):
    """rev27q Q6, Q7, rev27r, rev27s: a hidden folder's state, and existence probes that are
    writes (os.mkdir, open(..., "x"), os.link, os.symlink), look-ups with no audit event of
    their own (os.readlink), a change of folder, an append that shows the file's size, a
    program given the file: each sent the rerun down another path unseen. What the audited run
    created is set aside for the rerun, which takes the first path and fails without the flag
    (NEEDED), and is put back after it."""
    helpers = (
        "def mkdir_ok(path):\n    try:\n        os.mkdir(path)\n        return True\n"
        "    except FileExistsError:\n        return False\n\n\n"
        "def open_new(path):\n    try:\n        open(path, 'x').close()\n        return True\n"
        "    except FileExistsError:\n        return False\n\n\n"
        "def no_folder(path):\n    try:\n        os.chdir(path)\n        os.chdir('..')\n"
        "        return False\n    except FileNotFoundError:\n        os.mkdir(path)\n"
        "        return True\n\n\n"
        "def no_link(path):\n    try:\n        os.link(path, path + '.2')\n"
        "        return False\n    except FileNotFoundError:\n"
        "        open(path, 'w').close()\n        return True\n\n\n"
        "def symlink_new(path):\n    try:\n        os.symlink('run0', path)\n"
        "        return True\n    except FileExistsError:\n        return False\n\n\n"
        "def no_readlink(path):\n    try:\n        os.readlink(path)\n        return False\n"
        "    except FileNotFoundError:\n        os.symlink('run0', path)\n"
        "        return True\n\n\n"
        "def appended_to_nothing(path):\n    with open(path, 'a') as f:\n"
        "        fresh = f.tell() == 0\n        f.write('step\\n')\n    return fresh\n\n\n"
        "def git_cannot_hash(path):\n    import subprocess\n\n"
        "    run = subprocess.run(['git', 'hash-object', path], capture_output=True)\n"
        "    open(path, 'w').close()\n    return run.returncode != 0\n\n\n")
    proc = _gate_on_probe(tmp_path, first_run, helpers)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: NEEDED: walked again by a rerun" in proc.stdout, proc.stdout + proc.stderr
    left = sorted(p.name for p in tmp_path.iterdir())  # the audited run's results, back
    assert "grad.pt" in left and len(left) > 2, left


@pytest.mark.proof
@pytest.mark.parametrize("first_run", [
    'first_read("state.txt")',  # opened for reading
    'first_size("state.txt")',  # a listing's DirEntry.stat(), no look-up (rev27r S33)
    'appended_once("state.txt")',  # an append shows the size (rev27s N1)
    'after_failed_replace("state.txt")',  # a rename that failed wrote nothing (rev27t T80)
], ids=["read", "direntry-stat", "append-tell", "failed-replace"])
def test_a_look_at_what_the_audited_run_changed_is_not_proven(tmp_path, first_run):
    """What the audited run changed (a file that was there before it) cannot be set back for
    the rerun: a look at it before the rerun wrote it makes the proof not hold (rev27o R3)."""
    helpers = (
        "def first_read(path):\n    was = open(path).read()\n"
        "    open(path, 'w').write('1')\n    return was == '0'\n\n\n"
        "def first_size(path):\n"
        "    size = [e.stat().st_size for e in os.scandir('.') if e.name == path][0]\n"
        "    open(path, 'w').write('10')\n    return size == 1\n\n\n"
        "def appended_once(path):\n    with open(path, 'a') as f:\n"
        "        fresh = f.tell() == 1\n        f.write('1')\n    return fresh\n\n\n"
        "def after_failed_replace(path):\n    try:\n"
        "        os.replace(path + '.tmp', path)\n    except FileNotFoundError:\n"
        "        pass\n    return first_read(path)\n\n\n")
    (tmp_path / "state.txt").write_text("0")
    proc = _gate_on_probe(tmp_path, first_run, helpers)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun read " in proc.stderr, proc.stdout + proc.stderr


def test_a_launcher_named_python_is_not_python(tmp_path):
    """rev27r N12: a shell script named `python` may run an isolated Python before it execs a
    reached one under the same pid; only a compiled Python (or a script whose first line
    names one) counts as Python."""
    from retaincheck._proof_site import _is_python

    launcher = tmp_path / "python"
    launcher.write_text("#!/bin/sh\npython3 -I x.py\nexec python3 \"$@\"\n")
    launcher.chmod(0o755)
    assert not _is_python(str(launcher))
    script = tmp_path / "tool"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    assert _is_python(str(script))
    wrapped = tmp_path / "wrapped"
    wrapped.write_text(f"#!{launcher}\nprint('hi')\n")
    wrapped.chmod(0o755)
    assert not _is_python(str(wrapped))


START_STATE_CHECK = """
import os, signal, sys
from retaincheck._proof import _apply_start, start_state

state = start_state()
os.umask(0o077)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
cpus = os.sched_getaffinity(0)
os.sched_setaffinity(0, {min(cpus)})
_apply_start(state)
assert os.umask(0o022) == 0o022
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
assert os.sched_getaffinity(0) == cpus
print("ok")
"""


@pytest.mark.proof
def test_the_rerun_starts_with_the_signals_cpus_and_umask_the_program_started_with():
    """rev27s N14, N15: the rerun inherited what the program (or retaincheck, which ignores
    SIGINT while it reports) changed in the process: ignored signals, pinned CPUs, a umask."""
    run = subprocess.run([sys.executable, "-c", START_STATE_CHECK], capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 0 and run.stdout == "ok\n", run.stdout + run.stderr


STARTS_AS = """import os
import signal
import sys

held = []


def locked_elsewhere(path):  # a single-instance lock, held to the end
    import fcntl

    held.append(open(path, "a"))
    try:
        fcntl.flock(held[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True


def lowered_hard_memory_limit():  # a memory guard, set once for good
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    new = 1 << 45 if hard == resource.RLIM_INFINITY else hard - 4096
    resource.setrlimit(resource.RLIMIT_AS, (new, new))
    return True


def given_fd_3():  # a descriptor the caller passed (a job runner's status pipe)
    try:
        return os.readlink("/proc/self/fd/3") == "/dev/null"
    except OSError:
        return False


def autosaving(path):  # a checkpoint written on a timer, every 0.1 s
    signal.signal(signal.SIGALRM, lambda *_: open(path, "w").close())
    signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
    return True


first = {first}
import torch  # noqa: E402

x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
if first:  # the path a plain run takes: it reads a saved value the audit cannot see
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))
print("done")
"""


@pytest.mark.proof
@pytest.mark.parametrize(("first", "options", "stdin"), [
    ("os.umask(0o077) != 0o077", [], None),  # the program changed it (rev27s N15 class)
    ("signal.getsignal(signal.SIGINT) is signal.default_int_handler", [], None),  # N14
    ("bool(sys.warnoptions)", ["-W", "always"], None),  # N16
    ("os.environ.setdefault('WORLD_SIZE', '2') != '2' or True", [], None),  # N6
    ("sys.stdin is None", [], "closed"),  # rev27s N9
    ("__import__('stat').S_ISREG(os.fstat(0).st_mode)", [], "file"),  # rev27q Q15
    ("sys.stdout is None", [], "stdout-closed"),  # rev27s W3
    ("True", ["-I"], None),  # the rerun's watch would not load: could not tell, no 6
    ("os.getpriority(os.PRIO_PROCESS, 0) == int(os.environ['START_NICE']) and os.nice(5) > 0",
     [], None),  # rev27u B3
    ("signal.SIGUSR1 not in signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])", [],
     None),  # rev27u B1
    ("not locked_elsewhere('in.txt')", [], None),  # rev27u B4, B5
    ("(lambda r: r.getrlimit(r.RLIMIT_NOFILE)[0] == int(os.environ['START_NOFILE']) and "
     "r.setrlimit(r.RLIMIT_NOFILE, (r.getrlimit(r.RLIMIT_NOFILE)[0] - 1, "
     "r.getrlimit(r.RLIMIT_NOFILE)[1])) is None)(__import__('resource'))", [], None),  # B2
    ("not os.path.exists('result.txt') and autosaving('result.txt')", [], None),  # T36
    ("__import__('stat').S_ISSOCK(os.fstat(0).st_mode)", [], "socket"),  # rev27u R11
    ("__import__('resource').getrlimit(__import__('resource').RLIMIT_AS)[1] == "
     "int(os.environ['START_AS_HARD']) and lowered_hard_memory_limit()", [], None),  # rev27w
    ("__import__('stat').S_ISFIFO(os.fstat(0).st_mode)", [], "empty-pipe"),  # rev27w N1
    ("os.path.dirname(os.path.abspath(__file__)) not in sys.path", ["-P"], None),  # N17
    ("given_fd_3()", [], "fd-3"),  # rev27w N20
], ids=["umask", "sigint", "warnoptions", "world-size", "stdin-closed", "stdin-file",
        "stdout-closed", "isolated", "nice", "sigmask", "flock", "rlimit", "itimer",
        "stdin-socket", "hard-limit", "empty-pipe", "safe-path", "fd-3"])
def test_the_rerun_starts_as_the_program_did(tmp_path, first, options, stdin):
    """A plain run takes the first path; the rerun must too, or it proves nothing: the gate
    never exits 6 here (without the flag the first path fails)."""
    import resource

    script = tmp_path / "starts.py"
    script.write_text(STARTS_AS.format(first=first))
    (tmp_path / "in.txt").write_text("data\n")
    command = [sys.executable, *options, "-m", "retaincheck", "--fail-on-unneeded", script.name]
    if stdin in ("closed", "stdout-closed", "fd-3"):
        command = ["sh", "-c", " ".join(command) + {"closed": " <&-", "stdout-closed": " >&-",
                                                    "fd-3": " 3</dev/null"}[stdin]]
    import socket

    ours, theirs = socket.socketpair()
    ours.close()
    with open(tmp_path / "in.txt", "rb") as given, theirs:
        feed = ({"input": ""} if stdin == "empty-pipe" else
                {"stdin": given if stdin == "file" else theirs if stdin == "socket" else None})
        proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=180,
                              check=False, **feed,
                              env={**{k: v for k, v in os.environ.items()
                                      if k != "WORLD_SIZE"},
                                   "START_NICE": str(os.getpriority(os.PRIO_PROCESS, 0)),
                                   "START_NOFILE": str(resource.getrlimit(
                                       resource.RLIMIT_NOFILE)[0]),
                                   "START_AS_HARD": str(resource.getrlimit(
                                       resource.RLIMIT_AS)[1])})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven" in proc.stderr or "NEEDED" in proc.stdout, proc.stdout + proc.stderr


ORDINARY = """import os
import subprocess
from pathlib import Path

import torch

os.makedirs("runs/ckpt", exist_ok=True)  # a folder made on the first run, reused after
Path("runs/logs").mkdir(parents=True, exist_ok=True)
try:  # the GPU's name for the log, where there is one
    gpu = subprocess.run(["nvidia-smi-not-here", "-L"], capture_output=True).stdout
except FileNotFoundError:
    gpu = b""
w = torch.ones(3, requires_grad=True)
for epoch in range(2):
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    torch.save({"w": w.detach(), "epoch": epoch}, "runs/ckpt/tmp.pt")
    os.replace("runs/ckpt/tmp.pt", "runs/ckpt/last.pt")  # an atomic save
    with open("runs/logs/train.log", "a") as log:
        log.write(f"epoch {epoch}\\n")
print("grad", w.grad.tolist())
"""


@pytest.mark.proof
def test_an_ordinary_checkpointing_program_is_proven(tmp_path):
    """rev27r O1, O6, O7, O8, rev27s: folders made with exist_ok, an atomic save (os.replace
    onto the checkpoint) and a command not found are no look at the audited run's results: a
    first run in a fresh folder is proven (the flag there is truly not needed)."""
    script = tmp_path / "train.py"
    script.write_text(ORDINARY)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "proven: the rerun exited 0 as the audited run did" in proc.stderr, proc.stderr


DOUBLE_FORK = """import subprocess
import sys

import torch

WORKER = \'\'\'
import os, time
# in the rerun only: the audited run's own would stop the proof before it starts
if os.environ.get("RETAINCHECK_PROOF_SPEC") and os.fork() == 0:  # detaches: its child
    if os.fork() == 0:  # works on after the program
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # a daemon's: holds none of the program's pipes
            os.dup2(null, fd)
        time.sleep(10)  # well past the 3 s the proof waits, however slow the machine
    os._exit(0)
\'\'\'
x = torch.ones(3, requires_grad=True)
y = (x * x).sum()
y.backward(retain_graph=True)
subprocess.run([sys.executable, "-c", WORKER], check=True)
print("grad", x.grad.tolist())
"""


@pytest.mark.proof
def test_a_forked_worker_still_running_after_the_program_is_not_proven(tmp_path):
    """rev27r N07: a started worker's double-forked grandchild walked the graph 3.6 s after
    the program ended; forked children are held to account as started ones."""
    script = tmp_path / "detach.py"
    script.write_text(DOUBLE_FORK)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: part of the program ran out of the rerun's reach (still running" in (
        proc.stderr), proc.stderr


PORT = """import socket

import torch

x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
try:  # this run's control port, held to the end
    server = socket.socket()
    server.bind(("127.0.0.1", {port}))
    server.listen()
    control = True
except OSError:
    control = False
if control:  # statistics of the saved values for the control port
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))
print("done")
"""


@pytest.mark.proof
def test_a_port_the_program_still_holds_is_free_for_the_rerun(tmp_path):
    """rev27s N12: the program's socket still held its port when the rerun started, so the
    rerun took the other path; a plain run's exit would have freed it. (A thread still serving
    it makes the proof not hold: test_what_still_runs_...)"""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "page.py"
    script.write_text(PORT.format(port=port))
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NEEDED" in proc.stdout, proc.stdout + proc.stderr


LEFTOVER = """import os
import subprocess
import sys
import threading
import time

import torch

if os.path.exists("result.txt"):  # an earlier run finished: resume
    print("resumed")
    sys.exit(0)
x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
getattr(z.grad_fn, "".join(reversed("tluser_devas_")))  # a read the audit cannot see
{start}
print("done")
"""


@pytest.mark.proof
@pytest.mark.parametrize("start", [
    # an autosave thread rewrites the result while the rerun starts (rev27t T01)
    "threading.Thread(target=lambda: [open('result.txt', 'w').close() or time.sleep(0.05) "
    "for _ in range(200)], daemon=True).start()\ntime.sleep(0.2)",
    # a detached job publishes the result later (rev27t T02)
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1); "
    "open(\"result.txt\", \"w\").close(); time.sleep(5)'], start_new_session=True)",
    # a final save 0.15 s after the program's end, by a daemon thread (rev27v V06)
    "threading.Thread(target=lambda: time.sleep(0.15) or open('result.txt', 'w').close(), "
    "daemon=True).start()",
    # a thread started below threading, not in threading.enumerate() (rev27v V01)
    "__import__('_thread').start_new_thread(lambda: [open('result.txt', 'w').close() or "
    "time.sleep(0.05) for _ in range(200)], ())\ntime.sleep(0.2)",
    # the same, with an environment of its own (rev27v V02)
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1); "
    "open(\"result.txt\", \"w\").close(); time.sleep(5)'], start_new_session=True, "
    "env={'PATH': '/usr/bin:/bin'})",
], ids=["daemon-thread", "detached-process", "late-thread-save", "raw-thread",
        "detached-own-env"])
def test_what_still_runs_of_the_audited_program_makes_the_proof_not_hold(tmp_path, start):
    """A thread or a process of the audited program still running when the rerun starts may
    rewrite what the rerun starts from. The program runs in a child process that has ended
    before the rerun starts, taking its threads with it (the rerun then takes the first path
    and fails: NEEDED); a process started from it that still runs makes the site "could not
    tell: kept". No 6 either way."""
    script = tmp_path / "left.py"
    script.write_text(LEFTOVER.format(start=start))
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if "thread" in start:  # it ended with the child process that ran the program
        assert "verdict: NEEDED: walked again by a rerun" in proc.stdout, proc.stdout
    else:
        assert "NOT proven: part of the program was still running when it ended" in (
            proc.stderr), proc.stdout + proc.stderr


SCRATCH = """import os
import shutil
import tempfile

import torch

shutil.rmtree("scratch", ignore_errors=True)  # a clean scratch folder for each run
os.makedirs("scratch")
tempfile.tempdir = os.path.abspath("scratch")  # big temporaries go there
if os.path.isdir("run"):  # keep the previous run's results
    shutil.rmtree("run.old", ignore_errors=True)
    os.rename("run", "run.old")
os.makedirs("run")
x = torch.ones(3, requires_grad=True)
(x * x).sum().backward(retain_graph=True)
with open("run/result.txt", "w") as f:
    f.write("this run")
print("done")
"""


@pytest.mark.proof
def test_setting_aside_and_putting_back_loses_nothing(tmp_path):
    """rev27t T15: the set-aside folder went where the program had pointed tempfile (a folder
    it cleans on each run) and the audited run's results were lost; rev27t: a rerun that
    rotates `run` to `run.old` had the audited run's `run` deleted by the put-back. The
    set-aside folder is the one from before the program ran, never in the working folder,
    and the put-back deletes nothing."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.txt").write_text("previous")
    script = tmp_path / "rotate.py"
    script.write_text(SCRATCH)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode in (0, 6), proc.stdout + proc.stderr
    assert "could not put" not in proc.stderr, proc.stderr
    assert (tmp_path / "run.old" / "result.txt").read_text() == "previous"
    kept = [line for line in proc.stderr.splitlines() if "what the rerun left at" in line]
    assert kept, proc.stderr  # the audited run's `run`, rotated by the rerun: kept, not lost
    aside = Path(kept[0].rsplit(" is in ", 1)[1])
    assert not str(aside).startswith(str(tmp_path))
    assert sorted(p.read_text() for p in aside.rglob("result.txt")) == ["this run"], (
        list(aside.rglob("*")))
    shutil.rmtree(aside)


def test_the_interpreters_options_are_read_as_python_reads_them(monkeypatch):
    """rev27u: `python -uW always -m retaincheck` was read as `-uW` alone, and the rerun could
    not start; a flag cluster ends at -m or -c, and -W, -X take the rest or the next word."""
    from retaincheck._proof import _interpreter_options

    for argv, options in [
        (["py", "-uW", "always", "-m", "retaincheck", "x.py"], ["-uW", "always"]),
        (["py", "-Wignore::DeprecationWarning", "-m", "r"], ["-Wignore::DeprecationWarning"]),
        (["py", "-OO", "-X", "dev", "x.py"], ["-OO", "-X", "dev"]),
        (["py", "-Im", "retaincheck"], ["-I"]),
        (["py", "-W", "error", "-c", "pass"], ["-W", "error"]),
    ]:
        monkeypatch.setattr(sys, "orig_argv", argv)
        assert _interpreter_options() == options, argv


GLOO_LEFT = """import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "{port}")
dist.init_process_group("gloo", rank=0, world_size=1)  # never destroyed
x = torch.ones(3, requires_grad=True)
(x * x).sum().backward(retain_graph=True)
print("done")
"""


@pytest.mark.proof
def test_sockets_that_cpp_code_holds_are_left_alone(tmp_path):
    """rev27u B15: releasing a socket gloo's C++ thread still served aborted the gate (exit
    134, no report) where a plain run exits 0; only sockets Python made are released."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "gloo_left.py"
    script.write_text(GLOO_LEFT.format(port=port))
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode in (0, 6), proc.stdout + proc.stderr
    assert "verdict:" in proc.stdout, proc.stdout + proc.stderr


SLOW_RERUN = """import os
import time

import torch

with open("made.txt", "w") as f:
    f.write("the audited run's")
x = torch.ones(3, requires_grad=True)
(x * x).sum().backward(retain_graph=True)
if os.environ.get("RETAINCHECK_PROOF_SPEC"):  # the rerun: long enough to be stopped
    time.sleep(30)
"""


@pytest.mark.proof
def test_what_was_set_aside_comes_back_when_retaincheck_is_stopped(tmp_path):
    """rev27u D1: stopped (SIGTERM: a time limit) during the rerun, retaincheck left the
    audited run's files in the temporary folder and said nothing."""
    import signal
    import time

    script = tmp_path / "slow.py"
    script.write_text(SLOW_RERUN)
    gate = subprocess.Popen([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                             script.name], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "made.txt").exists():  # written by the audited run
            assert time.monotonic() < deadline and gate.poll() is None
            time.sleep(0.05)
        while (tmp_path / "made.txt").exists():  # set aside for the rerun
            assert time.monotonic() < deadline and gate.poll() is None
            time.sleep(0.05)
        gate.send_signal(signal.SIGTERM)
        gate.wait(timeout=60)
    finally:
        if gate.poll() is None:
            gate.kill()
            gate.wait()
    assert (tmp_path / "made.txt").read_text() == "the audited run's"


RESUME_FROM_A_GLOB = """import glob
import os

import torch

if glob.glob("**/ckpt_*.txt", recursive=True):  # resume from a checkpoint
    raise SystemExit(0)
x = torch.ones(3, requires_grad=True)
z = x.exp()
z.sum().backward(retain_graph=True)
getattr(z.grad_fn, "".join(reversed("tluser_devas_")))
os.makedirs("ckpts", exist_ok=True)
open("ckpts/ckpt_1.txt", "w").close()
"""


@pytest.mark.proof
def test_with_the_temporary_folder_inside_the_working_folder_the_set_aside_goes_above_it(
        tmp_path):
    """rev27t T38: TMPDIR inside the working folder (a cluster's habit): what was set aside
    lay where the rerun's recursive glob found it. It now goes into the folder above the
    working folder (on its file system), where the glob does not reach, and comes back."""
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    script = work / "resume.py"
    script.write_text(RESUME_FROM_A_GLOB)
    proc = subprocess.run([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                           script.name], cwd=work, capture_output=True, text=True,
                          timeout=180, check=False,
                          env={**os.environ, "TMPDIR": str(work / "tmp")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NEEDED: walked again by a rerun without retain_graph=True, which failed" \
        in proc.stdout, proc.stdout + proc.stderr
    assert (work / "ckpts" / "ckpt_1.txt").exists()
    assert not list(tmp_path.glob(".retaincheck-aside-*"))  # emptied and removed


@pytest.mark.proof
def test_with_no_folder_above_on_its_file_system_what_was_made_stays_and_is_watched(tmp_path):
    """The docs' sentence on a working folder that is a mount point: with no folder above it
    on its file system (here _above_on is made to find none, as on a mount point, and TMPDIR
    lies inside the folder), what the audited run made stays in place, and the rerun's look
    at it (a recursive glob for a checkpoint) makes the proof fail instead of a false 6."""
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    (work / "resume.py").write_text(RESUME_FROM_A_GLOB)
    code = ("import sys\nimport retaincheck._proof as p\np._above_on = lambda *a: None\n"
            "from retaincheck.__main__ import main\n"
            "sys.exit(main(['--fail-on-unneeded', 'resume.py']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True,
                          text=True, timeout=180, check=False,
                          env={**os.environ, "TMPDIR": str(work / "tmp")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun read ., which the audited run had written" in proc.stderr, \
        proc.stdout + proc.stderr
    assert "set aside" not in proc.stderr  # nothing was
    assert (work / "ckpts" / "ckpt_1.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert sorted(p.name for p in work.iterdir()) == ["ckpts", "resume.py", "tmp"]


LEFT_OPEN = """import csv
import sys
import tempfile
import zipfile

import torch

import logsetup  # a module of the project's own that opens a log and never closes it

sys.path.insert(0, "vendor/site-packages")  # vendored dependencies
import runlog  # an installed-looking package's module that keeps its file (rev34a L1)


class Tee:  # the copied "Logger(object)" that sends stdout to a file too, kept in a global
    def __init__(self, name):
        self.terminal, self.log = sys.stdout, open(name, "w")

    def write(self, text):
        self.terminal.write(text)
        self.log.write(text)

    def flush(self):
        pass


tee = Tee("out.txt")
sys.stdout = tee
metrics = csv.writer(open("metrics.csv", "w", newline=""))  # never closed
preds = zipfile.ZipFile("preds.zip", "w")  # never closed: its directory is written at exit
scratch = tempfile.NamedTemporaryFile(dir=".", prefix="scratch-")  # removed at exit
w = torch.ones(3, requires_grad=True)
for step in range(2):
    (w * 2).pow(2).sum().backward(retain_graph=True)
    (w * 3).pow(2).sum().backward()
    metrics.writerow([step, w.grad.sum().item()])
    preds.writestr(f"step{step}.txt", str(step))
    logsetup.LOG.write(f"step {step}\\n")
    runlog.LOG.write(f"step {step}\\n")
    print("step", step)
"""


@pytest.mark.proof
def test_the_audited_run_ends_as_python_does_files_left_open_are_written(tmp_path):
    """rev30a H1: under the proof, the audited run's child ended with os._exit, so a file the
    program left open (a csv writer, a tee of stdout kept in a global, a log in a module of
    its own) was never flushed, a ZipFile never got its directory and a NamedTemporaryFile
    stayed. The folder after the gate must be as a plain run leaves it. rev34a L1: one that
    only an installed package's module held was never flushed (its globals are not cleared)."""
    plain, gated = tmp_path / "plain", tmp_path / "gated"
    for folder in (plain, gated):
        folder.mkdir()
        (folder / "train.py").write_text(LEFT_OPEN)
        (folder / "logsetup.py").write_text("LOG = open('module.log', 'w')\n")
        (folder / "vendor" / "site-packages").mkdir(parents=True)
        (folder / "vendor" / "site-packages" / "runlog.py").write_text(
            "LOG = open('vendor.log', 'w')\n")
    run = subprocess.run([sys.executable, "train.py"], cwd=plain, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    proc = cli("--fail-on-unneeded", "train.py", cwd=gated)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "proven: the rerun exited 0 as the audited run did" in proc.stderr

    def files(folder):  # (a zip's entries, not its bytes: they hold the time of writing)
        import zipfile

        return {p.name: (p.read_bytes() if p.suffix != ".zip" else
                         {n: zipfile.ZipFile(p).read(n) for n in zipfile.ZipFile(p).namelist()})
                for p in folder.iterdir() if p.is_file()}

    left = files(gated)
    assert sorted(left) == sorted(files(plain)) == [
        "logsetup.py", "metrics.csv", "module.log", "out.txt", "preds.zip", "train.py",
        "vendor.log"]
    assert left == files(plain)
    assert left["out.txt"] == b"step 0\nstep 1\n" and left["module.log"] and left["vendor.log"]


FROM_FILE = """import torch

w = torch.ones(3, requires_grad=True)
try:  # the cache a first run leaves, read by C++ (no Python open, no audit event)
    cached = torch.from_file("cache.bin", shared=False, size=3)
except RuntimeError:
    cached = None
if cached is None:
    z = w.exp()
    z.sum().backward(retain_graph=True)
    getattr(z.grad_fn, "".join(reversed("tluser_devas_")))  # a saved-tensor read, hidden
    z.detach().numpy().tofile("cache.bin")
print("done")
"""


@pytest.mark.proof
def test_a_temporary_folder_on_another_file_system_still_sets_aside(tmp_path):
    """rev27v V23: TMPDIR on another file system (a tmpfs /tmp) made the rename fail, the
    cache stayed, C++ read it unseen, the rerun took the cached path: a false 6. The set-aside
    now goes above the working folder, on the cache's own file system."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system here (/dev/shm is missing or on the same one)")
    work = tmp_path / "work"
    work.mkdir()
    (work / "cache_script.py").write_text(FROM_FILE)
    other = tempfile.mkdtemp(dir=shm)
    try:
        proc = subprocess.run([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                               "cache_script.py"], cwd=work, capture_output=True, text=True,
                              timeout=180, check=False, env={**os.environ, "TMPDIR": other})
        assert os.listdir(other) == []
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NEEDED: walked again by a rerun without retain_graph=True, which failed" \
        in proc.stdout, proc.stdout + proc.stderr
    assert (work / "cache.bin").exists()
    assert not list(tmp_path.glob(".retaincheck-aside-*"))


WRAPPED = """import torch

w = torch.ones(3, requires_grad=True)
a = (w * 2).sum()
a.backward(
    retain_graph=True,
)
(w * 3).sum().backward(retain_graph=True)
out = w.exp()
l1 = out.sum(); l1.backward(retain_graph=True)
l2 = (out * 2).sum(); l2.backward()
print(w.grad.tolist())
"""


@pytest.mark.proof
def test_a_removal_over_several_lines_forces_the_lines_of_the_edited_file(tmp_path):
    """rev28a F4: removing a formatter-wrapped flag moves the lines below it up; the rerun
    forced the original line numbers off in the edited file, hit the needed l1 line and
    refuted a correct fix. The forced lines follow the edit now."""
    script = tmp_path / "wrapped.py"
    script.write_text(WRAPPED)
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "retaincheck --fix: wrote 2 changes in 1 file, proven" in proc.stdout, proc.stdout
    text = script.read_text()
    assert text.count("retain_graph=True") == 1 and "l1.backward(retain_graph=True)" in text
    plain = snippetcheck.run_file(script, timeout=120)
    assert plain.returncode == 0 and plain.stdout == proc.stdout.splitlines(True)[0], plain.stderr


INTERRUPTED_RERUN = """import os
import time

import torch

x = torch.ones(3, requires_grad=True)
(x * x).sum().backward(retain_graph=True)
print("done")
if os.environ.get("RETAINCHECK_PROOF_SPEC"):  # the rerun: long enough for a Ctrl-C
    open("rerun-started", "w").close()
    time.sleep(30)
"""


@pytest.mark.proof
def test_ctrl_c_during_the_rerun_exits_130_and_proves_nothing(tmp_path):
    """rev28a F2: Ctrl-C (SIGINT to the foreground group) during the rerun: the rerun's -2 was
    read as a failure without the flag, the site called needed, the gate exited 0. Now the
    report is printed, the site is "could not tell: kept", nothing is written, status 130."""
    script = tmp_path / "slow.py"
    script.write_text(INTERRUPTED_RERUN)
    before = script.read_bytes()
    code, out, err = ctrl_c_during_the_rerun(
        [sys.executable, "-m", "retaincheck", "--fix", "--write", "--fail-on-unneeded",
         script.name], tmp_path)
    assert code == 130, out + err
    assert "COULD NOT TELL: KEPT: no later backward() or grad() walked this graph, but " \
        "removing the flag is not proven (the rerun was interrupted (Ctrl-C))" in out, out
    assert "NEEDED: walked again" not in out
    assert script.read_bytes() == before


def test_a_file_of_an_installed_package_is_never_edited(tmp_path):
    """rev28a F6: a package in the user's site folder (pip install --user) was rewritten by
    --fix --write; another project that needs its flag then broke. Any site-packages or
    dist-packages folder is an installed package's."""
    package = tmp_path / "env" / "lib" / "site-packages" / "steplib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "def walk(loss):\n    loss.backward(retain_graph=True)\n")
    before = (package / "__init__.py").read_bytes()
    (tmp_path / "train.py").write_text(
        f"import sys\nsys.path.insert(0, {str(package.parent)!r})\n"
        "import torch\nfrom steplib import walk\n\n"
        "walk(torch.ones(3, requires_grad=True).exp().sum())\n")
    proc = cli("--fix", "--write", "--skip-proof", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "kept: the file belongs to an installed package or the standard library" \
        in proc.stdout, proc.stdout
    assert (package / "__init__.py").read_bytes() == before
    # rev29a G1: pip install --target DIR: no site-packages in the path, a RECORD beside it
    target = tmp_path / "pylibs"
    package.parent.rename(target)
    (tmp_path / "train.py").write_text(
        (tmp_path / "train.py").read_text().replace(str(package.parent), str(target)))
    (target / "steplib-1.0.dist-info").mkdir()
    (target / "steplib-1.0.dist-info" / "RECORD").write_text(
        "steplib/__init__.py,sha256=x,40\nsteplib-1.0.dist-info/RECORD,,\n")
    proc = cli("--fix", "--write", "--skip-proof", "train.py", cwd=tmp_path)
    assert "kept: the file belongs to an installed package or the standard library" \
        in proc.stdout, proc.stdout
    assert (target / "steplib" / "__init__.py").read_bytes() == before


ONE_SITE = """import os

import torch

x = torch.ones(3, requires_grad=True)
(x * x).sum().backward(retain_graph=True)
print("done")
"""


def test_a_file_that_cannot_be_written_is_one_line_and_left_alone(tmp_path):
    """rev28a F11: --fix --write where the edited copy cannot be made (a read-only folder; here
    a folder stands at the copy's name): a traceback, status 1, no report. Now the head says
    nothing was written and why, the report is printed, the status is the run's."""
    script = tmp_path / "train.py"
    script.write_text(ONE_SITE)
    (tmp_path / "train.py.retaincheck-tmp").mkdir()
    proc = cli("--fix", "--write", "--skip-proof", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "retaincheck --fix: nothing written (could not write " in proc.stdout, proc.stdout
    assert "verdict: NOT NEEDED" in proc.stdout
    assert script.read_text() == ONE_SITE


@pytest.mark.proof  # a rerun
def test_a_script_edited_while_the_proof_ran_is_not_overwritten(tmp_path):
    """rev28a F9: an edit saved to the script during the rerun was replaced by the fix, made
    from the text read before it. The file is read again: changed, nothing is written."""
    script = tmp_path / "train.py"
    edit = ("if os.environ.get('RETAINCHECK_PROOF_SPEC'):  # the rerun: the user saves an edit\n"
            "    with open(__file__, 'a') as f:\n        f.write('# my edit\\n')\n")
    script.write_text(ONE_SITE + edit)
    proc = cli("--fix", "--write", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "retaincheck --fix: nothing written (" in proc.stdout
    assert "train.py changed while the proof ran); 1 change in 1 file, proven" in proc.stdout, \
        proc.stdout
    assert script.read_text() == ONE_SITE + edit + "# my edit\n"


KILLED_RERUN = """import os
import time

import torch

x = torch.ones(3, requires_grad=True)
(x * x).sum().backward(retain_graph=True)
if os.environ.get("RETAINCHECK_PROOF_SPEC"):  # the rerun
    open(os.path.join(os.environ["MARKS"], "rerun-started"), "w").close()
    time.sleep(3)
    open(os.path.join(os.environ["MARKS"], "rerun-went-on"), "w").close()
else:
    with open("ckpt.txt", "w") as f:
        f.write("the audited run's")
"""


@pytest.mark.proof
def test_a_killed_retaincheck_says_where_the_files_are_and_its_rerun_dies(tmp_path):
    """rev28b F11: SIGKILL during the rerun left the audited run's file in a temporary folder
    that nothing named, and the orphaned rerun went on in the working folder. The folder is
    named on stderr before the rerun, and the rerun dies with retaincheck."""
    import time

    work, marks = tmp_path / "work", tmp_path / "marks"
    work.mkdir()
    marks.mkdir()
    (work / "train.py").write_text(KILLED_RERUN)
    gate = subprocess.Popen([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                             "train.py"], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MARKS": str(marks)})
    try:
        deadline = time.monotonic() + 120
        while not (marks / "rerun-started").exists():
            assert time.monotonic() < deadline and gate.poll() is None
            time.sleep(0.05)
        gate.kill()
        _, err = gate.communicate(timeout=60)
    finally:
        if gate.poll() is None:
            gate.kill()
            gate.wait()
    time.sleep(4)  # past the rerun's sleep: had it lived, it would have marked it
    assert not (marks / "rerun-went-on").exists()
    named = re.search(r"what the audited run created is set aside in (\S+)", err)
    assert named, err
    aside = Path(named[1])
    try:
        assert (aside / "0").read_text() == "the audited run's"
    finally:
        shutil.rmtree(aside, ignore_errors=True)


HEARTBEAT = """import threading
import time

import torch

step = -1
log = open("train.log", "w")  # never closed


def heartbeat():  # a daemon that reads the script's globals to the end
    while True:
        open("status.txt", "w").write(str(step + 0))
        time.sleep(0.005)


threading.Thread(target=heartbeat, daemon=True).start()
w = torch.ones(3, requires_grad=True)
for step in range(3):
    (w * 2).exp().sum().backward(retain_graph=True)
    log.write(f"step {step}\\n")
    time.sleep(0.02)
print("done")
"""


@pytest.mark.proof
def test_with_a_daemon_thread_running_the_globals_stay_and_open_files_are_flushed(tmp_path):
    """rev31a F2, rev31b F-d2: the audited run's end cleared the script's globals while its
    daemon thread still ran (the interpreter stops such threads first): the thread failed on
    None with a traceback a plain run never prints. Its files left open are flushed instead."""
    (tmp_path / "train.py").write_text(HEARTBEAT)
    proc = cli("--fail-on-unneeded", "train.py", cwd=tmp_path)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Exception in thread" not in proc.stderr
    assert (tmp_path / "train.log").read_text() == "step 0\nstep 1\nstep 2\n"


def test_a_site_is_named_and_edited_where_it_ran_after_the_program_moves(tmp_path,
                                                                       monkeypatch):
    """rev34a K1: a script that does os.chdir(its own folder) was named from there
    ("train.py:7" for exp2/train.py), and --fix joined that name with the folder the run
    started in: it proved and wrote ./train.py, a copy whose second backward() then raised."""
    from retaincheck._fix import _locate

    text = ("import os\nos.chdir(os.path.dirname(os.path.abspath(__file__)))\nimport torch\n"
            "w = torch.ones(3, requires_grad=True)\nloss = (w * w).sum()\n"
            "loss.backward(retain_graph=True)\n")
    (tmp_path / "exp2").mkdir()
    (tmp_path / "train.py").write_text(text + "loss.backward()\n")  # needs the flag
    script = tmp_path / "exp2" / "train.py"
    script.write_text(text)
    monkeypatch.chdir(tmp_path)
    with retaincheck.audit() as report:
        exec(compile(text, str(script), "exec"), {"__file__": str(script)})
    (call,) = report.calls
    assert (call.file, call.line, call.verdict) == ("exp2/train.py", 6, "not needed")
    assert _locate(call, [str(tmp_path)]) == (str(script), None)
    call.file = "train.py"  # named as before: the file Python ran still decides
    assert _locate(call, [str(tmp_path)]) == (str(script), None)
    call.file = "exp2/train.py"
    del call._source  # a record from JSON, or from an xdist worker: its name alone
    assert _locate(call, [str(tmp_path)]) == (str(tmp_path / "exp2" / "train.py"), None)


@pytest.mark.proof
def test_the_same_lines_in_another_order_prove_nothing(tmp_path):
    """rev34a J6: the rerun's standard output was compared as sorted lines; without the flag
    the activation a weakref.finalize watches is freed at the backward pass, so its line
    comes before "backward done", not after. Another order is a difference."""
    script = tmp_path / "train.py"
    script.write_text(
        "import weakref\n\nimport torch\n\nx = torch.ones(4, requires_grad=True)\n"
        "for step in range(2):\n    h = x * 2\n"
        "    weakref.finalize(h, print, f'step {step}: activation freed')\n"
        "    loss = h.sin().sum()\n    loss.backward(retain_graph=True)\n    del h\n"
        "    print(f'step {step}: backward done')\n")
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("NOT proven: the rerun printed the audited run's lines in another order (first "
            "difference: line 1: 'step 0: backward done' became 'step 0: activation freed')"
            ) in proc.stderr, proc.stderr


def test_a_sites_line_is_found_as_python_counts_and_decodes_lines():
    """rev34a K4: a form feed (a page break some editors keep between sections) counted as a
    line break, so every site below it was "gone or changed since the run"; rev34a J7, J8: a
    latin-1 file's or a byte-order mark's first bytes were decoded as UTF-8."""
    from retaincheck._fix import _code_line

    source = b"\xef\xbb\xbfimport torch\n\x0c\nloss.backward(retain_graph=True)  # here\n"
    assert [_code_line(source, n) for n in (1, 3)] == [
        "import torch", "loss.backward(retain_graph=True)"]
    latin = "# -*- coding: latin-1 -*-\nperte.backward(retain_graph=True)  # é\n"
    assert _code_line(latin.encode("latin-1"), 2) == "perte.backward(retain_graph=True)"
    assert _code_line("é = 1\r\nloss.backward()\r".encode(), 2) == "loss.backward()"


@pytest.mark.proof
def test_a_rerun_that_hangs_is_stopped_and_proves_nothing(tmp_path, monkeypatch):
    """rev35b NEW-8: without the flag the program waited forever (here: for a tensor the
    graph keeps, freed at once without it), and the gate's rerun with it; a rerun ten times
    as long as the audited run (a minute at least; two seconds here) is stopped."""
    import contextlib
    import io
    import time

    from retaincheck import _proof
    from retaincheck.__main__ import main

    script = tmp_path / "train.py"
    script.write_text(
        "import time\nimport weakref\n\nimport torch\n\nx = torch.ones(3, requires_grad=True)\n"
        "h = x * 2\nkept = weakref.ref(h)\nloss = h.sin().sum()\ndel h\n"
        "loss.backward(retain_graph=True)\nwhile kept() is None:  # waits for what never comes\n"
        "    time.sleep(0.1)\nprint('done')\n")
    monkeypatch.setattr(_proof, "RERUN_MIN_S", 2.0)
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main(["--fail-on-unneeded", "train.py"])
    assert status == 0 and time.monotonic() - start < 60, err.getvalue()
    assert "NOT proven: the rerun was still running after " in err.getvalue(), err.getvalue()


@pytest.mark.proof
def test_the_rerun_finds_a_site_of_a_script_run_by_a_relative_name(tmp_path):
    """rev36a S-run: a launcher runs an experiment's script with os.chdir(exp) and
    runpy.run_path("train.py"); the rerun resolved the relative name once, from the
    launcher's folder, never met the site and proved nothing ("the rerun never ran")."""
    (tmp_path / "exp1").mkdir()  # run first, under the same relative name
    (tmp_path / "exp1" / "train.py").write_text(
        "import torch\n\nw = torch.ones(3, requires_grad=True)\n(w * 2).sum().backward()\n")
    (tmp_path / "exp2").mkdir()
    (tmp_path / "exp2" / "train.py").write_text(
        "import torch\n\nw = torch.ones(3, requires_grad=True)\n"
        "torch.tanh(w).sum().backward(retain_graph=True)\nprint(w.grad)\n")
    # (one after the other: a loop that runs module code again is never told, rev65a A1)
    (tmp_path / "train.py").write_text(
        "import os\nimport runpy\n\nroot = os.getcwd()\nos.chdir('exp1')\n"
        "runpy.run_path('train.py', run_name='__main__')\nos.chdir(root)\n"
        "os.chdir('exp2')\nrunpy.run_path('train.py', run_name='__main__')\n"
        "os.chdir(root)\n")
    proc = cli("--fail-on-unneeded", "train.py", cwd=tmp_path)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "exp2/train.py:4  torch.tanh(w).sum().backward(retain_graph=True)" in proc.stdout
    assert "proven: the rerun exited 0 as the audited run did" in proc.stderr, proc.stderr
