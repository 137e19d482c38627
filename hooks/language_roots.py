"""Point each page's ``<link rel="alternate">`` at the language roots, as Material expects.

mkdocs-static-i18n writes one ``<link rel="alternate" hreflang=...>`` per language into the
head, pointing at the same page in that language. Material reads those links as language
*roots*: it fetches ``<href>/sitemap.xml`` to map the current page onto the other language.
On any page but the home page that file does not exist, so every page load made two
requests that failed with 404 and logged console errors (mkdocs-material#6582).

Here the head links are rewritten to the language roots (``/`` and ``/zh/``, relative to the
page, so the site still works under a sub-path such as GitHub Pages' ``/<repository>/``).
The language switcher's own links (``a.md-select__link``) keep pointing at the same page in
the other language, and the sitemap keeps its per-page ``hreflang`` alternates for search
engines. ``tests/test_browser.py`` fails on any failed request and checks the switcher.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

ALTERNATE = re.compile(r'<link rel="alternate" href="([^"]*)" hreflang="([\w-]+)">')


def as_dir(path: str) -> str:
    return path if path.endswith("/") else path + "/"


def on_post_page(output, page, config):
    url = page.url or ""
    if not (url == "" or url.endswith("/")):
        return output  # not a directory-style page (404.html): its links are already roots
    language = config.theme.get("language", "en")
    inner = url[len(language) + 1 :] if url.startswith(language + "/") else url
    prefix = urlsplit(config.site_url or "/").path.rstrip("/")  # "/<repository>" on Pages
    here = as_dir(prefix + "/" + url)

    def to_root(match: re.Match) -> str:
        href, hreflang = match[1], match[2]
        if re.match(r"^[a-z]+:|^//", href):
            return match[0]
        target = as_dir(posixpath.normpath(posixpath.join(here, href)))
        if not target.endswith("/" + inner) and inner:
            return match[0]
        root = target[: len(target) - len(inner)] if inner else target
        if not href.startswith("/"):
            root = posixpath.relpath(root, here)
            root = "./" if root == "." else root + "/"
        return f'<link rel="alternate" href="{root}" hreflang="{hreflang}">'

    return ALTERNATE.sub(to_root, output)
