"""One line per call site saying what to do, fitted to how its graph was reused."""

from __future__ import annotations

from . import _verdicts as v

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


def suggestion(record) -> str:
    verdict = v.verdict(record)
    notes = record.notes
    if verdict == v.DID_NOT_COMPLETE:
        return (
            "the call raised before it returned, so nothing can be said about it: fix that "
            "error, then run retaincheck again"
        )
    if verdict == v.LEAK:
        return (
            "detach the hidden state (or running value) you carry into the next iteration, "
            "e.g. h = h.detach(), then remove retain_graph=True"
        )
    if verdict == v.COULD_NOT_TELL:
        return (
            "keep it: the program reads saved tensors (grad_fn._saved_*, ctx.saved_tensors) "
            f"at {record.unseen_reads[0]}, which the audit cannot tie to a graph; without "
            "the flag that read raises once backward() has freed them"
        )
    if verdict == v.NOT_NEEDED_SO_FAR:
        return (
            "nothing reused this graph before the run stopped: run the script to completion "
            "and check again before removing retain_graph=True"
        )
    if verdict == v.NOT_NEEDED:
        if record.create_graph:
            return (
                "nothing walked this graph again; create_graph=True retains it anyway, so "
                "pass retain_graph=False to free it"
            )
        return "remove retain_graph=True: nothing walked this graph again"
    # needed
    if record.create_graph:
        return (
            "keep it (create_graph=True already implies retain_graph=True, so the flag "
            "itself can go)"
        )
    if record.kind == "backward" and notes & {OTHER_BACKWARD, SELF} and not notes & {
        OTHER_GRAD, UNSEEN
    }:
        # Only backward() calls walked it again: the losses could be one sum, unless the
        # gradients are used in between.
        if SELF in notes and GIVEN_GRADIENT in notes and OTHER_BACKWARD not in notes:
            # backward(gradient=row) repeated on one output: one gradient per class (Grad-CAM
            # for the top k classes), read in between, never a sum.
            return (
                "keep it: each run sends its own gradient back through the same output (one "
                "per class or row); if every gradient is known before the first run, "
                "torch.autograd.grad(out, inputs, grad_outputs=rows, is_grads_batched=True) "
                "computes them all in one call"
            )
        if STEP_BETWEEN in notes:
            return (
                "keep it: an optimizer step ran between this backward() and the one that "
                "reused the graph (as in a GAN's D and G updates), so the losses cannot "
                "simply be summed. A check only you can make: if the first loss must not "
                "train the shared part, it may see a detached copy (e.g. D(fake.detach())) "
                "and the flag can go; if its gradient must reach that part, keep both"
            )
        if GRAD_BETWEEN in notes:
            return (
                "keep it: the code between this backward() and the one that reuses its graph "
                "reads, zeroes or steps with a gradient (.grad, zero_grad(), step()), so the "
                "losses cannot be summed into one backward()"
            )
        if SELF in notes:
            # Later runs of this line walked it: several losses of one forward pass (loss
            # modules, one loss per layer), or state carried across iterations that the
            # audit could not yet tell apart (a run that stopped after two iterations).
            return (
                "keep it if these backward() calls reuse one forward pass on purpose: if the "
                "gradients are only added (no zero_grad(), optimizer step or gradient read in "
                "between), sum the losses and call backward() once; if instead a hidden state "
                "or running total is carried into the next iteration and its gradient need "
                "not flow back into earlier iterations (a check only you can make), detach "
                "it (h = h.detach()) and drop the flag"
            )
        return (
            "keep it, or, if the gradients are only added (no zero_grad(), optimizer step or "
            "gradient read between the backward() calls), sum the losses and call "
            "backward() once"
        )
    if SELF in notes and not notes & {OTHER_BACKWARD, OTHER_GRAD, UNSEEN}:
        if record.kind == "grad" and NOT_ROWS not in notes:
            if ROWS in notes and SAME_OUTPUTS not in notes:
                return (
                    "keep it, or, if every grad_outputs is known before the first call (rows "
                    "of one Jacobian, not a power iteration), compute them in one call with "
                    "is_grads_batched=True"
                )
            if SAME_OUTPUTS in notes and ROWS not in notes:
                return (
                    "keep it, or take the gradients with respect to all the inputs in one "
                    "call: torch.autograd.grad(outputs, [input_1, input_2, ...])"
                )
        return "keep it: later runs of this grad() line take gradients through the same graph"
    return "keep it: this graph is walked again by " + ", ".join(record.reused_by)
