"""No broken internal link or anchor in the built site, in either language.

``linkchecker`` crawls the served site from both language roots with external URLs off (the
site must not depend on them, and CI has no need to reach them): every page, script,
stylesheet and image a page links to must be served. ``broken_anchors`` then checks every
``<a href="...#anchor">`` against the ids of the page it points to.

Why the anchors are our own code: linkchecker's AnchorCheck plugin downloads and parses the
target page again for every link with an anchor; on this site that is 360 links, and the crawl
took 88 s with it against 5.6 s without it (measured on the 2-core dev machine).
mkdocs-htmlproofer-plugin 1.6.0 resolves links against MkDocs' file list, which the i18n
plugin's language folders are not in: it reported every link into ``zh/`` as a 404. Parsing
each built page once with the standard library's HTML parser takes well under a second.

``test_the_link_check_catches_broken_links`` breaks a copy of the site on purpose and asserts
that each broken link and anchor is reported, so a check that silently stopped checking
anchors would fail the suite.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import urllib.parse
from functools import cache
from html.parser import HTMLParser
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
# One thread: parsing the pages is the work, and it holds the GIL; 4 threads took 9.9 s of CPU
# (10.9 s) for the crawl, 1 thread 7.2 s (8.5 s), measured on the 2-core dev machine.
CONFIG = """\
[checking]
threads=1
maxrequestspersecond=1000
[filtering]
checkextern=0
"""


def run_linkchecker(base: str, tmp_path: Path, *extra: str) -> list[dict]:
    if importlib.util.find_spec("linkcheck") is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("CI=true but linkchecker is not installed", pytrace=False)
        pytest.skip("linkchecker is not installed (pip install -e '.[test]')")
    config = tmp_path / "linkcheckerrc"
    config.write_text(CONFIG, encoding="utf-8")
    proc = subprocess.run(
        [*LINKCHECKER, "--config", str(config), "--no-status", "--verbose", "--output", "csv",
         *extra, base, base + "zh/"],
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


class _Page(HTMLParser):
    """The ids a page defines and the ``href`` of each of its links."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a":
            if attrs.get("name"):
                self.ids.add(attrs["name"])
            if attrs.get("href"):
                self.hrefs.append(attrs["href"])


@cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def broken_anchors(site: Path, base: str = "http://site.invalid/") -> tuple[list[str], int]:
    """Each link to ``page#anchor`` (on this site) whose page has no element with that id.

    Returns the problems and how many anchored links were checked. A link whose page does not
    exist is linkchecker's to report.
    """
    problems, checked = [], 0
    for html in sorted(site.rglob("*.html")):
        url = base + html.relative_to(site).as_posix().removesuffix("index.html")
        for href in _parse(html).hrefs:
            target = urllib.parse.urljoin(url, href)
            page_url, _, anchor = target.partition("#")
            if not anchor or not page_url.startswith(base):
                continue
            path = site / urllib.parse.unquote(page_url.removeprefix(base))
            path = path / "index.html" if path.is_dir() else path
            if not path.is_file() or path.suffix != ".html":
                continue
            checked += 1
            if urllib.parse.unquote(anchor) not in _parse(path).ids:
                problems.append(f"{href} (in {url.removeprefix(base) or '/'}): no id {anchor!r}")
    return sorted(set(problems)), checked


def test_no_broken_links_or_anchors(served_site, built_site, tmp_path):
    rows = run_linkchecker(served_site, tmp_path)
    problems = broken(rows)
    assert not problems, "broken links:\n  " + "\n  ".join(problems)
    checked = {r["url"].removeprefix(served_site) for r in rows}
    pages = siteserver.built_page_urls(built_site.path)
    assert pages <= checked, f"pages the crawl never reached: {sorted(pages - checked)}"
    anchor_problems, anchors = broken_anchors(built_site.path)
    assert not anchor_problems, "broken anchors:\n  " + "\n  ".join(anchor_problems)
    # Every page links to its own headings (the table of contents): far more than a handful.
    assert anchors > 10 * len(pages), f"only {anchors} anchored links checked"
    print(f"linkchecker: {len(rows)} links, {len(pages)} pages; {anchors} anchored links")


def test_the_link_check_catches_broken_links(built_site, tmp_path):
    host = tmp_path / "host"
    site = host / built_site.path.name  # served at the same sub-path as the site itself
    shutil.copytree(built_site.path, site)
    bad = {
        "": '<a href="#no-such-heading">a</a> <a href="zh/#nor-this-one">b</a>',
        "zh/": '<a href="../no-such-page/">c</a>',
    }
    for url, links in bad.items():
        page = site / url / "index.html"
        html = page.read_text(encoding="utf-8")
        page.write_text(html.replace("</article>", links + "</article>", 1), encoding="utf-8")
    with siteserver.serve(host) as root:
        # The broken links are on the two home pages: check those pages' links (and that their
        # targets exist), not the whole site again.
        problems = broken(run_linkchecker(root + site.name + "/", tmp_path, "--recursion-level=1"))
    problems += broken_anchors(site)[0]
    report = "\n".join(problems)
    assert len(problems) == 3, report
    assert "#no-such-heading" in report and "#nor-this-one" in report, report
    assert "no-such-page/" in report and "404" in report, report
