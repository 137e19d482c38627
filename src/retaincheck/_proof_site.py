"""The proof's watch inside every Python process of a rerun (``_proof``).

``_proof`` copies this file as ``sitecustomize.py`` into a folder it puts first on the rerun's
``PYTHONPATH``, so Python imports it at the start of the rerun and of every Python process the
rerun starts (``subprocess`` running ``sys.executable``, multiprocessing's ``spawn`` and
``forkserver``; a forked child inherits it). It imports nothing of ``retaincheck`` (nor torch
until the program does) and then runs the ``sitecustomize`` it stands in front of, if any.
Python started with ``-S``, ``-I`` or ``-E`` skips it.

In each process it does three things, from the spec named by ``$RETAINCHECK_PROOF_SPEC``:

* ``forced``: a backward pass started from one of these lines (``[file, line]``, the nearest
  frame outside torch) runs with ``keep_graph`` off, as ``retain_graph=False`` would: the
  rerun without the flag, whatever form it took in the source (``retain_graph=keep``,
  ``**options``, a position) and whichever file runs it (a script started again by path).
* a freed-graph error raised by the engine is written to ``marker``, even one the program
  catches (the engine's entry point, ``Variable._execution_engine.run_backward``:
  ``torch/autograd/graph.py``, ``_engine_run_backward``);
* a freed-graph error passing through any Python frame is written to ``marker`` too: not every
  unpack of a freed saved tensor goes through the engine (a node called directly,
  ``THPCppFunction_call``; a ``grad_fn._saved_*`` getter; ``ctx.saved_tensors``: all raise in
  ``SavedVariable::unpack``, ``torch/csrc/autograd/saved_variable.cpp``). A trace function
  sees every exception as it passes through a Python frame (``sys.settrace``, and
  ``threading.settrace`` for threads ``threading`` starts; a wrapper of
  ``_thread.start_new_thread`` for the others), from the moment torch's import ends (before it
  no such error can happen; tracing the import would double its time), the frames already
  running included; line events are off, so it costs one call per function call and return.
  A program that sets its own trace function replaces this one: that is written to
  ``tracer``, and the proof does not hold.
"""

import json
import os
import posix
import stat
import sys

# The process watch's own look-ups, not the state watch's wrappers of them (_watch_state)
_ACCESS, _STAT = posix.access, posix.stat

FREED = (
    "backward through the graph a second time",
    "access saved tensors after they have already been freed",
)


def _note(path, text):
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text.replace("\n", " ") + "\n")
    except OSError:
        pass


def _watch_exceptions(marker, tracer):
    import _thread
    import threading

    written = []

    def local(frame, event, arg):
        if event == "exception" and not written and issubclass(arg[0], RuntimeError):
            text = str(arg[1])
            if any(t in text for t in FREED):
                written.append(True)
                _note(marker, text)
        return local

    def start(frame, event, arg):
        frame.f_trace_lines = False
        return local

    def noted(setter):
        def settrace(function, *args, **kwargs):
            if function is not start:
                _note(tracer, f"{setter.__module__}.{setter.__name__}")
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
    frame = sys._getframe(1)
    while frame is not None:  # the frames already running (the program's own, mid-import)
        frame.f_trace_lines = False
        frame.f_trace = local
        frame = frame.f_back
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, traced(getattr(_thread, name)))
    def hidden(getter):  # the program sees no trace function of ours (rev27o R2: a program
        def gettrace():  # that asks sys.gettrace() took another path in the rerun)
            function = getter()
            return None if function is start or function is local else function

        return gettrace

    sys.gettrace = hidden(sys.gettrace)
    if hasattr(threading, "gettrace"):
        threading.gettrace = hidden(threading.gettrace)
    sys.settrace = noted(sys.settrace)
    threading.settrace = noted(threading.settrace)
    if hasattr(threading, "settrace_all_threads"):
        threading.settrace_all_threads = noted(threading.settrace_all_threads)


