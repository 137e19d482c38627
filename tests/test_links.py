"""No broken internal link or anchor in the built site, in either language.

Every built page is parsed once with the standard library's HTML parser: each link and each
resource a page names on this site (``<a href>``, ``<link href>``, ``<script src>``,
``<img src>``) must be a file of the built site, each ``page#anchor`` an id on that page, and
every page must be reachable by links from the two language roots. External URLs are not
followed (the site must not depend on them). The browser tests add what a file check cannot
see: every request a page makes, served over HTTP under the site's sub-path, must succeed.

Why our own code: linkchecker crawls the served site and parses each page with Beautiful
Soup's pure-Python parser: 7.2 s of CPU for this site's 26 pages (9.9 s with 4 threads), its
AnchorCheck plugin 88 s, against well under a second here, measured on the 2-core dev
machine; mkdocs-htmlproofer-plugin 1.6.0 resolves links against MkDocs' file list, which the
i18n plugin's language folders are not in: it reported every link into ``zh/`` as a 404. The
library still checks the same site in CI: ``.ci/run`` runs the crawl
(``python -m pytest tests/test_links.py --linkchecker -m linkchecker``).

``test_the_link_check_catches_broken_links`` breaks a copy of the site on purpose (a missing
page, two missing anchors, a page no link reaches) and asserts that each is reported.
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
    """The ids a page defines, the ``href`` of each of its links, and the resources it names."""

    RESOURCES = {"link": "href", "script": "src", "img": "src", "source": "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.resources: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a":
            if attrs.get("name"):
                self.ids.add(attrs["name"])
            if attrs.get("href"):
                self.hrefs.append(attrs["href"])
        elif (name := self.RESOURCES.get(tag)) and attrs.get(name):
            self.resources.append(attrs[name])


@cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _target(site: Path, base: str, url: str, href: str) -> tuple[Path | None, str]:
    """The built file ``href`` (on the page at ``url``) points to, and its anchor; the file is
    None for a link off the site (another host, ``mailto:``)."""
    target = urllib.parse.urljoin(url, href)
    page_url, _, anchor = target.partition("#")
    page_url = page_url.split("?")[0]
    if not page_url.startswith(base):
        return None, anchor
    path = site / urllib.parse.unquote(page_url.removeprefix(base))
    return (path / "index.html" if path.is_dir() else path), anchor


def site_problems(site: Path, base: str) -> tuple[list[str], int]:
    """Broken links and resources, broken anchors, and pages no link reaches from the roots.

    ``base`` is the URL the site is built for (its ``site_url``: links may be absolute, and
    name its sub-path). Returns the problems and how many anchored links were checked.
    """
    pages = sorted(site.rglob("*.html"))
    problems, checked = [], 0
    links: dict[Path, set[Path]] = {}
    for html in pages:
        url = base + html.relative_to(site).as_posix().removesuffix("index.html")
        where = url.removeprefix(base) or "/"
        parsed = _parse(html)
        links[html] = set()
        for href in parsed.resources:
            path, _ = _target(site, base, url, href)
            if path is not None and not path.is_file():
                problems.append(f"{href} (in {where}): no such file")
        for href in parsed.hrefs:
            path, anchor = _target(site, base, url, href)
            if path is None:
                continue
            if not path.is_file():
                problems.append(f"{href} (in {where}): no such page or file")
                continue
            if path.suffix != ".html":
                continue
            links[html].add(path)
            if anchor:
                checked += 1
                if urllib.parse.unquote(anchor) not in _parse(path).ids:
                    problems.append(f"{href} (in {where}): no id {anchor!r}")
    roots = [site / "index.html", site / "zh" / "index.html"]
    reached, todo = set(roots), list(roots)
    while todo:
        for target in links.get(todo.pop(), ()):
            if target not in reached:
                reached.add(target)
                todo.append(target)
    problems += [
        f"{page.relative_to(site).as_posix()}: no link reaches it from either home page"
        for page in pages
        if page not in reached and page.name == "index.html"
    ]
    return sorted(set(problems)), checked


def site_url(built_site) -> str:
    return f"http://127.0.0.1:{built_site.port}{built_site.url_path}"


def test_no_broken_links_or_anchors(built_site):
    problems, anchors = site_problems(built_site.path, site_url(built_site))
    assert not problems, "broken links:\n  " + "\n  ".join(problems)
    # Every page links to its own headings (the table of contents): far more than a handful.
    pages = siteserver.built_page_urls(built_site.path)
    assert anchors > 10 * len(pages), f"only {anchors} anchored links checked"


@pytest.mark.linkchecker
def test_linkchecker_finds_no_broken_link(served_site, built_site, tmp_path):
    """The library's crawl of the served site, from both language roots (in CI: .ci/run)."""
    rows = run_linkchecker(served_site, tmp_path)
    problems = broken(rows)
    assert not problems, "broken links:\n  " + "\n  ".join(problems)
    checked = {r["url"].removeprefix(served_site) for r in rows}
    pages = siteserver.built_page_urls(built_site.path)
    assert pages <= checked, f"pages the crawl never reached: {sorted(pages - checked)}"


def broken_copy(built_site, tmp_path) -> Path:
    """A copy of the site with a missing page, two missing anchors, a page no link reaches and a
    stylesheet every page names deleted."""
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
    (site / "orphan").mkdir()
    shutil.copy(site / "glossary" / "index.html", site / "orphan" / "index.html")  # same depth
    (site / "assets" / "extra.css").unlink()
    return site


def test_the_link_check_catches_broken_links(built_site, tmp_path):
    site = broken_copy(built_site, tmp_path)
    problems, _ = site_problems(site, site_url(built_site))
    stylesheet = [p for p in problems if "extra.css" in p and "no such file" in p]
    assert len(stylesheet) == len(list(site.rglob("*.html"))), stylesheet
    problems = [p for p in problems if p not in stylesheet]
    report = "\n".join(problems)
    assert len(problems) == 4, report
    assert "#no-such-heading" in report and "#nor-this-one" in report, report
    assert "../no-such-page/ (in zh/): no such page" in report, report
    assert "orphan/index.html: no link reaches it" in report, report


@pytest.mark.linkchecker
def test_linkchecker_catches_a_missing_page(built_site, tmp_path):
    site = broken_copy(built_site, tmp_path)
    shutil.copy(built_site.path / "assets" / "extra.css", site / "assets" / "extra.css")
    with siteserver.serve(site.parent) as root:
        # The broken links are on the two home pages: check those pages' links (and that their
        # targets exist), not the whole site again.
        problems = broken(run_linkchecker(root + site.name + "/", tmp_path, "--recursion-level=1"))
    report = "\n".join(problems)
    assert len(problems) == 1 and "no-such-page/" in report and "404" in report, report
