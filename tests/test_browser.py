"""The site works in a real browser, offline, the way readers use it.

One headless Chromium (Debian's, driven by Playwright for Python) visits every page of the
built site in both languages, served on 127.0.0.1 at a free port. Any request to another
host is recorded as a failure and aborted, so the site is proven to work with no internet.

Without Chromium or Playwright these tests skip, saying why; under ``CI=true`` that is a
failure instead. Run them alone with ``python -m pytest -m browser``. Screenshots of the
home page (both languages, light and dark) are written to ``test-artifacts/``.

The last two parts check that readers reach the answer: the site's own search on the query set
of ``tests/data/search_queries.py`` (top-1 and top-3 printed with ``-s``), the home page's
first screen, the guide pages' short answers, the language switch's anchor, and the hints of a
search in the other language.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from itertools import zip_longest
from pathlib import Path
from urllib.parse import urlsplit

import mdfences
import pytest
import siteserver

import conftest

sys.path.insert(0, str(Path(__file__).parent / "data"))
from search_queries import HELD_OUT, QUERIES  # noqa: E402

pytestmark = pytest.mark.browser

ROOT = mdfences.ROOT
ARTIFACTS = ROOT / "test-artifacts"
PAIRS = siteserver.page_pairs()
PAGES = [(pair, lang) for pair in PAIRS for lang in siteserver.LANGS]
CHROMIUM = os.environ.get("CHROMIUM", "chromium")  # Debian: /usr/bin/chromium
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers have a small /dev/shm
]
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
PHONE_WIDTH = 375
SENTINEL = "<clipboard untouched>"


def unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"CI=true, so the browser tests must run, but {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason}")


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright for Python is not installed (pip install -e '.[test]')")
    path = shutil.which(CHROMIUM)
    if not path:
        unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM=...)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Tab:
    """One reused browser tab that records everything that goes wrong while it loads."""

    def __init__(self, context, base: str):
        self.base = base
        self.page = context.new_page()
        self.page.set_default_timeout(15_000)
        self.problems: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)
        self.searched: str | None = None  # the page still open since _search searched it
        self.page.on("framenavigated", self._navigated)

    # Material's search worker downloads the language's search index and builds a lunr index
    # of the whole site after every page load: 0.3 s of the browser's CPU a load (of about
    # 1.2 s), spent again on each of the 60-odd loads here. Only the search tests search, so
    # the other loads get the index as served (same request, same status, same config) with no
    # pages in it; ``real_search_index`` turns that off.
    real_search_index = False

    # While set, the next navigation the page starts is stopped before it loads
    # (``switch_target``); stopping it clears the flag.
    stop_navigation = False

    def _route(self, route):
        url = route.request.url
        if self.stop_navigation and route.request.is_navigation_request():
            self.stop_navigation = False
            route.abort("aborted")
        elif urlsplit(url).hostname != "127.0.0.1":
            self.problems.append(f"request to another host: {url}")
            route.abort()
        elif url.endswith("/search/search_index.json") and not self.real_search_index:
            response = route.fetch()
            if response.status != 200:
                route.fulfill(response=response)
                return
            index = response.json()
            route.fulfill(response=response, json={**index, "docs": []})
        else:
            route.continue_()

    def _navigated(self, frame):
        if frame == self.page.main_frame:
            self.searched = None

    def _console(self, message):
        if message.type == "error":
            self.problems.append(f"console error: {message.text} ({message.location})")

    def _failed(self, request):
        # net::ERR_ABORTED: the tab navigated on before the request finished (a 404 or a
        # refused connection is reported as such, not as an abort).
        if urlsplit(request.url).hostname == "127.0.0.1" and request.failure != "net::ERR_ABORTED":
            self.problems.append(f"failed request: {request.url} ({request.failure})")

    def _response(self, response):
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def visit(self, url: str, wait_until: str = "load") -> list[str]:
        self.problems = []
        self.page.goto(self.base + url, wait_until=wait_until)
        return self.problems

    def path(self) -> str:
        return self.page.url.removeprefix(self.base).split("#")[0].split("?")[0]


@pytest.fixture(scope="session")
def tab(browser, served_site):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(served_site))
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    yield Tab(context, served_site)
    context.close()


@pytest.fixture(scope="session")
def phone(browser, served_site):
    context = browser.new_context(
        viewport={"width": PHONE_WIDTH, "height": 740}, is_mobile=True, has_touch=True
    )
    yield Tab(context, served_site)
    context.close()


# The English home page, and the page with the widest tables in Chinese (the language whose
# pages the line-joining hook rewrites): 4 s of a 2-core machine, so where slow checks run
# once (.ci/run: --all-pages -m all_pages), as the other pairs' checks are.
PHONE_PAGES = [pytest.param(pair.url(lang), marks=() if pair.id == "home" else
                            pytest.mark.all_pages)
               for pair in PAIRS for lang in siteserver.LANGS
               if (pair.id, lang) in (("home", "en"), ("guide/troubleshooting/", "zh"))]


@pytest.mark.parametrize("url", PHONE_PAGES)
def test_a_real_phone_context_sees_the_same_fit(tab, phone, url):
    """A page loaded in a phone's context (touch, mobile viewport) fits as the resized desktop
    tab of test_page_pair_works_offline_and_switches_language says it does."""
    problems = [f"at {PHONE_WIDTH} px: {p}" for p in phone.visit(url)]
    problems += fits_problems(phone.page, PHONE_WIDTH)
    tab.visit(url)
    assert not problems, problems
    assert narrow_problems(tab) == [], "the resized tab disagrees with the phone context"


def test_every_built_page_is_tested(built_site):
    """The pages tested here (found in docs/) are exactly the pages the build produced."""
    expected = {pair.url(lang) for pair, lang in PAGES}
    built = siteserver.built_page_urls(built_site.path)
    assert built == expected, {"built, untested": built - expected, "missing": expected - built}


# Reveal an element hidden in a closed <details> or an inactive content tab.
REVEAL_JS = """
el => {
  for (let d = el.closest('details'); d; d = d.parentElement.closest('details')) d.open = true;
  for (let b = el.closest('.tabbed-block'); b; b = b.parentElement.closest('.tabbed-block')) {
    const i = Array.from(b.parentElement.children).indexOf(b);
    const input = b.closest('.tabbed-set').querySelectorAll(':scope > input')[i];
    if (input) input.click();
  }
  el.scrollIntoView({block: 'center'});
}
"""

FIGURES_JS = """
async article => {
  const out = [];
  const all = Array.from(article.querySelectorAll('svg, img'));
  for (const el of all.filter(e => !e.parentElement.closest('svg'))) {
    (REVEAL)(el);
    if (el.tagName === 'IMG') await el.decode().catch(() => {});
    const r = el.getBoundingClientRect();
    const broken = el.tagName === 'IMG' && !(el.complete && el.naturalWidth > 0);
    out.push({what: el.outerHTML.slice(0, 80), width: r.width, height: r.height, broken});
  }
  return out;
}
""".replace("REVEAL", REVEAL_JS)


def figure_problems(page) -> list[str]:
    article = page.query_selector("article.md-content__inner")
    found = page.evaluate(FIGURES_JS, article)
    return [
        f"figure not rendered ({f['width']:.0f}x{f['height']:.0f} px"
        f"{', image failed to load' if f['broken'] else ''}): {f['what']}"
        for f in found
        if f["broken"] or f["width"] <= 0 or f["height"] <= 0
    ]


SECTION_MARK = re.compile(r"^\s*#\s*--8<--\s*\[(start|end):([\w-]+)\]\s*$")
ANNOTATION = re.compile(r"[ \t]*#[^#\n]*\(\d+\)![ \t]*$")


def included_text(path: str, section: str | None) -> str:
    """What pymdownx.snippets puts in the block: the file, or one section, dedented."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if section:
        start = next(i for i, ln in enumerate(lines) if SECTION_MARK.match(ln)
                     and SECTION_MARK.match(ln).groups() == ("start", section))
        end = next(i for i, ln in enumerate(lines) if i > start and SECTION_MARK.match(ln)
                   and SECTION_MARK.match(ln).groups() == ("end", section))
        lines = textwrap.dedent("\n".join(lines[start + 1 : end])).splitlines()
    return "\n".join(ln for ln in lines if not SECTION_MARK.match(ln))