# Programs taken to start no Python, run as the command itself or as a shell's one simple
# command: what torch (``ldconfig -p`` in a CUDA build's import, a C++ compiler and ``openssl``
# under torch.compile) and training scripts (``git``, ``nvidia-smi``) run. Any other started
# program must show that this module ran in it (``_expect``). Only the system's own copies
# count: the file run, links resolved, lies in one of ``_SYSTEM`` (a `git`, `sh` or compiled
# wrapper of the program's own elsewhere may run anything: rev27p P01-P03, rev27r N05, N06).
_NO_PYTHON = frozenset({
    "ldconfig", "git", "nvidia-smi", "rocm-smi", "uname", "hostname", "nproc", "lscpu", "free",
    "df", "which", "cc", "gcc", "g++", "c++", "clang", "clang++", "ld", "nvcc", "ptxas", "openssl",
    "file",  # platform.architecture() runs it
})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
_SYSTEM = ("/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/", "/usr/lib/", "/usr/libexec/",
           "/usr/local/cuda")
# Variables that make a listed program or shell run code of the caller's choosing: a file a
# shell reads first (rev27p P09), an exported bash function that stands in for a command
# (rev27r N02), a library loaded into any program.
_INJECTING = ("BASH_ENV", "ENV", "LD_PRELOAD", "LD_AUDIT", "PS4", "SHELLOPTS", "BASHOPTS",
              "GIT_EXEC_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH")  # (rev27t T22)


def _words(argv):
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    return [os.fsdecode(w) if isinstance(w, (bytes, os.PathLike)) else str(w)
            for w in list(argv or ())]


_PYTHON_NAME = __import__("re").compile(r"python[0-9.]*(?:\.exe)?")


def _environ():
    """This process's environment as a child inherits it: C's ``environ``, which
    ``os.putenv`` changes without ``os.environ`` (rev27r N03, N10); None if unreadable."""
    try:
        import ctypes

        entries = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
        env, i = {}, 0
        while entries[i] is not None:
            name, _, value = entries[i].partition(b"=")
            env[os.fsdecode(name)] = os.fsdecode(value)
            i += 1
        return env
    except (OSError, ValueError, AttributeError):
        return None


def _find(word, env, cwd=None):
    """The file a child started in ``cwd`` runs for a command word: the word itself when it
    names a folder, else the first executable file on the child's PATH (``execvp``), either
    taken from the child's folder when relative (rev27r N11); None if there is none."""
    base = os.fsdecode(cwd) if cwd is not None else os.getcwd()
    if "/" in word:
        candidates = [word]
    else:
        path = (env or {}).get("PATH", os.defpath)
        candidates = [os.path.join(folder or ".", word) for folder in path.split(":")]
    for candidate in candidates:
        full = os.path.join(base, candidate)
        try:
            if _ACCESS(full, os.X_OK) and not stat.S_ISDIR(_STAT(full).st_mode):
                return full
        except (OSError, ValueError):
            continue
    return None


def _is_python(program, cwd=None, env=None, depth=0):
    """Whether the file a process starts with is Python: a compiled program (not a script:
    rev27r N12) that is this interpreter, or is named python* in a system folder or this
    Python's own; or a script whose first line names one of those, directly or as
    ``/usr/bin/env python3`` (the kernel starts that interpreter under the same pid).
    Anything else (a shell, ``env``, a launcher) is not: it may run a Python out of reach
    before it execs one in reach (rev27n F4)."""
    env = os.environ if env is None else env
    path = _find(program, env, cwd)
    if path is None or depth > 2:
        return False
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    if first.startswith(b"\x7fELF"):
        homes = tuple(os.path.join(os.path.realpath(p), "") for p in {
            sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})
        return real == os.path.realpath(sys.executable) or bool(
            _PYTHON_NAME.fullmatch(os.path.basename(real))
            and real.startswith(_SYSTEM + homes))  # python3.11, not run_python (rev27p P03)
    if not first.startswith(b"#!"):
        return False
    words = first[2:].decode("utf-8", "replace").split()
    if len(words) == 2 and os.path.basename(words[0]) == "env" and words[0].startswith(
            _SYSTEM):  # #!/usr/bin/env python3: looked up on the PATH
        return bool(_PYTHON_NAME.fullmatch(words[1])) and _is_python(
            words[1], cwd, env, depth + 1)
    return len(words) >= 1 and "/" in words[0] and _is_python(words[0], cwd, env, depth + 1)


