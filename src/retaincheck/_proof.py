"""``--fix``'s proof: rerun the program with the changes applied before anything is written.

The edited files are written to a temporary folder; a new interpreter runs the program as the
audited run did (the same script or ``-m`` module, arguments, working directory and
environment, standard input closed), with every edited file read from its temporary copy
under its own name (``__file__``, tracebacks and imports see the original path, and no
bytecode cache of the original is used). The program runs plainly, without the audit. The
proof holds when the rerun exits with the status the audited run had, its output has no
"backward through the graph a second time" or "saved tensors ... freed" error, no such error
passed through any of its Python frames (caught or not: ``_watch_exceptions``) and its
standard output is the audited run's; only then does ``--fix --write`` write. It costs one
more run of the program, slowed by the trace function's call per Python function call, plus
a new interpreter's start and torch's import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from ._messages import message

FREED = (
    "backward through the graph a second time",
    "access saved tensors after they have already been freed",
)


@dataclass
class Proof:
    proven: bool
    reason: str  # one line: what the rerun did
    seconds: float
    ran: bool = True  # False: no rerun happened (under torchrun, or it could not start)


@dataclass
class Program:
    """How the audited program was started."""

    script: str | None
    module: str | None
    args: list[str]
    cwd: str
    status: int = 0
    stdout: bytes | None = None  # what the audited run wrote to its standard output


def prove(changes: dict[str, bytes], program: Program, lang: str = "en") -> Proof:
    """Rerun ``program`` with ``changes`` (real path -> new source) applied; the reason is in
    ``lang``."""
    def m(key, **values):
        return message(key, lang, **values)

    if _distributed():
        return Proof(False, m("proof_distributed"), 0.0, ran=False)
    with tempfile.TemporaryDirectory(prefix="retaincheck-proof-") as tmp:
        copies = {}
        for i, (path, source) in enumerate(sorted(changes.items())):
            copy = os.path.join(tmp, f"{i}-{os.path.basename(path)}")
            with open(copy, "wb") as f:
                f.write(source)
            copies[path] = copy
        spec = os.path.join(tmp, "spec.json")
        marker = os.path.join(tmp, "freed.txt")
        tracer = os.path.join(tmp, "tracer.txt")
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"script": program.script, "module": program.module,
                       "args": program.args, "copies": copies, "marker": marker,
                       "tracer": tracer}, f)
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
            return Proof(False, m("proof_no_start", error=exc.strerror or exc), 0.0, ran=False)
        seconds = time.perf_counter() - start
        caught = None
        own_tracer = os.path.exists(tracer)
        if os.path.exists(marker):
            with open(marker, encoding="utf-8", errors="replace") as f:
                caught = (f.read().strip().splitlines() or [""])[0][:160]
    output = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    if any(text in output for text in FREED):
        return Proof(False, m("proof_failed", status=proc.returncode,
                              error=_last_error(output, lang)), seconds)
    if proc.returncode != program.status:
        return Proof(False, m("proof_status", status=proc.returncode, audited=program.status,
                              error=_last_error(output, lang)), seconds)
    if caught:
        return Proof(False, m("proof_caught", error=caught), seconds)
    if own_tracer:
        return Proof(False, m("proof_tracer"), seconds)
    # Lines compared in any order: a program's prints and its subprocesses' output may
    # interleave differently through a pipe than on a terminal.
    if program.stdout is not None and sorted(proc.stdout.splitlines()) != sorted(
        program.stdout.splitlines()
    ):
        diff = _first_difference(program.stdout, proc.stdout, lang)
        return Proof(False, m("proof_stdout", diff=diff), seconds)
    return Proof(True, m("proof_ok", status=proc.returncode, seconds=f"{seconds:.1f}"), seconds)


def _first_difference(old: bytes, new: bytes, lang: str = "en") -> str:
    a = old.decode("utf-8", "replace").splitlines()
    b = new.decode("utf-8", "replace").splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return message("proof_line", lang, n=i + 1, old=repr(x[:60]), new=repr(y[:60]))
    return message("proof_lines", lang, old=len(a), new=len(b))


def _watch_engine(marker: str) -> None:
    """In the rerun: note any freed-graph error the autograd engine raises, even one the
    program catches (``try: loss.backward() except RuntimeError: ...``), which would otherwise
    pass as a clean run with different results. Every backward()/grad() call reaches the
    engine through ``Variable._execution_engine.run_backward`` (``torch/autograd/graph.py``,
    ``_engine_run_backward``), the entry the audit wraps too."""
    import torch  # noqa: F401 (the program imports it anyway)
    from torch.autograd.variable import Variable

    engine = Variable._execution_engine

    class Watch:
        def __getattr__(self, name):
            return getattr(engine, name)

        def run_backward(self, *args, **kwargs):
            try:
                return engine.run_backward(*args, **kwargs)
            except RuntimeError as exc:
                if any(text in str(exc) for text in FREED):
                    with open(marker, "a", encoding="utf-8") as f:
                        f.write(str(exc).replace("\n", " ") + "\n")
                raise

    Variable._execution_engine = Watch()


def _watch_exceptions(marker: str, tracer: str) -> None:
    """In the rerun: note a freed-graph error raised anywhere in Python code, even one the
    program catches. Not every unpack of a freed saved tensor goes through the engine: a node
    called directly (``y.grad_fn(g)``: ``THPCppFunction_call`` in
    ``torch/csrc/autograd/python_cpp_function.cpp``), a ``grad_fn._saved_*`` getter or a
    custom Function's ``ctx.saved_tensors`` raise from ``SavedVariable::unpack``
    (``torch/csrc/autograd/saved_variable.cpp``) in the frame that asked. A trace function
    sees every exception as it passes through a Python frame, in this thread and in threads
    started later (``sys.settrace``, ``threading.settrace``); line events are switched off,
    so it costs one call per function call and return.

    ``threading.settrace`` reaches only threads that ``threading`` starts
    (``Thread._bootstrap_inner``): a thread started by ``_thread.start_new_thread`` gets the
    trace function from a wrapper of that function here. A program that sets its own trace
    function (a debugger, coverage) replaces this one: that is noted (``tracer``), and the
    proof then does not hold."""
    import _thread
    import threading

    written = []

    def local(frame, event, arg):
        if event == "exception" and not written and issubclass(arg[0], RuntimeError):
            text = str(arg[1])
            if any(t in text for t in FREED):
                written.append(True)
                with open(marker, "a", encoding="utf-8") as f:
                    f.write(text.replace("\n", " ") + "\n")
        return local

    def start(frame, event, arg):
        frame.f_trace_lines = False
        return local

    def noted(setter):
        def settrace(function, *args, **kwargs):
            if function is not start:
                with open(tracer, "a", encoding="utf-8") as f:
                    f.write(f"{setter.__module__}.{setter.__name__}\n")
            return setter(function, *args, **kwargs)

        return settrace

    def traced(start_thread):
        def start_new_thread(function, *args, **kwargs):
            def run(*a, **k):
                sys.settrace(start)
                return function(*a, **k)

            return start_thread(run, *args, **kwargs)

        return start_new_thread

    threading.settrace(start)
    sys.settrace(start)
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, traced(getattr(_thread, name)))
    sys.settrace = noted(sys.settrace)
    threading.settrace = noted(threading.settrace)
    if hasattr(threading, "settrace_all_threads"):
        threading.settrace_all_threads = noted(threading.settrace_all_threads)


def _distributed() -> bool:
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _last_error(output: str, lang: str = "en") -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line:
            return line[:160]
    return lines[-1][:160] if lines else message("proof_no_output", lang)


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
    _watch_engine(spec["marker"])
    _watch_exceptions(spec["marker"], spec["tracer"])
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
