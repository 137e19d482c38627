import contextlib
import io
import os
import tempfile
from pathlib import Path

import pytest

TESTS = '''\
import torch


def test_one_loss():
    w = torch.ones(3, requires_grad=True)
    torch.sigmoid(w).sum().backward(retain_graph=True)
    assert w.grad is not None


def test_two_losses():
    w = torch.ones(3, requires_grad=True)
    h = torch.tanh(w)
    h.sum().backward(retain_graph=True)
    h.pow(2).sum().backward()
'''

# pytest's own main(), in this process (torch is already imported here); the plugin by name
# (-p), whether or not the package is installed with its entry point.
command = ["pytest", "-p", "retaincheck.pytest_plugin", "--retaincheck-fail", "-q"]
os.environ.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", COLUMNS="72")
out, cwd = io.StringIO(), os.getcwd()
with tempfile.TemporaryDirectory() as d:
    (Path(d) / "test_train.py").write_text(TESTS)
    os.chdir(d)
    try:
        with contextlib.redirect_stdout(out):
            status = pytest.main([*command[1:], "-p", "no:cacheprovider"])
    finally:
        os.chdir(cwd)

lines = out.getvalue().splitlines()
start = next(i for i, line in enumerate(lines) if line.strip("= ") == "retaincheck")
end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("2 passed in "))
section = lines[start:end]
assert status == 6  # every test passed (2 passed), and the run fails
assert section[1] == "1 retain_graph=True call site not needed (2 tests audited):"
assert section[2].startswith("test_train.py:6  ")  # test_two_losses's retain is needed

print("$", " ".join(command))
print("\n".join(section))
print("$ echo $?")
print(int(status))
