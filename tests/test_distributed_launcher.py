"""The launcher every distributed snippet uses fails fast and leaves no process behind.

``snippets/distributed/launch.py`` starts the ranks. A rank that raises must fail the whole
program with a non-zero exit, a rank that hangs must be killed at the time limit, and if the
launcher itself is killed its ranks must not outlive it.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
import snippetcheck

LAUNCHER_DIR = snippetcheck.SNIPPETS_DIR / "distributed"

PROGRAM = """\
import os, sys, time
sys.path.insert(0, {launcher_dir!r})
import torch.distributed as dist
from launch import launch

def rank_fn(rank, world_size):
    with open(os.path.join({pid_dir!r}, f"rank{{rank}}.pid"), "w") as f:
        f.write(str(os.getpid()))
    dist.barrier()
{body}

if __name__ == "__main__":
    with open(os.path.join({pid_dir!r}, "launcher.pid"), "w") as f:
        f.write(str(os.getpid()))
    launch(rank_fn, time_limit_s={limit})
"""


# One write per line: with unbuffered output, print() of several pieces can interleave.
BOTH_PRINT = "sys.stdout.write(f'rank {rank} done\\n')"


def write_program(tmp_path: Path, body: str, limit: float) -> Path:
    path = tmp_path / "program.py"
    path.write_text(
        PROGRAM.format(
            launcher_dir=str(LAUNCHER_DIR),
            pid_dir=str(tmp_path),
            body=textwrap.indent(textwrap.dedent(body), "    "),
            limit=limit,
        ),
        encoding="utf-8",
    )
    return path


def rank_pids(tmp_path: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(tmp_path.glob("rank*.pid")) if p.read_text()]


def run(path: Path, timeout: float, warm_spawn: bool = False) -> tuple[snippetcheck.Run, float]:
    """``python program.py``, its parent forked from the snippets' warm interpreter (no torch
    import: 2 s of CPU a test); whatever it leaves running is left for the test to find
    (``reap=False``; ``leftovers`` kills it afterwards). Its ranks are real ``spawn``s, or,
    with ``warm_spawn``, forks of a warm interpreter as in the snippet tests
    (``snippetserver.start_spawn_zygote``): the tests of what the launcher does when a rank
    fails or hangs and the healthy run need no new interpreters (4 s of CPU each);
    ``test_ranks_do_not_outlive_a_killed_launcher`` keeps real ones, and so does every
    distributed snippet in ``.ci/run``'s new-interpreter rerun.
    """
    run = snippetcheck.run_file(path, timeout=timeout, reap=False, warm_spawn=warm_spawn)
    return run, run.seconds


@pytest.fixture
def leftovers(tmp_path):
    """After the test: kill any rank still running, so a failing test leaks nothing."""
    yield
    for pid in rank_pids(tmp_path):
        if snippetcheck.alive(pid):
            os.kill(pid, signal.SIGKILL)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_healthy_run_exits_zero(tmp_path, leftovers):
    proc, _ = run(write_program(tmp_path, BOTH_PRINT, limit=60), 120, warm_spawn=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split("\n")) == ["", "rank 0 done", "rank 1 done"]
    assert proc.stderr == ""
    assert len(rank_pids(tmp_path)) == 2 and not any(map(snippetcheck.alive, rank_pids(tmp_path)))


def test_a_rank_that_raises_fails_the_program_and_stops_the_others(tmp_path, leftovers):
    body = """
    if rank == 1:
        raise RuntimeError("rank 1 breaks")
    dist.barrier()  # rank 0 would wait here for rank 1 forever
    """
    proc, seconds = run(write_program(tmp_path, body, limit=60), 120, warm_spawn=True)
    assert proc.returncode != 0
    assert "RuntimeError: rank 1 breaks" in proc.stderr
    assert "launch: a rank failed; every rank has been stopped" in proc.stderr
    # Which rank exits first varies: rank 0's barrier fails as soon as rank 1 is gone.
    assert seconds < 60, f"the failure took {seconds:.0f} s to surface"
    pids = rank_pids(tmp_path)
    assert len(pids) == 2 and not any(map(snippetcheck.alive, pids))


@pytest.mark.launcher  # .ci/run only (--launcher): 3 to 4 s of CPU each
def test_a_rank_that_hangs_is_killed_at_the_time_limit(tmp_path, leftovers):
    body = """
    if rank == 1:
        time.sleep(3600)
    dist.barrier()
    """
    # Each rank writes its pid once its process group is up. On a busy machine that can take
    # longer than the limit, and the launcher then rightly kills ranks that never started the
    # body: try again with a longer limit until both started, so the test is about a hang.
    for limit in (4, 8, 16):
        for old in tmp_path.glob("rank*.pid"):
            old.unlink()
        proc, seconds = run(write_program(tmp_path, body, limit=limit), 120, warm_spawn=True)
        if len(rank_pids(tmp_path)) == 2:
            break
    assert proc.returncode != 0
    assert f"ranks still running after {limit} s" in proc.stderr
    assert limit <= seconds < limit + 30
    pids = rank_pids(tmp_path)
    assert len(pids) == 2 and not any(map(snippetcheck.alive, pids))


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


@pytest.mark.launcher  # .ci/run only (--launcher): 3 to 4 s of CPU each
def test_ranks_do_not_outlive_a_killed_launcher(tmp_path, leftovers):
    """The launcher (forked from the warm interpreter, in a thread's ``run``) starts two real
    ``spawn`` ranks, their parent, which is then killed with SIGKILL: no cleanup of its own
    runs, and the ranks must notice on their own and exit."""
    path = write_program(tmp_path, "time.sleep(3600)", limit=600)
    pid_file = tmp_path / "launcher.pid"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        launched = pool.submit(run, path, 120)
        try:
            deadline = time.monotonic() + 90
            while len(rank_pids(tmp_path)) < 2 and time.monotonic() < deadline:
                assert not launched.done(), launched.result()[0].stderr
                time.sleep(0.2)
            pids = rank_pids(tmp_path)
            assert len(pids) == 2, "the ranks did not start"
            launcher = int(pid_file.read_text())
            parents = {parent_pid(pid) for pid in pids}
            assert parents == {launcher}, f"the ranks' parents {parents}, not the launcher"
        finally:  # the launcher, whatever happened: a failed test need not wait for its limit
            written = pid_file.read_text() if pid_file.exists() else ""
            if written and snippetcheck.alive(int(written)):
                os.kill(int(written), signal.SIGKILL)
        proc, _ = launched.result()
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
    deadline = time.monotonic() + 15
    while any(map(snippetcheck.alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(snippetcheck.alive, pids))


@pytest.mark.launcher  # .ci/run only (--launcher): 3 to 4 s of CPU each
def test_the_same_snippet_runs_under_torchrun(tmp_path):
    """Started by torchrun (one host, 2 processes), a snippet prints what the page shows.

    torchrun itself runs in a fork of the snippets' warm interpreter (``run_module``: no torch
    import, 2 s of CPU); the two ranks it starts are new interpreters, as a reader's are, each
    in a session of its own: at the time limit they are killed by their working directory.
    """
    snippet = LAUNCHER_DIR / "two_losses.py"
    proc = snippetcheck.run_torchrun(
        ["--standalone", "--nproc-per-node=2", str(snippet)], tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == snippet.with_suffix(".out").read_text(encoding="utf-8")


def load_launcher():
    spec = importlib.util.spec_from_file_location("launch_under_test", LAUNCHER_DIR / "launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LaggingRank:
    """A rank whose exit code shows up only some reads after its sentinel said it ended.

    A real child's sentinel closes before the kernel reports it as exited, so right after
    ``multiprocessing.connection.wait()`` returns, ``exitcode`` can still be None.
    """

    def __init__(self, final_code, lag_reads):
        self.final_code, self.lag_reads = final_code, lag_reads
        self.ended, self.reads = False, 0
        self.sentinel = object()

    @property
    def exitcode(self):
        if not self.ended:
            return None
        self.reads += 1
        return None if self.reads <= self.lag_reads else self.final_code


@pytest.mark.parametrize("lag_reads", [0, 1, 2, 3])
def test_a_rank_whose_failure_shows_late_is_still_a_failure(monkeypatch, lag_reads):
    """The race the audit found: the old loop missed a failing rank when its exit code was
    still None at the failure check and non-zero by the loop condition's next read."""
    launcher = load_launcher()
    ok, failing = LaggingRank(0, lag_reads), LaggingRank(1, lag_reads)

    def wait(sentinels, timeout):  # both ranks end during the first wait
        ok.ended = failing.ended = True
        return sentinels

    monkeypatch.setattr(launcher.multiprocessing.connection, "wait", wait)
    assert launcher._watch([ok, failing], time_limit_s=60) == "a rank failed"


def test_ranks_that_all_succeed_late_are_a_success(monkeypatch):
    launcher = load_launcher()
    ranks = [LaggingRank(0, 2), LaggingRank(0, 1)]

    def wait(sentinels, timeout):
        for rank in ranks:
            rank.ended = True
        return sentinels

    monkeypatch.setattr(launcher.multiprocessing.connection, "wait", wait)
    assert launcher._watch(ranks, time_limit_s=60) is None
