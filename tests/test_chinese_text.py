"""Chinese pages render without stray spaces where the source wraps a line."""

from __future__ import annotations

import re
import sys

from snippetcheck import ROOT

sys.path.insert(0, str(ROOT / "hooks"))
import site_hooks  # noqa: E402

SPACE_BETWEEN_HANZI = re.compile(r"[\u4e00-\u9fff，。：；）][ \t]*\n[ \t]*[\u4e00-\u9fff（“]")


def test_soft_breaks_between_chinese_are_joined():
    text = "第一行文字，\n第二行文字。\n\n- 列表\n- 列表\n\n    缩进的\n    段落\n"
    assert site_hooks.join_cjk_lines(text) == (
        "第一行文字，第二行文字。\n\n- 列表\n- 列表\n\n    缩进的段落\n"
    )


def test_breaks_beside_the_chinese_dash_and_ellipsis_are_joined():
    text = "两种场景——\n“一个损失”和“两个损失”——\n放到 FSDP 下……\n`x` 也一样。\n"
    assert site_hooks.join_cjk_lines(text) == (
        "两种场景——“一个损失”和“两个损失”——放到 FSDP 下……`x` 也一样。\n"
    )


def test_fences_lists_and_latin_are_left_alone():
    text = "```text\n中文\n中文\n```\n中文\n1.  中文\n中文\nPyTorch 中文\n"
    assert site_hooks.join_cjk_lines(text) == (
        "```text\n中文\n中文\n```\n中文\n1.  中文中文\nPyTorch 中文\n"
    )


def test_built_chinese_pages_have_no_space_between_hanzi(built_site):
    offenders = {}
    for page in (built_site.path / "zh").rglob("index.html"):
        html = page.read_text(encoding="utf-8")
        html = re.search(r'<article class="md-content__inner.*?</article>', html, re.S).group(0)
        html = re.sub(r"<pre.*?</pre>|<script.*?</script>", "", html, flags=re.S)
        # A space between inline code and Chinese text is fine: keep code as a Latin token.
        html = re.sub(r"<code.*?</code>", "x", html, flags=re.S)
        html = re.sub(r"<[^>]+>", "\x00", html)  # a tag is a boundary, not a space
        bad = [m.group(0) for m in SPACE_BETWEEN_HANZI.finditer(html)]
        if bad:
            offenders[str(page.relative_to(built_site.path))] = bad[:5]
    assert not offenders, offenders
