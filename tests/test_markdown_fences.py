"""No Python on the site escapes testing.

Each Python fence in ``docs/`` is either an include of a tested snippet (``--8<--``) or
inline code that is executed here. The parser that finds fences is checked against the
HTML that MkDocs actually renders, so a fence the parser missed fails the suite.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import mdfences
import pytest
import snippetcheck

FENCES = mdfences.all_fences()
INLINE_PYTHON = [f for f in FENCES if f.is_python and not f.includes]
COLLECTED = set(snippetcheck.discover())


def test_inline_python_fences_run():
    """Inline Python (discouraged: code belongs in snippets/) runs cleanly, at any indent."""
    failures = {}
    for fence in INLINE_PYTHON:
        problems = snippetcheck.problems_of_run(snippetcheck.run_code(fence.body), 120)
        if problems:
            failures[fence.where] = problems
    assert not failures, failures


def included_files(fence):
    return [snippetcheck.ROOT / path for path, _ in fence.includes]


@pytest.mark.parametrize("fence", FENCES, ids=[f.where for f in FENCES])
def test_includes_point_at_tested_files(fence):
    for path in included_files(fence):
        assert path.exists(), f"{fence.where}: {path} does not exist"
        if path.suffix == ".py":
            assert path in COLLECTED, f"{fence.where}: {path} is not a collected snippet"
        elif path.suffix == ".out":
            assert path.with_suffix(".py") in COLLECTED, (
                f"{fence.where}: {path.name} is not the stored output of a collected snippet"
            )


def test_every_fence_names_its_language():
    unnamed = [f.where for f in FENCES if not f.lang]
    assert not unnamed, f"fences without a language (cannot tell if they are Python): {unnamed}"


# That both languages include the same code (and have the same headings, includes and
# links) is checked by test_translation_parity.py.

MARKDOWN = mdfences.markdown_files()


def page_id(path):
    return str(path.relative_to(mdfences.DOCS_DIR))


LANG_CLASS = re.compile(r'class="language-(\w+) highlight"')


def html_page_for(md: Path, site: Path) -> Path:
    return site / mdfences.page_url(md) / "index.html"


@pytest.mark.parametrize("md", MARKDOWN, ids=[page_id(p) for p in MARKDOWN])
def test_parser_sees_every_python_block_mkdocs_renders(md, built_site):
    """The rendered page has exactly as many Python blocks as the parser found fences."""
    html = html_page_for(md, built_site.path).read_text(encoding="utf-8")
    rendered = Counter(LANG_CLASS.findall(html))
    python_rendered = sum(n for lang, n in rendered.items() if lang in mdfences.PYTHON_LANGS)
    parsed = sum(1 for f in mdfences.fences_in(md) if f.is_python)
    assert python_rendered == parsed, (
        f"{md.name}: MkDocs renders {python_rendered} Python blocks, the fence parser found "
        f"{parsed}; a Python block is escaping the tests"
    )
