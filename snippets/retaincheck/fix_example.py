import contextlib
import io
import os
from pathlib import Path

from retaincheck.__main__ import main

here = Path(__file__).resolve().parent
before = (here / "article_example.py").read_text()

# python -m retaincheck --fix article_example.py: the command's own main(), in this process
out, cwd = io.StringIO(), os.getcwd()
os.chdir(here)
try:
    with contextlib.redirect_stdout(out):
        status = main(["--fix", "article_example.py"])
finally:
    os.chdir(cwd)
assert status == 0
assert (here / "article_example.py").read_text() == before  # without --write: unchanged
fix = out.getvalue()[out.getvalue().index("retaincheck --fix:") :]
removed = [line for line in fix.splitlines() if line.startswith("-") and line[1] != "-"]
added = [line for line in fix.splitlines() if line.startswith("+") and line[1] != "+"]
# One line changes: the flag goes, the annotation comment after it stays.
assert removed == ["-loss.backward(retain_graph=True)  # (1)!"]
assert added == ["+loss.backward()  # (1)!"]

print("$ python -m retaincheck --fix article_example.py")
print("...")
print(fix, end="")
