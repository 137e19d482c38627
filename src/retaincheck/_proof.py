"""``--fix``'s proof: rerun the program with the changes applied before anything is written.

The edited files are written to a temporary folder; a new interpreter runs the program as the
audited run did (the same script or ``-m`` module, arguments, working directory and
environment, standard input closed), with every edited file read from its temporary copy
under its own name (``__file__``, tracebacks and imports see the original path, and no
bytecode cache of the original is used). The program runs plainly, without the audit. The
proof holds when the rerun exits with the status the audited run had and its output has no
"backward through the graph a second time" or "saved tensors ... freed" error; only then does
``--fix --write`` write. It costs one more run of the program, plus a new interpreter's start
and torch's import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

FREED = (
    "backward through the graph a second time",
    "access saved tensors after they have already been freed",
)


@dataclass
class Proof:
    proven: bool
    reason: str  # one line: what the rerun did
    seconds: float


@dataclass
class Program:
    """How the audited program was started."""

    script: str | None
    module: str | None
    args: list[str]
    cwd: str
    status: int = 0


def prove(changes: dict[str, bytes], program: Program) -> Proof:
    """Rerun ``program`` with ``changes`` (real path -> new source) applied."""
    if _distributed():
        return Proof(False, "a rank of a distributed run (WORLD_SIZE > 1) cannot be rerun "
                     "alone", 0.0)
    with tempfile.TemporaryDirectory(prefix="retaincheck-proof-") as tmp:
        copies = {}
        for i, (path, source) in enumerate(sorted(changes.items())):
            copy = os.path.join(tmp, f"{i}-{os.path.basename(path)}")
            with open(copy, "wb") as f:
                f.write(source)
            copies[path] = copy
        spec = os.path.join(tmp, "spec.json")
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"script": program.script, "module": program.module,
                       "args": program.args, "copies": copies}, f)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        boot = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from retaincheck._proof import child; child(sys.argv[2])"
        )
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", boot, here, spec],
                cwd=program.cwd, env=dict(os.environ), stdin=subprocess.DEVNULL,
                capture_output=True, check=False,
            )
        except OSError as exc:
            return Proof(False, f"the rerun could not start ({exc.strerror or exc})", 0.0)
        seconds = time.perf_counter() - start
    output = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    if any(text in output for text in FREED):
        return Proof(False, f"the rerun failed (exit status {proc.returncode}): "
                     f"{_last_error(output)}", seconds)
    if proc.returncode != program.status:
        return Proof(False, f"the rerun exited with status {proc.returncode}, the audited run "
                     f"with {program.status}: {_last_error(output)}", seconds)
    return Proof(True, f"a rerun with the changes exited {proc.returncode} as the audited run "
                 f"did ({seconds:.1f} s)", seconds)


def _distributed() -> bool:
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line:
            return line[:160]
    return lines[-1][:160] if lines else "no output"


def child(spec_path: str) -> None:
    """In the rerun's interpreter: run the program as python would, edited files swapped in."""
    import importlib.machinery
    import runpy

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    copies = {os.path.realpath(k): v for k, v in spec["copies"].items()}

    def edited(path: str) -> str | None:
        return copies.get(os.path.realpath(path))

    class Loader(importlib.machinery.SourceFileLoader):
        def get_data(self, path):
            copy = edited(path)
            if copy is not None:
                with open(copy, "rb") as f:
                    return f.read()
            return super().get_data(path)

        def path_stats(self, path):
            if edited(path) is not None:
                raise OSError("edited: no bytecode cache")  # never the original's .pyc
            return super().path_stats(path)

        def set_data(self, path, data, *, _mode=0o666):
            return None  # writes no .pyc of an edited source

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            found = importlib.machinery.PathFinder.find_spec(name, path, target)
            origin = getattr(found, "origin", None)
            if found is not None and origin and edited(origin) is not None:
                found.loader = Loader(name, origin)
            return found

    sys.meta_path.insert(0, Finder)
    tail = sys.path[2:]  # drop retaincheck's folder and -c's '' (python script.py has neither)
    if spec["module"] is not None:
        sys.argv = [spec["module"], *spec["args"]]
        sys.path[:] = [os.getcwd(), *tail]
        runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
        return
    script = spec["script"]
    sys.argv = [script, *spec["args"]]
    sys.path[:] = [os.path.dirname(os.path.realpath(script)), *tail]
    filename = os.path.join(os.getcwd(), script)
    copy = edited(filename)
    with open(copy if copy is not None else filename, "rb") as f:
        source = f.read()
    from .__main__ import _main_module

    module = _main_module(filename)
    sys.modules["__main__"] = module
    exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
