"""The pytest plugin: ``pytest --retaincheck`` audits every test.

Installed with the package (entry point ``pytest11``) and off unless asked for:

* ``--retaincheck`` runs each test (its fixtures' setup and teardown included) inside
  [`audit`][retaincheck.audit] and ends the run with a "retaincheck" section listing every
  ``retain_graph=True`` call site found not needed, with the tests that showed it, and how
  many tests and ``backward``/``grad`` calls were audited. Every call is seen whatever the
  import style (``from torch.autograd import grad`` in a test module or a conftest helper,
  ``import torch.autograd as ag``, ``g = torch.autograd.grad`` at import time): the audit
  stands in front of the engine's entry point, ``Variable._execution_engine.run_backward``.
* ``--retaincheck-fail`` does the same and makes a run whose tests all passed exit with
  status 6 when such a site was found, after a proof: as ``python -m retaincheck
  --fail-on-unneeded`` does, it first reruns the session (``python -m pytest`` with the same
  arguments, working directory and environment, in a new interpreter, the plugin off) with
  every such site's backward pass run without keeping its graph (``_proof_site``). A rerun
  that fails, or meets a freed-graph error even one a test catches, makes those sites needed;
  one that cannot be watched (a trace function of its own), or a site in code with no file,
  makes them "could not tell: kept"; either way the status stays as the tests left it. The
  proof costs one more run of the session. ``--retaincheck-skip-proof`` skips it, and the 6
  is then unproven.

A site counts as not needed only when a test that passed (setup, call and teardown) proved it
not needed and no test, passed or not, found it needed: a helper that one test needs the flag
for is never reported because another test does not. Tests that failed or were skipped are
audited, but their "not needed" verdicts are not final and are not reported. A test marked
``@pytest.mark.no_retaincheck`` is not audited (audits do not nest: use it on a test that runs
``retaincheck.audit()`` itself). Works with pytest-xdist: each worker audits its tests and the
findings travel to the main process with the test reports.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from ._messages import BadLang, default_lang, message  # noqa: E402

EXIT_UNNEEDED = 6  # as python -m retaincheck --fail-on-unneeded (see retaincheck.__main__)


def pytest_addoption(parser):
    group = parser.getgroup("retaincheck", "retaincheck: is each retain_graph=True needed?")
    group.addoption(
        "--retaincheck",
        action="store_true",
        default=False,
        help="audit every retain_graph=True in each test; list the ones not needed at the end",
    )
    group.addoption(
        "--retaincheck-fail",
        action="store_true",
        default=False,
        help="as --retaincheck, and exit with status 6 when one is not needed (and all tests "
        "passed)",
    )
    group.addoption(
        "--retaincheck-skip-proof",
        action="store_true",
        default=False,
        help="with --retaincheck-fail: exit with status 6 without first rerunning the session "
        "without those flags (the 6 is then unproven)",
    )
    group.addoption(
        "--retaincheck-lang",
        default=None,
        choices=["en", "zh"],
        help="the summary's language (default: $RETAINCHECK_LANG, else zh for a zh locale, "
        "else en), as python -m retaincheck --lang",
    )


# The names the plugin is loaded under: the entry point's (``pytest11``: ``retaincheck``) and
# the module's (``-p retaincheck.pytest_plugin``, ``PYTEST_PLUGINS``).
_NAMES = ("retaincheck", __name__)


def pytest_plugin_registered(plugin, plugin_name, manager):
    """Loaded under one name, the plugin blocks the other: pluggy refuses to register one
    module under two names ("Plugin already registered under a different name"), which
    ``-p retaincheck.pytest_plugin`` with the package installed would otherwise do."""
    if plugin is sys.modules[__name__] and plugin_name in _NAMES:
        for other in _NAMES:
            if other != plugin_name and manager.get_plugin(other) is None:
                manager.set_blocked(other)


_EARLY = pytest.StashKey[tuple]()


def _outputs_now() -> tuple[frozenset, frozenset]:
    """(device, inode) of standard output and error when they are files, and the inodes of
    those that are pipes: taken when pytest imports this module, before its capture replaces
    file descriptors 1 and 2."""
    import stat

    found, pipes = set(), set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
        elif stat.S_ISFIFO(st.st_mode):
            pipes.add(st.st_ino)
    return frozenset(found), frozenset(pipes)


# pytest > pytest.log in the folder is pytest's own (rev28b F3), as is | tee's log (rev29b)
_OUTPUTS, _OUTPUT_PIPES = _outputs_now()


def _own_outputs() -> frozenset:
    from ._proof import pipe_readers_files

    return _OUTPUTS | frozenset(pipe_readers_files(set(_OUTPUT_PIPES)))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """The session's folder and environment before any of its code ran, for the proof: pytest
    imports the first conftest files before ``pytest_configure`` (``Config._preparse``), and a
    conftest or a test may change both (rev27s N2, N3)."""
    known = early_config.known_args_namespace
    if (getattr(known, "retaincheck_fail", False) and not getattr(
            known, "retaincheck_skip_proof", False) and not hasattr(early_config, "workerinput")
            and not os.environ.get("RETAINCHECK_PROOF_SPEC")):
        import sysconfig

        from ._proof import open_fds, snapshot, start_state, watch_sockets

        installed = tuple(os.path.join(os.path.realpath(sysconfig.get_path(k)), "")
                          for k in ("stdlib", "platstdlib", "purelib", "platlib"))
        early = sorted(  # a plugin not installed (the project's, one on PYTHONPATH),
            # imported before this one (rev27u P10, rev27w P28)
            name for name, plugin in early_config.pluginmanager.list_name_plugin()
            if plugin is not sys.modules[__name__] and getattr(plugin, "__file__", None)
            and not os.path.realpath(plugin.__file__).startswith(installed))
        own = _own_outputs()
        early_config.stash[_EARLY] = (
            dict(os.environ), snapshot(str(early_config.invocation_params.dir), own),
            {**start_state(), "fds": sorted(open_fds()), "early": early}, own,
            _cache_files(early_config))
        watch_sockets()


CACHE_LIMIT = 16 << 20


def _cache_dir(config) -> str:
    """pytest's cache folder, as its cacheprovider finds it (``cache_dir``, from the rootdir)."""
    value = os.path.expanduser(os.path.expandvars(config.getini("cache_dir")))
    return os.path.join(str(config.rootpath), value)


