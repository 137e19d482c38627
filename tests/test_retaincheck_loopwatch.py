"""The loop watch (retaincheck/_loopwatch.py): a site in a loop is told only where the audit
saw its innermost loop run it in two iterations of one run of that loop.

Each case states its truth by running the other path: ``TAKEN = True`` gives the inner loop a
second iteration; with the flag removed that run raises where the flag is needed. Review rounds
rev52-rev57 found, each time, a holder of a graph made before the loop that reading the code
missed (rev57a M3, rev53a M7, rev54a N9 were still open): with the watch each is "could not
tell: kept" whatever holds the graph, and each test below was seen to fail with the rule it
guards broken (the notes on each say which).
"""

from __future__ import annotations

import sys

import pytest
import torch
from test_retaincheck_real_code import NOT_NEEDED, same
from test_retaincheck_real_code import run as run_fixture
from test_retaincheck_truth import COULD_NOT_TELL, _kept_for_a_path_not_taken

import retaincheck

HEAD = "import torch\n\nTAKEN = False\nw = torch.ones(3, requires_grad=True)\n"

# Graphs made before the inner loop, held where reading the code did not look
HIDDEN = {
    # rev57a M3: rebound by a with statement's target
    "with_target": ("import contextlib\n\nfor epoch in range(2):\n"
                    "    feats = torch.tanh(w * (epoch + 1))\n"
                    "    for _ in range(2 if TAKEN else 1):\n"
                    "        with contextlib.nullcontext(feats) as feats:\n"
                    "            (feats * 2).sum().backward(retain_graph=True)\n"),
    # rev53a M7: a forward pre-hook's default argument
    "pre_hook_default": ("m = torch.nn.Identity()\nfor epoch in range(2):\n"
                         "    feats = torch.tanh(w * (epoch + 1))\n"
                         "    h = m.register_forward_pre_hook(lambda mod, inp, f=feats: (f,))\n"
                         "    del feats\n"
                         "    for _ in range(2 if TAKEN else 1):\n"
                         "        (m(torch.ones(3)) * 2).sum().backward(retain_graph=True)\n"
                         "    h.remove()\n"),
    # rev54a N9: an optimizer's state, the loop calling opt.step()
    "optimizer_state": ("opt = torch.optim.SGD([w], lr=0.0)\nfor epoch in range(2):\n"
                        "    opt.state['feats'] = torch.tanh(w * (epoch + 1))\n"
                        "    for _ in range(2 if TAKEN else 1):\n"
                        "        (opt.state['feats'] * 2).sum().backward(retain_graph=True)\n"
                        "        opt.step()\n"),
    # the site in a while loop's test, which runs in each iteration (the same holder)
    "while_test": ("m = torch.nn.Identity()\nfor epoch in range(2):\n"
                   "    feats = torch.tanh(w * (epoch + 1))\n"
                   "    h = m.register_forward_pre_hook(lambda mod, inp, f=feats: (f,))\n"
                   "    del feats\n    i = 0\n    while i < (2 if TAKEN else 1) and (\n"
                   "            m(torch.ones(3)) * 2).sum().backward(retain_graph=True) is None:\n"
                   "        i += 1\n    h.remove()\n"),
    # two runs of the site in one iteration (a helper called twice) are not two iterations
    "twice_in_one_iteration": ("def step(f):\n    (f * 2).sum().backward(retain_graph=True)\n"
                               "\n\ndef main():\n    for epoch in range(2):\n"
                               "        a = torch.tanh(w * (epoch + 1))\n"
                               "        b = torch.tanh(w * (epoch + 3))\n"
                               "        for _ in range(2 if TAKEN else 1):\n"
                               "            step(a)\n            step(b)\n\n\nmain()\n"),
}


@pytest.mark.parametrize("form", sorted(HIDDEN))
def test_a_loop_that_ran_once_per_run_keeps_the_site_whatever_holds_the_graph(tmp_path,
                                                                             form):
    """Kept by the watch: with its proof forced (every site taken as seen in two
    iterations), "with_target", "pre_hook_default" and "while_test" were "not needed" and
    the test failed (reading the code keeps the other two as well); with a while loop's test
    taken for its head only (not run by its iterations: the epoch loop was watched),
    "while_test" failed; with head lines not required, "twice_in_one_iteration" failed; with
    a line outside the loop not ending the watch (the next epoch's run of the loop then
    looked like an iteration), all five failed."""
    source = HEAD + HIDDEN[form] + "result = [w.grad]\n"
    site, report = _kept_for_a_path_not_taken(tmp_path / "train.py", source,
                                              source.replace("TAKEN = False", "TAKEN = True"))
    assert site.ran_once_in_a_loop and not getattr(site, "loop_iterated", False), (
        report.format())


