"""``pytest --retaincheck``: the plugin audits each test and lists the retains not needed.

Each test runs pytest inside this one (``pytester``, in process: torch is imported once),
with plugin autoloading off, the plugin named with ``-p``, and no xdist.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch  # (imported before pytester's runs, which drop new modules after each)

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def _compiler_stack_before_pytester():
    """An optimizer step imports torch's compiler stack (torch._dynamo, torch._prims, ...) the
    first time. Imported inside a pytester run, those modules are dropped from sys.modules
    afterwards while their operator registrations stay, and the next test in this worker that
    steps an optimizer fails to import them again ("'prims' object has no attribute 'sum'").
    Import them before any pytester snapshot (a module fixture runs before the function-scoped
    ``pytester``), so they are kept; here rather than at import, so that a worker that only
    collects this module does not pay the 2 s."""
    import torch._dynamo  # noqa: F401
pytestmark = pytest.mark.timeout(60)  # each inner run takes well under a second

ROOT = Path(__file__).resolve().parent.parent

HELPERS = '''
import torch

def two_losses(w, retain):
    h = torch.tanh(w * 2)
    h.sum().backward(retain_graph=retain)
    h.pow(2).sum().backward()

def one_loss(w):
    torch.sigmoid(w).sum().backward(retain_graph=True)
'''

TESTS = '''
import pytest
import torch
from helpers import one_loss, two_losses


@pytest.fixture
def w():
    return torch.ones(3, requires_grad=True)


def test_one_loss(w):
    one_loss(w)
    assert w.grad is not None


def test_two_losses(w):
    two_losses(w, True)


def test_inline(w):
    loss = torch.exp(w).sum()
    loss.backward(retain_graph=True)
    assert torch.allclose(w.grad, torch.exp(w))
'''


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(helpers=HELPERS, test_train=TESTS)
    return pytester


def run(pytester, *args, plugins=()):
    # A test before these in the same process may have imported the plugin already; the inner
    # pytest then warns that it cannot rewrite its asserts, a line that names retaincheck.
    return pytester.runpytest_inprocess(
        "-p", "retaincheck.pytest_plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", *args, plugins=list(plugins)
    )


def section(result) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "retaincheck" in line and "===" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    return lines[start + 1 : end]


EXPECTED = [
    "2 retain_graph=True call sites not needed (3 tests audited, 4 backward()/grad() calls seen):",
    "helpers.py:9  torch.sigmoid(w).sum().backward(retain_graph=True)",
    "    kept 12 bytes of saved tensors; not needed in:",
    "      test_train.py::test_one_loss",
    "test_train.py:22  loss.backward(retain_graph=True)",
    "    kept 12 bytes of saved tensors; not needed in:",
    "      test_train.py::test_inline",
]


def test_the_gate_says_why_without_pytests_terminal(project):
    """rev37b N5: with ``-p no:terminal`` no section is printed, and the 6 came without a
    word; one line on standard error names the sites."""
    result = run(project, "-p", "no:terminal", "--retaincheck-fail", "--retaincheck-skip-proof")
    assert result.ret == 6
    assert result.errlines == [
        "--retaincheck-fail: exit status 6: not needed: helpers.py:9, test_train.py:22 "
        "(pytest's terminal plugin is off, so the retaincheck section is not printed)"]


def test_a_site_inside_an_assert_pytest_rewrote_is_read(pytester, monkeypatch):
    """rev41b A1: a literal grad() inside a test's assert was "could not tell (the code of
    this line cannot be read)": pytest runs its rewritten asserts, which the file's text, as
    written, does not compile to. It is now read as pytest rewrote it."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_assert=(
        "import torch\n\n\ndef test_grad_in_assert():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    assert torch.autograd.grad(torch.exp(x).sum(), x, retain_graph=True)[0].sum() > 0\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=1)
    assert section(result)[:2] == [
        "1 retain_graph=True call site not needed (1 test audited, 1 backward()/grad() call "
        "seen):",
        "test_assert.py:6  assert torch.autograd.grad(torch.exp(x).sum(), x, "
        "retain_graph=True)[0].sum() > 0"], section(result)


def test_off_unless_asked(project):
    result = run(project)
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    assert not any("retaincheck" in line for line in result.outlines)


def test_retaincheck_lists_each_unneeded_site_with_its_tests(project):
    result = run(project, "--retaincheck")
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    assert section(result) == EXPECTED  # the needed one in two_losses is not listed


@pytest.mark.proof
def test_retaincheck_fail_makes_the_run_fail(project):
    """Before its 6, the gate reruns the session with both sites' backward passes forced not to
    keep their graphs; the tests pass, so the 6 is proven."""
    result = run(project, "--retaincheck-fail")
    result.assert_outcomes(passed=3)
    assert result.ret == 6
    *listed, proof, last = section(result)
    assert listed == EXPECTED
    assert proof.startswith("--retaincheck-fail: the tests rerun without the flag: proven: the "
                            "rerun exited 0 as the audited run did (")
    assert last == "--retaincheck-fail: exit status 6 when all tests passed"
    result = run(project, "--retaincheck-fail", "--retaincheck-skip-proof")
    assert result.ret == 6 and section(result) == [
        *EXPECTED, "--retaincheck-fail: exit status 6 when all tests passed (unproven: "
        "--retaincheck-skip-proof, no rerun without the flag)"]
    project.makepyfile(test_train=TESTS.replace("retain_graph=True", "retain_graph=False"))
    result = run(project, "--retaincheck-fail", "-k", "inline")
    assert result.ret == 0 and section(result) == [
        "no retain_graph=True found not needed (1 test audited, 2 deselected, 1 backward()/grad() "
        "call seen)"
    ]


DIR_READ = '''
import torch


def test_reads_every_attribute():
    x = torch.randn(4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    y = x * w
    y.sum().backward(retain_graph=True)
    fn = y.grad_fn
    attributes = {a: getattr(fn, a) for a in dir(fn) if not a.startswith("__")}
    assert len(attributes) > 3
'''


@pytest.mark.proof
def test_a_rerun_that_fails_keeps_the_flag_and_the_status(pytester, monkeypatch):
    """A documented limit of the audit (saved tensors read through names from dir()) gives a
    "not needed" that is wrong: without the flag, getattr raises the freed-graph error. The
    gate's rerun sees the test fail, so the site is kept and the status stays 0, not 6."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_dir=DIR_READ)
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    lines = section(result)
    assert lines[0] == (
        "1 retain_graph=True call site looked not needed (1 test audited, 1 backward()/grad() "
        "call seen), but the tests fail without it: keep it:"
    )
    assert lines[-1].startswith(
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the rerun failed "
        "(exit status 1)"
    )
    # the truth: without the flag the test fails with the freed-graph error
    pytester.makepyfile(test_dir=DIR_READ.replace("retain_graph=True", ""))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert "backward through the graph a second time" in result.stdout.str()
    # and without the rerun the gate gives the wrong 6
    pytester.makepyfile(test_dir=DIR_READ)
    result = run(pytester, "--retaincheck-fail", "--retaincheck-skip-proof")
    assert result.ret == 6


def test_a_site_in_code_with_no_file_is_never_a_6(pytester, monkeypatch):
    """As the command line's gate (rev27i G1d): a site in exec'd code cannot be rerun without
    its flag, so it is "could not tell: kept" and the status stays 0, never an unproven 6
    (and, since rev43c S1, kept before any proof: its literal True was written by the
    program, which may write False on another run)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_exec=(
        "import torch\n\n\ndef test_exec():\n"
        "    code = 'w = torch.ones(3, requires_grad=True)\\n'"
        " + '(w * w).sum().backward(retain_graph=True)\\n'\n"
        "    exec(compile(code, '<config>', 'exec'), {'torch': torch})\n"
    ))
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result) == [
        "no retain_graph=True found not needed (1 test audited, 1 backward()/grad() call seen)",
        "kept, not listed: <config>:2: could not tell (the code of this line cannot be read)"]


