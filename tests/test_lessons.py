"""What a reader sees: each snippet is a short lesson to copy, with its proof beside it.

Every snippet file is a lesson and a proof (``tests/lessonrun.py`` says what each is and runs
them: the lesson alone, as the reader's copy would run, then the proof in its namespace, which
may not print). ``test_snippets.py`` runs them; the checks here are about what a page shows:

* the lesson is short, has no assertions (they are the proof's), and prints what the page shows;
* the code carries no prose comments: code is shared by both languages, prose is written in
  each (an explanation is an annotation ``# (1)!``, written under the block in the page's
  language); a native reader found some 148 English comments in code on the Chinese pages;
* each page shows a lesson, then its output, then the proof collapsed under one label per
  language, and nothing else of the file.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import mdfences
import pytest
import snippetcheck
from lessonrun import SectionError, lesson_and_proof

SNIPPETS = snippetcheck.discover()
MAX_LESSON_LINES = 30  # the issue aims at 25; a distributed lesson needs a few more
# Helper modules a page tells readers to save beside their script, not lessons of their own:
# each is shown whole, and the lessons that import it stay within the limit. launch.py starts
# local ranks within a time limit, reaps them and stops them if the parent dies
# (tests/test_distributed_launcher.py tests each of these); that does not fit in 30 lines.
HELPER_MODULES = {"distributed/launch.py": 120}
PROOF_LABEL = {False: "How we know this", True: "验证"}
# What a comment in shown code may be: an annotation marker, a linter or type pragma.
ALLOWED_COMMENT = re.compile(
    r"#\s*(\(\d+\)!|noqa\b.*|type:.*|pragma:.*|--8<-- \[(start|end):\w+\])$"
)


def _id(path: Path) -> str:
    return str(path.relative_to(snippetcheck.SNIPPETS_DIR))


def _parts(snippet: Path):
    try:
        parts = lesson_and_proof(snippet.read_text(encoding="utf-8"))
    except SectionError as exc:
        pytest.fail(f"{_id(snippet)}: {exc}")
    if parts is None:
        pytest.fail(
            f"{_id(snippet)} has no lesson and proof sections "
            "(# --8<-- [start:lesson] ... [end:lesson], then the same for proof)"
        )
    return parts


@pytest.mark.parametrize("snippet", SNIPPETS, ids=_id)
def test_the_lesson_is_short_and_asserts_nothing(snippet):
    (_, lesson), _ = _parts(snippet)
    lines = lesson.count("\n")
    limit = HELPER_MODULES.get(_id(snippet), MAX_LESSON_LINES)
    assert lines <= limit, f"{_id(snippet)}: the lesson has {lines} lines"
    asserts = [node.lineno for node in ast.walk(ast.parse(lesson)) if isinstance(node, ast.Assert)]
    assert not asserts, f"{_id(snippet)}: assert in the lesson (lines {asserts}): the proof asserts"
    assert snippetcheck.output_path(snippet).read_text(encoding="utf-8").strip(), (
        f"{_id(snippet)}: the lesson prints nothing; the page shows what it prints"
    )


def prose_comments(source: str) -> list[tuple[int, str]]:
    """``(line, comment)`` of every comment that is neither an annotation nor a pragma."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and not ALLOWED_COMMENT.match(token.string.strip()):
            found.append((token.start[0], token.string))
    return found


@pytest.mark.parametrize("snippet", SNIPPETS, ids=_id)
def test_shown_code_has_no_prose_comments(snippet):
    comments = prose_comments(snippet.read_text(encoding="utf-8"))
    assert not comments, (
        f"{_id(snippet)}: the code is shown on both language pages; move these explanations "
        f"into annotations (# (1)!) or the prose: {comments[:5]}"
    )


def test_prose_comments_are_found():
    code = 'x = 1  # (1)!\ny = "# not a comment"  # the sum of the losses\nz = 3  # noqa: E501\n'
    assert prose_comments(code) == [(2, "# the sum of the losses")]


def page_blocks(md: Path) -> list[tuple[str, str, str | None, int]]:
    """``(kind, target, section, line)`` for each include fence and each ``???`` block, in order.

    ``kind`` is ``"include"`` or ``"details"`` (then ``target`` is the block's title and
    ``section`` its marker: ``???`` collapsed, ``???+`` open).
    """
    blocks = []
    for token in mdfences.parser().parse(md.read_text(encoding="utf-8")):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "fence":
            for path, section in mdfences.includes_of(token.content):
                blocks.append(("include", path, section, line))
        elif token.type == "admonition_open" and token.markup.startswith("???"):
            title = re.search(r'"(.*)"', token.info)
            blocks.append(("details", title[1] if title else "", token.markup, line))
    return blocks


def shape_problems(md: Path) -> list[str]:
    """Where a page does not show lesson, output, then the proof under the one label."""
    label = PROOF_LABEL[mdfences.is_chinese(md)]
    blocks = page_blocks(md)
    problems = []
    for i, (kind, target, section, line) in enumerate(blocks):
        if kind != "include" or not target.endswith(".py"):
            continue
        if section not in ("lesson", "proof"):
            shown = "whole" if section is None else f"as :{section}"
            problems.append(f"line {line}: {target} shown {shown}; show :lesson")
            continue
        if section == "proof":
            continue  # checked with its lesson
        expected = [
            ("include", target.removesuffix(".py") + ".out", None),
            ("details", label, "???"),
            ("include", target, "proof"),
        ]
        following = [b[:3] for b in blocks[i + 1 : i + 4]]
        if mdfences.is_chinese(md) and following and following[0][1].endswith(".zh.out"):
            # the Chinese output the snippet prints after "# --8<-- [out:zh]" (snippetcheck)
            following[0] = ("include", following[0][1].removesuffix(".zh.out") + ".out", None)
        if following != expected:
            problems.append(
                f"line {line}: {target}:lesson must be followed by its output, then "
                f'??? success "{label}" (collapsed) holding {target}:proof; found {following}'
            )
    lessons = {t for k, t, s, _ in blocks if k == "include" and s == "lesson"}
    proofs = [t for k, t, s, _ in blocks if k == "include" and s == "proof"]
    problems += [f"{t}:proof shown without its lesson" for t in proofs if t not in lessons]
    return problems


@pytest.mark.parametrize(
    "md",
    mdfences.markdown_files(),
    ids=lambda p: p.name if p.parent.name == "docs" else f"{p.parent.name}/{p.name}",
)
def test_every_page_shows_lesson_output_and_proof(md):
    problems = shape_problems(md)
    assert not problems, "\n".join(problems)


def test_a_page_showing_a_whole_file_or_no_proof_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        '```python\n--8<-- "snippets/a/b.py"\n```\n\n'
        '```python\n--8<-- "snippets/a/c.py:lesson"\n```\n\n'
        '```text title="Output"\n--8<-- "snippets/a/c.out"\n```\n\n'
        '??? note "Proof"\n\n    ```python\n    --8<-- "snippets/a/c.py:proof"\n    ```\n',
        encoding="utf-8",
    )
    problems = shape_problems(page)
    assert len(problems) == 2, problems
    assert "shown whole" in problems[0] and "How we know this" in problems[1]
