import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
before = (here / "article_example.py").read_text()

run = subprocess.run(  # python -m retaincheck --fix article_example.py
    [sys.executable, "-m", "retaincheck", "--fix", "article_example.py"],
    cwd=here, capture_output=True, text=True, check=False,
)
assert run.returncode == 0 and run.stderr == ""
assert (here / "article_example.py").read_text() == before  # without --write: unchanged
fix = run.stdout[run.stdout.index("retaincheck --fix:") :]
removed = [line for line in fix.splitlines() if line.startswith("-") and line[1] != "-"]
added = [line for line in fix.splitlines() if line.startswith("+") and line[1] != "+"]
# One line changes: the flag goes, the annotation comment after it stays.
assert removed == ["-loss.backward(retain_graph=True)  # (1)!"]
assert added == ["+loss.backward()  # (1)!"]

print("$ python -m retaincheck --fix article_example.py")
print("...")
print(fix, end="")