AFTER_A_FIXTURE = {
    # rev46b F1: the test walks its fixture's loss again behind an option
    "test_body": (
        "import os\n\nimport pytest\nimport torch\n\n\n@pytest.fixture\ndef probed():\n"
        "    w = torch.ones(3, requires_grad=True)\n    loss = (w * 3).pow(2).sum()\n"
        "    loss.backward(retain_graph=True)\n    return w, loss\n\n\n"
        "def test_probe(probed):\n    w, loss = probed\n    if os.environ.get('AGAIN'):\n"
        "        loss.backward()\n    assert w.grad.sum() > 0\n"),
    # rev46b T1: a yield fixture walks the test's loss again at its teardown
    "fixture_teardown": (
        "import os\n\nimport pytest\nimport torch\n\n\n@pytest.fixture\ndef losses():\n"
        "    kept = []\n    yield kept\n    if os.environ.get('AGAIN'):\n"
        "        for loss in kept:\n            loss.backward()\n\n\n"
        "def test_step(losses):\n    w = torch.ones(3, requires_grad=True)\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    losses.append(loss)\n"),
    # rev46b F1b: a TestCase's setUp makes the loss, the test walks it again
    "unittest_setup": (
        "import os\nimport unittest\n\nimport torch\n\n\nclass T(unittest.TestCase):\n"
        "    def setUp(self):\n        self.w = torch.ones(3, requires_grad=True)\n"
        "        self.loss = (self.w * 3).pow(2).sum()\n"
        "        self.loss.backward(retain_graph=True)\n\n    def test_again(self):\n"
        "        if os.environ.get('AGAIN'):\n            self.loss.backward()\n"
        "        self.assertTrue(self.w.grad.sum() > 0)\n"),
    # rev47b X1: a module's xunit teardown_function walks the losses the test kept
    "teardown_function": (
        "import os\n\nimport torch\n\nLOSSES = []\n\n\ndef teardown_function(function):\n"
        "    while LOSSES:\n        loss = LOSSES.pop()\n        if os.environ.get('AGAIN'):\n"
        "            loss.backward()\n\n\ndef test_step():\n"
        "    w = torch.ones(3, requires_grad=True)\n    loss = (w * 3).pow(2).sum()\n"
        "    loss.backward(retain_graph=True)\n    LOSSES.append(loss)\n"),
    # rev47b D1: a fixture got by a name chosen at run time, its teardown walks the loss
    "getfixturevalue": (
        "import os\n\nimport pytest\n\n\n@pytest.fixture\ndef graphs():\n    kept = []\n"
        "    yield kept\n    if os.environ.get('AGAIN'):\n        for loss in kept:\n"
        "            loss.backward()\n",
        "import pytest\nimport torch\n\n\n@pytest.mark.parametrize('collector', ['graphs'])\n"
        "def test_step(collector, request):\n    w = torch.ones(3, requires_grad=True)\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    request.getfixturevalue(collector).append(loss)\n"),
    # rev47b H1: a conftest hook walks, after the test, the losses the test kept in a list
    "conftest_hook": (
        "import os\n\n\ndef pytest_runtest_teardown(item):\n"
        "    while getattr(item.module, 'KEPT', None):\n        loss = item.module.KEPT.pop()\n"
        "        if os.environ.get('AGAIN'):\n            loss.backward()\n",
        "import torch\n\nKEPT = []\n\n\ndef test_step():\n"
        "    w = torch.ones(3, requires_grad=True)\n    loss = (w * 3).pow(2).sum()\n"
        "    loss.backward(retain_graph=True)\n    KEPT.append(loss)\n"),
    # rev48b W1, P2: a conftest fixture's teardown (or finalizer, handed on as a value) calls
    # a checker of a helpers module that only the conftest imports
    "helpers_module": (
        "import functools\n\nimport pytest\n\nfrom checks_w1 import walk_again\n\n\n"
        "@pytest.fixture\ndef losses(request):\n    kept = []\n"
        "    request.addfinalizer(functools.partial(walk_again, kept))\n    yield kept\n"
        "    walk_again(kept)\n",
        "import torch\n\n\ndef test_step(losses):\n    w = torch.ones(3, requires_grad=True)\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    losses.append(loss)\n",
        {"checks_w1.py": "import os\n\n\ndef walk_again(kept):\n    while kept:\n"
                         "        loss = kept.pop()\n        if os.environ.get('AGAIN'):\n"
                         "            loss.backward()\n"}),
    # rev48b F1: a conftest's checker class, handed to the test by a fixture
    "conftest_class": (
        "import os\n\nimport pytest\n\n\nclass Checker:\n    def check(self, loss):\n"
        "        if os.environ.get('AGAIN'):\n            loss.backward()\n\n\n"
        "@pytest.fixture\ndef checker():\n    return Checker()\n",
        "import torch\n\n\ndef test_step(checker):\n    w = torch.ones(3, requires_grad=True)\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    checker.check(loss)\n"),
    # rev49b H1: a conftest helper class's method registers the finalizer
    "tracker_class": (
        "import functools\n\nimport pytest\n\nfrom checks_h1 import walk_again\n\n\n"
        "class Tracker:\n    def __init__(self, request):\n        self.request = request\n\n"
        "    def add(self, loss):\n"
        "        self.request.addfinalizer(functools.partial(walk_again, [loss]))\n\n\n"
        "@pytest.fixture\ndef tracker(request):\n    return Tracker(request)\n",
        "import torch\n\n\ndef test_step(tracker):\n    w = torch.ones(3, requires_grad=True)\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    tracker.add(loss)\n",
        {"checks_h1.py": "import os\n\n\ndef walk_again(kept):\n    while kept:\n"
                         "        loss = kept.pop()\n        if os.environ.get('AGAIN'):\n"
                         "            loss.backward()\n"}),
    # rev48b P1: a plugin module's hook (loaded with -p) walks the losses a test kept
    "plugin_module": (
        None,
        "import torch\n\nKEPT_P1 = []\n\n\ndef test_step():\n"
        "    w = torch.ones(3, requires_grad=True)\n    loss = (w * 3).pow(2).sum()\n"
        "    loss.backward(retain_graph=True)\n    KEPT_P1.append(loss)\n"),
    # a finalizer handed to pytest by value (request.addfinalizer), which pytest calls
    "finalizer": (
        "import functools\nimport os\n\nimport torch\n\n\ndef again(loss):\n"
        "    if os.environ.get('AGAIN'):\n        loss.backward()\n\n\n"
        "def test_step(request):\n    w = torch.ones(3, requires_grad=True)\n"
        "    loss = (w * 3).pow(2).sum()\n    loss.backward(retain_graph=True)\n"
        "    request.addfinalizer(functools.partial(again, loss))\n"),
}


def test_a_test_classs_other_tests_are_not_code_after_a_site(pytester, monkeypatch):
    """rev47b C1: every method of a test class was searched whole after a site, the class's
    other tests too (pytest runs each as a test of its own): each site kept, with "the call at
    ... did not run", though it ran in the other test and neither flag is needed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_two=(
        "import torch\n\n\nclass TestTwo:\n    def setup_method(self):\n"
        "        self.w = torch.ones(3, requires_grad=True)\n\n    def test_a(self):\n"
        "        (self.w * 2).sum().backward(retain_graph=True)\n\n    def test_b(self):\n"
        "        (self.w * 3).sum().backward(retain_graph=True)\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=2)
    assert section(result)[0].startswith("2 retain_graph=True call sites not needed"), \
        section(result)


def test_torchs_opt_step_is_not_a_conftest_classs_step(pytester, monkeypatch):
    """rev49b C1 (cost): a conftest helper class's `step(self, loss)` walks a graph, so every
    `x.step()` was taken for it: a test's `opt.step()` after a site, which ran, kept the site
    ("the call at ... did not run"). A name bound only to what torch returns is torch's; a
    helper made by the program's own code is still the program's."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        "import os\n\nimport pytest\nimport torch\n\n\nclass Runner:\n"
        "    def __init__(self, model):\n        self.model = model\n\n"
        "    def step(self, loss):\n        loss.backward()\n\n\n"
        "def make_runner(model):\n    return Runner(model)\n\n\n"
        "@pytest.fixture\ndef runner():\n    return Runner(torch.nn.Linear(3, 1))\n")
    pytester.makepyfile(test_opt=(
        "import os\n\nimport torch\nfrom conftest import make_runner\n\n\n"
        "def test_plain_sgd():\n    model = torch.nn.Linear(3, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    model(torch.ones(4, 3)).pow(2).mean().backward(retain_graph=True)\n"
        "    opt.step()\n\n\n"
        "def test_own_runner():\n    model = torch.nn.Linear(3, 1)\n"
        "    helper = make_runner(model)\n    loss = model(torch.ones(4, 3)).sum()\n"
        "    loss.backward(retain_graph=True)\n"
        "    if os.environ.get('AGAIN'):\n        helper.step(loss)\n\n\n"
        "def test_runner(runner):\n    runner.step(runner.model(torch.ones(4, 3)).sum())\n"))
    result = run(pytester, "--retaincheck", "-v")
    result.assert_outcomes(passed=3)
    lines = section(result)
    assert lines[0].startswith("1 retain_graph=True call site not needed"), lines
    assert any(line.startswith("kept, not listed: test_opt.py:18") for line in lines), lines
    # the truth: without the flags, the plain test passes; the helper's path needs its flag
    result = run(pytester)
    result.assert_outcomes(passed=3)
    (pytester.path / "test_opt.py").write_text(
        (pytester.path / "test_opt.py").read_text().replace("retain_graph=True", ""))
    result = run(pytester)
    result.assert_outcomes(passed=3)
    monkeypatch.setenv("AGAIN", "1")
    result = run(pytester)
    result.assert_outcomes(passed=2, failed=1)


