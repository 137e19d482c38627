import subprocess
import sys
import tempfile
from pathlib import Path

here = Path(__file__).resolve().parent
example = (here / "article_example.py").read_text()


def retaincheck(folder, *args):  # python -m retaincheck ARGS, started in folder
    return subprocess.Popen(
        [sys.executable, "-m", "retaincheck", *args],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


with tempfile.TemporaryDirectory() as d:
    # The same program with the flag removed, as --fix would leave it.
    fixed = example.replace("loss.backward(retain_graph=True)", "loss.backward()")
    assert fixed != example
    (Path(d) / "fixed_example.py").write_text(fixed)
    runs = {
        "article_example.py": retaincheck(here, "--fail-on-unneeded", "article_example.py"),
        "fixed_example.py": retaincheck(d, "--fail-on-unneeded", "fixed_example.py"),
    }
    results = {name: (*p.communicate(), p.returncode) for name, p in runs.items()}

out, err, status = results["article_example.py"]
assert status == 6 and "NOT NEEDED" in out
assert err == "retaincheck: 1 retain_graph=True call site is not needed (exit status 6)\n"
out, err, status = results["fixed_example.py"]
assert status == 0 and err == "" and "no backward() or autograd.grad() call used" in out

for name, (out, err, status) in results.items():
    print(f"$ python -m retaincheck --fail-on-unneeded {name} > report.txt")
    print(err, end="")
    print("$ echo $?")
    print(status)
