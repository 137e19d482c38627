"""One line per call site saying what to do, fitted to how its graph was reused."""

from __future__ import annotations

from . import _verdicts as v
from ._messages import message, reused_by

# Notes the audit leaves on a record (CallRecord.notes) about its reuses:
OTHER_BACKWARD = "reused by another backward() line"
OTHER_GRAD = "reused by another grad() line"
SELF = "reused by a later run of the same line"
UNSEEN = "reused by a call the audit could not name"
STEP_BETWEEN = "an optimizer step ran between the retaining run and the reuse"
GRAD_BETWEEN = "the code between the retaining run and the reuse reads, zeroes or steps a gradient"
LEAK_ACROSS_STEP = "a later run of the same line walked a graph built before an optimizer step"
ROWS = "the reusing runs had the same outputs and inputs and their own grad_outputs"
SAME_OUTPUTS = "the reusing runs had the same outputs and other inputs"
GIVEN_GRADIENT = "the retaining backward() was given its own gradient"
NOT_ROWS = "a reusing run of the same grad() line had other outputs, inputs or no grad_outputs"


def suggestion(record, lang: str = "en") -> str:
    """One line saying what to do about ``record``, in ``lang`` (``"en"`` or ``"zh"``)."""
    key, values = _suggestion_key(record)
    if key == "s_walked_by":
        values = {"by": reused_by(record.reused_by, lang)}
    return message(key, lang, **values)


def _suggestion_key(record) -> tuple[str, dict]:
    """The message id of the suggestion (see ``_messages``) and its values."""
    verdict = v.verdict(record)
    notes = record.notes
    if verdict == v.DID_NOT_COMPLETE:
        return "s_did_not_complete", {}
    if verdict == v.LEAK:
        return "s_leak", {}
    if verdict == v.COULD_NOT_TELL and record.unseen_reads:
        return "s_could_not_tell", {"read": record.unseen_reads[0]}
    if verdict == v.COULD_NOT_TELL and record.unproven:
        return "s_unproven", {}
    if verdict == v.COULD_NOT_TELL and record.running_children:
        return "s_child", {}
    if verdict == v.COULD_NOT_TELL and record.partly_run:
        return "s_part", {}
    if verdict == v.COULD_NOT_TELL and record.compiled:
        return "s_compiled", {}
    if verdict == v.COULD_NOT_TELL and record.passed_through:
        if getattr(record, "_observed", False):
            return ("s_watched" if record._observed == "watched" else "s_observed"), {}
        unread = getattr(record, "_unread", False)
        return ("s_generated" if unread == "generated" else "s_unread" if unread
                else "s_passed"), {}
    if verdict == v.COULD_NOT_TELL and not record.unseen_calls:
        return ("s_held" if getattr(record, "_held_in_loop", False) else "s_once"), {}
    if verdict == v.COULD_NOT_TELL:
        return "s_untaken", {"call": record.unseen_calls[0]}
    if verdict == v.NOT_NEEDED_SO_FAR:
        return "s_so_far", {}
    if verdict == v.NOT_NEEDED:
        return ("s_not_needed_create" if record.create_graph else "s_not_needed"), {}
    # needed
    if record.create_graph:
        return "s_create", {}
    if record.kind == "backward" and notes & {OTHER_BACKWARD, SELF} and not notes & {
        OTHER_GRAD, UNSEEN
    }:
        # Only backward() calls walked it again: the losses could be one sum, unless the
        # gradients are used in between.
        if SELF in notes and GIVEN_GRADIENT in notes and OTHER_BACKWARD not in notes:
            # backward(gradient=row) repeated on one output: one gradient per class (Grad-CAM
            # for the top k classes), read in between, never a sum.
            return "s_rows_backward", {}
        if STEP_BETWEEN in notes:
            return "s_step_between", {}
        if GRAD_BETWEEN in notes:
            return "s_grad_between", {}
        if SELF in notes:
            # Later runs of this line walked it: several losses of one forward pass (loss
            # modules, one loss per layer), or state carried across iterations that the
            # audit could not yet tell apart (a run that stopped after two iterations).
            return "s_self_backward", {}
        return "s_sum", {}
    if SELF in notes and not notes & {OTHER_BACKWARD, OTHER_GRAD, UNSEEN}:
        if record.kind == "grad" and NOT_ROWS not in notes:
            if ROWS in notes and SAME_OUTPUTS not in notes:
                return "s_batched", {}
            if SAME_OUTPUTS in notes and ROWS not in notes:
                return "s_all_inputs", {}
        return "s_self_grad", {}
    return "s_walked_by", {"by": ", ".join(record.reused_by)}
