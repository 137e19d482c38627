"""The audit: which ``retain_graph=True`` calls were needed, and what they kept alive.

How it works, in short:

* While an audit is active, ``torch.autograd.backward`` (which ``Tensor.backward`` calls)
  and ``torch.autograd.grad`` are replaced by thin wrappers that pass every argument
  through unchanged and note who called them.
* Before a call made with ``retain_graph=True`` runs, the audit walks every node reachable from
  its roots (the ``tensors`` of backward, the ``outputs`` of grad), adds up the saved tensors
  the graph holds, and registers a pre-hook on each node (leaf accumulators excepted: they are
  shared by every graph that uses a parameter).
* A pre-hook runs whenever a backward pass executes that node. That is the definition of
  "needed": another call really walked the graph this call retained, later or during it (a
  tensor hook that calls ``autograd.grad``). The retaining call's own pass executes each node
  at most once, and that one firing per node is ignored while the call is innermost; a second
  firing, or a firing while a nested call is innermost, counts.
* A call that raises is not counted as an execution; a site whose every call raised is
  reported as "did not complete", never as "not needed".
* On exit every wrapper and hook is removed, also when the block raises.

A hook that fires without the audit knowing which call is running still marks the graph as
needed: any doubt is resolved towards "needed", never towards "not needed".
"""

from __future__ import annotations

import inspect
import json
import linecache
import os
import sys
import threading
from dataclasses import dataclass, field

_KEY = "retaincheck"
_LOCK = threading.Lock()
_ACTIVE: list[_Session] = []


@dataclass(eq=False)
class CallRecord:
    """One call site that called ``backward`` or ``autograd.grad`` with ``retain_graph=True``.

    A call site inside a loop is one record, however many times it ran.
    """

    file: str
    """Path of the file that made the call (relative to the working directory when inside it)."""
    line: int
    """Line number of the call."""
    function: str
    """Name of the function the call was made from (``<module>`` at top level)."""
    code: str
    """The source line of the call, stripped."""
    kind: str
    """``"backward"`` (``Tensor.backward`` or ``torch.autograd.backward``) or ``"grad"``."""
    executions: int = 0
    """How many times this call site ran with ``retain_graph=True`` and returned (a call that
    raised is not counted; a site whose every call raised has the verdict
    ``"did not complete"``)."""
    needed: bool = False
    """True when a later ``backward``/``grad`` call executed a node of a graph this site
    retained."""
    retained_bytes: int = 0
    """Bytes of the distinct storages held by saved tensors of the retained graph, largest over
    the executions; leaf tensors that require grad (trainable parameters) are not counted,
    frozen parameters and buffers that the graph saves are."""
    history_leak: bool = False
    """True when later executions of this call site kept walking back into the graphs of two or
    more earlier executions: history (a hidden state, a running total) leaks across iterations."""
    create_graph: bool = False
    """True when the call also passed ``create_graph=True`` (which retains the graph by itself)."""
    reused_by: list[str] = field(default_factory=list)
    """``file:line`` of each call that walked the retained graph again (``"?"`` when unknown)."""

    @property
    def site(self) -> str:
        """``file:line`` of the call."""
        return f"{self.file}:{self.line}"

    @property
    def verdict(self) -> str:
        """``"needed"``, ``"not needed"``, ``"needed only because history leaks"`` or
        ``"did not complete"`` (every execution of the call raised)."""
        if self.executions == 0:
            return "did not complete"
        if self.history_leak:
            return "needed only because history leaks"
        return "needed" if self.needed else "not needed"

    @property
    def suggestion(self) -> str:
        """One line saying what to do about this call."""
        if self.executions == 0:
            return (
                "the call raised before it returned, so nothing can be said about it: fix that "
                "error, then run retaincheck again"
            )
        if self.history_leak:
            return (
                "detach the hidden state (or running value) you carry into the next iteration, "
                "e.g. h = h.detach(), then remove retain_graph=True"
            )
        if not self.needed:
            if self.create_graph:
                return (
                    "nothing walked this graph again; create_graph=True retains it anyway, so "
                    "pass retain_graph=False to free it"
                )
            return "remove retain_graph=True: nothing walked this graph again"
        if self.create_graph:
            return (
                "keep it (create_graph=True already implies retain_graph=True, so the flag "
                "itself can go)"
            )
        if self.reused_by == [self.site]:
            if self.kind == "backward":
                return (
                    "if a hidden state or running total is carried across iterations, detach() "
                    "it (h = h.detach()) and drop retain_graph=True; otherwise keep it"
                )
            return "keep it, or compute all rows in one call with is_grads_batched=True"
        return (
            "keep it, or sum the losses and call backward() once; if one loss should not "
            "reach the shared part, detach() it there"
        )

    def to_dict(self) -> dict:
        """The record as plain JSON-ready data (the properties included)."""
        return {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "code": self.code,
            "kind": self.kind,
            "executions": self.executions,
            "needed": self.needed,
            "verdict": self.verdict,
            "retained_bytes": self.retained_bytes,
            "history_leak": self.history_leak,
            "create_graph": self.create_graph,
            "reused_by": list(self.reused_by),
            "suggestion": self.suggestion,
        }


