"""What an audit found: one CallRecord per call site, the Report that holds them, and their
text and JSON forms."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import _suggest, _verdicts
from ._messages import check_lang, message, reused_by
from ._sizes import human

# The message id of each verdict's word in the readable report.
VERDICT_KEYS = {
    _verdicts.NEEDED: "v_needed",
    _verdicts.LEAK: "v_leak",
    _verdicts.COULD_NOT_TELL: "v_could_not_tell",
    _verdicts.NOT_NEEDED: "v_not_needed",
    _verdicts.NOT_NEEDED_SO_FAR: "v_not_needed_so_far",
    _verdicts.DID_NOT_COMPLETE: "v_did_not_complete",
}


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
    reused_executions: int = 0
    """How many of those runs had their graph reused: a later pass executed a node that the
    run executed and that still held saved tensors."""
    needed: bool = False
    """True when a later ``backward``/``grad`` call (or a later run of this line) executed a
    node that a run of this line had executed and that held saved tensors: without the flag,
    that pass would have raised ``Trying to backward through the graph a second time``."""
    retained_bytes: int = 0
    """Bytes of the distinct storages held by the saved tensors of the nodes one run executed
    (what ``retain_graph=False`` would have freed), largest over the runs; leaf tensors that
    require grad (trainable parameters) are not counted, frozen parameters and buffers that
    the graph saves are."""
    peak_bytes: int = 0
    """The most bytes this site's retained graphs held at one moment: at the end of each run,
    the distinct storages saved by every node that a run of this line kept and that is still
    alive and not yet freed by a later pass, counted once; the largest of these totals."""
    history_leak: bool = False
    """True when a later run of this line reused nodes built in two different iterations
    (before and after an earlier run of the line): history (a hidden state, a running total)
    leaks across iterations."""
    create_graph: bool = False
    """True when the call also passed ``create_graph=True`` (which retains the graph by itself)."""
    reused_by: list[str] = field(default_factory=list)
    """``file:line`` of each call that walked the retained graph again (``"?"`` when unknown)."""
    run_completed: bool = True
    """False when the audited run stopped early (see [`Report.completed`][retaincheck.Report]);
    a site nothing reused is then ``"not needed so far (run stopped early)"``."""
    unseen_reads: list[str] = field(default_factory=list)
    """``file:line`` of code that reads saved tensors outside a backward pass
    (``grad_fn._saved_result``, ``ctx.saved_tensors``): the audit cannot see which graph it
    read, so a site nothing else reused is ``"could not tell: kept"``, never ``"not needed"``."""
    unseen_calls: list[str] = field(default_factory=list)
    """``file:line`` of a ``backward()``/``grad()`` call that did not run after this one first
    ran (a branch not taken: ``if step % 50 == 0``; one that ran only before it counts too),
    in this call's function or one on the way to it, or in a function that may run after it:
    one that started a pass after it, one the program handed to a test runner as a value (a
    finalizer, a cleanup), or a test case's other tests in the same audit (there, one that
    never ran). It may walk the graph
    on another path, so a site nothing else reused is ``"could not tell: kept"``."""
    ran_once_in_a_loop: bool = False
    """It is in a loop that, with more iterations (``--iters 2``), may walk a graph it kept:
    a loop over a graph made before it (however often it ran), or any loop on the way that
    ran it once (it may have walked part of a graph made before the loop); a site nothing
    else reused is then ``"could not tell: kept"``."""
    running_children: list[int] = field(default_factory=list)
    """The pids of child processes forked during the run (``os.fork``, multiprocessing's
    "fork") still running at its end: they hold a copy of the graph and may walk it, so a site
    nothing else reused is ``"could not tell: kept"``. A reuse in a forked child that is seen
    (it ran before the end) makes the site needed."""
    partly_run: bool = False
    """A later pass walked part of its graph that this ``backward(inputs=...)`` did not run,
    as its ``inputs`` left that part out: with other inputs (``None`` on another option or
    parametrization) the call would run that part and free it, and the later pass would
    raise, so a site nothing else reused is ``"could not tell: kept"``. (``autograd.grad``'s
    inputs are what it asks for: the graph behind them is never run by it.)"""
    compiled: bool = False
    """It walked a backward that torch.compile (AOTAutograd) compiles at its first run, from
    that run's ``retain_graph`` (``_hooks.Session.hook_graph``): without the flag it may be
    compiled another way, so a site nothing else reused is ``"could not tell: kept"``."""
    passed_through: bool = False
    """The flag is not the literal ``True`` at this line: a name or an expression
    (``retain_graph=keep``), ``*args``/``**kwargs`` (a wrapper, a mock of ``Tensor.backward``),
    or a positional name. The line that writes it is elsewhere, and the program may look at its
    value (a helper that steps ``if not retain_graph``), so a site nothing else reused is
    ``"could not tell: kept"``. Also true when the line's code cannot be read (compiled from a
    string with ``exec``, or its file changed or went away after it ran): what it writes cannot
    be seen."""
    unproven: str = ""
    """Why the proof's rerun without this flag (``--fix``, ``--fail-on-unneeded``) did not
    complete as the audited run did, when it neither failed nor met a freed-graph error (its
    standard output differed, the program set its own trace function, started a Python
    process the rerun cannot reach, or the site is in code with no file): the site is then
    ``"could not tell: kept"``; "" when no such rerun ran."""
    notes: set[str] = field(default_factory=set, repr=False)
    """How the graph was reused (by another line, by the same line, after an optimizer step,
    ...): what the suggestion is fitted to."""

    @property
    def site(self) -> str:
        """``file:line`` of the call."""
        return f"{self.file}:{self.line}"

    @property
    def verdict(self) -> str:
        """``"needed"``, ``"not needed"`` (proven by a completed run), ``"not needed so far (run
        stopped early)"``, ``"needed only because history leaks"``, ``"could not tell: kept"``
        (the program reads saved tensors where the audit cannot see which graph) or ``"did not
        complete"`` (every execution of the call raised)."""
        return _verdicts.verdict(self)

    @property
    def suggestion(self) -> str:
        """One line saying what to do about this call, in English whatever the locale (it is
        the JSON's ``suggestion`` field); [`suggestion_in`][retaincheck.CallRecord.suggestion_in]
        gives it in Chinese."""
        return _suggest.suggestion(self)

    def suggestion_in(self, lang: str) -> str:
        """The suggestion in ``lang``: ``"en"`` (the same as ``suggestion``) or ``"zh"``; any
        other value raises ``ValueError``."""
        return _suggest.suggestion(self, check_lang(lang, "suggestion_in"))

    def to_dict(self) -> dict:
        """The record as plain JSON-ready data (the properties included; sizes in bytes)."""
        return {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "code": self.code,
            "kind": self.kind,
            "executions": self.executions,
            "reused_executions": self.reused_executions,
            "needed": self.needed,
            "verdict": self.verdict,
            "retained_bytes": self.retained_bytes,
            "peak_bytes": self.peak_bytes,
            "history_leak": self.history_leak,
            "create_graph": self.create_graph,
            "reused_by": list(self.reused_by),
            "unseen_reads": list(self.unseen_reads),
            "unseen_calls": list(self.unseen_calls),
            "ran_once_in_a_loop": self.ran_once_in_a_loop,
            "running_children": list(self.running_children),
            "partly_run": self.partly_run,
            "compiled": self.compiled,
            "passed_through": self.passed_through,
            "unproven": self.unproven,
            "suggestion": self.suggestion,
        }


