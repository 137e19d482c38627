"""``--fix``'s proof: rerun the program with the changes applied before anything is written.

The edited files are written to a temporary folder; a new interpreter runs the program as the
audited run did (the same script or ``-m`` module, arguments, working directory and
environment; on standard input what the audited run could read from a pipe or file), with
every edited file read from its temporary copy under its own name (``__file__``, tracebacks
and imports see the original path, and no bytecode cache of the original is used). The
program runs plainly, without the audit. The
rerun's Python processes (the program and those it starts) run ``_proof_site`` first: a
backward pass started from a line being proven runs without keeping its graph, whatever form
the flag took and whichever file runs the line, and freed-graph errors are noted, even
caught ones. The proof holds when the rerun exits with the status the audited run had, its
output has no "backward through the graph a second time" or "saved tensors ... freed" error,
no such error passed through any Python frame of its processes, the program set no trace
function of its own, and its standard output is the audited run's; only then does
``--fix --write`` write. It costs one more run of the program, slowed by the trace function's
call per Python function call, plus a new interpreter's start and torch's import.
"""

from __future__ import annotations

import json
import linecache
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace

from ._messages import message

FREED = (
    "backward through the graph a second time",
    "access saved tensors after they have already been freed",
)


INTERRUPTED: list[int] = []
"""Ctrl-C while the rerun ran (``note_interrupt``): the rerun's outcome proves nothing."""


STOPPED: list[int] = []
"""Stop signals (SIGTERM, Ctrl-C, ...) the audited run got (``__main__._wait_for_the_audit``):
no rerun is started after it (rev30a H2, rev30b F-k5, F-k6)."""

def note_interrupt(number, frame) -> None:
    """SIGINT handler of retaincheck's process while it reports and proves: the report is not
    cut short, and a rerun that Ctrl-C reached is not taken for a failure (rev28a F2)."""
    INTERRUPTED.append(number)


@dataclass
class Proof:
    proven: bool
    reason: str  # one line: what the rerun did
    seconds: float
    # False: no rerun, under torchrun (the gate's 6 stands, unproven); a rerun that could not
    # run or be watched (refutes=False) makes the sites "could not tell: kept", never a 6
    ran: bool = True
    # True: the rerun failed or met a freed-graph error (the flag was needed); False: it only
    # printed something else or could not be watched (not proven, not refuted)
    refutes: bool = True


@dataclass
class Program:
    """How the audited program was started."""

    script: str | None
    module: str | None
    args: list[str]
    cwd: str
    status: int = 0
    stdout: bytes | None = None  # what the audited run wrote to its standard output
    # what the audited run could read on standard input (a pipe or a file), given to the
    # rerun again; None: a terminal or nothing (the rerun's is then empty); False: too long
    stdin: bytes | None | bool = None
    # the paths under the working folder the audited run created, changed or removed
    # (``changed_paths``); False: too many files to tell
    touched: list[str] | bool = ()
    # the environment when the program started (None: this process's now); the program may
    # have changed os.environ before the rerun starts (rev27s N2)
    env: dict[str, str] | None = None
    # the process's state when the program started (``start_state``), for the rerun
    start: dict | None = None


def _interpreter_options() -> list[str]:
    """The options this Python was started with (``python -W error -m retaincheck ...``): the
    rerun starts with them too (rev27s N16: ``if not sys.warnoptions``)."""
    argv = list(getattr(sys, "orig_argv", ()))
    options, i = [], 1
    while i < len(argv):
        word = argv[i]
        if word == "-" or not word.startswith("-"):
            break
        if word.startswith("--"):  # --check-hash-based-pycs MODE
            takes = "=" not in word and word != "--help"
        else:  # a cluster of flags (-uW always, -uWalways, -OO): -W, -X take a value, the
            # rest of the word or the next one; -m, -c end the options (rev27u: -uW always)
            flags, takes, end = word[1:], False, None
            for k, c in enumerate(flags):
                if c in "WX":  # the rest of the word, if any, is its value
                    takes = k == len(flags) - 1
                    break
                if c in "mc":
                    end = k
                    break
            if end is not None:
                if end:
                    options.append("-" + flags[:end])
                break
        options += argv[i:i + 2] if takes else [word]
        i += 2 if takes else 1
    return options