def test_code_pytest_runs_after_a_site_is_searched_for_calls_that_did_not_run(pytester,
                                                                             monkeypatch):
    """rev46b T1, F1, F1b: a site in a fixture (or setUp) is followed by the test's own code,
    and a site in a test by its fixtures' teardown; an untaken backward() there, which starts
    no pass, was never searched: exit 6, proven, and the option's path broke. rev47b X1, D1,
    H1: the same in code pytest runs by no name a frame shows (xunit teardown, a fixture got
    with getfixturevalue, a conftest hook, a finalizer). One session, a folder per case (a
    conftest's functions count for the tests below it only): each site is kept for the
    untaken call of its own folder."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.syspath_prepend(pytester.path)  # (the plugin module, -p plugin_p1)
    (pytester.path / "plugin_p1.py").write_text(
        "import os\n\n\ndef pytest_runtest_teardown(item):\n"
        "    while getattr(item.module, 'KEPT_P1', None):\n"
        "        loss = item.module.KEPT_P1.pop()\n        if os.environ.get('AGAIN'):\n"
        "            loss.backward()\n")

    def write(flag: str):
        for name, case in AFTER_A_FIXTURE.items():
            conftest, test, *more = case if isinstance(case, tuple) else (None, case)
            folder = pytester.path / f"case_{name}"
            folder.mkdir(exist_ok=True)
            if conftest:
                (folder / "conftest.py").write_text(conftest)
            for other, text in (more[0] if more else {}).items():
                (folder / other).write_text(text)
            (folder / f"test_{name}.py").write_text(test.replace("retain_graph=True", flag))

    def run(pytester, *args):  # (with the plugin module, as a project's -p option loads it)
        return globals()["run"](pytester, "-p", "plugin_p1", *args)

    write("retain_graph=True")
    result = run(pytester, "--retaincheck-fail", "-v")  # (-v: every site kept, not ten)
    assert result.ret == 0, result.outlines
    lines = section(result)
    assert lines[0].startswith("no retain_graph=True found not needed"), lines
    for name in AFTER_A_FIXTURE:  # (kept for the call of its own case's code)
        where = "plugin_p1.py" if name == "plugin_module" else f"case_{name}/"
        assert any(line.startswith(f"kept, not listed: case_{name}/")
                   and f"could not tell (the call at {where}" in line
                   for line in lines), (name, lines)
    # the truth: the path that walks the graph again needs the flag in each case
    monkeypatch.setenv("AGAIN", "1")
    result = run(pytester)
    result.assert_outcomes(passed=len(AFTER_A_FIXTURE))
    write("")
    result = run(pytester)
    for name in AFTER_A_FIXTURE:
        assert any(line.startswith(("FAILED", "ERROR")) and f"case_{name}/" in line
                   for line in result.outlines), (name, result.outlines)


def test_an_installed_plugins_hook_that_walks_through_an_installed_check_is_searched(
        pytester, monkeypatch):
    """rev49b G1: an installed pytest plugin's teardown hook re-checks the losses a test
    registered through an installed package's function (the plugin's text names no walk);
    the call did not count as a walk: "not needed", proven, and the checking run broke."""
    from retaincheck import _reads

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.syspath_prepend(pytester.path)
    (pytester.path / "plugin_g1.py").write_text(
        "from gradcheck_g1 import recheck\n\n\ndef pytest_runtest_teardown(item):\n"
        "    while getattr(item.module, 'KEPT_G1', None):\n"
        "        recheck(item.module.KEPT_G1.pop())\n")
    (pytester.path / "gradcheck_g1.py").write_text(
        "import os\n\n\ndef recheck(loss):\n    if os.environ.get('AGAIN'):\n"
        "        loss.backward()\n")
    for name in ("plugin_g1.py", "gradcheck_g1.py"):  # (as site-packages)
        monkeypatch.setitem(_reads._kinds, str(pytester.path / name), 1)
    test = ("import torch\n\nKEPT_G1 = []\n\n\ndef test_step():\n"
            "    w = torch.ones(3, requires_grad=True)\n    loss = (w * 3).pow(2).sum()\n"
            "    loss.backward(retain_graph=True)\n    KEPT_G1.append(loss)\n")
    pytester.makepyfile(test_g1=test)
    result = run(pytester, "-p", "plugin_g1", "--retaincheck-fail")
    assert result.ret == 0, result.outlines
    assert section(result)[1].startswith("kept, not listed: test_g1.py:9: could not tell (the "
                                         "call at "), section(result)
    monkeypatch.setenv("AGAIN", "1")  # the truth: the checking run needs the flag
    run(pytester, "-p", "plugin_g1").assert_outcomes(passed=1)
    pytester.makepyfile(test_g1=test.replace("retain_graph=True", ""))
    assert run(pytester, "-p", "plugin_g1").ret == 1


def test_a_loop_in_a_function_an_installed_plugin_hands_the_test_is_the_programs(pytester,
                                                                                monkeypatch):
    """rev51b P1: an installed pytest plugin's fixture hands the test a runner that loops over
    the step (`--steps`, 1 by default); the plugin's file was taken for the test runner whole,
    its loop never seen: "not needed", proven, and two steps broke. Only its hooks and test
    items' methods run the tests."""
    from retaincheck import _reads

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.syspath_prepend(pytester.path)
    (pytester.path / "plugin_s1.py").write_text(
        "import os\n\nimport pytest\n\n\n@pytest.fixture\ndef run_steps():\n"
        "    def run(step):\n        for _ in range(int(os.environ.get('STEPS', '1'))):\n"
        "            step()\n    return run\n")
    monkeypatch.setitem(_reads._kinds, str(pytester.path / "plugin_s1.py"), 1)
    test = ("import torch\n\n\ndef test_steps(run_steps):\n"
            "    w = torch.ones(3, requires_grad=True)\n    h = torch.tanh(w)\n"
            "    run_steps(lambda: (h * 2).sum().backward(retain_graph=True))\n")
    pytester.makepyfile(test_s1=test)
    result = run(pytester, "-p", "plugin_s1", "--retaincheck-fail")
    assert result.ret == 0, result.outlines
    assert section(result)[1] == ("kept, not listed: test_s1.py:7: could not tell (its loop "
                                  "was not seen running it twice)"), section(result)
    monkeypatch.setenv("STEPS", "2")  # the truth: two steps need the flag
    run(pytester, "-p", "plugin_s1").assert_outcomes(passed=1)
    pytester.makepyfile(test_s1=test.replace("retain_graph=True", ""))
    assert run(pytester, "-p", "plugin_s1").ret == 1


def test_a_function_a_fixture_hands_on_counts_only_for_the_tests_that_use_it(pytester,
                                                                             monkeypatch):
    """rev48b C2: a conftest fixture returns functools.partial(train_step, ...); the helper was
    searched whole for every test, and a test that never used the fixture kept its site
    ("the call at conftest.py:10 did not run"), though nothing needs it (the truth)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        "import functools\n\nimport pytest\nimport torch\n\n\ndef train_step(w, x):\n"
        "    (w * x).sum().backward()\n\n\n@pytest.fixture\ndef step():\n"
        "    return functools.partial(train_step, torch.ones(3, requires_grad=True))\n")
    test = ("import torch\n\n\ndef test_saliency():\n    x = torch.ones(3, requires_grad=True)\n"
            "    x.exp().sum().backward(retain_graph=True)\n    assert x.grad.sum() > 0\n\n\n"
            "def test_training(step):\n    step(torch.ones(3))\n")
    pytester.makepyfile(test_cst=test)
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=2)
    assert section(result)[0].startswith("1 retain_graph=True call site not needed"), \
        section(result)
    pytester.makepyfile(test_cst=test.replace("retain_graph=True", ""))
    run(pytester).assert_outcomes(passed=2)  # the truth: not needed


PARAMETRIZED = """
import pytest
import torch


def twice(loss):
    loss.backward()
keep = str


@pytest.mark.parametrize("then", ["keep", "twice"])  # (by name: a function handed on as a
def test_steps(then):  # value is searched whole, and kept for that reason first)
    w = torch.ones(2, requires_grad=True)
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    globals()[then](loss)
"""


@pytest.mark.parametrize("how", ["deselected", "skipped"])
def test_a_test_that_did_not_run_keeps_every_site_it_may_reach(project, how):
    """rev35b NEW-6: a helper that only a deselected test (``-m "not slow"``) needs the flag
    for looked not needed in the tests that ran; rev37b S4: so did one that only a test
    skipped on this machine needs (a GPU test on a CPU runner). While a test was not
    audited, every site is kept: it may call a helper, or another test's function (rev39b
    G3c, G3d: super().test_step(), test_step("cuda")), or run the same one (a parameter)."""
    why = ("could not tell (1 test(s) not audited, deselected, skipped, left out or marked "
           "no_retaincheck, may reach this line)")
    if how == "deselected":
        result = run(project, "--retaincheck", "-k", "not two_losses")
        result.assert_outcomes(passed=2, deselected=1)
        counts = "2 tests audited, 1 deselected, 2 backward()/grad() calls seen"
    else:
        project.makepyfile(test_gpu="import pytest\n\n\n@pytest.mark.skip(reason='no GPU')\n"
                           "def test_on_the_gpu():\n    pass\n")
        result = run(project, "--retaincheck", "test_train.py::test_one_loss",
                     "test_train.py::test_inline", "test_gpu.py")
        result.assert_outcomes(passed=2, skipped=1)
        counts = "2 tests audited, 2 backward()/grad() calls seen"
    assert section(result) == [
        f"no retain_graph=True found not needed ({counts})",
        f"kept, not listed: helpers.py:9: {why}",
        f"kept, not listed: test_train.py:22: {why}",
    ]
    project.makepyfile(test_steps=PARAMETRIZED)
    if how == "deselected":
        result = run(project, "--retaincheck", "test_steps.py", "--deselect",
                     "test_steps.py::test_steps[twice]")
    else:
        project.makepyfile(test_steps=PARAMETRIZED.replace(
            '["keep", "twice"]', '["keep", pytest.param("twice", marks=pytest.mark.skip)]'))
        result = run(project, "--retaincheck", "test_steps.py")
    assert result.ret == 0
    assert section(result)[1:] == [f"kept, not listed: test_steps.py:14: {why}"]


INHERITED = """import pytest
import torch


class DeviceTests:
    def test_step(self):
        w = torch.ones(2, requires_grad=True)
        loss = (w * w).sum()
        loss.backward(retain_graph=True)
        globals()[THEN[self.device]](loss)


def twice(loss):
    loss.backward()


THEN = {"cpu": "keep", "cuda": "twice"}  # (by name, as in PARAMETRIZED)
keep = str


class TestCPU(DeviceTests):
    device = "cpu"


@pytest.mark.skip(reason="no GPU")
class TestCUDA(DeviceTests):
    device = "cuda"
