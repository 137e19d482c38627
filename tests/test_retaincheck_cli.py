"""``python -m retaincheck``: the report, --json, exit codes, and one-line errors on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import snippetcheck

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "retaincheck"


def cli(*args: str, cwd: Path | None = None) -> snippetcheck.Run:
    """``python -m retaincheck args...``, run in a fork of the snippets' warm interpreter (torch
    already imported: about 2 s less per run). ``SNIPPETS_FRESH_INTERPRETER=1`` runs a new
    interpreter instead; the tests pass both ways. What needs a fresh interpreter
    (test_importing_retaincheck_patches_nothing in test_retaincheck_audit.py) starts one."""
    run = snippetcheck.run_module("retaincheck", list(args), cwd or ROOT, timeout=180)
    assert not run.timed_out, f"retaincheck {args} ran past 180 s"
    return run


def ctrl_c_during_the_rerun(command: list[str], cwd: Path, env: dict | None = None):
    """Start ``command`` as a shell starts a job (a process group of its own), wait until its
    rerun has written ``rerun-started`` in ``cwd``, then send SIGINT to the group, as Ctrl-C
    does: (exit status, stdout, stderr)."""
    import signal
    import time

    gate = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (cwd / "rerun-started").exists():
            assert time.monotonic() < deadline and gate.poll() is None, gate.communicate()
            time.sleep(0.05)
        os.killpg(gate.pid, signal.SIGINT)
        out, err = gate.communicate(timeout=60)
    finally:
        if gate.poll() is None:
            os.killpg(gate.pid, signal.SIGKILL)
            gate.wait()
    return gate.returncode, out, err


def test_readable_report_on_the_articles_first_example():
    proc = cli("tests/fixtures/retaincheck/article_example_1.py")
    assert proc.returncode == 0 and proc.stderr == ""
    assert "tests/fixtures/retaincheck/article_example_1.py:25" in proc.stdout
    assert "loss.backward(retain_graph=True)" in proc.stdout
    assert "NOT NEEDED" in proc.stdout and "remove retain_graph=True" in proc.stdout
    assert "232 bytes of saved tensors" in proc.stdout


def test_json_is_one_object_with_the_promised_fields(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        "import torch\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "y = x.exp().sum()\n"
        "print('the script prints this')\n"
        "y.backward(retain_graph=True)\n"
        "y.backward()\n"
    )
    proc = cli("--json", str(script))
    assert proc.returncode == 0
    data = json.loads(proc.stdout)  # stdout holds nothing but the JSON object
    assert "the script prints this" in proc.stderr
    (call,) = data["calls"]
    assert call["file"] == str(script) and call["line"] == 5
    assert call["needed"] is True and call["retained_bytes"] == 12
    assert isinstance(call["suggestion"], str) and call["verdict"] == "needed"


def test_empty_report_for_a_script_without_retain():
    proc = cli("--json", "tests/fixtures/retaincheck/no_retain.py")
    assert proc.returncode == 0 and json.loads(proc.stdout)["calls"] == []
    proc = cli("tests/fixtures/retaincheck/no_retain.py")
    assert "no backward() or autograd.grad() call used retain_graph=True in this process (a " \
        "process it started other than by fork, such as the ranks of " \
        "torch.multiprocessing.spawn, is not audited)" in proc.stdout  # rev28b F13


@pytest.mark.proof  # a spawned rank: a new interpreter that imports torch (about 4 s)
def test_the_ranks_torch_multiprocessing_spawn_starts_are_not_audited(tmp_path):
    """The Limits' sentence: a rank that torch.multiprocessing.spawn starts passes
    retain_graph=True unseen, and the report says no call in this process used it."""
    script = tmp_path / "ranks.py"
    script.write_text(
        "import torch\nimport torch.multiprocessing as mp\n\n"
        "def rank(i):\n"
        "    x = torch.ones(2, requires_grad=True)\n"
        "    y = (x * x).sum()\n"
        "    y.backward(retain_graph=True)\n"
        "    y.backward()\n"
        "    print('rank', i, 'grad', x.grad.tolist(), flush=True)\n\n"
        "if __name__ == '__main__':\n"
        "    mp.spawn(rank, nprocs=1)\n"
    )
    proc = cli(script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 grad [4.0, 4.0]" in proc.stdout + proc.stderr  # the flag's call did run
    assert "no backward() or autograd.grad() call used retain_graph=True in this process" \
        in proc.stdout


def test_the_script_gets_its_own_argv_and_runs_as_main(tmp_path):
    script = tmp_path / "args.py"
    script.write_text(
        "import sys\nassert __name__ == '__main__'\nprint(sys.argv)\n"
        "import helper\nprint(helper.VALUE)\n"
    )
    (tmp_path / "helper.py").write_text("VALUE = 42\n")  # the script's folder is importable
    proc = cli(str(script), "--lr", "0.1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"[{str(script)!r}, '--lr', '0.1', '--json']\n42\n")


def test_exit_code_is_preserved_and_the_report_still_printed(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text(
        "import sys, torch\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "(x.exp().sum()).backward(retain_graph=True)\n"
        "sys.exit(3)\n"
    )
    proc = cli(str(script))
    assert proc.returncode == 3
    assert "NOT NEEDED" in proc.stdout and proc.stderr == ""


def test_an_uncaught_exception_exits_1_with_the_scripts_own_traceback(tmp_path):
    script = tmp_path / "crashes.py"
    script.write_text(
        "import torch\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "y = x.exp().sum()\n"
        "y.backward(retain_graph=True)\n"
        "y.backward()\n"
        "def fail():\n"
        "    raise ValueError('boom')\n"
        "fail()\n"
    )
    proc = cli("--json", str(script))
    assert proc.returncode == 1
    assert proc.stderr.startswith("Traceback (most recent call last):\n")
    assert f'File "{script}", line 8, in <module>' in proc.stderr
    assert "ValueError: boom" in proc.stderr
    assert "retaincheck" not in proc.stderr and "runpy" not in proc.stderr
    assert json.loads(proc.stdout)["calls"][0]["needed"] is True


def test_a_leak_that_crashes_the_script_is_still_reported(tmp_path):
    """With an optimizer step inside the loop, the leaking RNN fails; the report still names the
    leak (issue 27: the step hid it as a plain "needed")."""
    script = tmp_path / "rnn_step.py"
    script.write_text(
        (FIXTURES / "rnn_leak.py").read_text()
        + "    torch.optim.SGD(cell.parameters(), lr=0.1).step()\n"
    )
    proc = cli(str(script))
    assert proc.returncode == 1
    assert "modified by an inplace operation" in proc.stderr
    assert "NEEDED ONLY BECAUSE HISTORY LEAKS: walked again by" in proc.stdout
    assert "h = h.detach()" in proc.stdout


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.py", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: _write(d / "model.bin", b"\x00\x01\x02torch"), "not a Python script"),
        (lambda d: _write(d / "notes.txt", b"these are notes, not code\n"), "not a Python script"),
        (lambda d: _write(d / "broken.py", b"import torch\nif True print(1)\n"), "syntax error"),
    ],
    ids=["missing", "directory", "binary", "not-python", "syntax-error"],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, make, message):
    path = make(tmp_path)
    proc = cli(str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"retaincheck: error: {path}: {message}")


def test_usage_errors_are_one_line_and_exit_2():
    for args in ([], ["--jsn", "x.py"], ["--json"]):
        proc = cli(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
    assert cli("--help").returncode == 0


def test_the_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.scripts]\nretaincheck = "retaincheck.__main__:main"' in text


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


CLI_FIXTURES = FIXTURES / "cli"


@pytest.mark.parametrize("name", ["thread_after_main.py", "atexit.py"])
def test_a_reuse_after_the_main_code_returns_is_seen(name, tmp_path):
    """Python waits for non-daemon threads and runs atexit handlers after the main code; so
    does the audit. Ground truth: without the flag, that late reuse fails."""
    proc = cli(str(CLI_FIXTURES / name))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "ok" in proc.stdout and "NEEDED: walked again by" in proc.stdout
    assert "NOT NEEDED" not in proc.stdout
    assert proc.stdout.count(" ok") == 1  # the atexit handler ran once, not twice
    copy = tmp_path / name
    text = (CLI_FIXTURES / name).read_text()
    copy.write_text(text.replace("retain_graph=True", "retain_graph=False"))
    plain = snippetcheck.run_file(copy, timeout=120)
    assert "backward through the graph a second time" in plain.stderr


IN_PROCESS_TWICE = """\
import contextlib, io, sys, weakref
from retaincheck.__main__ import main
def torchs():
    return sum(1 for info in weakref.finalize._registry.values()
               if info.atexit and getattr(info.func, "__module__", None) == "torch.library")