def start_state() -> dict:
    """What the rerun must start from that the program may change in this process before the
    proof runs, or that differs from a new interpreter's (rev27s): the signals ignored (N14:
    retaincheck ignores SIGINT while it reports), the CPUs (N15), the umask, the interpreter's
    options (N16), and standard input closed (N9) or a regular file (rev27q Q15)."""
    import signal
    import stat

    ignored = []
    for number in signal.valid_signals():
        try:
            if signal.getsignal(number) is signal.SIG_IGN:
                ignored.append(int(number))
        except (ValueError, OSError):
            continue
    state: dict = {"ignored": ignored, "options": _interpreter_options(),
                   "began": time.monotonic(),  # the audited run's start: the rerun's limit
                   "temp": tempfile.gettempdir(),
                   # the command line as the program sees it (rev28a N3: it printed it)
                   "orig_argv": list(getattr(sys, "orig_argv", []))}
    if hasattr(os, "sched_getaffinity"):
        state["affinity"] = sorted(os.sched_getaffinity(0))
    state["umask"] = os.umask(0o022)
    os.umask(state["umask"])
    state["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        import resource

        state["limits"] = {name: resource.getrlimit(getattr(resource, name))[0]
                           for name in ("RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_AS",
                                        "RLIMIT_DATA", "RLIMIT_CORE", "RLIMIT_NPROC",
                                        "RLIMIT_MEMLOCK", "RLIMIT_FSIZE", "RLIMIT_CPU")
                           if hasattr(resource, name)}
    except ImportError:
        pass
    state["blocked"] = sorted(int(n) for n in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    try:
        given = os.fstat(0)
    except OSError:
        state["stdin_closed"] = True
    else:
        if stat.S_ISSOCK(given.st_mode):  # given to the rerun as a pipe: not the same
            state["stdin_socket"] = True  # (rev27u R11)
        elif stat.S_ISREG(given.st_mode):
            try:
                state["stdin_file"] = [os.readlink("/proc/self/fd/0"), os.lseek(0, 0, os.SEEK_CUR),
                                       given.st_size, given.st_mtime_ns, given.st_ino]
            except OSError:
                state["stdin_file"] = None
    return state


def _inheritable(fd: int) -> bool:
    try:
        return fd > 2 and os.get_inheritable(fd)
    except OSError:
        return False


def open_fds() -> set[int]:
    """This process's open file descriptors (Linux's /proc; empty elsewhere)."""
    try:
        listed = {int(name) for name in os.listdir("/proc/self/fd")}
    except (OSError, ValueError):
        return set()
    open_now = set()
    for fd in listed:  # not the one the listing itself had open (rev27w P16)
        try:
            os.fstat(fd)
        except OSError:
            continue
        open_now.add(fd)
    return open_now


_SOCKETS = None  # the sockets Python made since ``watch_sockets`` (a weak set)


def watch_sockets() -> None:
    """Note each socket Python makes from now on (its ``socket.__new__`` audit event): only
    those are released, never one that C++ code made and still serves (gloo's listening
    socket: taking it aborted the process, rev27u B15)."""
    global _SOCKETS
    import weakref

    _SOCKETS = weakref.WeakSet()

    def hook(event, args):
        if event == "socket.__new__" and _SOCKETS is not None:
            try:
                _SOCKETS.add(args[0])
            except TypeError:
                pass

    sys.addaudithook(hook)


def release_sockets(before: set[int]) -> None:
    """Free what the program's leftover sockets hold (a status server's port, still served by
    a daemon thread when the program ended): a plain run's exit would have closed them, and a
    rerun that binds the same port took another path (rev27s N12). Each socket opened since
    ``before`` is shut down and its descriptor pointed at a new unbound datagram socket (never
    readable, so a serving thread's select() stays idle), so that an object still holding its
    number closes nothing of ours."""
    import socket
    import stat

    made = set()
    for sock in list(_SOCKETS or ()):
        try:
            made.add(sock.fileno())
        except (OSError, ValueError):
            continue
    for fd in sorted((open_fds() - before) & made):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            held = socket.socket(fileno=fd)
            try:
                held.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            held.detach()
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as idle:
                os.dup2(idle.fileno(), fd, inheritable=False)
        except OSError:
            continue


def leftovers(token: str | None, project: str | None = None,
              children: tuple[int, ...] = ()) -> str | None:
    """What of the audited program still runs when its rerun would start: a thread it started
    (a daemon autosaving or logging into the folder: rev27t T01, T04, T12), or a process
    started from it (its environment holds ``token``, which retaincheck put there before the
    program ran: a detached job rewriting its results, rev27t T02). A plain run's exit would
    have ended the thread; the process would have run beside a plain rerun as well, but there
    it could not have changed what the audited run left. Either makes the proof not hold.
    Threads are looked for under the pytest gate only (``token`` None), where the tests ran in
    this process: under the command line's gate the program ran in a child process, whose
    threads ended with it, and this process's threads are its host's (``main()`` called from a
    program of its own). ``project``: a pytest session's folder, whose own threads (pytest's,
    xdist's) go on: only threads running code of that folder count there."""
    import threading

    inside = os.path.join(os.path.realpath(project), "") if project else None
    for thread in threading.enumerate() if token is None else ():
        if (not thread.is_alive() or thread is threading.main_thread()
                or thread.name.startswith("retaincheck-")):
            continue
        if inside is not None:  # a Timer's function, a partial's (rev27w P21, P22b)
            run = (getattr(thread, "_target", None) or getattr(thread, "function", None)
                   or type(thread).run)
            while hasattr(run, "func"):
                run = run.func
            code = getattr(run, "__code__", None) or getattr(
                getattr(run, "__func__", None), "__code__", None)
            if code is None or not os.path.realpath(code.co_filename).startswith(inside):
                continue
        return f"thread {thread.name}"
    if token is None:  # the pytest gate: its session's children are pytest's own (xdist)
        return None
    for pid in _adopted():  # orphans of the program, whatever their environment (rev27v V02)
        if pid not in children and _alive(pid):  # not this process's own from before
            return f"process {pid} ({_command(pid)[:80]})"
    for pid in _marked(f"RETAINCHECK_RUN={token}"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if _alive(pid):
            return f"process {pid} ({command[:80]})"
    return None


def _marked(variable: str):
    """The other processes whose environment holds ``variable`` (``NAME=value``), from Linux's
    ``/proc``; none where it cannot be read."""
    needle = variable.encode()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    yield pid
        except OSError:
            continue


def adopt_orphans() -> bool:
    """Make this process the one that orphans of its descendants are given to (Linux's child
    subreaper), so that a process the program started and left running, detached or not,
    with its own environment or not, is found among this process's children."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _adopted() -> list[int]:
    """The processes whose parent is this one now (adopted orphans; the rerun has not begun)."""
    me, found = str(os.getpid()), []
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return found
    for name in names:
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                if f.read().rsplit(")", 1)[-1].split()[1] == me:
                    found.append(int(name))
        except (OSError, IndexError):
            continue
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def release_locks(before: set[int]) -> None:
    """Release the file locks (``flock``, ``lockf``) held on the files the program opened, and
    stop its interval timers and multiprocessing's helpers: a plain run's exit would have (a
    single-instance lock: rev27u B4, B5; a SIGALRM checkpoint handler still firing: rev27t
    T36). The pytest gate's: the command line's program ends with its own process."""
    import fcntl
    import signal
    import stat

    for timer in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
        if hasattr(signal, timer):
            signal.setitimer(getattr(signal, timer), 0)
    stop_helpers()
    for fd in sorted(open_fds() - before):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.flock(fd, fcntl.LOCK_UN)
                fcntl.lockf(fd, fcntl.LOCK_UN)
        except OSError:
            continue


def stop_helpers() -> None:
    """multiprocessing's helper processes end with the program, and the resource tracker then
    removes the shared memory it left (rev27u B6): stopped here, as at the program's exit,
    and waited for."""
    for module, name in (("multiprocessing.resource_tracker", "_resource_tracker"),
                         ("multiprocessing.forkserver", "_forkserver")):
        helper = getattr(sys.modules.get(module), name, None)
        try:
            helper._stop()
        except Exception:  # noqa: BLE001 (an older Python without _stop, or none running)
            pass


def _apply_start(state: dict) -> None:
    """In the rerun: the signals, CPUs, umask and standard input the program started with."""
    import signal

    if state.get("orig_argv") and hasattr(sys, "orig_argv"):
        sys.orig_argv = list(state["orig_argv"])

    ignored = set(state.get("ignored", ()))
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            now = signal.getsignal(number) is signal.SIG_IGN
            if int(number) in ignored and not now:
                signal.signal(number, signal.SIG_IGN)
            elif now and int(number) not in ignored:
                signal.signal(number, signal.default_int_handler
                              if number == signal.SIGINT else signal.SIG_DFL)
        except (ValueError, OSError):
            continue
    if "affinity" in state and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, state["affinity"])
        except OSError:
            pass
    if "umask" in state:
        os.umask(state["umask"])
    if "blocked" in state:  # (rev27u B1: a signal mask the program set)
        signal.pthread_sigmask(signal.SIG_SETMASK, state["blocked"])
    if state.get("limits"):  # soft limits the program raised (rev27u B2: RLIMIT_NOFILE)
        import resource

        for name, soft in state["limits"].items():
            try:
                hard = resource.getrlimit(getattr(resource, name))[1]
                resource.setrlimit(getattr(resource, name), (soft, hard))
            except (ValueError, OSError):
                pass
    if "nice" in state:  # (rev27u B3: os.nice); raising the priority needs the privilege
        try:
            os.setpriority(os.PRIO_PROCESS, 0, state["nice"])
        except OSError:
            pass
    if state.get("stdin_closed"):
        os.close(0)
        sys.stdin = sys.__stdin__ = None
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if name in state.get("closed", ()):
            os.close(fd)
            setattr(sys, name, None)
            setattr(sys, f"__{name}__", None)


def _set_aside(touched: list[str], base: str | None,
               cwd: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Move what the audited run created in the working folder (the top-most of those paths)
    into a new folder beside the system's temporary files, so that the rerun starts from the
    folder as the audited run found it: a log it appends to, a checkpoint it would resume
    from, a marker, a folder it makes are not there, whoever looks (Python, C code, another
    program: rev27r, rev27s). A rename moves nothing on disk. Where the temporary folder lies
    inside the working folder, or on another file system than the path (a tmpfs ``/tmp``: the
    rename fails, and C code's reads would go unseen: rev27v V23), the folder is made in the
    nearest folder above the working folder on the path's file system instead; a path that
    still cannot be renamed (the working folder is a mount point) stays, and ``_proof_site``
    watches it. Returns the folders made and the (path, where it went) pairs."""
    created = sorted(p[:-1] for p in touched if p.endswith("\0") and os.path.lexists(p[:-1]))
    tops: list[str] = []
    for path in created:
        if not any(path.startswith(top + os.sep) for top in tops):
            tops.append(path)
    if not tops:
        return [], []
    # the temporary folder as it was before the program ran (it may point tempfile.tempdir
    # into the working folder, which the rerun may clean: rev27t T15), and not in that folder
    base = os.path.realpath(base or tempfile.gettempdir())
    inside = os.path.join(os.path.realpath(cwd), "")
    made: dict[object, str | None] = {}

    def folder(key, parent: str | None) -> str | None:
        if key not in made:
            try:
                made[key] = parent and tempfile.mkdtemp(prefix=".retaincheck-aside-", dir=parent)
            except OSError:
                made[key] = None
        return made[key]

    moved = []
    for i, path in enumerate(tops):
        try:
            device = os.lstat(path).st_dev
        except OSError:
            continue
        places = [] if os.path.join(base, "").startswith(inside) else [("tmp", base)]
        places.append((device, _above_on(device, inside)))
        for key, parent in places:
            aside = folder(key, parent)
            if aside is None:
                continue
            target = os.path.join(aside, str(i))
            try:
                os.rename(path, target)
            except OSError:
                continue
            moved.append((path, target))
            break
    return [a for a in made.values() if a], moved


def _above_on(device: int, inside: str) -> str | None:
    """The nearest folder above the working folder (``inside``, with its trailing separator)
    on file system ``device`` that this process may write in: the set-aside's fallback."""
    folder = os.path.dirname(inside.rstrip(os.sep))
    while True:
        try:
            if os.stat(folder).st_dev == device and os.access(folder, os.W_OK | os.X_OK):
                return folder
        except OSError:
            pass
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _die_with_parent():
    """What the rerun's process runs before it starts: it is then killed when retaincheck dies,
    even by SIGKILL (Linux's parent-death signal), so that it does not go on writing in the
    working folder while what the audited run made is set aside (rev28b F11). Looked up here,
    in retaincheck's process: nothing is imported in the child between fork and exec."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):  # not Linux
        return None
    return lambda: prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL


def _kill_rerun(spec: str) -> None:
    """Kill what still runs of the rerun: the processes whose environment holds its
    ``RETAINCHECK_PROOF_SPEC`` (Linux's ``/proc``), the processes the rerun started (xdist's
    workers, a script's subprocess) among them (rev30b F-k2: they wrote in the folder after
    retaincheck had put it back and exited). Not a process group of its own: the rerun would
    then be a background job of the terminal, stopped for good at its first read of it
    (rev31a F4: getpass). A process started with another environment is not found."""
    for pid in _marked(f"RETAINCHECK_PROOF_SPEC={spec}"):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def _ended_by_signals():
    """While what the audited run made is set aside or the rerun runs, SIGTERM, SIGHUP,
    SIGQUIT, SIGUSR1 and SIGUSR2 (a time limit, a closed terminal, a SLURM job's warning) end
    retaincheck through its ``finally`` blocks, which kill the rerun's process group and put
    back what was set aside (rev27u D1: it stayed in the temporary folder); returns what
    restores the handlers."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def end(number, frame):
        raise SystemExit(128 + number)

    # every stop signal whose default action would end retaincheck (rev31a F1: SIGUSR1, a
    # SLURM job's, left the set-aside in the temporary folder and the rerun's processes on)
    stops = [getattr(signal, name) for name in
             ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2") if hasattr(signal, name)]
    old = {number: signal.signal(number, end) for number in stops
           if signal.getsignal(number) is signal.SIG_DFL}  # not one nohup or trap '' ignores

    def restore():
        for number, handler in old.items():
            signal.signal(number, handler)

    return restore


def _put_back(asides: list[str], moved: list[tuple[str, str]]) -> None:
    """Undo ``_set_aside``: the audited run's comes back. What is at the path then is moved
    into the set-aside folder, never deleted: it may be the rerun's own, or something of the
    audited run's that the rerun moved there (rotating ``run`` to ``run.old``: rev27t)."""
    kept: dict[str, list[str]] = {}
    for i, (path, target) in enumerate(reversed(moved)):
        aside = os.path.dirname(target)
        try:
            if os.path.lexists(path):
                os.rename(path, os.path.join(aside, f"rerun-{i}"))
                kept.setdefault(aside, []).append(path)
            os.rename(target, path)
        except OSError as exc:
            print(f"retaincheck: could not put {path} back ({exc}); it is in {target}",
                  file=sys.stderr)
    for aside in asides:
        if aside in kept:
            print(f"retaincheck: what the rerun left at {', '.join(kept[aside])[:200]} is in "
                  f"{aside}", file=sys.stderr)
            continue
        try:
            os.rmdir(aside)
        except OSError:
            pass


def prove(changes: dict[str, bytes], program: Program, lang: str = "en",
          forced: list[tuple[str, int]] = (), gate: bool = False) -> Proof:
    """Rerun ``program`` with ``changes`` (real path -> new source) applied, and every backward
    pass started from a ``forced`` line (real path, line) run without keeping its graph, in
    every Python process of the rerun (``_proof_site``); the reason is in ``lang``. What the
    audited run created is set aside for the rerun and put back after it (``_set_aside``).
    ``gate``: the gate's proof, whose changes are its own copies (said as "the rerun")."""
    if STOPPED:  # the user stopped the program (SIGTERM, Ctrl-C it caught): no second run
        return Proof(False, message("proof_stopped", lang, signal=signal.Signals(
            STOPPED[0]).name), 0.0, refutes=False)
    if (program.start or {}).get("token"):
        left = (program.start["left"] if "left" in program.start
                else leftovers(program.start["token"]))
        if left:
            return Proof(False, message("proof_leftover", lang, what=left), 0.0, refutes=False)
    if not program.touched or _distributed(os.environ if program.env is None else program.env):
        return _rerun(changes, program, lang, forced, gate)
    asides, moved = _set_aside(program.touched, (program.start or {}).get("temp"), program.cwd)
    stop = _ended_by_signals() if moved else None
    if moved:  # where they are, should retaincheck be killed (SIGKILL) before the put-back
        print(f"retaincheck: during the rerun, what the audited run created is set aside in "
              f"{', '.join(asides)}", file=sys.stderr, flush=True)
    try:
        gone = tuple(path for path, _ in moved)
        watched = [p for p in program.touched if not (
            p.rstrip("\0") in gone or p.startswith(tuple(g + os.sep for g in gone)))]
        return _rerun(changes, replace(program, touched=watched), lang, forced, gate)
    finally:
        _put_back(asides, moved)
        if stop is not None:
            stop()


def _rerun(changes: dict[str, bytes], program: Program, lang: str,
           forced: list[tuple[str, int]], gate: bool = False) -> Proof:
    def m(key, **values):
        return message(key, lang, **values)

    start = program.start or {}
    if _distributed(os.environ if program.env is None else program.env):
        return Proof(False, m("proof_distributed"), 0.0, ran=False)
    options = start.get("options", [])
    if any(o.startswith("-") and not o.startswith("--")
           and set(o[1:].split("W")[0].split("X")[0]) & set("IES")
           for o in options):  # the rerun's watch would not load (PYTHONPATH, site)
        return Proof(False, m("proof_options", options=" ".join(options)), 0.0, refutes=False)
    if start.get("stdin_socket"):
        return Proof(False, m("proof_stdin_socket"), 0.0, refutes=False)
    if "stdin_file" in start:
        stdin_file = start["stdin_file"]
        try:
            feed_file = open(stdin_file[0], "rb")  # noqa: SIM115 (closed below)
            given = os.fstat(feed_file.fileno())
            if [given.st_size, given.st_mtime_ns, given.st_ino] != stdin_file[2:]:
                feed_file.close()
                raise OSError
            feed_file.seek(stdin_file[1])
        except (OSError, TypeError):
            return Proof(False, m("proof_stdin"), 0.0, refutes=False)
    else:
        feed_file = None
    if program.stdin is False:
        return Proof(False, m("proof_stdin"), 0.0, refutes=False)
    if program.touched is False:
        return Proof(False, m("proof_big_folder", n=SNAPSHOT_LIMIT), 0.0, refutes=False)
    # the temporary folder as it was before the program ran (rev27t T15: not one the program
    # pointed tempfile at, which may be set aside or cleaned)
    with tempfile.TemporaryDirectory(prefix="retaincheck-proof-",
                                     dir=(program.start or {}).get("temp")) as tmp:
        copies = {}
        for i, (path, source) in enumerate(sorted(changes.items())):
            copy = os.path.join(tmp, f"{i}-{os.path.basename(path)}")
            with open(copy, "wb") as f:
                f.write(source)
            copies[path] = copy
        spec = os.path.join(tmp, "spec.json")
        marker = os.path.join(tmp, "freed.txt")
        tracer = os.path.join(tmp, "tracer.txt")
        unreached = os.path.join(tmp, "unreached.txt")
        reached = os.path.join(tmp, "reached.txt")
        expected = os.path.join(tmp, "expected.txt")
        state = os.path.join(tmp, "state.txt")
        text_forced = os.path.join(tmp, "text_forced.txt")
        hits = os.path.join(tmp, "hits.txt")
        # the code of each forced line as the file on disk has it, flag and all (a copy of
        # the file that the program runs is matched by it): in an edited file the forced line
        # is the edited copy's, so its line on disk is found back (rev28a F4 moved them)
        from ._fix import _line_map

        back = {}
        for k, v in changes.items():
            try:
                with open(k, "rb") as f:
                    back[os.path.realpath(k)] = _line_map(v, f.read())
            except OSError:
                pass

        def code_at(path: str, line: int) -> str:
            return linecache.getline(path, back[path](line) if path in back else line).strip()

        texts = [[line, code_at(path, line)] for path, line in forced]
        with open(spec, "w", encoding="utf-8") as f:
            json.dump({"script": program.script, "module": program.module,
                       "args": program.args, "copies": copies, "marker": marker,
                       "tracer": tracer, "forced": [list(site) for site in forced],
                       "texts": texts, "unreached": unreached, "reached": reached,
                       "expected": expected, "touched": list(program.touched or ()),
                       "state": state, "text_forced": text_forced, "hits": hits,
                       "site": os.path.join(tmp, "site"), "start": start}, f)
        boot_dir = os.path.join(tmp, "site")
        os.mkdir(boot_dir)
        shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "_proof_site.py"),
                        os.path.join(boot_dir, "sitecustomize.py"))
        env = dict(os.environ if program.env is None else program.env)
        env["RETAINCHECK_PROOF_SPEC"] = spec
        env["PYTHONPATH"] = os.pathsep.join(p for p in (boot_dir, env.get("PYTHONPATH")) if p)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        boot = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from retaincheck._proof import child; child(sys.argv[2])"
        )
        start = time.perf_counter()
        # ten times as long as the audited run took (a minute at least), then it is stopped
        began = (program.start or {}).get("began")
        limit = max(RERUN_MIN_S, 10 * (time.monotonic() - began)) if began else None
        try:
            feed = ({"stdin": feed_file} if feed_file is not None else
                    {"stdin": subprocess.DEVNULL} if program.stdin is None else
                    {"input": program.stdin})  # b"": an empty pipe, not /dev/null (rev27w N1)
            # the descriptors the program was started with, beyond 0-2 (rev27w N20: fd 3)
            passed = tuple(fd for fd in (program.start or {}).get("fds", ()) if _inheritable(fd))
            given = feed.pop("input", None)
            # SIGTERM and SIGHUP end retaincheck through the finally below, which kills the
            # rerun's group (the default action would leave its processes running)
            restore = _ended_by_signals()
            try:
                with subprocess.Popen(
                    [sys.executable, *options, "-c", boot, here, spec],
                    cwd=program.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.PIPE if given is not None else feed.get("stdin"),
                    pass_fds=passed, preexec_fn=_die_with_parent(),
                ) as popen:
                    try:
                        out, err = popen.communicate(given, timeout=limit)
                    except subprocess.TimeoutExpired:  # (rev35b NEW-8: it hung)
                        _kill_rerun(spec)
                        popen.kill()
                        popen.communicate()
                        return Proof(False, m("proof_timeout", seconds=f"{limit:.0f}"), limit,
                                     refutes=False)
                    except BaseException:  # stopped (SIGTERM, Ctrl-C): its processes too
                        _kill_rerun(spec)
                        raise
                proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
            finally:
                if restore is not None:
                    restore()
        except OSError as exc:
            return Proof(False, m("proof_no_start", error=exc.strerror or exc), 0.0,
                         refutes=False)
        finally:
            if feed_file is not None:
                feed_file.close()
        seconds = time.perf_counter() - start
        own_tracer = os.path.exists(tracer)
        lost = _unreached(unreached, reached, expected)  # (what still runs is one of these)
        _kill_rerun(spec)  # then what is left of the rerun goes
        # a line forced off for its text, not its place (another site, a copy): a failure
        # then may come from that line, so it does not show these sites needed (rev27n M1)
        by_text = _first_noted(text_forced, empty="?")  # "line<TAB>path" of the first
        not_run = _not_run(forced, texts, _noted(hits))
        left = _first_noted(state, empty="?")
        caught = (_first_noted(marker, empty="") or "")[:160]
    output = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    if INTERRUPTED or (proc.returncode == -signal.SIGINT != program.status):
        # Ctrl-C during the rerun (rev28a F2): it reached the rerun, and this process noted it
        return Proof(False, m("proof_interrupted"), seconds, refutes=False)
    if any(text in output for text in FREED):
        said = m("proof_failed", status=proc.returncode, error=_last_error(output, lang))
        if by_text:  # (rev41b P1: the failure may be that line's, not the sites')
            line, _, path = by_text.partition("\t")
            shown = os.path.relpath(path, program.cwd) if path.startswith(program.cwd) else path
            said += m("proof_same_code", site=f"{shown}:{line}" if path else "?")
        return Proof(False, said, seconds, refutes=not by_text)
    # Without the freed-graph error in what it printed, a rerun that ended otherwise (EOF on
    # an input() prompt: rev28a F3) or met the error only where the program caught it (one the
    # audited run met too: rev28b F9) shows no walk of the graph: kept, "could not tell"
    if proc.returncode != program.status:
        return Proof(False, m("proof_status", status=proc.returncode, audited=program.status,
                              error=_last_error(output, lang)), seconds, refutes=False)
    if caught:
        return Proof(False, m("proof_caught", error=caught), seconds, refutes=False)
    if own_tracer:
        return Proof(False, m("proof_tracer"), seconds, refutes=False)
    if lost:
        return Proof(False, m("proof_unreached", command=lost), seconds, refutes=False)
    if left:
        shown = os.path.relpath(left, program.cwd) if left.startswith(program.cwd) else left
        return Proof(False, m("proof_state", path=shown[:120]), seconds, refutes=False)
    if not_run:  # it took another path (resumed from a checkpoint outside the folder: rev29a
        shown = (os.path.relpath(not_run[0], program.cwd)  # G2): it proves nothing of them
                 if not_run[0].startswith(program.cwd) else not_run[0])
        return Proof(False, m("proof_site_not_run", site=f"{shown}:{not_run[1]}"), seconds,
                     refutes=False)
    # In order: the same lines in another order may come from the flag (rev34a J6: a
    # weakref.finalize that prints when a graph's tensor is freed ran before another print);
    # said apart, as a program's threads and processes may interleave their output anew
    if program.stdout is not None and proc.stdout != program.stdout:
        diff = _first_difference(program.stdout, proc.stdout, lang)
        same = sorted(proc.stdout.splitlines()) == sorted(program.stdout.splitlines())
        return Proof(False, m("proof_stdout_order" if same else "proof_stdout", diff=diff),
                     seconds, refutes=False)
    # the gates: no file of the user's changed
    return Proof(True, m("proof_ok" if changes and not gate else "proof_ok_flag",
                         status=proc.returncode,
                         seconds=f"{seconds:.1f}"), seconds)


SNAPSHOT_LIMIT = 20000
RERUN_MIN_S = 60.0  # the least time a rerun gets before it is stopped
GRACE = 3.0  # seconds a process the rerun started gets to end after the program


def own_outputs(paths=()) -> frozenset:
    """(device, inode) of the files that retaincheck's (or pytest's) own output goes to, left
    out of ``snapshot``: standard output and error when they are files (``> check.log 2>&1``
    in the working folder: rev28a F7, rev28b F3) or pipes into a program that writes files
    (``| tee check.log``: rev29b), and ``paths`` (a report pytest writes)."""
    found, pipes = set(), set()
    for target in (1, 2, *paths):
        try:
            st = os.stat(target)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
        elif stat.S_ISFIFO(st.st_mode):
            pipes.add(st.st_ino)
    return frozenset(found | pipe_readers_files(pipes))


def pipe_readers_files(pipes: set[int]) -> set[tuple[int, int]]:
    """(device, inode) of the regular files open in the other processes that hold one of
    these pipes (by inode): ``tee``'s log at the end of ``| tee check.log`` (Linux's /proc)."""
    if not pipes:
        return set()
    links = {f"pipe:[{ino}]" for ino in pipes}
    found: set[tuple[int, int]] = set()
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if int(pid) == os.getpid():
            continue
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
            targets = [os.readlink(f"{folder}/{fd}") for fd in fds]
        except OSError:
            continue
        if not links.intersection(targets):
            continue
        for fd in fds:
            try:
                st = os.stat(f"{folder}/{fd}")
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.add((st.st_dev, st.st_ino))
    return found


def snapshot(root: str, own: frozenset = frozenset()) -> dict[str, tuple] | None:
    """Each file and folder under ``root``: its modification time, size and inode; None past
    ``SNAPSHOT_LIMIT`` entries. Left out: ``.git``, ``__pycache__``, ``.pytest_cache``,
    ``node_modules`` and virtual environments (a folder with ``pyvenv.cfg``), which a run does
    not read its own state from, and the files in ``own`` (``own_outputs``); other hidden
    folders are kept (rev27q Q7: a program's ``.cache``)."""
    found: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__", "node_modules",
                                                 ".pytest_cache")
                   and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))]
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            is_dir = name in dirs
            if own and (st.st_dev, st.st_ino) in own:
                continue
            found[path] = (None, 0, st.st_ino) if is_dir else (st.st_mtime_ns, st.st_size,
                                                                  st.st_ino)
            if len(found) > SNAPSHOT_LIMIT:
                return None
    return found


