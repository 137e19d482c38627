# --8<-- [start:lesson]
import contextlib
import io
import re
from importlib.util import find_spec
from pathlib import Path

from retaincheck.__main__ import main

source = Path(find_spec("article_example").origin).read_text()  # (1)!
fixed = source.replace("backward(retain_graph=True)", "backward()")  # (2)!
Path("article_example.py").write_text(source)
Path("fixed_example.py").write_text(fixed)

results = {}
for lang in ["en", "zh"]:  # (4)!
    if lang == "zh":
        print("# --8<-- [out:zh]")
    for name in ["article_example.py", "fixed_example.py"]:
        err = io.StringIO()
        with open("report.txt", "w") as report, contextlib.redirect_stdout(report):
            with contextlib.redirect_stderr(err):
                status = main(["--lang", lang, "--fail-on-unneeded", name])  # (3)!
        results[lang, name] = (status, Path("report.txt").read_text(), err.getvalue())
        flag = "--lang zh " if lang == "zh" else ""
        print(f"$ python -m retaincheck {flag}--fail-on-unneeded {name} > report.txt")
        print(re.sub(r"\d+\.\d (s|秒)", r"… \1", err.getvalue()), end="")
        print("$ echo $?")
        print(status)
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert fixed != source
status, report, err = results["en", "article_example.py"]
assert status == 6 and "NOT NEEDED" in report
proof, gate = err.splitlines()
assert proof.startswith("retaincheck: checked without that 1 retain_graph=True (nothing "
                        "written): proven: the rerun exited 0 as the audited run did")
assert gate == "retaincheck: 1 retain_graph=True call site is not needed (exit status 6)"
status, report, err = results["zh", "article_example.py"]
assert status == 6 and "不需要（NOT_NEEDED）" in report
proof, gate = err.splitlines()
assert proof.startswith("retaincheck：去掉这 1 处 retain_graph=True 后重新运行做了核对"
                        "（没有写入文件）。已验证")
assert gate == "retaincheck：1 处 retain_graph=True 不需要（退出状态 6）"
for lang in ["en", "zh"]:
    status, report, err = results[lang, "fixed_example.py"]
    assert status == 0 and err == ""
    assert "backward() 或 autograd.grad()" in report if lang == "zh" else (
        "no backward() or autograd.grad() call used" in report
    )
# --8<-- [end:proof]
