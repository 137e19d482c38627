"""A pasted error or a reader's question finds its answer through the site's own search.

The queries and the sections that answer them are in ``tests/data/search_queries.py``. They
are asked of the search a reader's browser runs: Material's search worker, with the language
root's own index, in Chromium. Most are sent to that worker (the same script, the same index,
the same messages Material's search box sends) from one page load per language; a few are
typed into the search box, and what the box shows first must be what the worker ranked first,
so the two cannot drift apart. The first result is the one Enter opens: the best-scored
section of the first page listed.

Asserts: the answering section is the first result for at least 90 % of the queries and among
the first three for every query. The figures are printed (``-s``) per language.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_browser import Tab, browser, tab  # noqa: F401 (fixtures)

sys.path.insert(0, str(Path(__file__).parent / "data"))
from search_queries import QUERIES  # noqa: E402

pytestmark = pytest.mark.browser

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


def figures(lang: str, results: list[list[str]]) -> tuple[int, int, int, list[str]]:
    queries = [(q, answers) for qlang, q, answers in QUERIES if qlang == lang]
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


def test_pasted_errors_and_questions_find_their_answer(tab):  # noqa: F811
    total1 = total3 = count = 0
    misses = []
    for lang in ("en", "zh"):
        queries = [q for qlang, q, _ in QUERIES if qlang == lang]
        top1, top3, n, missed = figures(lang, ask_worker(tab, lang, queries))
        print(f"\nsearch /{root(lang)}: top-1 {top1}/{n} ({top1 / n:.0%}), "
              f"top-3 {top3}/{n} ({top3 / n:.0%})")
        total1, total3, count = total1 + top1, total3 + top3, count + n
        misses += missed
    print(f"search, both roots: top-1 {total1}/{count} ({total1 / count:.0%}), "
          f"top-3 {total3}/{count}")
    print("\n".join(misses))
    not_in_top3 = [m for m in misses if ": rank None," in m]
    assert not not_in_top3, "not among the first three results:\n" + "\n".join(not_in_top3)
    assert total1 >= TOP1_GOAL * count, f"top-1 {total1}/{count} is under {TOP1_GOAL:.0%}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_search_box_shows_what_the_worker_ranks_first(tab, lang):  # noqa: F811
    """What a reader typing into the box gets first is what the worker harness measured."""
    query = TYPED[lang]
    assert any(q == query for qlang, q, _ in QUERIES if qlang == lang)
    [worker_first] = ask_worker(tab, lang, [query], depth=1)
    typed = typed_first_result(tab, lang, query)
    assert typed == worker_first[0], (typed, worker_first)
