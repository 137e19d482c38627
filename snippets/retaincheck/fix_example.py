# --8<-- [start:lesson]
import contextlib
import io
from importlib.util import find_spec
from pathlib import Path

from retaincheck.__main__ import main

source = Path(find_spec("article_example").origin).read_text()
Path("article_example.py").write_text(source)

out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(["--fix", "article_example.py"])  # (1)!
printed = out.getvalue()
fix = printed[printed.index("retaincheck --fix:") :]  # (2)!
print("$ python -m retaincheck --fix article_example.py")
print("...")
print(fix, end="")
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert status == 0
assert Path("article_example.py").read_text() == source  # (1)!
removed = [line for line in fix.splitlines() if line.startswith("-") and line[1] != "-"]
added = [line for line in fix.splitlines() if line.startswith("+") and line[1] != "+"]
assert removed == ["-loss.backward(retain_graph=True)  # (1)!"]  # (2)!
assert added == ["+loss.backward()  # (1)!"]
# --8<-- [end:proof]
