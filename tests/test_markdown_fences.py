"""No Python on the site escapes testing.

pytest-markdown-docs runs each Python fence in ``docs/`` (an include of a snippet, which must
pass its check, or inline code, which must run cleanly; see ``mdfences.FenceTestParser``).
Here the fences it collects are counted against the HTML that MkDocs actually renders, so a
fence its parser missed (say, in a new kind of container) fails the suite.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import mdfences
import pytest
import snippetcheck
from pytest_markdown_docs.plugin import FenceSyntax, extract_fence_tests

FENCES = mdfences.all_fences()
COLLECTED = set(snippetcheck.discover())


def included_files(fence):
    return [snippetcheck.ROOT / path for path, _ in fence.includes]


@pytest.mark.parametrize("fence", FENCES, ids=[f.where for f in FENCES])
def test_includes_point_at_tested_files(fence):
    for path in included_files(fence):
        assert path.exists(), f"{fence.where}: {path} does not exist"
        if path.suffix == ".py":
            assert path in COLLECTED, f"{fence.where}: {path} is not a collected snippet"
        elif path.suffix == ".out":
            snippet = path.parent / (path.name.split(".")[0] + ".py")  # name.out, name.zh.out
            assert snippet in COLLECTED, (
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


def collected_by_the_plugin(md: Path) -> list:
    """The fence tests pytest-markdown-docs collects from ``md``, as the plugin extracts them."""
    return list(
        extract_fence_tests(
            mdfences.FenceTestParser(),
            md.read_text(encoding="utf-8"),
            start_line_offset=0,
            source_path=md,
            fence_syntax=FenceSyntax.superfences,
        )
    )


def docstring_tests_collected_by_the_plugin() -> list:
    """The fence tests pytest-markdown-docs collects from the package's docstrings."""
    import importlib
    import inspect

    tests, seen = [], set()
    for py in sorted(mdfences.PACKAGE.glob("*.py")):
        module = importlib.import_module(f"retaincheck.{py.stem}".removesuffix(".__init__"))
        for obj in [module, *(v for _, v in inspect.getmembers(module))]:
            doc = inspect.getdoc(obj) if getattr(obj, "__module__", module.__name__) == (
                module.__name__
            ) else None
            if doc and id(obj) not in seen:
                seen.add(id(obj))
                tests += extract_fence_tests(
                    mdfences.FenceTestParser(), doc, start_line_offset=0, source_path=py,
                    fence_syntax=FenceSyntax.superfences,
                )
    return tests


@pytest.mark.parametrize("md", MARKDOWN, ids=[page_id(p) for p in MARKDOWN])
def test_plugin_runs_every_python_block_mkdocs_renders(md, built_site):
    """The rendered page has exactly as many Python blocks as pytest-markdown-docs runs."""
    html = html_page_for(md, built_site.path).read_text(encoding="utf-8")
    rendered = Counter(LANG_CLASS.findall(html))
    python_rendered = sum(n for lang, n in rendered.items() if lang in mdfences.PYTHON_LANGS)
    collected = len(collected_by_the_plugin(md))
    if mdfences.renders_docstrings(md):
        collected += len(docstring_tests_collected_by_the_plugin())
    assert python_rendered == collected, (
        f"{md.name}: MkDocs renders {python_rendered} Python blocks, pytest-markdown-docs "
        f"collects {collected}; a Python block is escaping the tests"
    )


def test_the_collection_is_configured():
    """The README's plain ``python -m pytest`` collects the pages: the plugin is switched on."""
    import tomllib

    config = tomllib.loads((mdfences.ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pytest_config = config["tool"]["pytest"]["ini_options"]
    assert "--markdown-docs" in pytest_config["addopts"].split()
    assert {"docs", "src/retaincheck"} <= set(pytest_config["testpaths"])
