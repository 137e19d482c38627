"""No broken internal link or anchor in the built site, in either language.

``linkchecker`` crawls the served site from both language roots with its AnchorCheck
plugin on and external URLs off (the site must not depend on them, and CI has no need to
reach them). ``test_the_link_check_catches_broken_links`` breaks a copy of the site on
purpose and asserts that each broken link and anchor is reported, so a check that
silently stopped checking anchors would fail the suite.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import siteserver

# linkchecker drops root privileges to "nobody" before it loads its plugins; where Python
# lives under /root (pyenv) that makes AnchorCheck vanish without a word. Run it in-process
# without dropping privileges: it only ever reads from 127.0.0.1 here.
LINKCHECKER = [
    sys.executable,
    "-c",
    "import sys, linkcheck.command.linkchecker as lc; "
    "lc.drop_privileges = lambda: None; sys.argv[0] = 'linkchecker'; lc.linkchecker()",
]
CONFIG = """\
[checking]
threads=4
maxrequestspersecond=1000
[filtering]
checkextern=0
[AnchorCheck]
"""
# Line-number anchors of code blocks: generated with the code, hundreds per page.
IGNORED = r"#__codelineno-"


def run_linkchecker(base: str, tmp_path: Path) -> list[dict]:
    if importlib.util.find_spec("linkcheck") is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("CI=true but linkchecker is not installed", pytrace=False)
        pytest.skip("linkchecker is not installed (pip install -e '.[test]')")
    config = tmp_path / "linkcheckerrc"
    config.write_text(CONFIG, encoding="utf-8")
    proc = subprocess.run(
        [*LINKCHECKER, "--config", str(config), "--no-status", "--verbose", "--output", "csv",
         "--ignore-url", IGNORED, base, base + "zh/"],
        capture_output=True, text=True, encoding="utf-8", timeout=600,
    )
    # Comment lines start with "# "; a row's first field may be a bare "#anchor".
    lines = [ln for ln in proc.stdout.splitlines() if ln and not ln.startswith("# ")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines)), delimiter=";"))
    assert rows, f"linkchecker checked nothing:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return rows


def broken(rows: list[dict]) -> list[str]:
    return sorted(
        f"{r['url']} (in {r['parentname']}, line {r['line']}): "
        f"{r['result']} {r['warningstring']}".strip()
        for r in rows
        if r["valid"] != "True" or r["warningstring"]
    )


def test_no_broken_links_or_anchors(served_site, built_site, tmp_path):
    rows = run_linkchecker(served_site, tmp_path)
    problems = broken(rows)
    assert not problems, "broken links:\n  " + "\n  ".join(problems)
    checked = {r["url"].removeprefix(served_site) for r in rows}
    pages = siteserver.built_page_urls(built_site.path)
    assert pages <= checked, f"pages the crawl never reached: {sorted(pages - checked)}"
    anchors = [u for u in checked if "#" in u and "#__codelineno-" not in u]
    assert anchors, "no link with an anchor was checked"
    print(f"linkchecker: {len(rows)} links, {len(pages)} pages, {len(anchors)} anchors")


def test_the_link_check_catches_broken_links(built_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built_site.path, site)
    bad = {
        "": '<a href="#no-such-heading">a</a> <a href="zh/#nor-this-one">b</a>',
        "zh/": '<a href="../no-such-page/">c</a>',
    }
    for url, links in bad.items():
        page = site / url / "index.html"
        html = page.read_text(encoding="utf-8")
        page.write_text(html.replace("</article>", links + "</article>", 1), encoding="utf-8")
    with siteserver.serve(site) as base:
        problems = broken(run_linkchecker(base, tmp_path))
    report = "\n".join(problems)
    assert len(problems) == 3, report
    assert "#no-such-heading" in report and "#nor-this-one" in report, report
    assert "no-such-page/" in report and "404" in report, report