"""


@pytest.mark.parametrize("how", ["module_skipped", "conftest_filter", "inherited", "maxfail",
                                 "super_call", "ignored_folder", "subtest"])
def test_tests_left_out_other_ways_keep_the_sites_they_may_reach(project, how):
    """rev38b G1: a module skipped whole at collection (importorskip); G2: a conftest that
    drops tests from the items itself (a --run-slow option), without pytest_deselected; G3:
    a skipped class that inherits the test function that ran; G5: tests that -x never
    started."""
    why = ("could not tell (1 test(s) not audited, deselected, skipped, left out or marked "
           "no_retaincheck, may reach this line)")
    if how == "maxfail":
        project.makepyfile(test_train="from helpers import one_loss\nimport torch\n\n\n"
                           "def test_once():\n    one_loss(torch.ones(3, requires_grad=True))\n\n\n"
                           "def test_broken():\n    assert False\n\n\n"
                           "def test_twice():\n    w = torch.ones(3, requires_grad=True)\n"
                           "    one_loss(w)\n    one_loss(w)\n")
        result = run(project, "--retaincheck", "-x")
        result.assert_outcomes(passed=1, failed=1)
        assert f"kept, not listed: helpers.py:9: {why}" in section(result)
        return
    if how in ("super_call", "subtest"):  # rev39b G3c, G6
        project.makepyfile(test_devices=INHERITED.replace(
            "    device = \"cuda\"\n",
            "    device = \"cuda\"\n\n    def test_step(self):\n        super().test_step()\n")
            if how == "super_call" else
            "import pytest\nimport torch\n\n\ndef test_devices(subtests):\n"
            "    with subtests.test(device='cuda'):\n        pytest.skip('no GPU')\n"
            "    with subtests.test(device='cpu'):\n"
            "        w = torch.ones(2, requires_grad=True)\n"
            "        (w * w).sum().backward(retain_graph=True)\n")  # (no loop: ran once)
        result = run(project, "--retaincheck", "test_devices.py")
        line = 9 if how == "super_call" else 10
        assert f"kept, not listed: test_devices.py:{line}: {why}" in section(result), \
            result.outlines
        return
    if how == "ignored_folder":  # rev39b G1d: a conftest's collect_ignore of a folder
        project.mkdir("gpu")
        (project.path / "gpu" / "test_gpu.py").write_text("def test_on_the_gpu():\n    pass\n")
        project.makeconftest("collect_ignore = ['gpu']\n")
        result = run(project, "--retaincheck")
        assert f"kept, not listed: helpers.py:9: {why}" in section(result), result.outlines
        return
    if how == "inherited":
        project.makepyfile(test_devices=INHERITED)
        result = run(project, "--retaincheck", "test_devices.py")
        result.assert_outcomes(passed=1, skipped=1)
        assert section(result)[1:] == [f"kept, not listed: test_devices.py:9: {why}"]
        return
    if how == "module_skipped":
        project.makepyfile(test_gpu="import pytest\n\npytest.skip('no GPU', "
                           "allow_module_level=True)\n")
        args = ["test_train.py", "test_gpu.py", "-k", "not two_losses"]
    else:
        project.makeconftest("def pytest_collection_modifyitems(items):\n"
                             "    items[:] = [i for i in items if 'two_losses' not in i.name]\n")
        args = []
    result = run(project, "--retaincheck", *args)
    assert result.ret == 0
    lines = section(result)
    assert lines[0].startswith("no retain_graph=True found not needed"), lines
    assert f"kept, not listed: helpers.py:9: {why}".replace(
        "(1 test(s)", "(2 test(s)" if how == "module_skipped" else "(1 test(s)") in lines, lines


def test_a_site_needed_by_one_test_is_never_reported(project):
    """one_loss's retain is not needed in test_one_loss; when another test needs it, it is
    not listed (removing it would break that test)."""
    project.makepyfile(
        test_more='''
import torch
from helpers import one_loss

def test_reuses(w=None):
    w = torch.ones(3, requires_grad=True)
    one_loss(w)
    torch.autograd.backward(torch.sigmoid(w).sum())
'''
    )
    # test_reuses's second backward builds a new graph: one_loss is still not needed
    result = run(project, "--retaincheck", "test_more.py", "test_train.py")
    assert "helpers.py:9  torch.sigmoid(w).sum().backward(retain_graph=True)" in section(result)
    helpers = HELPERS.replace(
        "torch.sigmoid(w).sum().backward(retain_graph=True)",
        "s = torch.sigmoid(w).sum()\n    s.backward(retain_graph=True)\n    return s",
    )
    project.makepyfile(helpers=helpers)
    project.makepyfile(
        test_more='''
import torch
from helpers import one_loss

def test_reuses():
    w = torch.ones(3, requires_grad=True)
    one_loss(w).backward()  # walks the retained graph again
'''
    )
    # (the listing is what is tested here: no rerun of the session, which costs a new
    # interpreter; the rerun is tested above and below)
    result = run(project, "--retaincheck-fail", "--retaincheck-skip-proof", "test_more.py",
                 "test_train.py")
    assert not any(line.startswith("helpers.py:") for line in section(result))
    assert result.ret == 6  # test_inline's own retain is still not needed


SHARED_FIXTURE = """import pytest
import torch


@pytest.fixture(scope="module")
def loss():
    w = torch.ones(3, requires_grad=True)
    return (w * 2).tanh().sum()


def test_first(loss):
    loss.backward(retain_graph=True)


def test_second(loss):
    loss.backward()


@pytest.fixture
def own_loss():
    return torch.ones(3, requires_grad=True).exp().sum()


def test_function_scoped(own_loss):
    own_loss.backward(retain_graph=True)


def test_last():
    pass
"""


def test_a_graph_that_outlives_its_test_is_never_reported(pytester, monkeypatch):
    """rev28b F1: a module-scoped fixture's loss, kept by test_first and walked by test_second,
    whose audit no longer watched test_first's graph: listed as not needed, and removing the
    flag failed test_second. A site whose kept graph still lives once its test is done (its
    locals and function-scoped fixtures gone) is not listed; a function-scoped one still is."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_shared=SHARED_FIXTURE)
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=4)
    listed = [line for line in section(result) if line.startswith("test_shared.py:")]
    assert listed == ["test_shared.py:25  own_loss.backward(retain_graph=True)"], result.outlines
    assert section(result)[-1] == (  # said, not dropped silently (rev29b N-n03)
        "kept, not listed: test_shared.py:12: looked not needed, but the graph outlived its test "
        "(a fixture of wider scope, a global, or an attribute of the test's class instance, "
        "which pytest keeps to the session's end, held it), and a later test may walk it unseen")


CLASSES = """import torch


class TestKept:
    def setup_method(self):
        self.loss = torch.ones(3, requires_grad=True).tanh().sum()

    def test_grad(self):
        self.loss.backward(retain_graph=True)


class TestDropped(TestKept):
    def teardown_method(self):
        del self.loss

    def test_grad(self):
        self.loss.backward(retain_graph=True)
"""


WALKED_AFTER = {
    "makereport": """
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and item.funcargs:  # the gradient's norm, for the report
        (g,) = torch.autograd.grad(item.funcargs["loss"], [item.funcargs["w"]])
        report.user_properties.append(("grad_norm", float(g.norm())))
    return report
""",
    "teardown": """
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if item.funcargs:  # after teardown: the loss still reaches the weights
        (g,) = torch.autograd.grad(item.funcargs["loss"], [item.funcargs["w"]])
        assert torch.isfinite(g).all()
    return result
""",
}


@pytest.mark.parametrize("hook", sorted(WALKED_AFTER))
def test_a_graph_walked_after_its_tests_audit_is_never_reported(pytester, monkeypatch, hook):
    """rev37b G4, G4b: a conftest's makereport wrapper (at the teardown report), or a teardown
    wrapper around the plugin's, walks the test's loss after the test's audit ended and
    before pytest drops the test's fixtures: the site was listed "not needed", and without
    the flag the run fails. The graph's nodes stay hooked until the test's protocol ends."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest("import pytest\nimport torch\n\n\n@pytest.fixture\ndef w():\n"
                          "    return torch.ones(3, requires_grad=True)\n\n\n@pytest.fixture\n"
                          "def loss(w):\n    return torch.tanh(w).sum()\n\n" + WALKED_AFTER[hook])
    pytester.makepyfile(test_walked="def test_step(w, loss):\n"
                        "    loss.backward(retain_graph=True)\n")
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=1)
    assert not any(line.startswith("test_walked.py:") for line in section(result)), \
        result.outlines
    pytester.makepyfile(test_walked="def test_step(w, loss):\n    loss.backward()\n")
    result = run(pytester)  # the truth: without the flag, the hook's walk fails
    assert "backward through the graph a second time" in result.stdout.str()


def test_a_graph_kept_on_a_test_class_instance_outlives_its_test(pytester, monkeypatch):
    """rev34b F10: pytest keeps each test's class instance to the session's end, so a graph on
    ``self`` outlives its test and is not listed; the docs' advice, ``del self.loss`` in
    ``teardown_method``, gets the site listed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_classes=CLASSES)
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=2)
    lines = section(result)
    assert [line for line in lines if line.startswith("test_classes.py:")] == [
        "test_classes.py:17  self.loss.backward(retain_graph=True)"]
    assert lines[-1].startswith("kept, not listed: test_classes.py:9: looked not needed, but "
                                "the graph outlived its test"), lines


