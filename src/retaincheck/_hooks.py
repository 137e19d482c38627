"""Wrapping ``backward``/``grad``, hooking the retained graph's nodes, watching the reuses.

While an audit is active, ``torch.autograd.backward`` (which ``Tensor.backward`` calls) and
``torch.autograd.grad`` are replaced by thin wrappers that pass every argument through
unchanged and note who called them. Before a call made with ``retain_graph=True`` runs, the
audit walks the graph from its roots and registers a pre-hook on every node that holds saved
tensors (a node without them can run again after it was freed: freeing it changes nothing).
The walk stops at nodes hooked by an earlier walk: their whole subgraph was hooked then.

A node's pre-hook runs when a backward pass executes the node, and only then
(``torch/csrc/autograd/engine.cpp``: ``call_function`` runs ``call_pre_hooks``;
``Engine::evaluate_function`` returns before ``call_function`` for a node that ``exec_info_``
marks as not needed). Each hook remembers the call that
executed its node last. When a pass executes a node whose last executor was a run of a
``retain_graph=True`` line, that run's retention was needed. A call executes a node at most
once, so a second firing during the same call is a walk the audit did not see start; it still
counts, as "?". Any doubt is resolved towards "needed", never towards "not needed".
"""

from __future__ import annotations

import bisect
import builtins
import collections
import contextlib
import functools
import linecache
import os
import sys
import threading
import time
import types
import weakref
from collections.abc import Mapping

from . import _loopwatch
from . import _suggest as notes
from ._between import grads_touched_between
from ._report import CallRecord, Report
from ._sizes import distinct_bytes, saved_tensor_names, saved_tensors, storage_key

KEY = "retaincheck"
LOCK = threading.Lock()

_SIGNATURES: dict = {}
# Code with no file (exec, eval, compile of a string): the search for saved-tensor reads
# (_reads) reads files, so such code is read from the audit events CPython raises for it
# ("compile" with its source, "exec" with its code object; sys.addaudithook). An audit hook
# cannot be removed: one is added per process, and it does nothing unless an audit is on.
_AUDITED: list = []  # the session being audited, while one is
_AUDIT_HOOK: list = []  # [True] once the hook was added


def _audit_event(event, args):
    if event != "compile" and event != "exec":
        return
    if not _AUDITED:
        return
    try:
        _AUDITED[0].dynamic_code(event, args, sys._getframe(1))
    except Exception:  # never break the program's own exec
        pass


# A forked child process (os.fork, multiprocessing's "fork" start method) inherits the graph
# and its hooks, but what they record stays in the child's memory: there the hooks append each
# reuse to a file the parent reads at the end (Session.children). A fork hook cannot be
# removed either: one per process, doing nothing unless an audit is on.
# The child sends its pid back through a pipe before the parent goes on, so that a child
# still running at the end is known however soon the end comes.
_FORK_HOOK: list = []
_FORK_PIPE: list = []


def _before_fork():
    if _AUDITED:  # in a forked child too: a grandchild is told to the parent through the log
        _AUDITED[0].open_fork_log()
        try:
            _FORK_PIPE[:] = os.pipe()
        except OSError:
            _FORK_PIPE.clear()


def _after_fork_in_child():
    _loopwatch.close_all()  # (a DataLoader's worker forked while a loop was watched)
    if not _AUDITED:
        return
    _AUDITED[0].in_child = True
    _Tag.__call__ = _Tag.in_child  # every hook of this process now tells the parent too
    if _FORK_PIPE:
        read, write = _FORK_PIPE
        _FORK_PIPE.clear()
        try:
            os.close(read)
            os.write(write, str(os.getpid()).encode())
            os.close(write)
        except OSError:
            pass


def _after_fork_in_parent():
    if not _FORK_PIPE:
        return
    read, write = _FORK_PIPE
    _FORK_PIPE.clear()
    try:
        import select

        os.close(write)
        if select.select([read], [], [], 5.0)[0]:
            pid = os.read(read, 32)
            if pid.isdigit() and _AUDITED:
                session = _AUDITED[0]
                if session.in_child:
                    session.log(f"pid\t{int(pid)}\n")
                else:
                    session.forked.append(int(pid))
        os.close(read)
    except OSError:
        pass


_BACKWARD_POS = ("tensors", "grad_tensors", "retain_graph", "create_graph")
_GRAD_POS = ("outputs", "inputs", "grad_outputs", "retain_graph", "create_graph")


_STDLIB_RUNNERS = frozenset({"doctest.py", "codeop.py", "code.py", "pdb.py", "bdb.py"})
"""The standard library's modules that compile and run code a user wrote."""


class _Tag:
    """The pre-hook of one node with saved tensors. Never refers to the node: it lives in the
    node's own hook dictionary (the node's metadata holds a weak reference to it), so it dies
    with the node, and a dead tag means a dead node."""

    __slots__ = (
        "session", "seq", "storages", "nbytes", "last", "keepers", "epoch", "compiled",
        "hooked", "__weakref__",
    )

    def __init__(self, session: Session, seq: int):
        self.session = session
        self.seq = seq  # the node's sequence number: when it was built
        self.storages: tuple = ()  # ((key, nbytes), ...) of its saved tensors, parameters left out
        self.nbytes = 0  # their total
        self.last: Call | None = None  # the call that executed the node last
        self.keepers: set | None = None  # records whose runs executed it and kept it
        self.epoch: tuple | None = None  # (record, iteration of that record it was built in)
        self.compiled = False  # the walk that tagged it met a torch.compile'd backward
        self.hooked: CallRecord | None = None  # the site whose walk tagged it

    def in_child(self, grad_outputs):
        """The pre-hook in a forked child (``_after_fork_in_child`` puts it in place of
        ``__call__``, so that the parent pays nothing for it): a reuse here is told to the
        parent, then recorded as usual."""
        if self.keepers:
            try:
                self.session.tell_parent(self.keepers)
            except Exception:  # never break the user's backward
                pass
        return _Tag.in_parent(self, grad_outputs)

    def __call__(self, grad_outputs):  # the pre-hook; returns None, so grads are untouched
        try:
            stack = self.session.stack
            call = stack[-1] if stack else None
            prev = self.last
            keepers = self.keepers
            if (
                call is not None
                and prev is not None
                and call.pair is prev
                and prev is not call
                and call.retaining
                and keepers is not None
                and call.record in keepers
            ):
                # The common case in a loop over one forward pass: this call's reuse of that
                # earlier call is already recorded and the node is already kept.
                if call.epochs is not None:
                    known = self.epoch  # (Session.epoch's own first step, inline)
                    call.epochs.add(known[1] if known is not None and known[0] is call.record
                                    else self.session.epoch(call.record, self))
                call.executed.append(self)
                self.last = call
                return None
            self.session.fired(self)
        except Exception:  # never break the user's backward; mark it needed
            last = self.last
            if last is not None and last.record is not None:
                last.record.needed = True
        return None


_Tag.in_parent = _Tag.__call__


class _Shape(tuple):
    """A stack shape (every frame's code and instruction, innermost first), keyed by the code
    objects' identities (the shape holds them: no other object has their ids meanwhile) and
    the instructions, hashed once: a code object's own hash reads its constants, nested codes
    included (a module's code: every function of the module), on each lookup, and a shape is
    looked up in several tables on every call. Code objects of the same text compare equal
    whatever their files: by identity, two copies of a helper in two files are two ways to a
    site, each with its own lines (rev68b)."""

    def __new__(cls, items, key):
        self = tuple.__new__(cls, items)
        self._key = key
        self._hash = hash(key)
        return self

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or type(other) is _Shape and self._key == other._key

    def __ne__(self, other):
        return not self.__eq__(other)


class Call:
    __slots__ = (
        "record", "kind", "key", "index", "retaining", "keeps", "executed", "epochs", "steps",
        "rows", "pair", "grew", "entered", "where",
    )

    def __init__(self, record, kind, key, index, retaining, keeps, steps):
        self.record: CallRecord | None = record
        self.kind = kind
        self.key: str = key
        self.index = index
        self.retaining = retaining  # a recorded retain_graph=True run
        self.keeps = keeps  # the graph is kept after this call (retain_graph or create_graph)
        self.executed: list[_Tag] = []  # tags of the nodes this call executed
        self.epochs: set[int] | None = None  # iterations of the nodes it reused from its own line
        self.steps = steps  # optimizer steps counted when the call ended
        self.rows = None  # (outputs, inputs) weak refs, for grad() with grad_outputs
        self.pair: Call | None = None  # the last earlier call whose reuse this call recorded
        self.grew = False  # this call added a node to those its record keeps
        self.entered = False  # it reached the engine (see Session.engine_call)
        self.where: tuple | None = None  # the call's user frames (Session.chain)


