# --8<-- [start:lesson]
import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = """\
import torch

def test_one_loss():
    w = torch.ones(3, requires_grad=True)
    torch.sigmoid(w).sum().backward(retain_graph=True)
def test_two_losses():
    h = torch.tanh(torch.ones(3, requires_grad=True))
    h.sum().backward(retain_graph=True)
    h.pow(2).sum().backward()
"""
Path("test_train.py").write_text(TESTS)
env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", COLUMNS="72")  # (2)!
runs = {}
for lang, mark in [("en", ""), ("zh", "# --8<-- [out:zh]\n")]:  # (4)!
    command = ["pytest", "-p", "retaincheck.pytest_plugin", "--retaincheck-fail", "-q",  # (1)!
               "--retaincheck-lang", lang]
    run = runs[lang] = subprocess.run([sys.executable, "-m", *command], env=env,
                                      capture_output=True, text=True)
    lines = run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip("= ") == "retaincheck")
    print(mark + "$", *command)
    section = re.sub(r"\d+\.\d (s|秒)", r"… \1", "\n".join(lines[start:-1]))  # (3)!
    print(section, "$ echo $?", run.returncode, sep="\n")
# --8<-- [end:lesson]

# --8<-- [start:proof]
for run in runs.values():
    lines = run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip("= ") == "retaincheck")
    section = lines[start:-1]
    assert run.returncode == 6 and run.stderr == ""  # (1)!
    assert lines[-1].startswith("2 passed in ")
    assert section[2].startswith("test_train.py:5  ")  # (2)!
    assert section[-2].startswith("--retaincheck-fail")  # (3)!
    assert ": the rerun exited 0 as" in section[-2] or "以状态 0 退出" in section[-2]
assert runs["en"].stdout.splitlines()[start + 1] == (
    "1 retain_graph=True call site not needed (2 tests audited, 3 backward()/grad() calls seen):"
)
assert "1 处 retain_graph=True 不需要（检查了 2 个测试，记录到 3 次 backward()/grad() 调用）：" in (
    runs["zh"].stdout.splitlines()
)
# --8<-- [end:proof]