def _system_program(word, names, env, cwd):
    """Whether ``word``, as a child in ``cwd`` with ``env`` finds it, is the system's own copy
    of one of ``names``: found, in a system folder once links are resolved, not Python."""
    if os.path.basename(word) not in names:
        return False
    path = _find(word, env, cwd)
    if path is None:
        return False  # not found: the child may find another (rev27p P01)
    real = os.path.realpath(path)
    return (real.startswith(_SYSTEM) and real != os.path.realpath(sys.executable)
            and "python" not in os.path.basename(real))


def _starts_no_python(words, env=None, cwd=None):
    """Whether a command is one of ``_NO_PYTHON``, run directly or as ``sh -c``'s one simple
    command (no ``;``, ``|``, ``&``, brackets, ``$`` or backquote; redirections allowed), by
    the system's own copies of the shell and the program, under an environment that injects no
    code (``env``: the child's; None: this process's as C sees it). This is the only guess the
    watch makes: every other command is checked by what it did."""
    env = _environ() if env is None else env
    if env is None or any(name in env for name in _INJECTING) or any(
            name.startswith("BASH_FUNC_") for name in env):
        return False
    if len(words) >= 3 and words[1] == "-c" and _system_program(words[0], _SHELLS, env, cwd):
        # Only plain words and trailing redirections: no quotes, newlines, `#`, `;`, `&`, `|`,
        # brackets, `$` or globs, which a shell reads otherwise than a word splitter would
        # (rev27n F1: shlex took a newline for a space and `a#` for a comment)
        import re

        command = re.sub(r"(?:\s+[0-9]?(?:>>?|<)\s*/dev/null|\s+[0-9]?>&[0-9])+\s*$", "",
                         words[2])
        if not re.fullmatch(r"[A-Za-z0-9_./=:,@%+ -]*", command):
            return False
        words = command.split()
        if words and "=" in words[0]:
            return False  # NAME=VALUE before the command (PATH=./bin git: rev27p P02)
    return bool(words) and _system_program(words[0], _NO_PYTHON, env, cwd)