def _order(record: CallRecord):
    return (record.file, record.line)


@dataclass
class Report:
    """What an [`audit`][retaincheck.audit] found: one [`CallRecord`][retaincheck.CallRecord]
    per call site, in file-then-line order.

    The verdicts are final once the ``with`` block has exited.
    """

    calls: list[CallRecord] = field(default_factory=list)
    completed: bool = True
    """False when the audited block stopped early: it raised (``KeyboardInterrupt``, an error,
    ``SystemExit`` with a non-zero code). ``SystemExit(0)`` or ``SystemExit(None)`` counts as
    completed. A "not needed" verdict needs a completed run."""
    stopped_by: str | None = None
    """What stopped the run, one line (``"KeyboardInterrupt"``, ``"SystemExit(3)"``,
    ``"RuntimeError: ..."``), or None."""
    total_retained_bytes: int = 0
    """The most bytes all sites' retained graphs held at one moment, each storage counted once
    however many sites kept it (the per-site figures count a shared storage in each site)."""

    backward_calls: int = 0
    """How many ``backward``/``grad`` calls the audit saw, with or without ``retain_graph``,
    however they were reached (``Tensor.backward``, ``torch.autograd.backward``/``grad``, a
    name bound before the audit began)."""

    def mark_stopped(self, exc: BaseException | None) -> None:
        """Record that the audited run ended with ``exc`` (as ``audit`` does when its block
        raises); for code that catches the exception inside the block itself.
        ``SystemExit(0)`` and ``SystemExit(None)`` leave the report completed."""
        reason = _verdicts.stopped_by(type(exc) if exc is not None else None, exc)
        if reason is None:
            return
        self.completed = False
        self.stopped_by = reason
        for record in self.calls:
            record.run_completed = False

    def _sorted(self) -> list[CallRecord]:
        return sorted(self.calls, key=_order)

    def to_dict(self) -> dict:
        """``{"completed": ..., "stopped_by": ..., "total_retained_bytes": ...,
        "calls": [record.to_dict(), ...]}``, sizes in bytes."""
        return {
            "completed": self.completed,
            "stopped_by": self.stopped_by,
            "total_retained_bytes": self.total_retained_bytes,
            "backward_calls": self.backward_calls,
            "calls": [c.to_dict() for c in self._sorted()],
        }

    def to_json(self, **kwargs) -> str:
        """The report as one JSON object; keyword arguments go to `json.dumps`."""
        return json.dumps(self.to_dict(), **kwargs)

    def format(self, lang: str = "en") -> str:
        """A readable report: each call site, its verdict, the bytes it kept and a suggestion,
        in ``lang`` (``"en"`` or ``"zh"``; the templates are in ``_messages``).

        It starts with an empty line, so that it stands apart from the script's own output."""

        check_lang(lang, "format")

        def m(key, **values):
            return message(key, lang, **values)

        lines = [""]
        if not self.completed:
            lines.append(m("stopped", why=self.stopped_by))
        if not self.calls:
            lines.append(m("no_calls"))
            return "\n".join(lines) + "\n"
        n = len(self.calls)
        lines += [m("header_one" if n == 1 else "header_many", n=n), ""]
        for c in self._sorted():
            if c.executions == 0:
                lines.append(m("raised_before", site=c.site, code=c.code))
            elif c.executions == 1:
                lines.append(m("ran_once", site=c.site, code=c.code))
            else:
                lines.append(m("ran_times", site=c.site, code=c.code, n=c.executions))
            verdict = m(VERDICT_KEYS[c.verdict])
            if c.executions == 0:
                verdict += m("why_raised")
            elif c.needed and c.reused_by:
                verdict += m("why_walked", by=reused_by(c.reused_by, lang))
                if c.executions > 1:
                    verdict += m("why_walked_runs", reused=c.reused_executions, runs=c.executions)
            elif c.verdict == _verdicts.COULD_NOT_TELL and c.unseen_reads:
                verdict += m("why_unseen", reads=", ".join(c.unseen_reads[:3]))
                if len(c.unseen_reads) > 3:
                    verdict += m("why_unseen_more", more=len(c.unseen_reads) - 3)
            elif c.verdict == _verdicts.COULD_NOT_TELL and c.unproven:
                verdict += m("why_unproven", reason=c.unproven)
            elif c.verdict == _verdicts.COULD_NOT_TELL and c.running_children:
                verdict += m("why_child", pids=", ".join(map(str, c.running_children)))
            elif c.verdict == _verdicts.COULD_NOT_TELL and c.partly_run:
                verdict += m("why_part")
            elif c.verdict == _verdicts.COULD_NOT_TELL and c.compiled:
                verdict += m("why_compiled")
            elif c.verdict == _verdicts.COULD_NOT_TELL and c.passed_through:
                observed = getattr(c, "_observed", False)
                verdict += m("why_watched" if observed == "watched" else
                             "why_observed" if observed else
                             "why_generated" if getattr(c, "_unread", False) == "generated"
                             else "why_unread" if getattr(c, "_unread", False) else "why_passed")
            elif c.verdict == _verdicts.COULD_NOT_TELL and not c.unseen_calls:
                verdict += m("why_held" if getattr(c, "_held_in_loop", False) else "why_once")
            elif c.verdict == _verdicts.COULD_NOT_TELL:
                verdict += m("why_untaken", calls=", ".join(c.unseen_calls[:3]))
                if len(c.unseen_calls) > 3:
                    verdict += m("why_unseen_more", more=len(c.unseen_calls) - 3)
            elif not c.needed:
                # The verdict covers only the paths this run took (issue 27 F3).
                verdict += m("why_not_walked")
            lines.append(m("verdict", verdict=verdict))
            if c.executions > 1:
                lines.append(m("kept_runs", size=human(c.retained_bytes, lang),
                                    peak=human(c.peak_bytes, lang)))
            else:
                lines.append(m("kept", size=human(c.retained_bytes, lang)))
            lines.append(m("suggest", text=_suggest.suggestion(c, lang)))
            lines.append("")
        lines.append(m("total", size=human(self.total_retained_bytes, lang)))
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.format()