def expected_copy(fence: mdfences.Fence) -> str:
    """The block's code as a reader should paste it: no annotation markers, no marker lines."""
    text = "\n".join(included_text(path, section) for path, section in fence.includes)
    return "\n".join(ANNOTATION.sub("", ln) for ln in text.splitlines()).rstrip()


# Clicks every copy button of the page in one round trip and returns what each put on the
# clipboard (null: no button). Material's clipboard.js copies by selecting the text and running
# the browser's copy command; the "copy" event that command fires shows the selection it puts on
# the clipboard. Listening to that event instead of reading the clipboard back after each click
# took the troubleshooting page from 2.4 s to 0.8 s. A handler that replaced the data would have
# to cancel the event: that is reported ("altered"). One real click per page, as a reader makes
# it, still reads the real clipboard (copy_problems, below).
COPY_ALL_JS = """
async ([blocks]) => {
  const copied = [];
  const open = el => {  // as REVEAL_JS, without scrolling to each block
    for (let d = el.closest('details'); d; d = d.parentElement.closest('details')) d.open = true;
    for (let b = el.closest('.tabbed-block'); b; b = b.parentElement.closest('.tabbed-block')) {
      const i = Array.from(b.parentElement.children).indexOf(b);
      const input = b.closest('.tabbed-set').querySelectorAll(':scope > input')[i];
      if (input) input.click();
    }
  };
  let selection = null, altered = false, fired = false;
  const capture = () => { fired = true; selection = document.getSelection().toString(); };
  const bubble = e => { altered = altered || e.defaultPrevented; };
  document.addEventListener('copy', capture, true);
  window.addEventListener('copy', bubble);
  try {
    for (const block of blocks) {
      open(block);
      const button = block.querySelector('[data-clipboard-target]');
      if (!button) { copied.push(null); continue; }
      selection = null; altered = false; fired = false;
      button.click();
      copied.push(!fired ? {silent: true} : altered ? {altered: true} : selection);
    }
  } finally {
    document.removeEventListener('copy', capture, true);
    window.removeEventListener('copy', bubble);
  }
  return copied;
}
"""