def _watch_spawns(reached, expected, unreached):
    """Hold every process the rerun starts to account (rev27l, rev27m: guessing from a
    command's words whether it runs Python out of reach, as this did before, missed
    ``-W x -I``, script files, ``os.unsetenv``, ``env NAME=``, multiprocessing's spawn). Each
    Python process this module runs in writes its pid, parent pid and start time to
    ``reached``; each start of a command not in ``_NO_PYTHON`` writes the new process's pid
    and the time before the start to ``expected``; ``_proof`` holds the proof only if every
    expected pid reached this module after that time, so ``python -I``/``-E``/``-S``, an
    environment without the proof's variables, a shell script, or any program that starts
    Python in a child of its own makes the proof not hold ("could not tell: kept").
    Watched: ``_posixsubprocess.fork_exec`` (``subprocess.Popen``, multiprocessing's spawn
    and forkserver: ``Lib/multiprocessing/util.py``, ``spawnv_passfds``), ``os.posix_spawn*``
    (``subprocess``'s other path), ``os.exec*`` (``os.spawn*``, ``pty.spawn``), ``os.system``
    (no pid: only a ``_NO_PYTHON`` command passes), in ``os`` and ``posix`` alike. Not
    watched: a process C code starts (``ctypes``)."""
    from time import monotonic_ns as clock  # bound now: a program may replace time.time

    def expect(argv, pid, since, env=None, cwd=None):
        """``argv[0]``: the file run, as the child finds it; ``env``: the child's environment
        (None: this process's); ``cwd``: the child's folder (None: this one)."""
        words = _words(argv)
        if _starts_no_python(words, env, cwd):
            return
        if _is_python(words[0] if words else "", cwd):
            _note(expected, f"{pid} {since!r} {' '.join(words)[:120]}")
        else:  # a shell or launcher may run an unreached Python before it execs a reached one
            _note(unreached, f"started {' '.join(words)[:120]}")

    import posix

    def wrap(name, argv_at, env_at, spawns):
        original = getattr(posix, name, None)
        if original is None:
            return

        def wrapper(*args, **kwargs):
            argv = args[argv_at] if len(args) > argv_at else kwargs.get("argv", ())
            if name == "system":
                if not _starts_no_python(["/bin/sh", "-c", *_words(argv)]):
                    _note(unreached, f"os.system {' '.join(_words(argv))[:120]}")
                return original(*args, **kwargs)
            env = (args[env_at] if len(args) > env_at else kwargs.get("env")) if env_at else None
            env = None if env is None else {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
            # the program run is the path, whatever argv[0] says; posix_spawnp looks it up on
            # this process's PATH as C sees it (rev27r N03)
            path = args[0] if args else kwargs.get("path", "")
            if isinstance(path, int):  # fexecve: a descriptor, no file to judge
                path = f"<fd {path}>"
            path = os.fsdecode(path)
            if name == "posix_spawnp" and "/" not in path:
                path = _find(path, _environ()) or path
            argv = [path, *_words(argv)[1:]]
            since = clock()
            if not spawns:  # exec: this process becomes the command, with the same pid
                expect(argv, os.getpid(), since, env)
                return original(*args, **kwargs)
            pid = original(*args, **kwargs)
            expect(argv, pid, since, env)
            return pid

        for module in (os, posix):
            if getattr(module, name, None) is original:
                setattr(module, name, wrapper)

    wrap("execv", 1, None, False)
    wrap("execve", 1, 2, False)
    wrap("posix_spawn", 1, 2, True)
    wrap("posix_spawnp", 1, 2, True)
    wrap("system", 0, None, False)

    import _posixsubprocess

    fork_exec = _posixsubprocess.fork_exec

    def watched_fork_exec(*args, **kwargs):
        argv = list(args[0] if args else kwargs.get("args", ()))
        programs = args[1] if len(args) > 1 else kwargs.get("executable_list", ())
        cwd = args[4] if len(args) > 4 else kwargs.get("cwd")
        env = args[5] if len(args) > 5 else kwargs.get("env")
        if env is not None:  # a list of b"NAME=value"
            env = dict(os.fsdecode(entry).partition("=")[::2] for entry in env)
        found = True
        if programs:  # the program run (Popen's executable=, or a shell): the first of these
            # that the child, in its own folder, can run (rev27p P01, rev27r N11)
            words = [_words([p])[0] for p in programs]
            found = [w for w in words if _find(w if "/" in w else "./" + w, {}, cwd)]
            argv = [(found or words)[0], *argv[1:]]
        since = clock()
        pid = fork_exec(*args, **kwargs)
        if found:  # none: the child's exec fails, it runs nothing (rev27r O8)
            expect(argv, pid, since, env, cwd)
        return pid

    def forked():  # a forked child is this Python, reached; it must end with the program
        pid = os.getpid()  # (rev27r N07: a double-forked worker walked the graph later)
        _note(expected, f"{pid} 0 fork of {os.getppid()}")
        _note(reached, f"{pid} {os.getppid()} {clock()}")

    os.register_at_fork(after_in_child=forked)
    _posixsubprocess.fork_exec = watched_fork_exec
    if "subprocess" in sys.modules:  # it binds fork_exec when imported (3.11+)
        sys.modules["subprocess"]._fork_exec = watched_fork_exec
    _note(reached, f"{os.getpid()} {os.getppid()} {clock()}")


def _watch_state(touched, unreached):
    """Note a look at what the audited run left in the working folder (rev27o R3): a path it
    created, changed or removed (``_proof.changed_paths``) that this process touches in any
    way before it wrote it: opened (for reading, appending or exclusive creation: all show
    what is there), looked up (``os.stat``, ``os.lstat``, ``os.access``, ``os.readlink``, so
    ``os.path.exists`` and ``pathlib``), listed (``os.listdir``, ``os.scandir``, ``os.walk``,
    so ``glob``), or named by any other call that reports an audit event (``os.chdir``,
    ``os.link``, ``os.symlink``, ``os.mkdir``, ``os.rename``, ``os.remove``, ``os.utime``,
    ``shutil.rmtree``, ``sqlite3.connect``, the arguments of a started program, ...:
    rev27r S20, S21, rev27s N1, N5). The rerun would then start from the audited run's
    results (a checkpoint to resume, a "done" marker), and prove nothing. A look by C code
    that reports no audit event is not seen."""
    # created or removed paths end in a NUL: they change what a listing of their folder shows
    touched = frozenset(path.rstrip("\0") for path in touched)
    folders = {}  # a listing shows each entry's name, and DirEntry.stat() its size and time
    for path in touched:  # (rev27r S33), with no look-up of its own
        folders.setdefault(os.path.dirname(path), set()).add(path)

    written = set()  # replaced by this process: what it reads there is its own
    made = set()  # made to exist by this process (also an append): a listing shows it
    noted = []

    def absolute(path):
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, (str, bytes)) or not path or len(path) > 4096:
            return None
        try:
            return os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None

    def note(path):
        noted.append(path)
        _note(unreached, path)

    def seen(path, listing=False, tree=False):
        if noted:
            return
        path = absolute(path)
        if path is None or path in written:
            return
        if tree:  # a walk or removal of a whole folder: anything under it
            inside = path.rstrip(os.sep) + os.sep
            if any(p.startswith(inside) and p not in written for p in touched):
                note(path)
        elif (listing and folders.get(path, set()) - made - written) or (
                not listing and path in touched):
            note(path)

    def write(path, whole=True):
        path = absolute(path)
        if path is not None:
            made.add(path)
            if whole:
                written.add(path)

    def words(value):  # the strings of a started program's arguments, one level deep
        if isinstance(value, (list, tuple)):
            return [w for v in value for w in words(v)] if len(value) < 10000 else []
        return [value] if isinstance(value, (str, bytes, os.PathLike)) else []

    def hook(event, args):
        if noted:
            return
        if event == "open":
            path, _, flags = args
            flags = flags or 0
            if not flags & os.O_TRUNC:  # read, append (its size shows: rev27s N1), exclusive
                seen(path)
            if flags & os.O_TRUNC:
                write(path)
            elif flags & os.O_CREAT:
                write(path, whole=flags & os.O_EXCL)
        elif event in ("os.listdir", "os.scandir"):
            # the first caller outside the standard library (glob, pathlib, os): not import's
            # own looks at sys.path (importlib, importlib.metadata), nor pytest's collection
            # (it lists the folders it collects; the tests' files decide it)
            frame = sys._getframe(1)
            while frame.f_back is not None and (
                    frame.f_code.co_filename.startswith(stdlib_dir)
                    and not frame.f_code.co_filename.startswith(importlib_dir)
                    and "-packages" + os.sep not in frame.f_code.co_filename):
                frame = frame.f_back
            caller = frame.f_code.co_filename
            if not caller.startswith(tools) or caller.startswith(pytest_paths):
                seen(args[0] if args and args[0] is not None else ".", listing=True)
        elif event in ("os.walk", "os.fwalk", "shutil.rmtree", "shutil.copytree"):
            seen(args[0], tree=True)
        elif event == "os.rename":  # fails or not by whether the source exists; the target
            seen(args[0])  # is replaced either way (an atomic save's os.replace: rev27r O7)
            seen(args[0], tree=True)  # a folder taken whole, what it holds (rev27r); both
            # paths count as written once the rename is done (below), not when it is tried
        elif event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn",
                       "os.system"):
            # a started program may read a file it is given (`file -b done`: rev27q Q13)
            text = args[0] if event == "os.system" else None
            for word in (text.split() if isinstance(text, (str, bytes)) else words(args)):
                seen(word)
        elif event.startswith(("os.", "shutil.", "sqlite3.", "glob.")):
            # a path named to any other call: it shows whether the path is there (chdir,
            # link, symlink, utime, chmod, mkdir, rename, remove: rev27r S20, S21)
            for value in args if isinstance(args, tuple) else ():
                seen(value)
            if event in ("os.mkdir", "os.rmdir", "os.remove", "os.link", "os.symlink"):
                paths = [v for v in args if isinstance(v, (str, bytes, os.PathLike))]
                for path in paths[:1] if event in ("os.mkdir", "os.rmdir", "os.remove") \
                        else paths[1:2]:  # each made (or removed) this path
                    write(path)

    import importlib
    import importlib.util

    importlib_dir = os.path.dirname(importlib.__file__) + os.sep
    stdlib_dir = os.path.dirname(os.__file__) + os.sep
    pytest_spec = importlib.util.find_spec("_pytest")  # its collection's listings
    pytest_dir = (os.path.dirname(pytest_spec.origin) + os.sep
                  if pytest_spec and pytest_spec.origin else None)
    tools = ("<frozen importlib", importlib_dir) + ((pytest_dir,) if pytest_dir else ())
    # py.path, which pytest carries for the tests' own use (tmpdir): their listings count
    # (rev27s N10)
    pytest_paths = (pytest_dir + "_py" + os.sep,) if pytest_dir else ("\0",)
    sys.addaudithook(hook)

    def looked(original):
        def look(path, *args, **kwargs):
            seen(path)
            return original(path, *args, **kwargs)

        return look

    import posix

    def renames(original):  # a rename that failed wrote nothing (rev27t T80)
        def rename(src, dst, *args, **kwargs):
            done = original(src, dst, *args, **kwargs)
            if not kwargs.get("src_dir_fd") and not kwargs.get("dst_dir_fd"):
                write(src)
                write(dst)
            return done

        return rename

    for name in ("rename", "replace"):
        original = getattr(posix, name)
        for module in (os, posix):
            if getattr(module, name, None) is original:
                setattr(module, name, renames(original))
    for name in ("stat", "lstat", "access", "readlink", "statvfs", "pathconf"):
        original = getattr(posix, name, None)
        if original is not None:  # the look-ups that report no audit event (rev27s N5)
            for module in (os, posix):
                if getattr(module, name, None) is original:
                    setattr(module, name, looked(original))

    def saves(serialization):  # torch.save writes from C++ (PyTorchFileWriter): no audit event
        save = serialization.save

        def wrapper(obj, f, *args, **kwargs):
            write(f)
            return save(obj, f, *args, **kwargs)

        serialization.save = wrapper  # torch/__init__.py binds torch.save from here
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "save", None) is save:
            torch.save = wrapper

    if "torch.serialization" in sys.modules:
        saves(sys.modules["torch.serialization"])
    else:
        _after_import("torch.serialization", saves)


