"""The retaincheck page quotes the committed overhead run; every committed ratio stays <= 1.3."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "benchmarks" / "results" / "retaincheck_overhead.json"


def _committed():
    return json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_the_committed_run_is_complete_and_within_1_3x():
    data = _committed()
    for key in ("machine", "torch", "date", "load_average_before", "rows"):
        assert data[key], key
    ratios = [row["ratio"] for row in data["rows"]]
    assert len(ratios) == 4
    assert data["min_ratio"] == min(ratios) and data["max_ratio"] == max(ratios)
    assert all(r <= 1.3 for r in ratios), ratios


def test_both_pages_quote_the_committed_range():
    data = _committed()
    low, high = f"{data['min_ratio']:.2f}", f"{data['max_ratio']:.2f}"
    en = (ROOT / "docs" / "retaincheck.md").read_text(encoding="utf-8")
    zh = (ROOT / "docs" / "retaincheck.zh.md").read_text(encoding="utf-8")
    assert re.findall(r"between (\d\.\d\d)× and (\d\.\d\d)×", en) == [(low, high)]
    assert re.findall(r"(\d\.\d\d) 到 (\d\.\d\d) 倍", zh) == [(low, high)]
    assert data["torch"].split("+")[0] in en and data["torch"].split("+")[0] in zh