assert "torch" not in sys.modules
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main([sys.argv[1]]) == 0
import torch
assert "NEEDED: walked again by" in out.getvalue(), out.getvalue()
assert out.getvalue().count("atexit regrad ok True") == 1, out.getvalue()
print("torch.library exit finalizers:", torchs(), "prims.sum:", hasattr(torch.ops.prims, "sum"))
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1).step()
print("second step ok")
"""


@pytest.mark.proof  # a new interpreter that imports torch (about 4 s): .ci/run runs it
def test_a_run_leaves_this_interpreters_own_exit_work_alone():
    """main() run inside a program (the tests do so): the script's atexit handler still runs in
    the audit, but the exit finalizers that are the interpreter's own stay for its exit: torch's
    operator libraries among them, even when the audit is what first imported torch. Had they
    run, torch's prims operators would be gone, and the next optimizer step in this interpreter
    would fail on importing torch._dynamo ("'prims' object has no attribute 'sum'"), as a CI
    run on torch 2.14.1 did. A new interpreter, so that torch is not imported yet."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", IN_PROCESS_TWICE, str(CLI_FIXTURES / "atexit.py")],
        capture_output=True, text=True, timeout=180, cwd=ROOT, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    counts, step = proc.stdout.splitlines()
    assert step == "second step ok"
    assert counts.endswith("prims.sum: True") and int(counts.split()[3]) > 100, counts


