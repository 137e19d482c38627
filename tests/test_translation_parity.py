"""Every page exists in English and Chinese with the same structure.

For each ``docs/<page>.md`` there must be a ``docs/<page>.zh.md`` with the same headings
(same number per level, same explicit anchors in the same order), the same code blocks
(same languages, same includes, same inline Python), the same ``--8<--`` includes, the same
number of annotations under each code block, and the same links to other pages and images.
A failure names the page and says exactly what differs.

A Chinese page whose last change (by git history, or an uncommitted edit) is older than
its English page's is reported as a ``StaleTranslationWarning`` in the test output: the
English text may have changed since it was translated.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import mdfences
import pytest

HEADING = re.compile(r"^[ \t]*(#{1,6})[ \t]+(.*?)[ \t]*$")
ANCHOR = re.compile(r"\{[^}]*#([\w-]+)[^}]*\}$")
INLINE_CODE = re.compile(r"(`+).*?\1")
LINK = re.compile(r"(!?)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^[ \t]*\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t].*)?$")
HTML_REF = re.compile(r"""\b(href|src)=["']([^"']+)["']""")
SNIPPET = re.compile(r"""^[ \t]*-{1,}8<-{1,}[ \t]+["']?([^"'\s]+)["']?""")
LIST_ITEM = re.compile(r"^(?P<indent>[ \t]*)\d+\.[ \t]+")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


@dataclass
class Structure:
    headings: list[tuple[int, str | None, int, str]] = field(default_factory=list)
    code_blocks: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    annotations: list[int] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


def structure(path: Path) -> Structure:
    """The parts of a page that must match in both languages."""
    s = Structure()
    lines = path.read_text(encoding="utf-8").splitlines()
    fences = {f.line: f for f in mdfences.fences_in(path)}
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 in fences:  # a fenced block: skip to its closing fence
            fence = fences[i + 1]
            s.code_blocks.append(describe(fence))
            s.includes += [p + (f":{sec}" if sec else "") for p, sec in fence.includes]
            i = fence.end - 1
            s.annotations.append(annotation_count(lines, i))
            continue
        if m := HEADING.match(line):
            anchor = ANCHOR.search(m[2])
            s.headings.append((len(m[1]), anchor[1] if anchor else None, i + 1, m[2]))
        if m := SNIPPET.match(line):
            s.includes.append(m[1])
        prose = INLINE_CODE.sub("", line)
        for bang, target in LINK.findall(prose):
            if not EXTERNAL.match(target):
                s.links.append(("image " if bang else "link ") + target)
        if (m := REF_DEF.match(prose)) and not EXTERNAL.match(m[1]):
            s.links.append("link " + m[1])
        for attr, target in HTML_REF.findall(prose):
            if not EXTERNAL.match(target):
                s.links.append(("image " if attr == "src" else "link ") + target)
        i += 1
    return s


def describe(fence: mdfences.Fence) -> str:
    if fence.includes:
        return f"{fence.lang} block including " + ", ".join(
            p + (f":{sec}" if sec else "") for p, sec in fence.includes
        )
    if fence.is_python:
        return f"{fence.lang} block with inline code {fence.body!r}"
    return f"{fence.lang} block with inline text"


def annotation_count(lines: list[str], i: int) -> int:
    """Number of items in the ordered list right under a code block (its annotations)."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    count, indent = 0, None
    while i < len(lines):
        line = lines[i]
        m = LIST_ITEM.match(line)
        if m and (indent is None or m["indent"] == indent):
            indent = m["indent"]
            count += 1
        elif count and (not line.strip() or line.startswith((indent or "") + " ")):
            pass  # continuation of an item, or a blank line inside the list
        else:
            break
        i += 1
    return count


PAIRS = mdfences.page_pairs()
IDS = [str(en.relative_to(mdfences.DOCS_DIR)) for en, _ in PAIRS]


def rel(path: Path) -> str:
    return str(path.relative_to(mdfences.ROOT))


