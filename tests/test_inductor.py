"""The with-other-features page's Inductor claims, run (``--inductor``; .ci/run runs it).

Slow on purpose: each step is a new interpreter that compiles the page's model with Inductor
(about 10 to 20 s each on the development machine with an empty cache), so the test command
leaves it out and .ci/run runs it once:
``python -m pytest tests/test_inductor.py --inductor -m inductor``. Inductor on the CPU
compiles C++: it needs a C++ compiler (g++).

The steps share one cache folder, in this order, as the page tells them:

1. flag set too late: no error, wrong gradients;
2. a new process that sets the flag before compiling, with the cache step 1 left: the FX graph
   cache hands it step 1's backward, and the same wrong gradients;
3. the same with the FX graph cache off (environment, or ``torch._inductor.config``), or with
   every cache off, or in an empty cache folder: eager mode's gradients;
4. a new process whose first backward keeps the graph, with step 1's cache: the AOTAutograd
   cache hands it a backward with donated buffers, and the donated-buffer error; with that
   cache off, no error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).with_name("inductor_donated.py")
DONATED = "This backward function was compiled with non-empty donated buffers"


def run(mode: str, cache: Path, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_")}
    environ.update(TORCHINDUCTOR_CACHE_DIR=str(cache), **env)
    proc = subprocess.run(
        [sys.executable, str(PROGRAM), mode], env=environ, capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def wrong(result: dict) -> bool:
    """No error, and three of the four gradients more than 1e-3 away from eager mode's."""
    return result["error"] is None and sum(d > 1e-3 for d in result["diffs"]) == 3


def right(result: dict) -> bool:
    """No error, and every gradient within 1e-6 of eager mode's."""
    return result["error"] is None and max(result["diffs"]) < 1e-6


@pytest.mark.inductor
@pytest.mark.slow
def test_the_donated_buffer_flag_and_the_caches_under_inductor(tmp_path):
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.fail("Inductor on the CPU needs a C++ compiler: none found (g++, or CXX)")
    cache = tmp_path / "cache"

    late = run("late", cache)
    assert wrong(late), late
    assert max(late["diffs"]) > 0.1, late

    assert wrong(run("early", cache))
    assert right(run("early", cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0"))
    assert right(run("early-no-fx-cache", cache))
    assert right(run("early", cache, TORCHINDUCTOR_FORCE_DISABLE_CACHES="1"))
    assert right(run("early", tmp_path / "empty"))

    retained = run("retain-first", cache)
    assert retained["error"] is not None and retained["error"].startswith(DONATED), retained
    assert run("retain-first", cache, TORCHINDUCTOR_AUTOGRAD_CACHE="0")["error"] is None