def test_an_unknown_language_is_one_line_and_a_usage_error(pytester, monkeypatch):
    """rev28b F2: RETAINCHECK_LANG=fr gave pytest's INTERNALERROR, a 28-line traceback, exit 3."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("RETAINCHECK_LANG", "fr")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = run(pytester, "--retaincheck")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines + result.errlines
    assert [line for line in result.errlines if line] == [
        "ERROR: RETAINCHECK_LANG: unknown language 'fr' (use en or zh)"]


def test_a_site_is_named_from_the_sessions_folder_whatever_the_tests_cwd(pytester,
                                                                         monkeypatch):
    """rev28b F10: an example script copied to tmp_path and run there (monkeypatch.chdir) was
    listed as `train.py:5`, a name the project's own train.py would have."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (pytester.path / "examples").mkdir()
    (pytester.path / "examples" / "train.py").write_text(
        "import torch\n\nx = torch.ones(3, requires_grad=True)\n"
        "z = x.exp().sum()\nz.backward(retain_graph=True)\n")
    # (copied with its time: a file written during the audit is code the program generated)
    pytester.makepyfile(test_example=(
        "import pathlib\nimport runpy\nimport shutil\n\n\n"
        "def test_example(tmp_path, monkeypatch):\n"
        "    shutil.copy2(pathlib.Path(__file__).parent / 'examples' / 'train.py', tmp_path)\n"
        "    monkeypatch.chdir(tmp_path)\n"
        "    runpy.run_path(str(tmp_path / 'train.py'), run_name='__main__')\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=1)
    listed = [line for line in section(result) if "z.backward(retain_graph=True)" in line]
    assert len(listed) == 1, result.outlines
    name = listed[0].split()[0]
    assert name.endswith("/train.py:5") and not name.startswith("train.py"), name


def test_a_test_that_could_not_tell_keeps_the_site_and_a_skipped_test_is_not_audited(
        pytester, monkeypatch):
    """rev28b N4: a site "could not tell: kept" in one test (a backward() next to it that did
    not run there) and "not needed" in another was listed: the plugin kept only what a test
    found needed. N5: a test skipped before it ran counted as audited."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_step=(
        "import pytest\nimport torch\n\n\n"
        "def step(loss, extra=None):\n"
        "    loss.backward(retain_graph=True)\n"
        "    if extra is not None:\n"
        "        extra.backward()  # another graph: walks nothing of loss's\n\n\n"
        "def test_with_extra():\n"
        "    w = torch.ones(3, requires_grad=True)\n"
        "    step(w.exp().sum(), w.sin().sum())\n\n\n"
        "def test_without():\n"
        "    w = torch.ones(3, requires_grad=True)\n"
        "    step(w.exp().sum())\n\n\n"
        "@pytest.mark.skip(reason='not today')\n"
        "def test_skipped():\n"
        "    pass\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=2, skipped=1)
    lines = section(result)
    assert not any(line.startswith("test_step.py:6") for line in lines), result.outlines
    assert "(2 tests audited, 3 backward()/grad() calls seen)" in lines[0], lines


def test_failed_tests_do_not_count_and_a_marker_opts_out(project):
    project.makepyfile(
        test_train=TESTS.replace("assert torch.allclose", "assert not torch.allclose")
        + '''

@pytest.mark.no_retaincheck
def test_own_audit(w):
    import retaincheck

    with retaincheck.audit() as report:
        torch.cos(w).sum().backward(retain_graph=True)
    assert len(report.calls) == 1
'''
    )
    result = run(project, "--retaincheck-fail")
    result.assert_outcomes(passed=3, failed=1)
    assert result.ret == 1  # the failed test's status, not 6
    lines = section(result)
    assert "test_train.py:22  loss.backward(retain_graph=True)" not in lines
    # the marked test ran unaudited, and may reach the helper (rev38b G4): kept
    assert lines == [
        "no retain_graph=True found not needed (3 tests audited, 4 backward()/grad() calls "
        "seen)",
        "kept, not listed: helpers.py:9: could not tell (1 test(s) not audited, deselected, "
        "skipped, left out or marked no_retaincheck, may reach this line)"]


IMPORT_STYLES = {
    "conftest": '''
from torch.autograd import backward as early_backward  # bound at collection, before any audit

def helper_backward(loss):
    early_backward(loss, retain_graph=True)
''',
    "test_styles": '''
import torch
import torch.autograd as ag
from torch.autograd import grad
from conftest import helper_backward

g = torch.autograd.grad  # bound at import time
tb = torch.Tensor.backward

def test_name_import():
    x = torch.ones(3, requires_grad=True)
    grad(torch.tanh(x).sum(), x, retain_graph=True)

def test_module_alias():
    x = torch.ones(3, requires_grad=True)
    ag.grad(torch.exp(x).sum(), x, retain_graph=True)

def test_alias_bound_at_import():
    x = torch.ones(3, requires_grad=True)
    g(torch.sigmoid(x).sum(), x, retain_graph=True)

def test_conftest_helper():
    x = torch.ones(3, requires_grad=True)
    helper_backward(torch.sin(x).sum())

def test_tensor_backward_bound_early():
    x = torch.ones(3, requires_grad=True)
    tb(torch.cos(x).sum(), retain_graph=True)

def test_needed_through_early_names():
    x = torch.ones(3, requires_grad=True)
    y = torch.tanh(x).sum()
    g(y, x, retain_graph=True)  # site: needed
    grad(y, x)
''',
}


def test_every_call_is_seen_whatever_the_import_style(pytester, monkeypatch):
    """Issue 27: names bound before the audit (at collection) used to go unaudited while the
    summary still counted their tests; the audit now stands in front of the engine."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(**IMPORT_STYLES)
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=6)
    lines = section(result)
    assert lines[0] == (
        "5 retain_graph=True call sites not needed (6 tests audited, 7 backward()/grad() calls "
        "seen):"
    ), lines
    listed = {line.split("  ")[0] for line in lines[1:] if not line.startswith(" ")}

    def site(name, text):
        source = (pytester.path / f"{name}.py").read_text().splitlines()
        return f"{name}.py:{next(i for i, line in enumerate(source, 1) if text in line)}"

    assert listed == {
        site("test_styles", "grad(torch.tanh"),
        site("test_styles", "ag.grad("),
        site("test_styles", "g(torch.sigmoid"),
        site("test_styles", "tb(torch.cos"),
        site("conftest", "early_backward(loss"),
    }, lines  # and not the needed one


def test_the_plugin_is_declared_as_a_pytest11_entry_point():
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\nretaincheck = "retaincheck.pytest_plugin"' in text


GRAPHDEBUG = {
    "graphdebug.py": "def saved_output(t):\n    return t.grad_fn._saved_result\n",
    "test_x.py": '''
import torch
from graphdebug import saved_output


def test_sigmoid_saved():
    x = torch.ones(4, requires_grad=True)
    y = x.sigmoid()
    y.sum().backward(retain_graph=True)
    assert torch.equal(saved_output(y), y)
''',
}


def test_a_helper_imported_before_the_audit_is_searched(pytester, monkeypatch):
    """Issue 27 F4: the test module imports a helper of the project that reads a saved tensor;
    the helper was imported at collection, before any test's audit. The flag is needed (the
    test fails without it), so it must never be listed as not needed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.syspath_prepend(pytester.path)
    pytester.makepyfile(**GRAPHDEBUG)
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result) == [
        "no retain_graph=True found not needed (1 test audited, 1 backward()/grad() call seen)",
        "kept, not listed: test_x.py:8: could not tell (saved tensors may be read at "
        "graphdebug.py:2)",  # said, with its reason (rev34b F7)
    ]
    # the truth: without the flag the test fails with the freed-graph error
    pytester.makepyfile(test_x=GRAPHDEBUG["test_x.py"].replace("retain_graph=True", ""))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert any("backward through the graph a second time" in line for line in result.outlines)


def test_the_module_named_with_p_beside_the_installed_entry_point(pytester, monkeypatch):
    """Issue 27 B2: with the package installed (its pytest11 entry point, autoloaded) and the
    module named with ``-p`` as well, as a CI config written for both setups does, pluggy
    refused to register the module a second time under the other name and pytest stopped."""
    from importlib.metadata import entry_points

    assert [ep.value for ep in entry_points(group="pytest11", name="retaincheck")] == [
        "retaincheck.pytest_plugin"
    ], "the package is not installed: pip install -e .[test]"
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    pytester.makepyfile(test_one=(
        "import torch\n\n\ndef test_one():\n    w = torch.ones(3, requires_grad=True)\n"
        "    torch.exp(w).sum().backward(retain_graph=True)\n"
    ))
    result = pytester.runpytest_inprocess(
        "-p", "retaincheck.pytest_plugin", "--retaincheck", "-p", "no:cacheprovider",
        "-p", "no:xdist", "-p", "no:randomly", "-W", "ignore::pytest.PytestAssertRewriteWarning",
    )
    assert result.ret == 0, result.outlines
    assert "1 retain_graph=True call site not needed (1 test audited" in result.stdout.str()


@pytest.mark.proof
def test_a_helper_imported_before_the_audit_counts_as_a_walk(pytester, monkeypatch):
    """rev27m S1: a conftest's helper that calls backward(), imported by the test module at
    collection (before each test's audit began), called on a path this run did not take: the
    site may be walked again there, so it is never "not needed" (no 6, even unproven)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest("def extra_walk(y):\n    y.backward()\n")
    pytester.makepyfile(test_c=(
        "import os\nimport torch\nfrom conftest import extra_walk\n\n\n"
        "def test_extra():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    y = (x * x).sum()\n"
        "    y.backward(retain_graph=True)\n"
        "    if os.environ.get('EXTRA'):\n"
        "        extra_walk(y)\n"
    ))
    result = run(pytester, "--retaincheck-fail", "--retaincheck-skip-proof")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[0].startswith("no retain_graph=True found not needed"), result.outlines


@pytest.mark.proof
def test_a_session_started_with_plugin_objects_is_not_proven(pytester, monkeypatch):
    """rev27o R4: pytest.main(args, plugins=[...]) from the user's own code: the rerun
    (python -m pytest args) would run without those objects, so it proves nothing."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_one=(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n"
    ))

    class Strict:  # a plugin object of the user's
        def pytest_configure(self, config):
            pass

    result = run(pytester, "--retaincheck-fail", plugins=[Strict()])
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1] == (
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: pytest was started "
        "from other code (pytest.main, a script), which a rerun of python -m pytest does not "
        "repeat")


@pytest.mark.proof
def test_the_pytest_gate_does_not_start_from_what_the_session_left(pytester, monkeypatch):
    """rev27q Q1: a test that checks a file the audited session wrote took another path in the
    rerun; the plugin's proof watches the session's folder as the command line's does."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_state=(
        "import os\nimport torch\n\n\ndef test_state():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    z = x.exp()\n"
        "    z.sum().backward(retain_graph=True)\n"
        "    if not os.path.exists('done.txt'):\n"
        "        getattr(z.grad_fn, ''.join(reversed('tluser_devas_')))\n"
        "        open('done.txt', 'w').close()\n"
    ))
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1].startswith(  # done.txt set aside: the rerun's first path
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the rerun failed"
    ), result.outlines
    assert (pytester.path / "done.txt").exists()  # put back