def sequence_diff(what: str, en: list[str], zh: list[str], en_name: str, zh_name: str) -> str:
    if en == zh:
        return ""
    diff = difflib.unified_diff(en, zh, en_name, zh_name, lineterm="", n=1)
    return f"{what} differ:\n    " + "\n    ".join(list(diff)[2:])


# Generated per-language files (tables, figures with translated labels) are named
# ``name.en.ext`` / ``name.zh.ext``: the same file in the page's own language is parity.
LANGUAGE_TAG = re.compile(r"\.(?:en|zh)(?=\.[A-Za-z0-9]+(?::[\w-]+)?$)")


# A snippet's output in Chinese is ``name.zh.out`` beside its ``name.out`` (snippetcheck's
# ``split_outputs``): the Chinese page's ``name.zh.out`` is the English page's ``name.out``.
ZH_OUTPUT = re.compile(r"\.zh(?=\.out\b)")


def language_neutral(items: list[str]) -> list[str]:
    return [LANGUAGE_TAG.sub(".<lang>", ZH_OUTPUT.sub("", item)) for item in items]


def parity_problems(en: Path, zh: Path) -> list[str]:
    a, b = structure(en), structure(zh)
    problems = []
    for s, name, other in ((a, rel(en), "zh"), (b, rel(zh), "en")):
        wrong = [x for x in s.includes + s.links if re.search(rf"\.{other}\.\w+(:[\w-]+)?$", x)]
        if wrong:
            problems.append(f"{name} uses the other language's files: {wrong}")
        s.includes, s.links = language_neutral(s.includes), language_neutral(s.links)
        s.code_blocks = [ZH_OUTPUT.sub("", block) for block in s.code_blocks]
    en_name, zh_name = rel(en), rel(zh)
    levels_a = Counter(h[0] for h in a.headings)
    levels_b = Counter(h[0] for h in b.headings)
    for level in sorted(set(levels_a) | set(levels_b)):
        if levels_a[level] != levels_b[level]:
            problems.append(
                f"h{level} headings: {levels_a[level]} in {en_name}, {levels_b[level]} in {zh_name}"
            )

    def heads(s, name):
        return [f"h{lv} {'#' + anc if anc else '(no explicit anchor)'}" for lv, anc, _, _ in s]

    problems.append(
        sequence_diff("headings (level and anchor, in order)", heads(a.headings, en_name),
                      heads(b.headings, zh_name), en_name, zh_name)
    )
    missing = [f"line {ln}: {txt}" for lv, anc, ln, txt in b.headings if lv > 1 and not anc]
    if missing:
        problems.append(f"{zh_name}: headings without an explicit English anchor: {missing}")
    problems.append(sequence_diff("code blocks", a.code_blocks, b.code_blocks, en_name, zh_name))
    problems.append(sequence_diff("snippet includes", a.includes, b.includes, en_name, zh_name))
    if len(a.code_blocks) == len(b.code_blocks) and a.annotations != b.annotations:
        problems += [
            f"code block {k + 1} ({a.code_blocks[k]}): {x} annotations in {en_name}, "
            f"{y} in {zh_name}"
            for k, (x, y) in enumerate(zip(a.annotations, b.annotations, strict=True))
            if x != y
        ]
    only_en = Counter(a.links) - Counter(b.links)
    only_zh = Counter(b.links) - Counter(a.links)
    if only_en or only_zh:
        problems.append(
            f"links between pages differ: only in {en_name}: {sorted(only_en.elements())}; "
            f"only in {zh_name}: {sorted(only_zh.elements())}"
        )
    return [p for p in problems if p]


@pytest.mark.parametrize(("en", "zh"), PAIRS, ids=IDS)
def test_translation_has_the_same_structure(en, zh):
    assert zh.exists(), f"{rel(en)} has no Chinese page {rel(zh)}"
    problems = parity_problems(en, zh)
    assert not problems, "\n".join(problems)


