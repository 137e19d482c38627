# --8<-- [start:lesson]
import contextlib
import io
import re
from pathlib import Path

from retaincheck.__main__ import main

Path("train.py").write_text(
    "import torch\n"
    "\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "for step in range(3):\n"
    "    loss = (w * w).sum()\n"
    "    loss.backward(retain_graph=True)  # a new graph every step\n"
)
before = Path("train.py").read_text()

out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(["--fix", "train.py"])  # (1)!
printed = out.getvalue()
print("$ python -m retaincheck --fix train.py")
fix = printed[printed.index("retaincheck --fix:") :]  # (2)!
print(re.sub(r"\(\d+\.\d s\)", "(… s)", fix), end="")  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert status == 0
assert Path("train.py").read_text() == before  # (1)!
assert re.match(r"retaincheck --fix: 1 change in 1 file, proven: a rerun with the changes "
                r"exited 0 as the audited run did \(\d+\.\d s\)", fix)
removed = [line for line in fix.splitlines() if line.startswith("-") and line[1] != "-"]
added = [line for line in fix.splitlines() if line.startswith("+") and line[1] != "+"]
assert removed == ["-    loss.backward(retain_graph=True)  # a new graph every step"]  # (2)!
assert added == ["+    loss.backward()  # a new graph every step"]

with contextlib.redirect_stdout(io.StringIO()):
    assert main(["--fix", "--write", "train.py"]) == 0  # (3)!
assert Path("train.py").read_text() == before.replace("retain_graph=True", "")

Path("read.py").write_text(  # (4)!
    "import torch\n"
    "\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "y = torch.tanh(w)\n"
    "y.sum().backward(retain_graph=True)\n"
    "print(getattr(y.grad_fn, '_sav' + 'ed_result'))\n"
)
source = Path("read.py").read_bytes()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["--fix", "--write", "read.py"]) == 0
refused = out.getvalue()
assert "verdict: NEEDED: walked again by the --fix rerun" in refused
assert "retaincheck --fix: nothing written; 1 change in 1 file, NOT proven: the rerun " \
       "failed (exit status 1): RuntimeError: Trying to backward through the graph" in refused
assert Path("read.py").read_bytes() == source  # (5)!
# --8<-- [end:proof]
