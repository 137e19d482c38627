"""The GitHub workflow, read as its runner and an auditor would: offline, in about a second.

zizmor (``--offline``) finds nothing: every action pinned to a commit, no persisted
credentials. check-jsonschema validates the file against GitHub's workflow schema, which it
ships. Each check is also shown to fail on a broken copy, so that a silent tool cannot pass.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# An action pinned to a full commit SHA, with the release it is in a comment: "# v4.4.0".
PINNED = re.compile(r"^\s*(?:-\s+)?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def tool(name: str) -> str:
    """The tool installed beside this interpreter (the test extra), else the one on PATH."""
    found = Path(sys.executable).with_name(name)
    path = str(found) if found.exists() else shutil.which(name)
    assert path, f"{name} is not installed: pip install -e '.[test]' -c constraints.txt"
    return path


def zizmor(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", *map(str, files)],
        capture_output=True, text=True, timeout=60,
    )


def schema_check(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, files)],
        capture_output=True, text=True, timeout=60,
    )


def test_there_is_a_workflow():
    assert WORKFLOWS


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
def test_zizmor_finds_nothing(workflow):
    run = zizmor(workflow)
    assert run.returncode == 0 and "No findings to report" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
def test_matches_githubs_workflow_schema(workflow):
    run = schema_check(workflow)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
def test_every_action_is_pinned_to_a_release_commit(workflow):
    uses = [line for line in workflow.read_text().splitlines() if "uses:" in line]
    assert uses
    assert all(PINNED.match(line) for line in uses), [u for u in uses if not PINNED.match(u)]


def test_the_checks_catch_a_broken_workflow(tmp_path):
    """An action by tag, persisted credentials, an unknown key: each is caught."""
    text = (ROOT / ".github" / "workflows" / "site.yml").read_text()
    by_tag = tmp_path / "by_tag.yml"
    by_tag.write_text(re.sub(r"checkout@[0-9a-f]{40}", "checkout@v4", text, count=1))
    run = zizmor(by_tag)
    assert run.returncode != 0 and "unpinned-uses" in run.stdout, run.stdout
    assert not PINNED.match(next(line for line in by_tag.read_text().splitlines() if "@v4" in line))

    credentials = tmp_path / "credentials.yml"
    # checkout's default: the token stays in .git/config, in the job that uploads artifacts.
    credentials.write_text(re.sub(r"\n *persist-credentials: false[^\n]*", "", text, count=1))
    run = zizmor(credentials)
    assert run.returncode != 0 and "artipacked" in run.stdout, run.stdout

    unknown_key = tmp_path / "unknown_key.yml"
    unknown_key.write_text(text.replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest", 1))
    run = schema_check(unknown_key)
    assert run.returncode != 0, run.stdout
