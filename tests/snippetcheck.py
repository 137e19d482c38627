"""Run snippet files and compare what they print with the output stored beside them.

A snippet is a complete program in ``snippets/``; ``name.py`` prints exactly what
``name.out`` holds. The pages include both files, so the output a reader sees is the
output the code really prints. The same checker runs the site's snippets and the
deliberately broken fixtures in ``tests/fixtures/``, which proves the net catches failures.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal
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


# A snippet that shows other output on the Chinese page (retaincheck's report in Chinese) prints
# it after a line "# --8<-- [out:zh]": what follows goes to name.zh.out, stored and compared as
# name.out is, and the .zh.md page includes that file.
LANG_MARK = re.compile(r"^# --8<-- \[out:(\w+)\]\n", re.MULTILINE)


def split_outputs(snippet: Path, stdout: str) -> dict[Path, str]:
    """The stored output file of each part of ``stdout``: ``name.out``, then ``name.LANG.out``."""
    parts = LANG_MARK.split(stdout)
    outputs = {output_path(snippet): parts[0]}
    for lang, text in zip(parts[1::2], parts[2::2], strict=True):
        outputs[Path(snippet).with_suffix(f".{lang}.out")] = text
    return outputs


# Other kernel paths and thread counts than the default run's, as a reader's machine may pick
# them: `pytest --cpu-variants` reruns every snippet under each and compares with the same
# stored output. ATEN_CPU_CAPABILITY picks ATen's vectorised kernels; MKL_CBWR=COMPATIBLE puts
# MKL's BLAS on its most conservative code path; ONEDNN_MAX_CPU_ISA caps oneDNN's.
# tests/test_snippets.py checks that each setting takes effect.
CPU_VARIANTS: dict[str, dict[str, str]] = {
    "default-isa": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "COMPATIBLE",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
    },
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    },
    "2-threads": {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
}


def snippet_env(variant: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONHASHSEED="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONIOENCODING="utf-8",
        # One thread by default; the output must not depend on it (see CPU_VARIANTS).
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    if variant is not None:
        env.update(CPU_VARIANTS[variant])
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# A decimal number as printed: digits, a point and at least one digit after it, an optional
# exponent (or an integer with an exponent). Not a number here: digits inside a name
# ("fc2.bias"), a version ("2.13.0"), a plain integer (a count, a size in bytes, a shape):
# those compare exactly, as text.
_NUMBER = re.compile(
    r"(?<![\w.])([+-]?(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+))(?!\.?\w)"
)


def _shape(number: str) -> str:
    """The printed form of a number with its digits blanked: '-0.057326' -> '0.000000'."""
    return re.sub(r"\d", "0", number.lstrip("+-"))


def outputs_match(expected: str, actual: str) -> bool:
    """Whether ``actual`` is the stored output ``expected``, up to the last printed digit.

    Everything but decimal numbers must be identical. A decimal number may differ by one unit
    in its last printed place, no more (``0.057326`` accepts ``0.057327`` and ``0.057325``),
    and must be printed the same way (as many digits after the point, the same exponent form).
    The last digit depends on the CPU: torch picks its kernels (MKL, oneDNN, ATen's vectorised
    paths) by processor and thread count, and they add floats up in different orders. A claim
    that two results are *exactly* equal belongs in an assertion (``torch.equal``), not in
    printed digits.

    Our own code, because the libraries we tried compare something else (measured here with
    pytest 9.2 and pytest-doctestplus 1.7.1): pytest's doctest ``NUMBER`` option compares in
    binary floating point, so it rejects many genuine one-unit differences (``0.057326``
    against ``0.057327`` among them), and it reads the ``2.`` of ``fc2.bias`` as a number;
    pytest-doctestplus's ``FLOAT_CMP`` applies a relative tolerance of 1e-5 whatever the
    printed precision, so it rejects the same pair and accepts ``0.5`` against ``0.500004``.
    """
    if expected == actual:
        return True
    want, got = _NUMBER.split(expected), _NUMBER.split(actual)
    # split() with one capturing group alternates: text, number, text, ..., text.
    if len(want) != len(got):
        return False
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        if i % 2 == 0:
            if w != g:
                return False
            continue
        if _shape(w) != _shape(g):
            return False
        unit = Decimal(1).scaleb(Decimal(w).as_tuple().exponent)
        if abs(Decimal(w) - Decimal(g)) > unit:
            return False
    return True


@dataclass
class Run:
    returncode: int | None  # None when the run was killed at its time limit
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class _Server:
    """One warm interpreter (``snippetserver.py``) per CPU variant, started on first use."""

    running: dict[str | None, subprocess.Popen] = {}

    @classmethod
    def get(cls, variant: str | None) -> subprocess.Popen:
        proc = cls.running.get(variant)
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("snippetserver.py"))],
                env=snippet_env(variant),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                encoding="utf-8",
            )
            cls.running[variant] = proc
        return proc

    @classmethod
    def run(cls, request: dict, variant: str | None) -> dict:
        proc = cls.get(variant)
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        reply = proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the snippet server exited with code {proc.wait()}")
        return json.loads(reply)


def run_file(
    path: Path,
    timeout: float = DEFAULT_TIMEOUT_S,
    args: list[str] | None = None,
    variant: str | None = None,
    warm_spawn: bool = False,
    reap: bool = True,
) -> Run:
    """Run one Python file as ``python path args...`` would, in an empty working directory.

    It runs in a fork of a warm interpreter that has imported torch (``snippetserver.py``),
    which saves each run the seconds of starting Python and importing torch; with
    ``warm_spawn`` the processes it starts with ``spawn`` are forks of a clean warm interpreter
    too (``snippetserver.start_spawn_zygote``). ``SNIPPETS_FRESH_INTERPRETER=1`` runs each file
    in a new interpreter instead, and its processes with a real ``spawn``. ``reap=False``
    leaves what the program left running alive, for a test of that to find (and to kill).
    """
    if os.environ.get("SNIPPETS_FRESH_INTERPRETER") == "1":
        return _run_in_new_interpreter(path, timeout, args, variant, reap=reap)
    with tempfile.TemporaryDirectory(prefix="snippet-") as cwd:
        work = Path(cwd, "cwd")
        work.mkdir()
        target = {"path": str(Path(path).resolve()), "warm_spawn": warm_spawn, "reap": reap}
        return _run_in_server(target, args, work, timeout, variant)


def run_module(
    module: str,
    args: list[str],
    cwd: Path,
    timeout: float = DEFAULT_TIMEOUT_S,
    stdout: Path | None = None,
    environ: dict[str, str | None] | None = None,
) -> Run:
    """Run ``python -m module args...`` in ``cwd``, in a fork of the warm interpreter.

    ``stdout``: a file (a named pipe, say) the program writes its standard output to, for the
    caller to read; the run's ``stdout`` is then empty. ``environ``: variables to set (or, with
    None, unset) for the processes the program starts; the program itself was started with
    the snippets' environment.
    """
    if os.environ.get("SNIPPETS_FRESH_INTERPRETER") == "1":
        return _run_in_new_interpreter(
            None, timeout, args, None, module=module, cwd=cwd, stdout=stdout, environ=environ
        )
    target = {"module": module, "environ": environ or {}}
    return _run_in_server(target, args, cwd, timeout, None, stdout)


def run_torchrun(
    args: list[str],
    cwd: Path,
    timeout: float,
    stdout: Path | None = None,
    environ: dict[str, str | None] | None = None,
) -> Run:
    """``torchrun args...`` in ``cwd`` (``run_module``); then its ranks, each in a session of
    its own, are killed by their working directory. Fails if it timed out or left one."""
    try:
        run = run_module("torch.distributed.run", args, cwd, timeout, stdout, environ)
    finally:
        leftover = kill_processes_in(cwd)
    assert not run.timed_out, f"timed out; killed {leftover}: {run.stderr[-3000:]}"
    assert not leftover, f"processes still running after torchrun ended (killed): {leftover}"
    return run


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def kill_processes_in(directory: Path) -> list[int]:
    """SIGKILL every process whose working directory is ``directory``; their pids. (A process
    that changed its directory is not found.)

    For what a timed-out run leaves behind outside its process group: torchrun starts each
    rank in a session of its own (``start_new_session=True``,
    ``torch/distributed/elastic/multiprocessing/subprocess_handler``).
    """
    killed = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")) == directory and int(proc.name) != os.getpid():
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return killed


def _run_in_server(
    target: dict,
    args: list[str] | None,
    cwd: Path,
    timeout: float,
    variant: str | None,
    stdout: Path | None = None,
) -> Run:
    """One request to the warm interpreter (``snippetserver.py``); output through files."""
    with tempfile.TemporaryDirectory(prefix="output-") as d:
        out, err = stdout or Path(d, ".stdout"), Path(d, ".stderr")
        request = {
            **target,
            "args": list(args or []),
            "cwd": str(cwd),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": timeout,
        }
        reply = _Server.run(request, variant)

        stdout_text = "" if stdout else _read_output(out)
        return Run(reply["returncode"], stdout_text, _read_stderr(err), reply["seconds"])


def _run_in_new_interpreter(
    path: Path | None,
    timeout: float,
    args: list[str] | None,
    variant: str | None,
    module: str | None = None,
    cwd: Path | None = None,
    stdout: Path | None = None,
    environ: dict[str, str | None] | None = None,
    reap: bool = True,
) -> Run:
    """``python path args...`` (or ``-m module``) as a new interpreter, bounded and reaped as
    in the server: a session of its own, its group killed at the time limit, and, unless
    ``reap`` is false, what it left running killed when it ends; output through files, so a
    process it left behind holding them cannot stall the run."""
    start = time.perf_counter()
    target = ["-m", module] if module else [str(path)]
    env = snippet_env(variant)
    for name, value in (environ or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    with (
        tempfile.TemporaryDirectory(prefix="snippet-") as empty,
        tempfile.TemporaryDirectory(prefix="output-") as d,
    ):
        out, err = stdout or Path(d, ".stdout"), Path(d, ".stderr")
        with open(out, "wb") as out_file, open(err, "wb") as err_file:
            proc = subprocess.Popen(
                [sys.executable, *target, *(args or [])],
                cwd=cwd or empty,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=err_file,
                start_new_session=True,
            )
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                returncode = None
            if returncode is None or reap:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            if returncode is None:
                proc.wait()

        stdout_text = "" if stdout else _read_output(out)
        return Run(returncode, stdout_text, _read_stderr(err), time.perf_counter() - start)


def _read_output(path: Path) -> str:
    """What a run wrote to ``path`` (nothing, if it never opened it)."""
    return path.read_bytes().decode("utf-8", "replace") if path.exists() else ""


# torch's TCPStore client connects to 127.0.0.1 as the IPv6 address ::ffff:127.0.0.1 and, to
# name the connection in its log, asks getnameinfo() for that address's host name
# (torch/csrc/distributed/c10d/socket.cpp, SocketConnectOp::tryConnect and formatSockAddr).
# Hosts files name 127.0.0.1, not its mapped form, so the lookup goes to DNS; when the resolver
# times out, torch logs this one warning to stderr and goes on with the numeric address. It
# depends on the machine's DNS, not on the program (seen here once in 6 full runs): that exact
# line, and nothing else, does not count as the program writing to stderr.
_RESOLVER_NOISE = re.compile(
    r"^\[W[^\]\n]*socket\.cpp:\d+\] \[c10d\] The hostname of the client socket cannot be "
    r"retrieved\. err=-?\d+\n",
    re.MULTILINE,
)


def _read_stderr(path: Path) -> str:
    return _RESOLVER_NOISE.sub("", _read_output(path))


LESSONRUN = Path(__file__).with_name("lessonrun.py")


def has_lesson(snippet: Path) -> bool:
    """Whether the file is a lesson and a proof (``lessonrun.py``); a malformed split counts."""
    from lessonrun import SectionError, lesson_and_proof

    try:
        return lesson_and_proof(Path(snippet).read_text(encoding="utf-8")) is not None
    except SectionError:
        return True  # lessonrun reports what is wrong with it


def run_snippet(
    snippet: Path, timeout: float = DEFAULT_TIMEOUT_S, variant: str | None = None
) -> Run:
    """A snippet's run: its lesson alone, then its proof (``lessonrun.py``), or the whole file."""
    if has_lesson(snippet):
        return run_file(
            LESSONRUN, timeout, args=[str(Path(snippet).resolve())], variant=variant,
            warm_spawn=True,
        )
    return run_file(snippet, timeout, variant=variant, warm_spawn=True)


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


