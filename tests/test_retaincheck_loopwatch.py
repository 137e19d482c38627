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

import os
import sys
from pathlib import Path

import pytest
import torch
from test_retaincheck_real_code import NOT_NEEDED, same
from test_retaincheck_real_code import run as run_fixture
from test_retaincheck_truth import COULD_NOT_TELL, _kept_for_a_path_not_taken

import retaincheck
from retaincheck import _loopwatch

HEAD = "import torch\n\nTAKEN = False\nw = torch.ones(3, requires_grad=True)\n"


def _audited(tmp_path, source: str):
    """Write ``source`` as train.py and run it under the audit: (its sites, the report)."""
    path = tmp_path / "train.py"
    path.write_text(source)
    _, report = run_fixture(path, source, audited=True)
    return report.calls, report

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
    # rev58a A1: one site reached from two loops; the outer one's proof is not the inner's
    # (the graph six lists deep, past what the code reading follows)
    "two_loops": ("def step(loss):\n    loss.backward(retain_graph=True)\n\n\n"
                  "def train():\n    for i in range(2):\n"
                  "        step((w * 3).pow(2).sum())\n"
                  "        src = [[[[[[torch.tanh(w * (i + 1))]]]]]]\n"
                  "        for j in range(2 if TAKEN else 1):\n"
                  "            step((src[0][0][0][0][0][0] * 2).sum())\n\n\ntrain()\n"),
    # rev58b A2: the site also run from the loop's head (a generator's end-of-epoch check,
    # in its __next__) is another way to it, not a second iteration (the graph in the middle
    # of a 200-item list, past what the code reading follows)
    "head_path": ("def step(t):\n    t.sum().backward(retain_graph=True)\n\n\n"
                  "def batches(n):\n    for i in range(n):\n        yield i\n"
                  "    step(torch.ones(3, requires_grad=True).exp())\n\n\n"
                  "bank = [torch.zeros(3) for _ in range(200)]\nbank[100] = (w * 2).exp()\n"
                  "for i in batches(2 if TAKEN else 1):\n    step(bank[100])\n"),
    # rev59a A1: loops with no frame the watch can see: map() (in a loop and alone),
    # functools.reduce, torch's tree_map, a map object a deque consumes (the graph six lists
    # deep, past what the code reading follows)
    "map_alone": ("box = [[[[[[torch.tanh(w)]]]]]]\n\n\ndef step(i):\n"
                  "    (box[0][0][0][0][0][0] * (i + 1)).sum().backward(retain_graph=True)\n"
                  "\n\nlist(map(step, range(2 if TAKEN else 1)))\n"),
    "map_in_a_loop": ("box = [None]\n\n\ndef step(i):\n"
                      "    (box[0][0][0][0][0][0] * (i + 1)).sum().backward(retain_graph=True)\n"
                      "\n\nfor epoch in range(2):\n"
                      "    box[0] = [[[[[torch.tanh(w * (epoch + 1))]]]]]\n"
                      "    list(map(step, range(2 if TAKEN else 1)))\n"),
    "reduce": ("import functools\n\nbox = [[[[[[torch.tanh(w)]]]]]]\n\n\ndef step(i):\n"
               "    (box[0][0][0][0][0][0] * (i + 1)).sum().backward(retain_graph=True)\n"
               "\n\nfunctools.reduce(lambda acc, i: step(i), range(2 if TAKEN else 1), 0)\n"),
    "tree_map": ("from torch.utils import _pytree\n\nbox = [[[[[[torch.tanh(w)]]]]]]\n\n\n"
                 "def step(i):\n"
                 "    (box[0][0][0][0][0][0] * (i + 1)).sum().backward(retain_graph=True)\n"
                 "\n\n_pytree.tree_map(step, list(range(2 if TAKEN else 1)))\n"),
    "deque_consumed": ("import collections\n\nbox = [[[[[[torch.tanh(w)]]]]]]\n\n\n"
                       "def step(i):\n"
                       "    (box[0][0][0][0][0][0] * (i + 1)).sum().backward(retain_graph=True)\n"
                       "\n\nsteps = map(step, range(2 if TAKEN else 1))\n"
                       "collections.deque(steps, maxlen=0)\n"),
    # rev60a A1: a generator's loop, sent the graph each iteration by a loop outside it: a
    # yield ends the watch (what resumes it runs meanwhile)
    "generator_sent": ("import itertools\n\n\ndef steps():\n    for k in itertools.count():\n"
                       "        f = yield\n"
                       "        (f[0][0][0][0][0] * 2).sum().backward(retain_graph=True)\n\n\n"
                       "box = [None]\nt = steps()\nnext(t)\nfor epoch in range(2):\n"
                       "    box[0] = [[[[[torch.tanh(w * (epoch + 1))]]]]]\n"
                       "    for _ in range(2 if TAKEN else 1):\n        t.send(box[0])\n"),
    # rev60b A1: a flat loop whose iterations pick a graph made before it by the count (the
    # loop is seen twice, each run on another graph), and the same with a cache the loop
    # fills, one graph per epoch (behind a helper's helper, past what the code reading follows)
    "bank_by_index": ("INNER = 2 if TAKEN else 1\n_BANK = [torch.tanh(w * (e + 1)) for e in "
                      "range(2)]\n\n\ndef _pick(k):\n    return _BANK[k]\n\n\n"
                      "def features(k):\n    return _pick(k)\n\n\nfor i in range(2 * INNER):\n"
                      "    (features(i // INNER) * 2).sum().backward(retain_graph=True)\n"),
    # the same, each epoch's graph dropped after its last use (no older graph alive as a later
    # run runs, but one built before the earlier run is walked)
    "bank_dropped": ("INNER = 2 if TAKEN else 1\n"
                     "bank = [[[[[[torch.tanh(w * (e + 1)) for e in range(2)]]]]]]\n"
                     "for i in range(2 * INNER):\n    k = i // INNER\n"
                     "    (bank[0][0][0][0][0][k] * 2).sum().backward(retain_graph=True)\n"
                     "    if (i + 1) % INNER == 0:\n        bank[0][0][0][0][0][k] = None\n"),
    # rev61a A1: a one-entry cache behind a method, keyed by the count: it drops the old
    # graph before the next run, so only the code reading can keep the site
    "one_entry_cache": ("REUSE = 2 if TAKEN else 1\n\n\nclass Slot:\n"
                        "    def __init__(self):\n        self.d = {}\n\n"
                        "    def pick(self, key, fresh):\n        got = self.d.get(key, fresh)\n"
                        "        self.d = {key: got}\n        return got\n\n\n"
                        "slot = Slot()\nfor i in range(4):\n"
                        "    feats = slot.pick(i // REUSE, torch.tanh(w * (i + 1)))\n"
                        "    (feats * 2).sum().backward(retain_graph=True)\n"),
    # rev61b A1: a cache the loop's last iteration fills, read by the next step; the loop's
    # function has returned and the graph is alive at the end
    "cache_for_the_next_step": (
        "_CACHE = {}\n\n\ndef target(t):\n    if t == 0:\n"
        "        return (w.exp() * 3).sum()\n    if 'c' not in _CACHE:\n"
        "        _CACHE['c'] = (w * 2).exp().sum()\n    return _CACHE['c']\n\n\n"
        "def step():\n    for t in range(2):\n"
        "        target(t).backward(retain_graph=True)\n\n\n"
        "for s in range(2 if TAKEN else 1):\n    step()\n"),
    # rev63a A1: the inner loop inside another loop's else block (a warm-up loop's)
    "loop_in_an_else_block": ("for epoch in range(2):\n    for warm in range(2):\n"
                              "        pass\n    else:\n"
                              "        box = [[[[[[torch.tanh(w * (epoch + 1))]]]]]]\n"
                              "        for _ in range(2 if TAKEN else 1):\n"
                              "            (box[0][0][0][0][0][0] * 2).sum().backward(\n"
                              "                retain_graph=True)\n"),
    # rev65a A3 (and A1: runpy, importlib.reload): module code run again in a loop, here a
    # string's own loop exec'd in the epoch loop, walking a graph made before it
    "exec_string_loop": ("box = [None]\n\n\ndef step():\n"
                         "    (box[0][0][0][0][0][0] * 2).sum().backward(retain_graph=True)\n"
                         "\n\nfor epoch in range(2):\n"
                         "    box[0] = [[[[[torch.tanh(w * (epoch + 1))]]]]]\n"
                         "    exec('for j in range(n):\\n    step()\\n',\n"
                         "         {'step': step, 'n': 2 if TAKEN else 1})\n"),
    # rev70a A1: the loop in an exec'd string's own top-level code, calling the script's
    # function by name (no text to read for it: its code's jump back tells)
    "exec_string_top_loop": ("feats = torch.tanh(w)\n\n\ndef step():\n"
                             "    (feats * 2).sum().backward(retain_graph=True)\n\n\n"
                             "exec('for _ in range(n):\\n    step()\\n',\n"
                             "     {'step': step, 'n': 2 if TAKEN else 1})\n"),
    # rev71a A1: the same loop compiled under the name of a file on disk whose text has a
    # plain call at that place (its code's jump back tells, not the file)
    "loop_under_a_files_name": (
        "import os\n\nfeats = torch.tanh(w)\n\n\ndef step():\n"
        "    (feats * 2).sum().backward(retain_graph=True)\n\n\n"
        "helper = os.path.join(os.path.dirname(__file__), 'helper.py')\n"
        "with open(helper, 'w') as f:\n    f.write('def f():\\n    pass\\n    step()\\n')\n"
        "exec(compile('\\nfor _ in range(n):\\n    step()\\n', helper, 'exec'),\n"
        "     {'step': step, 'n': 2 if TAKEN else 1})\n"),
    # rev72a A1: a class's own __getattribute__ answers `t.step` with C code that runs the
    # method `accum` times (no frame, no jump back): the value read statically is the method
    "getattribute_repeat": (
        "import collections\nimport functools\nimport itertools\n\n\nclass Trainer:\n"
        "    def __init__(self, loss, accum):\n        self.loss, self.accum = loss, accum\n\n"
        "    def step(self):\n        self.loss.backward(retain_graph=True)\n\n"
        "    def __getattribute__(self, name):\n"
        "        value = object.__getattribute__(self, name)\n        if name == 'step':\n"
        "            times = itertools.repeat((), object.__getattribute__(self, 'accum'))\n"
        "            return functools.partial(collections.deque,\n"
        "                                     itertools.starmap(value, times), 0)\n"
        "        return value\n\n\n"
        "t = Trainer((w * w).sum(), 2 if TAKEN else 1)\nt.step()\n"),
    # rev73a A1: helpers that turn the loop frame's line events off at the end of the body
    # and on again in the head (the watch missed the line that ended the inner loop's run);
    # the graph six lists deep, past what the code reading follows
    "line_events_toggled": (
        "import sys\n\nbox = [None]\n\n\ndef quiet():\n"
        "    sys._getframe(1).f_trace_lines = False\n\n\ndef loud():\n"
        "    sys._getframe(1).f_trace_lines = True\n\n\ndef main():\n"
        "    for epoch in range(2):\n"
        "        box[0] = [[[[[torch.tanh(w * (epoch + 1))]]]]]\n"
        "        for i in (loud(),\n                  range(2 if TAKEN else 1))[1]:\n"
        "            (box[0][0][0][0][0][0] * 2).sum().backward(retain_graph=True)\n"
        "            quiet()\n\n\nmain()\n"),
    # rev66a A1: every other iteration walks a graph with no saved tensors (nothing new kept),
    # the others one made before the loop and held in a SimpleQueue (seen twice: 2 runs)
    "queue_every_other": ("import queue\n\nq = queue.SimpleQueue()\nq.put(torch.tanh(w))\n"
                          "for i in range(3 if TAKEN else 2):\n    if i % 2 == 0:\n"
                          "        h = q.get()\n        q.put(h)\n    else:\n"
                          "        h = w + 0.0\n"
                          "    h.sum().backward(retain_graph=True)\n"),
    "cache_filled_in_the_loop": (
        "INNER = 2 if TAKEN else 1\n_CACHE = {}\n\n\ndef _load(k):\n"
        "    if k not in _CACHE:\n        _CACHE[k] = torch.tanh(w * (k + 1))\n"
        "    return _CACHE[k]\n\n\ndef features(k):\n    return _load(k)\n\n\n"
        "for i in range(2 * INNER):\n"
        "    (features(i // INNER) * 2).sum().backward(retain_graph=True)\n"),
    # two runs on one way in one iteration (map() calls the helper twice from one line) are
    # not two iterations (the graphs six lists deep, past what the code reading follows)
    "map_in_one_iteration": ("def step(f):\n    (f * 2).sum().backward(retain_graph=True)\n"
                             "\n\ndef main():\n    for epoch in range(2):\n"
                             "        srcs = [[[[[[torch.tanh(w * (epoch + 1)),\n"
                             "                     torch.tanh(w * (epoch + 3))]]]]]]\n"
                             "        for _ in range(2 if TAKEN else 1):\n"
                             "            list(map(step, srcs[0][0][0][0][0]))\n\n\nmain()\n"),
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
    """Kept by the watch, each rule of it seen to matter (broken once, the test failed):
    with its proof forced (every way to a site taken as seen in two iterations), all but
    "optimizer_state" and "twice_in_one_iteration" (which reading the code keeps as well) were
    "not needed"; with a while loop's test taken for its head only (the epoch loop was then
    watched), "while_test" was; without a head line required, "map_in_one_iteration" was;
    with a line outside the loop not ending the watch (the next epoch's run of the loop then
    looked like an iteration), "pre_hook_default", "two_loops", "while_test", "with_target"
    and "map_in_one_iteration" were; with one proof per site (any loop's), "two_loops" was;
    with that and the watch of any way to the site taken for the way it runs now (the rule
    before rev58), "two_loops" and "head_path" were; with hidden_loop never finding one,
    "map_alone", "map_in_a_loop", "reduce", "tree_map" and "deque_consumed" were; with a
    generator's yield not ending the watch, "generator_sent" was; without the older-graph
    check (_hooks.Session.fired), "bank_dropped" was; without the outlived check
    (Session.measure), "cache_filled_in_the_loop" was; with a setter that reads the
    attribute before it sets it taken for one that sets it anew (_reads._read_before),
    "one_entry_cache" was; without the check of graphs alive after the loop's function
    returned (_audit._kept_past_its_function), "cache_for_the_next_step" was; with the search
    for the innermost loop not looking inside a loop whose else block holds the line,
    "loop_in_an_else_block" was; with the search stopping at the first module code on the
    way (not looking for a loop that runs it again), "exec_string_loop" was; with the
    outlived check skipped for a run that keeps nothing new, "queue_every_other" was; with
    a string's code read for loops only where it calls the next function other than by name
    (before rev70a A1), "exec_string_top_loop" was; with a frame's loops read from its file's
    text only (before rev71a A1), "loop_under_a_files_name" was; with an attribute read
    statically whatever its class's __getattribute__ (before rev72a A1), "getattribute_repeat"
    was. ("line_events_toggled" is kept by the older-graph check as well: its watch rule is
    test_code_that_toggles_a_frames_line_events_proves_no_loop's.)"""
    source = HEAD + HIDDEN[form] + "result = [w.grad]\n"
    site, report = _kept_for_a_path_not_taken(tmp_path / "train.py", source,
                                              source.replace("TAKEN = False", "TAKEN = True"))
    assert site.ran_once_in_a_loop, report.format()