def copy_difference(fence: mdfences.Fence, copied: str) -> str | None:
    expected = expected_copy(fence)
    if copied == expected:
        return None
    diff = "\n".join(
        f"    line {i + 1}: copied {c!r}, expected {e!r}"
        for i, (c, e) in enumerate(zip_longest(copied.split("\n"), expected.split("\n")))
        if c != e
    )[:2000]
    return (
        f"{fence.where}: the copy button copied something else than the code"
        f" ({len(copied)} vs {len(expected)} characters)\n{diff}"
    )


def code_blocks(page, md: Path) -> tuple[list, list[str]]:
    """The page's code blocks that include snippets, each with its fence, or a problem."""
    fences = mdfences.rendered_fences(md)
    blocks = page.query_selector_all("article.md-content__inner div.highlight")
    if len(blocks) != len(fences):
        rendered = f"the page renders {len(blocks)} code blocks, {md.name} has {len(fences)} fences"
        return [], [rendered]
    return [(f, b) for f, b in zip(fences, blocks, strict=True) if f.includes], []


def copy_problems(page, md: Path) -> list[str]:
    code, problems = code_blocks(page, md)
    if not code:
        return problems
    copies = page.evaluate(COPY_ALL_JS, [[b for _, b in code]])
    for (fence, _), copied in zip(code, copies, strict=True):
        if copied is None:
            problems.append(f"{fence.where}: the code block has no copy button")
        elif isinstance(copied, dict) and copied.get("silent"):
            problems.append(f"{fence.where}: clicking the copy button copied nothing")
        elif isinstance(copied, dict):
            problems.append(f"{fence.where}: a copy handler replaced what the button copies")
        elif difference := copy_difference(fence, copied):
            problems.append(difference)
    return problems + real_click_problems(page, md, code)


def real_click_problems(page, md: Path, code: list | None = None) -> list[str]:
    """One real click on the page's first copy button, as a reader makes it: Playwright clicks
    only a visible, uncovered button, so this depends on the layout, and so on the width."""
    if code is None:
        code, problems = code_blocks(page, md)
        if not code:
            return problems
    problems = []
    fence, block = code[0]
    page.evaluate(REVEAL_JS, block)
    button = block.query_selector("[data-clipboard-target]")
    if button is not None:
        page.evaluate("t => navigator.clipboard.writeText(t)", SENTINEL)
        button.click()
        copied = page.evaluate("navigator.clipboard.readText()")
        if difference := copy_difference(fence, copied):
            problems.append("(a real click) " + difference)
    return problems


OVERFLOW_JS = """
width => Array.from(document.querySelectorAll('body *'))
  .filter(e => !e.closest('pre, .md-typeset__scrollwrap, .md-sidebar, .md-search, .md-dialog'))
  .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right > width + 1; })
  .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.getAttribute('class') + ': '
                        + (e.textContent || '').trim().slice(0, 60))
"""
FITS_JS = "w => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) <= w"


DESKTOP = {"width": 1280, "height": 800}


def fits_problems(page, width: int) -> list[str]:
    try:
        page.wait_for_function(FITS_JS, arg=width, timeout=3000)
    except Exception:
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        culprits = page.evaluate(OVERFLOW_JS, width)
        return [
            f"at {width} px the page body scrolls sideways ({scroll_width} px wide); "
            f"too wide: {culprits}"
        ]
    return []


PHONE = {"width": PHONE_WIDTH, "height": 740}


def narrow_problems(tab: Tab, restore: bool = True) -> list[str]:
    """The page the tab shows, narrowed to a phone's width, must not scroll sideways.

    The same tab, resized: a page load in a separate phone context cost 1 s a page. What a
    phone context adds (touch, a device scale factor) is checked on two pages against this in
    test_a_real_phone_context_sees_the_same_fit. ``restore=False`` leaves the tab narrow.
    """
    tab.page.set_viewport_size(PHONE)
    try:
        return [f"at {PHONE_WIDTH} px: {p}" for p in fits_problems(tab.page, PHONE_WIDTH)]
    finally:
        if restore:
            tab.page.set_viewport_size(DESKTOP)


# Material's language switcher reads both languages' sitemap.xml after the page loads and only
# then takes over the click; a click before that follows the link's plain href to the other
# language's home page (and the test fails, saying so). Waiting for those two files replaced
# waiting for "networkidle" (no request for 0.5 s, and the search index loads meanwhile),
# which cost 1.3 s a page.
SITEMAPS_READ_JS = """
() => {
  const wanted = Array.from(document.querySelectorAll('link[rel=alternate]'),
                            l => new URL('sitemap.xml', l.href).href);
  const read = new Set(performance.getEntriesByType('resource')
                         .filter(e => e.responseEnd > 0).map(e => e.name));
  return wanted.length > 0 && wanted.every(u => read.has(u));
}
"""


def wait_for_switcher(tab: Tab) -> None:
    tab.page.wait_for_function(SITEMAPS_READ_JS, polling="raf")


