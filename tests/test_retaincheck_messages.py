"""retaincheck's report in English and Chinese (issue 29): one catalog, same placeholders, a
Chinese report with no English sentence, and the --lang / RETAINCHECK_LANG / locale rule.

Reports are rendered in-process (``main`` in this interpreter), not by new program runs."""

from __future__ import annotations

import contextlib
import io
import json
import string
from pathlib import Path

import pytest
from test_page_text import english_runs

from retaincheck import CallRecord, Report, _messages, _suggest, _verdicts
from retaincheck.__main__ import main
from retaincheck._report import VERDICT_KEYS

FIXTURES = Path(__file__).parent / "fixtures" / "retaincheck"


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_template_has_a_chinese_one_with_the_same_placeholders():
    # command-line errors (e_*) stay in English: no line mixes an English prefix with Chinese
    assert {k for k in _messages.EN if not k.startswith("e_")} == _messages.ZH.keys()
    for key, chinese in _messages.ZH.items():
        assert placeholders(chinese) == placeholders(_messages.EN[key]), key


def test_every_chinese_template_has_no_english_sentence():
    for key, chinese in _messages.ZH.items():
        assert english_runs(chinese) == [], key


def test_each_verdict_has_words_and_its_tag():
    for verdict, key in VERDICT_KEYS.items():
        assert _messages.EN[key] == verdict.upper()
        assert _messages.ZH[key].endswith(f"（{_messages.zh_tag(verdict)}）"), key
    assert _messages.zh_tag(_verdicts.NOT_NEEDED_SO_FAR) == "NOT_NEEDED_SO_FAR_RUN_STOPPED_EARLY"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def every_kind_of_record() -> Report:
    """A report with a record for each verdict and each suggestion the catalog holds."""
    notes = [
        set(), {_suggest.OTHER_BACKWARD}, {_suggest.SELF, _suggest.GIVEN_GRADIENT},
        {_suggest.OTHER_BACKWARD, _suggest.STEP_BETWEEN},
        {_suggest.OTHER_BACKWARD, _suggest.GRAD_BETWEEN}, {_suggest.SELF},
    ]
    records = []
    for i, kwargs in enumerate([
        dict(executions=0), dict(executions=2, history_leak=True, needed=True),
        dict(executions=1, unseen_reads=[f"a.py:{n}" for n in range(5)]),
        dict(executions=1, unseen_calls=["a.py:7"]), dict(executions=1, running_children=[99]),
        dict(executions=1, unproven="output differed"), dict(executions=1, compiled=True),
        dict(executions=1, partly_run=True),  # a backward(inputs=...) that left part out
        dict(executions=1, passed_through=True),
        dict(executions=1, passed_through=True, _unread=True),  # code it could not read
        dict(executions=1, passed_through=True, _unread="generated"),  # a file it wrote
        dict(executions=1, ran_once_in_a_loop=True),  # once, in a loop
        dict(executions=2, ran_once_in_a_loop=True, _held=True),  # a graph kept from before
        dict(executions=1, passed_through=True, _observed=True),  # a __torch_function__
        dict(executions=1, passed_through=True, _observed="watched"),  # a profiler
        dict(executions=1, run_completed=False), dict(executions=1),
        dict(executions=1, create_graph=True), dict(executions=1, needed=True, create_graph=True),
        *[dict(executions=3, reused_executions=2, needed=True, notes=n, reused_by=["a.py:9"])
          for n in notes],
        *[dict(kind="grad", executions=2, needed=True, notes={_suggest.SELF, *n})
          for n in ({_suggest.ROWS}, {_suggest.SAME_OUTPUTS}, set())],
    ]):
        kwargs.setdefault("kind", "backward")
        unread, observed = kwargs.pop("_unread", False), kwargs.pop("_observed", False)
        held = kwargs.pop("_held", False)
        records.append(CallRecord(file="train.py", line=i + 1, function="<module>",
                                  code="loss.backward(retain_graph=True)", **kwargs))
        records[-1]._unread, records[-1]._observed = unread, observed
        records[-1]._held_in_loop = held
    return Report(calls=records, completed=False, stopped_by="KeyboardInterrupt")


def test_the_chinese_report_uses_every_template_and_has_no_english_sentence():
    report = every_kind_of_record()
    keys = {_suggest._suggestion_key(c)[0] for c in report.calls}
    assert keys == {k for k in _messages.EN if k.startswith("s_")}
    chinese = report.format("zh")
    assert [line for line in chinese.splitlines() if english_runs(line)] == []
    assert "可能读取保存张量" in chinese and "等（另有 2 处）" in chinese
    english = report.format("en")
    assert "saved tensors may be read at a.py:0, a.py:1, a.py:2 and 2 more" in english
    assert len(chinese.splitlines()) == len(english.splitlines())


@pytest.mark.parametrize("fixture", ["article_example_1.py", "cli/hidden_read.py"])
def test_the_chinese_report_of_a_fixture_has_no_english_sentence(fixture):
    status, chinese, _ = run("--lang", "zh", str(FIXTURES / fixture))
    assert status == 0 and "提前停止" not in chinese
    assert [line for line in chinese.splitlines() if english_runs(line)] == []


