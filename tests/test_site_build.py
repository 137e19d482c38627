"""``mkdocs build --strict`` passes with zero warnings and builds both languages properly."""

from __future__ import annotations

import json
import re
from urllib.parse import urljoin, urlparse

import mdfences

THIRD_PARTY = re.compile(r'(?:src|href)="(?:https?:)?//(?!127\.0\.0\.1)[^"]+"')


SWITCHER = re.compile(r'<a href="([^"]+)" hreflang="(\w+)" class="md-select__link"')


def built_pages(site):
    return sorted(site.rglob("*.html"))


def test_build_is_strict_and_clean(built_site):
    warnings = [ln for ln in built_site.log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", ln)]
    assert not warnings, "\n".join(warnings)
    print(f"mkdocs build --strict took {built_site.seconds:.1f} s")


def test_both_languages_are_built(built_site):
    for en_md, zh_md in mdfences.page_pairs():
        en = built_site.path / mdfences.page_url(en_md) / "index.html"
        zh = built_site.path / mdfences.page_url(zh_md) / "index.html"
        assert en.exists(), en
        assert zh.exists(), zh
        assert '<html lang="en"' in en.read_text(encoding="utf-8")
        assert '<html lang="zh"' in zh.read_text(encoding="utf-8")


def test_no_page_loads_anything_from_a_third_party_host(built_site):
    """Fonts, scripts, styles and images all come from the site itself."""
    offenders = {}
    for page in built_pages(built_site.path):
        html = page.read_text(encoding="utf-8")
        # Plain links to other sites in the text are fine; loading resources is not.
        loaded = [
            m
            for m in re.findall(r"<(?:script|link|img|iframe|source)\b[^>]*>", html)
            if THIRD_PARTY.search(m) and 'rel="alternate"' not in m and 'rel="canonical"' not in m
        ]
        if loaded:
            offenders[str(page.relative_to(built_site.path))] = loaded
    assert not offenders, offenders
    css_and_js = [*built_site.path.rglob("*.css"), *built_site.path.rglob("*.js")]
    for path in css_and_js:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, path


def test_every_page_with_examples_names_the_torch_that_ran_its_code(built_site):
    """Each page that includes a snippet has one stamp naming exactly the versions in
    snippets/verified_with.json, in order; a page without one (glossary, API) has none."""
    manifest = json.loads((mdfences.ROOT / "snippets" / "verified_with.json").read_text())
    versions = [entry["torch"] for entry in manifest["verified"]]
    assert versions
    with_examples = without = 0
    for md in sorted(mdfences.DOCS_DIR.rglob("*.md")):
        page = built_site.path / mdfences.page_url(md) / "index.html"
        stamp = re.findall(r'<p class="verified-with">(.*?)</p>', page.read_text("utf-8"), re.S)
        if '--8<-- "snippets/' not in md.read_text("utf-8"):
            assert not stamp, f"{page}: no examples, yet the footer says they were all run"
            without += 1
            continue
        with_examples += 1
        assert len(stamp) == 1, page
        assert re.findall(r"<code>([^<]*)</code>", stamp[0]) == versions, page
        # A "+cu130" build that ran on a machine without a GPU: the stamp says so.
        on_cpu = all(entry.get("device") == "cpu" for entry in manifest["verified"])
        says_cpu = ("CPU 上" if "/zh/" in page.as_posix() else "on the CPU") in stamp[0]
        assert says_cpu == on_cpu, (page, stamp[0])
    # Both kinds exist: the glossary and the API pages (both languages) have no snippet.
    assert with_examples and without >= 4, (with_examples, without)


def test_chinese_search_index_holds_only_chinese_pages(built_site):
    en = json.loads((built_site.path / "search" / "search_index.json").read_text("utf-8"))
    zh = json.loads((built_site.path / "zh" / "search" / "search_index.json").read_text("utf-8"))
    assert en["docs"] and zh["docs"]
    assert not any(d["location"].startswith("zh/") for d in en["docs"])
    cjk = re.compile(r"[\u4e00-\u9fff]")
    pages_zh = [d for d in zh["docs"] if "#" not in d["location"]]
    assert pages_zh and all(cjk.search(d["title"] + d["text"]) for d in pages_zh)
    # Chinese text is segmented by jieba (U+200B between words) so terms are searchable.
    assert any("\u200b" in d["text"] for d in zh["docs"])
    # Chinese pages load the Chinese index: Material resolves it against __config.base.
    home_zh = (built_site.path / "zh" / "index.html").read_text("utf-8")
    assert '"base": "."' in home_zh


def test_language_switcher_links_the_same_page(built_site):
    for page in built_pages(built_site.path):
        rel = page.relative_to(built_site.path).as_posix()
        if rel in ("404.html",) or rel.startswith("assets/"):
            continue
        html = page.read_text(encoding="utf-8")
        en_path = rel.removeprefix("zh/").removesuffix("index.html")
        links = dict(SWITCHER.findall(html))
        assert set(links.values()) == {"en", "zh"}, (rel, links)
        # Hrefs may be relative to the page ("./" is the page itself): resolve them first.
        at = built_site.url_path  # "/retain-graph/": where the site is published
        here = "http://site" + at + rel
        by_lang = {lang: urlparse(urljoin(here, href)).path for href, lang in links.items()}
        assert by_lang["en"] == at + en_path, (rel, by_lang)
        assert by_lang["zh"] == at + "zh/" + en_path, (rel, by_lang)
    assert (built_site.path / "zh" / "sitemap.xml").exists()
