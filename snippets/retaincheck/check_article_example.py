# --8<-- [start:lesson]
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

example = Path(find_spec("article_example").origin)  # (1)!
runs = {}
for lang in ["en", "zh"]:  # (2)!
    if lang == "zh":
        print("# --8<-- [out:zh]")
    run = runs[lang] = subprocess.run(
        [sys.executable, "-m", "retaincheck", "--lang", lang, example.name],
        cwd=example.parent,
        capture_output=True,
        text=True,
    )
    print(f"$ python -m retaincheck --lang {lang} article_example.py")
    print(run.stdout, end="")
# --8<-- [end:lesson]

# --8<-- [start:proof]
import contextlib
import io
import json
import runpy
import tempfile

import torch

for run in runs.values():
    assert run.returncode == 0 and run.stderr == ""
assert "NOT NEEDED: no later backward()" in runs["en"].stdout
assert "结论：不需要（NOT_NEEDED）。" in runs["zh"].stdout
from retaincheck.__main__ import main

as_json = io.StringIO()
with contextlib.redirect_stdout(as_json), contextlib.redirect_stderr(io.StringIO()):
    assert main(["--json", str(example)]) == 0
(call,) = json.loads(as_json.getvalue())["calls"]  # (1)!
assert call["line"] == 25 and call["needed"] is False
assert call["retained_bytes"] == 232


def gradients(source):  # (2)!
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / example.name
        path.write_text(source)
        torch.manual_seed(0)
        with contextlib.redirect_stdout(io.StringIO()):
            net = runpy.run_path(str(path))["net"]
    return [p.grad for p in net.parameters()]


source = example.read_text().split("[end:lesson]")[0]
with_it = gradients(source)
without_it = gradients(source.replace("retain_graph=True", "retain_graph=False"))
assert all(torch.equal(a, b) for a, b in zip(with_it, without_it, strict=True))
# --8<-- [end:proof]
