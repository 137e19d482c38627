"""``python -m retaincheck [options] script.py [args...]`` (or ``-m module``): audit a program.

The program runs as ``python script.py args...`` (or ``python -m module args...``) would:
as ``__main__``, with an absolute ``__file__``, ``sys.argv[0]`` as Python sets it and
``sys.path[0]`` = the script's directory (the working directory for ``-m``). As Python would,
the audit then waits for the program's non-daemon threads and runs its ``atexit`` handlers,
so a reuse there is seen. The report is printed after that, also when the program raises or
is interrupted (Ctrl-C). Exit statuses: see ``EXIT_STATUSES`` (also in ``--help``).
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import sys
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field

from ._messages import BadLang, check_lang, default_lang, message

EXIT_BAD_INPUT = 2
"""Bad input: an unknown option, a missing script or module, a file that is not Python."""
EXIT_UNNEEDED = 6
"""With ``--fail-on-unneeded``: the run completed and found a ``retain_graph=True`` that is
not needed. 6 is used by none of Python (1, 2, 120), the shell (126, 127, 128+N), pytest
(0-5), ``timeout`` (124-127, 137) or ``sysexits.h`` (64-78); the pytest plugin uses it too."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (``KeyboardInterrupt``): 128 + SIGINT, what a shell reports for it."""

EXIT_STATUSES = """\
exit status:
  0    the program completed (and, with --fail-on-unneeded, no site was "not needed")
  N    the program's own status when it did not complete: 1 for an uncaught exception,
       N for sys.exit(N); the report is printed but its verdicts are not final
  2    bad input: unknown option, missing script or module, a file that is not Python
  6    --fail-on-unneeded only: the program completed and a retain_graph=True is not needed
       (proven by a rerun without it, unless --skip-proof or under torchrun)
  130  interrupted (Ctrl-C); the report shows what was recorded until then
"""

USAGE = f"""\
usage: retaincheck [options] SCRIPT.py [ARGS...]
       retaincheck [options] -m MODULE [ARGS...]

Runs SCRIPT.py (or MODULE, as python -m does) as __main__, with ARGS as its sys.argv[1:],
and reports, for every backward() or autograd.grad() call made with retain_graph=True,
whether a later call really walked the graph it retained, and how many bytes of saved
tensors it kept alive.

options:
  -m MODULE           run a module as python -m MODULE does
  --json              print one JSON object instead of the readable report; the program's
                      own standard output (file descriptor 1, subprocesses included) goes
                      to standard error, so standard output holds only the JSON
  --json=PATH         write the JSON report to PATH and print the readable one; under
                      torchrun (WORLD_SIZE > 1) each rank writes PATH with .rank<N> inserted
                      before the suffix (report.json -> report.rank1.json)
  --fail-on-unneeded  exit with status 6 when the run completed and a retain_graph=True
                      is not needed (for CI); before it does, the program is rerun
                      without those flags, as --fix proves a change, and a site whose
                      rerun fails is needed (--skip-proof skips the rerun)
  --fix               show, as a unified diff, the removal of every retain_graph=True that
                      a completed run proved not needed, and why each other site is kept;
                      then prove it: rerun the program (same arguments, working directory
                      and environment) with the removals applied and say whether it
                      completed as the audited run did; changes nothing
  --write             with --fix: write the changes to the files, only if proven
  --skip-proof        with --fix or --fail-on-unneeded: do not rerun the program to prove
                      the changes (a run too long to repeat); they are marked "unproven"
  --lang=LANG         the language of the readable report and of --fix's plan: en or zh
                      (also --lang LANG). Default: $RETAINCHECK_LANG if set, else zh
                      when the locale ($LC_ALL, $LC_MESSAGES, $LANG: the first one set)
                      starts with zh, else en. The JSON report is the same in both
                      languages
  -h, --help          show this help and exit
  --version           print the version and exit

{EXIT_STATUSES}"""


class BadInput(Exception):
    """A problem with the command line or the script, reported as one line with exit code 2."""


@dataclass
class Options:
    json: bool = False
    json_path: str | None = None
    module: str | None = None
    script: str | None = None
    args: list[str] = field(default_factory=list)
    fail_on_unneeded: bool = False
    fix: bool = False
    write: bool = False
    skip_proof: bool = False
    lang: str | None = None


def _parse(argv: list[str]) -> Options | int:
    opts = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--json":
            opts.json = True
        elif arg.startswith("--json="):
            opts.json_path = arg[len("--json=") :]
            if not opts.json_path:
                raise BadInput("--json= needs a path (--json=report.json)")
        elif arg == "--fail-on-unneeded":
            opts.fail_on_unneeded = True
        elif arg == "--fix":
            opts.fix = True
        elif arg == "--write":
            opts.write = True
        elif arg == "--skip-proof":
            opts.skip_proof = True
        elif arg == "--lang" or arg.startswith("--lang="):
            value = arg[len("--lang=") :] if arg.startswith("--lang=") else None
            if value is None:
                if i + 1 >= len(argv):
                    raise BadInput("--lang needs a language (en or zh)")
                i += 1
                value = argv[i]
            try:
                opts.lang = check_lang(value, "--lang")
            except BadLang as exc:
                raise BadInput(str(exc)) from None
        elif arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")):
            name = arg[2:] or (argv[i + 1] if i + 1 < len(argv) else "")
            if not name:
                raise BadInput("-m needs a module name (usage: retaincheck -m MODULE [ARGS...])")
            opts.module = name
            opts.args = argv[i + (1 if arg[2:] else 2) :]
            break
        elif arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        elif arg == "--version":
            from . import __version__

            print(f"retaincheck {__version__}")
            return 0
        elif arg == "--":
            i += 1
            break
        elif arg.startswith("-") and arg != "-":
            raise BadInput(f"unknown option {arg!r} (see retaincheck --help)")
        else:
            break
        i += 1
    if opts.lang is None:
        try:
            opts.lang = default_lang()
        except BadLang as exc:
            raise BadInput(str(exc)) from None
    if opts.module is None:
        if i >= len(argv):
            raise BadInput("no script given (usage: retaincheck [options] SCRIPT.py [ARGS...])")
        opts.script, opts.args = argv[i], argv[i + 1 :]
    if opts.json and opts.json_path is not None:
        raise BadInput("give either --json (to standard output) or --json=PATH, not both")
    # Command-line errors stay in English whatever --lang says, as Python's own do (no line
    # that mixes an English prefix with Chinese)
    if opts.write and not opts.fix:
        raise BadInput(message("e_write"))
    if opts.skip_proof and not (opts.fix or opts.fail_on_unneeded):
        raise BadInput(message("e_skip_proof"))
    return opts


