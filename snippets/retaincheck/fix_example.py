# --8<-- [start:lesson]
import contextlib
import io
import re
from pathlib import Path

from retaincheck.__main__ import main

results = {}
for lang, comment in [("en", "# a new graph every step"), ("zh", "# 每一步都是一张新图")]:  # (1)!
    before = (
        "import torch\n"
        "\n"
        "w = torch.ones(3, requires_grad=True)\n"
        "for _ in range(3):\n"
        "    loss = (w * w).sum()\n"
        f"    loss.backward(retain_graph=True)  {comment}\n"
    )
    Path("train.py").write_text(before)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["--lang", lang, "--fix", "train.py"])  # (2)!
    printed = out.getvalue()
    fix = printed[printed.index("retaincheck --fix") :]  # (3)!
    results[lang] = (status, fix, before, Path("train.py").read_text())
    if lang == "zh":
        print("# --8<-- [out:zh]")
    print(f"$ python -m retaincheck {'--lang zh ' if lang == 'zh' else ''}--fix train.py")
    print(re.sub(r"\d+\.\d (s|秒)", r"… \1", fix), end="")  # (4)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
heads = {
    "en": r"retaincheck --fix: 1 change in 1 file, proven: a rerun with the changes exited 0 "
    r"as the audited run did \(\d+\.\d s\) \(not written; add --write to apply\)",
    "zh": r"retaincheck --fix：1 个文件，1 处改动，已验证：应用改动后重新运行，与受检查的那次"
    r"一样以状态 0 退出（\d+\.\d 秒）；尚未写入，加上 --write 才会写入",
}
for lang, comment in [("en", "# a new graph every step"), ("zh", "# 每一步都是一张新图")]:
    status, fix, before, after = results[lang]
    assert status == 0 and re.match(heads[lang] + "\n", fix), fix
    assert after == before  # (1)!
    removed = [line for line in fix.splitlines() if line.startswith("-") and line[1] != "-"]
    added = [line for line in fix.splitlines() if line.startswith("+") and line[1] != "+"]
    assert removed == [f"-    loss.backward(retain_graph=True)  {comment}"]  # (2)!
    assert added == [f"+    loss.backward()  {comment}"]

with contextlib.redirect_stdout(io.StringIO()):
    assert main(["--fix", "--write", "train.py"]) == 0  # (3)!
assert Path("train.py").read_text() == before.replace("retain_graph=True", "")

Path("read.py").write_text(  # (4)!
    "import torch\n"
    "\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "y = torch.tanh(w)\n"
    "y.sum().backward(retain_graph=True)\n"
    "name = '_sav'\n"
    "name += 'ed_result'\n"
    "print(getattr(y.grad_fn, name))\n"
)
source = Path("read.py").read_bytes()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["--fix", "--write", "read.py"]) == 0
refused = out.getvalue()
assert Path("read.py").read_bytes() == source  # (5)!
assert "verdict: NEEDED: walked again by a rerun" in refused
assert "retaincheck --fix: nothing written; 1 change in 1 file, NOT proven: the rerun " \
       "failed (exit status 1): RuntimeError: Trying to backward through the graph" in refused
# --8<-- [end:proof]