def switch_language(tab: Tab, lang: str, wait_until: str = "load", hover: bool = False) -> None:
    """Click the language menu's link to ``lang``; the tab follows where Material sends it.

    By default the click event is dispatched to the link (Material's handler on the page body
    receives it as it does a reader's): a pointer's hover and click waited for the menu's
    transition, 0.5 s a switch. ``hover=True`` opens the menu and clicks as a reader does
    (test_the_language_menu_opens_on_hover).
    """
    wait_for_switcher(tab)
    link = f"a.md-select__link[hreflang={lang}]"
    with tab.page.expect_navigation(wait_until=wait_until):
        if hover:
            tab.page.hover(".md-header .md-select")
            tab.page.click(link)
        else:
            tab.page.dispatch_event(link, "click")


def switch_target(tab: Tab, lang: str) -> str:
    """Where the language menu's link to ``lang`` sends the reader, as a URL path.

    The click is the one ``switch_language`` makes; the navigation it starts is stopped before
    the page loads (``Tab._route``), and this returns only once it has been (a load that only
    showed where the switch leads cost the browser about 0.2 s of CPU a page pair).
    """
    wait_for_switcher(tab)
    tab.stop_navigation = True
    try:
        with tab.page.expect_event(
            "requestfailed", lambda r: r.is_navigation_request() and r.failure == "net::ERR_ABORTED"
        ) as stopped:
            tab.page.dispatch_event(f"a.md-select__link[hreflang={lang}]", "click")
    finally:
        tab.stop_navigation = False
    return stopped.value.url.removeprefix(tab.base).split("#")[0].split("?")[0]


# Hanzi set in italic (Material sets figure captions italic): CJK has no italic.
ITALIC_HANZI_JS = """() => [...document.querySelectorAll('article *')]
    .filter(el => [...el.childNodes].some(
        n => n.nodeType === Node.TEXT_NODE && /[\\u4e00-\\u9fff]/.test(n.textContent))
        && getComputedStyle(el).fontStyle !== 'normal')
    .map(el => `${el.tagName.toLowerCase()} in italic: ${el.textContent.trim().slice(0, 30)}`)"""


def page_problems(tab: Tab, pair, lang: str, width: int) -> list[str]:
    """What is wrong with the page the tab shows at ``width`` px: its figures, copy buttons,
    and on a Chinese page, any hanzi set in italic."""
    checks = figure_problems(tab.page) + copy_problems(tab.page, pair.md_for(lang))
    if lang == "zh":
        checks += tab.page.evaluate(ITALIC_HANZI_JS)
    return [f"/{pair.url(lang)} at {width} px: {p}" for p in tab.problems + checks]


# The test command walks the pairs that cover every kind of page element: the home page (its
# answer-first list), troubleshooting (widest tables, heaviest Chinese page, folded proofs)
# and benchmarks (figures). The other pairs repeat those elements on other text; they cost
# 3-4 s of a 2-core machine each, so they run where slow checks run once (.ci/run:
# --all-pages -m all_pages), with-other-features (most folded proofs and source notes) too.
EVERY_RUN = ("home", "guide/troubleshooting/", "benchmarks/")


@pytest.mark.parametrize(
    "pair",
    [pytest.param(p, marks=() if p.id in EVERY_RUN else pytest.mark.all_pages) for p in PAIRS],
    ids=[p.id for p in PAIRS],
)
def test_page_pair_works_offline_and_switches_language(tab, pair):
    """Both languages of a page load from 127.0.0.1 only, cleanly; figures render at a desktop's
    and at a phone's width; copy buttons copy; each fits a phone; the language switcher leads
    to the same page and back.

    The Chinese page is reached the way a reader reaches it, through the switcher, on a
    phone's screen: the English page is checked at the desktop's width, then narrowed, and the
    Chinese one is loaded narrow and widened at the end: two resizes a pair, each a relayout of
    the whole page, where checking each page's fit apart took four. So the English page's fit
    is checked after a resize, the Chinese page's as it loads on a phone. Every copy button
    of each language is clicked at one of the two widths (what a button copies is the text of
    its code element, whatever the width); the one real click, which depends on the layout, is
    made at both widths on the Chinese page, at the desktop's on the English one.
    """
    tab.visit(pair.en)
    problems = page_problems(tab, pair, "en", DESKTOP["width"])
    tab.problems = []
    try:
        problems += [f"/{pair.en}: {p}" for p in narrow_problems(tab, restore=False)]
        problems += [f"/{pair.en} at {PHONE_WIDTH} px: {p}" for p in figure_problems(tab.page)]
        switch_language(tab, "zh")
        switched = tab.path()
        assert switched == pair.zh, f"English /{pair.en} switched to /{switched}, not /{pair.zh}"
        problems += [f"/{pair.zh}: {p}" for p in fits_problems(tab.page, PHONE_WIDTH)]
        problems += page_problems(tab, pair, "zh", PHONE_WIDTH)
    finally:
        tab.page.set_viewport_size(DESKTOP)
    desktop = figure_problems(tab.page) + real_click_problems(tab.page, pair.md_for("zh"))
    problems += [f"/{pair.zh} at {DESKTOP['width']} px: {p}" for p in tab.problems + desktop]
    tab.problems = []
    # Back to the English page, which has been checked already: where the switch leads is enough.
    back = switch_target(tab, "en")
    assert back == pair.en, f"Chinese /{pair.zh} switched back to /{back}"
    problems += tab.problems
    assert not problems, "\n  ".join(problems)


