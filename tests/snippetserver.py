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
request  {"path": str, "args": [str], "cwd": str, "stdout": str, "stderr": str, "timeout": float,
          "warm_spawn": bool (optional, see start_spawn_zygote),
          "environ": {name: str | null} (optional: set or, null, unset, before the program
                     runs; what the interpreter read at its start is as the server's),
          "reap": bool (optional, default true: kill what the program left running)}
         or {"module": str, ...} instead of "path": ``python -m module args...``
reply    {"returncode": int | null, "seconds": float}   (null: killed at its time limit)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types

import torch  # noqa: F401  (the point of the server: imported once, before any fork)

# torch imports its compiler stack lazily, the first time a snippet steps an optimizer, runs a
# checkpoint or compiles (torch/_compile.py, ``_disable_dynamo``); that import alone took
# 1.3-2 s of each such snippet (35 of them). Imported here, it costs once. What it sets up is
# the state a fresh interpreter reaches at that first call; SNIPPETS_FRESH_INTERPRETER=1 runs
# each snippet without it.
import torch._dynamo  # noqa: E402, F401


def new_numpy_random_state() -> None:
    """What a new interpreter's import of numpy does: draw its global random state from the OS.

    numpy, which torch._dynamo imports, keeps that state across a fork (Python's ``random``
    reseeds itself in a forked child), so each program's fork, and each rank's, calls this.
    Not an ``os.register_at_fork`` hook: the forks a program makes itself (a DataLoader's
    workers) keep numpy's state, as they do for a reader once ``numpy.random`` is imported.
    (Known difference: numpy imports ``numpy.random`` lazily, and torch only through
    torch._dynamo, so a program that forks before its first use of it gives each child a
    state of its own in a new interpreter, and one shared state here.)
    """
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()


def start_spawn_zygote() -> None:
    """Make every ``spawn`` process this program starts a fork of a clean, warm interpreter.

    A distributed snippet starts its ranks with the ``spawn`` method (``launch.py``): each is a
    new interpreter that imports torch (3.5 s of CPU for two ranks, the larger part of such a
    snippet's run) and then re-imports the program's main file as ``__mp_main__``. Here, before
    the program runs, this process forks a *zygote*: a copy of itself that has imported torch
    and nothing of the program. It serves as multiprocessing's fork server
    (``multiprocessing.forkserver.main``), and ``spawn`` processes are started through it
    (``popen_forkserver``). What a rank then does is what a spawned one does
    (``multiprocessing.spawn._main``): it gets the parent's ``sys.path``, ``sys.argv`` and
    working directory, re-imports the main file as ``__mp_main__``, and unpickles its target,
    so a lesson that would fail under ``spawn`` (no ``__main__`` guard, a target defined only
    under it) fails here too. What a fork of the zygote cannot match is handled: torch reads
    some environment variables once, when it is imported (``TORCH_CPP_LOG_LEVEL``, say), so a
    program that changed its environment before starting a process gets its processes from a
    zygote of their own, a new interpreter started with that environment (``python
    snippetserver.py --zygote``: it imports torch, and torch._dynamo, anew, once for all of
    them, where a real ``spawn`` imports torch in each, and prints what the import prints
    once); and ``os.getppid()``, which a rank's orphan watch reads, reports the program while
    it lives (the zygote is the rank's real parent). Real ``spawn``, the orphan watch and the
    time limit are tested on their own, in new interpreters, by
    ``tests/test_distributed_launcher.py``.

    Why our own code: multiprocessing's own fork server starts a new interpreter (it would
    import torch again) and, in a forked child, does not know its server.
    """
    import socket
    import subprocess
    from multiprocessing import connection, context, forkserver, popen_forkserver

    program = os.getpid()

    def start_zygote(fork: bool) -> tuple[str, int, int]:
        """A zygote's address, the fd that keeps it alive, its pid."""
        listener = socket.socket(socket.AF_UNIX)
        address = connection.arbitrary_address("AF_UNIX")
        listener.bind(address)
        os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
        if fork:  # a fork of this clean process, before the program runs
            zygote = os.fork()
            if zygote == 0:
                os.close(alive_w)
                _serve_as_zygote(listener.fileno(), alive_r, program)
        else:  # a new interpreter, which imports torch with the program's environment
            args = ["--zygote", str(listener.fileno()), str(alive_r), str(program)]
            zygote = subprocess.Popen(
                [sys.executable, SERVER, *args], pass_fds=(listener.fileno(), alive_r),
                stdin=subprocess.DEVNULL,
            ).pid
        os.close(alive_r)
        listener.close()
        return address, alive_w, zygote

    def environment() -> tuple:
        return tuple(sorted(os.environ.items()))

    zygotes = {environment(): start_zygote(fork=True)}  # environment -> zygote
    server = forkserver._forkserver

    def start(process_obj):
        key = environment()
        if key not in zygotes:
            zygotes[key] = start_zygote(fork=False)
        address, alive_w, zygote = zygotes[key]
        server._forkserver_address, server._forkserver_alive_fd = address, alive_w
        server._forkserver_pid = zygote
        return popen_forkserver.Popen(process_obj)

    context.SpawnProcess._Popen = staticmethod(start)


def _serve_as_zygote(listener_fd: int, alive_r: int, program: int) -> None:
    from multiprocessing import forkserver, spawn

    prepare = spawn.prepare

    def prepare_rank(data: dict) -> None:  # in each rank, before it imports the main file
        zygote, getppid = os.getppid(), os.getppid

        def parent() -> int:
            real = getppid()
            if real != zygote:
                return real
            try:
                os.kill(program, 0)
            except ProcessLookupError:
                return real  # the program is gone: not its parent any more
            return program

        os.getppid = parent
        new_numpy_random_state()
        prepare(data)

    spawn.prepare = prepare_rank
    try:
        forkserver.main(listener_fd, alive_r, [])
    finally:
        os._exit(0)


def run_child(request: dict) -> None:
    """In the forked child: become ``python path args...`` and never return."""
    import atexit
    import builtins
    import io
    import runpy
    import threading
    import traceback

    os.setpgid(0, 0)
    new_numpy_random_state()
    os.chdir(request["cwd"])
    for fd, name, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        os.dup2(os.open(name, flags, 0o600), fd)
    path, module = request.get("path"), request.get("module")
    if request.get("warm_spawn"):  # before any change below: its zygote has the server's
        start_spawn_zygote()
    for name, value in request.get("environ", {}).items():  # for the processes it starts
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if module:  # python -m module args...: the working directory first on sys.path
        sys.argv = [module, *request["args"]]  # run_module puts the module's file in argv[0]
        sys.path[0] = os.getcwd()
    else:
        sys.argv = [path, *request["args"]]
        sys.path[0] = os.path.dirname(path)
    # The program's own __main__ module stays in sys.modules to the end, as in a real
    # interpreter: its globals live while the exit handlers run (runpy.run_path and
    # run_module(alter_sys=True) drop them when the code returns, so a finalizer of a global
    # ran before the atexit handlers).
    main = sys.modules["__main__"] = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    code = 0
    try:
        if module:  # what `python -m module` calls (Modules/main.c: runpy._run_module_as_main)
            runpy._run_module_as_main(module, alter_argv=True)
        else:  # what `python path` does: compile the file and run it in __main__
            with io.open_code(path) as source:
                program = compile(source.read(), path, "exec")
            main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __spec__=None)
            exec(program, main.__dict__)
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
        # The module that is __main__ at the end, as for the interpreter: a program may have
        # put another there (tests/lessonrun.py makes the lesson's module the program's).
        tear_down(sys.modules.get("__main__", main))
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def tear_down(main: types.ModuleType) -> None:
    """What the interpreter does to ``__main__`` after the exit handlers (``Py_FinalizeEx``,
    ``finalize_modules``; ``_PyModule_ClearDict`` in ``Objects/moduleobject.c``): its names are
    set to None, first those with one leading underscore, then all but ``__builtins__``; then a
    collection. An object only a global holds goes then: a second stream on stdout flushes its
    last line, a ``__del__`` runs. Two differences from the interpreter, both known: it collects
    first and finalizes with the globals still in place, so here a ``__del__`` that reads a
    global sees None (and fails loudly, on stderr, where the interpreter's would not); and the
    collection is of the two younger generations only (a full one walks all of torch's objects,
    170 ms a run), so cyclic garbage old enough for the oldest generation is not finalized.
    Collecting fully, with the globals in place, only for a program whose ``__main__`` defines
    a ``__del__`` was tried: the order of finalization then differs, and a second stream's last
    line was lost where a new interpreter wrote it. ``.ci/run`` reruns every snippet in a new
    interpreter instead."""
    import gc

    sys.modules.pop("__main__", None)
    names = main.__dict__
    for key in [k for k in names if k.startswith("_") and not k.startswith("__")]:
        names[key] = None
    for key in [k for k in names if k != "__builtins__"]:
        names[key] = None
    gc.collect(1)


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