def _cache_files(config) -> dict[str, bytes] | None:
    """pytest's cache as the session found it, for the rerun: the rerun reads it as the audited
    session did, and writes its own (a failure it records in ``lastfailed``: rev28b F7) to a
    copy, not to the user's cache. None when it holds over ``CACHE_LIMIT`` bytes."""
    found: dict[str, bytes] = {}
    if not config.pluginmanager.has_plugin("cacheprovider"):  # -p no:cacheprovider
        return found
    root = _cache_dir(config)
    size = 0
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    data = f.read(CACHE_LIMIT + 1)
            except OSError:
                continue
            size += len(data)
            if size > CACHE_LIMIT:
                return None
            found[os.path.relpath(path, root)] = data
    return found


def _console_script(path: str) -> bool:
    """Whether ``path`` is pytest's own console script as pip or uv writes it: a wrapper of the
    project's own named `pytest` may set up what a rerun of ``python -m pytest`` does not
    (rev27s N4)."""
    import re

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    # pip's wrapper for a long interpreter path (rev29b F-n12): /bin/sh execs the python
    text = re.sub(r"\A#!/bin/sh\n'''exec' .*\n' '''\n", "", text)
    code = "\n".join(line for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))
    pip = re.fullmatch(
        r"import re\nimport sys\nfrom (?:pytest|_pytest\.config) import (_?console_main|main)\n"
        r"if __name__ == .__main__.:\n"
        r"    sys\.argv\[0\] = re\.sub\(r.\(-script\\\.pyw\|\\\.exe\)\?\$., .., sys\.argv\[0\]\)\n"
        r"    sys\.exit\(\1\(\)\)", code)
    uv = re.fullmatch(  # uv's (rev28b F8): the same, its suffixes cut without re
        r"import sys\nfrom (?:pytest|_pytest\.config) import (_?console_main|main)\n"
        r"if __name__ == .__main__.:\n"
        r"    if sys\.argv\[0\]\.endswith\(.-script\.pyw.\):\n"
        r"        sys\.argv\[0\] = sys\.argv\[0\]\[:-11\]\n"
        r"    elif sys\.argv\[0\]\.endswith\(.\.exe.\):\n"
        r"        sys\.argv\[0\] = sys\.argv\[0\]\[:-4\]\n"
        r"    sys\.exit\(\1\(\)\)", code)
    return pip is not None or uv is not None


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "no_retaincheck: do not audit this test under pytest --retaincheck"
    )
    if os.environ.get("RETAINCHECK_PROOF_SPEC"):
        return  # the gate's rerun (below): the session runs plainly, as without the plugin
    if config.getoption("retaincheck") or config.getoption("retaincheck_fail"):
        auditor = _Plugin(config)
        config.pluginmanager.register(auditor, "retaincheck-auditor")
        config.pluginmanager.register(_Gate(auditor), "retaincheck-gate")


class _Gate:
    """The gate, after every other pytest_sessionfinish (the auditor's own runs first)."""

    def __init__(self, auditor):
        self.auditor = auditor

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self.auditor.gate(session)
        if self.auditor.failed and not session.config.pluginmanager.has_plugin(
                "terminalreporter"):
            # -p no:terminal: no section is printed; the 6 still says why (rev37b N5)
            print(message("p_fail_quiet", self.auditor.lang, status=EXIT_UNNEEDED,
                          sites=", ".join(sorted(self.auditor.unneeded()))), file=sys.stderr)


def _holds_tests(path, config) -> bool:
    """Whether a path pytest was told to leave out holds test files: a file named as
    ``python_files`` says, or a folder (not hidden, not a virtual environment, not one of
    ``norecursedirs``) with such a file in it, looked for among 5,000 entries at most."""
    import fnmatch

    patterns = config.getini("python_files")

    def test_file(name: str) -> bool:
        return name.endswith(".py") and any(fnmatch.fnmatch(name, p) for p in patterns)

    if not path.is_dir():
        return test_file(path.name)
    skip = config.getini("norecursedirs")
    if path.name.startswith(".") or any(fnmatch.fnmatch(path.name, p) for p in skip) or (
            path / "pyvenv.cfg").exists():
        return False
    seen = 0
    for _, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")
                   and not any(fnmatch.fnmatch(d, p) for p in skip)]
        if any(map(test_file, files)):
            return True
        seen += len(files) + len(dirs)
        if seen > 5000:
            return True  # (too many to look through: it may)
    return False