def _code(line):
    """A line's code without its comment and spacing (rev27n F6: a copy tagged with a trailing
    comment is the same line); the stripped text when it does not tokenize alone."""
    import io
    import tokenize

    tokens = []
    try:  # the first line of a call that goes on (`f(a,  # note`) stops the tokenizer at its
        # end: the tokens before that still hold its code, without the comment (rev27p C06)
        for t in tokenize.generate_tokens(io.StringIO(line).readline):
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
                tokens.append(t.string)
    except tokenize.TokenError:
        pass
    except (IndentationError, SyntaxError):
        return line.strip()
    return " ".join(tokens)


def _wrap_engine(variable_module, marker, forced, texts=frozenset(), unreached=None,
                 text_forced=None, hits=None):
    """Stand in front of the engine once ``torch.autograd.variable`` is imported."""
    import linecache

    variable = variable_module.Variable
    engine = variable._execution_engine
    torch_dir = os.path.dirname(os.path.dirname(os.path.abspath(variable_module.__file__)))
    torch_dir += os.sep
    real = {}
    codes = {}  # (file, line) -> _code of the line
    by_text = []  # a line forced off for its code alone was met (written once)
    hit = set()  # the forced lines (and texts) a backward pass started from, written once each

    def from_forced_line():
        frame, innermost = sys._getframe(2), True
        while frame is not None:
            name = frame.f_code.co_filename
            path = real.get(name)
            if path is None:  # (a relative name, from the folder now: rev36a S-run)
                path = os.path.realpath(name)
                if os.path.isabs(name):
                    real[name] = path
            if frame.f_code.co_name == "__torch_function__":
                pass  # a tensor subclass's, on the way from the site (as the audit names it)
            elif not path.startswith(torch_dir) and path != __file__:
                if (path, frame.f_lineno) in forced:
                    if hits and (path, frame.f_lineno) not in hit:
                        hit.add((path, frame.f_lineno))
                        _note(hits, f"{frame.f_lineno}\t{path}")
                    return True
                if innermost:
                    innermost = False
                    if texts:
                        # a line with the same text anywhere (a copy of the script run again,
                        # with lines shifted or not: rev27m M3): the flag is forced off there
                        # too; forcing more lines off only makes the proof fail more often
                        key = (name, frame.f_lineno)  # tokenized once: a loop passes here
                        text = codes.get(key)
                        if text is None:
                            text = codes[key] = _code(linecache.getline(name, frame.f_lineno))
                        if not text:
                            return None  # code with no source to read
                        if text in texts:
                            if text_forced and not by_text:  # (where: the proof's message)
                                by_text.append(text)
                                _note(text_forced, f"{frame.f_lineno}\t{path}")
                            if hits and text not in hit:
                                hit.add(text)
                                _note(hits, f"text\t{text}")
                            return True
                # (then the callers' lines, by their places: a caller may pass the flag down,
                # rev43d P1: a parametrized `backward(loss, retain_graph=True)` that is
                # torch's in one test and a helper's `torch.autograd.backward(t,
                # retain_graph=retain_graph)` in another; forcing more off only makes the
                # proof fail more often)
            frame = frame.f_back
        return False

    class Watch:
        def __getattr__(self, name):
            return getattr(engine, name)

        def run_backward(self, *args, **kwargs):
            if not forced:
                return self.run(args, kwargs)
            line = from_forced_line()
            keep = args[2] if len(args) > 2 else kwargs.get("keep_graph")
            if line is None and keep and unreached:
                # a pass that keeps its graph, started from code whose text cannot be read
                # (compiled from a string, rev27l n18): it may be a copy of a line being proven
                _note(unreached, "a backward pass keeping its graph in code with no source")
            if line:
                if len(args) > 2:
                    args = (*args[:2], False, *args[3:])
                else:
                    kwargs["keep_graph"] = False
            return self.run(args, kwargs)

        @staticmethod
        def run(args, kwargs):
            try:
                return engine.run_backward(*args, **kwargs)
            except RuntimeError as exc:
                if any(text in str(exc) for text in FREED):
                    _note(marker, str(exc))
                raise

    variable._execution_engine = Watch()


