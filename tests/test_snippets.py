"""Every snippet runs, asserts what its page claims, and prints exactly what its page shows.

Collected automatically: a new file in ``snippets/`` is tested with no list to edit.
Regenerate stored outputs after a deliberate change with ``pytest --update-snippets``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import snippetcheck

SNIPPETS = snippetcheck.discover()
MANIFEST = snippetcheck.SNIPPETS_DIR / "verified_with.json"


def test_there_are_snippets():
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize(
    "snippet", SNIPPETS, ids=[str(p.relative_to(snippetcheck.SNIPPETS_DIR)) for p in SNIPPETS]
)
def test_snippet(snippet, update_snippets):
    problems = snippetcheck.check(snippet, update=update_snippets)
    assert not problems, f"{snippet.relative_to(snippetcheck.ROOT)}: " + "\n".join(problems)


def running_torch_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        env=snippetcheck.snippet_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_pages_name_the_torch_that_ran_the_snippets(update_snippets):
    """The version every page shows is the torch these tests run the snippets with."""
    version = running_torch_version()
    if update_snippets:
        MANIFEST.write_text(json.dumps({"torch": version}, indent=2) + "\n", encoding="utf-8")
    recorded = json.loads(MANIFEST.read_text(encoding="utf-8"))["torch"]
    assert recorded == version, (
        f"snippets/verified_with.json says torch {recorded}, but the snippets ran with "
        f"{version}: run pytest --update-snippets and review the changed outputs"
    )