def check(
    snippet: Path,
    update: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    variant: str | None = None,
) -> list[str]:
    """Run ``snippet`` and return a list of problems; an empty list means it passed.

    With ``update=True`` a clean run rewrites the stored output instead of comparing; an
    output that still matches (``outputs_match``) is left as it is, so that a rerun on
    another CPU does not churn last digits.
    """
    run = run_snippet(snippet, timeout, variant=variant)
    problems = problems_of_run(run, timeout)
    if problems:
        return problems
    outputs = split_outputs(Path(snippet), run.stdout)
    if update:
        for expected_path, text in outputs.items():
            old = expected_path.read_text(encoding="utf-8") if expected_path.exists() else None
            if old is None or not outputs_match(old, text):
                expected_path.write_text(text, encoding="utf-8")
        return []
    problems = []
    for expected_path, text in outputs.items():
        if not expected_path.exists():
            problems.append(f"no stored output {expected_path.name}: run pytest --update-snippets")
            continue
        expected = expected_path.read_text(encoding="utf-8")
        if not outputs_match(expected, text):
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"{expected_path.name} (stored, shown on the page)",
                    tofile="actual output",
                )
            )
            where = f" (CPU variant {variant})" if variant else ""
            problems.append(f"output differs from {expected_path.name}{where}:\n{diff}")
    return problems


