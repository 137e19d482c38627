"""A warm interpreter that runs each snippet in a fork of itself.

Started by ``snippetcheck`` with the snippets' environment (one thread, the CPU variant's
settings), it imports torch once, before any torch work, and then, for each request on
stdin, forks: the child runs the file as ``__main__`` exactly as ``python file.py`` would
(absolute ``__file__``, ``sys.argv``, ``sys.path[0]``, the working directory it is given,
stdin from /dev/null, stdout and stderr into the files it is given, atexit handlers and
non-daemon threads at the end), in a process group of its own so that a time limit kills it
and everything it started. The parent reports the exit code and the time.

Each child starts from the same clean state: the parent has done nothing but import torch, so
a seed, a default dtype, a thread count or a grad mode that one snippet sets dies with it.
Why our own code: pytest-xdist and pytest-forked fork or spawn per *test*, not from a warm
interpreter whose environment differs from pytest's, and a snippet must not run inside the
pytest process (its global torch state would leak into the next test).

Protocol: one JSON object per line each way.
request  {"path": str, "args": [str], "cwd": str, "stdout": str, "stderr": str, "timeout": float}
         or {"module": str, ...} instead of "path": ``python -m module args...``
reply    {"returncode": int | null, "seconds": float}   (null: killed at its time limit)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import torch  # noqa: F401  (the point of the server: imported once, before any fork)

# torch imports its compiler stack lazily, the first time a snippet steps an optimizer, runs a
# checkpoint or compiles (torch/_compile.py, ``_disable_dynamo``); that import alone took
# 1.3-2 s of each such snippet (35 of them). Imported here, it costs once. What it sets up is
# the state a fresh interpreter reaches at that first call; SNIPPETS_FRESH_INTERPRETER=1 runs
# each snippet without it.
import torch._dynamo  # noqa: E402, F401


def run_child(request: dict) -> None:
    """In the forked child: become ``python path args...`` and never return."""
    import atexit
    import runpy
    import threading
    import traceback

    os.setpgid(0, 0)
    os.chdir(request["cwd"])
    for fd, name, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        os.dup2(os.open(name, flags, 0o600), fd)
    path, module = request.get("path"), request.get("module")
    if module:  # python -m module args...: the working directory first on sys.path
        sys.argv = [module, *request["args"]]  # run_module puts the module's file in argv[0]
        sys.path[0] = os.getcwd()
    else:
        sys.argv = [path, *request["args"]]
        sys.path[0] = os.path.dirname(path)
    code = 0
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # what the interpreter does at exit: join non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def wait(pid: int, timeout: float) -> int | None:
    """The child's exit code, or None after killing its process group at the time limit."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            run_child(request)
        try:
            os.setpgid(pid, pid)  # also here, so that the group exists before any kill
        except (ProcessLookupError, PermissionError):
            pass
        returncode = wait(pid, request["timeout"])
        # The child's own children that outlived it (a leaked rank, say) go with it.
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        reply = {"returncode": returncode, "seconds": time.perf_counter() - start}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