# The header, and its menu, is the same on every page: the smallest page pair loads fastest.
@pytest.mark.parametrize("pair", [p for p in PAIRS if p.id == "glossary/"],
                         ids=lambda p: p.id)
def test_the_language_menu_opens_on_hover(tab, pair):
    """A reader hovers over the language menu and clicks the other language, and back."""
    tab.visit(pair.en)
    switch_language(tab, "zh", hover=True)
    assert tab.path() == pair.zh
    switch_language(tab, "en", hover=True)
    assert tab.path() == pair.en
    assert not tab.problems, tab.problems


SEARCHES = [("en", "retain_graph"), ("en", "autograd.grad"), ("zh", "计算图"), ("zh", "保存的张量")]


def search(tab: Tab, start: str, term: str) -> list[str]:
    """Type ``term`` into Material's search on page ``start``; the URL paths of all results."""
    tab.real_search_index = True
    try:
        return _search(tab, start, term)
    finally:
        tab.real_search_index = False


def _search(tab: Tab, start: str, term: str) -> list[str]:
    page = tab.page
    if tab.searched == start:
        # The page this tab searched last is still open, its real index built (loading it
        # again cost the browser 1.5 s of CPU): empty the query, wait for Material to empty
        # the results, and search again.
        page.fill("input.md-search__input", "")
        page.wait_for_selector(".md-search-result__item", state="detached")
    else:
        tab.visit(start)
        page.keyboard.press("/")
    page.fill("input.md-search__input", term)
    page.press("input.md-search__input", "End")  # fill alone does not trigger the search
    try:
        page.wait_for_selector(".md-search-result__link", timeout=15_000)
    except Exception:
        meta = page.inner_text(".md-search-result__meta")
        raise AssertionError(f"searching {term!r} from /{start} found nothing: {meta!r}") from None
    page.wait_for_timeout(300)
    meta = page.inner_text(".md-search-result__meta")
    total = int(re.search(r"\d+", meta)[0])
    # Material shows 10 results, then 4 more each time the list is scrolled to its end;
    # scroll as a reader does, from above the end down to it.
    for _ in range(50):
        if len(page.query_selector_all(".md-search-result__item")) >= total:
            break
        for to_end in ("e.scrollHeight - e.clientHeight - 200", "e.scrollHeight"):
            page.eval_on_selector(".md-search__scrollwrap", f"e => e.scrollTo(0, {to_end})")
            page.wait_for_timeout(100)
    shown = len(page.query_selector_all(".md-search-result__item"))
    assert shown == total, f"searching {term!r}: {meta!r}, but only {shown} could be scrolled to"
    hrefs = page.eval_on_selector_all(".md-search-result__link", "els => els.map(e => e.href)")
    tab.searched = start
    return sorted({h.removeprefix(tab.base).split("#")[0].split("?")[0] for h in hrefs})


@pytest.mark.parametrize(("lang", "term"), SEARCHES, ids=[t for _, t in SEARCHES])
def test_search_finds_the_pages_that_contain_the_term(tab, built_site, lang, term):
    expected = sorted(
        pair.url(lang)
        for pair in PAIRS
        if term.lower() in siteserver.article_text(built_site.path, pair.url(lang)).lower()
    )
    assert expected, f"no {lang} page contains {term!r}, so its search cannot be tested"
    start = "" if lang == "en" else "zh/"
    found = search(tab, start, term)
    missing = sorted(set(expected) - set(found))
    assert not missing, f"searching {term!r} from /{start} misses {missing}; found {found}"
    wrong_language = [f for f in found if f.startswith("zh/") != (lang == "zh")]
    assert not wrong_language, f"searching from /{start} returned other-language {wrong_language}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_home_screenshots(browser, served_site, scheme):
    """Screenshots of the home page in both languages, for a person to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
    try:
        tab = Tab(context, served_site)
        for lang, url in (("en", ""), ("zh", "zh/")):
            problems = tab.visit(url)
            tab.page.evaluate("document.fonts.ready")
            assert not problems, problems
            palette = tab.page.get_attribute("body", "data-md-color-scheme")
            assert palette == {"light": "default", "dark": "slate"}[scheme], palette
            shot = ARTIFACTS / f"home-{lang}-{scheme}.png"
            tab.page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000, shot
    finally:
        context.close()


def test_site_is_served_under_a_sub_path_like_github_pages(served_site):
    """Every test here runs against the site at /retain-graph/, as GitHub Pages serves a
    project site: a link or script that assumed the host's root would fail them."""
    assert urlsplit(served_site).path == "/" + conftest.SUB_PATH