_CHECKED: dict[tuple[Path, bool], list[str]] = {}
# Set by conftest.py under pytest-xdist: a folder all workers of one run share.
SHARED_RESULTS: Path | None = None


def check_once(snippet: Path, update: bool = False) -> list[str]:
    """``check``, run at most once per test run for each file.

    The English page, the Chinese page and ``test_snippets.py`` each ask for the same snippet;
    it runs once and all three report its result. Under pytest-xdist the three may land on
    different workers: the first to take the snippet's lock runs it and leaves the result in
    ``SHARED_RESULTS`` for the others. (pytest-xdist's ``--dist loadgroup`` would keep them on
    one worker, but with pytest 9.2 it silently groups nothing: it renames ``item._nodeid``,
    which pytest no longer reads.)
    """
    key = (Path(snippet).resolve(), update)
    if key in _CHECKED:
        return _CHECKED[key]
    if SHARED_RESULTS is None:
        _CHECKED[key] = check(snippet, update=update)
        return _CHECKED[key]
    from filelock import FileLock

    name = str(key[0].relative_to(ROOT)).replace(os.sep, "__") + (".update" if update else "")
    result = SHARED_RESULTS / f"{name}.json"
    with FileLock(str(result) + ".lock"):
        if result.exists():
            _CHECKED[key] = json.loads(result.read_text(encoding="utf-8"))
        else:
            _CHECKED[key] = check(snippet, update=update)
            result.write_text(json.dumps(_CHECKED[key]), encoding="utf-8")
    return _CHECKED[key]
