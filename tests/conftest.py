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


@pytest.fixture(scope="session")
def update_snippets(request) -> bool:
    return request.config.getoption("--update-snippets")


@dataclass
class BuiltSite:
    path: Path
    log: str
    seconds: float


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> BuiltSite:
    """The site, built once per test session with ``mkdocs build --strict``."""
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        # Material prints a banner about MkDocs 2 on every build; it is not a build warning.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log[-6000:]}"
    return BuiltSite(out, log, seconds)


@pytest.fixture(scope="session")
def served_site(built_site):
    """The built site served on 127.0.0.1 at a free port; yields its base URL."""
    import siteserver

    with siteserver.serve(built_site.path) as base:
        yield base