# Loops that make their graph each iteration, run with two iterations: told "not needed"
SEEN_TWICE = {
    "one_line": "for i in range(2): (w * i).pow(2).sum().backward(retain_graph=True)\n",
    "while": ("def main():\n    for epoch in range(2):\n        i = 0\n        while i < 2:\n"
              "            (w * i).pow(2).sum().backward(retain_graph=True)\n"
              "            i += 1\n\n\nmain()\n"),
    "nested_in_a_caller": ("def step(i):\n    (w * i).pow(2).sum().backward(retain_graph=True)"
                           "\n\n\nfor epoch in range(2):\n    for i in range(2):\n"
                           "        step(i)\n"),
    # a generator's loop that runs the site twice between its yields
    "generator": ("def fit():\n    for epoch in range(2):\n        for i in range(2):\n"
                  "            (w * i).pow(2).sum().backward(retain_graph=True)\n"
                  "        yield epoch\n\n\nfor _ in fit():\n    pass\n"),
    # a torch module's forward called as another module's attribute (found in its _modules;
    # without that lookup the site was "could not tell: kept" and the test failed)
    "submodule_forward": ("class Penalty(torch.nn.Module):\n    def forward(self, i):\n"
                          "        (w * i).pow(2).sum().backward(retain_graph=True)\n"
                          "        return i\n\n\nclass Trainer(torch.nn.Module):\n"
                          "    def __init__(self):\n        super().__init__()\n"
                          "        self.penalty = Penalty()\n\n    def fit(self):\n"
                          "        for i in range(2):\n            self.penalty(i)\n\n\n"
                          "Trainer().fit()\n"),
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
    assert site.verdict == NOT_NEEDED and site._shapes_iterated, report.format()


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
            seen.append(sys.gettrace())  # (a watch is open here)
        seen.append(sys.gettrace())


def test_the_watch_ends_with_its_loop_and_leaves_no_trace_function():
    """The trace function is on only while a watch is open: off once the loop ends (a line
    outside it), proven or not, and after the audit; while it is on, the program's
    sys.gettrace() does not show it (rev58a A2). With _close_frame not turning it off, the
    program saw the audit's trace function after the loop, and without sys.gettrace hidden,
    right after the site: each failed."""
    for n in (1, 2):
        seen = []
        with retaincheck.audit() as report:
            _inner(n, seen)
        assert seen == [None] * (2 + 2 * n) and sys.gettrace() is None, (n, seen)
        assert sys.gettrace is _loopwatch._GETTRACE
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
        assert sys.gettrace() is tracer and seen == [tracer] * 6
    finally:
        sys.settrace(None)
    assert events  # (it ran)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and not getattr(site, "_shapes_iterated", None), (
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


def test_a_loop_seen_twice_that_holds_an_older_graph_says_so(tmp_path):
    """rev58b A3: the watch saw two iterations; the site is kept by the code reading (a
    generator, an iterator that may hold a graph made before the loop), and the reason says
    that, not "not seen running it twice"."""
    source = HEAD + ("def batches(n):\n    for i in range(n):\n"
                     "        yield torch.tanh(w * (i + 1))\n\n\n"
                     "for b in batches(2):\n    (b * 2).sum().backward(retain_graph=True)\n"
                     "result = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    _, report = run_fixture(path, audited=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and site._shapes_iterated, report.format()
    assert "the program holds a graph from before" in report.format()
    assert "not seen" not in report.format()


def test_a_trace_function_the_program_sets_while_a_loop_is_watched_ends_the_watch():
    """The program sets its own trace function and drops it again (here in the inner loop's
    iterator, as its run ends): the watch may have missed the line that ended the loop's run,
    so it proves nothing, and the program's function ran as set. Without the check in
    proven(), the next epoch's run looked like a second iteration ("not needed") and the
    test failed."""
    w = torch.ones(3, requires_grad=True)
    box = [[[[[[None]]]]]]  # (six lists deep: past what the code reading follows)
    events = []

    def tracer(frame, event, arg):
        events.append(event)

    class Once:
        def __init__(self):
            self.n = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            if self.n > 1:
                sys.settrace(tracer)
                sys.settrace(None)
                raise StopIteration
            return self.n

    with retaincheck.audit() as report:
        for epoch in range(2):
            box[0][0][0][0][0][0] = torch.tanh(w * (epoch + 1))
            for _ in Once():
                (box[0][0][0][0][0][0] * 2).sum().backward(retain_graph=True)
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL and not getattr(site, "_shapes_iterated", None), (
        report.format())
    assert sys.gettrace() is None


def test_two_loops_an_ast_transform_put_on_one_line_are_not_one(tmp_path):
    """rev64a A1: a runner wraps a file's one-line loop in an epoch loop by an AST transform,
    every new node on the loop's line: the watch tells iterations by lines, so the next
    epoch's run looked like a second iteration. The file's code has one jump back on that
    line, the code that ran two: not the code the file says, not watched. With the jumps
    compared as a set (one pair either way), the site was "not needed" and the test failed."""
    import ast

    head = ("import torch\nw = torch.ones(3, requires_grad=True)\nbox = [None]\n\n\n"
            "def step(i):\n    (box[0][0][0][0][0][0] * (i + 1)).sum().backward("
            "retain_graph=True)\n\n\n")
    path = tmp_path / "cell.py"
    path.write_text(head + "for i in range(INNER): step(i)\n")

    def run(inner: int, text: str, audited: bool):
        tree = ast.parse(text)
        loop = tree.body[-1]
        epoch = ast.parse("for epoch in range(2):\n"
                          "    box[0] = [[[[[torch.tanh(w * (epoch + 1))]]]]]\n").body[0]
        for node in ast.walk(epoch):  # (the new nodes only: the loop's own keep theirs)
            if hasattr(node, "lineno"):
                ast.copy_location(node, loop)
        epoch.body.append(loop)
        tree.body[-1] = epoch
        code = compile(ast.fix_missing_locations(tree), str(path), "exec")
        namespace = {"INNER": inner, "__name__": "__main__"}
        try:
            if audited:
                with retaincheck.audit() as report:
                    exec(code, namespace)
                return report
            exec(code, namespace)
        except RuntimeError as exc:
            return exc
        return None

    text = path.read_text()
    report = run(1, text, audited=True)
    assert run(2, text, audited=False) is None  # the truth: with the flag, two inner steps run
    without = text.replace("retain_graph=True", "retain_graph=False")
    assert isinstance(run(2, without, audited=False), RuntimeError)  # and without it, raise
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL, report.format()


@pytest.mark.parametrize("runner", ["map_run_path", "map_exec_file", "map_of_exec", "map_of_eval",
                                    "driver_named_frozen"])
def test_a_loop_with_no_frame_that_runs_module_code_again_keeps_the_site(tmp_path, runner):
    """A loop with no frame (``map``) over module code that a launcher runs again
    (``runpy.run_path``, ``exec`` of a file's code), each run walking a graph the launcher made
    before it: with one run in the audit, nothing shows the loop; with two, the second run
    walks the first's graph. The search for such loops (``Session.hidden_loop``) stopped at
    the first module code on the way, and the site was "not needed" (the first two forms
    failed so); then it passed over the frame that runs the module's code whatever that frame
    called, and ``list(map(exec, codes, spaces))`` (the built-in handed to ``map`` itself, no
    frame between) was "not needed" (rev68a A1: the map_of_* forms failed so); then it told
    the import system's frames by their file name, and a driver compiled under the name
    ``<frozen importlib._driver>`` was passed over (rev69a A1: "driver_named_frozen" failed
    so)."""
    exp = tmp_path / "exp.py"
    exp.write_text("def step():\n    (feats * 2).sum().backward(retain_graph=True)\n\n\n"
                   "step()\n")
    code = f"compile(open({str(exp)!r}).read(), {str(exp)!r}, 'exec')"
    loop = {"map_run_path": ("list(map(lambda _: runpy.run_path("
                             f"{str(exp)!r}, init_globals={{'feats': feats}}), range(n)))"),
            "map_exec_file": f"list(map(lambda _: exec({code}, {{'feats': feats}}), range(n)))",
            "map_of_exec": f"list(map(exec, [{code}] * n, [{{'feats': feats}}] * n))",
            "map_of_eval": f"list(map(eval, [{code}] * n, [{{'feats': feats}}] * n))",
            "driver_named_frozen": (
                "exec(compile('list(map(exec, [code] * n, [g] * n))', "
                "'<frozen importlib._driver>', 'exec'), "
                f"{{'code': {code}, 'g': {{'feats': feats}}, 'n': n}})")}[runner]
    source = (HEAD + "import runpy\n\nfeats = torch.tanh(w)\nn = 2 if TAKEN else 1\n"
              f"{loop}\nresult = [w.grad]\n")
    path = tmp_path / "train.py"
    path.write_text(source)
    _, report = run_fixture(path, source, audited=True)
    taken = source.replace("TAKEN = False", "TAKEN = True")
    assert isinstance(run_fixture(path, taken)[0], list)  # the truth: with the flag it runs,
    exp.write_text(exp.read_text().replace("retain_graph=True", "retain_graph=False"))
    assert isinstance(run_fixture(path, taken)[0], RuntimeError)  # without it, it raises
    (site,) = report.calls
    assert site.verdict == COULD_NOT_TELL, report.format()


def test_a_site_in_module_code_an_import_statement_runs_is_told(tmp_path, monkeypatch):
    """An ``import`` statement runs the module's code once, directly: passed over as runpy's
    and the import system's frames are (``Session.hidden_loop``), and a site in that code on a
    graph of its own is "not needed", the truth (the flag removed, the same gradient) beside
    it. With the statement not passed over, the site was "could not tell: kept"."""
    module = tmp_path / "expmod.py"
    module.write_text("import torch\n\nw = torch.ones(3, requires_grad=True)\n"
                      "(w * 2).pow(2).sum().backward(retain_graph=True)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = "import torch\nimport expmod\n\nresult = [expmod.w.grad]\n"
    path = tmp_path / "train.py"
    path.write_text(source)
    try:
        outcome, report = run_fixture(path, source, audited=True)
        sys.modules.pop("expmod", None)
        module.write_text(module.read_text().replace("retain_graph=True", "retain_graph=False"))
        without, _ = run_fixture(path, source)
    finally:
        sys.modules.pop("expmod", None)
    assert same(without, outcome)  # the truth: the flag changes nothing
    (site,) = report.calls
    assert site.verdict == NOT_NEEDED, report.format()


def test_two_copies_of_a_helper_in_two_files_are_two_ways_to_their_sites(tmp_path,
                                                                          monkeypatch):
    """Code objects of the same text compare equal whatever their files: a stack shape keyed
    by their equality gave the second copy's site the first copy's lines (the files its
    untaken-call search reads, rev68b). Keyed by identity, each site's lines name its own
    file. (With shapes compared by equality again, b's site held a.py's lines and this
    failed.)"""
    helper = "def step(loss):\n    loss.backward(retain_graph=True)\n"
    for name in ("copy_a", "copy_b"):
        (tmp_path / f"{name}.py").write_text(helper)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import copy_a
        import copy_b

        w = torch.ones(3, requires_grad=True)
        with retaincheck.audit() as report:
            for module in (copy_a, copy_b):
                module.step((w * 2).sum())
    finally:
        sys.modules.pop("copy_a", None)
        sys.modules.pop("copy_b", None)
    assert len(report.calls) == 2, report.format()
    for site in report.calls:
        own = Path(site.file).name
        files = {Path(name).name for name, _, _ in site._frames}
        assert own in files and not {"copy_a.py", "copy_b.py"} - {own} & files, (own, files)


@pytest.mark.parametrize("restore", ["sys.settrace", "bound_settrace"])
def test_a_program_that_turns_tracing_off_and_on_proves_no_loop(tmp_path, restore):
    """rev72b A1: a generator that saves and restores the trace function at its end (`saved =
    sys.gettrace(); sys.settrace(None); sys.settrace(saved)`) turned the watch's tracing off
    (gettrace reads None while a watch is open), so the line that ended the inner loop's run
    was not seen; the next site's watch turned it on again, and the next epoch's run of the
    site was taken for a second iteration. No iteration is proven now: a watch opened while
    tracing is found off ends those open (with that check removed, both forms were proven).
    A watch whose site runs again with tracing off ends unproven (_loopwatch.proven)."""
    call = {"sys.settrace": "sys.settrace", "bound_settrace": "settrace"}[restore]
    source = ("import sys\nfrom sys import settrace\n\nimport torch\n\n"
              "w = torch.ones(3, requires_grad=True)\nv = torch.ones(3, requires_grad=True)\n\n\n"
              "def step_a(loss):\n    loss.backward(retain_graph=True)\n\n\n"
              "def step_b(loss):\n    loss.backward(retain_graph=True)\n\n\n"
              "def batches(n):\n    for i in range(n):\n        yield i\n"
              f"    saved = sys.gettrace()\n    {call}(None)\n    {call}(saved)\n\n\n"
              "for e in range(3):\n    step_b((v * 3).exp().sum())\n"
              "    for i in batches(1):\n        step_a((w * 2).exp().sum())\n"
              "result = [w.grad]\n")
    sites, report = _audited(tmp_path, source)
    site = next(c for c in sites if c.line == 11)
    assert not getattr(site, "_shapes_iterated", None), report.format()
    assert site.verdict == COULD_NOT_TELL, report.format()


def test_the_code_reading_looks_inside_a_module_object_the_program_made():
    """rev73a A1 (its second half): features kept on ``types.ModuleType("store")``, a module
    object no import made, were not looked inside (modules were taken as plain values).
    (With made modules passed over again, this failed.)"""
    import types

    from retaincheck import _hooks

    w = torch.ones(3, requires_grad=True)
    store = types.ModuleType("store")
    store.feats = torch.tanh(w)

    def probe():
        return _hooks._graph_locals(sys._getframe(1), sys._getframe(1), 1)

    def step(held):
        return probe()

    (names,) = step(store)
    assert any(name.startswith("held.feats") for name in names), names


BUILT_NAME = "setattr(sys._getframe(1), '_'.join(['f', 'trace', 'lines']), {})"


@pytest.mark.parametrize("named", ["literally", "at_run_time"])
def test_code_that_toggles_a_frames_line_events_proves_no_loop(tmp_path, named):
    """rev73a A1: with the loop frame's line events turned off at the end of its body and on
    again in its head, the watch missed the line that ended the inner loop's run and took the
    next epoch's run for a second iteration (only the older-graph check kept the site).
    rev74b A1: the same with the attribute's name built at run time, which no name in the
    helpers' code shows. Now code that names a frame's trace attributes ends every watch as it
    starts, and at every call while a watch is open each watched frame's line events must
    still be on (_loopwatch.calls): no proof in either form. With both rules removed both
    forms were proven; with the per-call check alone removed, "at_run_time" was."""
    toggled = HIDDEN["line_events_toggled"]
    if named == "at_run_time":
        toggled = toggled.replace("sys._getframe(1).f_trace_lines = False",
                                  BUILT_NAME.format(False)).replace(
            "sys._getframe(1).f_trace_lines = True", BUILT_NAME.format(True))
        assert "f_trace" not in toggled
    (site,), report = _audited(tmp_path, HEAD + toggled + "result = [w.grad]\n")
    assert not getattr(site, "_shapes_iterated", None), report.format()


def test_code_naming_a_trace_attribute_in_a_tuple_constant_ends_the_watch():
    """rev74a A1 (t8): the attribute's name inside a tuple constant, not among the code's
    names or its plain string constants: read there too (_loopwatch._touches_tracing). (With
    only the top-level constants read, the tuple form was not seen.)"""
    def plain(frame):
        return frame.f_lineno

    def in_a_tuple(frame):
        for name in ("f_trace_lines",):
            setattr(frame, name, False)

    assert not _loopwatch._touches_tracing(plain.__code__)
    assert _loopwatch._touches_tracing(in_a_tuple.__code__)


# How the program holds its state module (rev74a A1; rev76a A2-A4): files written next to the
# script, the import line, the holder's name in the loop
STATE_MODULES = {
    "imported": ({"trainstate_rev74a.py": '"""Shared training state."""\n'},
                 "import trainstate_rev74a as trainstate", "trainstate.feats"),
    # a namespace package's submodule: the package has no file (rev76a A2)
    "namespace_package": ({"nspkg_rev76a/store.py": '"""State."""\n'},
                          "import nspkg_rev76a.store", "nspkg_rev76a.store.feats"),
    # a module the program made and put in sys.modules for other files to import (A4)
    "registered": ({}, "import types\nsys.modules['shared_rev76a'] = types.ModuleType("
                   "'shared_rev76a')\nimport shared_rev76a", "shared_rev76a.feats"),
    # more than 256 globals: what the program sets at run time comes after them (A3)
    "many_globals": ({"big_rev76a.py": "".join(f"c{i} = {i}\n" for i in range(400))},
                     "import big_rev76a", "big_rev76a.feats"),
    # 2,100 functions before a dict that holds it (`from torch import *` has about a
    # thousand): each has a budget of its own (rev77a A5)
    "many_functions": ({"funcs_rev77a.py": "".join(f"def f{i}():\n    pass\n"
                                                    for i in range(2100)) + "cache = {}\n"},
                       "import funcs_rev77a", "funcs_rev77a.cache['h']"),
    # a module in a dict (rev77a A4)
    "in_a_dict": ({"trainstate_rev77a.py": '"""State."""\n'},
                  "import importlib\nS = {'m': importlib.import_module('trainstate_rev77a')}",
                  "S['m'].feats"),
    # a module in a dict an object holds, and in a dict in a list (rev78b B2)
    "in_an_attribute_dict": ({"trainstate_rev78a.py": '"""State."""\n'},
                             "import importlib\n\n\nclass T:\n    pass\n\n\nt = T()\n"
                             "t.reg = {'m': importlib.import_module('trainstate_rev78a')}",
                             "t.reg['m'].feats"),
    "nested_containers": ({"trainstate_rev78b.py": '"""State."""\n'},
                          "import importlib\nS = [{'m': importlib.import_module("
                          "'trainstate_rev78b')}]", "S[0]['m'].feats"),
    # a module on a class used as a namespace, in a partial's arguments; a graph on a
    # function's own attribute (rev78a B2, B3)
    "class_attribute": ({"trainstate_rev78c.py": '"""State."""\n'},
                        "import importlib\n\n\nclass Reg:\n    pass\n\n\n"
                        "Reg.m = importlib.import_module('trainstate_rev78c')", "Reg.m.feats"),
    "partial": ({"trainstate_rev78d.py": '"""State."""\n'},
                "import functools\nimport importlib\n"
                "p = functools.partial(print, importlib.import_module('trainstate_rev78d'))",
                "p.args[0].feats"),
    "function_attribute": ({}, "def step():\n    pass\n", "step.feats"),
    # a module on a class read through an instance; an object whose metaclass makes its
    # __dict__ (rev79a B1, E2)
    "class_through_instance": ({"trainstate_rev79a.py": '"""State."""\n'},
                               "import importlib\n\n\nclass Trainer:\n"
                               "    state = importlib.import_module('trainstate_rev79a')\n\n\n"
                               "t = Trainer()", "t.state.feats"),
    # the same with 70 methods before it, set after the class body; an ABC's class in a list
    # (rev80a A1, A2)
    "class_with_methods": ({"trainstate_rev80a.py": '"""State."""\n'},
                           "import importlib\n\n\nclass Trainer:\n" + "".join(
                               f"    def m{i}(self):\n        pass\n\n" for i in range(70))
                           + "\nTrainer.state = importlib.import_module('trainstate_rev80a')\n"
                           "t = Trainer()", "t.state.feats"),
    "abc_class_in_a_list": ({}, "import abc\n\n\nclass Reg(abc.ABC):\n    pass\n\n\n"
                            "regs = [Reg]", "regs[0].feats"),
    # a module on a class in a list, in a SimpleNamespace in a list (rev81a A1, A2)
    "class_in_a_list": ({"trainstate_rev81a.py": '"""State."""\n'},
                        "import importlib\n\n\nclass Reg:\n    pass\n\n\n"
                        "Reg.m = importlib.import_module('trainstate_rev81a')\nregs = [Reg]",
                        "regs[0].m.feats"),
    "namespace_in_a_list": ({"trainstate_rev81b.py": '"""State."""\n'},
                            "import importlib\nimport types\nregs = [types.SimpleNamespace("
                            "m=importlib.import_module('trainstate_rev81b'))]", "regs[0].m.feats"),
    # a SimpleNamespace subclass in a list, a module as a dict's key, an attribute named as an
    # nn.Module's dict on another object, a dict subclass's attribute, a slot named in a dict
    # (rev82a B1-B5)
    "namespace_subclass": ({"trainstate_rev82a.py": '"""State."""\n'},
                           "import importlib\nimport types\n\n\n"
                           "class NS(types.SimpleNamespace):\n    pass\n\n\n"
                           "regs = [NS(m=importlib.import_module('trainstate_rev82a'))]",
                           "regs[0].m.feats"),
    "module_as_a_key": ({"trainstate_rev82b.py": '"""State."""\n'},
                        "import importlib\nreg = {importlib.import_module('trainstate_rev82b'): 1}",
                        "next(iter(reg)).feats"),
    "attribute_named_modules": ({"trainstate_rev82c.py": '"""State."""\n'},
                                "import importlib\n\n\nclass Box:\n    pass\n\n\nbox = Box()\n"
                                "box._modules = {'m': importlib.import_module("
                                "'trainstate_rev82c')}",
                                "box._modules['m'].feats"),
    "dict_subclass_attribute": ({"trainstate_rev82d.py": '"""State."""\n'},
                                "import importlib\n\n\nclass D(dict):\n    pass\n\n\nd = D()\n"
                                "d.m = importlib.import_module('trainstate_rev82d')", "d.m.feats"),
    "slots_in_a_dict": ({}, "class S:\n    __slots__ = {'feats': 'doc'}\n\n\ns = S()", "s.feats"),
    "metaclass_dict": ({}, "class Meta(type):\n    @property\n    def __dict__(cls):\n"
                       "        return {}\n\n\nclass C(metaclass=Meta):\n    pass\n\n\n"
                       "o = C()", "o.feats"),
    # a module whose class makes its __dict__ (a property): not read, it counts (rev77a A2)
    "dict_property": ({"prop_rev77a.py": (
        "import sys\nimport types\nCALLS = []\n\n\nclass _M(types.ModuleType):\n"
        "    @property\n    def __dict__(self):\n        CALLS.append(1)\n"
        "        return types.ModuleType.__dict__['__dict__'].__get__(self)\n\n\n"
        "sys.modules[__name__].__class__ = _M\n")}, "import prop_rev77a", "prop_rev77a.feats"),
}


@pytest.mark.parametrize("form", sorted(STATE_MODULES))
def test_a_graph_held_on_a_module_of_the_programs_own_is_read(tmp_path, monkeypatch, form):
    """rev74a A1 (its second half): a graph kept on a module of the program's own
    (``trainstate.feats = ...`` per epoch) was not looked for: imported modules were passed
    over as plain values. rev76a A2-A4, rev77a A2, A4, A5: nor a namespace package's submodule,
    a module the program made and put in ``sys.modules``, one with more than 256 globals, one
    with 2,100 functions before the dict that holds it, a module in a dict, a module whose class
    makes its ``__dict__`` (not read: it counts, and its property never runs); rev78b B2: a
    module in a dict an object holds, and in a dict in a list; rev78a B2, B3: a module on a
    class, in a partial's arguments, a graph on a function's attribute. Here the loop's
    own code turns its line events off and on through a name built at run time with no call in
    between (the limit the page states), so the watch takes the next epoch's run of the inner
    loop for a second iteration; the code reading must find the holder. Each rule broken once
    was "not needed" for its form (imported modules passed over: every form); without the
    flag and with two inner iterations, each run raises."""
    files, imports, holder = STATE_MODULES[form]
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)

    def forget():  # (the modules the run imported from tmp_path or made: the next run
        # imports them anew; not torch's or the standard library's, imported once)
        for name in set(sys.modules) - before:
            module = sys.modules[name]
            where = [getattr(module, "__file__", None) or "", *getattr(module, "__path__", ())]
            if getattr(module, "__spec__", None) is None or any(
                    str(w).startswith(str(tmp_path)) for w in where):
                del sys.modules[name]

    source = HEAD + (
        f"import sys\n\n{imports}\n\n"
        "F = sys._getframe()\nname = '_'.join(['f', 'trace', 'lines'])\n"
        "v = torch.ones(3, requires_grad=True)\n"
        "for b in [torch.ones(3) * k for k in range(3)]:\n"
        f"    {holder} = (b * v).tanh()\n"
        "    setattr(F, name, True)\n"
        "    for _ in range(2 if TAKEN else 1):\n"
        f"        ({holder} * w).exp().sum().backward(retain_graph=True)\n"
        "        setattr(F, name, False)\n"
        "result = [w.grad]\n")
    try:
        (site,), report = _audited(tmp_path, source)
        assert site.verdict == COULD_NOT_TELL, report.format()
        assert site._held_in_loop, report.format()
        if form == "dict_property":  # (its property never ran)
            assert sys.modules["prop_rev77a"].CALLS == [], report.format()
        forget()
        outcome, _ = run_fixture(tmp_path / "train.py", source.replace(
            "TAKEN = False", "TAKEN = True").replace("retain_graph=True", "retain_graph=False"))
        assert "backward through the graph a second time" in str(outcome), outcome
    finally:
        forget()


def test_the_code_reading_runs_no_code_of_a_lazily_imported_module(tmp_path, monkeypatch):
    """rev76a A1: a program module holding a module imported lazily (importlib's
    LazyLoader, which imports it at its first attribute read) that the program never uses:
    the code reading read it (``isinstance`` reads ``__class__``) and ran its import, whose
    error reached the program's backward(). It is not looked inside now, and the reading
    never raises into the program. (With the module's type not checked, the import ran and
    the audited run raised ImportError; with only the reading's errors caught, the import
    still ran.)"""
    (tmp_path / "plugin_rev76a.py").write_text(
        "raise ImportError('plugin_rev76a needs a GPU')\n")
    (tmp_path / "state_rev76a.py").write_text(
        "import importlib.util\nimport sys\n\n"
        "spec = importlib.util.find_spec('plugin_rev76a')\n"
        "spec.loader = importlib.util.LazyLoader(spec.loader)\n"
        "plugin = importlib.util.module_from_spec(spec)\n"
        "sys.modules['plugin_rev76a'] = plugin\nspec.loader.exec_module(plugin)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = HEAD + (
        "import state_rev76a\n\n"
        "for step in range(2):\n"
        "    h = (w * 2).tanh()\n"
        "    h.sum().backward(retain_graph=True)\n"
        "    (h * 3).sum().backward()\n"
        "result = [w.grad]\n")
    try:
        (site,), report = _audited(tmp_path, source)
        assert site.verdict == "needed", report.format()
        assert report.completed, report.format()
        # (its import not run: still the lazy module's own class)
        assert type(sys.modules["plugin_rev76a"]).__name__ == "_LazyModule"
    finally:
        for name in ("state_rev76a", "plugin_rev76a"):
            sys.modules.pop(name, None)


def test_the_standard_library_and_site_packages_are_installed_a_project_in_a_venv_is_not():
    """rev77a A3: every file under Python's prefix was taken as installed: a project kept in
    its virtual environment's folder (or /usr/src/app beside /usr's Python) was not read as
    the program's own. Installed: site-packages and the standard library's folders. (With the
    prefix test back, the project's file was installed.)"""
    import json

    from retaincheck import _hooks

    assert _hooks._installed_path(json.__file__)
    assert _hooks._installed_path(torch.__file__)
    assert not _hooks._installed_path(os.path.join(sys.prefix, "proj", "train.py"))
    assert not _hooks._installed_path(sys.prefix.rstrip(os.sep) + "2" + os.sep + "train.py")
    # (a folder named so, not one whose name holds it, rev78a B4)
    assert not _hooks._installed_path(os.path.join(os.sep, "src", "my-site-packages-fork", "a.py"))
    assert _hooks._installed_path(os.path.join(os.sep, "venv", "lib", "site-packages", "a.py"))


def test_the_audits_end_runs_no_code_of_a_lazily_imported_module(tmp_path, monkeypatch):
    """rev77a A1 (the audit's end): the search of the program's files for walkers
    (_audit._named_from, for a site nothing reused) read every module's ``__file__`` by
    getattr, which runs a lazy module's import. Read from the module's own dict now. (With
    getattr back, the lazy module was imported and its error reached the program.)"""
    (tmp_path / "plugin_rev77a.py").write_text(
        "raise ImportError('plugin_rev77a needs a GPU')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = HEAD + (
        "import importlib.util\nimport sys\n\n"
        "spec = importlib.util.find_spec('plugin_rev77a')\n"
        "spec.loader = importlib.util.LazyLoader(spec.loader)\n"
        "plugin = importlib.util.module_from_spec(spec)\n"
        "sys.modules['plugin_rev77a'] = plugin\nspec.loader.exec_module(plugin)\n\n"
        "(w * 2).tanh().sum().backward(retain_graph=True)\n"
        "result = [w.grad]\n")
    try:
        (site,), report = _audited(tmp_path, source)
        assert report.completed and site.verdict == "not needed", report.format()
        assert type(sys.modules["plugin_rev77a"]).__name__ == "_LazyModule"
    finally:
        sys.modules.pop("plugin_rev77a", None)


def test_the_audit_runs_no_code_of_odd_module_files_and_attribute_keys(tmp_path):
    """rev78a D1, D2, C1: the audit's end crashed on a module whose ``__file__`` is an object
    with a ``__class__`` property (it ran the property) or a name with a NUL byte (os.stat's
    ValueError); the code reading ran a non-string attribute key's ``__hash__``. rev79a E1,
    E1b, E3: and on a class whose ``__module__`` is a list or missing, and a name with a lone
    surrogate; rev81a A5: on an object in sys.modules whose class is unhashable (its
    metaclass's ``__eq__``); rev82a B6: a key of sys.modules that is no string. Run by
    the command line, which reads the script's globals at the end. Now it completes, and none
    of the program's code runs. (Seen failing: with the class's module name not checked,
    TypeError: unhashable type 'list'; with names the file system cannot encode let through,
    UnicodeEncodeError; with the class as a cache key, the metaclass's __eq__ made it
    unhashable.)"""
    source = HEAD + (
        "import sys\nimport types\n\ncalls = []\n\n\nclass Odd:\n"
        "    @property\n    def __class__(self):\n        calls.append('class')\n"
        "        return str\n\n\nclass K:\n    def __hash__(self):\n"
        "        calls.append('hash')\n        return 1\n\n\nclass C:\n    pass\n\n\n"
        "for name, file in (('oddmod_rev78', Odd()), ('nulmod_rev78', 'gen\\0erated.py'),\n"
        "                   ('surmod_rev79', 'gen\\ud800erated.py')):\n"
        "    m = types.ModuleType(name)\n    m.__file__ = file\n    sys.modules[name] = m\n"
        "o = C()\no.__dict__[K()] = (torch.ones(3) * w).tanh()\ncalls.clear()\n"
        "Listed = type('Listed', (), {'__module__': ['x']})\n"
        "space = {}\nexec(\"Bare = type('Bare', (), {})\", space)\nBare = space['Bare']\n"
        "\n\nclass MetaEq(type):\n    def __eq__(cls, other):\n        return cls is other\n\n\n"
        "class Weird(metaclass=MetaEq):\n    pass\n\n\n"
        "sys.modules['weird_rev81'] = Weird()\n"
        "sys.modules[('tuple', 'key')] = types.ModuleType('tk')\n"
        "for k in range(2):\n"
        "    (torch.ones(3) * k * w).sum().backward(retain_graph=True)\n"
        "result = [w.grad]\nprint('calls', calls)\n")
    # (the command line: the script is __main__ in sys.modules, whose globals the audit's end
    # reads for the program's other files, _audit._named_from)
    (tmp_path / "train.py").write_text(source)
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "retaincheck", "train.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "calls []" in proc.stdout, proc.stdout
    assert "verdict: NOT NEEDED" in proc.stdout, proc.stdout


def test_a_slot_is_read_through_its_own_descriptor():
    """rev81a A4: a slot read by name ran a subclass's property of the same name (the
    program's code) and took its value, and the graph in the slot was missed. Read through
    the slot's own descriptor now. (With the read by name back, the property ran and the
    slot's value was None.)"""
    from retaincheck import _hooks

    ran = []

    class Base:
        __slots__ = ("feats",)

    class Shadow(Base):
        @property
        def feats(self):
            ran.append(1)
            return None

    held = Shadow()
    Base.feats.__set__(held, torch.ones(2, requires_grad=True) * 2)
    pairs = dict(_hooks._own_attributes(held) or ())
    assert pairs["feats"] is not None and pairs["feats"].grad_fn is not None, pairs
    assert ran == []