class Session:
    def __init__(self):
        import torch
        from torch.autograd.graph import GradientEdge
        from torch.overrides import is_tensor_like

        self.torch = torch
        self.tensor_type = torch.Tensor
        self.gradient_edge = GradientEdge
        self.is_tensor_like = is_tensor_like
        self.report = Report()
        self.records: dict[tuple[str, int], CallRecord] = {}
        self.started: dict[CallRecord, list[int]] = {}  # record -> sequence nr at each run's start
        self.reused_runs: dict[CallRecord, set[int]] = {}
        self.stack: list[Call] = []
        self.tagged: list[tuple[dict, object]] = []  # (node metadata, hook handle)
        self.prune_at = 4096
        self.params: set = set()  # storage keys of the leaves that require grad
        self.live: dict[int, weakref.ref] = {}  # tags some record keeps
        self.steps = 0
        self.step_handle = None
        self.seq_nr = torch._C._autograd._get_sequence_nr
        self.torch_dir = os.path.dirname(torch.__file__) + os.sep
        self.own_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
        # Keyed by the code object's identity below (the code held in the value, so that its
        # id is no other's meanwhile): two code objects of the same text compare equal
        # whatever their files (rev34a K2: helpers_a.py and helpers_b.py, copies, were one
        # site named after the first), and hashing a code object reads all its constants,
        # nested code included (a module's: every function in it), on every call
        self.code_kind: dict = {}  # id(code) -> (code, 0 skip, 1 torch internal, 2 user)
        self.display: dict = {}
        # sites are named from where the run started, also after the program's os.chdir
        # (rev34a K1: "train.py:7" of a script that moved into exp2/ named ./train.py)
        self.start_dir = os.getcwd()
        self.sites: dict = {}  # (id(code), line) -> (code, its site)
        self.originals: dict[str, object] = {}
        self.wrappers: dict[str, object] = {}  # what install() put in their place
        # (code, instruction) -> where in its file that call is; what that instruction does
        # (_doing): facts of the code alone, kept from one audit to the next (the pytest
        # plugin's audit per test, a benchmark's audit per step: read once, not per audit)
        self.positions, self.doing = _POSITIONS, _DOING
        self.coded: dict = {}  # (id(code), instruction) -> code, of sites whose code was kept
        ag = torch.autograd
        # the frames between a caller and the engine, by file and name: torch.autograd.grad
        # may be another function now (a spy, or an earlier audit's wrapper left inside one)
        self.entry_codes = {(ag.__file__, "backward"), (ag.__file__, "grad"),
                            (getattr(ag.graph, "__file__", ""), "_engine_run_backward")}
        self.engine = None  # the engine the audit stands in front of, while installed
        self.between: dict = {}  # (retaining site, reusing site) -> grads touched between
        self.files: set[str] = set()  # files the program ran, searched for saved-tensor reads
        self.modules_before: set[str] | None = None  # modules imported before the audit
        self.stack_codes: dict = {}  # id(code) -> code, of those on retaining calls' stacks
        # "file:line (exec'd code)" for code with no file that may read saved tensors
        self.dynamic_reads: list[str] = []
        self.stdlib_unclean: set[str] = set()  # names of strings with a read, compiled by
        # the standard library (doctest)
        self.compiled_clean: bool | None = None  # the strings compiled since the last exec
        # stack shape -> what its frames tell of the calls that ran (see run), for
        # _audit._ran_since: the (file name, line) of each frame at a call (a call in a site's
        # function whose lines are not there did not run: _untaken); (file name, place) of
        # the same, where Python keeps places (3.11 on: of two calls on one line, which was
        # on the way, rev40b S1, rev40a F2); (file name, place, name of the frame above) of
        # frames at a call that unpacks, awaits or drives a loop
        self.shape_ran: dict = {}
        # frames whose call's arguments (or graph) the audit reads now (see reading_under)
        self.reading: list = []
        self.relative: dict = {}  # code with a relative file name -> its file, or None
        self.walked: dict = {}  # stack shape -> its lines (see run)
        self.last_shape = None  # the last call's (the same object again: found at once)
        self.last_site = (None, None)  # (shape, record) of the last retaining call
        self.machinery: dict | None = None  # (runs_module_code: _machinery_codes, once)
        # stack shape -> the number (report.backward_calls) of the last call made with it: the
        # functions that started a pass after a site's first run (_audit._mark_untaken_calls)
        self.shape_last: dict = {}
        # (file, first line) of code a test runner runs after a site besides what its passes
        # show (the pytest plugin: the test function, its fixtures: _audit._called_after)
        self.code_after: set = set()
        self.per_test = False  # one audit per test (the pytest plugin): no other test runs
        self.handed: set = set()  # names the test runner's files hand on as values (plugin)
        self.code_files: set = set()  # the files those are in (the test module, conftests)
        self.code_modules: list = []  # and their modules (a conftest's is not in sys.modules)
        self.runner_dirs: tuple = ()  # the folders of the test runner's plugins (the plugin)
        self.started_at = time.time()  # (a site's file written since: generated, _audit)
        self.block: tuple[str, int] | None = None  # (file, line) of the audit's with statement
        self.base = None  # the frame of that with statement, while the block runs
        self.finding_loops = False  # (Session.loop_of, while it reads files)
        self.below_base = False  # its callers' code counted in stack_codes (Session.run)
        self.in_child = False  # this process is a child forked during the audit
        self.forked: list[int] = []  # the pids of the children forked during the audit
        self.fork_log_open = False
        self.fork_log = os.path.join(  # where forked children write their reuses
            _temp_dir(), f"retaincheck-fork-{os.getpid()}-{id(self):x}.log")

    def dynamic_code(self, event, args, frame):
        """An ``exec``/``eval``/``compile`` called by the program's own code or an installed
        package's (not torch, the standard library or importlib): a string compiled is
        searched for saved-tensor reads; code run whose file cannot be read counts as a read
        unless every string compiled since the last such run was searched and had none."""
        from ._reads import (
            _kind,
            _stdlib,
            lines_reading_saved_tensors,
            note_compiled,
        )

        caller = frame.f_code.co_filename
        if event == "compile" and isinstance(args[1], str) and args[1] and not (
                args[1].startswith("<") or os.path.isabs(args[1])
                or os.path.abspath(caller).startswith(self.own_dir)):  # (not _resolve's own)
            from ._reads import note_relative

            note_relative(args[1], args[0])  # (runpy's too: _hooks._resolve)
        if caller.startswith("<frozen"):
            return
        user = _kind(caller) != 0
        if event == "compile" and (user or os.path.basename(caller) in _STDLIB_RUNNERS):
            note_compiled(args[1], args[0])  # what runs under that name (_reads._tree)
        if not user:
            # doctest, code, pdb: examples and lines a user wrote (rev30b F-x5); not the rest
            # of the standard library (ast.parse, which retaincheck's own search calls, would
            # have every source file it parses searched again)
            if os.path.basename(caller) in _STDLIB_RUNNERS and _stdlib(caller):
                self.stdlib_code(event, args)
            return
        if event == "compile":
            source, filename = args[0], args[1]
            if isinstance(source, bytes):
                source = source.decode("utf-8", "replace")
            elif not isinstance(source, str):
                if isinstance(filename, str) and os.path.isfile(filename):
                    return  # a file's tree (pytest's assert rewriting): the file is searched
                import ast

                source = ast.unparse(source) if isinstance(source, ast.AST) else None
            clean = source is not None and not lines_reading_saved_tensors(source)
            self.compiled_clean = clean and self.compiled_clean is not False
            return
        filename = getattr(args[0], "co_filename", "")
        clean, self.compiled_clean = self.compiled_clean, None
        if isinstance(filename, str) and os.path.isfile(filename):
            self.files.add(filename)  # a file's code, exec'd: the search reads the file
            if clean is not False:
                return
            # a string with a read compiled under the name of a file that is not Python (a
            # Markdown fence that pytest-markdown-docs runs: rev30b F-x4), which the search
            # cannot read, or that is, with other text (a fence in a module's docstring)
        if not clean:
            where = f"{self.display_path(caller)}:{frame.f_lineno} (exec'd code)"
            if where not in self.dynamic_reads:
                self.dynamic_reads.append(where)

    def stdlib_code(self, event, args):
        """A ``compile``/``exec`` by the standard library: only a string compiled with a read,
        then run, counts (a doctest example: rev30b F-x5); the library's own generated code
        (namedtuple, dataclasses) reads nothing, and code it runs unseen is not counted."""
        from ._reads import lines_reading_saved_tensors

        if event == "compile":
            source, filename = args[0], args[1]
            if isinstance(source, bytes):
                source = source.decode("utf-8", "replace")
            if isinstance(source, str) and lines_reading_saved_tensors(source):
                self.stdlib_unclean.add(str(filename))
            return
        code = args[0]
        filename = str(getattr(code, "co_filename", ""))
        if filename in self.stdlib_unclean:
            where = f"{filename}:{getattr(code, 'co_firstlineno', 1)} (exec'd code)"
            if where not in self.dynamic_reads:
                self.dynamic_reads.append(where)

    # -- patching ---------------------------------------------------------------------------
    def log(self, text: str) -> None:
        """In a forked child: append to the parent's log, which the parent created at the
        start; once it has read and removed it at the end, nothing is written (no file left
        behind): a child still running then was counted as such."""
        try:
            fd = os.open(self.fork_log, os.O_WRONLY | os.O_APPEND)
        except OSError:
            return
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        except OSError:
            pass
        finally:
            os.close(fd)

    def tell_parent(self, records) -> None:
        """In a forked child: these records' retained graph was walked again here."""
        self.log("".join(f"site\t{r.file}\t{r.line}\n" for r in records))

    def children(self) -> tuple[set, list[int]]:
        """In the parent, at the end: ({(file, line) reused in a forked child}, [pids of
        forked children still running]); the log is removed."""
        reused, pids = set(), list(self.forked)
        if not self.fork_log_open:
            return reused, pids  # nothing was forked
        try:
            with open(self.fork_log, encoding="utf-8") as f:
                rows = [line.rstrip("\n").split("\t") for line in f]
            os.remove(self.fork_log)
        except OSError:
            rows = []
        for row in rows:
            if row[0] == "site" and len(row) == 3 and row[2].isdigit():
                reused.add((row[1], int(row[2])))
            elif row[0] == "pid" and len(row) == 2 and row[1].isdigit():
                pids.append(int(row[1]))  # a grandchild, forked by a forked child
        return reused, [pid for pid in dict.fromkeys(pids) if _alive(pid)]

    def open_fork_log(self) -> None:
        """Before the first fork: create the log that forked children append to (Session.log;
        it must exist before any fork). No fork, no file."""
        if self.fork_log_open or self.in_child:
            return
        self.fork_log_open = True
        try:
            with open(self.fork_log, "w", encoding="utf-8"):
                pass
        except OSError:
            pass

    def install(self):
        if not _FORK_HOOK and hasattr(os, "register_at_fork"):
            os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child,
                                after_in_parent=_after_fork_in_parent)
            _FORK_HOOK.append(True)
        if not _AUDIT_HOOK:
            sys.addaudithook(_audit_event)
            _AUDIT_HOOK.append(True)
        _AUDITED[:] = [self]
        from ._reads import _compiled, _compiled_at

        _compiled_at.clear()
        _compiled.clear()  # only what this audit saw compiled: a name reused means other code
        ag = self.torch.autograd
        for name, kind in (("backward", "backward"), ("grad", "grad")):
            original = getattr(ag, name)
            self.originals[name] = original
            self.wrappers[name] = self._wrap(original, kind)
            setattr(ag, name, self.wrappers[name])
        variable = ag.variable.Variable
        self.engine = variable._execution_engine
        variable._execution_engine = self.wrappers["engine"] = _Engine(self.engine, self)
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self.step_handle = register_optimizer_step_post_hook(self._stepped)
        except Exception:  # an older torch: steps are not seen, suggestions stay conditional
            self.step_handle = None

    def engine_call(self, run_backward, args, kwargs):
        """Every backward pass Python starts ends here (``torch/autograd/graph.py``,
        ``_engine_run_backward``: ``Variable._execution_engine.run_backward``, which both
        ``torch.autograd.backward`` and ``torch.autograd.grad`` call). A call that came through
        the wrappers is already on the stack and goes straight on; any other (a name bound
        before the audit began: ``from torch.autograd import grad`` in a module imported
        earlier, ``g = torch.autograd.grad`` at import time) is audited here, from the
        engine's own arguments."""
        if self.engine is None:  # uninstalled, and still called (see uninstall)
            return run_backward(*args, **kwargs)
        stack = self.stack
        if stack and not stack[-1].entered:
            stack[-1].entered = True
            return run_backward(*args, **kwargs)
        arguments = dict(zip(_ENGINE_POS, args, strict=False))
        arguments.update(kwargs)
        kind = "backward" if arguments.get("accumulate_grad", True) else "grad"
        keep = bool(arguments.get("keep_graph"))
        create = bool(arguments.get("create_graph"))
        roots_arg = "tensors" if kind == "backward" else "outputs"
        seen = {
            roots_arg: arguments.get("tensors"),
            "inputs": arguments.get("inputs") or None,
            "create_graph": create,
            # retain_graph=None with create_graph=True reads the same here: such a call keeps
            # the graph but is not recorded as a retain_graph=True site
            "retain_graph": keep if not create else None,
        }
        return self.run(
            run_backward, kind, args, kwargs, seen, roots_arg, keep and not create, engine=True
        )

    def file_of(self, frame) -> str | None:
        """The file a frame's relative code file name is (``_resolve``), once per code: for
        the lines on a backward pass's stack and for a site's own file."""
        code = frame.f_code
        if code not in self.relative:
            self.relative[code] = _resolve(code.co_filename, frame, self.start_dir)
        return self.relative[code]

    def reading_under(self, frame) -> bool:
        """Whether ``frame`` (where a backward pass is attributed) is one whose call's
        arguments or graph the audit is reading now, or a caller of it: the pass was then
        started by code with no frame of its own that the audit's reading ran (a filter of
        methodcallers among the roots, rev39a F1, F2; a list subclass's own ``__iter__``,
        rev40a F1; a C ``__getattr__`` that the roots' ``__torch_function__`` lookup runs,
        rev41b X2): no call of that line, its flag came from elsewhere. A pass whose own
        frame is newer (a generator's line, rev40a F2) is that line's, as any."""
        for f in self.reading:
            while f is not None:
                if f is frame:
                    return True
                f = f.f_back
        return False

    def _stepped(self, *args):
        self.steps += 1

    def uninstall(self, keep_tags: bool = False):
        """Put back what ``install`` replaced and unhook the graph's nodes; with ``keep_tags``
        the nodes stay hooked until ``drop_tags``: a walk of a kept graph after the audit
        (the pytest plugin's window between a test's teardown and the end of its protocol)
        still marks its site needed."""
        if _AUDITED and _AUDITED[0] is self:
            _AUDITED.clear()
        _loopwatch.close_all()
        # Each put back only where it is still this audit's: a program (a session fixture's
        # spy on torch.autograd.grad, rev34b F9) that wrapped it meanwhile keeps its own, and
        # this audit's, left inside it, passes every call straight on from now on.
        variable = self.torch.autograd.variable.Variable
        if self.engine is not None:
            if variable._execution_engine is self.wrappers.get("engine"):
                variable._execution_engine = self.engine
            self.engine = None
        ag = self.torch.autograd
        for name, original in self.originals.items():
            if getattr(ag, name, None) is self.wrappers.get(name):
                setattr(ag, name, original)
        self.originals.clear()
        self.wrappers.clear()
        if self.step_handle is not None:
            self.step_handle.remove()
            self.step_handle = None
        if not keep_tags:
            self.drop_tags()

    def drop_tags(self):
        for metadata, handle in self.tagged:
            handle.remove()
            metadata.pop(KEY, None)
        self.tagged.clear()
        self.live.clear()

    def _wrap(self, original, kind):
        signature = _SIGNATURES.get(original)
        if signature is None:
            import inspect

            signature = _SIGNATURES[original] = inspect.signature(original)
        session = self
        roots_arg = "tensors" if kind == "backward" else "outputs"
        positions = _BACKWARD_POS if kind == "backward" else _GRAD_POS
        inputs_pos = positions.index("inputs") if "inputs" in positions else len(positions)
        tensor_type = self.tensor_type
        plain = (tensor_type, tuple, list)
        simple = set(signature.parameters)
        # (the positions name the signature's first parameters, each taken by position or
        # keyword: else every call is bound)
        prefix = tuple(signature.parameters)[:len(positions)] == positions and all(
            p.kind is p.POSITIONAL_OR_KEYWORD for p in signature.parameters.values()
            if p.name in positions)

        def wrapper(*args, **kwargs):
            if session.engine is None:  # uninstalled, and still called (see uninstall)
                return original(*args, **kwargs)
            # What the audit reads of the arguments may run the program's code (a roots
            # object's __iter__ or __getattr__): see Session.reading_under. Plain tensors
            # as roots, and inputs that are none, a tensor, a tuple or a list, run none.
            inputs = kwargs["inputs"] if "inputs" in kwargs else (
                args[inputs_pos] if len(args) > inputs_pos else None)
            if (len(args) <= len(positions)
                    and type(args[0] if args else kwargs.get(roots_arg)) is tensor_type
                    and (inputs is None or type(inputs) in plain)):
                prepared = prepare(args, kwargs)
            else:
                reading, outer = session.reading, sys._getframe(1)
                reading.append(outer)
                try:
                    prepared = prepare(args, kwargs)
                finally:
                    reading.remove(outer)  # (another thread's may be above it)
            if prepared is None:  # let torch raise its own error
                return original(*args, **kwargs)
            args, kwargs, arguments, explicit = prepared
            return session.run(original, kind, args, kwargs, arguments, roots_arg, explicit)

        def prepare(args, kwargs):
            # Fast path: the arguments by position or keyword, without binding a signature
            # (inspect's bind: about 10 us, and Tensor.backward passes four by position)
            if not prefix or len(args) > len(positions) or not simple.issuperset(kwargs) or (
                not kwargs.keys().isdisjoint(positions[:len(args)])
            ):
                try:
                    arguments = signature.bind(*args, **kwargs).arguments
                except TypeError:
                    return None
            else:
                arguments = dict(zip(positions, args, strict=False))
                arguments.update(kwargs)
            retain = arguments.get("retain_graph")
            explicit = retain is not None and bool(retain)
            roots = arguments.get(roots_arg)
            if roots is not None and not session.single_root(roots):
                # A one-shot iterable (a generator, map(...)) would be consumed by torch and
                # leave nothing to walk: materialise it once and hand torch the same tuple.
                if type(roots) not in (tuple, list):  # (a subclass may iterate itself: rev40a F1)
                    try:
                        roots = tuple(roots)
                    except TypeError:  # not iterable
                        return None
                    bound = signature.bind(*args, **kwargs)
                    bound.arguments[roots_arg] = roots
                    args, kwargs = bound.args, bound.kwargs
                    arguments = bound.arguments
            inputs = arguments.get("inputs")
            if (
                inputs is not None
                and type(inputs) not in (tuple, list)
                and not isinstance(inputs, Mapping)
                and not session.single_root(inputs)
            ):
                # The same for inputs=model.parameters(), a generator: the audit reads the
                # inputs (are these calls rows of one Jacobian?) and torch must still get them.
                # (A dict, whose values torch takes, is read again as it is; a single input
                # is told as torch tells it, is_tensor_like: rev41b X1)
                try:
                    inputs = tuple(inputs)
                except TypeError:  # not iterable
                    return None
                bound = signature.bind(*args, **kwargs)
                bound.arguments["inputs"] = inputs
                args, kwargs = bound.args, bound.kwargs
                arguments = bound.arguments
            return args, kwargs, arguments, explicit

        wrapper.__wrapped__ = original
        wrapper.__name__ = original.__name__
        wrapper.__qualname__ = original.__qualname__
        wrapper.__doc__ = original.__doc__
        return wrapper

    # -- calls --------------------------------------------------------------------------------
    def _kind_of(self, code) -> int:
        known = self.code_kind.get(id(code))
        if known is not None and known[0] is code:
            return known[1]
        # (of an absolute file name, a fact of the code alone: kept from audit to audit; a
        # relative one is to the folder the program is in now)
        absolute = os.path.isabs(code.co_filename)
        if absolute:
            known = _CODE_KIND.get(id(code))
            if known is not None and known[0] is code:
                self.code_kind[id(code)] = known
                return known[1]
        filename = os.path.abspath(code.co_filename)
        if filename.startswith(self.own_dir):
            kind = 0
        elif filename.startswith(self.torch_dir):
            rel = filename[len(self.torch_dir) :]
            kind = 0 if rel in ("_tensor.py", "overrides.py") else 1
        else:
            kind = 2
        self.code_kind[id(code)] = (code, kind)
        if absolute:
            if len(_CODE_KIND) > 65536:
                _CODE_KIND.clear()
            _CODE_KIND[id(code)] = (code, kind)
        return kind

    def caller(self, engine=False):
        """(frame, user, observed) of the code that called backward/grad; ``observed``: a
        ``__torch_function__`` was on the way (a tensor subclass's, a TorchFunctionMode's),
        which sees the call's arguments and may act on them."""
        frame, observed = sys._getframe(2), False
        while frame is not None:
            kind = self._kind_of(frame.f_code)
            if kind == 0:  # retaincheck itself, Tensor.backward and torch's dispatch
                frame = frame.f_back
                continue
            if engine and kind == 1 and (
                    frame.f_code.co_filename, frame.f_code.co_name) in self.entry_codes:
                frame = frame.f_back  # torch.autograd.backward/grad on their way to the engine
                continue
            if frame.f_code.co_name == "__torch_function__":
                # a tensor subclass's (rev34b F6), a TorchFunctionMode's: torch passes the
                # call through it on the way from the line that wrote it, which is the site;
                # it sees the flag (rev36a F1, F2: it logged it, stepped when it was unset).
                # torch's own (torch.set_default_device's DeviceContext) read no retain_graph
                # (rev37a S2; test_retaincheck_audit.py checks torch's source for it)
                frame, observed = frame.f_back, observed or kind == 2
                continue
            return frame, kind == 2, observed  # kind 1: called by torch (autograd.functional)
        return None, False, observed

    def chain(self, frame, depth: int = 12) -> tuple:
        """The user frames from the call outwards: ((file name, line, first line), ...)."""
        found = []
        while frame is not None and len(found) < depth:
            code = frame.f_code
            if self._kind_of(code) == 2:
                found.append((code.co_filename, frame.f_lineno, code.co_firstlineno))
                if code.co_name == "<module>":
                    break  # a module's top level: what called it runs nothing in between
            frame = frame.f_back
        return tuple(found)

    def display_path(self, filename: str) -> str:
        cwd = os.getcwd()
        path = self.display.get((filename, cwd))
        if path is None:
            path = self.display[(filename, cwd)] = _display_path(filename, self.start_dir)
        return path

    def site_of(self, frame):
        """(key, "file:line", function, filename) of a frame's current line, cached."""
        code = frame.f_code
        cache_key = (id(code), frame.f_lineno)
        known = self.sites.get(cache_key)
        if known is not None and known[0] is code:
            return known[1]
        filename = code.co_filename
        key = (self.display_path(filename), frame.f_lineno)
        site = (key, f"{key[0]}:{key[1]}", code.co_name, filename)
        self.sites[cache_key] = (code, site)
        return site

    def place(self, frame) -> tuple | None:
        """Where in its file the call a frame is at lies (``_position``), once per instruction."""
        code = frame.f_code
        key = (id(code), frame.f_lasti)
        known = self.positions.get(key)
        if known is None or known[0] is not code:  # (first met: a position may be None)
            known = self.positions[key] = (code, _position(frame))
        return known[1]

    def run(self, original, kind, args, kwargs, arguments, roots_arg, explicit, engine=False):
        self.report.backward_calls += 1
        frame, user, observed = self.caller(engine)
        if frame is not None:
            key, key_text, function, filename = self.site_of(frame)
        else:
            key, key_text, function, filename = ("?", 0), "?:0", "?", "?"
        record = None
        retaining = explicit and user
        # The lines on its stack, for _untaken: walked once per stack shape (a loop repeats
        # one). The shape is every frame's code and instruction: two callers of one helper
        # that calls the site's function have the same innermost frames, and each function
        # on the way must be searched (rev42a F1: warmup() and train_step() both through
        # _step(), and train_step's other backward() that did not run)
        # (up to the frame that entered the audit: those below it are the same for every call
        # made inside the block, and what runs after the block is not audited)
        shape, f, base, chain = [], frame, self.base, []
        while f is not None:
            shape.append(f.f_code)
            shape.append(f.f_lasti)
            chain.append(f)  # (for _loopwatch, after the call: running frames, held till then)
            f = None if f is base else f.f_back
        shape_key = (tuple(map(id, shape[0::2])), tuple(shape[1::2]))
        last = self.last_shape
        if last is not None and last._key == shape_key:
            shape = last  # (a loop's next call: the same code objects, at the same places)
        else:
            shape = self.last_shape = _Shape(shape, shape_key)
        lines = self.walked.get(shape)
        if lines is None:
            f, inner, lines = frame, None, []  # (inner: the frame above f)
            ran_lines, ran_places, ran_unpacking = [], [], []
            while f is not None:  # no filter: plain adds
                name = f.f_code.co_filename
                if name and name[0] not in "</" and not os.path.isabs(name):
                    # the file a relative name is, for this code (rev38a H6: exp1/main.py
                    # and exp2/main.py run as "main.py": one's lines are not the other's)
                    name = self.file_of(f) or name
                # (the line, and the first line of its code: which function, lambda or
                # class body of the line the frame runs, _reads.untaken_calls; 0 for a
                # module's own code, whose first line is 1 as a function's on line 1 may be)
                lines.append((name, f.f_lineno, 0 if f.f_code.co_name == "<module>"
                              else f.f_code.co_firstlineno))
                at = self.place(f)
                doing = _doing(f, self.doing)
                if doing == "call":
                    ran_lines.append((name, f.f_lineno))
                    if at is not None:
                        ran_places.append((name, at))
                    if inner is not None and inner.f_code.co_flags & 0x20:
                        # list(fit(...)), sum(fit(...)): the call drives a generator that
                        # a call of its name inside it made (rev45b Q1)
                        ran_unpacking.append((name, at, "for " + inner.f_code.co_name))
                elif doing == "unpacking":
                    # f(*args) / f(**kwargs): the frame above may be the call's own callee
                    # or code that its unpacking runs (a generator that starts a pass and
                    # raises before the call: rev42a F3): the call ran only if the frame
                    # above is one of the callee's name (_reads.untaken_calls)
                    if inner is None:  # the call into torch that started the pass, or its
                        callee = "*"  # unpacking's (code with no frame: *map(methodcaller))
                    elif inner.f_code.co_flags & 0x2A0:  # a generator's, a coroutine's
                        callee = ""
                    elif inner.f_code.co_filename.startswith(self.own_dir):
                        callee = "*"  # (this audit's wrapper of torch.autograd.backward/grad)
                    else:
                        callee = inner.f_code.co_name
                        # a decorator's wrapper (functools.wraps, torch.enable_grad()): the
                        # call ran its function too, which the wrapper's closure holds
                        # (rev43a G3, rev43b G4, rev43d D1: penalty_step(model, x, **cfg))
                        for wrapped in _closure_functions(inner):
                            ran_unpacking.append((name, at, wrapped.__name__))
                    ran_unpacking.append((name, at, callee))
                elif doing == "awaiting" and inner is not None and inner.f_code.co_flags & 0x180:
                    # `await train_step(x)`: the coroutine it awaits was made by the call of
                    # its name in the await (rev43c H1)
                    ran_unpacking.append((name, at, "await " + inner.f_code.co_name))
                elif doing == "driving" and inner is not None and inner.f_code.co_flags & 0x20:
                    # `for loss in fit(...)`: the generator that the loop drives was made by
                    # the call of its name in the loop's head (rev43b G1)
                    ran_unpacking.append((name, at, "for " + inner.f_code.co_name))
                # (else: the pass came from code that no call of this line ran, and this
                # line's calls are not shown to have run: a `**options` merge's keys())
                f, inner = None if f is base else f.f_back, f
            del inner
            self.walked[shape] = lines = tuple(lines)
            self.shape_ran[shape] = (tuple(ran_lines), tuple(ran_places), tuple(ran_unpacking))
        del f
        self.shape_last[shape] = self.report.backward_calls
        if retaining:
            record = self.records.get(key)
            if record is None:
                # read outside the lock: a module's loader may run the program's code
                # (get_source), which may start a backward pass (rev42a F2: it waited on
                # the lock it held, for ever)
                # (an entry from before the file changed, as in a process that runs
                # main() on one file name twice: read again)
                linecache.checkcache(filename)
                # (with the module's globals: its loader's source, a zip's: rev35a S1)
                scope = frame.f_globals if frame is not None else None
                code = _without_comment(linecache.getline(filename, key[1], scope))
                record = CallRecord(key[0], key[1], function, code, kind)
                # the code's own file name, for the proof; a relative one from here (a
                # launcher's os.chdir(exp); runpy.run_path("train.py"): rev35a S2)
                record._source = filename
                if not filename.startswith("<") and not os.path.isabs(filename):
                    record._source = self.file_of(frame)
                    if record._source is None:  # (_audit._mark_passed_through)
                        record._source = os.path.abspath(filename)
                        record._unread = True
                    elif record._source != os.path.abspath(filename):  # named so
                        record.file = _display_path(record._source, self.start_dir)
                # its text as Python had it while it ran: a notebook cell's or a
                # doctest example's lives in linecache only (_mark_passed_through)
                read = filename if record._source.startswith("<") or getattr(
                    record, "_unread", False) else record._source
                if read != filename:
                    linecache.checkcache(read)  # (an entry from before it changed)
                record._lines = linecache.getlines(read, scope)
                if read != filename:  # the line shown: from the file that ran
                    record.code = _without_comment(linecache.getline(read, key[1]))
                record._frames = set()  # (file, line, code's first line) on its stacks
                record._shapes = set()
                record._first_call = self.report.backward_calls  # (its first run's number)
                record._first_shape = shape  # (the invocations on the way to its first run)
                record._test_code = _unittest_code(frame)  # (a test case's: _audit)
                with LOCK:  # (another thread, or that code, may have made it meanwhile)
                    made = self.records.get(key)
                    if made is None:
                        self.records[key] = record
                        self.report.calls.append(record)
                        self.started[record] = []
                    else:
                        record = made
        elif key in self.records:
            record = self.records[key]  # same site without retain: still a later run of it
        if retaining and getattr(record, "_watches", None):
            # (first: a watch proven here ends before the rest of this run, _loopwatch's
            # trace function costs one call per Python call while it is on)
            self.loop_proven(record, shape, chain)
        if retaining and self.reading and self.reading_under(frame):
            record.passed_through = True  # kept whatever the line writes (reading_under)
        if retaining and not getattr(record, "_observed", False):
            # (_audit._mark_passed_through; the reason: _report, _fix, _suggest)
            record._observed = "function" if observed else "watched" if _watched() else False
        # The same site on the same stack shape as the call before (a loop's next call): what
        # follows up to the graph's walk is known already from that call, the same frames at
        # the same instructions
        repeat = retaining and self.last_site[0] is shape and self.last_site[1] is record
        if retaining and not repeat:
            self.last_site = (shape, record)
        if retaining and frame is not None and not repeat:
            # the call on the line that ran (where Python keeps positions: 3.11 on), by its
            # place in the line: _audit._mark_passed_through looks at that call alone
            # (rev36a F3: a methodcaller-bound flag inside a literal call on the same line)
            at = self.place(frame)
            if self.coded.get((id(frame.f_code), frame.f_lasti)) is not frame.f_code:
                self.coded[(id(frame.f_code), frame.f_lasti)] = frame.f_code  # (first met)
                # the code that ran there, which the text read for the site must compile to
                # (_audit._mark_passed_through; rev37a G4, rev37b G2)
                ran = _original_code(frame.f_code)
                if ran is not None:
                    record.__dict__.setdefault("_ran_codes", {})[id(ran)] = ran
            record.__dict__.setdefault("_calls_at", set()).add(at)
        if retaining and not repeat and shape not in record._shapes:
            record._shapes.add(shape)
            record._frames.update(lines)  # each function on the way to it: _untaken
            # (the names of tensors with a graph in each frame's locals, for
            # _audit._loops_over_a_graph: no file is read here, where a loader's get_source
            # may start a backward pass, rev42a F2)
            try:
                names = _graph_locals(frame, self.base, len(lines))
            except Exception:  # (never the program's error: names not read, any may hold
                names = [None] * len(lines)  # one, _reads.loop_over_names; rev76a A1)
            record.__dict__.setdefault("_graph_names", {})[shape] = names
        index = 0
        retain = arguments.get("retain_graph")
        create = bool(arguments.get("create_graph"))
        keeps = bool(retain) if retain is not None else create
        if record is not None:
            starts = self.started[record]
            index = len(starts) + 1
            if retaining:
                starts.append(self.seq_nr())
        call = Call(record, kind, key_text, index, retaining, keeps, self.steps)
        call.entered = engine
        if retaining and not repeat:
            # the files on its stack are searched for saved-tensor reads at the end
            # (the frames below the audit's with statement are every call's, while its block
            # runs: walked once; a test runner's stack is thirty frames deep)
            f, base = frame, self.base
            codes = self.stack_codes
            while f is not None:
                code = f.f_code
                if codes.get(id(code)) is not code:
                    codes[id(code)] = code
                    self.files.add(code.co_filename)
                if f is base:
                    if self.below_base:
                        break
                    self.below_base = True
                f = f.f_back
        if kind == "backward" and user and self.records:
            # for what runs between a retaining backward() and its reuse: may they be summed?
            call.where = self.chain(frame)
        roots = arguments.get(roots_arg)
        if retaining:
            # Hook the graph BEFORE the call runs: its own pass shows which nodes it executes,
            # and a reuse during the call (a tensor hook calling autograd.grad) is seen too.
            # (what it reads may run a tensor subclass's code: reading_under)
            self.reading.append(frame)
            try:
                # (backward(inputs=...): the call runs part of its graph; with inputs=None on
                # another path, all of it; grad()'s inputs are its question, rev52b I1)
                self.hook_graph(record, roots, kind == "backward" and (
                    arguments.get("inputs") is not None))
                if kind == "grad" and notes.NOT_ROWS not in record.notes:
                    call.rows = (
                        _refs(roots),
                        _refs(arguments.get("inputs")),
                        arguments.get("grad_outputs") is not None,
                    )
            finally:
                self.reading.remove(frame)
            if kind == "backward" and arguments.get("grad_tensors") is not None:
                record.notes.add(notes.GIVEN_GRADIENT)
        frame_seen = frame is not None
        del frame
        self.stack.append(call)
        try:
            result = original(*args, **kwargs)
        except BaseException:
            if record is not None and call.epochs is not None and len(call.epochs) >= 2:
                record.history_leak = True  # seen before the pass raised: still a leak
            call.executed = []  # tags refer to the call (tag.last): never the other way round
            call.pair = call.epochs = None
            raise
        finally:
            self.stack.pop()
            call.steps = self.steps
        if record is not None and call.epochs is not None and len(call.epochs) >= 2:
            record.history_leak = True
        if retaining:  # counted only once the call has returned
            record.executions += 1
            if create:
                record.create_graph = True
            self.measure(record, call)
            if frame_seen:
                self.watch_loop(record, shape, chain)
        del chain
        call.executed = []  # what the call ran and reused matters only while it runs: drop
        call.pair = call.epochs = None  # it, so that finished calls never chain up in memory
        return result

    def loop_of(self, record: CallRecord, shape: tuple, chain: list):
        """(frame index, (head lines, span), hidden) of the innermost loop around the site on
        this stack shape (``_audit.loop_at``), once per shape; (None, None, hidden) where the
        loop cannot be watched (``_loopwatch``'s docstring) or there is none; hidden: a loop
        the watch cannot see is on the way (``hidden_loop``)."""
        known = record.__dict__.setdefault("_loops", {})
        found = known.get(shape)
        if found is None and self.finding_loops:
            # (a pass started while the audit reads the loop's file: a module loader's
            # get_source that runs one, rev42a F2; reading again would start it again)
            return (None, None, True)
        if found is None:
            from ._reads import one_reading

            self.finding_loops = True
            try:
                with one_reading():
                    found = self._loop_of(shape, chain)
            finally:
                self.finding_loops = False
            known[shape] = found
        return found

    def _loop_of(self, shape: tuple, chain: list):
        from ._audit import loop_at, runner_stop
        from ._reads import comprehension_lines, loop_lines, ran_as_written

        j = loop_at(self, shape, runner_stop(self)[1])
        if self.hidden_loop(shape, chain, j):
            return (None, None, True)  # (a loop the watch cannot see: never told)
        if j is not None and 0 <= j < len(chain) and not (
                chain[j].f_code.co_flags & 0x1 and reads_own_locals(chain[j].f_code)):
            code = chain[j].f_code
            name, line, first = self.walked[shape][j]
            spans = None if not ran_as_written(name, code) else comprehension_lines(
                name, code) if code.co_name in (
                "<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>") else loop_lines(
                name, line, first)
            if spans is not None:
                return (j, spans, False)
        return (None, None, False)

    def hidden_loop(self, shape: tuple, chain: list, upto: int | None) -> bool:
        """Whether a frame on the way to the site, up to the loop's (``upto``: the frame
        index ``_audit.loop_at`` gave; None, every frame up to the audit's or the test
        runner's), calls the next one through code that may call it again and that the watch
        cannot see (rev59a A1): a call that is not of the function itself (``list(map(step,
        xs))``, ``functools.reduce(step, ...)``, ``sorted(xs, key=step)``: code with no frame;
        or a value that cannot be found without running the program's code), or a loop of
        torch's own code (``tree_map``, ``LBFGS.step``). Past a module's code too: what runs
        it (an import, ``runpy``, ``exec``, this package's command line) calls no function by
        name and is passed over, but a launcher that runs it through ``map`` runs it again
        (``list(map(lambda _: runpy.run_path(p), range(n)))``: a Python loop there is
        ``loop_at``'s)."""
        from ._audit import _OURS, _up_to_runner, runner_stop
        from ._reads import called_expression, in_a_loop

        lines = list(_up_to_runner(self.walked[shape], runner_stop(self)[1]))
        last = len(lines) - 1 if upto is None else upto
        past_module = False
        for k in range(1, min(last, len(chain) - 1) + 1):
            name, line, first = lines[k]
            if chain[k - 1].f_code.co_name == "<module>":
                # (this frame runs a module's code: passed over where it does so itself, once
                # for this run of it: an import statement, runpy's or the import system's
                # frames, this package's command line, or a call of exec or eval by name; not
                # code with no frame that may run it again, list(map(exec, codes, spaces)),
                # rev68a A1)
                past_module = True
                if self.runs_module_code(chain[k]) or self.calls_exec(name, chain[k]):
                    continue
                return True
            if past_module and self.runs_module_code(chain[k]):
                continue  # (the machinery that runs module code, by no name of the callee)
            torch_dir = _OURS[1] if _OURS else "\0"
            if name.startswith(torch_dir) and in_a_loop(name, line, first):
                return True
            if _doing(chain[k], self.doing) in ("awaiting", "driving"):
                continue  # (an await runs its coroutine once; a for loop's head, its iteration)
            expression = called_expression(name, chain[k].f_code, chain[k].f_lasti)
            callee = chain[k - 1].f_code  # (or the code torch.compile rewrote it from)
            if expression is None or not any(_is_the_function(
                    _called_value(expression, chain[k]), code)
                    for code in {callee, _original_code(callee)} if code is not None):
                return True
        return False

    def runs_module_code(self, frame) -> bool:
        """Whether a frame is of what runs a module's code once, calling no function of it by
        name: an ``import`` statement, runpy's and the import system's code, this package's
        (its command line) (``hidden_loop``). Their code is told by the code objects
        themselves, not by a file name, which code compiled from a string may take
        (``<frozen importlib._driver>``: rev69a A1)."""
        if self.machinery is None:
            self.machinery = _machinery_codes()
        code = frame.f_code
        return self.machinery.get(id(code)) is code or _doing(frame, self.doing) == (
            "importing")

    def calls_exec(self, name: str, frame) -> bool:
        """Whether a frame is at a call of the built-in ``exec`` or ``eval`` by name (or as
        ``builtins.exec``), found without running the program's code (``hidden_loop``)."""
        from ._reads import called_expression

        if _doing(frame, self.doing) != "call":
            return False
        expression = called_expression(name, frame.f_code, frame.f_lasti)
        return expression is not None and any(
            _called_value(expression, frame) is f for f in (builtins.exec, builtins.eval))

    def loop_proven(self, record: CallRecord, shape: tuple, chain: list) -> None:
        """The site runs again: a proof for the watch of this stack shape, if any."""
        watch = record._watches.get(shape)
        if watch is not None and _loopwatch.proven(watch, chain):
            record.__dict__.setdefault("_shapes_iterated", set()).add(shape)
            del record._watches[shape]

    def watch_loop(self, record: CallRecord, shape: tuple, chain: list) -> None:
        """Whether the innermost loop around the site ran it on this same stack shape (every
        frame at the same instruction) in two iterations of one run of the loop
        (``record._shapes_iterated``, ``_loopwatch``): a watch is started after a run of a
        shape with none open, ``_loopwatch.TRIES`` at most per shape. Each way to the site is
        proven by runs of its own: a site reached from two loops (rev58a A1), or from a
        loop's head as well as its body (an iterator's ``__next__`` that calls it, rev58b
        A2), is not proven by the other."""
        if shape in getattr(record, "_shapes_iterated", ()):
            return
        j, spans, _ = self.loop_of(record, shape, chain)
        if j is None:
            return
        watches = record.__dict__.setdefault("_watches", {})
        watch = watches.get(shape)
        if watch is not None and not watch.ended:
            return  # (the same iteration: watched on)
        tries = record.__dict__.setdefault("_watch_tries", {})
        if tries.get(shape, 0) >= _loopwatch.TRIES:
            return
        tries[shape] = tries.get(shape, 0) + 1
        watches[shape] = _loopwatch.open_watch(chain[j], *spans)

    def fired(self, tag: _Tag):
        stack = self.stack
        call = stack[-1] if stack else None
        prev = tag.last
        if prev is None and tag.hooked is not None and (
                call is None or call.record is not tag.hooked):
            # a node of the site's graph that its call did not run (its `inputs=` left it
            # out), run by a later pass: with other inputs (None: all) the call would have
            # run it and freed its saved tensors (rev52b I1)
            tag.hooked.partly_run = True
            tag.hooked = None
        if prev is not None:
            if prev is call:  # the node ran twice in one call: a walk the audit did not see
                self.reused(prev, None, tag)
            elif prev.keeps:
                if call is not None and call.pair is prev:  # a known pair: only the node's
                    if call.epochs is not None and call.record is prev.record:
                        # iteration can be new
                        call.epochs.add(self.epoch(prev.record, tag))
                else:
                    self.reused(prev, call, tag)
                    if call is not None:
                        call.pair = prev
        if call is not None and prev is not call:
            if call.retaining:
                if prev is None and call.index >= 2 and not getattr(
                        call.record, "_walks_older", False):
                    # a node walked for the first time by a later run of the site, built
                    # before its earlier run began (a graph made before the loop: which run
                    # walks which graph may depend on the counts, features(i // inner),
                    # rev60b A1): the loop rule keeps the site (_audit._mark_untaken_calls)
                    starts = self.started.get(call.record, ())
                    if len(starts) >= call.index - 1 and tag.seq < starts[call.index - 2]:
                        call.record._walks_older = True
                call.executed.append(tag)
                keepers = tag.keepers
                if keepers is None:
                    keepers = tag.keepers = set()
                    self.live[id(tag)] = weakref.ref(tag)
                if call.record not in keepers:
                    keepers.add(call.record)
                    call.grew = True
            elif not call.keeps:
                tag.keepers = None  # this pass frees the node's saved tensors
        tag.last = call

    def epoch(self, record: CallRecord, tag: _Tag) -> int:
        """How many runs of the record's line had started when the tag's node was built. Fixed
        once known: every later run starts after the node was built."""
        known = tag.epoch
        if known is not None and known[0] is record:
            return known[1]
        epoch = bisect.bisect_right(self.started[record], tag.seq)
        tag.epoch = (record, epoch)
        return epoch

    def reused(self, prev: Call, call: Call | None, tag: _Tag):
        record = prev.record
        if record is None or not prev.retaining:
            return
        if not record.needed:
            record.needed = True
        runs = self.reused_runs.setdefault(record, set())
        if prev.index not in runs:
            runs.add(prev.index)
            record.reused_executions = len(runs)
        who = call.key if call is not None else "?"
        if who not in record.reused_by:
            record.reused_by.append(who)
        if call is None or call.key == "?:0":
            record.notes.add(notes.UNSEEN)
        elif call.record is record:
            record.notes.add(notes.SELF)
            if call.index > prev.index and not record.history_leak:
                if call.epochs is None:
                    call.epochs = set()
                call.epochs.add(self.epoch(record, tag))
            if record.kind == "grad" and notes.NOT_ROWS not in record.notes:
                record.notes.add(_grad_pattern(prev.rows, call.rows))
        else:
            record.notes.add(notes.OTHER_GRAD if call.kind == "grad" else notes.OTHER_BACKWARD)
        if (
            call is not None
            and call.where is not None
            and prev.where is not None
            and notes.GRAD_BETWEEN not in record.notes
        ):
            pair = (prev.where, call.where)
            touched = self.between.get(pair)
            if touched is None:
                touched = self.between[pair] = grads_touched_between(*pair)
            if touched:
                record.notes.add(notes.GRAD_BETWEEN)
        if prev is not call and self.steps != prev.steps:
            record.notes.add(notes.STEP_BETWEEN)
            if call is not None and call.record is record:
                # A later run of this line walked a graph that an earlier run walked before
                # an optimizer step: state carried across a training iteration. Without
                # the step the epochs show it (below); with it, a plain or foreach step
                # bumps the saved parameters' versions and the reusing run raises before a
                # third run can show two epochs, and a fused one changes them silently.
                record.history_leak = True
                record.notes.add(notes.LEAK_ACROSS_STEP)

    # -- graphs -------------------------------------------------------------------------------
    def single_root(self, roots) -> bool:
        """True for what torch itself treats as one root: a tensor(-like) or a GradientEdge."""
        if isinstance(roots, self.tensor_type):
            return True
        return self.is_tensor_like(roots) or isinstance(roots, self.gradient_edge)

    def hook_graph(self, record: CallRecord, roots, partial: bool = False):
        GradientEdge = self.gradient_edge
        torch = self.torch
        tensor = self.tensor_type
        if isinstance(roots, tensor):
            stack = [roots.grad_fn]
        else:
            if self.single_root(roots):
                roots = (roots,)
            try:
                roots = tuple(roots)
            except TypeError:
                roots = ()
            stack = []
            for root in roots:
                if isinstance(root, GradientEdge):
                    stack.append(root.node)
                elif isinstance(root, tensor) and root.grad_fn is not None:
                    stack.append(root.grad_fn)
        seen: set[int] = set()
        nodes = []
        new = []
        compiled = False
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)  # keeps ids unique during the walk
            node_type = type(node)
            if node_type.__name__ == "CompiledFunctionBackward":
                # AOTAutograd (torch.compile) compiles this backward at its first run and
                # reads that run's retain_graph (torch/_functorch/_aot_autograd/
                # runtime_wrappers.py, CompiledFunction._backward_impl:
                # saved_tensors_use_once): without the flag it may be compiled with donated
                # buffers, and a later retain_graph=True through it raises (rev30b F-x11)
                compiled = record.compiled = True
            names, opaque = saved_tensor_names(node_type)
            if names or opaque:  # it may hold saved tensors: hooked already?
                if node_type.__name__ == "AccumulateGrad":
                    key = storage_key(getattr(node, "variable", None))
                    if key is not None:
                        self.params.add(key[0])
                    continue
                try:
                    metadata = node.metadata
                    ref = metadata.get(KEY)
                except Exception:
                    metadata = ref = None
                tag = ref() if ref is not None else None
                if tag is not None and tag.session is self:
                    if tag.compiled:
                        record.compiled = True
                    continue  # hooked by an earlier walk, and its whole subgraph with it
                new.append((node, metadata))
            for next_node, _ in node.next_functions:
                if next_node is not None:
                    stack.append(next_node)
        tensor = torch.Tensor
        for node, metadata in new:
            try:
                found, opaque = saved_tensors(node, tensor)
                if not found and not opaque:
                    continue  # nothing to free: running it again is always fine
                tag = _Tag(self, node._sequence_nr())
                tag.compiled = compiled
                tag.hooked = record if partial else None
                storages = {}
                for t in found:
                    key = storage_key(t)
                    if key is not None and key[0] not in self.params:
                        storages[key[0]] = key[1]
                tag.storages = tuple(storages.items())
                tag.nbytes = sum(storages.values())
                handle = node.register_prehook(tag)
                if metadata is None:  # cannot remember the tag: hook again next time (safe)
                    metadata = {}
                metadata[KEY] = weakref.ref(tag)
                self.tagged.append((metadata, handle))
            except Exception:  # cannot hook it: doubt goes towards "needed"
                record.needed = True
                if "?" not in record.reused_by:
                    record.reused_by.append("?")
                record.notes.add(notes.UNSEEN)
        if len(self.tagged) > self.prune_at:
            self.tagged = [(m, h) for m, h in self.tagged if h.hooks_dict_ref() is not None]
            self.prune_at = max(4096, 2 * len(self.tagged))

    def measure(self, record: CallRecord, call: Call):
        """Bytes of this run, and the site's and all sites' peak of kept bytes at once."""
        executed = call.executed
        if sum(t.nbytes for t in executed) > record.retained_bytes:  # an upper bound first
            run = distinct_bytes(t.storages for t in executed if t.keepers)
            if run > record.retained_bytes:
                record.retained_bytes = run
        if not call.grew:
            # Nothing new is kept: what the site and all sites keep at once can only have
            # shrunk since the last measure (nodes died or were freed), so no peak is missed.
            # (Whether a graph an earlier run kept is still alive is looked at all the same:
            # this run's graph may hold no saved tensors, rev66a A1.)
            if not getattr(record, "_outlived", False):
                for ref in list(self.live.values()):
                    tag = ref()
                    if tag is not None and tag.keepers and record in tag.keepers and (
                            tag.last is not call):
                        record._outlived = True
                        break
            return
        mine, everyone = [], []
        dead = []
        for key, ref in self.live.items():
            tag = ref()
            if tag is None or not tag.keepers:
                dead.append(key)
                continue
            everyone.append(tag.storages)
            if record in tag.keepers:
                mine.append(tag.storages)
                if tag.last is not call:
                    # a graph an earlier run of the site kept is still alive as this one runs:
                    # something holds it, and a later run may walk it (a cache filled in the
                    # loop, _load(epoch), rev60b A1): the loop rule keeps the site
                    record._outlived = True
        for key in dead:
            del self.live[key]
        site = distinct_bytes(mine)
        if site > record.peak_bytes:
            record.peak_bytes = site
        total = distinct_bytes(everyone)
        if total > self.report.total_retained_bytes:
            self.report.total_retained_bytes = total


