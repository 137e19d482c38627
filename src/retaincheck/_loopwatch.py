"""Whether a site's innermost loop ran it in two iterations of one run of that loop.

A site in a loop that walked a graph made before the loop (features computed once, then
`for i in range(inner): head(feats).sum().backward(retain_graph=True)`) walks it again with a
second iteration. A run whose loop made one iteration each time it started (`--inner 1`, one
batch per epoch) shows no second walk, whatever the program keeps: the audit cannot tell
from that run. Reading the code for what the loop keeps (``_audit._loops_over_a_graph``)
misses holders the program may hide anywhere (review rounds rev52-rev57 found one each
time), so a site in a loop counts as told only where this watch saw the loop run it in two
iterations of one run of the loop; otherwise it is "could not tell: kept".

How it watches, and why by a trace function: Python shows no iteration count of a running loop
(before 3.12, ``sys.monitoring`` does not exist, and a running frame's value stack, where a
``for`` loop's iterator lives, is not visible to ``gc.get_referents``). After the site runs,
the frame that runs the loop gets a local trace function (``frame.f_trace``) that sees its line
events only: a line of the loop's head (``for ...:`` on a jump back, ``while``'s test) and the
site running again the same way (the same stack shape, that frame on it), with no line outside
the loop and no return or yield in between, is a second iteration of the same run of the loop
(a proof, and the watch ends). A line outside the loop or the frame's return ends the watch
unproven: the loop has ended. ``sys.settrace`` must be set for a frame's ``f_trace`` to be
called (CPython ``sysmodule.c``, ``trace_trampoline``); its function here returns None, so no
other frame is traced, but every Python call costs one call of it while a watch is open, at
most until the site runs again or the loop ends (1.2x on an eight-layer MLP's Adam step,
measured once by hand on 2026-12-06; the benchmarks' per-class loop, with and without the
watch: the same).

Not watched (then the site stays "could not tell" when it is in a loop): a program with its
own trace function (a debugger, coverage.py's tracer: ``sys.gettrace()`` set), a thread
other than the main one, a frame whose code reads its own locals (as a precaution: before
Python 3.13, once a frame's locals dict was read, ``call_trampoline`` in CPython's
``Python/sysmodule.c`` copies the variables into the dict around the next trace call; seen
here as the dict refilled, ``_hooks._settled``), a
comprehension with two ``for``s, from Python 3.12 a list, set or dict comprehension
(inlined in its function's frame: ``_reads.loop_lines``), and a loop with no frame the watch
can see on the way (``map``, ``functools.reduce``, torch's ``tree_map``: ``_hooks.Session.
hidden_loop``). A generator's or coroutine's loop is told only where it ran the site twice
between its yields: a yield (an ``await`` that suspends) ends the watch, as the code that
resumes it runs meanwhile (rev60a A1).
"""

from __future__ import annotations

import sys
import threading

_OPEN: dict[int, tuple] = {}
"""id(frame) -> (frame, [watch, ...]) for the frames with a watch open."""

_BUDGET = 64
"""Heads of the loop a watch waits through for the site to run again (a site that runs
every hundredth step): after that it ends unproven, and the next run of the site starts
another. Each way to a site (its stack shape) gets at most ``TRIES`` watches."""
TRIES = 3


class Watch:
    __slots__ = ("frame", "head", "span", "heads", "ended")

    def __init__(self, frame, head: frozenset, span: frozenset):
        self.frame, self.head, self.span = frame, head, span
        self.heads = 0
        self.ended = False


def calls(frame, event, arg):
    """The thread's trace function while a watch is open: traces no frame it is called for
    (``frame.f_trace`` of the watched frames was set directly). Code of the program's that
    names a frame's trace attributes (``f_trace``, ``f_trace_lines``, ``f_trace_opcodes``)
    may turn a watched frame's line events off and on again, and the watch would miss the
    line that ended its loop's run (rev73a A1: a helper that sets its caller's
    ``f_trace_lines``): when such code starts, every watch ends unproven."""
    if event == "call" and _touches_tracing(frame.f_code):
        close_all()
        return None
    for watched, _ in list(_OPEN.values()):
        # (and at every call, each watched frame's line events still on: a helper that turns
        # its caller's off through a name built at run time, setattr(frame, "_".join(...)),
        # rev74b A1, is seen at the next call, its own included)
        if not watched.f_trace_lines or watched.f_trace is not _lines:
            _close_frame(watched)
    return None


_TRACE_NAMES = frozenset({"f_trace", "f_trace_lines", "f_trace_opcodes"})
_TOUCHES: dict = {}  # id(code) -> (code, whether it names them); this package's: never
_OWN: list = []  # {id(code): code} of this package's code, once


