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
import sys

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
    sys.settrace = noted(sys.settrace)
    threading.settrace = noted(threading.settrace)
    if hasattr(threading, "settrace_all_threads"):
        threading.settrace_all_threads = noted(threading.settrace_all_threads)


_PYTHON = None  # re.compile'd on first use: a program name that runs Python


def _is_python(word, real):
    """``python``, ``python3.11``, ``/usr/bin/python3`` or this interpreter's own path."""
    global _PYTHON
    if _PYTHON is None:
        import re

        _PYTHON = re.compile(r"(?:^|[\\/])python[0-9.]*(?:\.exe)?$")
    return bool(_PYTHON.search(word)) or os.path.realpath(word) == real


def _python_tokens(argv):
    """The words of a command (a list, or a string for a shell), each string split as a
    shell would, so that ``bash -c "python -I x.py"`` shows its ``python``."""
    import shlex

    words = []
    for arg in [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or ()):
        arg = os.fsdecode(arg) if isinstance(arg, (bytes, os.PathLike)) else str(arg)
        try:
            words.extend(shlex.split(arg))
        except ValueError:
            words.append(arg)
    return words


def _unreached(argv, env, spec_path, boot):
    """Why a command the rerun starts may run Python without this module (None if it will
    not): its environment lost the proof's variables (``env={...}``, ``env -i``), or it runs
    Python with ``-I``, ``-E`` or ``-S``, which skip ``sitecustomize``
    (``Python/initconfig.c``; ``Lib/site.py``, ``execsitecustomize``). A command that starts
    no Python is told apart only by its words: when in doubt, the proof does not hold."""
    words = _python_tokens(argv)
    real = os.path.realpath(sys.executable)
    env = os.environ if env is None else env
    paths = str(env.get("PYTHONPATH", "")).split(os.pathsep)
    if (env.get("RETAINCHECK_PROOF_SPEC") != spec_path or boot not in paths) and _may_run_python(
            words, real):
        return "environment"
    for i, word in enumerate(words):
        if word == "env" and any(w in ("-i", "--ignore-environment", "-") or w.startswith("-u")
                                 for w in words[i + 1:i + 4]):
            return "env -i"
        if not _is_python(word, real):
            continue
        for flag in words[i + 1:]:
            if not flag.startswith("-") or flag.startswith("--") or flag == "-":
                break
            letters = flag[1:]
            for letter in letters:
                if letter in "IES":
                    return f"python -{letter}"
                if letter in "cmWX":
                    break  # its argument follows
            if any(letter in letters for letter in "cm"):
                break
    return None


_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "env", "xargs", "nohup", "timeout", "nice"}


def _may_run_python(words, real):
    """Whether a command may start Python: a word that names Python, a shell or a launcher
    (``env``, ``nohup``) that runs the rest, or a script file whose first line names Python.
    A program such as ``ldconfig`` or ``git`` (torch's import runs ``ldconfig -p`` with an
    environment of its own) starts none."""
    if any(_is_python(word, real) for word in words):
        return True
    if not words:
        return False
    if os.path.basename(words[0]) in _SHELLS:
        return True
    try:
        with open(words[0], "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _watch_spawns(spec_path, boot, unreached):
    """Note every command that may start Python out of this module's reach (``_unreached``):
    ``subprocess.Popen`` (``run``, ``call``, ``check_output``, ``os.popen``), ``os.exec*``,
    ``os.posix_spawn*``, ``os.system``; ``os.spawn*`` goes through ``os.exec*``."""
    def check(argv, env):
        why = _unreached(argv, env, spec_path, boot)
        if why:
            _note(unreached, f"{why}: {' '.join(_python_tokens(argv))[:120]}")

    def wrap(name, argv_at, env_at=None):
        original = getattr(os, name, None)
        if original is None:
            return

        def wrapper(*args, **kwargs):
            env = kwargs.get("env")
            if env_at is not None and len(args) > env_at:
                env = args[env_at]
            check(args[argv_at] if len(args) > argv_at else kwargs.get("argv", ()), env)
            return original(*args, **kwargs)

        setattr(os, name, wrapper)

    wrap("execv", 1)
    wrap("execve", 1, 2)
    wrap("posix_spawn", 1, 2)
    wrap("posix_spawnp", 1, 2)
    wrap("system", 0)

    def patch_popen(subprocess):
        import inspect

        init = subprocess.Popen.__init__
        signature = inspect.signature(init)

        def __init__(self, *args, **kwargs):
            try:
                bound = signature.bind(self, *args, **kwargs).arguments
            except TypeError:
                bound = {}
            argv = bound.get("args", ())
            if bound.get("executable"):
                argv = [bound["executable"], *_python_tokens(argv)]
            check(argv, bound.get("env"))
            return init(self, *args, **kwargs)

        subprocess.Popen.__init__ = __init__

    if "subprocess" in sys.modules:
        patch_popen(sys.modules["subprocess"])
    else:
        _after_import("subprocess", patch_popen)


def _wrap_engine(variable_module, marker, forced, texts=frozenset()):
    """Stand in front of the engine once ``torch.autograd.variable`` is imported."""
    import linecache

    variable = variable_module.Variable
    engine = variable._execution_engine
    torch_dir = os.path.dirname(os.path.dirname(os.path.abspath(variable_module.__file__)))
    torch_dir += os.sep
    real = {}

    def from_forced_line():
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            path = real.get(name)
            if path is None:
                path = real[name] = os.path.realpath(name)
            if not path.startswith(torch_dir) and path != __file__:
                if (path, frame.f_lineno) in forced:
                    return True
                if not texts:
                    return False
                # the same line of a copy of the file (a script copied and run again): the
                # flag is forced off there too; forcing more lines off only makes the
                # proof fail more often
                text = linecache.getline(name, frame.f_lineno).strip()
                return (frame.f_lineno, text) in texts
            frame = frame.f_back
        return False

    class Watch:
        def __getattr__(self, name):
            return getattr(engine, name)

        def run_backward(self, *args, **kwargs):
            if forced and from_forced_line():
                if len(args) > 2:
                    args = (*args[:2], False, *args[3:])
                else:
                    kwargs["keep_graph"] = False
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
            texts = {(int(n), t) for n, t in spec.get("texts", []) if t}
            if spec.get("unreached"):
                _watch_spawns(spec_path, spec["site"], spec["unreached"])
            # Traced from the end of torch's import: no freed-graph error can come before it,
            # and tracing the import itself would double its time.
            if "torch" in sys.modules:
                _watch_exceptions(spec["marker"], spec["tracer"])
            else:
                _after_import("torch", lambda m: _watch_exceptions(spec["marker"], spec["tracer"]))
            module = sys.modules.get("torch.autograd.variable")
            if module is not None:
                _wrap_engine(module, spec["marker"], forced, texts)
            else:
                _after_import("torch.autograd.variable",
                              lambda m: _wrap_engine(m, spec["marker"], forced, texts))
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