_ENGINE_POS = (
    "tensors", "grad_tensors", "keep_graph", "create_graph", "inputs", "allow_unreachable",
    "accumulate_grad",
)


class _Engine:
    """Stands in for ``Variable._execution_engine`` while an audit is active: ``run_backward``
    goes through the session, everything else (``queue_callback``, ``is_checkpoint_valid``)
    to the engine itself."""

    def __init__(self, engine, session: Session):
        self._engine = engine
        self._session = session

    def run_backward(self, *args, **kwargs):
        return self._session.engine_call(self._engine.run_backward, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._engine, name)


_TEMP: list = []


def _temp_dir() -> str:
    if not _TEMP:
        import tempfile

        _TEMP.append(tempfile.gettempdir())
    return _TEMP[0]


def _alive(pid: int) -> bool:
    """The process runs and may hold the graph: a zombie (finished, not yet reaped) does not,
    nor a process that replaced its program by another (``exec``: ``subprocess`` with a
    ``preexec_fn`` runs the fork hooks too). /proc tells these apart on Linux; elsewhere
    such a process counts as running: in doubt, running."""
    try:
        if os.readlink(f"/proc/{pid}/exe") != os.readlink("/proc/self/exe"):
            return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process with that pid: not ours, long gone
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _refs(tensors):
    if tensors is None:
        return ()
    if type(tensors) is dict:  # inputs={"w": w}: torch takes the values
        tensors = tuple(tensors.values())
    try:
        if hasattr(tensors, "grad_fn"):  # one tensor
            return (weakref.ref(tensors),)
        return tuple(weakref.ref(t) for t in tensors)
    except TypeError:
        return ()


