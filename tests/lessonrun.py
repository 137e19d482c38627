"""Run a snippet as a reader meets it: the lesson alone, as a program of its own, then the proof.

Usage: ``python tests/lessonrun.py snippets/<page>/<idea>.py [args...]``

A snippet file is two sections, nothing outside them but blank lines::

    # --8<-- [start:lesson]
    ...the code a reader copies into their own script: imports, seed, data, the idea, print...
    # --8<-- [end:lesson]

    # --8<-- [start:proof]
    ...assertions against a reference, counter-examples that must raise; it prints nothing...
    # --8<-- [end:proof]

The page shows the lesson and its output, and the proof collapsed under it. This runner

1. writes the lesson, and only the lesson, to ``<idea>.py`` in the working directory and runs
   it as ``python <idea>.py`` would: as ``__main__``, with an absolute ``__file__``,
   ``sys.argv[0]`` and ``sys.path[0]`` its folder (the snippet's own folder comes next, so that a
   helper module the page tells readers to save beside their script, such as
   ``distributed/launch.py``, imports). Nothing of the proof exists yet while the lesson runs, and
   a process the lesson spawns re-imports the lesson file, exactly as with a reader's copy;
2. then runs the proof in the lesson's namespace (it reads the lesson's variables), compiled
   under the snippet's own path and line numbers so that a failing assertion points at the file;
   while it runs, anything written to ``sys.stdout`` fails the run: the output a page shows is
   the lesson's alone. Then the names the proof made go (a name of the lesson's it deleted or
   rebound stays as it left it), and the program ends as the lesson's would: the lesson's
   module is ``__main__`` to the end, so its exit handlers and finalizers, and the
   interpreter's teardown of ``__main__`` after them, see what ``python <idea>.py`` leaves
   (``tests/test_the_net_catches_failures.py`` compares the two).

Why our own code: no test runner or doctest tool runs one part of a file as a standalone program
and then another part in its namespace. A file without the two markers runs whole, as
``python file.py`` would (``tests/snippetserver.py`` does that itself).
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

START = re.compile(r"^# --8<-- \[start:(\w+)\]\s*$")
END = re.compile(r"^# --8<-- \[end:(\w+)\]\s*$")


class SectionError(ValueError):
    """The file is not one lesson followed by one proof."""


def sections(text: str) -> dict[str, tuple[int, str]]:
    """``{name: (first line number, text)}`` of the file's top-level ``--8<--`` sections.

    Sections may not nest or overlap.
    """
    found: dict[str, tuple[int, str]] = {}
    current: str | None = None
    first = 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if m := START.match(line):
            if current is not None:
                raise SectionError(f"line {number}: section {m[1]!r} starts inside {current!r}")
            if m[1] in found:
                raise SectionError(f"line {number}: section {m[1]!r} appears twice")
            current, first, body = m[1], number + 1, []
        elif m := END.match(line):
            if m[1] != current:
                raise SectionError(f"line {number}: end of {m[1]!r} outside it")
            found[current] = (first, "".join(body))
            current = None
        elif current is not None:
            body.append(line)
    if current is not None:
        raise SectionError(f"section {current!r} never ends")
    return found


def lesson_and_proof(text: str) -> tuple[tuple[int, str], tuple[int, str]] | None:
    """The lesson and proof sections, or None when the file has neither marker.

    Raises SectionError when the file has a lesson without a proof (or the other way round),
    a proof before its lesson, or code outside the two sections.
    """
    found = sections(text)
    if "lesson" not in found and "proof" not in found:
        return None
    missing = {"lesson", "proof"} - set(found)
    if missing:
        raise SectionError(f"no {' and no '.join(sorted(missing))} section")
    lesson, proof = found["lesson"], found["proof"]
    if proof[0] < lesson[0]:
        raise SectionError("the proof comes before the lesson")
    inside = set(range(lesson[0] - 1, lesson[0] + lesson[1].count("\n") + 1))
    inside |= set(range(proof[0] - 1, proof[0] + proof[1].count("\n") + 1))
    for number, line in enumerate(text.splitlines(), start=1):
        if number not in inside and line.strip():
            raise SectionError(f"line {number} is outside the lesson and the proof: {line!r}")
    return lesson, proof


class _NoPrinting:
    """``sys.stdout`` while the proof runs: a page shows the lesson's output, and only that."""

    def write(self, text: str) -> int:
        if not text:
            return 0
        raise AssertionError(f"the proof printed {text!r}: the proof asserts, the lesson prints")

    def flush(self) -> None:
        pass


def run(path: Path, args: list[str]) -> None:
    text = path.read_text(encoding="utf-8")
    parts = lesson_and_proof(text)
    if parts is None:
        raise SectionError(f"{path}: no lesson and proof sections")
    (_, lesson), (proof_line, proof) = parts
    folder = Path.cwd()  # a reader runs `python idea.py` in the folder that holds it
    lesson_file = folder / path.name
    if lesson_file.exists():
        raise SectionError(f"{lesson_file} exists already; run from an empty folder")
    lesson_file.write_text(lesson, encoding="utf-8")

    module = types.ModuleType("__main__")
    module.__file__ = str(lesson_file)
    module.__builtins__ = __builtins__
    module.__spec__ = None
    # The lesson's module is the program's __main__ from here to the end, as it is for
    # `python lesson.py`: what its exit handlers read, and what the interpreter tears down
    # after them (a second stream's last line, a __del__).
    sys.modules["__main__"] = module
    sys.argv = [str(lesson_file), *args]
    sys.path[0:1] = [str(folder), str(path.parent.resolve())]
    names = module.__dict__
    exec(compile(lesson, str(lesson_file), "exec"), names)
    sys.stdout.flush()
    stdout, sys.stdout = sys.stdout, _NoPrinting()
    try:
        lessons = set(names)  # the names only: a proof may check that a value was freed
        padded = "\n" * (proof_line - 1) + proof
        exec(compile(padded, str(path.resolve()), "exec"), names)
        # What the proof made goes now, while printing still fails the run.
        for name in [n for n in names if n not in lessons]:
            del names[name]
    finally:
        sys.stdout = stdout


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python tests/lessonrun.py SNIPPET.py [args...]", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(f"lessonrun: no such file: {path}", file=sys.stderr)
        return 2
    try:
        run(path, argv[1:])
    except SectionError as exc:
        print(f"lessonrun: {path}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    if code := main(sys.argv[1:]):  # on success, the program ends as the lesson does
        sys.exit(code)
