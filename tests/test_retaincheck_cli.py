"""``python -m retaincheck``: the report, --json, exit codes, and one-line errors on bad input."""

from __future__ import annotations

import json
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
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"calls": []}
    proc = cli("tests/fixtures/retaincheck/no_retain.py")
    assert "no backward() or autograd.grad() call used retain_graph=True" in proc.stdout


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
    """With an optimizer step inside the loop, the leaking RNN fails; the report says why."""
    script = tmp_path / "rnn_step.py"
    script.write_text(
        (FIXTURES / "rnn_leak.py").read_text()
        + "    torch.optim.SGD(cell.parameters(), lr=0.1).step()\n"
    )
    proc = cli(str(script))
    assert proc.returncode == 1
    assert "modified by an inplace operation" in proc.stderr
    assert "NEEDED: walked again by" in proc.stdout and "h = h.detach()" in proc.stdout


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


def test_json_stdout_holds_only_the_json_even_for_fd_writes_and_subprocesses():
    proc = cli("--json", str(CLI_FIXTURES / "fd_output.py"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing else on file descriptor 1
    assert data["calls"][0]["verdict"] == "not needed"
    assert "fd1 write\n" in proc.stderr and "child echo\n" in proc.stderr