def test_json_stdout_holds_only_the_json_even_for_fd_writes_and_subprocesses():
    proc = cli("--json", str(CLI_FIXTURES / "fd_output.py"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing else on file descriptor 1
    assert data["calls"][0]["verdict"] == "not needed"
    assert "fd1 write\n" in proc.stderr and "child echo\n" in proc.stderr


# -- behaving like python script.py / python -m module ---------------------------------------

def test_the_script_sees_what_python_gives_it_and_may_chdir_to_its_folder(tmp_path):
    """``__file__`` absolute, ``sys.argv[0]`` as typed, ``sys.path[0]`` the script's folder
    with links resolved, as ``python sub/train.py`` gives them; so ``os.chdir`` to the
    script's folder and a relative open work, and the retain there is still audited."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    (tmp_path / "sub" / "data.txt").write_text("3\n")
    (tmp_path / "sub" / "train.py").write_text(
        "import os, sys\n"
        "import torch\n"
        "here = os.path.dirname(__file__)\n"
        "print(os.path.isabs(__file__), __file__ == os.path.join(os.getcwd(), sys.argv[0]))\n"
        "print(sys.argv, sys.path[0] == os.path.join(os.getcwd(), 'sub'))\n"
        "os.chdir(here)\n"
        "n = int(open('data.txt').read())\n"
        "x = torch.ones(n, requires_grad=True)\n"
        "x.exp().sum().backward(retain_graph=True)\n"
    )
    for folder in ("sub", "link"):  # python puts sub/ on sys.path for link/train.py too
        proc = cli(f"{folder}/train.py", "--lr", "0.1", cwd=tmp_path)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.startswith(f"True True\n['{folder}/train.py', '--lr', '0.1'] True\n")
        assert "train.py:9  x.exp().sum().backward(retain_graph=True)" in proc.stdout


def _package(tmp_path: Path) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("SCALE = 2.0\n")
    body = (
        "import os, sys\n"
        "import torch\n"
        "from . import helper\n"
        "print(__name__, __spec__.name, sys.argv == [__file__, '--lr', '1'],\n"
        "      sys.path[0] == os.getcwd())\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "y = (x * helper.SCALE).exp().sum()\n"
        "y.backward(retain_graph=True)\n"
    )
    (pkg / "train.py").write_text(body)
    (pkg / "__main__.py").write_text(body)


def test_dash_m_runs_a_module_as_python_dash_m_does(tmp_path):
    _package(tmp_path)
    proc = cli("-m", "mypkg.train", "--lr", "1", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("__main__ mypkg.train True True\n")
    assert "mypkg/train.py:8  y.backward(retain_graph=True)" in proc.stdout
    assert "NOT NEEDED" in proc.stdout
    proc = cli("--json", "-m", "mypkg", "--lr", "1", cwd=tmp_path)  # a package: its __main__
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("__main__ mypkg.__main__ True True\n")
    assert json.loads(proc.stdout)["calls"][0]["file"] == "mypkg/__main__.py"


HOST_THREAD = """\
import threading, sys
from retaincheck.__main__ import main

stop = threading.Event()
host = threading.Thread(target=stop.wait, name="the-host-s-own")  # the program's, not the script's
host.start()
try:
    code = main(["--fail-on-unneeded", "unneeded.py"])
finally:
    stop.set()
    host.join()
sys.exit(code)
"""


@pytest.mark.proof  # one rerun, a new interpreter
def test_the_hosts_own_thread_does_not_stop_the_gates_proof(tmp_path):
    """main() called by a program that runs a thread of its own: the script ran in a child
    process, whose threads ended with it, so the host's thread is no leftover of the script's
    and the gate's rerun proves the 6 (before, "could not tell": a thread still ran)."""
    (tmp_path / "unneeded.py").write_text(
        "import torch\nx = torch.ones(3, requires_grad=True)\n"
        "x.exp().sum().backward(retain_graph=True)\n"
    )
    (tmp_path / "host.py").write_text(HOST_THREAD)
    proc = snippetcheck.run_module("host", [], tmp_path, timeout=180)
    assert proc.returncode == 6, proc.stderr
    assert "could not tell" not in proc.stdout + proc.stderr
    assert "the-host-s-own" not in proc.stdout + proc.stderr


CONSOLE_SCRIPT = """\
import sys

sys.path[0] = {bin!r}  # as the console script: its bin folder first, not the working directory
from retaincheck.__main__ import main

code = main(["-m", "mypkg.train", "--lr", "1"])
assert sys.path[0] == {bin!r}, sys.path[0]  # restored
sys.exit(code)
"""


def test_dash_m_finds_the_module_in_the_working_directory_whatever_started_it(tmp_path):
    """As the ``retaincheck`` console script, whose ``sys.path[0]`` is its bin folder: the
    command's main() in a process that has another folder first on ``sys.path``.

    Not in the pytest process: main() ends as a program does, running the interpreter's
    ``atexit`` handlers (torch's among them, which unregister its operators), so the tests
    after it in the same process failed (``torch.ops.prims`` lost ``sum``).
    """
    _package(tmp_path)
    (tmp_path / "console.py").write_text(CONSOLE_SCRIPT.format(bin=str(tmp_path / "bin")))
    proc = snippetcheck.run_module("console", [], tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("__main__ mypkg.train True True\n"), proc.stdout
    assert "mypkg/train.py:8  y.backward(retain_graph=True)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "no_such_module_here"], "-m no_such_module_here: No module named no_such_"),
        (["-m", "mypkg.nothing"], "-m mypkg.nothing: No module named mypkg.nothing"),
        (["-m", "json.tool.x"], "-m json.tool.x: Error while finding module specification"),
        (["-m"], "-m needs a module name"),
        (["--fix-it", "x.py"], "unknown option '--fix-it'"),
        (["--write", "x.py"], "--write only goes with --fix"),
    ],
    ids=["missing-module", "missing-submodule", "not-a-package", "no-name", "unknown", "write"],
)
def test_bad_module_or_option_is_one_line_and_exit_2(tmp_path, args, message):
    _package(tmp_path)
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"retaincheck: error: {message}"), proc.stderr


# -- Ctrl-C, exit statuses, --fail-on-unneeded ------------------------------------------------

def test_ctrl_c_exits_130_and_still_prints_what_was_recorded():
    proc = cli(str(CLI_FIXTURES / "interrupted.py"))
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stdout.startswith("step 1 done\n")
    assert "retaincheck: 1 call site used retain_graph=True" in proc.stdout
    assert "interrupted.py:11  y.backward(retain_graph=True)  (ran once)" in proc.stdout
    assert proc.stderr.startswith("Traceback") and proc.stderr.endswith("KeyboardInterrupt\n")
    proc = cli("--fail-on-unneeded", "--json", str(CLI_FIXTURES / "interrupted.py"))
    assert proc.returncode == 130
    assert json.loads(proc.stdout)["calls"][0]["line"] == 11


HARD_EXIT = """import os
import sys

import torch

x = torch.ones(3, requires_grad=True)
x.exp().sum().backward(retain_graph=True)
print("step done")
sys.stdout.flush()
os._exit({status})  # skips the exit work (a DataLoader's or NCCL's teardown that hangs)
"""