def _after_import(name, then):
    """Run ``then(module)`` once the module ``name`` has been imported."""
    import importlib.machinery

    class Finder:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            if fullname != name:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None or spec.loader is None:
                return spec
            exec_module = spec.loader.exec_module

            def run(module):
                exec_module(module)
                sys.meta_path[:] = [f for f in sys.meta_path if f is not Finder]
                then(module)

            spec.loader.exec_module = run
            return spec

    sys.meta_path.insert(0, Finder)


def _start():
    spec_path = os.environ.get("RETAINCHECK_PROOF_SPEC")
    if spec_path:
        try:
            with open(spec_path, encoding="utf-8") as f:
                spec = json.load(f)
        except (OSError, ValueError):
            spec = None
        if spec is not None:
            forced = {(os.path.realpath(p), int(n)) for p, n in spec.get("forced", [])}
            texts = {_code(t) for _, t in spec.get("texts", []) if t}
            if spec.get("reached"):
                _watch_spawns(spec["reached"], spec["expected"], spec["unreached"])
            if spec.get("touched"):
                _watch_state(spec["touched"], spec["state"])
            # Traced from the end of torch's import: no freed-graph error can come before it,
            # and tracing the import itself would double its time.
            if "torch" in sys.modules:
                _watch_exceptions(spec["marker"], spec["tracer"])
            else:
                _after_import("torch", lambda m: _watch_exceptions(spec["marker"], spec["tracer"]))
            module = sys.modules.get("torch.autograd.variable")
            if module is not None:
                _wrap_engine(module, spec["marker"], forced, texts, spec.get("unreached"),
                             spec.get("text_forced"), spec.get("hits"))
            else:
                _after_import("torch.autograd.variable",
                              lambda m: _wrap_engine(m, spec["marker"], forced, texts,
                                                     spec.get("unreached"),
                                                     spec.get("text_forced"),
                                                     spec.get("hits")))
    # the sitecustomize this one stands in front of, if there is one
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    found = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if found is not None and found.loader is not None:
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)


if __name__ == "sitecustomize":
    _start()