@dataclass
class Report:
    """What an [`audit`][retaincheck.audit] found: one [`CallRecord`][retaincheck.CallRecord]
    per call site, in first-call order.

    The verdicts are final once the ``with`` block has exited.
    """

    calls: list[CallRecord] = field(default_factory=list)

    def to_dict(self) -> dict:
        """``{"calls": [record.to_dict(), ...]}``."""
        return {"calls": [c.to_dict() for c in self.calls]}

    def to_json(self, **kwargs) -> str:
        """The report as one JSON object; keyword arguments go to `json.dumps`."""
        return json.dumps(self.to_dict(), **kwargs)

    def format(self) -> str:
        """A readable report: each call site, its verdict, the bytes it kept and a suggestion."""
        if not self.calls:
            return "retaincheck: no backward() or autograd.grad() call used retain_graph=True.\n"
        n = len(self.calls)
        lines = [f"retaincheck: {n} call site{'s' if n != 1 else ''} used retain_graph=True", ""]
        for c in self.calls:
            times = "once" if c.executions == 1 else f"{c.executions} times"
            if c.executions == 0:
                lines.append(f"{c.site}  {c.code}  (raised before it returned)")
            else:
                lines.append(f"{c.site}  {c.code}  (ran {times})")
            verdict = c.verdict.upper()
            if c.executions == 0:
                verdict += ": the call raised, so its graph was never judged"
            elif c.needed and c.reused_by:
                verdict += f": walked again by {', '.join(c.reused_by)}"
            elif not c.needed:
                verdict += ": no later backward() or grad() walked this graph"
            lines.append(f"    verdict: {verdict}")
            lines.append(f"    kept:    {_human(c.retained_bytes)} of saved tensors")
            lines.append(f"    suggest: {c.suggestion}")
            lines.append("")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _human(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


class _Tag:
    """Stored in a node's ``metadata``; the node's pre-hook. Never refers to the node."""

    __slots__ = ("session", "first")

    def __init__(self, session: _Session):
        self.session = session
        self.first: dict[CallRecord, int] = {}  # record -> first execution that retained it

    def __call__(self, grad_outputs):  # the pre-hook; returns None, so grads are untouched
        try:
            self.session._fired(self)
        except Exception:  # never break the user's backward; mark everything needed
            for record in self.first:
                record.needed = True
        return None


class _Call:
    __slots__ = ("record", "key", "index", "reached", "retaining", "fired")

    def __init__(self, record: CallRecord | None, key: str, index: int, retaining: bool):
        self.record = record
        self.key = key
        self.index = index
        self.retaining = retaining  # this call hooked its own graph before it ran
        self.reached: set[int] = set()
        self.fired: set[int] = set()  # id() of the tags that fired while this call was innermost


class _Session:
    def __init__(self):
        import torch

        self.torch = torch
        self.report = Report()
        self.records: dict[tuple[str, int], CallRecord] = {}
        self.started: dict[CallRecord, int] = {}  # record -> executions started (also failed)
        self.stack: list[_Call] = []
        self.tagged: list[tuple[dict, object]] = []  # (node metadata, hook handle)
        self.prune_at = 4096
        self.saved_names: dict[type, tuple[str, ...]] = {}
        self.torch_dir = os.path.dirname(torch.__file__) + os.sep
        self.own_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
        self.originals: dict[str, object] = {}

    # -- patching ---------------------------------------------------------------------------
    def install(self):
        ag = self.torch.autograd
        for name, kind in (("backward", "backward"), ("grad", "grad")):
            original = getattr(ag, name)
            self.originals[name] = original
            setattr(ag, name, self._wrap(original, kind))

    def uninstall(self):
        ag = self.torch.autograd
        for name, original in self.originals.items():
            setattr(ag, name, original)
        self.originals.clear()
        for metadata, handle in self.tagged:
            handle.remove()
            metadata.pop(_KEY, None)
        self.tagged.clear()

    def _wrap(self, original, kind):
        signature = inspect.signature(original)
        session = self
        roots_arg = "tensors" if kind == "backward" else "outputs"

        def wrapper(*args, **kwargs):
            try:
                arguments = signature.bind(*args, **kwargs).arguments
            except TypeError:  # let torch raise its own error
                return original(*args, **kwargs)
            retain = arguments.get("retain_graph")
            explicit = retain is not None and bool(retain)
            roots = arguments.get(roots_arg)
            if roots is not None and not session._single_root(roots):
                # A one-shot iterable (a generator, map(...)) would be consumed by torch and
                # leave nothing to walk: materialise it once and hand torch the same tuple.
                try:
                    roots = tuple(roots)
                except TypeError:  # not iterable: let torch raise its own error
                    return original(*args, **kwargs)
                bound = signature.bind(*args, **kwargs)
                bound.arguments[roots_arg] = roots
                args, kwargs = bound.args, bound.kwargs
                arguments = bound.arguments
            return session._run(original, kind, args, kwargs, arguments, roots_arg, explicit)

        wrapper.__wrapped__ = original
        wrapper.__name__ = original.__name__
        wrapper.__qualname__ = original.__qualname__
        wrapper.__doc__ = original.__doc__
        return wrapper

    # -- calls --------------------------------------------------------------------------------
    def _caller(self):
        """(file, line, function, user_code) of the code that called backward/grad."""
        frame = sys._getframe(1)
        while frame is not None:
            filename = os.path.abspath(frame.f_code.co_filename)
            if filename.startswith(self.own_dir):
                frame = frame.f_back
                continue
            if filename.startswith(self.torch_dir):
                rel = filename[len(self.torch_dir) :]
                if rel in ("_tensor.py", "overrides.py"):  # Tensor.backward and dispatch
                    frame = frame.f_back
                    continue
                return frame, False  # called by torch itself (e.g. autograd.functional)
            return frame, True
        return None, False

    def _run(self, original, kind, args, kwargs, arguments, roots_arg, explicit):
        frame, user = self._caller()
        if frame is not None:
            key = (_display_path(frame.f_code.co_filename), frame.f_lineno)
            function = frame.f_code.co_name
            filename = frame.f_code.co_filename
        else:
            key, function, filename = ("?", 0), "?", "?"
        del frame
        record = None
        if explicit and user:
            with _LOCK:
                record = self.records.get(key)
                if record is None:
                    code = _without_comment(linecache.getline(filename, key[1]))
                    record = CallRecord(key[0], key[1], function, code, kind)
                    self.records[key] = record
                    self.report.calls.append(record)
        elif key in self.records:
            record = self.records[key]  # same site without retain: still a later execution
        retaining = explicit and user
        index = 0
        if record is not None:
            with _LOCK:
                index = self.started.get(record, 0) + 1
                if retaining:
                    self.started[record] = index
        call = _Call(record, f"{key[0]}:{key[1]}", index, retaining)
        if retaining:
            # Hook the graph BEFORE the call runs, so that a reuse during the call (a tensor
            # hook that calls autograd.grad on the same graph) is seen; _fired ignores the
            # call's own single pass over each node.
            self._retained(record, index, arguments.get(roots_arg))
        self.stack.append(call)
        try:
            result = original(*args, **kwargs)
        finally:
            self.stack.pop()
        if record is not None and len(call.reached) >= 2:
            record.history_leak = True
        if retaining:  # counted only once the call has returned
            record.executions += 1
            if arguments.get("create_graph"):
                record.create_graph = True
        return result

    def _fired(self, tag: _Tag):
        call = self.stack[-1] if self.stack else None
        own_pass = unseen = False
        if call is not None and call.retaining:
            # A backward pass executes each node at most once: the first firing of a node
            # while the retaining call is innermost is that call's own pass, a second one is
            # another walk (one the audit could not see start) and counts as a use.
            own_pass = id(tag) not in call.fired
            unseen = not own_pass  # a walk the audit did not see start: who is unknown
            call.fired.add(id(tag))
        for record, first in tag.first.items():
            if own_pass and call.record is record and call.index == first:
                continue
            record.needed = True
            who = call.key if call is not None and not unseen else "?"
            if who not in record.reused_by:
                record.reused_by.append(who)
            if call is not None and call.record is record and call.index > first:
                call.reached.add(first)

    # -- graphs -------------------------------------------------------------------------------
    def _single_root(self, roots) -> bool:
        """True for what torch itself treats as one root: a tensor(-like) or a GradientEdge."""
        from torch.autograd.graph import GradientEdge
        from torch.overrides import is_tensor_like

        return is_tensor_like(roots) or isinstance(roots, GradientEdge)

    def _retained(self, record: CallRecord, index: int, roots):
        from torch.autograd.graph import GradientEdge

        torch = self.torch
        if self._single_root(roots):
            roots = (roots,)
        try:
            roots = tuple(roots)
        except TypeError:
            roots = ()
        stack = []
        for root in roots:
            if isinstance(root, GradientEdge):
                stack.append(root.node)
            elif isinstance(root, torch.Tensor) and root.grad_fn is not None:
                stack.append(root.grad_fn)
        seen: set[int] = set()
        nodes = []
        params: set[tuple] = set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)  # keeps ids unique during the walk
            if type(node).__name__ == "AccumulateGrad":
                key = _storage_key(getattr(node, "variable", None))
                if key is not None:
                    params.add(key[0])
                continue
            for next_node, _ in node.next_functions:
                if next_node is not None:
                    stack.append(next_node)
        storages: dict[tuple, int] = {}
        for node in nodes:
            if type(node).__name__ == "AccumulateGrad":
                continue
            self._tag(node, record, index)
            for tensor in self._saved_tensors(node):
                key = _storage_key(tensor)
                if key is not None and key[0] not in params:
                    storages[key[0]] = key[1]
        record.retained_bytes = max(record.retained_bytes, sum(storages.values()))
        if len(self.tagged) > self.prune_at:
            self.tagged = [(m, h) for m, h in self.tagged if h.hooks_dict_ref() is not None]
            self.prune_at = max(4096, 2 * len(self.tagged))

    def _tag(self, node, record: CallRecord, index: int):
        try:
            metadata = node.metadata
        except Exception:
            metadata = None
        tag = metadata.get(_KEY) if metadata is not None else None
        if not isinstance(tag, _Tag) or tag.session is not self:
            tag = _Tag(self)
            handle = node.register_prehook(tag)
            if metadata is None:  # cannot remember the tag: hook again next time (still safe)
                metadata = {}
            metadata[_KEY] = tag
            self.tagged.append((metadata, handle))
        tag.first.setdefault(record, index)

    def _saved_tensors(self, node):
        names = self.saved_names.get(type(node))
        if names is None:
            names = tuple(a for a in dir(type(node)) if a.startswith("_raw_saved_"))
            self.saved_names[type(node)] = names
        for name in names:
            try:
                saved = getattr(node, name)
            except Exception:  # already freed, or not available
                continue
            items = saved if isinstance(saved, (list, tuple)) else (saved,)
            for item in items:
                try:
                    data = item.data  # the packed value: never calls an unpack hook
                except Exception:
                    continue
                if isinstance(data, self.torch.Tensor):
                    yield data