@pytest.mark.parametrize("status", [0, 3])
def test_a_program_that_ends_with_os_exit_is_still_reported(tmp_path, status):
    """rev28a F8: os._exit(0) at the end of a script: no report, and under the gate the
    program's own output lost and status 0. The audit ends at os._exit, the report follows,
    and the status is what it would be at the program's end."""
    script = tmp_path / "hard.py"
    script.write_text(HARD_EXIT.format(status=status))
    proc = cli("--fail-on-unneeded", "--skip-proof", script.name, cwd=tmp_path)
    assert proc.stdout.startswith("step done\n"), proc.stdout + proc.stderr
    assert "hard.py:7  x.exp().sum().backward(retain_graph=True)  (ran once)" in proc.stdout
    if status == 0:
        assert proc.returncode == 6, proc.stdout + proc.stderr
        assert "NOT NEEDED" in proc.stdout
    else:
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert proc.stderr.endswith(
            "retaincheck: the program did not complete (exit status 3); no verdict is final\n")


@pytest.mark.proof  # a rerun
def test_the_gate_proves_a_program_that_ends_with_os_exit(tmp_path):
    """rev28a F8 under the gate's child process: the program's output reaches the terminal
    whole, the rerun proves the site, status 6."""
    script = tmp_path / "hard.py"
    script.write_text(HARD_EXIT.format(status=0))
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert proc.stdout.startswith("step done\n"), proc.stdout
    assert "proven: the rerun exited 0 as the audited run did" in proc.stderr, proc.stderr


PEEKING = """import sys

import torch

seen = []


def hook(grad):  # debug: with which options is backward running?
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "backward" and "retain_graph" in frame.f_locals:
            seen.append(frame.f_locals["retain_graph"])
            break
        frame = frame.f_back
    return grad


w = torch.ones(3, requires_grad=True)
w.register_hook(hook)
(w.tanh() * 2).sum().backward(retain_graph=True)
print(seen)
"""


@pytest.mark.proof  # a rerun
def test_the_gates_rerun_runs_the_text_without_the_flag(tmp_path):
    """rev37a G7: a profiler that records the options backward was called with prints
    another line without the flag (the audit now keeps a site a profile function sees:
    test_retaincheck_audit.py); so does a gradient hook that reads them from backward's
    frame, which no audit sees. The gate's rerun only forced graph-keeping off below the
    call, so they still saw True: proven, 6. It runs a copy of the file with the flag
    removed, as --fix's does, where --fix could remove it; nothing is written."""
    script = tmp_path / "peeking.py"
    script.write_text(PEEKING)
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun's standard output differs" in proc.stderr, proc.stderr
    assert script.read_text() == PEEKING


CRASH_AT_EXIT = """import atexit
import os
import signal

import torch

x = torch.ones(3, requires_grad=True)
for step in range(2):
    x.exp().sum().backward(retain_graph=True)
    print("step", step)
atexit.register(os.kill, os.getpid(), signal.SIGSEGV)  # a C extension's crash at exit
"""


def test_a_program_killed_in_its_exit_work_keeps_its_output_and_says_so(tmp_path):
    """rev28a F8b: under the gate, a program killed by a signal in its exit work lost its last
    printed line and no line said that the run had no verdict. Python flushes what was
    printed when the main code ends; the gate passes all of it on, then one line says why
    there is no report, and the status is the signal's, as the shell's."""
    (tmp_path / "crash.py").write_text(CRASH_AT_EXIT)
    proc = cli("--fail-on-unneeded", "crash.py", cwd=tmp_path)
    assert proc.returncode == 128 + 11, proc.stdout + proc.stderr
    assert proc.stdout == "step 0\nstep 1\n", proc.stdout
    assert proc.stderr.endswith("retaincheck: the program ended without the audit's report "
                                "(killed by signal 11); no verdict\n"), proc.stderr


SCRIPTS = {
    # name: (source, exit status without the flag, with --fail-on-unneeded)
    "unneeded": ("y.backward(retain_graph=True)\n", 0, 6),
    "needed": ("y.backward(retain_graph=True)\ny.backward()\n", 0, 0),
    "none": ("y.backward()\n", 0, 0),
    "raises": ("y.backward(retain_graph=True)\nraise ValueError('boom')\n", 1, 1),
    "exits-4": ("y.backward(retain_graph=True)\nimport sys\nsys.exit(4)\n", 4, 4),
    "exits-0": ("y.backward(retain_graph=True)\nimport sys\nsys.exit(0)\nprint(y)\n", 0, 6),
    "exits-msg": ("y.backward(retain_graph=True)\nimport sys\nsys.exit('bye')\n", 1, 1),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_exit_statuses_with_and_without_fail_on_unneeded(tmp_path, name):
    """The table in --help, on the page and in the README. A run that did not complete keeps
    the program's own status (never 0), whether or not a site was proven not needed."""
    source, plain, gate = SCRIPTS[name]
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import torch\nx = torch.ones(3, requires_grad=True)\ny = x.exp().sum()\n" + source
    )
    assert cli(str(script)).returncode == plain
    # --skip-proof: the gate's rerun is tested once, below (each costs a new interpreter)
    proc = cli("--fail-on-unneeded", "--skip-proof", str(script))
    assert proc.returncode == gate, proc.stderr
    if gate == 6:
        assert proc.stderr.endswith(
            "retaincheck: --skip-proof: the program was not rerun without the flag, so the "
            "verdict is unproven\n"
            "retaincheck: 1 retain_graph=True call site is not needed (exit status 6)\n"
        )
    elif gate != 0:
        assert proc.stderr.endswith(
            f"retaincheck: the program did not complete (exit status {gate}); "
            "no verdict is final\n"
        )
    else:
        assert "retaincheck:" not in proc.stderr


