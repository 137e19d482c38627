"""Pages stay light: what a reader downloads to see a page is close to Material's bare page.

A page's weight is its HTML plus every stylesheet and script it references, uncompressed.
The search index (fetched only for searching, and the same for every page of a language)
and the images are not counted. Material's own bare page (the site's 404 page) weighs
about 280 KB by this measure; the budget leaves room for the text, code and inline SVG
figures of a typical page, and a hard cap stops any single page from growing heavy.

The pages of this site are long and code-heavy: a typical guide page shows ten or more
highlighted programs with their outputs and annotations, 100-170 KB of article HTML. So the
budget has two parts. What the site adds around the content (the HTML outside the article,
CSS and JS) must stay within 10 % of Material's bare page: no heavy script, font or stylesheet
sneaks in. The whole page is capped too: with per-line code anchors switched off in
mkdocs.yml, the median page measured 400 KB and the heaviest 445 KB (22 pages).
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from urllib.parse import urljoin, urlsplit

# bytes: the median page of the site, content included. Every page now shows the proof of each
# lesson (collapsed under "How we know this"): code the pages ran before but did not show. The
# median page was 400 KB without the proofs and 460 KB with them; 480 KB left room for text.
# The third truth round (fused optimizers, silent writes, donated buffers with dynamic shapes)
# added proofs to most pages: the median page measured 492 KB on 2026-12-04; 500 KB.
TYPICAL_BUDGET = 500 * 1000
# Any single page. With the proofs shown, the heaviest pages (troubleshooting, 579 KB; the
# popular article, 560 KB) were about 300 KB of HTML beside Material's 280 KB of CSS and JS. The
# third truth round's proofs of the silent cases (fused optimizers, .numpy(), DLPack, storage
# writes) took troubleshooting to 615 KB in Chinese; compressed, as a server sends it, its HTML
# is 45 KB (gzip). 640 KB.
PAGE_CAP = 640 * 1000  # bytes
CHROME_MARGIN = 1.10  # what surrounds the article, against Material's bare page
ARTICLE = re.compile(r'<article class="md-content__inner.*?</article>', re.S)
ASSET = re.compile(
    r'<script\b[^>]*\bsrc="([^"]+)"|<link\b[^>]*\brel="stylesheet"[^>]*\bhref="([^"]+)"'
    r'|<link\b[^>]*\bhref="([^"]+)"[^>]*\brel="stylesheet"'
)


def page_weight(site: Path, page: Path, url_path: str = "/") -> tuple[int, dict[str, int]]:
    html = page.read_text(encoding="utf-8")
    url = url_path + page.relative_to(site).as_posix()
    parts = {page.relative_to(site).as_posix(): page.stat().st_size}
    for groups in ASSET.findall(html):
        ref = next(g for g in groups if g)
        target = urlsplit(urljoin(url, ref))
        assert not target.netloc, f"{url} loads {ref} from another host"
        asset = site / target.path.removeprefix(url_path)
        assert asset.is_file(), f"{url} references {ref}, which the build did not write"
        parts[asset.relative_to(site).as_posix()] = asset.stat().st_size
    return sum(parts.values()), parts


def test_pages_stay_within_the_weight_budget(built_site):
    site = built_site.path
    pages = sorted(site.rglob("index.html"))
    at = built_site.url_path
    weights = {p.relative_to(site).as_posix(): page_weight(site, p, at)[0] for p in pages}
    bare, parts = page_weight(site, site / "404.html", at)
    typical = statistics.median(weights.values())
    heaviest = max(weights, key=weights.get)
    print(
        f"Material's bare page: {bare / 1000:.0f} KB; typical page: {typical / 1000:.0f} KB; "
        f"heaviest: {heaviest} {weights[heaviest] / 1000:.0f} KB; {len(pages)} pages"
    )
    assert typical <= TYPICAL_BUDGET, (
        f"the typical page weighs {typical / 1000:.0f} KB (HTML+CSS+JS), over the "
        f"{TYPICAL_BUDGET / 1000:.0f} KB budget; Material's bare page: {bare / 1000:.0f} KB"
    )
    over = {p: w for p, w in weights.items() if w > PAGE_CAP}
    assert not over, f"pages over the {PAGE_CAP / 1000:.0f} KB cap: {over}"
    # Everything but the article itself stays close to Material's bare page.
    bare_chrome = bare - len(ARTICLE.search((site / "404.html").read_text("utf-8"))[0].encode())
    chrome = {}
    for p in pages:
        article = ARTICLE.search(p.read_text(encoding="utf-8"))
        assert article, f"{p} has no article"
        chrome[p.relative_to(site).as_posix()] = weights[p.relative_to(site).as_posix()] - len(
            article[0].encode()
        )
    heavy_chrome = {p: c for p, c in chrome.items() if c > CHROME_MARGIN * bare_chrome}
    assert not heavy_chrome, (
        f"around the article, these pages weigh more than {CHROME_MARGIN:.2f} x Material's bare "
        f"page ({bare_chrome / 1000:.0f} KB): {heavy_chrome}"
    )
    # The bare page really is Material's HTML+CSS+JS: the check measures what it claims.
    assert any(k.endswith(".css") for k in parts) and any(k.endswith(".js") for k in parts)
    assert 200_000 < bare < 350_000, parts