def _check_script(path: str):
    """Compile the script, or raise BadInput naming the problem."""
    if not os.path.exists(path):
        raise BadInput(f"{path}: no such file")
    if os.path.isdir(path):
        raise BadInput(f"{path}: is a directory, not a Python script")
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror or exc})") from None
    looks_python = path.endswith((".py", ".pyw"))
    try:
        # As python does: the code's file name (tracebacks, __file__) is absolute.
        return compile(source, os.path.join(os.getcwd(), path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        if b"\x00" in source:
            raise BadInput(f"{path}: not a Python script (it is a binary file)") from None
        if isinstance(exc, SyntaxError) and looks_python:
            where = f" (line {exc.lineno})" if exc.lineno else ""
            raise BadInput(f"{path}: syntax error{where}: {exc.msg}") from None
        raise BadInput(f"{path}: not a Python script (it does not compile as Python)") from None


def _check_module(name: str) -> None:
    """Find the module as ``python -m`` would (its parent packages are imported), or raise
    BadInput with Python's own message (``No module named ...``)."""
    saved = list(sys.path)
    sys.path[0:1] = [os.getcwd()]  # where python -m looks first (the bin folder is no place)
    try:
        runpy._get_module_details(name)
    except ImportError as exc:
        raise BadInput(f"-m {name}: {exc}") from None
    finally:
        sys.path[:] = saved


def _check_json_path(path: str) -> None:
    """Check ``--json=PATH`` now, so that a bad path fails before the run: its folder, or the
    nearest one above it that exists, can be written in. The folder is made only when the
    report is written (rev31b F-j2: made before the run, it broke a program that makes its
    own output folder with ``os.makedirs(out)``)."""
    folder = os.path.dirname(os.path.abspath(path))
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise BadInput(f"--json={path}: {existing} is not a folder")
    if existing != folder:
        if not os.access(existing, os.W_OK | os.X_OK):
            raise BadInput(f"--json={path}: cannot create {folder}")
        return
    if os.path.isdir(path):
        raise BadInput(f"--json={path}: is a directory")
    if os.path.lexists(path) and not (os.path.isfile(path) and not os.path.islink(path)):
        # a link, a device, a named pipe: written through (_write_json_file)
        if not os.access(path, os.W_OK):
            raise BadInput(f"--json={path}: cannot write to it")
    elif not os.access(folder, os.W_OK):
        raise BadInput(f"--json={path}: cannot write to {folder}")


def _script_traceback(exc: BaseException) -> None:
    """Print the traceback of an exception, leaving out retaincheck's and runpy's frames."""
    tb = exc.__traceback__
    own = os.path.dirname(os.path.abspath(__file__)) + os.sep
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if os.path.abspath(name).startswith(own) or "runpy" in os.path.basename(name):
            tb = tb.tb_next
            continue
        break
    traceback.print_exception(type(exc), exc, tb)


def _exit_finalizers() -> list:
    """The ``weakref.finalize`` objects that will run at interpreter exit (``atexit=True``).

    weakref's registry of finalizers is private (``weakref.finalize._registry``): there is no
    public list of them."""
    return [f for f, info in list(weakref.finalize._registry.items()) if info.atexit]


def _finish_like_python(finalizers_before: list) -> None:
    """What Python does when a script's main code ends, done inside the audit.

    It waits for the script's non-daemon threads, then runs the ``atexit`` handlers
    (``atexit._run_exitfuncs`` runs each once and clears them; any left are cleared, so none
    runs again at interpreter exit). A reuse of a retained graph in either place is then seen.

    Except the exit finalizers that existed before the script started (``finalizers_before``):
    they belong to this interpreter, not to the script. torch's are among them: each operator
    library its import registered is deregistered by one (``torch/library.py``,
    ``Library.__init__``: ``weakref.finalize(self, _del_library, ...)``); run here, they would
    leave the interpreter without torch's ``prims`` operators, so that the next script run in it
    fails at its first optimizer step (which imports ``torch._dynamo``). They stay for the
    interpreter's own exit, where Python runs them (as before, after the script's handlers).
    """
    # Python's exit first runs the callbacks registered with threading._register_atexit
    # (Lib/threading.py, _shutdown: concurrent.futures' workers are told to stop there,
    # concurrent/futures/thread.py, _python_exit), then joins the non-daemon threads; joined
    # first, a ThreadPoolExecutor's idle workers (torch.compile's, on a cold cache) never end.
    # The list is private: there is no public way to run them early.
    calls = getattr(threading, "_threading_atexits", [])
    for call in reversed(list(calls)):
        calls.remove(call)
        call()
    main = threading.main_thread()
    while True:
        waiting = [t for t in threading.enumerate() if t is not main and not t.daemon]
        waiting = [t for t in waiting if t is not threading.current_thread()]
        if not waiting:
            break
        for thread in waiting:
            thread.join()
    kept = [f for f in finalizers_before if f.alive]
    for finalizer in kept:
        finalizer.atexit = False
    try:
        atexit._run_exitfuncs()
        if atexit._ncallbacks():  # cleared by _run_exitfuncs on 3.11; never let one run twice
            atexit._clear()
    finally:
        for finalizer in kept:
            finalizer.atexit = True
        # weakref's exit function ran (and cleared itself from atexit's list): it is
        # registered again, and allowed to run finalizers, for the interpreter's real exit.
        weakref.finalize._shutdown = False
        atexit.register(weakref.finalize._exitfunc)
        weakref.finalize._registered_with_atexit = True


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _status_of(exc: BaseException) -> int:
    """The exit status Python would give for an exception that ended the program."""
    if isinstance(exc, SystemExit):
        return _exit_code(exc)
    sys.stdout.flush()
    _script_traceback(exc)
    return EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 1


def _main_module(path: str):
    """A fresh ``__main__`` module for a script, with the attributes python gives it."""
    import builtins
    import importlib.machinery
    import types

    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=path,
        __cached__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
        __package__=None,
        __spec__=None,
        __builtins__=builtins,
    )
    return module


def _program_file(opts: Options, code) -> str:
    """The script's file, or the file of the module -m runs ("" when it has none)."""
    if code is not None:
        return code.co_filename
    try:
        spec = runpy._get_module_details(opts.module)[1]
        return spec.origin or ""
    except Exception:
        return ""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pipe_above_2() -> tuple[int, int]:
    """A pipe whose ends are not file descriptors 0 to 2 (one may be closed: <&-)."""
    import fcntl

    ends = []
    for fd in os.pipe():
        if fd > 2:
            ends.append(fd)
        else:
            ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3))
            os.close(fd)
    return ends[0], ends[1]