# Loops that make their graph each iteration, run with two iterations: told "not needed"
SEEN_TWICE = {
    "one_line": "for i in range(2): (w * i).pow(2).sum().backward(retain_graph=True)\n",
    "while": ("def main():\n    for epoch in range(2):\n        i = 0\n        while i < 2:\n"
              "            (w * i).pow(2).sum().backward(retain_graph=True)\n"
              "            i += 1\n\n\nmain()\n"),
    "nested_in_a_caller": ("def step(i):\n    (w * i).pow(2).sum().backward(retain_graph=True)"
                           "\n\n\nfor epoch in range(2):\n    for i in range(2):\n"
                           "        step(i)\n"),
    "generator": ("def fit():\n    for i in range(2):\n"
                  "        (w * i).pow(2).sum().backward(retain_graph=True)\n"
                  "        yield i\n\n\nfor epoch in range(2):\n    for _ in fit():\n"
                  "        pass\n"),
    "comprehension": ("def step(i):\n    (w * i).pow(2).sum().backward(retain_graph=True)\n"
                      "    return i\n\n\nfor epoch in range(2):\n"
                      "    done = [step(i) for i in range(2)]\n"),
}


@pytest.mark.parametrize("form", sorted(SEEN_TWICE))
def test_a_loop_seen_to_run_the_site_twice_tells_it(tmp_path, form):
    """The watch's proof, for each shape of loop it watches: the truth (the flag removed, the
    run is the same) and "not needed". With the watch never opened (open_watch returning
    None) each of these was "could not tell: kept" and the test failed."""
    source = HEAD + SEEN_TWICE[form] + "result = [w.grad]\n"
    path = tmp_path / "train.py"
    path.write_text(source)
    outcome, report = run_fixture(path, source, audited=True)
    without, _ = run_fixture(path, source.replace("retain_graph=True", "retain_graph=False"))
    assert same(without, outcome)  # the truth: the flag changes nothing
    (site,) = report.calls
    assert site.verdict == NOT_NEEDED and site.loop_iterated, report.format()


def test_the_same_fresh_loop_run_once_per_run_is_kept_and_says_how_to_tell(tmp_path):
    """The price: a graph made in each iteration, but one iteration per run of the loop
    (``--inner 1``): kept, with the way to tell it (run the loop twice)."""
    source = HEAD + SEEN_TWICE["nested_in_a_caller"].replace("range(2):\n        step",
                                                             "range(1):\n        step")
    path = tmp_path / "train.py"
    path.write_text(source + "result = [w.grad]\n")
    _, report = run_fixture(path, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site.ran_once_in_a_loop, report.format()
    assert "loop runs at least twice" in report.format()


def _inner(n: int, seen: list):
    w = torch.ones(3, requires_grad=True)
    for epoch in range(2):
        for i in range(n):
            (w * (i + epoch)).pow(2).sum().backward(retain_graph=True)
        seen.append(sys.gettrace())


def test_the_watch_ends_with_its_loop_and_leaves_no_trace_function():
    """The trace function is on only while a watch is open: off once the loop ends (a line
    outside it), proven or not, and after the audit. With _close_frame not turning it off,
    the program saw the audit's trace function after the loop and the test failed."""
    for n in (1, 2):
        seen = []
        with retaincheck.audit() as report:
            _inner(n, seen)
        assert seen == [None, None] and sys.gettrace() is None, (n, seen)
        (site,) = report.calls
        assert site.ran_once_in_a_loop == (n == 1), report.format()


def test_a_program_with_its_own_trace_function_keeps_it_and_the_site_is_kept():
    """A program's trace function (a debugger's) is left as it is: no watch, so a site in a
    loop is "could not tell: kept" even where the loop ran twice. With the check of
    sys.gettrace() removed from open_watch, the audit replaced the program's function and
    the test failed."""
    events = []

    def tracer(frame, event, arg):
        events.append(event)

    seen = []
    sys.settrace(tracer)
    try:
        with retaincheck.audit() as report:
            _inner(2, seen)
        assert sys.gettrace() is tracer and seen == [tracer, tracer]
    finally:
        sys.settrace(None)
    assert events  # (it ran)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and not getattr(site, "loop_iterated", False), (
        report.format())


def test_a_loop_compiled_from_another_text_under_the_files_name_is_not_watched(tmp_path):
    """The loop is read from the file; code compiled under the file's name from another text
    (here the same step function, another loop around its call) is not what the file says.
    With ran_as_written's check removed, the file's loop (lines 12-17) was watched over the
    code's epoch loop, the site was "not needed", and the test failed."""
    common = HEAD + ("m = torch.nn.Identity()\n\n\ndef step():\n"
                     "    (m(torch.ones(3)) * 2).sum().backward(retain_graph=True)\n\n\n")
    ran = common + ("for epoch in range(2):\n    feats = torch.tanh(w * (epoch + 1))\n"
                    "    h = m.register_forward_pre_hook(lambda mod, inp, f=feats: (f,))\n"
                    "    del feats\n    for i in range(2 if TAKEN else 1): step()\n"
                    "    h.remove()\nresult = [w.grad]\n")
    on_disk = common + ("for k in range(3):\n    a = 1\n    b = 2\n    c = 3\n    step()\n"
                        "    d = 4\nresult = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(on_disk)
    _, report = run_fixture(path, ran, audited=True)
    taken = ran.replace("TAKEN = False", "TAKEN = True")
    broken, _ = run_fixture(path, taken.replace("retain_graph=True", "retain_graph=False"))
    assert isinstance(run_fixture(path, taken)[0], list) and isinstance(broken, RuntimeError)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL, report.format()