def _touches_tracing(code) -> bool:
    known = _TOUCHES.get(id(code))
    if known is None or known[0] is not code:
        if not _OWN:
            from ._hooks import _machinery_codes

            _OWN.append(_machinery_codes())
        names, consts = set(code.co_names), list(code.co_consts)
        while consts:  # (strings among its constants, in tuples and frozensets too)
            const = consts.pop()
            if type(const) is str:
                names.add(const)
            elif type(const) in (tuple, frozenset):
                consts.extend(const)
        known = _TOUCHES[id(code)] = (code, bool(names & _TRACE_NAMES) and (
            _OWN[0].get(id(code)) is not code))
    return known[1]


_GETTRACE = sys.gettrace
_SETTRACE = sys.settrace


def _gettrace():
    """``sys.gettrace`` while a watch is open: the program's trace function, None for the
    watch's own (a program that asks, `if sys.gettrace() is None:`, takes the path it takes
    unaudited, rev58a A2; the proof's rerun hides its own the same way)."""
    tracer = _GETTRACE()
    return None if tracer is calls else tracer


def tracing_ours() -> bool:
    return _GETTRACE() is calls


def _stop_tracing() -> None:
    if tracing_ours():
        _SETTRACE(None)
    if sys.gettrace is _gettrace:
        sys.gettrace = _GETTRACE


def _lines(frame, event, arg):
    """A watched frame's local trace function. Never raises (an error here would turn tracing
    off for the thread, CPython ``trace_trampoline``), never writes the frame's locals."""
    entry = _OPEN.get(id(frame))
    if entry is None or entry[0] is not frame:
        return None
    if event == "line":
        line = frame.f_lineno
        for watch in entry[1]:
            if line in watch.head:
                watch.heads += 1
                if watch.heads > _BUDGET:
                    watch.ended = True
            elif line not in watch.span:
                watch.ended = True
    elif event == "return":
        # (a return, or a generator's or coroutine's yield: what resumes it runs meanwhile,
        # and may send in the graph a later iteration walks, made anew or not, rev60a A1)
        for watch in entry[1]:
            watch.ended = True
    for watch in [w for w in entry[1] if w.ended]:
        entry[1].remove(watch)
        watch.frame = None
    if not entry[1]:
        _close_frame(frame)
        return None
    return _lines


def _close_frame(frame) -> None:
    entry = _OPEN.pop(id(frame), None)
    if entry is not None:
        for watch in entry[1]:
            watch.ended = True
            watch.frame = None  # (holds no frame once it ends: its locals live no longer)
        if frame.f_trace is _lines:
            frame.f_trace = None
    if not _OPEN:
        _stop_tracing()


def close_all() -> None:
    """End every watch (the audit's end; a forked child)."""
    for frame, _ in list(_OPEN.values()):
        _close_frame(frame)
    _stop_tracing()


def open_watch(frame, head: frozenset, span: frozenset) -> Watch | None:
    """Start watching ``frame``'s loop (``head``: its head's lines, ``span``: head and body);
    None where it cannot be watched (see the module's docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    tracer = _GETTRACE()
    if tracer is not None and tracer is not calls:
        return None
    if tracer is None and _OPEN:
        # (the program turned tracing off while watches were open: restoring a trace
        # function it read while one was open, which reads None, rev72b A1; they may have
        # missed the line that ended their loops' runs, and this watch turns it on again)
        close_all()
    if frame.f_trace is not None and frame.f_trace is not _lines:
        return None
    watch = Watch(frame, head, span)
    entry = _OPEN.get(id(frame))
    if entry is None or entry[0] is not frame:
        _OPEN[id(frame)] = (frame, [watch])
    else:
        entry[1].append(watch)
    frame.f_trace_lines = True
    frame.f_trace = _lines
    if tracer is None:
        _SETTRACE(calls)
        if sys.gettrace is _GETTRACE:
            sys.gettrace = _gettrace
    return watch


def proven(watch: Watch, frames) -> bool:
    """Whether the site, running now on the stack shape ``watch`` was opened for (every frame
    at the same instruction: the caller finds the watch by it) with ``frames`` on its stack,
    runs in a later iteration of the run of the loop it saw it in: the watched frame itself
    on the stack (not another generator of the same code), still running that loop (no line
    outside it, no return), and a line of its head since. Ends the watch when it proves it."""
    frame = watch.frame
    if frame is not None and not (
            _GETTRACE() is calls and frame.f_trace is _lines and frame.f_trace_lines):
        # (the program set a trace function of its own, or the frame's, meanwhile: the watch
        # may have missed the line that ended the loop's run)
        watch.ended = True
    if watch.ended or frame is None or watch.heads == 0 or not any(
            f is frame for f in frames):
        return False
    entry = _OPEN.get(id(frame))
    if entry is not None:
        entry[1].remove(watch)
        if not entry[1]:
            _close_frame(frame)
    watch.ended = True
    watch.frame = None
    return True