def _same(x, y) -> bool:
    if len(x) != len(y):
        return False
    return all(p() is not None and p() is q() for p, q in zip(x, y, strict=True))


def _grad_pattern(prev, call) -> str:
    """How a later run of a grad() line relates to the run whose graph it reused."""
    if prev is None or call is None or not _same(prev[0], call[0]):
        return notes.NOT_ROWS
    if _same(prev[1], call[1]):
        return notes.ROWS if prev[2] and call[2] else notes.NOT_ROWS
    return notes.SAME_OUTPUTS


@functools.lru_cache(maxsize=1024)
def _without_comment(line: str) -> str:
    """The source line, stripped, without a trailing comment (kept per text: tokenizing is
    the dearest step of a site's first call, met again by every audit of the same line)."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[: tok.start[1]].strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return line.strip()


def _resolve(name: str, frame, start: str) -> str | None:
    """The file a relative code file name is, from the folder now or the one the run started
    in: the one whose text compiles to this code (rev36a F5: a script run by
    runpy.run_path("main.py") that then moved into a folder holding an older main.py; S2: a
    launcher that moved first). None when none of them is."""
    from ._reads import _compiled_at

    at = _compiled_at.get(name, {})  # the files the name named when it was compiled
    found = {}
    for path in dict.fromkeys((*at, os.path.abspath(name), os.path.join(start, name))):
        try:
            with open(path, "rb") as f:
                found[path] = f.read()
        except OSError:
            continue
    # the code that ran, that of the file's frames below it (its module's, while it runs)
    # and the module's functions: a copy that differs only elsewhere (a run folder's main.py
    # with another learning rate) compiles to the site's code too (rev37a S1)
    import types

    ran, f = [], frame
    while f is not None and len(ran) < 64:
        if f.f_code.co_filename == name:
            ran.append(f.f_code)
        f = f.f_back
    ran += [value.__code__ for value in list(frame.f_globals.values())[:200]
            if isinstance(value, types.FunctionType) and value.__code__.co_filename == name]
    want = set(map(_code_key, ran))
    matches = []
    for path, text in found.items():
        try:
            todo = [compile(text, name, "exec", dont_inherit=True)]
        except (SyntaxError, ValueError):
            continue
        have = set()
        while todo:
            c = todo.pop()
            have.add(_code_key(c))
            todo.extend(k for k in c.co_consts if hasattr(k, "co_code"))
        if want <= have:
            matches.append(path)
    # A file the name named when it was compiled, with the text compiled then, is the one
    # (rev38a H3: an older copy in the run folder that differs only in an uncalled method
    # compiles to what ran too); two such: which ran cannot be told. Else one file, or
    # several with one text, is still checked: a launcher that moved into exp/ before
    # runpy.run_path("main.py"), whose main.py then moved into a folder holding an older
    # copy, left one candidate, the copy, which never ran (rev37a G3). Of two that compile
    # to it, the one from the folder now (a smoke test's copy of a root-level script in its
    # tmp folder: rev38b C2): its line is the same, and --fix proves its edit
    compiled_there = [p for p in matches if at.get(p) is not None
                      and at[p] == found[p].decode("utf-8", "replace")]
    if compiled_there:
        return compiled_there[0] if len(compiled_there) == 1 else None
    if len(matches) > 1 and os.path.abspath(name) in matches:
        return os.path.abspath(name)
    return matches[0] if len(matches) == 1 else None


_MONITORING = getattr(sys, "monitoring", None)  # (3.12 on)


def _watched() -> bool:
    """Whether a profile or trace function of the program's runs in this thread (a profiler
    that logs how backward was called, ``sys.setprofile``, ``sys.settrace``), or a
    ``sys.monitoring`` tool: it sees backward's arguments, the flag among them, and may act on
    them, which turning graph-keeping off at run time does not show (rev37a G7). coverage.py's
    tracers, which record lines and arcs only, do not count. (The trace function is read by
    the interpreter's own ``sys.gettrace``, past any stand-in for it: the audit's own, while a
    watch is open, or one the program put there.)"""
    profile, trace = sys.getprofile(), _loopwatch._GETTRACE()
    if profile is None and (trace is None or trace is _loopwatch.calls) and _MONITORING is None:
        return False  # (every call of a retaining site asks: the common answer first)
    for function in (profile, trace):
        if function is not None and not _counts_calls(function):
            return True
    monitoring = _MONITORING
    if monitoring is not None:
        for tool in range(6):
            name = monitoring.get_tool(tool)
            if name and not name.startswith("coverage"):
                return True
    return False


def _original_code(code):
    """The code torch.compile rewrote into ``code`` (``orig_code_map`` in
    torch/_dynamo/utils.py, filled by convert_frame.py), which is what the file compiles to
    (rev38a S3: a training step under @torch.compile was "cannot be read"); None for a
    function dynamo generated to resume after a graph break, which has no text of its own;
    else ``code`` itself."""
    table = getattr(sys.modules.get("torch._dynamo.utils"), "orig_code_map", None)
    if table is None:
        return code
    try:
        original = table.get(code)
    except Exception:  # another torch's table: the code as it ran
        return code
    if original is None:
        return code
    name = original.co_name
    return None if name.startswith("torch_dynamo_resume_in") or "__resume_at" in name else (
        original)


def _code_key(code) -> tuple:
    """What tells two compiled codes apart: name, first line, instructions, names and
    constants (a learning rate of 0.1 or 0.05 is the same instruction)."""
    return (code.co_name, code.co_firstlineno, code.co_code, code.co_names,
            tuple(repr(k) for k in code.co_consts if not hasattr(k, "co_code")))


def _counts_calls(function) -> bool:
    """Whether a profile or trace function only records which lines or functions ran:
    coverage.py's tracers, cProfile's and profile's profilers (the standard library's: they
    count calls and time them), torch.profiler's stack recorder (rev38a S1, rev38b C1)."""
    if function is _loopwatch.calls:  # (the audit's own: _loopwatch, no frame it is called for)
        return True
    module = str(getattr(function, "__module__", None) or type(function).__module__)
    return (module.startswith("coverage.") or module in ("_lsprof", "cProfile", "profile")
            or _torch_profiler(function))


