"""The checker that guards the site's snippets fails on deliberately broken fixtures.

The fixtures live outside ``snippets/`` so the site never shows them; they go through the
very same functions as the real snippets and inline fences.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

import pytest
import snippetcheck

import conftest

FIXTURES = Path(__file__).parent / "fixtures"
BROKEN = FIXTURES / "broken_snippets"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("false_claim.py", "Trying to backward through the graph a second time"),
        ("stale_output.py", "output differs from stale_output.out"),
        ("hangs.py", "timed out after 2 s"),
        ("unseen_warning.py", "wrote to stderr"),
        ("no_stored_output.py", "no stored output"),
        # A lesson must run alone, as a reader's copy would: here it calls a helper that only
        # the proof defines (the whole file, run top to bottom, would fail the same way; a
        # lesson that used a name the proof defines *before* the lesson could not).
        ("lesson_needs_the_proof.py", "NameError: name 'helper' is not defined"),
        ("proof_prints.py", "the proof printed"),
        ("false_proof.py", "a false claim"),
        ("code_outside_sections.py", "line 1 is outside the lesson and the proof"),
        # A rank is started as with ``spawn``, even from the warm interpreter: it re-imports
        # the lesson, so the lesson needs its __main__ guard, and its target must be importable.
        ("spawn_without_main_guard.py", "bootstrapping phase"),
        ("spawn_target_under_main.py", "Can't get attribute 'work'"),
    ],
)
def test_broken_snippet_is_caught(name, expected):
    # Only the hanging fixture gets a short limit (torch is imported already, in the warm
    # interpreter it forks from); the others must fail for their own reason, not a timeout.
    timeout = 2 if name == "hangs.py" else snippetcheck.DEFAULT_TIMEOUT_S
    problems = snippetcheck.check(BROKEN / name, timeout=timeout)
    assert problems, f"{name} passed the checker, but it is broken"
    assert expected in "\n".join(problems)


def test_stale_output_shows_a_diff():
    (problem,) = snippetcheck.check(BROKEN / "stale_output.py")
    assert "-[1.0, 1.0, 1.0]" in problem and "+[2.0, 2.0, 2.0]" in problem


def test_broken_fixtures_are_not_collected_as_site_snippets():
    assert not any(BROKEN in p.parents for p in snippetcheck.discover())


def test_fences_inside_admonitions_and_tabs_are_found_and_fail():
    """pytest-markdown-docs, with our parser, collects both broken fences, and both fail."""
    from test_markdown_fences import collected_by_the_plugin

    tests = collected_by_the_plugin(FIXTURES / "broken_docs" / "page.md")
    assert [t.start_line for t in tests] == [5, 16]
    globals_ = conftest.pytest_markdown_docs_globals()
    messages = []
    for test in tests:
        with pytest.raises(AssertionError) as failure:
            exec(compile(test.source, str(test.source_path), "exec"), dict(globals_))
        messages.append(str(failure.value))
    assert "Trying to backward through the graph a second time" in messages[0]
    assert "arithmetic is broken" in messages[1]


def test_a_page_including_a_missing_snippet_fails():
    globals_ = conftest.pytest_markdown_docs_globals()
    with pytest.raises(AssertionError, match="does not exist"):
        globals_["check_snippet"]("snippets/index/no_such_snippet.py")
    with pytest.raises(AssertionError, match="has no section 'nope'"):
        globals_["check_snippet"]("snippets/index/second_backward_error.py", "nope")


CHANGES = FIXTURES / "output_changes"
STORED = (CHANGES / "gradients.out").read_text(encoding="utf-8")
REJECTED = sorted(p.stem for p in CHANGES.glob("*.changed") if p.stem != "last_digit")


@pytest.mark.parametrize("change", REJECTED)
def test_a_real_change_in_the_output_is_caught(change):
    changed = (CHANGES / f"{change}.changed").read_text(encoding="utf-8")
    assert not snippetcheck.outputs_match(STORED, changed), f"{change} was accepted"


def test_the_rejected_changes_cover_what_the_issue_names():
    assert {"flipped_sign", "doubled_value", "changed_count", "changed_word"} <= set(REJECTED)


def test_a_last_digit_change_is_accepted():
    changed = (CHANGES / "last_digit.changed").read_text(encoding="utf-8")
    assert changed != STORED
    assert snippetcheck.outputs_match(STORED, changed)


def test_the_checker_accepts_a_run_that_differs_in_the_last_digit():
    assert snippetcheck.check(CHANGES / "last_digit_run.py") == []


ISOLATION = FIXTURES / "isolation"


@pytest.mark.parametrize("end", ["ends", "hang"])
def test_a_process_a_snippet_leaves_is_killed(end):
    """What a program leaves running dies with it, at its end or at its time limit (the
    server's process group; a new interpreter's session with SNIPPETS_FRESH_INTERPRETER=1)."""
    run = snippetcheck.run_file(ISOLATION / "leaves_a_process.py", timeout=1, args=[end])
    assert run.timed_out == (end == "hang") and not run.stderr, run.stderr
    left = int(run.stdout)
    deadline = time.monotonic() + 5
    while snippetcheck.alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not snippetcheck.alive(left), f"the process the snippet started ({left}) still runs"


def test_each_run_draws_its_own_numpy_random_state():
    """As in new interpreters, two runs of an unseeded numpy draw differ (the server has numpy
    imported; a fork would copy its random state)."""
    draw = "import numpy\nprint(numpy.random.rand())\n"
    runs = [snippetcheck.run_code(draw) for _ in range(2)]
    assert all(r.returncode == 0 and not r.stderr for r in runs), runs
    assert runs[0].stdout != runs[1].stdout, runs


def test_a_snippet_cannot_leak_state_into_the_next():
    """Snippets run in forks of one warm interpreter: each starts from the same clean state."""
    first = snippetcheck.run_file(ISOLATION / "changes_state.py")
    assert first.returncode == 0 and not first.stderr, first.stderr
    second = snippetcheck.run_file(ISOLATION / "sees_clean_state.py", args=["an-argument"])
    assert (second.returncode, second.stdout, second.stderr) == (0, "clean\n", "")


def test_the_same_server_would_carry_state_within_one_run():
    """The check above can fail: inside one run the changed state is there to be seen."""
    code = (ISOLATION / "changes_state.py").read_text(encoding="utf-8")
    code += (ISOLATION / "sees_clean_state.py").read_text(encoding="utf-8")
    run = snippetcheck.run_code(code)
    assert run.returncode == 1 and "AssertionError" in run.stderr


def test_a_programs_end_is_what_a_new_interpreter_does(tmp_path):
    """The server takes torch's own import-time finalizers off each child's exit list
    (``snippetserver.leave_torchs_exit_work_out_of_each_run``); what the program registers, an
    operator library included, still runs at its end, in Python's order, and ``__main__`` is
    torn down after it (``snippetserver.tear_down``): the same output as ``python file``. The
    same holds for the program as a snippet's lesson, followed by a proof
    (``tests/lessonrun.py``: the lesson's module is then the program's ``__main__``)."""
    program = ISOLATION / "exit_handlers.py"
    new = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=60,
        env=snippetcheck.snippet_env(), cwd=program.parent,
    )
    assert (new.returncode, new.stderr) == (0, ""), new.stderr
    assert new.stdout.splitlines() == [
        "__del__ at teardown",  # the Thing the second finalizer watched, as soon as it is made
        "finalizer ran",
        "main done",
        "atexit handler ran",
        "finalizer at exit ran",
        "the library was freed before: True",
        "__del__ at teardown",  # first, then later
        "__del__ at teardown",
        "a line through a second stream",
        "a cycle collected at teardown",  # by tear_down's collection
    ], new.stdout
    snippet = as_snippet(tmp_path / "a", program.read_text(encoding="utf-8"),
                         "proof_made = [later, second]\nassert not second.closed\n")
    for run in (snippetcheck.run_file(program), snippetcheck.run_snippet(snippet)):
        assert (run.returncode, run.stderr) == (0, ""), run.stderr
        assert run.stdout == new.stdout
    # Without a function, a lesson's globals are no cycle: a runner that let go of the lesson's
    # module when the proof ended freed the stream there, before the atexit handler, in a new
    # interpreter too (SNIPPETS_FRESH_INTERPRETER=1, as .ci/run reruns this test).
    lesson = (
        "import atexit\nimport os\n\nlog = os.fdopen(os.dup(1), 'w')\n"
        "print('a line through a second stream', file=log)\n"
        "atexit.register(print, 'atexit handler')\nprint('main done')\n"
    )
    new = subprocess.run([sys.executable, "-c", lesson], capture_output=True, text=True,
                         timeout=60, env=snippetcheck.snippet_env())
    assert new.stdout.splitlines() == ["main done", "atexit handler",
                                       "a line through a second stream"], new.stdout
    run = snippetcheck.run_snippet(as_snippet(tmp_path / "b", lesson, "assert not log.closed\n"))
    assert (run.returncode, run.stderr) == (0, ""), run.stderr
    assert run.stdout == new.stdout


def as_snippet(folder: Path, lesson: str, proof: str) -> Path:
    """A snippet file made of ``lesson`` and ``proof`` (``tests/lessonrun.py``)."""
    folder.mkdir()
    snippet = folder / "idea.py"
    snippet.write_text(
        f"# --8<-- [start:lesson]\n{lesson}# --8<-- [end:lesson]\n\n"
        f"# --8<-- [start:proof]\n{proof}# --8<-- [end:proof]\n",
        encoding="utf-8",
    )
    return snippet


def test_a_spawned_process_starts_clean_and_sees_its_environment():
    """Snippets' ``spawn`` processes are forks of a clean warm interpreter (the server's
    zygote): they see none of the parent's torch state, ``os.getppid()`` names the program,
    and a program that changed its environment gets them from a zygote of their own, a new
    interpreter started with that environment, so that torch, imported anew, reads it."""
    run = snippetcheck.run_file((ISOLATION / "spawned_ranks.py").resolve(), warm_spawn=True)
    assert run.returncode == 0 and not run.stderr, run.stderr
    clean = [("dtype", "torch.float32"), ("getppid is the program", True), ("grad", True),
             ("main", "__mp_main__"), ("seeded", False)]
    rounds = [ln.split(" ", 1) for ln in run.stdout.splitlines()]
    assert [code for code, _ in rounds] == ["0", "1", "2", "3"], run.stdout
    seen = [dict(ast.literal_eval(report)) for _, report in rounds]
    parents = [s.pop("parent") for s in seen]
    draws = [s.pop("numpy draws") for s in seen]
    assert len(set(draws)) == 4, f"ranks drew the same numpy random numbers: {draws}"
    # The same environment, the same zygote; a changed one, a zygote of its own.
    assert parents[0] == parents[2] != parents[1] == parents[3], parents
    assert seen[0] == seen[2] == {**dict(clean), "forked from the program": False,
                                  "marker": None, "parent started with the marker": False}
    assert seen[1] == seen[3] == {**dict(clean), "forked from the program": False,
                                  "marker": "set before the start",
                                  "parent started with the marker": True}


def test_only_torchs_resolver_warning_is_taken_out_of_stderr(tmp_path):
    noise = (
        "[W1205 00:35:12.123456789 socket.cpp:207] [c10d] The hostname of the client socket"
        " cannot be retrieved. err=-3\n"
    )
    path = tmp_path / "stderr"
    for text, kept in [
        (noise, ""),
        (noise + "UserWarning: real\n", "UserWarning: real\n"),
        ("[W1205 00:35:12.1 socket.cpp:207] [c10d] something else\n", None),
        ("print: The hostname of the client socket cannot be retrieved. err=-3\n", None),
    ]:
        path.write_text(text)
        assert snippetcheck._read_stderr(path) == (text if kept is None else kept)