@pytest.mark.proof
def test_the_pytest_gate_starts_from_the_folder_and_environment_before_the_conftest(
        pytester, monkeypatch):
    """rev27s N3: a file a conftest writes when pytest imports it (before pytest_configure)
    was taken for the folder's first state; rev27s N2: a variable a test sets for the rest of
    the session was in the rerun's environment from its start."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("FAST_TESTS", raising=False)  # the inner session sets it for good
    pytester.makeconftest(
        "import os\n\nFRESH = not os.path.exists('data_cache.json')\n"
        "open('data_cache.json', 'w').close()\n")
    body = (
        "import os\nimport torch\n\n\ndef test_{name}():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    z = x.exp()\n"
        "    z.sum().backward(retain_graph=True)\n"
        "    if {first}:\n"
        "        getattr(z.grad_fn, ''.join(reversed('tluser_devas_')))\n"
        "    os.environ['FAST_TESTS'] = '1'\n")
    pytester.makepyfile(test_cache=body.format(
        name="cache", first="__import__('conftest').FRESH"))
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1].startswith(  # data_cache.json set aside for the rerun
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the rerun failed"
    ), result.outlines
    (pytester.path / "conftest.py").unlink()
    (pytester.path / "data_cache.json").unlink()
    (pytester.path / "test_cache.py").unlink()
    os.environ.pop("FAST_TESTS")  # set by the session above (monkeypatch restores it after)
    pytester.makepyfile(test_env=body.format(
        name="env", first="os.environ.get('FAST_TESTS') != '1'"))
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert "NOT proven: the rerun failed" in section(result)[-1] or "the rerun exited with " \
        "status 1" in section(result)[-1], result.outlines


def test_only_pytests_own_entry_points_count_as_a_plain_session(tmp_path):
    """rev27s N4: a project's runner script named `pytest` (it sets a default dtype, then calls
    pytest.main) passed for pytest's console script; the rerun skipped its setup."""
    from retaincheck.pytest_plugin import _console_script

    pip = tmp_path / "pip-pytest"
    pip.write_text(
        "#!/usr/bin/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
        "from pytest import console_main\nif __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(console_main())\n")
    assert _console_script(str(pip))
    uv = tmp_path / "uv-pytest"  # rev28b F8: uv's was taken for a wrapper of the project's
    uv.write_text(
        "#!/tmp/venv/bin/python\n# -*- coding: utf-8 -*-\nimport sys\n"
        "from _pytest.config import _console_main\nif __name__ == \"__main__\":\n"
        "    if sys.argv[0].endswith(\"-script.pyw\"):\n"
        "        sys.argv[0] = sys.argv[0][:-11]\n"
        "    elif sys.argv[0].endswith(\".exe\"):\n"
        "        sys.argv[0] = sys.argv[0][:-4]\n"
        "    sys.exit(_console_main())\n")
    assert _console_script(str(uv))
    long = tmp_path / "long-pytest"  # rev29b F-n12: pip's sh wrapper, a long venv path
    long.write_text("#!/bin/sh\n'''exec' '/very/long/venv/bin/python' \"$0\" \"$@\"\n"
                    "' '''\n" + pip.read_text().split("\n", 1)[1])
    assert _console_script(str(long))
    own = tmp_path / "pytest"
    own.write_text("#!/usr/bin/env python3\nimport sys\nimport torch\n"
                   "torch.set_default_dtype(torch.float64)\nimport pytest\n"
                   "sys.exit(pytest.main(sys.argv[1:]))\n")
    assert not _console_script(str(own))


@pytest.mark.proof
def test_a_session_whose_tests_could_read_standard_input_is_not_proven(pytester, monkeypatch):
    """rev27q Q5: with -s a test read the session's piped input, which the rerun (standard
    input /dev/null) did not get. Under pytest's default fd capture fd 0 is /dev/null."""
    import retaincheck.pytest_plugin as plugin

    for stdin, readable in [("echo check |", True), ("< /dev/null", False)]:
        probe = subprocess.run(
            f"{stdin} {sys.executable} -c 'from retaincheck.pytest_plugin import "
            "_stdin_readable; print(_stdin_readable())'", shell=True, capture_output=True,
            text=True, check=True)
        assert probe.stdout.strip() == str(readable)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr(plugin, "_stdin_readable", lambda: True)
    pytester.makepyfile(test_one=(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n"
    ))
    result = run(pytester, "--retaincheck-fail", "-s")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1] == (
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the tests could read "
        "the session's standard input (-s), which a rerun does not get again")


CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from pytest import console_main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(console_main())
"""


@pytest.mark.proof
def test_the_console_script_is_rerun_as_itself_and_the_report_stays(tmp_path):
    """rev27s N11: `pytest tests/` has the script's folder first on sys.path, not the working
    folder as `python -m pytest` (the rerun) had: a test that imports a module of the working
    folder when it can took another path in the rerun. W4: the rerun overwrote --junitxml."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pytest").write_text(CONSOLE_SCRIPT.format(python=sys.executable))
    (tmp_path / "tools_cfg.py").write_text("FAST = True\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(
        "import torch\n\n\ndef test_m():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    z = x.exp()\n"
        "    z.sum().backward(retain_graph=True)\n"
        "    try:\n        import tools_cfg  # noqa: F401\n    except ImportError:\n"
        "        getattr(z.grad_fn, ''.join(reversed('tluser_devas_')))\n")
    (tmp_path / "report.xml").write_text("a previous run's\n")  # changed, not made: no set-aside
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTHONPATH", None)
    run = subprocess.run(
        [sys.executable, "bin/pytest", "-q", "-p", "retaincheck.pytest_plugin",
         "--retaincheck-fail", "-p", "no:cacheprovider", "--junitxml=report.xml", "tests"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert "1 passed" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    assert "NOT proven: the rerun failed" in run.stdout, run.stdout
    assert 'failures="0"' in (tmp_path / "report.xml").read_text()


@pytest.mark.parametrize("order", ["--lf", "--ff", "--nf", "--sw"])
def test_an_order_that_pytests_cache_decides_is_not_proven(pytester, monkeypatch, order):
    """rev27w P24: with --lf, --ff, --nf or --sw the cache picks which tests run and in what
    order, and the audited session has changed the cache: the rerun would not repeat it."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_one=(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n"
    ))
    result = pytester.runpytest_inprocess(  # run() turns the cache off: these need it
        "-p", "retaincheck.pytest_plugin", "-p", "no:xdist",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", order, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1] == (
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the tests ran in an "
        "order pytest's cache decides (--lf, --ff, --nf, --sw), which a rerun does not repeat"
    ), result.outlines


@pytest.mark.proof
def test_a_project_plugin_imported_before_the_snapshot_is_not_proven(pytester, monkeypatch):
    """rev27u P10-P12: a plugin of the project (-p, PYTEST_PLUGINS, addopts) imported before
    retaincheck's first snapshot built a cache file at import: the file was in the "before"
    snapshot, neither set aside nor watched, and the rerun took the cached path."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.syspathinsert()
    pytester.makepyfile(pytest_dataplug=(
        "import os\n\nFRESH = not os.path.exists('data_cache.json')\n"
        "open('data_cache.json', 'w').close()\n"))
    pytester.makepyfile(test_one=(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n"
    ))
    result = run(pytester, "-p", "pytest_dataplug", "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1] == (
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the project's plugin "
        "pytest_dataplug was imported before retaincheck's, so what it did to the folder was "
        "not seen"), result.outlines


@pytest.mark.proof
def test_a_tests_thread_still_running_makes_the_pytest_proof_not_hold(pytester, monkeypatch):
    """rev27t T01 under the pytest gate: a test's autosave thread went on rewriting the result
    the rerun resumed from; a thread running the project's code at the session's end makes
    the proof not hold."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_one=(
        "import functools\nimport threading\nimport time\n\nimport torch\n\n\n"
        "def autosave():\n    for _ in range(100):\n        time.sleep(0.05)\n\n\n"
        "def test_one():\n"
        "    threading.Thread(target=functools.partial(autosave), daemon=True).start()\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n"
    ))
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.outlines
    assert section(result)[-1].startswith(
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: part of the program "
        "was still running when it ended (thread "), result.outlines


SLOW_TEST = """import os
import time

import torch


def test_a():
    w = torch.ones(3, requires_grad=True)
    (w * 2).exp().sum().backward(retain_graph=True)
    if os.environ.get("RETAINCHECK_PROOF_SPEC"):  # the gate's rerun: long enough for a Ctrl-C
        open("rerun-started", "w").close()
        time.sleep(30)
"""


@pytest.mark.proof
def test_ctrl_c_during_the_pytest_gates_rerun_is_pytests_interrupt(tmp_path):
    """rev28b F5: Ctrl-C during the gate's rerun ended pytest with a 90-line traceback through
    retaincheck; now the section says the rerun was interrupted and pytest exits 2."""
    from test_retaincheck_cli import ctrl_c_during_the_rerun

    (tmp_path / "test_slow.py").write_text(SLOW_TEST)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    code, out, err = ctrl_c_during_the_rerun(
        [sys.executable, "-m", "pytest", "-q", "-p", "retaincheck.pytest_plugin",
         "-p", "no:cacheprovider", "--retaincheck-fail", "test_slow.py"], tmp_path, env)
    assert code == pytest.ExitCode.INTERRUPTED, out + err
    assert "NOT proven: the rerun was interrupted (Ctrl-C)" in out, out + err
    assert "Traceback" not in out + err


@pytest.mark.proof  # two sessions, each with its rerun
def test_the_sessions_own_log_and_report_in_the_folder_are_not_the_tests(tmp_path):
    """rev28b F3: `pytest --retaincheck-fail > pytest.log` in the project folder, and a second
    session with --junitxml=report.xml: pytest's collection lists the folder, the log and the
    report had changed, and the gate was never proven."""
    (tmp_path / "test_one.py").write_text(
        "import torch\n\n\ndef test_one(tmp_path):\n"
        "    (tmp_path / 'scratch.txt').write_text('pytest\\'s own temporary folder')\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    for _ in range(2):  # (--basetemp in the folder: pytest's, emptied by each session)
        with open(tmp_path / "pytest.log", "w") as log:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "retaincheck.pytest_plugin",
                 "-p", "no:cacheprovider", "--junitxml=report.xml", "--basetemp=.pytest_tmp",
                 "--retaincheck-fail"],
                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=180,
                check=False)
        text = (tmp_path / "pytest.log").read_text()
        assert proc.returncode == 6, text
        assert "proven: the rerun exited 0 as the audited run did" in text, text


@pytest.mark.proof  # a session and its rerun, with the installed plugins
def test_warnings_as_errors_do_not_fail_the_rerun(tmp_path):
    """rev28b F14: with filterwarnings = error the rerun failed on pytest's warning that
    retaincheck (imported by the rerun's start) could not be rewritten: "the tests fail
    without it", though they pass."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    (tmp_path / "test_one.py").write_text(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n")
    env = {k: v for k, v in os.environ.items()  # this suite's own xdist workers: not there
           if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD" and not k.startswith("PYTEST_XDIST")}
    proc = subprocess.run(  # (pytest-benchmark warns under xdist: an error here)
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-p", "no:benchmark", "--retaincheck-fail"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "proven: the rerun exited 0 as the audited run did" in proc.stdout, proc.stdout


@pytest.mark.proof  # a session and its rerun
def test_the_rerun_leaves_pytests_cache_as_the_session_left_it(tmp_path):
    """rev28b F7: a refuted rerun recorded its failure in the user's .pytest_cache (lastfailed),
    so `pytest --lf` then ran a test that never failed. The rerun reads and writes a copy of
    the cache as the session found it."""
    (tmp_path / "test_one.py").write_text(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n    z = x.exp()\n"
        "    z.sum().backward(retain_graph=True)\n"
        "    getattr(z.grad_fn, ''.join(reversed('tluser_devas_')))  # hidden from the audit\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "retaincheck.pytest_plugin",
         "--retaincheck-fail"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT proven: the rerun failed" in proc.stdout, proc.stdout
    lastfailed = tmp_path / ".pytest_cache" / "v" / "cache" / "lastfailed"
    assert not lastfailed.exists() or "test_one" not in lastfailed.read_text()


@pytest.mark.proof  # a session and its rerun
def test_a_log_kept_with_tee_in_the_folder_is_not_the_tests(tmp_path):
    """rev29b: `pytest --retaincheck-fail 2>&1 | tee -a ci.log` in the project folder: tee's
    log grew during the session, pytest's collection listed the folder, and the gate said the
    rerun read what "the audited run had written"."""
    (tmp_path / "test_one.py").write_text(
        "import torch\n\n\ndef test_one():\n"
        "    x = torch.ones(3, requires_grad=True)\n"
        "    (x * x).sum().backward(retain_graph=True)\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m pytest -q -p retaincheck.pytest_plugin '
         '-p no:cacheprovider --retaincheck-fail 2>&1 | tee -a ci.log; '
         'exit "${PIPESTATUS[0]}"'], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=180, check=False)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "proven: the rerun exited 0 as the audited run did" in proc.stdout, proc.stdout


SAVED_READ_EXAMPLE = """>>> import torch
>>> w = torch.ones(3, requires_grad=True)
>>> y = (w * 2).exp().sum()
>>> node = y.grad_fn.next_functions[0][0]
>>> y.backward(retain_graph=True)
>>> node._saved_result.shape
torch.Size([3])
"""


def test_a_saved_tensor_read_in_a_doctest_or_a_markdown_fence_keeps_the_site(pytester,
                                                                              monkeypatch):
    """rev30b F-x5: a doctest example (compiled and run by the standard library's doctest)
    that reads a saved tensor after the retaining backward() was not seen; rev30b F-x4: a
    Markdown fence that pytest-markdown-docs compiles under the Markdown file's name was
    searched as that file, which is not Python. Both sites were listed "not needed"; without
    the flag both tests fail. A fence with no read is still listed."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makefile(".txt", guide=SAVED_READ_EXAMPLE)
    fence = SAVED_READ_EXAMPLE.replace(">>> ", "").replace("torch.Size([3])\n", "")
    plain = "".join(line for line in fence.splitlines(True) if "node" not in line) + "w.grad\n"
    pytester.makefile(".md", README=f"# Saved tensors\n\n```python\n{fence}```\n\n```python\n"
                      f"{plain}```\n")
    result = run(pytester, "-p", "pytest_markdown_docs", "--markdown-docs",
                 "--doctest-glob=*.txt", "--retaincheck", "guide.txt", "README.md")
    result.assert_outcomes(passed=3)
    listed = [line for line in section(result) if "backward(retain_graph=True)" in line]
    assert listed == ["README.md:16  y.backward(retain_graph=True)"], result.outlines


def test_a_flag_written_elsewhere_in_a_doctest_or_a_markdown_fence_is_not_listed(pytester,
                                                                               monkeypatch):
    """rev34b F8, F4b: a fence (run under the Markdown file's name, which is not Python) and a
    doctest example (<doctest ...>) were never read for the not-literal-True rule, so
    retain_graph=keep was listed "not needed", and the fence's proven 6 broke a helper that
    steps only when not keeping. Their code is read from what Python keeps of it. rev34b
    F8b: nor was a fence searched for a backward() that did not run (every 50th step)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    step = ("import torch\n\ndef backward_step(loss, opt, keep):\n"
            "    loss.backward(retain_graph=keep)\n    if not keep:\n        opt.step()\n\n"
            "w = torch.nn.Parameter(torch.ones(3))\nopt = torch.optim.SGD([w], lr=0.1)\n"
            "backward_step((torch.tanh(w) * 2).sum(), opt, True)\n"
            "backward_step((w ** 2).sum(), opt, False)\n")
    periodic = ("import torch\n\nw = torch.nn.Parameter(torch.ones(3))\n"
                "for step in range(5):  # 50 for a real run\n    loss = torch.tanh(w).sum()\n"
                "    loss.backward(retain_graph=True)\n    if step % 50 == 49:\n"
                "        loss.backward()\n")
    pytester.makefile(".md", README=f"# Accumulate\n\n```python\n{step}```\n\n"
                      f"# Every 50th step\n\n```python\n{periodic}```\n")
    pytester.makefile(".txt", guide=">>> import torch\n>>> keep = True\n"
                      ">>> w = torch.ones(3, requires_grad=True)\n"
                      ">>> (torch.tanh(w) * 2).sum().backward(retain_graph=keep)\n")
    result = run(pytester, "-p", "pytest_markdown_docs", "--markdown-docs",
                 "--doctest-glob=*.txt", "--retaincheck", "guide.txt", "README.md")
    result.assert_outcomes(passed=3)
    assert section(result)[0].startswith("no retain_graph=True found not needed"), \
        result.outlines


def test_a_session_fixtures_spy_on_grad_outlives_each_tests_audit(pytester, monkeypatch):
    """rev34b F9: a session fixture set up in the first test wrapped torch.autograd.grad (a
    call counter), over that test's audit; the audit's end put back what it had replaced and
    dropped the counter, so the second test failed only under the plugin. The audit now puts
    back only what is still its own, and its wrapper left inside another passes calls on."""
    monkeypatch.setattr(torch.autograd, "grad", torch.autograd.grad)  # this process's, after
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        "import pytest\nimport torch\n\n\n@pytest.fixture(scope='session')\n"
        "def grad_calls():\n    calls, original = [], torch.autograd.grad\n\n"
        "    def counting(*args, **kwargs):\n        calls.append(1)\n"
        "        return original(*args, **kwargs)\n\n"
        "    torch.autograd.grad = counting\n    yield calls\n"
        "    torch.autograd.grad = original\n")
    pytester.makepyfile(test_spy=(
        "import torch\n\n\ndef penalty():\n    w = torch.ones(3, requires_grad=True)\n"
        "    (g,) = torch.autograd.grad(torch.tanh(w).sum(), w, retain_graph=True)\n\n\n"
        "def test_one(grad_calls):\n    penalty()\n    assert len(grad_calls) == 1\n\n\n"
        "def test_two(grad_calls):\n    penalty()\n    assert len(grad_calls) == 2\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=2)
    # both calls audited; the site is the spy's own line, which passes the flag on (**kwargs)
    assert section(result) == [
        "no retain_graph=True found not needed (2 tests audited, 2 backward()/grad() calls seen)",
        "kept, not listed: conftest.py:11: could not tell (the flag is not the literal True here: "
        "it comes from another line)"], result.outlines


def _under_one_xdist_worker(folder, *args: str) -> subprocess.CompletedProcess:
    """``pytest --retaincheck -n 1 args...`` in ``folder``, a new interpreter with the
    installed plugins (not this suite's own xdist worker's variables)."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD" and not k.startswith("PYTEST_XDIST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
         "-p", "no:randomly", "-n", "1", "--retaincheck", *args], cwd=folder, env=env,
        capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.proof  # a session with an xdist worker (a new interpreter that imports torch)
def test_under_xdist_a_conftest_that_moves_folder_still_keeps_an_outlived_graph(tmp_path):
    """rev30b F-x1: an xdist worker started after a conftest moved to the tests' folder named
    the outlived site from there (test_enc.py:13), the main process from its own folder
    (tests/test_enc.py:13): the site was listed "not needed", and without the flag the
    second test fails."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "import os\n\nos.chdir(os.path.dirname(os.path.abspath(__file__)))\n")
    (tests / "test_enc.py").write_text(
        "import pytest\nimport torch\n\n\n@pytest.fixture(scope='module')\ndef encoded():\n"
        "    w = torch.ones(3, requires_grad=True)\n    return w, (w * 2).exp()\n\n\n"
        "def test_head_a(encoded):\n    w, h = encoded\n"
        "    h.sum().backward(retain_graph=True)\n\n\n"
        "def test_head_b(encoded):\n    w, h = encoded\n    h.pow(2).sum().backward()\n")
    proc = _under_one_xdist_worker(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no retain_graph=True found not needed (2 tests audited" in proc.stdout, proc.stdout
    assert "kept, not listed: tests/test_enc.py:13: looked not needed" in proc.stdout


def test_a_flag_passed_through_a_mock_of_backward_is_kept(pytester, monkeypatch):
    """rev30b F-x10: a test that mocks Tensor.backward (autospec, side_effect: the real one)
    and asserts the call's arguments: the mock's line in unittest/mock.py was the site, "not
    needed" (and proven by turning graph-keeping off there), while the line that writes the
    flag is the trainer's, and without it the assertion fails."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_mocked=(
        "from unittest import mock\n\nimport torch\n\n\ndef step(w):\n"
        "    (w * 2).exp().sum().backward(retain_graph=True)\n\n\n"
        "def test_step_keeps_the_graph():\n    w = torch.ones(3, requires_grad=True)\n"
        "    with mock.patch.object(torch.Tensor, 'backward', autospec=True,\n"
        "                           side_effect=torch.Tensor.backward) as backward:\n"
        "        step(w)\n"
        "    backward.assert_called_once_with(mock.ANY, retain_graph=True)\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=1)
    assert section(result)[0].startswith("no retain_graph=True found not needed"), \
        result.outlines


def test_the_last_tests_graph_that_lives_to_the_sessions_end_is_not_listed(pytester,
                                                                           monkeypatch):
    """rev31b F-x20: the last test's graph, kept in a global, was walked by a conftest's
    pytest_sessionfinish; no next test looked at it, so it was listed "not needed", and
    without the flag the session's end fails. rev34b F5: a hook that then lets the graph go
    ran before the plugin looked."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        "import test_last\n\n\ndef pytest_sessionfinish(session):\n"
        "    if test_last.KEPT:\n        test_last.KEPT[0].backward()\n"
        "    test_last.KEPT.clear()\n")
    pytester.makepyfile(test_last=(
        "import torch\n\nKEPT = []\n\n\ndef test_last():\n"
        "    loss = torch.ones(3, requires_grad=True).exp().sum()\n"
        "    loss.backward(retain_graph=True)\n    KEPT.append(loss)\n"))
    pytester.syspathinsert()
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=1)
    assert section(result)[0].startswith("no retain_graph=True found not needed"), \
        result.outlines
    assert section(result)[1].startswith("kept, not listed: test_last.py:8")


def test_a_graph_a_hook_wrapper_walks_after_its_test_is_not_listed(pytester, monkeypatch):
    """rev35b p14: a conftest's pytest_runtest_protocol wrapper walks the losses a test
    registered, after the test, and lets them go; the plugin looked at the graph only at the
    next test's start, found it gone, and listed the site "not needed" (without the flag the
    wrapper fails). It looks as soon as the test's protocol is over."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        "import pytest\n\nKEY = pytest.StashKey[list]()\n\n\n@pytest.fixture\n"
        "def grad_check(request):\n    request.node.stash[KEY] = []\n"
        "    return request.node.stash[KEY]\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_protocol(item, nextitem):\n    yield\n"
        "    for loss in item.stash.get(KEY, []):\n        loss.backward()\n"
        "    item.stash.get(KEY, []).clear()\n")
    pytester.makepyfile(test_m=(
        "import torch\n\n\ndef test_one(grad_check):\n"
        "    loss = torch.ones(3, requires_grad=True).exp().sum()\n"
        "    loss.backward(retain_graph=True)\n    grad_check.append(loss)\n\n\n"
        "def test_two():\n    pass\n"))
    result = run(pytester, "--retaincheck")
    result.assert_outcomes(passed=2)
    assert section(result)[0].startswith("no retain_graph=True found not needed"), \
        result.outlines
    assert section(result)[1].startswith("kept, not listed: test_m.py:6")


@pytest.mark.proof  # a session with an xdist worker (a new interpreter that imports torch)
def test_under_xdist_a_workers_last_graph_alive_at_its_end_is_not_listed(tmp_path):
    """rev32b F-x20x: the last test's graph that lives to the session's end was left out in
    the process that ran it; under xdist that is a worker, whose list never reached the main
    process, and the site was listed "not needed". pytest_testnodedown carries it over."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "import test_last\n\n\ndef pytest_sessionfinish(session):\n"
        "    if test_last.KEPT:\n        test_last.KEPT[0].backward()\n")
    (tests / "test_last.py").write_text(
        "import torch\n\nKEPT = []\n\n\ndef test_last():\n"
        "    loss = torch.ones(3, requires_grad=True).exp().sum()\n"
        "    loss.backward(retain_graph=True)\n    KEPT.append(loss)\n")
    proc = _under_one_xdist_worker(tmp_path, "tests")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no retain_graph=True found not needed (1 test audited" in proc.stdout, proc.stdout
    assert "kept, not listed: tests/test_last.py:8" in proc.stdout


BACKWARD_IMPLS = '''
import pytest
import torch


def backward_twice_checked(tensors, retain_graph=False):
    """a backward of the project's own: the pass, then the same pass again, compared"""
    torch.autograd.backward(tensors, retain_graph=retain_graph)
    first = [p.grad.clone() for p in PARAMS]
    for p in PARAMS:
        p.grad = None
    torch.autograd.backward(tensors)
    assert all(torch.equal(a, p.grad) for a, p in zip(first, PARAMS))


PARAMS = []


@pytest.mark.parametrize("name", ["autograd", "backward_twice_checked"])  # (by name: a
def test_backward_impl(name):  # function handed on as a value would keep the site first)
    backward = torch.autograd.backward if name == "autograd" else globals()[name]
    w = torch.ones(3, requires_grad=True)
    PARAMS[:] = [w]
    loss = (w * 2).pow(2).sum()
    backward(loss, retain_graph=True)
    assert w.grad.shape == (3,)
'''


@pytest.mark.proof
def test_a_literal_flag_a_caller_line_passes_down_is_forced_off_in_the_rerun(pytester,
                                                                             monkeypatch):
    """rev43d P1: the literal line is torch's call in one parameter and hands its flag to a
    helper's torch.autograd.backward(tensors, retain_graph=retain_graph) in the other, which
    needs it. The rerun forced the flag off only where the innermost line of the program's
    was a forced one, so the helper's pass kept its graph, and the gate exited 6."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_impls=BACKWARD_IMPLS)
    result = run(pytester, "--retaincheck-fail")
    result.assert_outcomes(passed=2)
    assert result.ret == 0, result.outlines
    assert section(result)[-1].startswith(
        "--retaincheck-fail: the tests rerun without the flag: NOT proven: the rerun failed"), \
        section(result)
    # the truth: without the flag the helper's second pass fails
    pytester.makepyfile(test_impls=BACKWARD_IMPLS.replace(
        "backward(loss, retain_graph=True)", "backward(loss)"))
    run(pytester).assert_outcomes(passed=1, failed=1)


FINALIZED = {
    "test_fin.py": ("import os\nimport torch\n\nN = int(os.environ.get('N', '1'))\n\n\n"
                    "def test_cleanups(request):\n    w = torch.ones(3, requires_grad=True)\n"
                    "    loss = (w.exp() * w).sum()\n    for i in range(N):\n"
                    "        request.addfinalizer(lambda: loss.backward(retain_graph=True))\n"),
    "test_ut.py": ("import os\nimport unittest\n\nimport torch\n\n"
                   "N = int(os.environ.get('N', '1'))\n\n\nclass T(unittest.TestCase):\n"
                   "    def test_cleanups(self):\n        w = torch.ones(3, requires_grad=True)\n"
                   "        loss = (w.exp() * w).sum()\n        for i in range(N):\n"
                   "            self.addCleanup(lambda: loss.backward(retain_graph=True))\n"),
}


@pytest.mark.parametrize("name", sorted(FINALIZED))
def test_a_site_the_runner_calls_as_a_handed_cleanup_is_kept(pytester, monkeypatch, name):
    """rev69b A1: a backward() handed to pytest as a finalizer (request.addfinalizer) or to
    unittest as a cleanup (addCleanup), N times: the runner's loop over them runs it N times,
    on one graph. With N=1 it was "not needed" (the runner's loops were taken to run each
    test once); with N=2 and the flag removed the test fails. Kept now (with the runner's
    loops over handed functions not looked at, both forms failed)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(**{name[:-3]: FINALIZED[name]})
    result = run(pytester, "--retaincheck", name)
    result.assert_outcomes(passed=1)
    assert section(result)[:2] == [
        "no retain_graph=True found not needed (1 test audited, 1 backward()/grad() call seen)",
        f"kept, not listed: {name}:{11 if name == 'test_fin.py' else 14}: could not tell (its "
        "loop was not seen running it twice)"], result.outlines
    # the truth: two finalizers on one graph, the flag removed, fail; with it, pass
    monkeypatch.setenv("N", "2")
    assert run(pytester, name).ret == 0
    pytester.makepyfile(**{name[:-3]: FINALIZED[name].replace("retain_graph=True", "")})
    outcome = run(pytester, name)
    assert outcome.ret != 0 and "backward through the graph a second time" in str(
        outcome.outlines), outcome.outlines


HOOK_CLASS = ("import os\n\nimport pytest\nimport torch\n\n\n@pytest.fixture\ndef g():\n"
              "    x = torch.ones(3, requires_grad=True)\n    return (x * 2).exp()\n\n\n"
              "class Checker:\n    def pytest_runtest_call(self, item):\n"
              "        g = item.funcargs.get('g')\n        if g is not None:\n"
              "            g.sum().backward(retain_graph=True)\n\n\n"
              "def pytest_configure(config):\n"
              "    for k in range(int(os.environ.get('K', '1'))):\n"
              "        config.pluginmanager.register(Checker(), f'checker{k}')\n")


def test_a_site_in_a_hook_class_registered_once_per_count_is_kept(pytester, monkeypatch):
    """rev70b A1: a conftest's hook class registered as a plugin K times: pluggy's loop over
    the hook's implementations runs the site K times on one fixture's graph. With K=1 it was
    "not needed" (pluggy's loop was taken to call each implementation once); with K=2 and the
    flag removed the test fails. Kept now (with pluggy's loop passed over again, this
    failed)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(HOOK_CLASS)
    pytester.makepyfile(test_b="def test_x(g):\n    assert g.shape == (3,)\n")
    result = run(pytester, "--retaincheck", "test_b.py")
    result.assert_outcomes(passed=1)
    assert section(result)[:2] == [
        "no retain_graph=True found not needed (1 test audited, 1 backward()/grad() call seen)",
        "kept, not listed: conftest.py:17: could not tell (its loop was not seen running it "
        "twice)"], result.outlines
    monkeypatch.setenv("K", "2")  # the truth: two instances, the flag removed, fail
    assert run(pytester, "test_b.py").ret == 0
    pytester.makeconftest(HOOK_CLASS.replace("retain_graph=True", ""))
    outcome = run(pytester, "test_b.py")
    assert outcome.ret != 0 and "backward through the graph a second time" in str(
        outcome.outlines), outcome.outlines


def test_a_site_held_in_a_loop_its_watch_proved_is_listed_as_kept(pytester, monkeypatch):
    """rev74b A2: a loop the watch proved, where a later iteration walks a graph an earlier one
    left in a queue (kept: "a graph from an earlier iteration is held"): the reason was kept
    as the set of the site's looped stack shapes, and the plugin's JSON of the session's sites
    failed on it (INTERNALERROR, exit 3, with the test passing). Now a bool. (Without it, this
    failed so.)"""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_q=(
        "import queue\n\nimport torch\n\n\ndef test_queue():\n"
        "    w = torch.ones(3, requires_grad=True)\n    q = queue.SimpleQueue()\n"
        "    q.put(torch.tanh(w))\n    for i in range(2):\n        if i % 2 == 0:\n"
        "            h = q.get()\n            q.put(h)\n        else:\n"
        "            h = w + 0.0\n        h.sum().backward(retain_graph=True)\n"))
    result = run(pytester, "--retaincheck", "test_q.py")
    assert result.ret == 0, result.outlines
    assert section(result)[1] == ("kept, not listed: test_q.py:16: could not tell (a graph "
                                  "from an earlier iteration is held)"), result.outlines