def _torch_profiler(function) -> bool:
    """Whether a profile function is torch.profiler's stack recorder (``with_stack=True``:
    ``TraceContext`` of ``PythonTracer``, torch/csrc/autograd/profiler_python.cpp), which
    records which functions ran, not what they were called with (rev38a S1)."""
    torch = sys.modules.get("torch")
    try:
        return (type(function).__name__ == "TraceContext" and torch is not None
                and bool(torch._C._autograd._profiler_enabled()))
    except AttributeError:
        return False


def _doing(frame, cache: dict) -> str:
    """What the instruction a frame is at does: "call" (a call, whose callee runs above it),
    "unpacking" (a call that unpacks ``*args`` or ``**kwargs``: the code above it may be the
    callee or the unpacking's), or "other" (an instruction that runs code of the program's
    that is no call: a ``for`` loop's ``__next__``, a list's ``*`` merge, a property),
    "driving" (a ``for`` loop's next step), "awaiting" (an ``await``'s send), "importing"
    (an ``import`` statement, which runs a module's code).
    ``cache``: by code (its id; the code held in the value) and instruction."""
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    known = cache.get(key)
    if known is not None and known[0] is code:
        return known[1]
    import dis

    op = ""
    for ins in dis.get_instructions(code):
        if ins.offset > frame.f_lasti:
            break
        op = ins.opname
    doing = ("unpacking" if op == "CALL_FUNCTION_EX" else
             "call" if op.startswith(("CALL", "PRECALL")) else
             "driving" if op == "FOR_ITER" else
             "awaiting" if op in ("SEND", "YIELD_FROM") else
             "importing" if op == "IMPORT_NAME" else "other")
    cache[key] = (code, doing)
    return doing


