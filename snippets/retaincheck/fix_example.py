# --8<-- [start:lesson]
import contextlib
import io
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
print(printed[printed.index("retaincheck --fix:") :], end="")  # (2)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert status == 0
assert Path("train.py").read_text() == before  # (1)!
fix = printed[printed.index("retaincheck --fix:") :]
removed = [line for line in fix.splitlines() if line.startswith("-") and line[1] != "-"]
added = [line for line in fix.splitlines() if line.startswith("+") and line[1] != "+"]
assert removed == ["-    loss.backward(retain_graph=True)  # a new graph every step"]  # (2)!
assert added == ["+    loss.backward()  # a new graph every step"]

with contextlib.redirect_stdout(io.StringIO()):
    assert main(["--fix", "--write", "train.py"]) == 0  # (3)!
assert Path("train.py").read_text() == before.replace("retain_graph=True", "")
# --8<-- [end:proof]