def _why_kept(call: dict, lang: str) -> str:
    """Why a test could not tell about a site, from its report's fields, as --fix says it
    ("could not tell (...)", without the leading "kept")."""
    def m(key, **values):
        return message(key, lang, **values)

    if call.get("unseen_reads"):
        why = m("k_could_not_tell", read=call["unseen_reads"][0])
    elif call.get("running_children"):
        why = m("k_child", pids=", ".join(map(str, call["running_children"])))
    elif call.get("unproven"):
        why = m("k_unproven")
    elif call.get("partly_run"):
        why = m("k_part")
    elif call.get("compiled"):
        why = m("k_compiled")
    elif call.get("passed_through"):
        observed = call.get("observed")
        why = m("k_watched" if observed == "watched" else "k_observed" if observed else
                "k_generated" if call.get("unread") == "generated" else
                "k_unread" if call.get("unread") else "k_passed")
    elif call.get("unseen_calls"):
        why = m("k_untaken", call=call["unseen_calls"][0])
    elif call.get("ran_once_in_a_loop"):
        why = m("k_held" if call.get("held_in_loop") else "k_once")
    else:
        return call["verdict"]
    for sep in (": ", "："):  # "kept: could not tell (...)": the part after "kept"
        if sep in why:
            return why.split(sep, 1)[1]
    return why


def _stdin_readable() -> bool:
    """Whether standard input may hold something: not a terminal, /dev/null or closed."""
    import stat

    try:
        if os.isatty(0):
            return False
        mode = os.fstat(0)
    except OSError:
        return False
    null = os.stat(os.devnull)
    return not (stat.S_ISCHR(mode.st_mode) and (mode.st_dev, mode.st_ino) == (
        null.st_dev, null.st_ino))


def _human(n: int, lang: str = "en") -> str:
    if n < 1024:
        return message("bytes", lang, n=n)
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return ""


_AUDIT = pytest.StashKey[object]()
_REPORT = pytest.StashKey[object]()
_OUTCOMES = pytest.StashKey[dict]()
_OUTLIVED = pytest.StashKey[list]()


def _kept_graphs(context) -> list:
    """(weak reference to a hooked node's hooks, the records that keep its saved tensors) for
    each node the test's audit hooked: the node lives while that reference does."""
    from ._hooks import KEY

    kept = []
    for metadata, handle in getattr(getattr(context, "_session", None), "tagged", ()):
        ref = metadata.get(KEY)
        tag = ref() if ref is not None else None
        if tag is not None and tag.keepers:
            kept.append((handle.hooks_dict_ref, tuple(tag.keepers)))
    return kept


def _site_id(record) -> tuple:
    """(file, line, real path and line or None) of a record: what ``_site_name`` names."""
    from ._proof import real_line

    call = record.to_dict()
    real = real_line(record)
    return (call["file"], call["line"], tuple(real) if real else None)


def _site_name(file: str, line: int, real, root: str) -> str:
    """How the summary names a call site: its file from the session's folder (absolute when
    outside it), not from the folder a test had moved to (rev28b F10: a copy under tmp_path
    was named train.py, as the project's own train.py would be)."""
    if not real:
        return f"{file}:{line}"
    path, number = real
    shown = os.path.relpath(path, root)
    return f"{path if shown.startswith('..') else shown}:{number}"


