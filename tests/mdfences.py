"""Find every fenced code block in the site's markdown, at any indentation.

The parser is the one pytest-markdown-docs collects the pages with (the root ``conftest.py``
hands it over through the plugin's ``pytest_markdown_docs_markdown_it`` hook), so what the
tests run and what these helpers report are the same fences. It is markdown-it-py's
CommonMark parser with mdit-py-plugins' admonitions; Material's content tabs (``=== "Title"``
with an indented body, pymdownx.tabbed) have no markdown-it plugin, and nest exactly as an
admonition does, so each tab line is read as one (same line, so line numbers hold).
``test_markdown_fences.py`` checks what the plugin collects against the HTML MkDocs renders,
so a fence it missed cannot escape testing.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt
from mdit_py_plugins.admon import admon_plugin

ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = ROOT / "docs"

PYTHON_LANGS = {"python", "py", "python3", "py3", "pycon", "ipython"}
TAB = re.compile(r'(?m)^([ \t]*)===\+?([ \t]+")')
INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$')


@dataclass(frozen=True)
class Fence:
    path: Path
    line: int  # 1-based line of the opening fence
    end: int  # 1-based line after the closing fence
    lang: str
    info: str
    body: str

    @property
    def is_python(self) -> bool:
        return self.lang in PYTHON_LANGS

    @property
    def includes(self) -> list[tuple[str, str | None]]:
        return includes_of(self.body)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def includes_of(body: str) -> list[tuple[str, str | None]]:
    """(path, section) of each ``--8<--`` line, when the body is made only of them."""
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    matches = [INCLUDE.match(ln) for ln in lines]
    if not lines or not all(matches):
        return []
    return [(m["path"], m["section"]) for m in matches]


def language_of(info: str) -> str:
    token = info.split()[0] if info.split() else ""
    token = token.strip("{}").lstrip(".")
    return token.lower()


class PageParser(MarkdownIt):
    """CommonMark with admonitions, reading each content tab as an admonition."""

    def __init__(self):
        super().__init__("commonmark")
        self.use(admon_plugin)
        self.disable("inline")  # only block tokens (fences, admonitions) are read: 40 % faster

    def parse(self, src, env=None):
        return super().parse(TAB.sub(r"\1!!! tab\2", src), env)


@cache
def parser() -> PageParser:
    return PageParser()


class FenceTestParser(PageParser):
    """The parser pytest-markdown-docs collects the pages with: each Python fence becomes a call.

    The plugin would ``exec`` a fence's text inside the pytest process. Our fences are
    ``--8<--`` includes of a snippet file (the page shows the file, or one marked section of
    it, and the proof runs below it in the same file), and a snippet must run as its own
    program and print its stored output. So a fence that includes snippets becomes
    ``check_snippet(path, section)`` for each include, and any other Python fence (in a page
    or a docstring) becomes ``check_inline(code)``; ``conftest.py`` provides both through the
    plugin's ``pytest_markdown_docs_globals`` hook, and both run the code in a fork of a warm
    interpreter (``snippetcheck``). The fence keeps its place, so a failure names its line.
    """

    def parse(self, src, env=None):
        tokens = super().parse(src, env)
        for t in tokens:
            lang = language_of(t.info)
            if t.type != "fence" or lang not in PYTHON_LANGS:
                continue
            if includes := includes_of(t.content):
                t.content = "".join(f"check_snippet({p!r}, {s!r})\n" for p, s in includes)
            else:
                t.content = f"check_inline({t.content!r})\n"
            t.info = "python"  # the plugin collects only python/py/python3 fences
        return tokens


def fences_of(path: Path, text: str) -> list[Fence]:
    """The fences of ``text`` (a page, or a docstring of ``path``), lines counted in ``text``."""
    return list(_fences_of(path, text))


@cache  # a page's text is parsed once per process, not once per test module (2 s a worker)
def _fences_of(path: Path, text: str) -> tuple[Fence, ...]:
    return tuple(
        Fence(path, t.map[0] + 1, t.map[1] + 1, language_of(t.info), t.info, t.content)
        for t in parser().parse(text)
        if t.type == "fence" and t.map
    )


def fences_in(path: Path) -> list[Fence]:
    return fences_of(path, path.read_text(encoding="utf-8"))


PACKAGE = ROOT / "src" / "retaincheck"
AUTODOC = re.compile(r"^::: ", re.M)


def docstring_fences(package: Path = PACKAGE) -> list[Fence]:
    """The fences in the package's docstrings, in source order (mkdocstrings renders them on
    the API page, pytest-markdown-docs runs them)."""
    fences = []
    for py in sorted(package.rglob("*.py")):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, DOCUMENTED))]
        for node in sorted(nodes, key=lambda n: getattr(n, "lineno", 0)):
            if doc := ast.get_docstring(node):
                fences += fences_of(py, doc)
    return fences


DOCUMENTED = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


# The Chinese API page renders the signatures without the docstrings' English text and the
# English comments of its examples; the English page renders (and the suite runs) them.
NO_DESCRIPTIONS = re.compile(r"^[ \t]+show_docstring_description:[ \t]*false\b", re.M)


def renders_docstrings(md: Path) -> bool:
    """Whether a page renders the docstrings' text: ``::: retaincheck`` without
    ``show_docstring_description: false``."""
    text = md.read_text(encoding="utf-8")
    return bool(AUTODOC.search(text)) and not NO_DESCRIPTIONS.search(text)


def rendered_fences(md: Path) -> list[Fence]:
    """The fences a page renders: its own, and on a page that renders the package's
    docstrings (``::: retaincheck``), the docstrings' fences after them."""
    own = fences_in(md)
    if renders_docstrings(md):
        own += docstring_fences()
    return own


def markdown_files(docs_dir: Path = DOCS_DIR) -> list[Path]:
    return sorted(docs_dir.rglob("*.md"))


def all_fences(docs_dir: Path = DOCS_DIR) -> list[Fence]:
    return [f for p in markdown_files(docs_dir) for f in fences_in(p)]


def is_chinese(md: Path) -> bool:
    return md.name.endswith(".zh.md")


def page_pairs(docs_dir: Path = DOCS_DIR) -> list[tuple[Path, Path]]:
    """Each English page with the path of its Chinese twin (which may be missing)."""
    return [
        (md, md.with_name(md.stem + ".zh.md"))
        for md in markdown_files(docs_dir)
        if not is_chinese(md)
    ]


def page_url(md: Path, docs_dir: Path = DOCS_DIR) -> str:
    """The built page's path relative to the site root: ``""``, ``"zh/guide/x/"``, ..."""
    rel = md.relative_to(docs_dir)
    stem = rel.name.removesuffix(".zh.md") if is_chinese(md) else rel.stem
    parts = [*(["zh"] if is_chinese(md) else []), *rel.parent.parts]
    parts += [] if stem == "index" else [stem]
    return "".join(p + "/" for p in parts)
