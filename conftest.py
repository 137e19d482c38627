from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent

# At the root, not in tests/: pytest-markdown-docs collects docs/ and src/retaincheck as well,
# and its hooks (below) must be loaded whichever of them a run starts from.
# The deliberately broken pages and snippets are run by test_the_net_catches_failures.py, which
# expects them to fail; pytest-markdown-docs must not collect them as the site's own.
collect_ignore = ["tests/fixtures"]

# retaincheck picks its report's language from RETAINCHECK_LANG or the locale: the tests and
# snippets (in this process and the programs it starts) expect English unless they ask for zh.
os.environ["RETAINCHECK_LANG"] = "en"


def pytest_addoption(parser):
    parser.addoption(
        "--update-snippets",
        action="store_true",
        help="rewrite snippets/*.out and snippets/verified_with.json from real runs",
    )
    parser.addoption(
        "--record-verified",
        action="store_true",
        help="if every snippet passes, add the running torch (and today's date) to "
        "snippets/verified_with.json, the versions every page names",
    )
    parser.addoption(
        "--cpu-variants",
        action="store_true",
        help="also rerun every snippet on other kernel paths and thread counts (slow)",
    )
    parser.addoption(
        "--linkchecker",
        action="store_true",
        help="also crawl the served site with linkchecker (the library's check of what "
        "tests/test_links.py checks in-process; about 10 s of CPU)",
    )
    parser.addoption(
        "--inductor",
        action="store_true",
        help="also run the with-other-features page's Inductor claims (tests/test_inductor.py: "
        "new interpreters that compile with Inductor; about 2 minutes, needs g++)",
    )
    parser.addoption(
        "--all-pages",
        action="store_true",
        help="also walk every page pair in Chromium (tests/test_browser.py; the test command "
        "walks four that cover every kind of page element; about 40 s of CPU)",
    )
    parser.addoption(
        "--launcher",
        action="store_true",
        help="also run the distributed launcher's slower checks (tests marked launcher: a rank "
        "that hangs until the time limit, ranks of a killed launcher, a snippet under torchrun; "
        "waiting out a time limit and new interpreters, about 12 s of CPU)",
    )
    parser.addoption(
        "--proof",
        action="store_true",
        help="also run retaincheck's slower checks (tests marked proof: more --fix proof "
        "reruns, each a new interpreter importing torch, and a C++ custom Function compiled "
        "with g++; about a minute)",
    )
    parser.addoption(
        "--changed",
        action="store_true",
        help="run only the page fences and snippet tests whose page, snippet, stored output or "
        "a module beside the snippet that it imports differs from git HEAD (uncommitted and "
        "untracked files): the writer's inner loop",
    )


CPU_VARIANTS_COMMAND = "python -m pytest tests/test_snippets.py --cpu-variants -m cpu_variants"
PROOF_COMMAND = (
    "python -m pytest tests/test_retaincheck_fix.py tests/test_retaincheck_truth.py "
    "tests/test_retaincheck_cli.py tests/test_retaincheck_pytest_plugin.py "
    "tests/test_retaincheck_audit.py tests/test_retaincheck_torchrun.py "
    "tests/test_snippets.py docs/retaincheck.md docs/retaincheck.zh.md --proof -m proof"
)
# The retaincheck page's snippets that run retaincheck's proof (each run a new interpreter
# that imports torch, then its rerun, in both languages): 34 s of the test command's 237 s of
# test time on 2 cores. They run, with their page fences, where the proof tier runs, once.
PROOF_SNIPPETS = frozenset(f"snippets/retaincheck/{name}.py" for name in (
    "fix_example", "pytest_gate", "ci_gate", "check_article_example"))
# Checks that run only when asked for (.ci/run asks): marker -> (option, what, command).
OPT_IN = {
    "cpu_variants": (
        "--cpu-variants",
        "the snippets on other CPU kernel paths and thread counts",
        CPU_VARIANTS_COMMAND,
    ),
    "linkchecker": (
        "--linkchecker",
        "linkchecker's crawl of the served site",
        "python -m pytest tests/test_links.py --linkchecker -m linkchecker",
    ),
    "all_pages": (
        "--all-pages",
        "Chromium's walk of the other page pairs (offline load, phone fit, copy, language switch)",
        "python -m pytest tests/test_browser.py --all-pages -m all_pages",
    ),
    "inductor": (
        "--inductor",
        "the with-other-features page's Inductor claims (compiles with Inductor, needs g++)",
        "python -m pytest tests/test_inductor.py --inductor -m inductor",
    ),
    "launcher": (
        "--launcher",
        "the distributed launcher's slower checks (a hanging rank, a killed launcher, torchrun)",
        "python -m pytest tests/test_distributed_launcher.py --launcher -m launcher",
    ),
    "proof": (
        "--proof",
        "retaincheck's slower checks (more --fix proof reruns, a C++ custom Function, the "
        "retaincheck page's snippets that run the proof)",
        PROOF_COMMAND,
    ),
}