def changed_paths(before: dict | None, after: dict | None) -> list[str] | bool:
    """The paths the audited run created, changed or removed (``snapshot`` before and after
    it), absolute, those it created or removed ending in a NUL; False when either snapshot
    was too big. A rerun that reads one of them
    before writing it would start from what the audited run left (rev27o R3: a checkpoint or
    a "done" marker sends it down another path)."""
    if before is None or after is None:
        return False
    return sorted(os.path.abspath(p) + ("" if p in before and p in after else "\0")
                  for p in set(before) | set(after) if before.get(p) != after.get(p))


def _not_run(forced, texts, noted: list[str]) -> tuple[str, int] | None:
    """The first forced site that no backward pass of the rerun started from: neither its line
    nor (a copy of the file) its code, as ``_proof_site`` noted them in ``hits``."""
    from ._proof_site import _code

    lines, codes = set(), set()
    for entry in noted:
        first, _, rest = entry.partition("\t")
        if first == "text":
            codes.add(rest)
        elif first.isdigit():
            lines.add((rest, int(first)))
    for (path, line), (_, text) in zip(forced, texts, strict=True):
        if (path, line) not in lines and not (text and _code(text) in codes):
            return path, line
    return None


def _noted(path: str) -> list[str]:
    """The lines ``_proof_site`` wrote to one of its note files (none if it wrote none)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line for line in f.read().splitlines() if line.strip()]


def _first_noted(path: str, empty: str | None) -> str | None:
    """The first line written to a note file; ``empty`` for a file with none; None for none."""
    if not os.path.exists(path):
        return None
    return (_noted(path) or [empty])[0]


def _unreached(unreached: str, reached: str, expected: str) -> str | None:
    """The first command the rerun started that ``_proof_site`` did not run in: one written to
    ``unreached``, or a pid in ``expected`` with no line in ``reached`` written after the
    start (a process that never ran Python, or ran it with ``-I``, ``-E``, ``-S`` or without
    the proof's environment)."""
    def lines(path):
        return [line.split(" ", 2) for line in _noted(path)]

    first = _first_noted(unreached, empty=None)
    if first:
        return first[:160]
    seen = {}
    for words in lines(reached):
        try:
            seen.setdefault(int(words[0]), []).append(float(words[2]))
        except (ValueError, IndexError):
            return "?"  # a line cut short: not proven
    for words in lines(expected):
        try:
            pid, since, command = int(words[0]), float(words[1]), words[2]
        except (ValueError, IndexError):
            return "?"
        if not any(at >= since for at in seen.get(pid, ())):
            return f"started {command}"[:160]
        # rev27n F7: a detached job may walk the graph after the comparison; a helper that
        # ends with the program (multiprocessing's resource tracker) gets a moment to do so
        deadline = time.monotonic() + GRACE
        while _alive(pid):
            if time.monotonic() > deadline:
                return f"still running after the program: {command}"[:160]
            time.sleep(0.05)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process under a reused pid: not told apart
        return True
    try:  # a zombie (exited, not yet reaped) has ended
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def real_line(record, path: str | None = None) -> tuple[str, int] | None:
    """(real path, line) of a call site, as a backward pass started there shows it (the
    record's own source file, else ``path``); None for code with no file."""
    path = getattr(record, "_source", None) or path
    return (os.path.realpath(path), record.line) if path and not path.startswith("<") else None


def _first_difference(old: bytes, new: bytes, lang: str = "en") -> str:
    a = old.decode("utf-8", "replace").splitlines()
    b = new.decode("utf-8", "replace").splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return message("proof_line", lang, n=i + 1, old=repr(x[:60]), new=repr(y[:60]))
    return message("proof_lines", lang, old=len(a), new=len(b))


def _distributed(env) -> bool:
    """Under torchrun: as the program started (rev27s N6: one that sets WORLD_SIZE itself)."""
    try:
        return int(env.get("WORLD_SIZE", "1")) > 1
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
    _apply_start(spec.get("start") or {})
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
            return None  # not an edited file: the finders after this one (_proof_site's)

    sys.meta_path.insert(0, Finder)
    # sys.path: retaincheck's folder, -c's '', then the rest with the site folder (from
    # PYTHONPATH) in it; python script.py would have none of the first two. The site folder
    # stays (it holds only sitecustomize): a program that passes its sys.path on as a child's
    # PYTHONPATH (torch.compile's probes, torch/_inductor/utils.py, python_subprocess_env)
    # starts a child this module still reaches (rev27m c13)
    safe = getattr(sys.flags, "safe_path", False)  # -P: -c added no '' (rev27w N17)
    tail = sys.path[1:] if safe else sys.path[2:]
    if spec["module"] is not None:
        sys.argv = [spec["module"], *spec["args"]]
        sys.path[:] = tail if safe else [os.getcwd(), *tail]
        runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
        return
    script = spec["script"]
    sys.argv = [script, *spec["args"]]
    sys.path[:] = tail if safe else [os.path.dirname(os.path.realpath(script)), *tail]
    filename = os.path.join(os.getcwd(), script)
    copy = edited(filename)
    with open(copy if copy is not None else filename, "rb") as f:
        source = f.read()
    from .__main__ import _main_module

    module = _main_module(filename)
    sys.modules["__main__"] = module
    exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