def test_class_code(cls, test: str | None) -> tuple[set, set]:
    """``(file, first line)`` of a test class's functions, each name as the class resolves it
    (not an overridden method; not unittest's own): those that run with its test ``test``
    (``setUp``, ``tearDown``, helpers, the test itself), and its other tests."""
    import inspect

    resolved: dict = {}
    for c in cls.__mro__:
        if c.__module__ not in ("unittest.case", "unittest.async_case", "builtins"):
            for name, value in vars(c).items():
                resolved.setdefault(name, value)
    mine, others = set(), set()
    for name, value in resolved.items():
        try:
            code = inspect.unwrap(getattr(value, "__func__", value)).__code__
        except (AttributeError, TypeError, ValueError):
            continue
        other = name.startswith("test") and name != test
        (others if other else mine).add((code.co_filename, code.co_firstlineno))
    return mine, others


def _unittest_code(frame) -> tuple[set, set, set, set] | None:
    """What runs after a site in a ``unittest.TestCase`` by names no frame shows, found by
    unittest's own frame below the site: ``TestCase.run``'s (whose ``self`` the case is): its
    ``test_class_code`` (rev47a R2: a probe in ``setUp``, a second walk in the test behind an
    environment variable, under ``python -m retaincheck -m unittest``); the suite's
    ``setUpClass`` or ``setUpModule`` (every test of the class, or every function of the
    module, runs after it: rev48a U1). With them, the module's ``setUpModule`` and
    ``tearDownModule`` (rev48b U1), the names its code hands on as values
    (``self.addCleanup(check, loss)``: rev48a U2, rev48b U2) and the module's file.
    ``(mine, its other tests, names, files)``; None when no test case runs the code."""
    case = sys.modules.get("unittest.case")
    test, every = None, ""
    while case is not None and frame is not None:
        module_name = frame.f_globals.get("__name__")
        if module_name == "unittest.case" and frame.f_code.co_name == "run":
            test = frame.f_locals.get("self")
        elif module_name == "unittest.suite" and frame.f_code.co_name in (
                "_handleClassSetUp", "_handleModuleFixture"):
            test, every = frame.f_locals.get("test"), frame.f_code.co_name
        if isinstance(test, case.TestCase):
            break
        test, frame = None, frame.f_back
    if test is None:
        return None
    from ._reads import defined_functions, referenced_names

    mine, others = test_class_code(type(test), None if every else getattr(
        test, "_testMethodName", None))
    if every:
        mine, others = mine | others, set()
    module = getattr(sys.modules.get(type(test).__module__), "__file__", None)
    if not isinstance(module, str):
        return mine, others, set(), set()
    for name, where in defined_functions(module):
        if name in ("setUpModule", "tearDownModule") or every == "_handleModuleFixture":
            mine.add(where)
    # (in the modules of its bases too: a mixin's self.addCleanup(walk_again, loss), rev49b H2)
    files = {module} | {name for c in type(test).__mro__ if c.__module__ not in (
        "unittest.case", "unittest.async_case", "builtins") and isinstance(
        name := getattr(sys.modules.get(c.__module__), "__file__", None), str)}
    names: set[str] = set()
    for name in files:
        for scope, used in referenced_names(name).items():
            if not scope or (name, scope) in mine:
                names |= used
    return mine, others, names, files


def _graph_locals(frame, base, count: int) -> list[frozenset | None]:
    """For each frame on the way (innermost first, up to a module's code), the names of its
    locals that hold a tensor with a graph (``grad_fn``), themselves or in what holds one
    (``_holds``), and ``name.attr`` for an object's attribute that holds one (a Trainer's
    ``self.feats``): what a loop may walk again each iteration
    (``_audit._loops_over_a_graph``); None for a function whose locals are not read
    (``_read_locals``)."""
    import types

    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    plain = (tensor, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
             types.MethodType, dict, list, tuple, str, bytes, int, float, bool, type(None))

    module_type = getattr(getattr(sys.modules["torch"], "nn", None), "Module", ())

    # (a module object to look inside, a namespace like any object: rev73a A1, rev74a A1,
    # rev76a A1, A2, A4; _program_module says which)
    made_module = _program_module

    def attributes(name: str, value) -> list[str]:
        # (an object's attributes that hold a graph, however deep: `name.attr` by the
        # attribute of the object on the way to it nearest the graph (self.cache["h"]:
        # cache; a module's buffer: its name). Read without the object's class's code: no
        # __getattr__ runs here, which might start a backward pass. _reads.loop_over_names
        # counts one where nothing the loop reaches assigns that attribute: a loss
        # module's self.loss set by its forward in the loop is not made before it, rev51a
        # K1 lself, rev53a M1, M2)
        found: set[str] = set()
        todo, budget, wheres = [(value, None, 4)], [2048], {}
        while todo:
            obj, attr, depth = todo.pop()
            if budget[0] < 0:
                continue
            items = _items(obj)
            if items is not None:  # (a dict, list, tuple, set or deque: the modules in it,
                # `S["m"].feats`, rev77a A4; not other objects: a list of loss modules whose
                # forward, called in the loop, sets their loss anew would count)
                if depth:
                    for v in items:
                        if type(v) in _ATOMS:
                            continue  # (numbers and strings: nothing inside, no budget used)
                        budget[0] -= 1
                        if _items(v) or issubclass(type(v), types.ModuleType) and made_module(
                                v) or _namespace_like(v):
                            # (and containers, a program's class, a SimpleNamespace or a
                            # dataclass in it: rev81a A1, A2)
                            todo.append((v, attr, depth - 1))
                if type(obj) in _EXACT_CONTAINERS:
                    continue  # (a subclass's own attributes too, rev82a B5)
            if issubclass(type(obj), type) and _program_class(obj):
                # (a class of the program's used as a namespace, `Reg.m = trainstate`; a
                # partial's arguments: rev78a B3)
                try:
                    pairs = _class_attributes(_TYPE_DICT.__get__(obj, type(obj)))[:256]
                except Exception:
                    pairs = []
            elif type(obj) is functools.partial:
                pairs = [("args", obj.args), ("keywords", obj.keywords)]
            elif issubclass(type(obj), plain) and not made_module(obj) and items is None:
                continue
            else:
                pairs = _own_attributes(obj)
                if pairs is not _UNREADABLE and not issubclass(type(obj), types.ModuleType) and (
                        _program_class(type(obj))):
                    # (and its class's: `class Trainer: state = trainstate`, read through an
                    # instance, `t.state.feats`, rev79a B1)
                    for space in (_class_dicts(type(obj)) or ())[:-1]:
                        pairs = (pairs or []) + _class_attributes(space)[:64]
            if pairs is _UNREADABLE:  # (may hold one: the name counts, rev77a A2)
                found.add(name)
                continue
            if pairs is None:
                continue
            own = dict(pairs)
            is_module = bool(module_type) and issubclass(type(obj), module_type)
            if is_module:  # (its buffers, parameters,
                for key in ("_buffers", "_parameters", "_modules"):  # modules: by name)
                    inner = own.get(key)
                    if type(inner) is dict:
                        pairs += [(k, v) for k, v in list(inner.items())[:256] if type(k) is str]
            # (and the file of the program's that defines its class, whose methods may set
            # it: a Trainer of trainer.py run by train.py's loop, rev54b D1)
            kind = type(obj)
            where = wheres.get(kind)
            if where is None:
                where = wheres[kind] = f"{_class_file(kind) or ''}\0{_class_name(kind)}"
            module = issubclass(kind, types.ModuleType)
            for a, v in pairs:
                held = type(v)
                if held in _ATOMS or held in _CONTAINERS and not v:
                    continue  # (a module's hooks, sizes and flags: nothing inside)
                # (values with something inside use up the budget, once each, in _holds; a
                # module's functions, classes and modules each have one of their own: `from
                # torch import *` does not use it up, rev76a A3, rev77a A5, rev78b B1)
                own_budget = module and held in _CODE_TYPES
                if a in _MODULE_DICTS and is_module or found and any(
                        f.partition("\0")[0] == f"{name}.{a}" for f in found):
                    continue
                if not own_budget:
                    budget[0] -= 1  # (each attribute once; what _holds looks at inside it has a
                    # budget of its own: nested values were counted at each level, rev81b B1)
                if _holds(v, tensor):
                    found.add(f"{name}.{a}\0{where}")
                elif depth and (not issubclass(held, plain) or made_module(v) or (
                        held in _CONTAINERS or issubclass(held, (dict, list, tuple))) and any(
                        type(x) not in _ATOMS for x in _items(v) or ()) or (
                        issubclass(held, type) and _program_class(v))):
                    # (a container's modules too: `self.reg["m"].feats`, rev78b B2)
                    todo.append((v, a, depth - 1))
        return sorted(found)

    def read_globals(name: str, value) -> list[str]:
        # (a function the loop calls, by the module globals its code reads that hold a
        # graph: `name:global`; _reads.loop_over_names counts it where the loop assigns
        # neither: rev52a L1 g_global, a `global feats` set per epoch by prepare(), read by
        # step(); g_clsattr, a class attribute; `name:module.attr` for another module's
        # attribute, rev53a M3; a cache (functools.lru_cache) that holds any value, whose
        # values cannot be read, rev53a M4)
        if type(value) is not types.FunctionType:
            return []
        try:
            space, found = value.__globals__, []
            names = value.__code__.co_names[:64]
            for g in names:
                held = space.get(g)
                if held is None:
                    continue
                if issubclass(type(held), types.ModuleType):
                    if held is not sys.modules.get("torch") and _program_module(held):
                        found += [f"{name}:{g}.{a}" for a in names
                                  if _holds(_own_dict(held).get(a), tensor)]
                elif _holds(held, tensor):
                    found.append(f"{name}:{g}")
                else:  # (an object's attributes: a model's buffer, rev53a M2)
                    found += [f"{name}:{a}" for a in attributes(g, held)]
            return found
        except Exception:
            return []

    # (with no __torch_function__ on the way: a tensor subclass's, a mode's, would see the
    # reads of grad_fn here, rev52b E2)
    quiet = getattr(sys.modules["torch"]._C, "DisableTorchFunction", contextlib.nullcontext)
    # (up to the test runner's code: _audit._up_to_runner stops the loop search there, and
    # its objects are large: pytest's session, config, items)
    runner = tuple(os.path.dirname(module.__file__) + os.sep for module in map(
        sys.modules.get, ("_pytest", "pluggy", "xdist", "execnet"))
        if isinstance(getattr(module, "__file__", None), str))
    found, f = [], frame
    while f is not None and len(found) < count:
        if runner and f.f_code.co_filename.startswith(runner):
            break
        items = _read_locals(f)
        if items is None:
            found.append(None)
        else:
            if f.f_code.co_flags & 0x1:  # (and the module globals a function's code reads:
                # an lru_cache'd helper, a step that reads a shared module, rev53b K2)
                space, mine = f.f_globals, {n for n, _ in items}
                items += [(g, space[g]) for g in f.f_code.co_names[:64]
                          if g in space and g not in mine]
            with quiet():
                names = {n for n, v in items if _holds(v, tensor)}
                names.update(a for n, v in items for a in attributes(n, v))
                names.update(a for n, v in items for a in read_globals(n, v))
            found.append(frozenset(names))
        del items
        if f.f_code.co_name == "<module>" or f is base:
            break
        f = f.f_back
    return found


_SLOTS: dict = {}  # class -> the names of its slots and its bases' (_own_attributes)


_UNREADABLE: list = []  # (_own_attributes: what cannot be read without the program's code)
_STR_ONLY = frozenset({str})
_EXACT_CONTAINERS = frozenset({dict, list, tuple, set, frozenset, collections.deque})