# --- A pasted error or a question finds its answer ----------------------------------------
#
# A pasted error or a reader's question finds its answer through the site's own search.
#
# The queries and the sections that answer them are in ``tests/data/search_queries.py``. They
# are asked of the search a reader's browser runs: Material's search worker, with the language
# root's own index, in Chromium. Most are sent to that worker (the same script, the same index,
# the same messages Material's search box sends) from one page load per language; a few are
# typed into the search box, and what the box shows first must be what the worker ranked first,
# so the two cannot drift apart. The first result is the one Enter opens: the best-scored
# section of the first page listed.
#
# Asserts: the answering section is the first result for at least 90 % of the queries and among
# the first three for every query. The figures are printed (``-s``) per language.

TOP1_GOAL = 0.90

# Material's worker protocol (integrations/search/worker/message): 0 SETUP, 1 READY, 2 QUERY,
# 3 RESULT. Each result item is one page's documents, best first; returns, per query, the best
# document of each of the first ``depth`` pages, relative to the language root.
ASK_WORKER_JS = """
async ([queries, depth]) => {
  const config = JSON.parse(document.getElementById('__config').textContent);
  const base = new URL(config.base.replace(/\\/?$/, '/'), location.href);
  const index = await (await fetch(new URL('search/search_index.json', base))).json();
  const worker = new Worker(new URL(config.search, location.href));
  const next = () => new Promise(resolve =>
    worker.addEventListener('message', e => resolve(e.data), {once: true}));
  worker.postMessage({type: 0, data: {config: index.config, docs: index.docs,
                                      options: {suggest: false}}});
  if ((await next()).type !== 1) throw new Error('the search worker did not get ready');
  const out = [];
  for (const q of queries) {
    worker.postMessage({type: 2, data: q});
    const result = await next();
    out.push(result.data.items.slice(0, depth).map(group => group[0].location));
  }
  worker.terminate();
  return {answers: out, size: JSON.stringify(index).length};
}
"""

# One query per language typed into the box, as a reader does.
TYPED = {"en": "Trying to backward through the graph a second time", "zh": "第二次反向传播"}


def root(lang: str) -> str:
    return "" if lang == "en" else "zh/"


def ask_worker(tb: Tab, lang: str, queries: list[str], depth: int = 3) -> list[list[str]]:
    tb.real_search_index = True
    try:
        tb.visit(root(lang))
        return tb.page.evaluate(ASK_WORKER_JS, [queries, depth])["answers"]
    finally:
        tb.real_search_index = False


def typed_first_result(tb: Tab, lang: str, query: str) -> str:
    """Type ``query`` into the search box; where Enter would take the reader (Material's rule:
    the best-scored link of the first result)."""
    page = tb.page
    tb.real_search_index = True
    try:
        tb.visit(root(lang))
        page.keyboard.press("/")
        page.fill("input.md-search__input", query)
        page.press("input.md-search__input", "End")
        page.wait_for_selector(".md-search-result__item")
        best = page.eval_on_selector_all(
            ".md-search-result__item:first-child [href]",
            """els => els.map(a => [a.href, parseFloat(a.firstElementChild
                                                       .getAttribute('data-md-score'))])
                        .sort((a, b) => b[1] - a[1])[0][0]""",
        )
    finally:
        tb.real_search_index = False
    path, _, anchor = best.removeprefix(tb.base + root(lang)).partition("#")
    return path.split("?")[0] + ("#" + anchor if anchor else "")  # ?h=: the words highlighted


def figures(lang: str, results: list[list[str]], group=QUERIES) -> tuple[int, int, int, list[str]]:
    queries = [(q, answers) for qlang, q, answers in group if qlang == lang]
    top1 = top3 = 0
    misses = []
    for (query, answers), found in zip(queries, results, strict=True):
        rank = next((i for i, loc in enumerate(found) if loc in answers), None)
        top1 += rank == 0
        top3 += rank is not None
        if rank != 0:
            misses.append(f"[{lang}] {query[:70]!r}: rank {rank if rank is None else rank + 1}, "
                          f"got {found}, wanted {answers}")
    return top1, top3, len(queries), misses


def test_pasted_errors_and_questions_find_their_answer(tab):
    total1 = total3 = count = 0
    misses = []
    for lang in ("en", "zh"):
        groups = {"tuned": QUERIES, "held out": HELD_OUT}
        asked = [q for group in groups.values() for qlang, q, _ in group if qlang == lang]
        found = ask_worker(tab, lang, asked)
        for name, group in groups.items():
            n_lang = sum(qlang == lang for qlang, _, _ in group)
            top1, top3, n, missed = figures(lang, found[:n_lang], group)
            found = found[n_lang:]
            print(f"\nsearch /{root(lang)}, {name}: top-1 {top1}/{n} ({top1 / n:.0%}), "
                  f"top-3 {top3}/{n} ({top3 / n:.0%})")
            total1, total3, count = total1 + top1, total3 + top3, count + n
            misses += [f"({name}) {m}" for m in missed]
    print(f"search, both roots, both sets: top-1 {total1}/{count} ({total1 / count:.0%}), "
          f"top-3 {total3}/{count}")
    print("\n".join(misses))
    not_in_top3 = [m for m in misses if ": rank None," in m]
    assert not not_in_top3, "not among the first three results:\n" + "\n".join(not_in_top3)
    assert total1 >= TOP1_GOAL * count, f"top-1 {total1}/{count} is under {TOP1_GOAL:.0%}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_search_box_shows_what_the_worker_ranks_first(tab, lang):
    """What a reader typing into the box gets first is what the worker harness measured."""
    query = TYPED[lang]
    assert any(q == query for qlang, q, _ in QUERIES if qlang == lang)
    [worker_first] = ask_worker(tab, lang, [query], depth=1)
    typed = typed_first_result(tab, lang, query)
    assert typed == worker_first[0], (typed, worker_first)