def _drain(fd: int) -> bytes:
    """What a pipe holds now, without waiting for more."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


class _Tee:
    """For --fix's proof: copy what the program writes to file descriptor 1 (prints,
    ``os.write(1, ...)``, subprocesses) to where it was going, and keep it, so that the rerun's
    standard output can be compared with the audited run's."""

    def __init__(self, pipe: tuple[int, int] | None = None):
        sys.stdout.flush()
        self.target = os.dup(1)
        self.read, write = pipe or os.pipe()
        os.dup2(write, 1)
        os.close(write)
        self.chunks: list[bytes] = []
        self.busy = False
        self.thread = threading.Thread(target=self._pump, name="retaincheck-tee", daemon=True)
        self.thread.start()
        self.stdout = None
        try:
            to_fd_1 = sys.stdout.fileno() == 1
        except Exception:  # a StringIO (main() called in a process that redirected it)
            to_fd_1 = False
        if not to_fd_1:  # Python's prints do not reach file descriptor 1: record them here
            self.stdout = sys.stdout
            sys.stdout = _Recorder(self.stdout, self.chunks)

    def _pump(self) -> None:
        import select

        target_gone = False
        while True:
            select.select([self.read], [], [])  # then busy before the bytes leave the pipe,
            self.busy = True  # so that sync() never sees neither
            data = os.read(self.read, 65536)
            if not data:
                self.busy = False
                return
            self.chunks.append(data)
            if not target_gone:
                try:
                    _write_all(self.target, data)
                except OSError:  # `| head -1` closed it: go on reading (rev27w N19), as
                    target_gone = True  # the program's next write then fails on its own
            self.busy = False

    def sync(self, seconds: float = 2.0) -> None:
        """Wait until what was written so far has been passed on: a program killed by a signal
        in its exit work then loses none of what it printed before (rev28a F8b)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self.pending() and not self.busy:
                return
            time.sleep(0.002)

    def pending(self) -> int:
        """How many bytes the pipe holds that the thread has not read yet."""
        import fcntl
        import struct
        import termios

        return struct.unpack("i", fcntl.ioctl(self.read, termios.FIONREAD, b"\0\0\0\0"))[0]

    def close(self) -> bytes | None:
        """What the program wrote (while a process it started holds the pipe: what it holds
        when the program ends)."""
        try:
            sys.stdout.flush()
        except Exception:  # a closed or replaced sys.stdout: nothing of ours to flush
            pass
        if self.stdout is not None:
            if isinstance(sys.stdout, _Recorder):
                sys.stdout = self.stdout
            self.stdout = None
        os.dup2(self.target, 1)
        self.thread.join(timeout=2)
        done = not self.thread.is_alive()
        if done:
            os.close(self.read)
        else:
            # A process the program started still holds the pipe (a spawn Pool's resource
            # tracker, a detached job): no end comes, so what the pipe holds now is read and
            # compared (rev27n F8: the comparison was skipped, after a 10 s wait).
            for _ in range(100):
                if not self.pending():
                    break
                time.sleep(0.02)
            time.sleep(0.05)  # the thread keeps the last chunk it read
        os.close(self.target)
        return b"".join(self.chunks)


def _regular_file(fd: int) -> bool:
    import stat

    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


class _StdinTee:
    """For the proof: keep what the program could read on standard input, so that the rerun
    gets the same bytes (rev27o R1: with an empty input the rerun took another path and
    proved nothing). A pipe or a file on file descriptor 0 is replaced by a pipe that a thread
    fills from it, keeping each chunk; a terminal is left alone. Past ``LIMIT`` bytes the
    input cannot be given again, and the proof does not hold."""

    LIMIT = 64 << 20

    def __init__(self):
        self.chunks: list[bytes] = []
        self.size = 0
        self.source = None
        if os.isatty(0) or _regular_file(0):  # a file: the rerun reads it again (start_state)
            return
        try:
            self.source = os.dup(0)
        except OSError:  # no standard input at all
            return
        read, self.write = os.pipe()
        os.dup2(read, 0)
        os.close(read)
        threading.Thread(target=self._pump, name="retaincheck-stdin", daemon=True).start()

    def _pump(self) -> None:
        try:
            while data := os.read(self.source, 65536):
                self.size += len(data)
                if self.size <= self.LIMIT:
                    self.chunks.append(data)
                _write_all(self.write, data)
        except OSError:  # the program closed its end: what it read is kept
            pass
        finally:
            os.close(self.write)

    def hand_over(self) -> None:
        """Before the program replaces itself (``os.exec*``): a child process goes on filling
        the pipe on fd 0 from the real input, so the new program reads what the thread had
        read ahead of the program, then the rest (rev27s W2: it got nothing)."""
        if self.source is None:
            return
        try:
            os.fstat(self.write)  # the thread closed it at the input's end: nothing to add
        except OSError:
            return
        if os.fork() == 0:
            try:
                os.close(0)  # the pipe's read end is the new program's alone (rev27w N5)
                while data := os.read(self.source, 65536):
                    _write_all(self.write, data)
            finally:
                os._exit(0)

    def close(self) -> bytes | None | bool:
        """The bytes the program could read; None for a terminal or no input; False if too
        long. Standard input is given back to this process."""
        if self.source is None:
            return None
        os.dup2(self.source, 0)
        return False if self.size > self.LIMIT else b"".join(self.chunks)


def _give_back_before_exec(tee: _Tee, stdin: _StdinTee | None):
    """A program that replaces itself (``os.exec*``) ends the audit; the new program gets the
    real standard output and input, not the pipes only this process reads (rev27n W1: its
    prints failed with BrokenPipeError). Returns what undoes the wrapping."""
    import posix

    originals = {name: getattr(posix, name) for name in ("execv", "execve")
                 if hasattr(posix, name)}

    def wrap(original):
        def exec_(*args, **kwargs):
            sys.stdout.flush()
            os.dup2(tee.target, 1)  # the pipe's last writer gone, the thread ends
            tee.thread.join(timeout=2)  # once what it holds is written out
            if stdin is not None:  # (None: standard input closed, as it stays)
                stdin.hand_over()  # fd 0 stays the pipe, which a child now fills
            return original(*args, **kwargs)

        return exec_

    for name, original in originals.items():
        for module in (os, posix):
            setattr(module, name, wrap(original))

    def undo():
        for name, original in originals.items():
            for module in (os, posix):
                setattr(module, name, original)

    return undo


class _Recorder:
    """``sys.stdout`` that also keeps what is written (see ``_Tee``)."""

    def __init__(self, stream, chunks: list):
        self._stream, self._chunks = stream, chunks

    def write(self, text):
        self._chunks.append(str(text).encode("utf-8", "replace"))
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


_REAL_EXIT = os._exit
_AFTER_MAIN_CODE: list = []  # called when the program's main code has ended (the tee's sync)
_AUDITING: list = []  # the audit of the program now running (main's hard_exit ends it)


def _run_program(opts: Options, code, finalize: bool = False
                 ) -> tuple[object, int, BaseException | None]:
    """Run the program under the audit: (report, exit status, what stopped it or None).

    A script runs in its own ``__main__`` module, which stays in ``sys.modules`` until its
    threads and ``atexit`` handlers are done (``runpy.run_path`` would also set
    ``sys.argv[0]`` to the absolute path, which python does not). With ``finalize`` (the
    audited run's child, which ends with ``os._exit``), the program's objects are then
    finalized as at the interpreter's exit (``_end_like_python``).
    """
    from ._audit import audit

    status, stopped = 0, None
    saved_main = sys.modules.get("__main__")
    modules_before = {id(m) for m in list(sys.modules.values())}
    globals_of: list = []  # the program's __main__ globals, once it runs
    try:
        context = audit()
        with context as report:
            _AUDITING.append(context)
            # After the audit's start, which imports torch if nothing had: torch's finalizers are
            # this interpreter's even when this run is the first to import it.
            finalizers_before = _exit_finalizers()
            try:
                context._session.files.add(_program_file(opts, code))
                if opts.module is not None:
                    _run_module(opts.module, globals_of)
                else:
                    module = _main_module(code.co_filename)
                    sys.modules["__main__"] = module
                    globals_of.append(module.__dict__)
                    exec(code, module.__dict__)
            except BaseException as exc:  # noqa: B036 (the program's own end, whatever it is)
                status = _status_of(exc)
                if status != 0:
                    stopped = exc
            # Python flushes standard output and error when the main code ends, before the
            # exit work (flush_io in Python/pythonrun.c): a crash in an atexit handler then
            # loses nothing printed (rev28a F8b)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # closed or replaced by the program: Python ignores it too
                    pass
            for then in _AFTER_MAIN_CODE:
                then()
            try:
                _finish_like_python(finalizers_before)
            except BaseException as exc:  # noqa: B036
                late = _status_of(exc)
                if late != 0 and stopped is None:
                    status, stopped = late, exc
            if stopped is not None:
                # Through the audit's __exit__, so that the report knows the run stopped early.
                raise stopped
    except BaseException as exc:  # noqa: B036
        if exc is not stopped:
            raise
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    if finalize:
        _end_like_python(globals_of, [m for m in list(sys.modules.values())
                                      if id(m) not in modules_before])
    return report, status, stopped


def _run_module(name: str, seen: list) -> None:
    """``runpy.run_module(name, run_name="__main__", alter_sys=True)``; the module's own
    globals are appended to ``seen`` as it starts. run_module returns only a copy of them, and
    clearing a copy at the end (``_end_like_python``) frees nothing that the program's
    functions still hold through their ``__globals__``; so they are taken from runpy's private
    ``_run_code`` on the way (no public hook gives them). Without it, the copy, at the end."""
    run_code = getattr(runpy, "_run_code", None)
    if run_code is not None:
        def spy(code, run_globals, *args, **kwargs):
            seen.append(run_globals)
            return run_code(code, run_globals, *args, **kwargs)

        runpy._run_code = spy
    try:
        copy = runpy.run_module(name, run_name="__main__", alter_sys=True)
    finally:
        if run_code is not None:
            runpy._run_code = run_code
    if not seen:
        seen.append(copy)


def _end_like_python(namespaces: list, imported: list) -> None:
    """What the interpreter's exit does to what the program leaves alive, after its exit
    handlers: its modules' globals are set to None, those with one leading underscore first,
    the modules imported last first (``Py_FinalizeEx``, ``finalize_modules`` in
    ``Python/pylifecycle.c``; ``_PyModule_ClearDict`` in ``Objects/moduleobject.c``); then a
    collection. Done in the audited run's child, which ends with ``os._exit`` and would do
    none of it (rev30a H1: a log opened once and never closed was left empty, a ``ZipFile``
    without its directory, a ``NamedTemporaryFile`` in place). The program's own modules
    only: an installed package's (or the standard library's) are left as they are, as its
    threads may still run. Not the interpreter's own order in every case: its collection
    comes first, with the globals in place.

    While a thread of the program still runs (a daemon: a heartbeat, a progress writer), the
    globals are left as they are, which the interpreter would stop before it cleared them
    (rev31a F2: the thread then failed on globals set to None, with tracebacks a plain run
    never prints): the files still open are only flushed. So are, in the end, the files that
    only an installed package's modules still hold."""
    import gc
    import io
    import types

    from ._places import _installed

    def flush_open_files() -> None:
        try:
            # by type only: isinstance would read an object's __class__, which some proxies
            # compute (a deprecation warning for torch.distributed.reduce_op)
            kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
            for thing in gc.get_objects():
                if issubclass(type(thing), kinds) and thing is not sys.stdout and (
                        thing is not sys.stderr):
                    try:
                        if not thing.closed and thing.writable():
                            thing.flush()
                    except Exception:  # noqa: S112 (a file that cannot flush: as at exit)
                        continue
        except BaseException:  # noqa: B036
            pass

    running = [t for t in threading.enumerate() if t is not threading.current_thread()
               and not t.name.startswith("retaincheck-") and t.is_alive()]
    if running:
        flush_open_files()
        return
    try:
        from ._hooks import _own_dict

        own, ours = [], os.path.dirname(os.path.realpath(__file__)) + os.sep
        for module in reversed(imported):  # (sys.modules may hold other objects, or aliases)
            file = _own_dict(module).get("__file__")  # (no lazy module's import run)
            if (issubclass(type(module), types.ModuleType) and type(file) is str
                    and os.path.isabs(file)):
                real = os.path.realpath(file)
                if not real.startswith(ours) and not _installed(real):
                    own.append(vars(module))
        gc.collect()
        for names in (*own, *namespaces[:1]):
            for key in [k for k in names if k.startswith("_") and not k.startswith("__")]:
                names[key] = None
            for key in [k for k in names if k != "__builtins__"]:
                names[key] = None
        gc.collect()
    except BaseException:  # noqa: B036 (Ctrl-C, a finalizer's SystemExit: as at exit, ignored)
        pass  # (the report is what matters now; a failure here leaves the rest as os._exit would)
    # what only an installed package still holds (its globals are left as they are): written
    # out, as the interpreter's exit would close it (rev34a L1: a vendored logger's file was
    # left empty)
    flush_open_files()


