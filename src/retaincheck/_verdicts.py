"""The verdict of a call site, from what the audit saw.

* **needed**: a later pass (another call, a later run of the same line, or a call made while
  this one was still running) executed a node that a run of this line had executed, that
  still held defined saved tensors. With ``retain_graph=False`` that run would have freed them
  (``torch/csrc/autograd/engine.cpp``, ``Engine::evaluate_function``: after
  ``call_function``, ``fn.release_variables()`` unless ``keep_graph_``), and the later pass
  would have raised in ``SavedVariable::unpack`` (``torch/csrc/autograd/saved_variable.cpp``).
  Only nodes the call itself executed count: ``autograd.grad`` with ``inputs`` runs only the
  nodes between its outputs and its inputs (``GraphTask::init_to_execute`` fills
  ``exec_info_``; ``Engine::evaluate_function`` skips a node whose ``needed_`` is false), so
  the graph behind non-leaf inputs is never freed by it.
* **needed only because history leaks**: a later run of the same line reused nodes built in
  two different iterations (before and after an earlier run of the line): a hidden state or
  running value carried across iterations without ``detach()``.
* **could not tell: kept**: no later pass reused it, but the program reads saved tensors
  outside a backward pass (``grad_fn._saved_result``, ``ctx.saved_tensors``; see ``_reads``),
  where the audit cannot see which graph is read, or a ``backward()``/``grad()`` call that could
  run after the site did not run after the site's first run (a branch this run did not take), or a
  child process forked during the run was still running at its end, or it walked a backward that
  torch.compile (AOTAutograd) compiles at its first run, reading that run's retain_graph, or
  the flag reached it through ``**kwargs`` from a line elsewhere, or a later pass ran part
  of its graph that its ``inputs`` left out: keep the flag.
* **not needed**: nothing reused it, and the audited run completed.
* **not needed so far (run stopped early)**: nothing reused it, but the run stopped early
  (an exception, ``KeyboardInterrupt``, ``SystemExit`` with a non-zero code), so a reuse
  that would have come later was never seen.
* **did not complete**: every run of the line raised before it returned.
"""

from __future__ import annotations

NEEDED = "needed"
LEAK = "needed only because history leaks"
COULD_NOT_TELL = "could not tell: kept"
NOT_NEEDED = "not needed"
NOT_NEEDED_SO_FAR = "not needed so far (run stopped early)"
DID_NOT_COMPLETE = "did not complete"


def verdict(record) -> str:
    if record.executions == 0:
        return DID_NOT_COMPLETE
    if record.history_leak:
        return LEAK
    if record.needed:
        return NEEDED
    if (record.unseen_reads or getattr(record, "running_children", None)
            or getattr(record, "unproven", "") or getattr(record, "compiled", False)
            or getattr(record, "passed_through", False)
            or getattr(record, "partly_run", False)):
        return COULD_NOT_TELL
    if not record.run_completed:
        return NOT_NEEDED_SO_FAR
    return COULD_NOT_TELL if getattr(record, "unseen_calls", None) or getattr(
        record, "ran_once_in_a_loop", False) else NOT_NEEDED


def stopped_by(exc_type, exc) -> str | None:
    """None when leaving a block this way counts as completing it, else a one-line reason."""
    if exc_type is None:
        return None
    if issubclass(exc_type, SystemExit):
        code = getattr(exc, "code", None)
        if code is None or code == 0:
            return None
        return f"SystemExit({code!r})"
    text = str(exc).strip() if exc is not None else ""
    message = text.splitlines()[0].strip() if text else ""
    if len(message) > 120:
        message = message[:117] + "..."
    return f"{exc_type.__name__}: {message}" if message else exc_type.__name__