def _own_dict(obj) -> dict:
    """An object's own ``__dict__`` where reading it runs no code of the program's (a module's
    attributes, read without its class: a lazy module's import does not run); else empty."""
    if obj is None or not _plain_dict(type(obj)):
        return {}
    try:
        own = object.__getattribute__(obj, "__dict__")
    except Exception:
        return {}
    return own if type(own) is dict else {}


def _own_attributes(obj) -> list | None:
    """An object's own attributes, (name, value) pairs: its ``__dict__`` and its
    ``__slots__`` (a `@dataclass(slots=True)` batch, rev54b L1), read without its class's
    code (no ``__getattr__``, no property); None for an object with neither."""
    pairs = None
    try:
        if issubclass(type(obj), _thread_local):  # (this thread's: threading.local and its
            own = _thread_local.__getattribute__(obj, "__dict__")  # subclasses, rev54a
            # N6, rev55b M2; the base's lookup, not the subclass's code)
        elif _plain_dict(type(obj)):
            own = object.__getattribute__(obj, "__dict__")
        elif (spaces := _class_dicts(type(obj))) is None or any(
                "__dict__" in space for space in spaces):
            # (a class's own __dict__, a property: its code, not run here, rev77a A2; what
            # it holds cannot be read: it may hold a graph)
            return _UNREADABLE
        else:
            own = None
        if type(own) is dict:  # (a module's all: what the program sets at run time comes
            # last, after its functions and imports, rev76a A3; an object's first 256; names
            # only: another key's __hash__ or __format__ is the program's code, rev78a C1)
            pairs = list(own.items()) if issubclass(type(obj), types.ModuleType) else list(
                own.items())[:256]
            if not _STR_ONLY.issuperset(map(type, own)):  # (in C: the common case first)
                pairs = [(k, v) for k, v in pairs if type(k) is str]
    except Exception:
        pass
    kind = type(obj)
    known = _SLOTS.get(id(kind))  # (by identity: a metaclass's __hash__ is the program's)
    if known is None or known[0] is not kind:
        # (a class's slots are fixed once it is made: their descriptors, read once per class;
        # read through them, not by name: a subclass's property of a slot's name is the
        # program's code and hides the slot, rev81a A4)
        slots = []
        try:
            for space in _class_dicts(kind) or ():
                # (every slot's descriptor, however __slots__ named it: a dict, a set, a
                # private name stored mangled, rev82a B1)
                slots += [(name, descriptor) for name, descriptor in list(space.items())
                          if type(descriptor) is types.MemberDescriptorType and type(name) is str]
        except Exception:
            slots = []
        if len(_SLOTS) > 4096:
            _SLOTS.clear()
        known = _SLOTS[id(kind)] = (kind, tuple(slots))
    for name, descriptor in known[1][:64]:
        try:
            pairs = (pairs or []) + [(name, descriptor.__get__(obj, kind))]
        except Exception:  # (a slot not set)
            pass
    return pairs


_DICTS: dict = {}  # class -> whether its instances' __dict__ is Python's own (_plain_dict)


_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_NAME = type.__dict__["__name__"]


def _class_dicts(kind) -> list | None:
    """The own dicts of a class and its bases, read through ``type``'s own descriptors (a
    metaclass's ``__dict__`` or ``__mro__`` property is the program's code, rev79a E2); None
    where they cannot be read so."""
    try:
        return [_TYPE_DICT.__get__(k, type(k)) for k in _TYPE_MRO.__get__(kind, type(kind))]
    except Exception:
        return None


_METHOD_TYPES = (types.FunctionType, staticmethod, classmethod, property)
_MODULE_DICTS = frozenset({"_buffers", "_parameters", "_modules"})  # (an nn.Module's, by name)
_thread_local = __import__("_thread")._local
_CONTEXT_VAR = __import__("contextvars").ContextVar  # (neither can be subclassed: by identity)
_LRU_WRAPPER = type(functools.lru_cache()(len))


def _class_attributes(space) -> list:
    """A class's own attributes but its methods and dunders, (name, value) pairs, from its
    dict as ``type``'s own descriptor gives it: what a class used as a namespace holds."""
    return [(k, v) for k, v in list(space.items()) if type(k) is str and not k.startswith("__")
            and type(v) not in _METHOD_TYPES]


def _class_module(kind) -> str | None:
    """The name of the module a class says it is from, read through ``type``'s own
    descriptor (a metaclass's property is the program's code); None where it is no string
    or missing (a class made by exec in an empty namespace, rev79a E1)."""
    try:
        name = type.__dict__["__module__"].__get__(kind, type(kind))
    except Exception:
        return None
    return name if type(name) is str else None


def _class_name(kind) -> str:
    try:
        name = _TYPE_NAME.__get__(kind, type(kind))
    except Exception:
        return "?"
    return name if type(name) is str else "?"


def _plain_dict(kind) -> bool:
    """Whether reading ``__dict__`` of an instance of ``kind`` runs no code of the program's:
    the attribute is the interpreter's own descriptor, not a property a class defines."""
    known = _DICTS.get(id(kind))  # (by identity: a metaclass's __hash__ is the program's)
    known = known[1] if known is not None and known[0] is kind else None
    if known is None:
        known = False
        for space in _class_dicts(kind) or ():
            descriptor = space.get("__dict__")
            if descriptor is not None:
                known = type(descriptor) in (types.GetSetDescriptorType,
                                             types.MemberDescriptorType)
                break
        if len(_DICTS) > 4096:
            _DICTS.clear()
        _DICTS[id(kind)] = (kind, known)
    return known


def _program_module(value) -> bool:
    """Whether ``value`` is a module to look inside for graphs (``_graph_locals``): one the
    program made (``types.ModuleType("store")``, in ``sys.modules`` or not) or one of the
    program's own files or folders (a namespace package's too); not the standard library's,
    an installed package's, a built-in one or this package's. Read from the module's own dict,
    running none of its code (importlib's ``LazyLoader`` imports at the first attribute read
    through the module's class); a module whose class makes its ``__dict__`` itself may hold
    anything: it counts (``_own_attributes``: unreadable)."""
    kind = type(value)
    if not issubclass(kind, types.ModuleType):
        return False
    if not _plain_dict(kind):
        return True  # (its dict cannot be read without its class's code: it may hold one)
    space = _own_dict(value)
    name = space.get("__name__")
    if type(name) is not str or name.partition(".")[0] == "retaincheck":
        return False
    path = space.get("__file__")
    if type(path) is not str:
        paths = space.get("__path__")  # (a namespace package: no file, its folders)
        path = None
        if type(paths) is list and paths:  # (read as the built-in list it must be, rev77a)
            path = paths[0]
        elif _class_name(type(paths)) == "_NamespacePath":
            inner = _own_dict(paths).get("_path")
            path = inner[0] if type(inner) is list and inner else None
    if type(path) is str:
        return not _installed_path(path)
    if name in sys.builtin_module_names or sys.modules.get(name) is not value:
        return sys.modules.get(name) is not value  # (made, and no import made it)
    spec = space.get("__spec__")
    if spec is None:
        return True  # (no import made it: made by the program)
    origin = _own_dict(spec).get("origin")
    return type(origin) is not str or origin not in ("built-in", "frozen")


def _namespace_like(value) -> bool:
    """A class of the program's, a ``SimpleNamespace``, a dataclass's object, a
    ``threading.local``: what a container's items are read as (``_graph_locals``)."""
    kind = type(value)
    if issubclass(kind, type):
        return _program_class(value)
    return issubclass(kind, (types.SimpleNamespace, _thread_local)) or any(
        "__dataclass_fields__" in k for k in _class_dicts(kind) or ())


def _program_class(kind) -> bool:
    """Whether a class is the program's: not one an installed or standard-library module
    defines under its name (read from the class's and the module's own dicts); kept per
    class (a model's layers ask for theirs at every audit)."""
    known = _PROGRAM_CLASSES.get(id(kind))  # (by identity, as _plain_dict)
    if known is None or known[0] is not kind:
        if len(_PROGRAM_CLASSES) > 4096:
            _PROGRAM_CLASSES.clear()
        known = _PROGRAM_CLASSES[id(kind)] = (kind, _is_program_class(kind))
    return known[1]


_PROGRAM_CLASSES: dict = {}


def _is_program_class(kind) -> bool:
    try:  # (a class with no __module__ or __name__ to read: not the program's)
        name = type.__dict__["__module__"].__get__(kind, type(kind))
        short = _TYPE_NAME.__get__(kind, type(kind))
    except Exception:
        return False
    module = sys.modules.get(name) if type(name) is str else None
    if module is None or not _installed(module):
        return True
    return _own_dict(module).get(short) is not kind


def _class_file(kind) -> str | None:
    """The file of the program's own module that defines a class (not the standard
    library's or an installed package's), or None."""
    name = _class_module(kind)
    module = sys.modules.get(name) if name is not None else None
    if module is None or _installed(module):
        return None
    return _own_dict(module).get("__file__")


def _installed(module) -> bool:
    """Whether a module is the standard library's or an installed package's (not the
    program's own): its file lies under Python's prefix or a site-packages folder."""
    path = _own_dict(module).get("__file__")  # (not through its class: rev78a C1)
    if type(path) is not str or not path:
        return True  # (a built-in module)
    return _installed_path(path)


def _installed_path(path: str) -> bool:
    """Whether a file is the standard library's or an installed package's: under a
    site-packages folder or the standard library's folders (not all of Python's prefix: a
    project kept inside its virtual environment's folder, or /usr/src/app beside /usr's
    Python, is the program's own, rev77a A3)."""
    known = _INSTALLED_PATHS.get(path)
    if known is not None:
        return known
    if len(_INSTALLED_PATHS) > 8192:
        _INSTALLED_PATHS.clear()
    known = _INSTALLED_PATHS[path] = _is_installed_path(path)
    return known


_INSTALLED_PATHS: dict = {}


def _is_installed_path(path: str) -> bool:
    parts = path.replace(os.sep, "/").split("/")
    if "site-packages" in parts or "dist-packages" in parts:  # (a folder of that name, not a
        return True  # project's my-site-packages-fork, rev78a B4)
    if not _STDLIB_DIRS:
        import sysconfig

        dirs = set()
        for key in ("stdlib", "platstdlib"):
            for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
                try:
                    found = sysconfig.get_path(key, vars={"base": prefix, "installed_base": prefix,
                                                          "platbase": prefix,
                                                          "installed_platbase": prefix})
                except Exception:
                    found = None
                if found:
                    dirs.add(os.path.join(found, ""))
        _STDLIB_DIRS.append(tuple(sorted(dirs)) or (os.path.join(sys.base_prefix, ""),))
    return path.startswith(_STDLIB_DIRS[0])


_STDLIB_DIRS: list = []


_ATOMS = frozenset({int, float, complex, bool, str, bytes, type(None)})
_CODE_TYPES = frozenset({types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType})


def _items(value) -> list | None:
    """The items of a dict, list, tuple, set, frozenset or deque (a dict's values; the first
    and last 64), read by the built-in type's own methods (a subclass's are the program's
    code); None for any other value."""
    kind = type(value)
    try:
        if issubclass(kind, dict):  # (its keys too: a module as a key, rev82a B3)
            inner = list(dict.values(value)) + [k for k in dict.keys(value) if type(k) not in (
                str, int)]
        elif issubclass(kind, list):
            inner = list(list.__iter__(value))
        elif issubclass(kind, tuple):
            inner = list(tuple.__iter__(value))
        elif issubclass(kind, (set, frozenset)):
            inner = list(set.__iter__(value) if issubclass(kind, set) else frozenset.__iter__(
                value))
        elif issubclass(kind, collections.deque):
            inner = list(collections.deque.__iter__(value))
        else:
            return None
    except Exception:
        return []
    return inner if len(inner) <= 128 else inner[:64] + inner[-64:]
_CONTAINERS = frozenset({dict, list, tuple, set, frozenset, collections.OrderedDict,
                         collections.deque})


