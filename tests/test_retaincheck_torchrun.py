"""``torchrun --nproc-per-node 2 -m retaincheck train.py``: each rank audits its own process.

One launch (gloo, CPU, 127.0.0.1, a port free at run time), bounded by a timeout that kills
the whole process group (``run_torchrun``). Each rank's report is labelled with its rank;
``--json=PATH`` gives one file per rank; the readable reports (each longer than a pipe's
4096-byte atomic write) never interleave on the shared standard output.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from pathlib import Path

import pytest
import snippetcheck

N_SITES = 41

# Rank 1 walks the first graph again, rank 0 does not: the same line, two verdicts.
# Forty more call sites make each readable report about 10 KB.
TRAIN = "\n".join(
    [
        "import torch",
        "import torch.distributed as dist",
        "",
        'dist.init_process_group("gloo")',
        "rank = dist.get_rank()",
        "w = torch.ones(3, requires_grad=True)",
        "h = torch.tanh(w).sum()",
        "h.backward(retain_graph=True)",
        "if rank == 1:",
        "    h.backward()",
        *(f"torch.sigmoid(w * {i}).sum().backward(retain_graph=True)" for i in range(40)),
        "dist.barrier()  # both ranks end, and print, at the same moment",
        "dist.destroy_process_group()",
        "",
    ]
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torchrun(args: list[str], cwd: Path) -> tuple[snippetcheck.Run, str]:
    """``torchrun args...`` in ``cwd``; its run, and what it and its ranks wrote to stdout.

    torchrun itself runs in a fork of the snippets' warm interpreter (``run_module``: no
    torch import, 2 s of CPU); its two ranks are new interpreters, as a user's are, with a
    buffered stdout, as in a CI job (``PYTHONUNBUFFERED`` unset). Their shared standard output
    is a real pipe, as when a CI job reads it (a named pipe: the same kernel pipe, PIPE_BUF
    atomicity included). The test holds a writing end open until the run is over, so the
    reader sees the end of the output only then, and a thread reads as it comes, so no writer
    ever blocks on a full pipe. At the time limit the warm interpreter kills torchrun's process
    group; the ranks, each in a session of its own, by their working directory
    (``snippetcheck.run_torchrun``).
    """
    fifo = cwd / "stdout.pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opening it does not wait for a writer
    holder = os.open(fifo, os.O_WRONLY)
    os.set_blocking(reader, True)
    chunks: list[bytes] = []

    def read() -> None:
        while chunk := os.read(reader, 65536):
            chunks.append(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        run = snippetcheck.run_torchrun(
            args, cwd, 60, stdout=fifo, environ={"PYTHONUNBUFFERED": None}
        )
    finally:
        os.close(holder)
        thread.join(10)
    assert not thread.is_alive(), "something still holds the pipe open"
    os.close(reader)
    return run, b"".join(chunks).decode("utf-8")


@pytest.mark.proof  # .ci/run only: two ranks, each a new interpreter
def test_each_rank_reports_on_its_own_and_reports_never_interleave(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    run, stdout = run_torchrun(
        ["--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         "-m", "retaincheck", "--json=out/report.json", "train.py"],
        tmp_path,
    )
    proc, stderr = run, run.stderr
    assert proc.returncode == 0, stderr[-3000:]

    # One JSON file per rank, labelled, with that rank's own verdicts.
    # rank 0: the h.backward() below line 8 never ran there (issue 27 F3): could not tell
    for rank, first in ((0, "could not tell: kept"), (1, "needed")):
        data = json.loads((tmp_path / "out" / f"report.rank{rank}.json").read_text())
        assert (data["rank"], data["world_size"]) == (rank, 2)
        assert len(data["calls"]) == N_SITES
        assert data["calls"][0]["line"] == 8 and data["calls"][0]["verdict"] == first
        assert {c["verdict"] for c in data["calls"][1:]} == {"not needed"}
    assert not (tmp_path / "out" / "report.json").exists()

    # Two readable reports on the shared standard output, each whole: after its label, the
    # report's own lines in order, nothing of the other rank's inside.
    parts = re.split(r"^=== retaincheck: rank (\d) of 2 ===\n", stdout, flags=re.M)
    assert parts[0] == "" and sorted(parts[1::2]) == ["0", "1"], stdout[:2000]
    for rank, text in zip(parts[1::2], parts[2::2], strict=True):
        assert len(text.encode()) > 4096  # longer than what a pipe keeps whole by itself
        sites = re.findall(r"^train\.py:(\d+)  ", text, flags=re.M)
        assert [int(s) for s in sites] == [8, *range(11, 11 + 40)], (rank, text[:3000])
        lines = text.splitlines()
        assert f"retaincheck: {N_SITES} call sites used retain_graph=True" in lines
        for field in ("verdict", "kept", "suggest"):  # one of each per site, none of the other's
            assert sum(line.startswith(f"    {field}:") for line in lines) == N_SITES, field
        needed = "NEEDED: walked again by train.py:10" in text
        assert needed == (rank == "1")
