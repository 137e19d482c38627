"""What the search indexes, so that a pasted error or a question lands on the section that
answers it (measured by the search tests of tests/test_browser.py, on the queries in
tests/data/search_queries.py).

- The proofs ("How we know this" / "验证", ``??? success``) and the source notes ("Where this
  is in the source" / "源码依据", ``??? note``) stay on the page but leave the index
  (Material's ``data-search-exclude``): every proof repeats its lesson's words, and ranked
  a proof's section (or a page about something else that proves it in passing) above the
  lesson that answers.
- ``hooks/search_keywords.yml`` adds words to a few sections' index entries: PyTorch's older
  wordings of the messages a section answers, which the page does not print, and per-page
  boosts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

KEYWORDS = Path(__file__).with_name("search_keywords.yml")
EXCLUDED = re.compile(r'<details class="(?:success|note)"')


def on_page_content(html, page, config, files):
    return EXCLUDED.sub(lambda m: m[0] + " data-search-exclude", html)


# --- Chinese queries cut into the index's words (hooks/search_worker.js) -------------------

WORKER = re.compile(r'("search":\s*"[^"]*/workers/)(search\.[0-9a-f]+\.min\.js)(")')
WRAPPER = "search-answers.js"
_worker_name: list[str] = []


def on_post_page(output, page, config):
    def to_wrapper(match: re.Match) -> str:
        if match[2] not in _worker_name:
            _worker_name.append(match[2])
        return match[1] + WRAPPER + match[3]

    output, found = WORKER.subn(to_wrapper, output, count=1)
    if not found and 'id="__config"' in output:
        # A Material whose page config names its worker differently: fail loudly, not with a
        # search that silently lost the Chinese segmentation (requirements-docs.txt pins 9.8.*).
        raise PluginError(f"hooks/search_tuning.py: no search worker found in the config of "
                          f"{page.file.src_uri}; WORKER no longer matches this mkdocs-material")
    return output


def write_worker(config):
    if not any(name.split("/")[-1] == "search" for name in config.plugins):
        return
    if len(set(_worker_name)) != 1:
        raise PluginError(f"hooks/search_tuning.py: not one search worker: {_worker_name}")
    [name] = set(_worker_name)
    workers = Path(config.site_dir) / "assets" / "javascripts" / "workers"
    if not (workers / name).is_file():
        raise PluginError(f"hooks/search_tuning.py: Material's worker {name} is not in {workers}")
    source = Path(__file__).with_name("search_worker.js").read_text(encoding="utf-8")
    (workers / WRAPPER).write_text(source.replace("__WORKER__", name), encoding="utf-8")


# --- Boosts and keywords (hooks/search_keywords.yml) -----------------------------------------


def _segment(text: str) -> str:
    """Chinese words cut as Material's search plugin cuts a page's (jieba, joined by U+200B)."""
    import jieba

    return re.sub(
        r"[\u3400-\u4dbf\u4e00-\u9fff]+",
        lambda m: "\u200b" + "\u200b".join(jieba.cut(m[0])) + "\u200b",
        text,
    )


def tune_index(path: Path, lang: str, tuning: dict) -> None:
    index = json.loads(path.read_text(encoding="utf-8"))
    # mkdocs-static-i18n builds each language in a pass of its own, and each pass ends here:
    # tune an index once, after site_hooks has split it per language.
    split = not any(doc["location"].startswith("zh/") for doc in index["docs"])
    if index["config"].get("tuned") or not split or not index["docs"]:
        return
    index["config"]["tuned"] = True
    keywords = tuning.get("keywords", {}).get(lang, {})
    unknown = set(keywords) - {doc["location"] for doc in index["docs"]}
    assert not unknown, f"{KEYWORDS.name}: no section {sorted(unknown)} in the {lang} index"
    for doc in index["docs"]:
        page = doc["location"].split("#")[0]
        factor = tuning.get("boost", {}).get(page)
        if "#" not in doc["location"]:
            factor = (factor or 1) * tuning.get("page_entry", 1)
        if factor is not None and factor != 1:
            doc["boost"] = factor * doc.get("boost", 1)
        if doc["location"] in keywords:
            doc["keywords"] = _segment(keywords[doc["location"]])
    fields = index["config"]["fields"]
    for field, boost in tuning.get("fields", {}).get(lang, {}).items():
        fields[field] = {**fields.get(field, {}), "boost": boost}
    path.write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")


@event_priority(-300)  # after site_hooks has split the index per language
def on_post_build(config):
    write_worker(config)
    tuning = yaml.safe_load(KEYWORDS.read_text(encoding="utf-8"))
    site = Path(config.site_dir)
    for lang, path in (("en", site / "search" / "search_index.json"),
                       ("zh", site / "zh" / "search" / "search_index.json")):
        if path.exists():
            tune_index(path, lang, tuning)