def test_every_chinese_page_has_an_english_page():
    orphans = [
        rel(zh)
        for zh in mdfences.markdown_files()
        if zh.name.endswith(".zh.md")
        and not zh.with_name(zh.name[: -len(".zh.md")] + ".md").exists()
    ]
    assert not orphans, f"Chinese pages without an English page: {orphans}"


def test_the_parity_check_names_what_differs(tmp_path):
    en, zh = tmp_path / "p.md", tmp_path / "p.zh.md"
    en.write_text(
        "# T\n\n## A { #a }\n\nSee [x](other.md#y).\n\n```python\n"
        '--8<-- "snippets/x/a.py"\n```\n\n1.  one\n2.  two\n\n## B { #b }\n',
        encoding="utf-8",
    )
    zh.write_text(
        "# T\n\n## 甲 { #a }\n\n见 [x](other.md#z)。\n\n```python\n"
        '--8<-- "snippets/x/b.py"\n```\n\n1.  一\n',
        encoding="utf-8",
    )
    mdfences_root = mdfences.ROOT
    try:
        mdfences.ROOT = tmp_path
        report = "\n".join(parity_problems(en, zh))
    finally:
        mdfences.ROOT = mdfences_root
    assert "h2 headings: 2 in p.md, 1 in p.zh.md" in report, report
    assert "-h2 #b" in report, report
    assert "-python block including snippets/x/a.py" in report, report
    assert "+python block including snippets/x/b.py" in report, report
    assert "2 annotations in p.md, 1 in p.zh.md" in report, report
    assert "'link other.md#y'" in report and "'link other.md#z'" in report, report


# --- Stale translations ---------------------------------------------------------------


class StaleTranslationWarning(UserWarning):
    """A Chinese page last changed before its English page."""


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def last_change(root: Path, path: Path) -> float:
    """Time of the last commit touching ``path``; now if it has uncommitted changes."""
    if git(root, "status", "--porcelain", "--", str(path)):
        return time.time()
    stamp = git(root, "log", "-1", "--format=%ct", "--", str(path))
    return float(stamp) if stamp else time.time()


def stale_translations(root: Path, pairs: list[tuple[Path, Path]]) -> list[str]:
    stale = []
    for en, zh in pairs:
        if not zh.exists():
            continue
        t_en, t_zh = last_change(root, en), last_change(root, zh)
        if t_zh < t_en:
            day = time.strftime("%Y-%m-%d", time.gmtime(t_en))
            stale.append(
                f"{zh.relative_to(root)} is older than {en.relative_to(root)} (changed {day}): "
                "bring the translation up to date, or commit both together"
            )
    return stale


def test_stale_translations_are_reported():
    """A warning (not a failure) for each translation older than its English page."""
    try:
        git(mdfences.ROOT, "rev-parse", "--git-dir")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: translation ages are unknown")
    stale = stale_translations(mdfences.ROOT, PAIRS)
    for message in stale:
        warnings.warn(message, StaleTranslationWarning, stacklevel=1)
    print(f"{len(stale)} stale translation(s) of {len(PAIRS)} pages")


def test_the_staleness_check_sees_a_newer_english_page(tmp_path):
    git(tmp_path, "init", "-q")
    en, zh = tmp_path / "p.md", tmp_path / "p.zh.md"
    for path, text, when in ((zh, "旧", "2024-01-01T00:00:00"), (en, "new", "2024-02-01T00:00:00")):
        path.write_text(text, encoding="utf-8")
        git(tmp_path, "add", path.name)
        subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
             "commit", "-qm", path.name],
            check=True,
            env={**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when},
        )
    assert stale_translations(tmp_path, [(en, zh)]) == [
        "p.zh.md is older than p.md (changed 2024-02-01): bring the translation up to date, "
        "or commit both together"
    ]
    zh.write_text("新", encoding="utf-8")  # an uncommitted edit counts as now
    assert stale_translations(tmp_path, [(en, zh)]) == []