def leave_torchs_exit_work_out_of_each_run() -> None:
    """At exit, torch deregisters the 174 operator libraries its import registered
    (``weakref.finalize`` in ``torch/library.py``, ``_del_library``): 35 ms of each child's
    60 ms (a trivial program's) run. Those finalizers belong to this server's import, so they
    are taken off the exit list once, here; a library the program registers, and any other
    finalizer or ``atexit`` handler, still goes at its end (a test shows it). What a program
    could see of this: the ``atexit`` flag of those finalizers in weakref's private registry,
    and, in an ``atexit`` handler registered before its ``import torch``, torch's own operators
    still registered, where a new interpreter has removed them by then.

    ``SNIPPETS_FRESH_INTERPRETER=1`` runs each program in a new interpreter instead.
    """
    import weakref

    # weakref.finalize's registry is private: there is no public list of finalizers.
    for finalizer, info in list(weakref.finalize._registry.items()):
        if getattr(info.func, "__module__", None) == "torch.library":
            finalizer.atexit = False


def main() -> None:
    leave_torchs_exit_work_out_of_each_run()
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
        # The child's own children that outlived it (a leaked rank, say) go with it; unless
        # the caller tests that the program leaves none behind ("reap": false), and reaps them.
        if request.get("reap", True):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reply = {"returncode": returncode, "seconds": time.perf_counter() - start}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


SERVER = os.path.abspath(__file__)

if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:  # start_spawn_zygote's zygote for a changed environment
        _serve_as_zygote(*map(int, sys.argv[2:5]))
    else:
        main()