def _holds(value, tensor, depth: int = 5, budget: list | None = None) -> bool:
    """Whether ``value`` is a tensor with a graph, or holds one: in a dict, list, tuple, set or
    deque (nested), a dataclass, a named tuple or a ``SimpleNamespace`` (a batch), a class's
    own attributes (a namespace), a ``functools.partial``'s arguments, a
    function's closure or defaults (a step made per epoch over its features: rev52a L1,
    rev52b L1). Not an object's attributes (``_graph_locals``: a loss module's, made anew by
    its forward in the loop), nor a function's globals. Read without running the program's
    code (no ``__getattr__``, no property)."""
    kind = type(value)
    if kind in _ATOMS or kind in _CONTAINERS and not value:  # (most of a module's
        return False  # attributes: nothing inside; an exact built-in type's len, no program code)
    if issubclass(kind, tensor):  # (by its type: isinstance may read __class__, program code)
        if value.grad_fn is not None:
            return True
        try:  # (an attribute set on a tensor: `x.ctx = feats`, rev53a M8)
            own = object.__getattribute__(value, "__dict__")
        except Exception:
            return False
        return bool(own) and depth > 0 and any(
            _holds(v, tensor, depth - 1, budget) for v in list(own.values())[:16])
    budget = [1024] if budget is None else budget  # (values looked at, for one value)
    budget[0] -= 1
    if depth == 0 or budget[0] < 0:
        return False
    kind = type(value)
    try:
        if kind in (dict, list, tuple, set, frozenset, collections.deque) or issubclass(
                kind, (dict, list, tuple)):
            # (the first and the last 64: a bank of past values the epoch's features are
            # appended to, rev55a P5)
            # (read by the built-in type's own methods: a subclass's values() or __iter__
            # is the program's code, not run here)
            inner = list(dict.values(value) if issubclass(kind, dict) else list.__iter__(
                value) if issubclass(kind, list) else tuple.__iter__(value) if issubclass(
                kind, tuple) else value)
            inner = inner if len(inner) <= 128 else inner[:64] + inner[-64:]
        elif kind is functools.partial:
            inner = [*value.args, *value.keywords.values()]
        elif kind is types.FunctionType:
            # (and its own attributes: `step.feats = ...`, rev78a B2)
            inner = list(value.__defaults__ or ()) + list(value.__dict__.values())[:64]
            for cell in value.__closure__ or ():
                try:
                    inner.append(cell.cell_contents)
                except ValueError:  # (an empty cell)
                    pass
        elif issubclass(kind, (types.SimpleNamespace, _thread_local)) or any(
                "__dataclass_fields__" in k for k in _class_dicts(kind) or ()):  # (no metaclass
            # __getattr__ run: dataclasses.is_dataclass asks hasattr, rev78a C1; a
            # threading.local's values in this thread, rev81b B2)
            pairs = _own_attributes(value)
            if pairs is _UNREADABLE:
                return True  # (cannot be read without the program's code: may hold one)
            inner = [v for _, v in pairs or ()]
        elif kind is types.MethodType:  # (a bound method kept as a callback: its object's
            # attributes, its function's closure, rev54a N3)
            pairs = _own_attributes(value.__self__)
            if pairs is _UNREADABLE:
                return True
            inner = [v for _, v in pairs or ()] + [value.__func__]
        elif kind is _CONTEXT_VAR:
            inner = [value.get(None)]  # (its value in this context, rev54b L1)
        elif issubclass(kind, type) and _program_class(value):
            # (a class used as a namespace: `Cache.feats = ...`, rev52a L1 g_clsattr; its
            # own attributes, not its methods' closures; a class with a metaclass too, an
            # ABC's, rev80a A2: read through type's own descriptor)
            try:
                space = _TYPE_DICT.__get__(value, kind)
            except Exception:
                return True  # (cannot be read without the program's code: may hold one)
            inner = [v for _, v in _class_attributes(space)[:64]]
        elif kind is weakref.ref:
            inner = [value()]  # (what it refers to, rev53b K3)
        elif kind is _LRU_WRAPPER:
            # (a cache whose values cannot be read: holding any, it may hold one, rev53a M4)
            return value.cache_info().currsize > 0
        elif not kind.__flags__ & (1 << 9) and kind not in (
                types.ModuleType, types.CodeType, types.FrameType, types.BuiltinFunctionType,
                types.MethodType, str, bytes, int, float, complex, bool, type(None)):
            # (an iterator or other object of a type written in C: what it refers to,
            # read as the garbage collector reads it, with no code of the object's run:
            # itertools.repeat(feats), iter(batches), rev53a M5)
            import gc

            inner = [v for v in gc.get_referents(value)[:64]
                     if not isinstance(v, (type, types.ModuleType, types.CodeType))]
        else:
            return False
    except Exception:
        return False
    for v in inner:  # (a module's kernel_size, stride, padding: tuples of numbers)
        if type(v) not in _ATOMS and _holds(v, tensor, depth - 1, budget):
            return True
    return False


# Names whose use in a function reads or writes its frame's dict of locals: Python (before
# 3.13) keeps one dict per frame, which each read of ``frame.f_locals`` refreshes; a
# `hparams = locals()` the program keeps would change, and a name an `exec` put there would
# be lost (rev52a L2, rev52b E1). Called by their bare names, or ``f_locals`` read; not
# pytest's rewritten asserts' ``@py_builtins.locals()``, which keep nothing.
_OWN_LOCALS = frozenset({"locals", "vars", "exec", "eval", "dir"})
# ... and the ways to a frame of its own whose locals it may keep (rev53b E1:
# `inspect.getargvalues(inspect.currentframe()).locals`)
_OWN_FRAME = frozenset({"f_locals", "currentframe", "_getframe", "getargvalues"})
_uses_locals: dict = {}


_MISSING = object()


def _machinery_codes(stdlib: bool = False) -> dict:
    """``{id(code): code}`` of the code that runs a module's code: the import system's (its
    frozen modules and ``importlib``) and ``runpy``'s (``stdlib``: read as this module is
    imported, before this package's command line puts its own function in place of
    ``runpy._run_code``), and this package's own modules' (its command line, as ``__main__``
    too) with them; every function's and method's, nested code included."""
    import importlib.util
    import runpy

    names = ("_frozen_importlib", "_frozen_importlib_external", "importlib",
             "importlib._bootstrap", "importlib._bootstrap_external", "importlib.util", "runpy")
    own = os.path.dirname(os.path.abspath(__file__)) + os.sep
    if stdlib:
        modules = [sys.modules.get(name) for name in names]
    else:
        modules = [
            module for name, module in list(sys.modules.items())
            if type(name) is str and (  # (a key of the program's: not a str, rev82a B6)
                name == "retaincheck" or name.startswith("retaincheck.") or name == "__main__")
            and os.path.abspath(str(_own_dict(module).get("__file__") or "")).startswith(own)]
    found: dict = {} if stdlib else dict(_STDLIB_MACHINERY)
    del importlib, runpy

    def add(code) -> None:
        if type(code) is types.CodeType and id(code) not in found:
            found[id(code)] = code
            for inner in code.co_consts:
                add(inner)

    def add_function(value) -> None:
        for item in (value, getattr(value, "__func__", None), getattr(value, "fget", None)):
            add(getattr(item, "__code__", None))

    homes = {*names, *(module.__name__ for module in modules if module is not None)}
    for module in modules:
        if module is None:
            continue
        for value in list(vars(module).values()):
            add_function(value)
            if isinstance(value, type) and value.__module__ in homes:
                for member in list(vars(value).values()):
                    add_function(member)
    return found


_STDLIB_MACHINERY = _machinery_codes(stdlib=True)


_PLAIN_GETS = tuple(kind.__dict__["__getattribute__"] for kind in (object, type, types.ModuleType))
"""The attribute lookups ``inspect.getattr_static`` reads as Python does (``_called_value``)."""


def _called_value(expression, frame):
    """The value of a called expression (a name, a chain of attributes) in ``frame``, found
    without running the program's code (the frame's locals as ``_read_locals`` reads them,
    its globals and builtins; attributes by ``inspect.getattr_static``); ``_MISSING`` where
    it cannot be."""
    import ast
    import inspect

    if isinstance(expression, ast.Name):
        name = expression.id
        code = frame.f_code
        if code.co_flags & 0x1 and name not in code.co_varnames and (
                name not in code.co_cellvars and name not in code.co_freevars):
            values = {}  # (no local of a function's: a global or a built-in, as Python finds
            # it, whether or not its locals can be read: a function that calls exec)
        elif code.co_flags & 0x1:
            items = _read_locals(frame)
            if items is None:
                return _MISSING
            values = dict(items)
        else:
            values = frame.f_locals
        for scope in (values, frame.f_globals, frame.f_builtins):
            if name in scope:
                return scope[name]
        return _MISSING
    if isinstance(expression, ast.Attribute):
        base = _called_value(expression.value, frame)
        if base is _MISSING:
            return _MISSING
        try:  # (a class of its own __getattribute__ may answer anything: rev72a A1, a
            # functools.partial over itertools that runs the method N times, no frame)
            if inspect.getattr_static(type(base), "__getattribute__", None) not in _PLAIN_GETS:
                return _MISSING
        except Exception:
            return _MISSING
        try:
            value = inspect.getattr_static(base, expression.attr, _MISSING)
            if value is _MISSING:  # (a torch module's submodules, by its __getattr__)
                for table in ("_modules", "_parameters", "_buffers"):
                    found = object.__getattribute__(base, "__dict__").get(table)
                    if type(found) is dict and expression.attr in found:
                        return found[expression.attr]
        except Exception:  # (an object whose type's lookups fail, one with no __dict__)
            return _MISSING
        if type(value).__name__ in ("member_descriptor", "getset_descriptor"):
            try:
                value = value.__get__(base, type(base))  # (a slot's value: C code only)
            except Exception:
                return _MISSING
        return value
    return _MISSING


def _is_the_function(value, code) -> bool:
    """Whether calling ``value`` runs ``code`` itself: a function of that code, or a bound
    method, ``staticmethod``/``classmethod``, ``functools.partial`` of one, or an object or
    class whose ``__call__``/``__init__``/``__new__`` has it."""
    import functools
    import inspect

    for _ in range(8):
        if value is _MISSING or value is None:
            return False
        if getattr(value, "__code__", None) is code:
            return True
        if isinstance(value, (staticmethod, classmethod)) or inspect.ismethod(value):
            value = value.__func__
        elif isinstance(value, functools.partial):
            value = value.func
        elif isinstance(value, type):
            return any(getattr(inspect.getattr_static(value, name, None), "__code__", None)
                       is code for name in ("__init__", "__new__"))
        else:
            value = inspect.getattr_static(type(value), "__call__", None)
            if isinstance(value, type(_is_the_function)):
                return value.__code__ is code
            return False
    return False


def _reads_its_locals(code) -> bool:
    """Whether ``code`` names one of ``_OWN_LOCALS`` by itself or one of ``_OWN_FRAME`` (not
    code nested in it, whose calls read their own frames)."""
    import dis

    for instruction in dis.get_instructions(code):
        name = instruction.argval
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST") and (
                name in _OWN_LOCALS) or name in _OWN_FRAME:
            return True
    return False


def reads_own_locals(code) -> bool:
    """Whether a function's code names one of ``_OWN_LOCALS`` or ``_OWN_FRAME``."""
    uses = _uses_locals.get(code)
    if uses is None:
        uses = _uses_locals[code] = not (_OWN_LOCALS | _OWN_FRAME).isdisjoint(
            code.co_names) and _reads_its_locals(code)
    return uses


def _read_locals(frame) -> list | None:
    """A frame's locals, (name, value) pairs, as the program would not see it: a module's
    or a class body's namespace as it is; a function's only where its code names none of
    ``_OWN_LOCALS``, else None. Python (before 3.13) copies a function's locals into a dict
    it keeps on the frame until the function ends or they are read again, which would keep
    the last iteration's graph alive (the peak the audit measures grew,
    test_peak_bytes_count_only_retained_graphs_still_alive): emptied after the read where
    nothing else holds it (the frame, ``values`` and getrefcount's argument: 3) and it holds
    the function's own names only."""
    code = frame.f_code
    optimized = code.co_flags & 0x1
    if optimized and (sys.gettrace() not in (None, _loopwatch.calls)
                      or sys.getprofile() is not None):
        # (a trace or profile function in Python: before 3.13, Python refreshes the dict
        # before it runs and writes the dict back into the frame after it, so a read here
        # would undo what it set there, and an emptied dict would delete the function's
        # locals: rev52a L3)
        return None
    if optimized and reads_own_locals(code):
        return None
    values, items = frame.f_locals, []
    try:
        items = list(values.items())
    finally:
        if optimized and type(values) is dict and sys.getrefcount(values) == 3 and set(
                values) <= {*code.co_varnames, *code.co_cellvars, *code.co_freevars}:
            values.clear()
            _settled(frame)
        del values
    return items


def _settled(frame) -> None:
    """Mark a function's frame as having no copy of its locals to write back (CPython before
    3.13: ``PyFrame_LocalsToFast`` with ``clear`` 0 and the emptied dict writes nothing and
    resets ``f_fast_as_locals``). Else the first trace event in it (``_loopwatch``'s) copies
    its locals into the dict once more (``call_trampoline`` in ``sysmodule.c``), and the dict
    keeps that iteration's graph alive until the function ends (the peak the audit measures
    grew: test_peak_bytes_count_only_retained_graphs_still_alive)."""
    write = _LOCALS_TO_FAST[0] if _LOCALS_TO_FAST else _locals_to_fast()
    if write is not None:
        import ctypes

        write(ctypes.py_object(frame), ctypes.c_int(0))


_LOCALS_TO_FAST: list = []


def _locals_to_fast():
    write = None
    if sys.version_info < (3, 13):
        import ctypes

        write = getattr(ctypes.pythonapi, "PyFrame_LocalsToFast", None)
        if write is not None:
            write.argtypes, write.restype = [ctypes.py_object, ctypes.c_int], None
    _LOCALS_TO_FAST.append(write)
    return write


def _closure_functions(frame) -> list:
    """The Python functions a frame's closure holds (a decorator's wrapper's ``fn``)."""
    import types

    if not frame.f_code.co_freevars:
        return []
    items = _read_locals(frame) or ()  # (once per shape of the stack: _hooks.Session.run)
    names = set(frame.f_code.co_freevars)
    return [v for n, v in items if n in names and isinstance(v, types.FunctionType)]


_POSITIONS: dict = {}
_CODE_KIND: dict = {}  # id(code) -> (code, Session._kind_of's kind), absolute file names
_DOING: dict = {}


def _position(frame) -> tuple | None:
    """(line, end line, column, end column) of the instruction a frame is at (the call it
    makes), from ``co_positions`` (Python 3.11 on: one entry per 2-byte code unit); None
    where Python does not keep them."""
    try:
        positions = frame.f_code.co_positions()
    except AttributeError:
        return None
    import itertools

    at = next(itertools.islice(positions, frame.f_lasti // 2, None), None)
    return at if at is not None and None not in at else None


def _display_path(filename: str, start: str) -> str:
    """``filename`` (relative ones to the working directory now) relative to ``start`` when
    it lies below it, else absolute."""
    if filename.startswith("<"):
        return filename
    path = os.path.abspath(filename)
    if path.startswith(start + os.sep):
        return os.path.relpath(path, start)
    return path
