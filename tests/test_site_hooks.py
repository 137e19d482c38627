"""The build hooks that fix Material details do their job, checked without a browser."""

from __future__ import annotations

import html
import posixpath
import re

import siteserver

ALTERNATE = re.compile(r'<link rel="alternate" href="([^"]*)" hreflang="([\w-]+)">')
PRE = re.compile(r"<pre\b([^>]*)>(.*?)</pre>", re.S)
MARKER = re.compile(r'<span class="c1?">[^<]*\(\d+\)![^<]*</span>')


def test_head_alternates_point_at_language_roots_with_a_sitemap(built_site):
    """Material fetches <alternate>/sitemap.xml on every page; it must exist."""
    site = built_site.path
    for url in sorted(siteserver.built_page_urls(site)):
        page = (site / url / "index.html").read_text(encoding="utf-8")
        alternates = dict((lang, href) for href, lang in ALTERNATE.findall(page))
        assert set(alternates) == set(siteserver.LANGS), (url, alternates)
        for lang, href in alternates.items():
            if href.startswith("/"):  # absolute: under the path the site is published at
                assert href.startswith(built_site.url_path), (url, lang, href)
                target = href.removeprefix(built_site.url_path)
            else:
                target = posixpath.normpath(posixpath.join(url or ".", href))
            target = target.strip("/")
            target = "" if target in ("", ".") else target + "/"
            assert target == ("" if lang == "en" else "zh/"), (url, lang, href)
            assert (site / target / "sitemap.xml").is_file(), (url, target)


def test_annotated_code_copies_without_marker_leftovers(built_site):
    seen = 0
    for page in built_site.path.rglob("index.html"):
        for attrs, body in PRE.findall(page.read_text(encoding="utf-8")):
            if not MARKER.search(body):
                continue
            seen += 1
            copy = re.search(r'data-copy="([^"]*)"', attrs)
            assert copy, f"{page}: annotated code block without data-copy"
            text = html.unescape(copy[1])
            assert not re.search(r"\(\d+\)!", text), text
            assert not any(line != line.rstrip() for line in text.splitlines()), text
    assert seen, "no annotated code block found: the check checked nothing"
