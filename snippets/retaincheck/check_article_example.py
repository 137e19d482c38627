import contextlib
import io
import json
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

here = Path(__file__).resolve().parent
example = "article_example.py"


def retaincheck(*args):
    return subprocess.run(
        [sys.executable, "-m", "retaincheck", *args, example],
        cwd=here, capture_output=True, text=True, check=False,
    )


run = retaincheck()  # python -m retaincheck article_example.py
assert run.returncode == 0 and run.stderr == ""
data = json.loads(retaincheck("--json").stdout)
(call,) = data["calls"]
assert call["line"] == 25 and call["needed"] is False
assert call["retained_bytes"] == 232

# The proof: without retain_graph=True the script runs and gives the same gradients.
def gradients(source):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / example
        path.write_text(source)
        torch.manual_seed(0)
        with contextlib.redirect_stdout(io.StringIO()):
            net = runpy.run_path(str(path))["net"]
    return [p.grad for p in net.parameters()]


source = (here / example).read_text()
with_it = gradients(source)
without_it = gradients(source.replace("retain_graph=True", "retain_graph=False"))
assert all(torch.equal(a, b) for a, b in zip(with_it, without_it, strict=True))

print("$ python -m retaincheck article_example.py")
print(run.stdout, end="")