def changed_files() -> set[Path]:
    """Files that differ from git HEAD: modified, added or untracked."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--no-renames"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return {(ROOT / line[3:].strip('"')).resolve() for line in out.splitlines() if line}


SNIPPET_CALL = re.compile(r"check_snippet\('([^']+)'")


def snippets_of(item) -> list[Path] | None:
    """The snippet files a page fence or snippet test runs; None for any other test."""
    if "markdown-docs" in item.keywords:
        return [ROOT / p for p in SNIPPET_CALL.findall(getattr(item, "code", "") or "")]
    if (spec := getattr(item, "callspec", None)) and "snippet" in spec.params:
        return [Path(spec.params["snippet"])]
    return None


def touches(item, changed: set[Path]) -> bool:
    """A page fence or snippet test whose page, snippet or stored output is among ``changed``."""
    snippets = snippets_of(item)
    if snippets is None:
        return False
    files: set[Path] = {Path(item.path).resolve()} if "markdown-docs" in item.keywords else set()
    for snippet in snippets:
        files |= {snippet.resolve(), snippet.with_suffix(".out").resolve()}
        files |= local_imports(snippet.resolve())
    return bool(files & changed)


@functools.cache
def local_imports(path: Path) -> frozenset[Path]:
    """The modules beside ``path`` that it imports (``from launch import launch`` imports
    ``launch.py`` of the snippet's folder), and theirs: a change to one reruns its users."""
    found: set[Path] = set()
    todo = [path]
    while todo:
        try:
            tree = ast.parse(todo.pop().read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        names |= {node.module for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        for name in names:
            module = path.with_name(name.split(".")[0] + ".py")
            if module.is_file() and module != path and module not in found:
                found.add(module)
                todo.append(module)
    return frozenset(found)


def pytest_collection_modifyitems(config, items):
    """``--changed`` keeps what a writer touched; the CPU variants run only when asked for."""
    if config.getoption("--changed"):
        changed = changed_files()
        keep = [item for item in items if touches(item, changed)]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    for item in items:
        snippets = snippets_of(item)
        if snippets and item.get_closest_marker("cpu_variants") is None and any(
                s.resolve().relative_to(ROOT).as_posix() in PROOF_SNIPPETS for s in snippets):
            item.add_marker(pytest.mark.proof)
    not_run = config.stash.setdefault(_NOT_RUN, {})
    for marker, (option, _, _) in OPT_IN.items():
        if config.getoption(option):
            continue
        deselected = [i for i in items if i.get_closest_marker(marker) is not None]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            not_run[marker] = len(deselected)
            items[:] = [i for i in items if i.get_closest_marker(marker) is None]
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: tell the controller
        config.workeroutput["opt_in_not_run"] = dict(not_run)
    together_by_snippet(items)


def together_by_snippet(items) -> None:
    """Put the tests that run the same snippet next to each other, where its first one was.

    The English page, the Chinese page and test_snippets.py ask for the same snippet and it runs
    once (``snippetcheck.check_once``); pytest-xdist's worksteal hands each worker a contiguous
    share, so tests of one snippet spread over two workers left one worker waiting on the
    other's lock (13 s for each retaincheck snippet). Side by side they land on one worker.
    """
    groups: dict[Path, list] = {}
    for item in items:
        snippets = snippets_of(item)
        key = snippets[0].resolve() if snippets else item
        groups.setdefault(key, []).append(item)
    items[:] = [item for group in groups.values() for item in group]


_NOT_RUN = pytest.StashKey[dict]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller collects nothing itself; each worker reports what it left out."""
    not_run = node.config.stash.setdefault(_NOT_RUN, {})
    for marker, count in getattr(node, "workeroutput", {}).get("opt_in_not_run", {}).items():
        not_run[marker] = max(not_run.get(marker, 0), count)


# --- snippets/verified_with.json: recorded by the run that verified it (tests/verified.py) ---
# The controller (pytest-xdist's, or the only process) sees every test report. At the end of
# a run with --record-verified in which every snippet test passed it adds the running torch;
# a run that passed only some of them records nothing and fails. --update-snippets records
# the same way; one that changed a stored output drops the other versions (they never
# produced it), and one that ran only some snippets records nothing new.
_RECORD: dict = {}  # controller only: "passed" (snippet test ids), "outputs", "message"


def _records(config) -> bool:
    return not hasattr(config, "workerinput") and (
        config.getoption("--record-verified") or config.getoption("--update-snippets")
    )


def pytest_sessionstart(session):
    if _records(session.config):
        import verified

        _RECORD.update(passed=set(), outputs=verified.outputs_digest())


def pytest_runtest_logreport(report):
    if "passed" in _RECORD and report.when == "call" and report.passed:
        if "test_snippets.py::test_snippet[" in report.nodeid:
            _RECORD["passed"].add(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if "passed" not in _RECORD:
        return
    import snippetcheck
    import verified

    passed, expected = len(_RECORD["passed"]), len(snippetcheck.discover())
    version = verified.running_torch()
    unchanged = verified.outputs_digest() == _RECORD["outputs"]
    if exitstatus == 0 and passed == expected:
        names = verified.record(version, keep_others=unchanged)
        _RECORD["message"] = f"recorded torch {version}: snippets/verified_with.json names " + (
            ", ".join(e["torch"] for e in names)
        )
        return
    if not unchanged:  # a subset's outputs changed: only the running torch produced them
        keep = [e for e in verified.entries() if e["torch"] == version]
        verified.MANIFEST.write_text(
            json.dumps({"verified": keep}, indent=2) + "\n", encoding="utf-8"
        )
    _RECORD["message"] = (
        f"NOT RECORDED: {passed} of {expected} snippet tests passed"
        + ("" if unchanged else f"; outputs changed, so only {version} stays, if it was there")
        + "; run them all: python -m pytest tests/test_snippets.py --record-verified"
    )
    if session.config.getoption("--record-verified"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """End every run with one line per check that did not run, and how to run it.

    A newcomer who follows the README should not have to read the skip reasons to learn that
    a check (the Chinese figures, the browser, the CPU variants) did not run.
    """
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if "message" in _RECORD:
        terminalreporter.section("snippets/verified_with.json")
        terminalreporter.write_line(_RECORD["message"])
    not_run = config.stash.get(_NOT_RUN, {})
    if not reasons and not not_run:
        return
    terminalreporter.section("checks that did not run")
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"NOT RUN ({count} skipped): {reason}")
    for marker, count in not_run.items():
        _, what, command = OPT_IN[marker]
        terminalreporter.write_line(
            f"NOT RUN ({count} deselected): {what}; run them with: {command}"
        )


@pytest.fixture(scope="session")
def update_snippets(request) -> bool:
    return request.config.getoption("--update-snippets")


@pytest.fixture(scope="session", autouse=True)
def _snippet_results_shared_by_workers(tmp_path_factory, worker_id):
    """Under pytest-xdist, a snippet runs once per run, whichever workers ask for it."""
    import snippetcheck

    if worker_id != "master":  # the workers' base temp folders share this run's parent
        shared = tmp_path_factory.getbasetemp().parent / "snippet-results"
        shared.mkdir(exist_ok=True)
        snippetcheck.SHARED_RESULTS = shared


# --- pytest-markdown-docs: every Python fence of docs/*.md and of src/retaincheck's docstrings --
# The plugin collects them (``--markdown-docs`` in pyproject.toml) with our parser
# (mdfences.FenceTestParser), which turns each fence into a call to one of these two.

_update_snippets = False


def pytest_configure(config):
    global _update_snippets
    _update_snippets = config.getoption("--update-snippets")


@functools.cache
def _collected_snippets() -> frozenset[Path]:
    import snippetcheck

    return frozenset(snippetcheck.discover())


@pytest.hookimpl(tryfirst=True)  # before the plugin's own CommonMark parser (firstresult)
def pytest_markdown_docs_markdown_it():
    import mdfences

    return mdfences.FenceTestParser()


def check_snippet(path: str, section: str | None = None) -> None:
    """A fence that includes ``path`` (or its ``section``): the snippet passes its check."""
    import snippetcheck

    file = ROOT / path
    assert file.is_file(), f"{path} does not exist"
    assert file in _collected_snippets(), f"{path} is not a collected snippet"
    if section is not None:
        text = file.read_text(encoding="utf-8")
        assert f"--8<-- [start:{section}]" in text and f"--8<-- [end:{section}]" in text, (
            f"{path} has no section {section!r}"
        )
    problems = snippetcheck.check_once(file, update=_update_snippets)
    assert not problems, f"{path}: " + "\n".join(problems)


def check_inline(code: str) -> None:
    """A Python fence with its code inline: it runs as its own program, cleanly."""
    import snippetcheck

    run = snippetcheck.run_code(code)
    problems = snippetcheck.problems_of_run(run, snippetcheck.DEFAULT_TIMEOUT_S)
    assert not problems, "\n".join(problems)


def pytest_markdown_docs_globals():
    return {"check_snippet": check_snippet, "check_inline": check_inline}


DOCSTRING_PACKAGE = ROOT / "src" / "retaincheck"


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """Docstring examples are collected from the package only.

    pytest-markdown-docs imports every ``.py`` file under the test paths to read its
    docstrings; for ``tests/`` that meant importing the helper scripts too (the snippet
    server imports torch's compiler stack: 2 s in every pytest-xdist worker) and parsing
    236 docstrings that no page shows.
    """
    collected = yield
    return [
        node for node in collected
        if type(node).__name__ != "MarkdownDocstringCodeModule"
        or Path(node.path).is_relative_to(DOCSTRING_PACKAGE)
    ]


@dataclass
class BuiltSite:
    path: Path
    log: str
    seconds: float
    url_path: str = "/"  # the path the site is published at: "/retain-graph/"
    port: int = 0  # the 127.0.0.1 port its site_url names


def build_site(out: Path, site_url: str) -> BuiltSite:
    """``mkdocs build --strict`` into ``out`` for a site published at ``site_url``."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        # Material prints a banner about MkDocs 2 on every build; it is not a build warning.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "SITE_URL": site_url},
    )
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log[-6000:]}"
    url = urlsplit(site_url)
    return BuiltSite(out, log, seconds, url.path, url.port or 0)


# Where the tests serve the site: under a sub-path, the way GitHub Pages serves a project
# site, so that every link and browser test also shows that nothing assumes the host's root.
SUB_PATH = "retain-graph/"


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, worker_id) -> BuiltSite:
    """The site, built once per test run with ``mkdocs build --strict``.

    ``site_url`` is the address ``served_site`` serves it at, as in production: Material's
    language switcher matches pages against the sitemap's absolute URLs, port included.
    Under pytest-xdist the first worker that needs the site builds it in a folder the workers
    share, and each worker serves that folder on the same port (``siteserver.serve`` binds
    with SO_REUSEPORT): one build instead of one per worker, 7 s of CPU each.
    """
    from filelock import FileLock

    if worker_id == "master":
        root = tmp_path_factory.mktemp("site")
    else:  # the workers' base temp folders share this run's parent
        root = tmp_path_factory.getbasetemp().parent / "site"
        root.mkdir(exist_ok=True)
    record = root / "built.json"
    with FileLock(str(root / ".lock")):
        if not record.exists():
            import siteserver

            port = siteserver.free_port()
            built = build_site(root / SUB_PATH, f"http://127.0.0.1:{port}/{SUB_PATH}")
            record.write_text(
                json.dumps({"log": built.log, "seconds": built.seconds, "port": port})
            )
        saved = json.loads(record.read_text())
    return BuiltSite(root / SUB_PATH, saved["log"], saved["seconds"], "/" + SUB_PATH, saved["port"])


@pytest.fixture(scope="session")
def served_site(built_site):
    """The built site served on 127.0.0.1 at the port its build names; yields its base URL.

    Each pytest-xdist worker serves the shared build on the same port (the kernel hands each
    connection to one of them). A server that closed while another worker still crawled reset
    the connections the kernel had queued for it ("Connection reset by peer" in the link
    check), so no worker closes its server before every worker that serves is done: the count
    of servers started and finished lives beside the build, under a lock, and a server starts
    and stops only while that lock is held.
    """
    import siteserver
    from filelock import FileLock

    shared = built_site.path.parent
    lock, counts = FileLock(str(shared / ".serving.lock")), shared / "serving.json"

    def count(key: str | None = None) -> dict:
        state = json.loads(counts.read_text()) if counts.exists() else {"up": 0, "done": 0}
        if key:
            state[key] += 1
            counts.write_text(json.dumps(state))
        return state

    server = siteserver.serve(shared, built_site.port)
    with lock:
        count("up")
        host = server.__enter__()
    try:
        yield host + SUB_PATH
    finally:
        with lock:
            count("done")
        deadline = time.monotonic() + 600
        while True:
            with lock:
                state = count()
                if state["done"] >= state["up"] or time.monotonic() > deadline:
                    server.__exit__(None, None, None)
                    break
            time.sleep(0.2)


@pytest.fixture(autouse=True)
def _retaincheck_sees_only_its_own_test(request, monkeypatch):
    """retaincheck's in-process audits search every module of the project loaded in the
    process for saved-tensor reads (issue 27 F4). Other tests load some that have them
    (docs_tools/autograd_svg.py, snippets): hidden from sys.modules during a retaincheck test,
    so that its verdicts do not depend on which tests ran before it in the same worker."""
    if not request.node.path.name.startswith("test_retaincheck"):
        return
    shared = (str(ROOT / "docs_tools") + os.sep, str(ROOT / "snippets") + os.sep)
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and _real(path).startswith(shared):
            monkeypatch.delitem(sys.modules, name)


@functools.cache
def _real(path: str) -> str:
    """os.path.realpath, once per path (thousands of modules, before every retaincheck test)."""
    return os.path.realpath(path)
