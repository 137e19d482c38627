"""MkDocs hooks for the site.

Every page names each torch its code was verified with. The versions come from
``snippets/verified_with.json``, which only a test run writes: one in which every snippet
passed with that torch (``--record-verified`` or ``--update-snippets``, see
``tests/verified.py``); every test run fails if its own torch is not in it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "snippets" / "verified_with.json"


def verified_torch_versions() -> list[str]:
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return [entry["torch"] for entry in data["verified"]]


def verified_on_cpu_only() -> bool:
    """Whether every recorded run was on a machine without a GPU (its entry says "cpu").

    A "+cu130" build can run on such a machine; the stamp then says "on the CPU", so that the
    version's name does not suggest a GPU ran the code.
    """
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return all(entry.get("device") == "cpu" for entry in data["verified"])


def on_config(config):
    """Expose the versions to ``overrides/main.html``, which names them on every page."""
    config.extra["verified_torch"] = verified_torch_versions()
    config.extra["verified_on_cpu_only"] = verified_on_cpu_only()
    return config


# --- One search index per language -------------------------------------------------
#
# mkdocs-static-i18n stacks every language into one search index at /search/, so a reader
# searching from a Chinese page would get the English copies too. After the build we
# split it: /search/ keeps the English pages, /zh/search/ gets the Chinese ones, and the
# Chinese pages are told (through Material's ``__config.base``) to load the index under
# /zh/. Material resolves result locations against that same base, so they stay right.

LOCALIZED = ("zh",)
# Separators: besides whitespace, split code on dots, brackets, commas and the like, so that
# "autograd.grad" finds pages that write `torch.autograd.grad(...)`; jieba segments Chinese
# at build time with U+200B, and the Chinese separator splits on it and on CJK punctuation.
CODE_SEPARATORS = r"""\-,:!=\[\]()"/]+|\.(?!\d)|&[lg]t;"""
SEARCH_CONFIG = {
    "en": {"lang": ["en"], "separator": r"[\s" + CODE_SEPARATORS, "pipeline": ["stopWordFilter"]},
    "zh": {
        "lang": ["en", "zh"],
        "separator": "[\\s\\u200b\\u3000、。，．？！；" + CODE_SEPARATORS,
        "pipeline": ["stopWordFilter"],
    },
}
BASE = re.compile(r'("base":\s*")([^"]*)(")')


@event_priority(-200)  # after the search and i18n plugins have written the shared index
def on_post_build(config):
    site = Path(config.site_dir)
    shared = site / "search" / "search_index.json"
    if not shared.exists():
        return
    index = json.loads(shared.read_text(encoding="utf-8"))
    by_lang: dict[str, list] = {lang: [] for lang in ("en", *LOCALIZED)}
    for doc in index["docs"]:
        lang = doc["location"].split("/", 1)[0]
        if lang in LOCALIZED:
            doc = {**doc, "location": doc["location"][len(lang) + 1 :]}
            by_lang[lang].append(doc)
        else:
            by_lang["en"].append(doc)
    # Material's language switcher reads <language root>/sitemap.xml to find the same page
    # in the other language; the shared sitemap lists every language's pages.
    sitemap = site / "sitemap.xml"
    for lang in LOCALIZED:
        if sitemap.exists() and (site / lang).is_dir():
            shutil.copyfile(sitemap, site / lang / "sitemap.xml")
    for lang, docs in by_lang.items():
        if not docs:
            continue  # this language was split off by an earlier pass of the same build
        target = shared if lang == "en" else site / lang / "search" / "search_index.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        config_for = {**index["config"], **SEARCH_CONFIG[lang]}
        target.write_text(
            json.dumps({"config": config_for, "docs": docs}, ensure_ascii=False),
            encoding="utf-8",
        )


def on_post_page(output, page, config):
    """Point Material's base (used for the search index) at the page's language root."""
    language = config.theme.get("language", "en")
    if language not in LOCALIZED:
        return output

    def one_level_up(match):
        base = match[2]
        new = "." if base in ("..", "../") else base.rsplit("/..", 1)[0]
        return match[1] + new + match[3]

    return BASE.sub(one_level_up, output, count=1)


# --- Chinese soft line breaks ------------------------------------------------------
#
# Markdown turns a line break inside a paragraph into a space. Between two Chinese
# characters that space is visible and wrong, so the Chinese pages may be wrapped in the
# source like the English ones: here a break between CJK text is joined without a space.

CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u201c\u201d\u2018\u2019\u2014\u2026"
# Full-width punctuation: CJK symbols (、。「」《》), full-width forms (，：；！？（）),
# curly quotes, and the dash and ellipsis Chinese writes doubled (—— ……).
PUNCT = "\u3000-\u303f\uff00-\uffef\u201c\u201d\u2018\u2019\u2014\u2026"
ENDS_CJK = re.compile(rf"[{CJK}](?:\*\*)?$")
ENDS_PUNCT = re.compile(rf"[{PUNCT}](?:\*\*)?$")
STARTS_CJK = re.compile(rf"(?:\*\*|\*|_|\[)?[{CJK}]")
STARTS_PUNCT = re.compile(rf"[{PUNCT}]")
BLOCK_START = re.compile(r"([-*+] |\d+[.)] |#|>|\||`{3}|~{3}|!!!|\?\?\?|===|<|--8<--|\[\^|\*\*\*)")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def _joins_without_space(previous: str, stripped: str) -> bool:
    """Whether the break between two lines of one paragraph must not render as a space.

    Between two Chinese characters, after full-width punctuation (whatever follows: Chinese,
    Latin or code) and before it. Between Chinese and Latin text or code the break stays: it
    renders as the one space such a boundary takes.
    """
    return bool(
        (ENDS_CJK.search(previous) and STARTS_CJK.match(stripped))
        or ENDS_PUNCT.search(previous)
        or STARTS_PUNCT.match(stripped)
    )


def join_cjk_lines(markdown: str) -> str:
    """Join soft-wrapped lines of Chinese text, leaving code fences and blocks alone."""
    out: list[str] = []
    fence = None
    for line in markdown.split("\n"):
        opened = FENCE.match(line)
        if fence:
            if opened and opened[1][0] == fence[0] and len(opened[1]) >= len(fence):
                fence = None
            out.append(line)
            continue
        if opened:
            fence = opened[1]
            out.append(line)
            continue
        stripped = line.lstrip()
        if (
            out
            and out[-1].strip()
            and not out[-1].endswith("  ")  # two trailing spaces: a deliberate hard break
            and stripped
            and not BLOCK_START.match(stripped)
            and _joins_without_space(out[-1].rstrip(), stripped)
        ):
            out[-1] = out[-1].rstrip() + stripped
            continue
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files):
    # The footer's "every example on this page was run" (overrides/main.html) is printed only
    # on pages that include a snippet: the glossary and the API reference have no examples.
    page.meta["has_examples"] = '--8<-- "snippets/' in markdown
    if config.theme.get("language") == "zh":
        return join_cjk_lines(markdown)
    return markdown