@pytest.mark.proof  # one more rerun; ci_gate.py (a lesson) runs the gate's proven path by default
def test_the_gate_reruns_the_program_before_it_says_not_needed(tmp_path):
    """rev27e N3: a saved tensor read through a name the search cannot see (built at run time)
    gets "not needed" from the audit alone; the gate's rerun without the flag fails, so the
    site is needed and the gate passes (status 0), with one line that says why."""
    # rev32a G1: a flag passed as a name (retain_graph=keep) is written on another line, which
    # the program may read: "could not tell" from the audit alone, with no rerun
    script = tmp_path / "hidden_read.py"
    source = (FIXTURES / "cli" / "hidden_read.py").read_text()
    named = source.replace("y.sum().backward(retain_graph=True)",
                           "keep = True\ny.sum().backward(retain_graph=keep)")
    assert named != source
    script.write_text(named)
    alone = cli("--fail-on-unneeded", "--skip-proof", str(script))
    assert alone.returncode == 0 and "COULD NOT TELL: KEPT" in alone.stdout, alone.stdout
    keep = source
    script.write_text(keep)
    alone = cli("--fail-on-unneeded", "--skip-proof", str(script))
    assert alone.returncode == 6 and "NOT NEEDED" in alone.stdout  # what the audit alone says
    proc = cli("--fail-on-unneeded", str(script))
    assert proc.returncode == 0, proc.stderr
    assert "verdict: NEEDED: walked again by a rerun without retain_graph=True, which failed" \
        in proc.stdout
    assert proc.stderr.startswith(
        "retaincheck: checked without that 1 retain_graph=True (nothing written): NOT proven: "
        "the rerun failed (exit status 1): RuntimeError: Trying to backward through the graph"
    ), proc.stderr
    assert script.read_text() == keep  # nothing written
    # rev27i G1c: with --fix too, the site --fix cannot edit is still rerun before any 6
    proc = cli("--fix", "--fail-on-unneeded", str(script))
    assert proc.returncode == 0, proc.stderr
    assert "verdict: NEEDED: walked again by a rerun without retain_graph=True" in proc.stdout


def test_help_documents_every_exit_status():
    out = cli("--help").stdout
    table = out[out.index("exit status:") :]
    for code in ("0", "N", "2", "6", "130"):
        assert f"\n  {code} " in table, code


def test_the_exit_status_table_is_on_the_page_and_in_the_readme():
    """One table, three places: each row's status appears in the README and in both
    languages of the page."""
    from retaincheck.__main__ import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_UNNEEDED

    for name in ("README.md", "docs/retaincheck.md", "docs/retaincheck.zh.md"):
        text = (ROOT / name).read_text()
        for code in (0, 1, EXIT_BAD_INPUT, EXIT_UNNEEDED, EXIT_INTERRUPTED):
            assert f"\n| `{code}` |" in text, (name, code)


# -- --json=PATH ------------------------------------------------------------------------------

