"""Run snippet files and compare what they print with the output stored beside them.

A snippet is a complete program in ``snippets/``; ``name.py`` prints exactly what
``name.out`` holds. The pages include both files, so the output a reader sees is the
output the code really prints. The same checker runs the site's snippets and the
deliberately broken fixtures in ``tests/fixtures/``, which proves the net catches failures.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS_DIR = ROOT / "snippets"
DEFAULT_TIMEOUT_S = 120.0


def discover(root: Path = SNIPPETS_DIR) -> list[Path]:
    """Every snippet under ``root``: ``*.py`` files not starting with ``_``."""
    return sorted(
        p
        for p in root.rglob("*.py")
        if not p.name.startswith("_") and "__pycache__" not in p.parts
    )


def output_path(snippet: Path) -> Path:
    return snippet.with_suffix(".out")


def snippet_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONHASHSEED="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONIOENCODING="utf-8",
        # The same thread count everywhere keeps floating-point output identical.
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@dataclass
class Run:
    returncode: int | None  # None when the run was killed at its time limit
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_file(path: Path, timeout: float = DEFAULT_TIMEOUT_S, args: list[str] | None = None) -> Run:
    """Run one Python file in its own interpreter, in an empty working directory."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="snippet-") as cwd:
        try:
            proc = subprocess.run(
                [sys.executable, str(path), *(args or [])],
                cwd=cwd,
                env=snippet_env(),
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            def text(b):
                return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")

            return Run(None, text(exc.stdout), text(exc.stderr), time.perf_counter() - start)
    return Run(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)


def run_code(code: str, timeout: float = DEFAULT_TIMEOUT_S) -> Run:
    """Run a piece of source (an inline markdown fence) as its own program."""
    with tempfile.TemporaryDirectory(prefix="fence-") as d:
        path = Path(d) / "fence.py"
        path.write_text(code, encoding="utf-8")
        return run_file(path, timeout)


def problems_of_run(run: Run, timeout: float) -> list[str]:
    """What is wrong with a run, whatever its output: a timeout, an error exit, stderr."""
    if run.timed_out:
        return [f"timed out after {timeout:g} s"]
    problems = []
    if run.returncode != 0:
        problems.append(f"exited with code {run.returncode}:\n{run.stderr[-4000:]}")
    elif run.stderr.strip():
        problems.append(
            f"wrote to stderr (catch warnings and print them):\n{run.stderr[-4000:]}"
        )
    return problems


def check(snippet: Path, update: bool = False, timeout: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """Run ``snippet`` and return a list of problems; an empty list means it passed.

    With ``update=True`` a clean run rewrites the stored output instead of comparing.
    """
    run = run_file(snippet, timeout)
    problems = problems_of_run(run, timeout)
    if problems:
        return problems
    expected_path = output_path(snippet)
    if update:
        expected_path.write_text(run.stdout, encoding="utf-8")
        return []
    if not expected_path.exists():
        return [f"no stored output {expected_path.name}: run pytest --update-snippets"]
    expected = expected_path.read_text(encoding="utf-8")
    if run.stdout != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                run.stdout.splitlines(keepends=True),
                fromfile=f"{expected_path.name} (stored, shown on the page)",
                tofile="actual output",
            )
        )
        return [f"output differs from {expected_path.name}:\n{diff}"]
    return []
