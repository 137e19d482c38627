"""The copy button copies exactly the code, without the annotation markers' leftovers.

Material replaces a ``# (1)!`` comment with an annotation marker, and its copy button
copies the block's visible text: the comment is gone, but the spaces before it stay, so
``loss.backward()  # (1)!`` is copied as ``loss.backward()`` plus two trailing spaces.
Material copies the ``data-copy`` attribute of the code's nearest ancestor instead when
there is one; this hook sets it on every block that has such markers, to the code with
each marker comment and the whitespace before it removed. ``tests/test_browser.py``
clicks every copy button and compares the clipboard with the snippet file.
"""

from __future__ import annotations

import html
import re

BLOCK = re.compile(r"(<pre\b)([^>]*>)(<span></span>)?(<code\b[^>]*>)(.*?)(</code></pre>)", re.S)
# A comment span holding an annotation marker with "!": Material drops the whole comment.
MARKER_COMMENT = re.compile(
    r'[ \t]*<span class="(?:c|c1|cm|ch|cs)">[^<]*\(\d+\)![^<]*</span>(?=[ \t]*(?:\n|$))'
)
TAG = re.compile(r"<[^>]+>")


def copy_text(code_html: str) -> str:
    without_markers = MARKER_COMMENT.sub("", code_html)
    return html.unescape(TAG.sub("", without_markers)).rstrip()


def add_copy_text(match: re.Match) -> str:
    pre, rest, span, code, body, end = match.groups()
    if not MARKER_COMMENT.search(body) or "data-copy=" in rest:
        return match[0]
    value = html.escape(copy_text(body), quote=True).replace("\n", "&#10;")
    return f'{pre} data-copy="{value}"{rest}{span or ""}{code}{body}{end}'


def on_page_content(content, page, config, files):
    return BLOCK.sub(add_copy_text, content)