def test_json_path_writes_the_file_and_prints_the_readable_report(tmp_path):
    proc = cli(f"--json={tmp_path}/out/report.json", str(FIXTURES / "article_example_1.py"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["calls"][0]["needed"] is False and "rank" not in data
    assert "NOT NEEDED" in proc.stdout
    assert cli(f"--json={tmp_path}", "x.py").returncode == 2  # a folder: bad input


@pytest.mark.proof
def test_a_thread_pool_left_open_does_not_hang_the_audit(tmp_path):
    """A ThreadPoolExecutor never shut down (torch.compile leaves one on a cold cache) ends at
    Python's exit, which tells its workers to stop before joining them
    (Lib/threading.py, _shutdown); the audit, which finishes the script as Python would,
    joined them first and waited for ever."""
    script = tmp_path / "pool.py"
    script.write_text(
        "from concurrent.futures import ThreadPoolExecutor\n"
        "import torch\n"
        "pool = ThreadPoolExecutor(2)\n"
        "print('pool', pool.submit(lambda: 1).result())\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "(x * x).sum().backward(retain_graph=True)\n"
    )
    run = snippetcheck.run_module("retaincheck", [script.name], tmp_path, timeout=60)
    assert not run.timed_out, "the audit waited for the pool's idle workers"
    assert run.returncode == 0 and "pool 1" in run.stdout and "NOT NEEDED" in run.stdout, run.stderr


@pytest.mark.proof
def test_a_program_that_execs_itself_keeps_its_output(tmp_path):
    """rev27n W1: under --fail-on-unneeded standard output is a pipe the audit reads; a program
    that replaces itself (os.execv) wrote into a pipe nobody read and died of BrokenPipeError.
    Before an exec the real output comes back."""
    script = tmp_path / "restarts.py"
    script.write_text(
        "import os, sys\nimport torch\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "(x * x).sum().backward(retain_graph=True)\n"
        "print('run', len(sys.argv), flush=True)\n"
        "if len(sys.argv) == 1:\n"
        "    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), 'again'])\n"
        "print('restarted', flush=True)\n"
    )
    proc = cli("--fail-on-unneeded", script.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ["run 1", "run 2", "restarted"], proc.stdout


@pytest.mark.proof
def test_a_closed_standard_input_does_not_break_the_gate(tmp_path):
    """rev27q W1: with standard input closed (<&-) the output pipe took fd 0 and the stdin
    tee then took it over: the gate exited 1 and the program's output was lost."""
    script = tmp_path / "plain.py"
    script.write_text("import os\n\nimport torch\n\nx = torch.ones(3, requires_grad=True)\n"
                      "(x * x).sum().backward(retain_graph=True)\n"
                      "try:\n    os.fstat(0)\nexcept OSError:\n    print('ok, closed')\n")
    proc = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m retaincheck --fail-on-unneeded plain.py <&-'],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=180)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    # rev28b F12: the program finds it closed, as without retaincheck (it had an empty pipe)
    assert proc.stdout.startswith("ok, closed\n"), proc.stdout


@pytest.mark.proof
def test_a_program_that_execs_gets_the_input_read_ahead_and_the_rest(tmp_path):
    """rev27s W2: the gate's copy of a piped standard input had read ahead of the program; a
    program that replaces itself then got none of it (exit 5 where python exits 0). The pipe
    stays on fd 0 and a child goes on filling it: first what was read ahead, then the rest."""
    script = tmp_path / "hands_on.py"
    script.write_text(
        "import os, sys, time\nimport torch\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "(x * x).sum().backward(retain_graph=True)\n"
        "time.sleep(0.5)\n"
        "os.execv(sys.executable, [sys.executable, '-c', "
        "'import sys; d = sys.stdin.read(); print(repr(d)); sys.exit(0 if d else 5)'])\n"
    )
    proc = subprocess.run(
        ["bash", "-c", f'(echo a; sleep 1.5; echo b) | "{sys.executable}" -m retaincheck '
                       "--fail-on-unneeded hands_on.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "'a\\nb\\n'\n", proc.stdout


@pytest.mark.proof
def test_the_gate_ends_when_its_output_is_cut_short(tmp_path):
    """rev27w N19: `| head -1` closed the gate's output; the thread that copies the program's
    output died on the broken pipe, nothing drained it, and the gate hung."""
    script = tmp_path / "talks.py"
    script.write_text("import torch\nx = torch.ones(3, requires_grad=True)\n"
                      "(x * x).sum().backward(retain_graph=True)\n"
                      "for i in range(20000):\n    print(i)\n")
    proc = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m retaincheck --fail-on-unneeded talks.py '
                       "| head -1; echo status ${PIPESTATUS[0]}"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert proc.stdout.splitlines() == ["0", "status 6"], proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


LISTS_ITS_FOLDER = """import os

import torch

print(sorted(name for name in os.listdir(".") if name.endswith(".py")))
x = torch.ones(3, requires_grad=True)
x.exp().sum().backward(retain_graph=True)
"""


@pytest.mark.proof  # a rerun
def test_retaincheck_s_own_log_in_the_folder_is_not_the_programs(tmp_path):
    """rev28a F7: `retaincheck ... > check.log 2>&1` in the working folder: the log grew, was
    taken for a change by the program, and a rerun that lists its folder was "NOT proven"."""
    (tmp_path / "train.py").write_text(LISTS_ITS_FOLDER)
    with open(tmp_path / "check.log", "w") as log:
        proc = subprocess.run([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                               "train.py"], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                              timeout=180, check=False)
    text = (tmp_path / "check.log").read_text()
    assert proc.returncode == 6, text
    assert "proven: the rerun exited 0 as the audited run did" in text, text


@pytest.mark.proof  # a rerun
def test_the_rerun_sees_the_command_line_the_program_saw(tmp_path):
    """rev28a N3: a program that prints sys.orig_argv printed retaincheck's command line in the
    audited run and the rerun's boot command in the rerun: never proven."""
    (tmp_path / "train.py").write_text(
        "import sys\n\nimport torch\n\nprint(sys.orig_argv[-2:])\n"
        "x = torch.ones(3, requires_grad=True)\nx.exp().sum().backward(retain_graph=True)\n")
    proc = subprocess.run([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                           "train.py", "a1"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=180, check=False)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert proc.stdout.startswith("['train.py', 'a1']\n"), proc.stdout


RESUMES = """import os
import sys

import torch

store = sys.argv[1]  # a checkpoint folder outside the working folder
x = torch.ones(3, requires_grad=True)
if not os.path.exists(os.path.join(store, "done")):
    z = x.exp()
    z.sum().backward(retain_graph=True)
    open(os.path.join(store, "done"), "w").close()
print("finished")
"""


@pytest.mark.proof  # a rerun
def test_a_rerun_that_never_runs_the_site_proves_nothing(tmp_path):
    """rev29a G2: the rerun resumed from the audited run's checkpoint outside the working
    folder, never ran the site, printed the same and exited 0: "proven". A forced site that
    no backward pass of the rerun started from makes the proof not hold."""
    work, store = tmp_path / "work", tmp_path / "store"
    work.mkdir()
    store.mkdir()
    (work / "train.py").write_text(RESUMES)
    proc = cli("--fail-on-unneeded", "train.py", str(store), cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun never ran train.py:10 (it took another path" in proc.stderr, \
        proc.stderr


def _signal_when(command: list[str], cwd: Path, marker: str, number: int, group: bool):
    """Start ``command`` in a session of its own, wait until ``marker`` exists in ``cwd``,
    then send ``number`` to its process (``group``: to its whole process group, as ``scancel``,
    ``timeout`` or a terminal's Ctrl-C do): (exit status, stdout, stderr)."""
    import signal
    import time

    gate = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (cwd / marker).exists():
            assert time.monotonic() < deadline and gate.poll() is None, gate.communicate()
            time.sleep(0.05)
        (os.killpg if group else os.kill)(gate.pid, number)
        out, err = gate.communicate(timeout=60)
    finally:
        if gate.poll() is None:
            os.killpg(gate.pid, signal.SIGKILL)
            gate.wait()
    return gate.returncode, out, err


PREEMPTED = """import signal
import sys
import time

import torch


def save_and_leave(number, frame):  # a preemption checkpoint (SLURM, Kubernetes)
    with open("ckpt.txt", "a") as f:
        f.write("saved\\n")
    time.sleep(1.5)  # a second SIGTERM now would start a second save
    sys.exit(0)


signal.signal(signal.SIGTERM, save_and_leave)
w = torch.ones(3, requires_grad=True)
for step in range(600):
    (w * 2).exp().sum().backward(retain_graph=True)
    if step == 2:
        open("running", "w").close()
    time.sleep(0.05)
"""


@pytest.mark.proof  # the audited run, stopped
@pytest.mark.parametrize("group", [False, True], ids=["to-retaincheck", "to-the-job"])
def test_a_stop_signal_during_the_audited_run_is_the_programs_once(tmp_path, group):
    """rev30a H2, rev30b F-k4, F-k5: SIGTERM sent to retaincheck ended it and left the
    program running, orphaned; sent to the whole job, it killed retaincheck while the program
    saved its checkpoint. Now the program gets it once, either way (a second SIGTERM would
    save twice), retaincheck waits for it, exits with its status, and starts no rerun."""
    import signal

    (tmp_path / "train.py").write_text(PREEMPTED)
    status, out, err = _signal_when(
        [sys.executable, "-m", "retaincheck", "--fail-on-unneeded", "train.py"], tmp_path,
        "running", signal.SIGTERM, group)
    assert status == 0, out + err
    assert (tmp_path / "ckpt.txt").read_text() == "saved\n"
    assert "NOT proven: the audited run got SIGTERM, so no rerun was started" in err, err
    assert "COULD NOT TELL: KEPT" in out


RERUN_WITH_A_LATE_JOB = """import os
import subprocess
import sys

import torch

w = torch.ones(3, requires_grad=True)
(w * 2).exp().sum().backward(retain_graph=True)
if os.path.exists("../first"):  # the rerun: its evaluation job writes late
    open("log.txt", "w").write("the rerun's")
    open("../rerun-started", "w").close()
    subprocess.run([sys.executable, "-c",
                    "import time; time.sleep(2); open('late.txt', 'w').close()"])
else:
    open("log.txt", "w").write("the audited run's")
open("../first", "w").close()
"""


def _stop_during_the_rerun(tmp_path: Path, number: int) -> None:
    """Send ``number`` to retaincheck alone while its rerun runs: retaincheck ends with
    128 + number, the rerun's late job never writes, and the audited run's file is back."""
    import time

    work = tmp_path / "work"  # (the audited run's files in it are set aside for the rerun)
    work.mkdir()
    (work / "train.py").write_text(RERUN_WITH_A_LATE_JOB)
    status, out, err = _signal_when(
        [sys.executable, "-m", "retaincheck", "--fail-on-unneeded", "train.py"], work,
        "../rerun-started", number, False)
    assert status == 128 + number, out + err
    time.sleep(3)
    assert not (work / "late.txt").exists()
    assert (work / "log.txt").read_text() == "the audited run's"


@pytest.mark.proof  # the audited run, then a rerun, stopped
def test_sigterm_to_retaincheck_stops_the_program_and_the_reruns_processes(tmp_path):
    """rev30a H2: a program that does not handle SIGTERM dies of it, as in a plain run, not
    left running after retaincheck. rev30b F-k2: SIGTERM during the rerun killed retaincheck
    and the rerun, but a process the rerun had started wrote in the folder after retaincheck
    had put it back and exited; the rerun's process group is now killed whole."""
    import signal
    import time

    _stop_during_the_rerun(tmp_path, signal.SIGTERM)
    (tmp_path / "loop.py").write_text(
        "import time\n\nimport torch\n\nw = torch.ones(3, requires_grad=True)\n"
        "(w * 2).exp().sum().backward(retain_graph=True)\nopen('running', 'w').close()\n"
        "for i in range(100):\n    time.sleep(0.1)\n    open('beat', 'a').write('.')\n")
    status, out, err = _signal_when(
        [sys.executable, "-m", "retaincheck", "--fail-on-unneeded", "loop.py"], tmp_path,
        "running", signal.SIGTERM, False)
    assert status == 143 and "killed by signal 15" in err, out + err
    beats = (tmp_path / "beat").read_text() if (tmp_path / "beat").exists() else ""
    time.sleep(1)
    assert ((tmp_path / "beat").read_text() if (tmp_path / "beat").exists() else "") == beats


def test_a_json_report_that_cannot_be_written_is_one_line_after_the_report(tmp_path):
    """rev30a H3: when the report file could not be put in place (here the program made a
    folder at that path; a file another user owns in /tmp, a full disk), retaincheck crashed
    with a traceback, printed no report and left PATH.tmpPID."""
    (tmp_path / "one.py").write_text(
        "import os\n\nimport torch\n\nw = torch.ones(3, requires_grad=True)\n"
        "(w * 2).pow(2).sum().backward(retain_graph=True)\nos.mkdir('report.json')\n")
    proc = cli("--json=report.json", "one.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "NOT NEEDED" in proc.stdout
    assert [line for line in proc.stderr.splitlines() if line] == [
        "retaincheck: error: --json=report.json: could not write it (Is a directory)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.py", "report.json"]


def test_a_json_path_that_is_a_link_is_written_through_never_replaced(tmp_path):
    """rev31b F-j1: --json=PATH renamed a new file over PATH, so a link into an artifacts
    folder (or /dev/stdout, a named pipe, a device) was replaced by a regular file and the
    report never reached where it led. Written through now; a full device (a link to
    /dev/full, where there is one) is the one-line error, status 2."""
    (tmp_path / "one.py").write_text(
        "import torch\n\nw = torch.ones(3, requires_grad=True)\n"
        "(w * 2).pow(2).sum().backward(retain_graph=True)\n")
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "report.json").write_text('{"old": true}\n')
    (tmp_path / "report.json").symlink_to(Path("artifacts") / "report.json")
    proc = cli("--json=report.json", "one.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "report.json").is_symlink()
    assert json.loads((tmp_path / "artifacts" / "report.json").read_text())["completed"] is True
    if Path("/dev/full").exists():
        (tmp_path / "full.json").symlink_to("/dev/full")
        proc = cli("--json=full.json", "one.py", cwd=tmp_path)
        assert proc.returncode == 2 and (tmp_path / "full.json").is_symlink()
        assert "retaincheck: error: --json=full.json: could not write it (No space left on " \
            "device)" in proc.stderr


@pytest.mark.proof  # the audited run, then a rerun, stopped by SIGUSR1
def test_sigusr1_during_the_rerun_puts_back_and_stops_the_reruns_processes(tmp_path):
    """rev31a F1: SIGUSR1 (a SLURM job's warning), SIGUSR2 or SIGQUIT during the rerun ended
    retaincheck by default: what the audited run made stayed in the temporary folder, the
    folder kept the rerun's half-written files, and the rerun's processes wrote on."""
    import signal

    _stop_during_the_rerun(tmp_path, signal.SIGUSR1)


IGNORES_CTRL_C = """import signal
import time

import torch

w = torch.ones(3, requires_grad=True)
for step in range(30):
    (w * 2).exp().sum().backward(retain_graph=True)
    if step == 10:  # a checkpoint that Ctrl-C must not cut in half
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(0.5)
        open("section.ending", "w").close()  # Ctrl-C comes now, near the section's end
        time.sleep(0.5)
        open("ckpt.txt", "w").write(f"step {step}")
        signal.signal(signal.SIGINT, old)
    time.sleep(0.1)
print("done")
"""


@pytest.mark.proof  # the audited run, a Ctrl-C it ignores
def test_a_ctrl_c_the_program_ignores_is_not_passed_on_later(tmp_path):
    """rev31b F-s1: the child's wakeup fd shows only signals with a Python handler; a Ctrl-C
    the program ignored (SIG_IGN around a checkpoint) was passed on a second later, after it
    had restored its handler, and ended a run that completes plainly."""
    import signal

    (tmp_path / "train.py").write_text(IGNORES_CTRL_C)
    status, out, err = _signal_when(
        [sys.executable, "-m", "retaincheck", "--fail-on-unneeded", "train.py"], tmp_path,
        "section.ending", signal.SIGINT, True)
    assert status == 0, out + err
    assert "done" in out and (tmp_path / "ckpt.txt").read_text() == "step 10"
    assert "NOT proven: the audited run got SIGINT, so no rerun was started" in err


@pytest.mark.proof  # the audited run and its rerun
def test_the_rerun_stays_in_retainchecks_process_group(tmp_path):
    """rev31a F4, rev31b F-t1: a rerun started in a process group of its own is a background
    job of the terminal: a getpass prompt (wandb.login, huggingface_hub.login) reading
    /dev/tty stopped it for good, and retaincheck waited forever. Both runs of the program
    are in retaincheck's own group, the terminal's foreground job."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(
        "import os\n\nimport torch\n\nw = torch.ones(3, requires_grad=True)\n"
        "(w * 2).exp().sum().backward(retain_graph=True)\n"
        "with open('../groups.txt', 'a') as f:\n    f.write(f'{os.getpgrp()}\\n')\n")
    gate = subprocess.run([sys.executable, "-m", "retaincheck", "--fail-on-unneeded",
                           "train.py"], cwd=work, capture_output=True, text=True, timeout=180,
                          check=False, start_new_session=True)
    assert gate.returncode == 6, gate.stdout + gate.stderr
    groups = (tmp_path / "groups.txt").read_text().split()
    assert len(groups) == 2 and len(set(groups)) == 1, groups


def test_the_json_reports_folder_is_made_after_the_run(tmp_path):
    """rev31b F-j2: --json=out/report.json made out/ before the run, so a program that makes
    its own output folder (os.makedirs(out), refusing an old run's) failed under retaincheck
    and completed plainly. A path under a file is still bad input, before the run."""
    (tmp_path / "run.py").write_text(
        "import os\n\nimport torch\n\nos.makedirs('out')  # a fresh run folder, or fail\n"
        "w = torch.ones(3, requires_grad=True)\n(w * 2).exp().sum().backward(retain_graph=True)\n")
    proc = cli("--json=out/report.json", "run.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["completed"] is True
    (tmp_path / "afile").write_text("")
    proc = cli("--json=afile/sub/report.json", "run.py", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("afile is not a folder")


LOADER = '''import importlib.abc
import importlib.util

import torch

w = torch.ones(3, requires_grad=True)
SOURCE = "def step(loss):\\n    loss.backward(retain_graph=True)\\n"


class MemoryLoader(importlib.abc.SourceLoader):
    """A module kept in memory: linecache asks get_source for its lines."""

    def get_filename(self, fullname):
        return "/in-memory/" + fullname + ".py"

    def get_data(self, path):
        return SOURCE.encode()

    def get_source(self, fullname):
        (w * 5).sum().backward(retain_graph=True)  # a cache warmed when asked
        return SOURCE


spec = importlib.util.spec_from_loader("plugin", MemoryLoader(), origin="/in-memory/plugin.py")
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
plugin.step((w * 2).sum())
print("done")
'''


@pytest.mark.proof  # a new interpreter that imports torch (about 4 s)
def test_a_loader_that_starts_a_backward_pass_when_asked_for_source_does_not_hang(tmp_path):
    """rev42a F2: the audit read a new site's line under its lock; a module loader's
    get_source that starts a backward pass came back to the same lock and waited for ever."""
    (tmp_path / "train.py").write_text(LOADER)
    proc = subprocess.run([sys.executable, "-m", "retaincheck", "train.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("done\n") and "/in-memory/plugin.py:2" in proc.stdout