# --- The answer first ------------------------------------------------------------------
#
# The reader gets the answer first: on the home page's first screen, at the top of each guide
# page, across a language switch, and from a search typed in the other language.
#
# In the same Chromium as tests/test_browser.py (its ``tab``: one tab, reused).

PHONE_SCREEN = {"width": 390, "height": 844}

# What to write instead of retain_graph=True, each linked from the home page's first screen.
DECISION = [
    "guide/alternatives/#sum-the-losses",
    "guide/when-you-need-it/#gan",
    "guide/when-you-need-it/#truncated-bptt",
    "article-corrected/#parameters-changed",
    "guide/alternatives/#checkpoint",
    "guide/when-you-need-it/#summary",
]

# Where each link of the article's first screen leads, and where "How this site is checked"
# begins, relative to the top of the page (the window is at the top).
FIRST_SCREEN_JS = """
() => {
  const article = document.querySelector('article.md-content__inner');
  const links = Array.from(article.querySelectorAll('a[href]'))
    .filter(a => a.getBoundingClientRect().bottom <= innerHeight
                 && a.getBoundingClientRect().width > 0)
    .map(a => a.href);
  const checked = document.getElementById('how-it-is-checked').getBoundingClientRect().top;
  return {links, checked};
}
"""


@pytest.mark.parametrize("screen", [DESKTOP, PHONE_SCREEN], ids=["1280x800", "390x844"])
@pytest.mark.parametrize("lang", siteserver.LANGS)
def test_the_home_pages_first_screen_gives_the_decision(tab, lang, screen):
    root = "" if lang == "en" else "zh/"
    tab.page.set_viewport_size(screen)
    try:
        tab.visit(root)
        seen = tab.page.evaluate(FIRST_SCREEN_JS)
    finally:
        tab.page.set_viewport_size(DESKTOP)
    on_screen = {href.removeprefix(tab.base + root) for href in seen["links"]}
    missing = [target for target in DECISION if target not in on_screen]
    assert not missing, f"/{root} at {screen}: not on the first screen: {missing}"
    assert seen["checked"] > screen["height"], "how the site is checked comes before the answer"


SHORT_ANSWERS = {"summary", "decision-table", "at-a-glance"}
HEADING = re.compile(r"^## .*\{ #([\w-]+) \}", re.M)


# Besides the guide, the pages a reader opens for an answer: the measurements and the tool.
ANSWER_PAGES = [*sorted((mdfences.DOCS_DIR / "guide").glob("*.md")),
                *(mdfences.DOCS_DIR / name for name in
                  ("benchmarks.md", "benchmarks.zh.md", "retaincheck.md", "retaincheck.zh.md"))]


@pytest.mark.parametrize(
    "md", ANSWER_PAGES, ids=lambda p: p.relative_to(mdfences.DOCS_DIR).as_posix())
def test_every_guide_page_opens_with_its_short_answer(md):
    """The first section of a guide page (and of the benchmarks and retaincheck pages) is its
    short answer (In short, Which one to use, At a glance), or the page's opening text holds
    it: the troubleshooting table."""
    text = md.read_text(encoding="utf-8")
    first = HEADING.search(text)
    opening = text[: first.start()] if first else text
    assert (first and first[1] in SHORT_ANSWERS) or "| --- |" in opening, (
        f"{md.name}: the first section is #{first[1] if first else None}, not a short answer"
    )


# A reader who scrolled to a section switches language, and back.
SWITCHES = [("guide/when-you-need-it/", "gan-done-right", "zh"),
            ("zh/guide/alternatives/", "detach", "en")]


def switch_from_section(tab: Tab, url: str, anchor: str, lang: str) -> str:
    """Scroll the page to ``anchor`` as a reader does (no anchor in the URL), switch language
    with the menu's link, and return where the new page's URL and window are."""
    tab.visit(url)
    tab.page.evaluate(
        "id => { document.getElementById(id).scrollIntoView(); scrollBy(0, 100); }", anchor)
    wait_for_switcher(tab)
    target = "zh/" + url if lang == "zh" else url.removeprefix("zh/")
    tab.page.dispatch_event(f"a.md-select__link[hreflang={lang}]", "click")
    tab.page.wait_for_url(tab.base + target + "*", wait_until="load")
    return tab.page.url.removeprefix(tab.base)


