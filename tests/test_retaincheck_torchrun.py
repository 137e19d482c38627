"""``torchrun --nproc-per-node 2 -m retaincheck train.py``: each rank audits its own process.

One launch (gloo, CPU, 127.0.0.1, a port free at run time), bounded by a timeout that kills
the whole process group. Each rank's report is labelled with its rank; ``--json=PATH`` gives
one file per rank; the readable reports (each longer than a pipe's 4096-byte atomic write)
never interleave on the shared standard output.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def test_each_rank_reports_on_its_own_and_reports_never_interleave(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        "-m", "retaincheck", "--json=out/report.json", "train.py",
    ]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, stdin=subprocess.DEVNULL,
    )
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # torchrun and both ranks, whatever happened
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, stderr[-3000:]

    # One JSON file per rank, labelled, with that rank's own verdicts.
    for rank, first in ((0, "not needed"), (1, "needed")):
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