class _Plugin:
    def __init__(self, config):
        self.fail = config.getoption("retaincheck_fail")
        self.skip_proof = config.getoption("retaincheck_skip_proof")
        self.proof = None  # the gate's rerun (a _proof.Proof), when one ran
        self.failed = False  # this plugin set the status to 6
        try:
            self.lang = config.getoption("retaincheck_lang") or default_lang()
            self.root = str(config.invocation_params.dir)
        except BadLang as exc:  # RETAINCHECK_LANG=fr: one line, pytest's usage error (rev28b F2)
            raise pytest.UsageError(str(exc)) from None
        self.sites: dict[str, dict] = {}  # site -> what the tests found there
        self.audited = 0
        self.calls = 0  # backward()/grad() calls seen in the audited tests
        self.unaudited: list[str] = []
        self.pending: list = []  # (node ref, site keys, records) of the last test, looked at
        # by the next
        self.hooked: list = []  # the last test's audit sessions, whose nodes stay hooked
        self.looked: list = []  # its sites found outlived at the end of its protocol
        self.outlived: set[str] = set()  # sites whose kept graph outlived the test
        # tests that were not audited (_not_run): deselected (-m, -k, --deselect) and test
        # files or folders left out at collection, in this process or the most an xdist
        # worker reported; skipped, stopped or unaudited tests
        self.deselected = 0
        self.deselected_ids: set[int] = set()
        self.ignored = 0
        self.skipped = 0
        self.seen = 0  # tests whose teardown was reported (the rest never ran: -x, --maxfail)
        # the session's folder before it ran, for the proof (rev27q Q1: a test that reads a
        # file the audited session wrote takes another path in the rerun)
        self.before = self.env = self.start = None
        self.own: frozenset = frozenset()
        self.cache: dict[str, bytes] | None = None  # pytest's cache before the session
        if self.fail and not self.skip_proof and not hasattr(config, "workerinput"):
            from ._proof import open_fds, snapshot, start_state

            self.env, self.before, self.start, self.own, self.cache = config.stash.get(
                _EARLY, (None, None, None, frozenset(), None))
            if self.env is None:  # registered after the first conftests (pytest.main)
                self.own, self.cache = _own_outputs(), _cache_files(config)
                self.env, self.before, self.start = dict(os.environ), snapshot(str(
                    config.invocation_params.dir), self.own), {**start_state(),
                                                                "fds": sorted(open_fds())}

    # -- in the process that runs the test (a worker under xdist) ---------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        """Tests a conftest drops from ``items`` itself, without pytest_deselected (a
        ``--run-slow`` option's filter: rev38b G2), count as deselected too."""
        before = list(items)
        try:
            return (yield)
        finally:
            kept = {id(i) for i in items} | self.deselected_ids
            gone = [i for i in before if id(i) not in kept]
            if gone:
                self.pytest_deselected(gone)

    def pytest_deselected(self, items):
        """A deselected test does not run: a helper that it alone needs the flag for looks not
        needed in the tests that ran (rev35b NEW-6, ``-m "not slow"``): see ``_not_run``."""
        self.deselected += len(items)
        self.deselected_ids.update(map(id, items))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item):
        item.stash[_OUTCOMES] = {}
        item.stash[_OUTLIVED] = self._outlived()
        if item.get_closest_marker("no_retaincheck") is None:
            from ._audit import audit

            context = audit()
            try:
                item.stash[_REPORT] = context.__enter__()
                item.stash[_AUDIT] = context
            except RuntimeError:  # another audit is active: this test cannot be audited
                pass
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem):
        try:
            return (yield)
        finally:
            context = item.stash.get(_AUDIT, None)
            if context is not None:
                del item.stash[_AUDIT]
                kept = _kept_graphs(context)
                # the graph's nodes stay hooked until the protocol ends: a hook that walks
                # the test's loss after its teardown (a makereport wrapper, a teardown
                # wrapper outside this one: rev37b G4, G4b) still marks the site needed
                context._keep_tags = True
                if context._session is not None:
                    (context._session.code_after, context._session.handed,
                     context._session.code_files) = _test_code(item)
                    context._session.code_modules = [getattr(item, "module", None)] + [
                        p for p in item.config.pluginmanager.get_plugins()
                        if getattr(p, "__file__", None) in context._session.code_files]
                    context._session.runner_dirs = _runner_dirs(item.config)
                    context._session.per_test = True
                context.__exit__(None, None, None)
                self.hooked.append(context._session)
                # named in the main process, from its own folder: an xdist worker's may be
                # another (a conftest that moves to the tests' folder: rev30b F-x1)
                self.pending = []
                for ref, records in kept:
                    unneeded = [r for r in records if r.verdict == "not needed"]
                    if unneeded:
                        self.pending.append((ref, {_site_id(r) for r in unneeded}, unneeded))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """The test's kept graph is looked at as soon as its protocol is over, before any other
        hook wrapper's end runs (rev35b p14: a conftest's wrapper that walked the test's
        losses after it and let them go left the site listed "not needed")."""
        try:
            return (yield)
        finally:
            self.looked = self.looked + self._outlived()
            hooked, self.hooked = self.hooked, []
            for session in hooked:
                session.drop_tags()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """xdist, in the main process: the sites whose graph a worker's last test left alive
        at the worker's end."""
        raw = getattr(node, "workeroutput", {}).get("retaincheck_outlived")
        if raw:
            self.outlived.update(_site_name(file, line, real, self.root)
                                 for file, line, real in json.loads(raw))

    def _outlived(self) -> list[tuple]:
        """The sites that looked not needed in the test before, whose kept graph still lives
        now that its function-scoped fixtures and locals are gone (rev28b F1: a module-scoped
        fixture's loss, walked by a later test the audit of that test no longer watched)."""
        pending, self.pending = self.pending, []
        looked, self.looked = self.looked, []  # found outlived at the test's end already
        if not pending:
            return looked
        import gc

        gc.collect()
        # alive still, or walked since the audit ended (rev37b G4: needed now)
        return sorted({key for ref, keys, records in pending
                       if ref() is not None or any(r.needed for r in records)
                       for key in keys} | set(looked), key=repr)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        from ._proof import real_line

        rep = yield
        outcomes = item.stash.setdefault(_OUTCOMES, {})
        outcomes[rep.when] = rep.outcome
        if rep.when == "teardown":
            report = item.stash.get(_REPORT, None)
            completed = (
                set(outcomes) == {"setup", "call", "teardown"}
                and all(o == "passed" for o in outcomes.values())
                and report is not None
                and getattr(report, "completed", True)  # rc-core's field, when present
            )
            data = {
                "audited": report is not None,
                "marked": item.get_closest_marker("no_retaincheck") is not None,
                "completed": bool(completed),
                # (with whether its code could be read, which the reason says: _why_kept)
                "calls": [{**c.to_dict(), "unread": getattr(c, "_unread", False) or False,
                           "observed": getattr(c, "_observed", False) or False,
                           "held_in_loop": getattr(c, "_held_in_loop", False)}
                          for c in report.calls] if report is not None else [],
                # (real path, line) of each call, as the gate's rerun finds the site
                "real": [real_line(c) for c in report.calls] if report is not None else [],
                "backward_calls": getattr(report, "backward_calls", 0) if report is not None else 0,
                "outlived": item.stash.get(_OUTLIVED, []),
                "ran": "call" in outcomes,
                # (xdist: the main process collects nothing; a worker's counts travel here)
                "deselected": self.deselected,
                "ignored": self.ignored,
                # (an error before its call: its body may not have run)
                "stopped": "call" not in outcomes and "skipped" not in outcomes.values(),
            }
            rep.retaincheck = json.dumps(data)  # a plain string: xdist carries it over
        return rep

    # -- in the main process ----------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_ignore_collect(self, collection_path, config):
        """A test file or folder that a conftest's collect_ignore (an optional library
        missing) or --ignore leaves out counts (rev38b G1c; rev39b G1d, G1e: a folder, a
        python_files pattern of the project's)."""
        ignored = yield
        if ignored and _holds_tests(collection_path, config):
            self.ignored += 1
        return ignored

    def pytest_collectreport(self, report):
        if report.skipped:  # a module skipped whole (importorskip: rev38b G1)
            self.skipped += 1

    def pytest_runtest_logreport(self, report):
        if report.skipped and report.when in ("setup", "call"):
            self.skipped += 1  # (a skipped or xfailed test, a skipped subtest: rev39b G6)
        raw = getattr(report, "retaincheck", None)
        if report.when != "teardown" or raw is None:
            return
        data = json.loads(raw)
        self.outlived.update(  # an earlier test's graph outlived it
            _site_name(file, line, real, self.root)
            for file, line, real in data.get("outlived", ()))
        self.seen += 1
        # a test stopped before its body, or run unaudited (marked no_retaincheck: its own
        # audit hides the flag from the proof's rerun too: rev38b G4), may reach a site
        self.skipped += bool(data.get("stopped") or not data["audited"])
        self.ignored = max(self.ignored, data.get("ignored", 0))
        if not data["audited"]:
            if not data["marked"]:
                self.unaudited.append(report.nodeid)
            return
        self.audited += data.get("ran", True)  # a test skipped in its setup ran nothing (N5)
        self.deselected = max(self.deselected, data.get("deselected", 0))  # xdist: a worker's
        self.calls += data.get("backward_calls", 0)
        for call, real in zip(data["calls"], data.get("real", [None] * len(data["calls"])),
                              strict=True):
            site = self.sites.setdefault(
                _site_name(call["file"], call["line"], real, self.root),
                {"code": call["code"], "needed": False, "unneeded_in": [], "bytes": 0,
                 "real": set()},
            )
            site["real"].add(tuple(real) if real else None)
            if call["verdict"] == "could not tell: kept" and not call["needed"]:
                site.setdefault("unsure", _why_kept(call, self.lang))  # said (rev34b F7)
            else:
                site["seen_needed"] = site.get("seen_needed") or call["needed"]
            if call["needed"] or call["verdict"] in ("needed", "needed only because history leaks",
                                                     "could not tell: kept"):
                # a test that could not tell keeps the site, as the command line does (rev28b N4)
                site["needed"] = True
            elif data["completed"] and call["verdict"] == "not needed":
                site["unneeded_in"].append(report.nodeid)
                site["bytes"] = max(site["bytes"], call["retained_bytes"])

    def unneeded(self) -> dict[str, dict]:
        return {k: v for k, v in self.sites.items()
                if v["unneeded_in"] and not v["needed"] and k not in self.outlived
                and not self._not_run()}

    def _not_run(self) -> int:
        """How many tests were not audited, any of which may reach any site: deselected
        (rev35b NEW-6, ``-m "not slow"``; rev38b G2, a conftest's own filter), skipped or
        xfailed (rev37b S4, a GPU test on a machine without one; rev39b G6, a subtest),
        left out at collection (rev38b G1, G1c; rev39b G1d-G1g), stopped before its body or
        never started (-x), or marked no_retaincheck (rev38b G4). A test that did not run may
        call another test's function too (rev39b G3c, G3d: super(), a direct call), so no
        site is listed while one was not audited."""
        return self.deselected + self.skipped + self.ignored

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        """The last test's graph, if it still lives now (no next test looked at it): a
        conftest's pytest_sessionfinish may walk it (rev31b F-x20), before any other such hook
        runs, which may walk it and let it go (rev34b F5); an xdist worker hands its own to the
        main process (rev32b F-x20x: pytest_testnodedown). The gate comes last (_gate)."""
        # tests that never started (-x, --maxfail: rev38b G5) may reach a site too
        self.skipped += max(0, (session.testscollected or 0) - self.seen) if not hasattr(
            session.config, "workeroutput") else 0
        last = self._outlived()
        if hasattr(session.config, "workeroutput"):
            session.config.workeroutput["retaincheck_outlived"] = json.dumps(last)
        self.outlived.update(_site_name(file, line, real, self.root)
                             for file, line, real in last)

    def gate(self, session) -> None:
        unneeded = self.unneeded()
        if not (self.fail and unneeded and session.exitstatus == 0):
            return
        if not self.skip_proof:
            try:
                self.proof = self._prove(session.config, unneeded)
            except KeyboardInterrupt:  # Ctrl-C during the rerun (rev28b F5): pytest's status
                from ._proof import Proof

                self.proof = Proof(False, message("proof_interrupted", self.lang), 0.0,
                                   refutes=False)
                session.exitstatus = pytest.ExitCode.INTERRUPTED
                return
            if not self.proof.proven and self.proof.ran:
                return  # the rerun refuted the sites (or could not tell): keep them, no 6
        session.exitstatus = EXIT_UNNEEDED
        self.failed = True

    def _prove(self, config, unneeded):
        """Rerun the session with every unneeded site's backward pass forced not to keep its
        graph (``_proof.prove``: a new interpreter, ``python -m pytest`` with the invocation's
        arguments in its folder). A site with no file to point at (exec'd code) cannot be rerun
        without its flag: "could not tell", never an unproven 6, as the command line's gate."""
        from ._proof import Program, Proof, prove

        forced = [real for site in unneeded.values() for real in site["real"]]
        if None in forced:
            return Proof(False, message("proof_no_file", self.lang), 0.0, refutes=False)
        params = config.invocation_params
        # rev27o R4: a session started from the user's own code (pytest.main) with plugin
        # objects, or from a script, is not what `python -m pytest` with its arguments repeats
        # (pytester's own plugin, in this package's tests, is the one exception)
        own = [p for p in params.plugins or ()
               if not (getattr(p, "__name__", None) or type(p).__module__).startswith("_pytest.")]
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        if main is None:  # python -c: pytest.main from a string, unless in an xdist worker
            by_pytest = hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ
        else:  # pytest's own entry: `python -m pytest`, or its console script
            by_pytest = os.path.realpath(main) == os.path.realpath(
                os.path.join(os.path.dirname(pytest.__file__), "__main__.py")) or (
                _console_script(main))
        # the console script is rerun as itself: `python -m pytest` would put the working
        # folder first on sys.path, where `pytest` puts the script's (rev27s N11)
        script = main if main is not None and _console_script(main) else None
        if own or not by_pytest:
            return Proof(False, message("proof_in_process", self.lang), 0.0, refutes=False)
        option = config.option  # an order that pytest's cache decides (rev27w P24)
        if any(getattr(option, name, False) for name in ("lf", "failedfirst", "newfirst",
                                                            "stepwise", "stepwise_skip")):
            return Proof(False, message("proof_cache_order", self.lang), 0.0, refutes=False)
        if self.start and self.start.get("early"):  # its import may have changed the folder
            return Proof(False, message("proof_early_plugin", self.lang,
                                        name=self.start["early"][0]), 0.0, refutes=False)
        capture = (config.getoption("capture", "fd")  # -p no:capture: none (rev27w P20)
                   if config.pluginmanager.has_plugin("capturemanager") else "no")
        if capture != "fd" and _stdin_readable():
            # -s or --capture=sys leave the tests the session's standard input, which the
            # rerun does not get again (rev27q Q5); fd capture puts /dev/null on fd 0
            return Proof(False, message("proof_stdin_tests", self.lang), 0.0, refutes=False)
        from ._proof import changed_paths, leftovers, release_locks, release_sockets, snapshot

        left = leftovers(None, str(params.dir))  # a test's daemon thread (rev27t T01)
        if left:
            return Proof(False, message("proof_leftover", self.lang, what=left), 0.0,
                         refutes=False)
        touched = changed_paths(self.before, snapshot(str(params.dir), self.own))
        # pytest's own reports (--junitxml, --log-file): the rerun's go to /dev/null, and a
        # second session in the folder rewrote the first one's (rev28b F3)
        reports = {os.path.realpath(os.path.join(str(params.dir), p)) for p in (
            getattr(config.option, "xmlpath", None), getattr(config.option, "log_file", None)
            or config.getini("log_file")) if p}
        # --basetemp in the folder: pytest's own temporary folders, which pytest empties at
        # the start of each session; the rerun gets its own (rev28b F3, --basetemp=.tmp)
        basetemp = getattr(config.option, "basetemp", None)
        inside = (os.path.join(os.path.realpath(os.path.join(str(params.dir), str(basetemp))), "")
                  if basetemp else None)
        if touched and (reports or inside):
            touched = [p for p in touched if os.path.realpath(p.rstrip("\0")) not in reports
                       and not (inside and os.path.join(os.path.realpath(p.rstrip("\0")), "")
                                .startswith(inside))]
        release_sockets(set(self.start.get("fds", ())))
        release_locks(set(self.start.get("fds", ())))  # a conftest's lock (rev27u R5)
        args = [str(a) for a in params.args]
        # the rerun's own start imports retaincheck before pytest marks its entry point's
        # package for assertion rewriting: pytest warns, and filterwarnings = error failed
        # every rerun (rev28b F14); the audited session met no such warning
        args += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
        rerun_temp = None
        if basetemp:
            import tempfile

            rerun_temp = tempfile.mkdtemp(prefix="retaincheck-basetemp-")
            args.append(f"--basetemp={os.path.join(rerun_temp, 'basetemp')}")
        # the session's reports stay its own (rev27s W4: the rerun's overwrote them)
        if getattr(config.option, "xmlpath", None):
            args.append(f"--junitxml={os.devnull}")
        if getattr(config.option, "log_file", None) or config.getini("log_file"):
            args.append(f"--log-file={os.devnull}")  # (rev27w P23: set in pytest.ini)
        cache = None
        if config.pluginmanager.has_plugin("cacheprovider"):
            if self.cache is None:
                return Proof(False, message("proof_cache_big", self.lang,
                                            n=CACHE_LIMIT >> 20), 0.0, refutes=False)
            import tempfile

            cache = tempfile.mkdtemp(prefix="retaincheck-cache-")
            for name, data in self.cache.items():
                path = os.path.join(cache, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            args += ["-o", f"cache_dir={cache}"]
        program = Program(script, None if script else "pytest", args, str(params.dir), 0,
                          None,  # pytest prints timings: its output is not compared
                          touched=touched, env=self.env, start=self.start)
        try:
            return prove({}, program, self.lang, forced)
        finally:
            import shutil

            for made in (cache, rerun_temp):
                if made is not None:
                    shutil.rmtree(made, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        tr = terminalreporter
        lang = self.lang

        def m(key, **values):
            return message(key, lang, **values)

        tr.write_sep("=", "retaincheck")
        unneeded = self.unneeded()
        n_tests = m("p_tests_one" if self.audited == 1 else "p_tests_many", n=self.audited)
        if self.deselected:
            n_tests += m("p_deselected", n=self.deselected)
        n_tests += m("p_calls_one" if self.calls == 1 else "p_calls_many", n=self.calls)
        proof = self.proof
        refuted = proof is not None and not proof.proven and proof.ran
        last = []  # the proof and the status come after every site (rev38b N: they did not)
        if not unneeded:
            tr.write_line(m("p_none", counts=n_tests))
        else:
            n = len(unneeded)
            if refuted:
                head = ("p_refuted_" if proof.refutes else "p_unproven_") + (
                    "one" if n == 1 else "many")
            else:
                head = "p_unneeded_one" if n == 1 else "p_unneeded_many"
            tr.write_line(m(head, n=n, counts=n_tests))
            for site, found in unneeded.items():
                tr.write_line(f"{site}  {found['code']}")
                tr.write_line(m("p_kept_seen" if refuted else "p_kept",
                                size=_human(found["bytes"], lang)))
                for nodeid in found["unneeded_in"]:
                    tr.write_line(f"      {nodeid}")
            if self.failed and self.skip_proof:
                last.append(m("p_fail_skip", status=EXIT_UNNEEDED))
            elif self.failed or refuted:
                how = m("f_proven" if proof.proven else "f_not_proven", reason=proof.reason)
                last.append(m("p_proof", how=how))
                if not refuted:
                    last.append(m("p_fail", status=EXIT_UNNEEDED))
        outlived = sorted(k for k, v in self.sites.items()
                          if v["unneeded_in"] and not v["needed"] and k in self.outlived)
        if outlived:  # left out of the list above: said, not dropped silently (rev29b N-n03)
            tr.write_line(m("p_outlived", sites=", ".join(outlived)))
        # the sites a test could not tell about and none needed: said with the reason, as the
        # command line says it (rev34b F7: a flag from a fixture was kept without a word)
        unsure = sorted((k, v["unsure"]) for k, v in self.sites.items()
                        if v.get("unsure") and not v.get("seen_needed"))
        unsure += sorted(  # the sites a test that was not audited may reach (_not_run)
            (k, m("p_why_not_run", n=self._not_run()))
            for k, v in self.sites.items() if v["unneeded_in"] and not v["needed"]
            and k not in self.outlived and self._not_run())
        shown = len(unsure) if getattr(tr.config.option, "verbose", 0) > 0 else 10  # (-v: all)
        for site, why in unsure[:shown]:
            tr.write_line(m("p_unsure", site=site, why=why))
        if len(unsure) > shown:
            tr.write_line(m("p_unsure_more", n=len(unsure) - shown))
        if self.unaudited:
            tr.write_line(m("p_unaudited", n=len(self.unaudited)))
        for line in last:
            tr.write_line(line)


def _test_code(item) -> tuple[set[tuple[str, int]], set[str], set[str]]:
    """``(file, first line)`` of the code pytest runs for a test besides what is on the way to
    a site: the test function, its fixtures (their teardown runs after the test), and, for a
    test class (a ``unittest.TestCase``), every function of the class (``setUp``,
    ``tearDown``). A site in a fixture or ``setUp`` is followed by the test's own calls, which
    start no pass the audit could see when they do not run (rev46b T1, F1, F1b). With it, the
    names handed on as values, and the files read (the program's own, for the names of its
    walkers: a conftest's helper class, rev48b F1; the helpers module a conftest imports, W1)."""
    import inspect

    functions = [getattr(item, "obj", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        functions.extend(getattr(d, "func", None) for d in defs)
    # (and those got with request.getfixturevalue(name) as the test ran: rev47b D1; pytest
    # keeps them on the request, a private attribute, read when there)
    dynamic = getattr(getattr(item, "_request", None), "_fixture_defs", None)
    if isinstance(dynamic, dict):
        functions.extend(getattr(d, "func", None) for d in dynamic.values())
    found = set()
    cls = getattr(item, "cls", None)
    if cls is not None:  # (not the class's other tests: pytest runs each as a test of its
        from ._hooks import test_class_code  # own, rev47b C1)

        found |= test_class_code(cls, getattr(getattr(item, "obj", None), "__name__", None))[0]
    for function in functions:
        try:
            code = inspect.unwrap(getattr(function, "__func__", function)).__code__
        except (AttributeError, TypeError, ValueError):
            continue
        found.add((code.co_filename, code.co_firstlineno))
    # What pytest runs around a test through its own code, by no name a frame shows, and
    # which may start no pass: in the test's module and the conftest files of its folder and
    # above, the xunit functions (a module's teardown_function, rev47b X1) and the hooks (a
    # conftest's pytest_runtest_teardown, H1); the hooks of the plugin modules too (a
    # conftest's pytest_plugins = [...], an installed pytest11 plugin: rev48b P1, P1b)
    from ._reads import _kind, defined_functions, fixture_functions, referenced_names

    module = getattr(getattr(item, "module", None), "__file__", None)
    here = os.path.realpath(str(getattr(item, "path", "") or module or ""))
    files, plugins = [module] if isinstance(module, str) else [], []
    for plugin in item.config.pluginmanager.get_plugins():
        name = getattr(plugin, "__file__", None)
        if not isinstance(name, str) or not name.endswith(".py") or str(getattr(
                plugin, "__name__", "")).split(".")[0] in ("_pytest", "pluggy", "retaincheck"):
            continue
        if os.path.basename(name) != "conftest.py":
            # (an installed plugin's hooks only where one may walk a graph, itself or through
            # what it calls (_audit._may_walk): xdist's or pytest-cov's hooks call names a
            # program's walkers may have, check, run)
            if _kind(name) == 2 or _hooks_may_walk(plugin):
                plugins.append(name)
        elif here.startswith(os.path.dirname(os.path.realpath(name)) + os.sep):
            files.append(name)  # (not another folder's: its hooks run for its own tests)
    for name in files + plugins:
        for function, where in defined_functions(name):
            if function.startswith("pytest_") or name in files and function in _XUNIT:
                found.add(where)
    # The names used as values (a finalizer, request.addfinalizer(check); a partial) in
    # those files and in the modules of the test class's bases (a unittest mixin's
    # self.addCleanup(walk_again, loss): rev49b H2), but in a fixture this test does not use
    # (rev48b C2: a fixture of other tests that hands on their train step): the functions of
    # the program's files by those names are searched whole (_audit._mark_untaken_calls)
    for base in getattr(cls, "__mro__", ())[1:]:
        name = getattr(sys.modules.get(base.__module__), "__file__", None)
        if isinstance(name, str) and name.endswith(".py") and name not in files and _kind(
                name) == 2:
            files.append(name)
    handed: set[str] = set()
    for name in files:
        fixtures = fixture_functions(name)
        for scope, names in referenced_names(name).items():
            if scope not in fixtures or (name, scope) in found:
                handed |= names
    return found, handed, set(files + plugins)
def _runner_dirs(config) -> tuple[str, ...]:
    """The files of the installed pytest plugins' modules (pytest-markdown-docs'): the code
    that runs the tests, whose loops run each test once (_audit._in_a_loop)."""
    from ._reads import _kind, _realpath

    found = set()
    for plugin in config.pluginmanager.get_plugins():
        name = getattr(plugin, "__file__", None)
        if isinstance(name, str) and _kind(name) == 1:
            # (the plugin's module alone: a library that ships a plugin beside its trainer's
            # fit() loop is not a test runner, rev50b M2)
            found.add(_realpath(name))
    return tuple(sorted(found))


def _hooks_may_walk(plugin) -> bool:
    """Whether one of a plugin module's hooks (``pytest_*``) may start a backward pass
    (``_audit._may_walk``: its code names one, or calls code that does, rev49b G1)."""
    from ._audit import _CODE, _may_walk

    return any(name.startswith("pytest_") and isinstance(getattr(value, "__code__", None), _CODE)
               and _may_walk(value) for name, value in list(vars(plugin).items()))


# pytest's xunit-style functions and methods (_pytest/python.py, _pytest/unittest.py)
_XUNIT = frozenset({
    "setup_module", "teardown_module", "setUpModule", "tearDownModule", "setup_function",
    "teardown_function", "setup_class", "teardown_class", "setup_method", "teardown_method",
    "setUpClass", "tearDownClass", "setup", "teardown"})
