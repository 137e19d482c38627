"""Find every fenced code block in the site's markdown, at any indentation.

Fences inside content tabs and admonitions are indented; this parser sees them too.
``test_markdown_fences.py`` checks the parser against the built HTML, so a fence it
missed cannot escape testing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = ROOT / "docs"

PYTHON_LANGS = {"python", "py", "python3", "py3", "pycon", "ipython"}
OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$')


@dataclass
class Fence:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    info: str
    body: str

    @property
    def is_python(self) -> bool:
        return self.lang in PYTHON_LANGS

    @property
    def includes(self) -> list[tuple[str, str | None]]:
        """(path, section) of each ``--8<--`` line, when the body is made only of them."""
        lines = [ln.strip() for ln in self.body.splitlines() if ln.strip()]
        matches = [INCLUDE.match(ln) for ln in lines]
        if not lines or not all(matches):
            return []
        return [(m["path"], m["section"]) for m in matches]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def language_of(info: str) -> str:
    token = info.split()[0] if info.split() else ""
    token = token.strip("{}").lstrip(".")
    return token.lower()


def fences_in(path: Path) -> list[Fence]:
    lines = path.read_text(encoding="utf-8").splitlines()
    fences: list[Fence] = []
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"]
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            ln = lines[j]
            body.append(ln[len(indent):] if ln.startswith(indent) else ln.lstrip())
            j += 1
        fences.append(Fence(path, i + 1, language_of(info), info, "\n".join(body) + "\n"))
        i = j + 1
    return fences


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
