"""``python -m retaincheck [--json] script.py [args...]``: audit a whole script.

The script runs as ``__main__`` with its own ``sys.argv``. As Python would, the audit then
waits for the script's non-daemon threads and runs its ``atexit`` handlers, so a reuse there
is seen. The report is printed after that, also when the script raises; the script's exit
status is kept (an uncaught exception exits with 1 after the script's own traceback).
Bad input exits with 2 and a one-line error.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading
import traceback

USAGE = """\
usage: retaincheck [--json] SCRIPT.py [ARGS...]

Runs SCRIPT.py as __main__ (with ARGS as its sys.argv[1:]) and reports, for every backward()
or autograd.grad() call made with retain_graph=True, whether a later call really walked the
graph it retained, and how many bytes of saved tensors it kept alive.

options:
  --json      print one JSON object instead of the readable report; the script's own
              standard output (file descriptor 1, subprocesses included) goes to standard
              error, so standard output holds only the JSON
  -h, --help  show this help and exit
  --version   print the version and exit
"""


class BadInput(Exception):
    """A problem with the command line or the script, reported as one line with exit code 2."""


def _parse(argv: list[str]) -> tuple[bool, str, list[str]] | int:
    as_json = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--json":
            as_json = True
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
    if i >= len(argv):
        raise BadInput("no script given (usage: retaincheck [--json] SCRIPT.py [ARGS...])")
    return as_json, argv[i], argv[i + 1 :]


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
        return compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        if b"\x00" in source:
            raise BadInput(f"{path}: not a Python script (it is a binary file)") from None
        if isinstance(exc, SyntaxError) and looks_python:
            where = f" (line {exc.lineno})" if exc.lineno else ""
            raise BadInput(f"{path}: syntax error{where}: {exc.msg}") from None
        raise BadInput(f"{path}: not a Python script (it does not compile as Python)") from None


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


def _finish_like_python() -> None:
    """What Python does when a script's main code ends, done inside the audit.

    It waits for the script's non-daemon threads, then runs the ``atexit`` handlers
    (``atexit._run_exitfuncs`` runs each once and clears them; any left are cleared, so none
    runs again at interpreter exit). A reuse of a retained graph in either place is then seen.
    """
    main = threading.main_thread()
    while True:
        waiting = [t for t in threading.enumerate() if t is not main and not t.daemon]
        waiting = [t for t in waiting if t is not threading.current_thread()]
        if not waiting:
            break
        for thread in waiting:
            thread.join()
    atexit._run_exitfuncs()
    if atexit._ncallbacks():  # cleared by _run_exitfuncs on 3.11; never let one run twice
        atexit._clear()


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m retaincheck`` and of the ``retaincheck`` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parsed = _parse(argv)
        if isinstance(parsed, int):
            return parsed
        as_json, script, script_args = parsed
        _check_script(script)
    except BadInput as exc:
        print(f"retaincheck: error: {exc}", file=sys.stderr)
        return 2

    from ._audit import audit

    saved_argv, saved_path0, saved_stdout = sys.argv, sys.path[0] if sys.path else None, sys.stdout
    sys.argv = [script, *script_args]
    script_dir = os.path.dirname(os.path.abspath(script))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)
    real_stdout = None
    if as_json:
        # Everything the script writes to standard output goes to standard error: Python-level
        # prints, os.write(1, ...) and the output of subprocesses (file descriptor 1).
        sys.stdout.flush()
        real_stdout = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    status = 0
    try:
        with audit() as report:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                status = _exit_code(exc)
            except BaseException as exc:  # the script's own error: its traceback, exit 1
                sys.stdout.flush()
                _script_traceback(exc)
                status = 1
            try:
                _finish_like_python()
            except SystemExit as exc:
                status = status or _exit_code(exc)
    finally:
        sys.stdout.flush()
        sys.argv = saved_argv
        sys.stdout = saved_stdout
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        if real_stdout is not None:
            sys.stderr.flush()
            os.dup2(real_stdout, 1)
            os.close(real_stdout)
    if as_json:
        print(report.to_json())
    else:
        print(report.format(), end="")
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