def _rank() -> tuple[int, int] | None:
    """(rank, world size) under torchrun and other launchers that set them, with more than
    one process; else None."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return None
    return (rank, world) if world > 1 else None


def _rank_path(path: str, rank: int) -> str:
    """``report.json`` -> ``report.rank1.json``; ``report`` -> ``report.rank1``."""
    head, tail = os.path.split(path)
    stem, dot, suffix = tail.rpartition(".")
    name = f"{stem}.rank{rank}.{suffix}" if dot and stem else f"{tail}.rank{rank}"
    return os.path.join(head, name)


def _write_whole(fd: int, text: str) -> None:
    """Write ``text`` to ``fd`` so that no other rank's report lands inside it.

    The whole text is one buffer; ``os.write`` is looped only for a partial write. Under a
    launcher (WORLD_SIZE > 1) the ranks of one machine also take an exclusive ``flock`` on one
    lock file per run for the duration, because a pipe keeps a write whole only up to
    PIPE_BUF (4096 bytes on Linux) and a report can be longer.
    """
    data = text.encode("utf-8", "replace")
    lock = None
    if _rank() is not None:
        import fcntl
        import tempfile

        run = "-".join(
            os.environ.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
        )
        name = f"retaincheck-{os.getuid()}-{run.replace(os.sep, '_')}.lock"
        try:
            lock = os.open(os.path.join(tempfile.gettempdir(), name), os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError:
            lock = None
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        if lock is not None:
            os.close(lock)  # releases the flock


def _emit(stream, text: str) -> None:
    """Print ``text``; under a launcher as one whole write (see ``_write_whole``)."""
    if _rank() is None:
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:  # `| head -1`: the reader is gone, as for the program's own
            null = os.open(os.devnull, os.O_WRONLY)  # prints; the rest goes nowhere
            os.dup2(null, stream.fileno())
            os.close(null)
        return
    stream.flush()
    _write_whole(stream.fileno(), text)


def _write_json_file(path: str, data: dict) -> str | None:
    """Write the file whole: to a temporary file beside it, then renamed over it. Returns
    why it could not (a file that may not be replaced, a full disk: rev30a H3, a traceback
    and no report), or None."""
    import stat

    tmp = f"{path}.tmp{os.getpid()}"
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if st is not None and not stat.S_ISREG(st.st_mode):
            # a link, a device (/dev/stdout), a named pipe: written through, never replaced
            # by a regular file (rev31b F-j1: --json=/dev/full as root replaced the device)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2)
                f.write("\n")
            return None
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return exc.strerror or str(exc)
    return None


def _unneeded(report) -> list:
    return [c for c in report.calls if c.verdict == "not needed"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m retaincheck`` and of the ``retaincheck`` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        opts = _parse(argv)
        if isinstance(opts, int):
            return opts
        if opts.json_path:
            _check_json_path(opts.json_path)
        code = None
        if opts.module is not None:
            _check_module(opts.module)
        else:
            code = _check_script(opts.script)
    except BadInput as exc:
        print(f"retaincheck: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

    closed = [name for name in ("stdout", "stderr") if getattr(sys, name) is None]
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:  # closed (>&-): the report goes nowhere, as the
            null = os.open(os.devnull, os.O_WRONLY)  # program's prints (rev27s W3)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    saved_argv, saved_path, saved_stdout = sys.argv, list(sys.path), sys.stdout
    if opts.module is not None:
        sys.argv = [opts.module, *opts.args]  # runpy puts the module's file in sys.argv[0]
        path0 = os.getcwd()
    else:
        # As python does: __file__ absolute (not normalised), sys.argv[0] as given,
        # sys.path[0] the directory of the script with symbolic links resolved.
        sys.argv = [opts.script, *opts.args]
        path0 = os.path.dirname(os.path.realpath(opts.script))
    if getattr(sys.flags, "safe_path", False):  # -P, PYTHONSAFEPATH: python adds none
        pass  # (rev27w N17)
    elif sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    start_dir = os.getcwd()
    real_stdout = None
    if opts.json:
        # Everything the script writes to standard output goes to standard error: Python-level
        # prints, os.write(1, ...) and the output of subprocesses (file descriptor 1).
        sys.stdout.flush()
        real_stdout = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    proving = (opts.fix or opts.fail_on_unneeded) and not opts.skip_proof
    tee = stdin = undo_exec = start_env = start = None
    if proving:
        from ._proof import (
            INTERRUPTED,
            STOPPED,
            _adopted,
            adopt_orphans,
            changed_paths,
            leftovers,
            note_interrupt,
            open_fds,
            own_outputs,
            snapshot,
            start_state,
        )

        start_env = dict(os.environ)  # the program may change it before the rerun (rev27s N2)
        token = os.urandom(8).hex()  # marks the processes started from the program
        os.environ["RETAINCHECK_RUN"] = token  # (_proof.leftovers)
        start = {**start_state(), "closed": closed, "token": token,
                 "fds": sorted(open_fds())}
        own = own_outputs()  # > check.log in the folder: retaincheck's own, not the program's
        before = snapshot(start_dir, own)
        # The program runs in a child process, and the proof in this one once the child has
        # ended, as a plain run ends: its threads, timers, locks, sockets and helpers are gone
        # with it, and this process's signals, limits, umask and environment are as they were
        # before the program ran (rev27t, rev27u, rev27v: each of these, left running or
        # changed, sent the rerun down another path).
        outcome_file = os.path.join(start["temp"], f"retaincheck-outcome-{token}")
        # main() called in a process that redirected sys.stdout to a StringIO: the child's
        # prints land in its copy, and come back with the outcome
        mark = len(saved_stdout.getvalue()) if hasattr(saved_stdout, "getvalue") else None
        adopt_orphans()  # what the program leaves running comes to this process
        children = tuple(_adopted())  # this process's own, from before (main() in a program)
        # the pipe the program's standard output goes through, made here so that this
        # process can pass on what the child had not yet when it died (rev28a F8b)
        tee_pipe = _pipe_above_2()
        # the child's signal wakeup fd: the stop signals it got itself (a Ctrl-C, a signal to
        # the whole job), which this process must not pass on a second time
        wake = _pipe_above_2()
        child = os.fork()
        if child:
            os.close(tee_pipe[1])
            os.close(wake[1])
            os.environ.pop("RETAINCHECK_RUN")
            try:
                outcome = _wait_for_the_audit(child, outcome_file, wake[0])
            finally:
                os.close(wake[0])
            if isinstance(outcome, int):  # killed by a signal: its last output is in the pipe
                _write_all(1, _drain(tee_pipe[0]))
            os.close(tee_pipe[0])
            sys.argv, sys.stdout, sys.path[:] = saved_argv, saved_stdout, saved_path
            if real_stdout is not None:
                os.dup2(real_stdout, 1)
                os.close(real_stdout)
            if isinstance(outcome, int):  # it ended without a report (a signal)
                how = (message("no_report_signal", opts.lang, n=outcome - 128) if outcome > 128
                       else message("no_report_status", opts.lang, n=outcome))
                print(message("no_report", opts.lang, how=how), file=sys.stderr)
                return outcome
            report, status, stopped, printed, given, text = outcome
            if text:
                saved_stdout.write(text)
            if "stdout" in closed:  # nothing to compare: the rerun's goes nowhere too
                printed = None
            # what still runs of the program is looked for before the folder is read: once
            # none runs, nothing of it can change the folder after (rev27v V07e)
            start["left"] = leftovers(token, children=children)
            touched = changed_paths(before, snapshot(start_dir, own))
            # Ctrl-C now is noted, not raised: the report is printed whole, and a rerun it
            # reached proves nothing (rev28a F2); retaincheck then exits 130
            sigint = signal.signal(signal.SIGINT, note_interrupt)
            try:
                code = _finish(opts, report, status, stopped, start_dir, printed, given,
                               touched, start_env, start)
                return EXIT_INTERRUPTED if INTERRUPTED and code in (0, EXIT_UNNEEDED) else code
            finally:
                signal.signal(signal.SIGINT, sigint)
                INTERRUPTED.clear()
                STOPPED.clear()
        os.close(wake[0])
        os.set_blocking(wake[1], False)
        try:
            signal.set_wakeup_fd(wake[1], warn_on_full_buffer=False)
        except ValueError:  # not the main thread: the parent passes on what it gets
            os.close(wake[1])
        try:
            os.fstat(0)
            stdin_closed = False
        except OSError:  # standard input closed (<&-): the pipes below must not take fd 0
            os.open(os.devnull, os.O_RDONLY)  # (rev27q W1)
            stdin_closed = True
        tee = _Tee(tee_pipe)
        _AFTER_MAIN_CODE.append(tee.sync)
        stdin = None if stdin_closed else _StdinTee()
        if stdin_closed:  # closed again, as the program found it (rev28b F12: an empty pipe
            os.close(0)  # there let a program that fails plainly complete); the rerun's too
        undo_exec = _give_back_before_exec(tee, stdin)
    pid = os.getpid()
    ended: list = []  # what the program's end left: (printed, given)

    def wind_up() -> None:
        """Undo what main() set up for the program (also when it ends by os._exit)."""
        if undo_exec is not None:
            undo_exec()
        printed = tee.close() if tee is not None else None
        if "stdout" in closed:  # nothing to compare: the rerun's goes nowhere too
            printed = None
        given = stdin.close() if stdin is not None else None
        ended.append((printed, given))
        sys.stdout.flush()
        sys.argv = saved_argv
        sys.stdout = saved_stdout
        sys.path[:] = saved_path
        if real_stdout is not None:
            sys.stderr.flush()
            os.dup2(real_stdout, 1)
            os.close(real_stdout)

    def report_on(report, status: int, stopped) -> int:
        """The audited run is over: report it (or hand it to the process that proves)."""
        printed, given = ended[-1]
        if proving:  # the audited run's child: its outcome goes to the process that proves
            import pickle

            from ._proof import stop_helpers

            stop_helpers()  # as at the program's exit (the parent looks for what still runs)

            for record in report.calls:  # the audit's own (code objects, frames' watches)
                for name in ("_shapes", "_first_shape", "_graph_names", "_loops", "_watches",
                             "_watch_tries", "_shapes_iterated"):
                    record.__dict__.pop(name, None)
            with open(outcome_file, "wb") as f:
                pickle.dump((report, status, None if stopped is None else "stopped", printed,
                             given, None if mark is None else saved_stdout.getvalue()[mark:]),
                            f)
            sys.stderr.flush()
            _REAL_EXIT(0)
        sigint = None
        if threading.current_thread() is threading.main_thread():
            # A second Ctrl-C must not cut the report short.
            sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return _finish(opts, report, status, stopped, start_dir, printed, given)
        finally:
            if sigint is not None:
                signal.signal(signal.SIGINT, sigint)

    def hard_exit(n: int) -> None:
        """os._exit(n) in the program (rev28a F8: the report, and with the gate the program's
        last output, were lost): the audit ends here, as at the program's end but with none of
        the exit work os._exit skips, the report is made, then the process exits. Forked
        children's and other calls pass through."""
        if os.getpid() != pid or not _AUDITING:
            _REAL_EXIT(n)
        os._exit = _REAL_EXIT
        code = n
        try:
            context = _AUDITING.pop()
            stopped = None if n == 0 else SystemExit(n)
            context.__exit__(*((None, None, None) if stopped is None
                               else (SystemExit, stopped, None)))
            wind_up()
            code = report_on(context._session.report, n, stopped)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # closed, or gone with the reader (| head)
                    pass
            _REAL_EXIT(code)

    os._exit = hard_exit
    try:
        report, status, stopped = _run_program(opts, code, finalize=proving)
    finally:
        os._exit = _REAL_EXIT
        _AUDITING.clear()
        _AFTER_MAIN_CODE.clear()
        if not ended:
            wind_up()
    if os.getpid() != pid:
        # A child the program forked, leaving through sys.exit or the end of the script: the
        # parent reports (what the child reused reached it, _hooks.Session.children).
        return status
    return report_on(report, status, stopped)