@pytest.mark.parametrize(("url", "anchor", "lang"), SWITCHES, ids=["en-to-zh", "zh-to-en"])
def test_the_language_switch_keeps_the_readers_section(tab, url, anchor, lang):
    landed = switch_from_section(tab, url, anchor, lang)
    assert landed.endswith("#" + anchor), f"from #{anchor} of /{url}, the switch led to /{landed}"
    top = tab.page.evaluate(f"document.getElementById('{anchor}').getBoundingClientRect().top")
    assert 0 <= top < 200, f"/{landed}: the section is not at the top of the window ({top} px)"
    assert not tab.problems, tab.problems


def section_top(tab: Tab, anchor: str) -> float:
    return tab.page.evaluate(f"document.getElementById('{anchor}').getBoundingClientRect().top")


@pytest.mark.parametrize("screen", [  # (the phone's, 2 s: where slow checks run once)
    DESKTOP, pytest.param(PHONE_SCREEN, marks=pytest.mark.all_pages)], ids=["1280x800", "390x844"])
def test_a_switch_straight_after_an_anchor_link_keeps_its_section(tab, screen):
    """A reader who follows a link to a section switches at once, both ways. The browser leaves
    the section's heading its scroll-margin-top (more than the header) below the window's top,
    where a rule that looked just under the header took the section before it."""
    anchor = "gan"
    tab.page.set_viewport_size(screen)
    try:
        tab.visit("guide/when-you-need-it/#" + anchor)
        for lang, url in (("zh", "zh/guide/when-you-need-it/"), ("en", "guide/when-you-need-it/")):
            wait_for_switcher(tab)
            tab.page.dispatch_event(f"a.md-select__link[hreflang={lang}]", "click")
            tab.page.wait_for_url(tab.base + url + "*", wait_until="load")
            landed = tab.page.url.removeprefix(tab.base)
            assert landed == url + "#" + anchor, f"{screen}: the switch to {lang} led to /{landed}"
            assert 0 <= section_top(tab, anchor) < 200, f"/{landed}: #{anchor} is not in view"
    finally:
        tab.page.set_viewport_size(DESKTOP)
    assert not tab.problems, tab.problems


def typed(tab: Tab, root: str, query: str) -> tuple[str, list[str]]:
    """Type ``query`` into the search of ``root``; the hint shown, and the links in it."""
    tab.real_search_index = True
    try:
        tab.visit(root)
        tab.page.keyboard.press("/")
        tab.page.fill("input.md-search__input", query)
        tab.page.press("input.md-search__input", "End")
        try:
            tab.page.wait_for_selector(".search-hint:not([hidden])", timeout=5000)
        except Exception:
            meta = tab.page.inner_text(".md-search-result__meta")
            raise AssertionError(f"/{root}: {query!r} shows no hint, only {meta!r}") from None
        return (tab.page.inner_text(".search-hint"),
                tab.page.eval_on_selector_all(".search-hint a", "els => els.map(a => a.href)"))
    finally:
        tab.real_search_index = False


def test_a_chinese_query_on_the_english_site_is_sent_to_the_chinese_search(tab):
    hint, links = typed(tab, "", "第二次反向传播")
    assert "No matching documents" not in hint
    chinese = [href for href in links if href.startswith(tab.base + "zh/?q=")]
    assert chinese, f"no link to the Chinese search in the hint {hint!r}: {links}"
    tab.real_search_index = True
    try:
        tab.visit(chinese[0].removeprefix(tab.base))
        tab.page.wait_for_selector(".md-search-result__item")
        first = tab.page.eval_on_selector_all(
            ".md-search-result__item [href]", "els => els.slice(0, 6).map(a => a.href)")
    finally:
        tab.real_search_index = False
    assert any("guide/troubleshooting/" in href and "#backward-second-time" in href
               for href in first), first


@pytest.mark.parametrize(("root", "other"), [("", "zh/"), ("zh/", "")], ids=["en", "zh"])
def test_a_query_that_finds_nothing_says_where_to_look(tab, root, other):
    hint, links = typed(tab, root, "qwzxv")
    paths = {href.removeprefix(tab.base).split("?")[0] for href in links}
    assert paths == {root + "guide/troubleshooting/", other}, (hint, links)


def test_an_english_query_on_the_chinese_site_is_offered_the_english_search(tab):
    """A query with no hanzi on /zh/ may be an English question the Chinese pages do not
    answer well: with results shown, the hint still offers the English search, with links that
    look like links."""
    tab.real_search_index = True
    try:
        tab.visit("zh/")
        tab.page.keyboard.press("/")
        tab.page.fill("input.md-search__input", "DDP")
        tab.page.press("input.md-search__input", "End")
        tab.page.wait_for_selector(".md-search-result__item")
        hint = tab.page.evaluate("""() => {
          const h = document.querySelector('.search-hint'), a = h.querySelector('a');
          if (h.hidden || !a) return null;
          const s = getComputedStyle(a);
          return [a.href, s.color, s.textDecorationLine,
                  getComputedStyle(document.querySelector('article li a[href]')).color]; }""")
    finally:
        tab.real_search_index = False
    assert hint, "/zh/: results for 'DDP', and no hint of the English search"
    assert hint[0].startswith(tab.base + "?q=DDP"), hint
    assert hint[2] == "underline" and hint[1] == hint[3], hint