def test_the_json_is_the_same_in_both_languages():
    fixture = str(FIXTURES / "two_losses.py")
    english = json.loads(run("--lang", "en", "--json", fixture)[1])
    chinese = json.loads(run("--lang", "zh", "--json", fixture)[1])
    assert english == chinese and english["calls"][0]["suggestion"].startswith("keep it")


@pytest.mark.parametrize(
    ("environ", "lang"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
        ({"LC_ALL": "", "LC_MESSAGES": "zh_TW", "LANG": "en_US"}, "zh"),
        ({"RETAINCHECK_LANG": "en", "LC_ALL": "zh_CN.UTF-8"}, "en"),
        ({"RETAINCHECK_LANG": "zh", "LANG": "C"}, "zh"),
    ],
)
def test_the_default_language(environ, lang):
    assert _messages.default_lang(environ) == lang


def test_a_bad_language_is_one_line_and_exit_2(monkeypatch):
    fixture = str(FIXTURES / "no_retain.py")
    assert run("--lang", "fr", fixture) == (
        2, "", "retaincheck: error: --lang: unknown language 'fr' (use en or zh)\n"
    )
    assert run("--lang") == (2, "", "retaincheck: error: --lang needs a language (en or zh)\n")
    monkeypatch.setenv("RETAINCHECK_LANG", "chinese")
    assert run(fixture) == (
        2, "", "retaincheck: error: RETAINCHECK_LANG: unknown language 'chinese' (use en or zh)\n"
    )
    monkeypatch.setenv("RETAINCHECK_LANG", "zh")
    assert run(fixture)[1].endswith(
        "retaincheck：这个进程里没有 backward() 或 autograd.grad() 调用使用 retain_graph=True"
        "（它以 fork 以外的方式启动的进程不受检查，比如 torch.multiprocessing.spawn 启动的各个 "
        "rank）。\n"
    )


FIX_SCRIPT = """\
import torch

w = torch.ones(3, requires_grad=True)
keep = True
a = (w * w).sum()
a.backward(retain_graph=True)
b = (w * w).sum()
b.backward(retain_graph=keep)
c = (w * w).sum()
c.backward(retain_graph=True)
c.backward()
d = (w * w).sum()
torch.autograd.grad(d, w, retain_graph=True, create_graph=True)
"""


def test_the_chinese_fix_plan_has_no_english_sentence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(FIX_SCRIPT)
    plans = {}
    for lang in ["en", "zh"]:
        status, out, err = run("--lang", lang, "--fix", "--skip-proof", "train.py")
        assert status == 0 and err == "", err
        plans[lang] = out[out.index("retaincheck --fix") :].split("\n\n")[0].splitlines()
    assert plans["en"][0] == (
        "retaincheck --fix: 1 change in 1 file, unproven (--skip-proof: no rerun checked it) "
        "(not written; add --write to apply)"
    )
    assert plans["zh"][0] == (
        "retaincheck --fix：1 个文件，1 处改动，未验证（--skip-proof：没有重新运行来核对）；"
        "尚未写入，加上 --write 才会写入"
    )
    assert len(plans["zh"]) == len(plans["en"]) == 5  # the header and four sites
    assert [line for line in plans["zh"] if english_runs(line)] == []
    assert "不改：需要（再次遍历计算图的是 train.py:11）" in plans["zh"][3]
    assert "不改：retain_graph=keep 不是字面量 True" in plans["zh"][2]
    assert Path("train.py").read_text() == FIX_SCRIPT


def test_fix_errors_and_a_refuted_site_in_chinese():
    assert run("--lang", "zh", "--write", "x.py") == (
        2, "", "retaincheck: error: --write only goes with --fix\n"
    )
    assert run("--lang", "en", "--skip-proof", "x.py") == (
        2, "", "retaincheck: error: --skip-proof only goes with --fix or --fail-on-unneeded\n"
    )
    record = CallRecord(file="a.py", line=1, function="<module>", code="y.backward()",
                        kind="backward", executions=1, needed=True,
                        reused_by=[_messages.message("by_rerun_many", n=2)])
    assert record.to_dict()["reused_by"] == [
        "a rerun without all 2 retain_graph=True, which failed"
    ]
    chinese = Report(calls=[record]).format("zh")
    assert "再次遍历这张计算图的是去掉全部 2 处 retain_graph=True 后的重新运行" in chinese
    assert [line for line in chinese.splitlines() if english_runs(line)] == []


def test_the_api_pages_list_every_verdict_and_field_as_the_source_has_them():
    """revzh4b: the verdict tables of both API pages hold every verdict string the source has,
    with the Chinese report's own words; the field tables name every field."""
    import dataclasses
    import re
    from pathlib import Path

    from retaincheck import CallRecord, Report

    root = Path(__file__).resolve().parent.parent / "docs" / "reference"
    for name in ("api.md", "api.zh.md"):
        text = (root / name).read_text(encoding="utf-8")
        section = text[text.index("{ #verdicts }"):text.index("{ #terms }")]
        rows = re.findall(r'^\| `"([^"]+)"` \| ([^|]+) \|', section, flags=re.M)
        assert {v: zh.strip() for v, zh in rows} == {
            v: _messages.ZH[key] for v, key in VERDICT_KEYS.items()
        }, name
        first_cells = " ".join(re.findall(r"^\| ([^|]+) \|", text, flags=re.M))
        for cls in (Report, CallRecord):
            for field in dataclasses.fields(cls):
                assert f"`{field.name}`" in first_cells, (name, field.name)