_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def _ignores_or_holds(pid: int, number: int) -> bool:
    """Whether process ``pid`` ignores signal ``number`` now (``SIG_IGN``) or holds it
    pending (blocked), from Linux's ``/proc/PID/status``: either way it got the signal or
    would drop it, and it is not passed on (rev31b F-s1: a Ctrl-C the program ignored while
    it wrote a checkpoint was passed on a second later, after it had restored its handler,
    and ended it). False where that cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        bit = 1 << (number - 1)
        return any(int(fields[name].strip(), 16) & bit for name in ("SigIgn", "SigPnd", "ShdPnd")
                   if name in fields)
    except (OSError, ValueError):
        return False


def _wait_for_the_audit(child: int, outcome_file: str, wake: int):
    """Wait for the child that runs the program, and return what it left: (report, status,
    stopped, printed, given), or the exit status it ended with when it left nothing
    (``os._exit``, killed by a signal).

    A stop signal sent to this process (``kill``, ``Popen.terminate()``, ``docker stop``, a
    SLURM job's SIGUSR1) is the program's: this process does not end, and passes it on unless
    the child got it too (rev30a H2, rev30b F-k4, F-k5: retaincheck ended and the program ran
    on; a program that saves a checkpoint on SIGTERM was cut short). Sent to the whole job
    (Ctrl-C, ``killpg``, ``scancel``, ``timeout``) it reaches the child itself: its wakeup fd
    (``signal.set_wakeup_fd``, ``wake`` here) shows that within a second, or its end does, and
    nothing is passed on twice. A signal the program does not handle kills it, then or when
    passed on. Either way no rerun follows (``_proof.STOPPED``). Where signals cannot be
    waited for (not Linux's ``sigtimedwait``, not the main thread), Ctrl-C is ignored here
    and the rest is as by default."""
    import pickle
    import time

    from ._proof import STOPPED

    watched = {getattr(signal, name) for name in _STOP_SIGNALS if hasattr(signal, name)}
    watched = {s for s in watched if signal.getsignal(s) is not signal.SIG_IGN}  # (nohup)
    if hasattr(signal, "sigtimedwait") and (
            threading.current_thread() is threading.main_thread()):
        os.set_blocking(wake, False)
        waited = watched | {signal.SIGCHLD}
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
        try:
            child_got: dict[int, float] = {}  # signal -> when the child's handler saw it
            pending: dict[int, float] = {}  # signal -> when it came here, not yet seen there
            while True:
                done, wait_status = os.waitpid(child, os.WNOHANG)
                if done:
                    break
                now = time.monotonic()
                try:
                    for number in os.read(wake, 512):
                        child_got[number] = now
                        pending.pop(number, None)
                except (BlockingIOError, OSError):
                    pass
                for number, since in list(pending.items()):
                    if now - since >= 1.0:  # the child did not get it: it was this process's
                        del pending[number]
                        try:
                            os.kill(child, number)
                        except ProcessLookupError:
                            pass
                # a short wait: SIGCHLD (blocked only in this thread) may be taken and dropped
                # by another thread of this process, so the child's end is also polled for
                info = signal.sigtimedwait(waited, 0.05)
                if info is not None and info.si_signo in watched:
                    STOPPED.append(info.si_signo)
                    if (time.monotonic() - child_got.get(info.si_signo, -9.0) >= 1.0
                            and not _ignores_or_holds(child, info.si_signo)):
                        pending[info.si_signo] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    else:
        sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            while True:
                try:
                    _, wait_status = os.waitpid(child, 0)
                    break
                except InterruptedError:
                    continue
        finally:
            signal.signal(signal.SIGINT, sigint)
    try:
        with open(outcome_file, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        code = os.waitstatus_to_exitcode(wait_status)
        return 128 - code if code < 0 else code
    finally:
        try:
            os.unlink(outcome_file)
        except OSError:
            pass


def _finish(opts: Options, report, status: int, stopped, start_dir: str,
            printed: bytes | None = None, given: bytes | None | bool = None,
            touched: list[str] | bool = (), env: dict[str, str] | None = None,
            start: dict | None = None) -> int:
    """Print (and write) the report, --fix's plan, and return the exit status."""
    completed = stopped is None and getattr(report, "completed", True)
    rank = _rank()
    fixes = None
    if opts.fix:
        # First: a failed proof turns its sites to "needed" before the report, the JSON and
        # the --fail-on-unneeded gate read the verdicts.
        from ._fix import fix
        from ._proof import Program

        program = Program(opts.script, opts.module, list(opts.args), start_dir, status,
                          printed, given, touched, env, start)
        fixes = fix(report, completed, status, write=opts.write, dirs=[start_dir],
                    program=program, skip_proof=opts.skip_proof, lang=opts.lang)
    gate_proof = None
    if opts.fail_on_unneeded and completed and status == 0 and _unneeded(report):
        # The gate's 6 tells a team to delete the flag: like --fix, it first reruns the
        # program without it (nothing written), and a failed rerun makes the site needed.
        from ._fix import prove_unneeded
        from ._proof import Program

        program = Program(opts.script, opts.module, list(opts.args), start_dir, status,
                          printed, given, touched, env, start)
        gate_proof = prove_unneeded(report, completed, status, dirs=[start_dir],
                                    program=program, skip_proof=opts.skip_proof,
                                    lang=opts.lang)
    data = json_error = None
    if opts.json or opts.json_path:
        data = report.to_dict()
        if rank is not None:
            data = {"rank": rank[0], "world_size": rank[1], **data}
    if opts.json_path:
        path = _rank_path(opts.json_path, rank[0]) if rank else opts.json_path
        json_error = _write_json_file(path, data)
    sys.stdout.flush()
    if opts.json:
        text = json.dumps(data) + "\n"
    else:
        text = report.format(opts.lang)
        if rank is not None:
            text = f"=== retaincheck: rank {rank[0]} of {rank[1]} ===\n{text}"
    _emit(sys.stdout, text)
    if fixes is not None:
        _emit(sys.stderr if opts.json else sys.stdout, fixes)
    if gate_proof is not None:
        print(gate_proof, file=sys.stderr)
    if opts.fail_on_unneeded and (status != 0 or not completed):
        print(message("gate_incomplete", opts.lang, status=status), file=sys.stderr)
    if json_error is not None:  # one line, after the report; a status that is not 0
        print(f"retaincheck: error: --json={path}: could not write it ({json_error})",
              file=sys.stderr)
        code = _gate_status(opts, report, status, completed)
        return EXIT_BAD_INPUT if code == 0 else code
    return _gate_status(opts, report, status, completed)


def _gate_status(opts: Options, report, status: int, completed: bool) -> int:
    """The exit status once the report is out (and the gate's lines printed)."""
    if status != 0:
        return status
    if opts.fail_on_unneeded:
        if not completed:
            return 1
        found = _unneeded(report)
        if found:
            n = len(found)
            key = "gate_one" if n == 1 else "gate_many"
            print(message(key, opts.lang, n=n, status=EXIT_UNNEEDED), file=sys.stderr)
            return EXIT_UNNEEDED
    return 0


if __name__ == "__main__":
    sys.exit(main())
