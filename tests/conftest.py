from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption(
        "--update-snippets",
        action="store_true",
        help="rewrite snippets/*.out and snippets/verified_with.json from real runs",
    )
    parser.addoption(
        "--cpu-variants",
        action="store_true",
        help="also rerun every snippet on other kernel paths and thread counts (slow)",
    )


CPU_VARIANTS_COMMAND = "python -m pytest tests/test_snippets.py --cpu-variants -m cpu_variants"


def pytest_collection_modifyitems(config, items):
    """The CPU-variant reruns take minutes: they run only when asked for, and say so."""
    if config.getoption("--cpu-variants"):
        return
    kept = [item for item in items if item.get_closest_marker("cpu_variants") is None]
    deselected = [item for item in items if item.get_closest_marker("cpu_variants") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        config.stash[_NOT_RUN] = len(deselected)
        items[:] = kept


_NOT_RUN = pytest.StashKey[int]()


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
    not_run = config.stash.get(_NOT_RUN, 0)
    if not reasons and not not_run:
        return
    terminalreporter.section("checks that did not run")
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"NOT RUN ({count} skipped): {reason}")
    if not_run:
        terminalreporter.write_line(
            f"NOT RUN ({not_run} deselected): the snippets on other CPU kernel paths and "
            f"thread counts; run them with: {CPU_VARIANTS_COMMAND}"
        )


@pytest.fixture(scope="session")
def update_snippets(request) -> bool:
    return request.config.getoption("--update-snippets")


@dataclass
class BuiltSite:
    path: Path
    log: str
    seconds: float


@pytest.fixture(scope="session")
def site_port() -> int:
    """The 127.0.0.1 port the test site is served on; the build's site_url names it."""
    import siteserver

    return siteserver.free_port()


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
    return BuiltSite(out, log, seconds)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, site_port) -> BuiltSite:
    """The site, built once per test session with ``mkdocs build --strict``.

    ``site_url`` is the address ``served_site`` serves it at, as in production: Material's
    language switcher matches pages against the sitemap's absolute URLs.
    """
    return build_site(tmp_path_factory.mktemp("site"), f"http://127.0.0.1:{site_port}/")


@pytest.fixture(scope="session")
def served_site(built_site, site_port):
    """The built site served on 127.0.0.1 at its free port; yields its base URL."""
    import siteserver

    with siteserver.serve(built_site.path, site_port) as base:
        yield base
