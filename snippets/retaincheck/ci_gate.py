import contextlib
import io
import os
import tempfile
from pathlib import Path

from retaincheck.__main__ import main

here = Path(__file__).resolve().parent
example = (here / "article_example.py").read_text()


def retaincheck(folder, *args):
    """python -m retaincheck ARGS, started in folder: the command's own main(), in this
    process (torch is already imported here). Returns (exit status, stdout, stderr)."""
    out, err, cwd = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        os.chdir(cwd)
    return status, out.getvalue(), err.getvalue()


results = {"article_example.py": retaincheck(here, "--fail-on-unneeded", "article_example.py")}
with tempfile.TemporaryDirectory() as d:
    # The same program with the flag removed, as --fix would leave it.
    fixed = example.replace("loss.backward(retain_graph=True)", "loss.backward()")
    assert fixed != example
    (Path(d) / "fixed_example.py").write_text(fixed)
    results["fixed_example.py"] = retaincheck(d, "--fail-on-unneeded", "fixed_example.py")

status, out, err = results["article_example.py"]
assert status == 6 and "NOT NEEDED" in out
assert err == "retaincheck: 1 retain_graph=True call site is not needed (exit status 6)\n"
status, out, err = results["fixed_example.py"]
assert status == 0 and err == "" and "no backward() or autograd.grad() call used" in out

for name, (status, _, err) in results.items():
    print(f"$ python -m retaincheck --fail-on-unneeded {name} > report.txt")
    print(err, end="")
    print("$ echo $?")
    print(status)