def _storage_key(tensor):
    """((device, data_ptr), nbytes) of the tensor's storage, or None."""
    if tensor is None:
        return None
    try:
        storage = tensor.untyped_storage()
        return (str(tensor.device), storage.data_ptr()), storage.nbytes()
    except Exception:
        return None


def _without_comment(line: str) -> str:
    """The source line, stripped, without a trailing comment."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[: tok.start[1]].strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return line.strip()


def _display_path(filename: str) -> str:
    if filename.startswith("<"):
        return filename
    path = os.path.abspath(filename)
    cwd = os.getcwd()
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path


class audit:
    """Audit every ``retain_graph=True`` in a block of code.

    Use it as a context manager, `with retaincheck.audit() as report:`; the
    [`Report`][retaincheck.Report] it gives is complete once the block exits.

    Inside the block, every call to ``Tensor.backward``, ``torch.autograd.backward`` or
    ``torch.autograd.grad`` that passes ``retain_graph=True`` explicitly is recorded with its
    call site in your code. A call site is **needed** when another ``backward`` or ``grad``
    call inside the block (later, or while the retaining call was still running) executed a
    node of a graph it retained; otherwise it is **not needed**, or **did not complete** when
    every call at that site raised. Put everything that may walk the graph again inside the
    block: uses after the block are not seen.
    ``python -m retaincheck script.py`` audits a whole script.

    ```python
    import torch
    import retaincheck

    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        loss = torch.tanh(w).sum()
        loss.backward(retain_graph=True)  # nothing walks this graph again
        total = torch.sigmoid(w).sum()
        total.backward(retain_graph=True)
        total.backward()  # the second walk: the retain above was needed

    first, second = report.calls
    assert (first.needed, second.needed) == (False, True)
    assert first.retained_bytes == 12  # tanh's saved output: 3 float32 values
    ```

    The audit never changes results: the wrappers pass every argument through unchanged and
    the hooks return nothing. Everything is restored on exit, also when the block raises.
    Importing ``retaincheck`` patches nothing. Audits cannot be nested.

    Not seen: calls through a name bound before the audit began (``from torch.autograd import
    grad`` in a module imported earlier) are not recorded, although they still count as later
    uses of recorded graphs; calls that torch makes internally (``torch.autograd.functional``)
    are not recorded either.
    """

    def __init__(self):
        self._session: _Session | None = None

    def __enter__(self) -> Report:
        with _LOCK:
            if _ACTIVE:
                raise RuntimeError("retaincheck.audit() is already active; audits do not nest")
            self._session = _Session()
            _ACTIVE.append(self._session)
        try:
            self._session.install()
        except BaseException:
            self._session.uninstall()
            _ACTIVE.clear()
            raise
        return self._session.report

    def __exit__(self, exc_type, exc, tb) -> None:
        session = self._session
        try:
            session.uninstall()
        finally:
            with _LOCK:
                _ACTIVE.clear()
        return None
