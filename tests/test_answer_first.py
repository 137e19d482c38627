"""The reader gets the answer first: on the home page's first screen, at the top of each guide
page, across a language switch, and from a search typed in the other language.

In the same Chromium as tests/test_browser.py (its ``tab``: one tab, reused).
"""

from __future__ import annotations

import re

import mdfences
import pytest
import siteserver
from test_browser import DESKTOP, Tab, browser, tab  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

PHONE_SCREEN = {"width": 390, "height": 844}

# What to write instead of retain_graph=True, each linked from the home page's first screen.
DECISION = [
    "guide/alternatives/#sum-the-losses",
    "guide/when-you-need-it/#truncated-bptt",
    "#you-usually-do-not-need-it",
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
def test_the_home_pages_first_screen_gives_the_decision(tab, lang, screen):  # noqa: F811
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


@pytest.mark.parametrize(
    "md", sorted((mdfences.DOCS_DIR / "guide").glob("*.md")), ids=lambda p: p.name)
def test_every_guide_page_opens_with_its_short_answer(md):
    """The first section of a guide page is its short answer (In short, Which one to use, At a
    glance), or the page's opening text holds it: the troubleshooting table."""
    text = md.read_text(encoding="utf-8")
    first = HEADING.search(text)
    opening = text[: first.start()] if first else text
    assert (first and first[1] in SHORT_ANSWERS) or "| --- |" in opening, (
        f"{md.name}: the first section is #{first[1] if first else None}, not a short answer"
    )


# A reader who scrolled to a section switches language, and back.
SWITCHES = [("guide/when-you-need-it/", "gan-done-right", "zh"),
            ("zh/guide/alternatives/", "detach", "en")]


def switch_from_section(tab: Tab, url: str, anchor: str, lang: str) -> str:  # noqa: F811
    """Scroll the page to ``anchor`` as a reader does (no anchor in the URL), switch language
    with the menu's link, and return where the new page's URL and window are."""
    from test_browser import wait_for_switcher

    tab.visit(url)
    tab.page.evaluate(
        "id => { document.getElementById(id).scrollIntoView(); scrollBy(0, 100); }", anchor)
    wait_for_switcher(tab)
    target = "zh/" + url if lang == "zh" else url.removeprefix("zh/")
    tab.page.dispatch_event(f"a.md-select__link[hreflang={lang}]", "click")
    tab.page.wait_for_url(tab.base + target + "*", wait_until="load")
    return tab.page.url.removeprefix(tab.base)


@pytest.mark.parametrize(("url", "anchor", "lang"), SWITCHES, ids=["en-to-zh", "zh-to-en"])
def test_the_language_switch_keeps_the_readers_section(tab, url, anchor, lang):  # noqa: F811
    landed = switch_from_section(tab, url, anchor, lang)
    assert landed.endswith("#" + anchor), f"from #{anchor} of /{url}, the switch led to /{landed}"
    top = tab.page.evaluate(f"document.getElementById('{anchor}').getBoundingClientRect().top")
    assert 0 <= top < 200, f"/{landed}: the section is not at the top of the window ({top} px)"
    assert not tab.problems, tab.problems


def typed(tab: Tab, root: str, query: str) -> tuple[str, list[str]]:  # noqa: F811
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


def test_a_chinese_query_on_the_english_site_is_sent_to_the_chinese_search(tab):  # noqa: F811
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
def test_a_query_that_finds_nothing_says_where_to_look(tab, root, other):  # noqa: F811
    hint, links = typed(tab, root, "qwzxv")
    paths = {href.removeprefix(tab.base).split("?")[0] for href in links}
    assert paths == {root + "guide/troubleshooting/", other}, (hint, links)
