"""The guide's autograd-graph figures are drawn from the graphs torch really builds.

``docs_tools/figures.py`` runs each example and renders what :func:`walk` finds; the SVGs
committed under ``docs/assets/figures/`` (``name.en.svg`` and ``name.zh.svg``: the words inside
the boxes are in the page's language) must be exactly what it produces now. The renderer itself
is checked against graphs whose nodes and saved tensors are known.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import mdfences
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docs_tools import autograd_svg, figures  # noqa: E402


def reachable(fn) -> set[int]:
    """ids of every grad_fn node reachable from fn, found independently of the renderer."""
    seen, stack, keep = set(), [fn], []
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        stack.extend(n for n, _ in node.next_functions)
    return seen


@pytest.mark.parametrize("filename", sorted(figures.build()))
def test_committed_figures_are_what_torch_builds_now(filename):
    built = figures.build()[filename]
    committed = figures.FIGURES_DIR / filename
    assert committed.exists(), f"{committed} missing: run python -m docs_tools.figures"
    assert committed.read_text(encoding="utf-8") == built, (
        f"{filename} differs from the graph torch builds now: run python -m docs_tools.figures"
    )


def test_no_stray_figures():
    on_disk = {p.name for p in figures.FIGURES_DIR.glob("graph-*.svg")}
    assert on_disk == set(figures.build())
    assert len(on_disk) == len(figures.FIGURES) * len(figures.LANGUAGES)


def texts(svg: str) -> list[str]:
    return re.findall(r"<text [^>]*>(.*?)</text>", svg)


def test_chinese_figures_have_chinese_labels_and_the_same_graph():
    built = figures.build()
    for name in figures.FIGURES:
        en, zh = built[f"{name}.en.svg"], built[f"{name}.zh.svg"]
        assert re.findall(r'data-name="(\w+)"', en) == re.findall(r'data-name="(\w+)"', zh)
        assert en.count("marker-end=") == zh.count("marker-end=")
        labels = " ".join(texts(zh))
        for english in ("saved", "freed", "no saved tensors"):
            assert english not in labels, (name, english)
        assert "font-style:italic" not in zh  # CJK has no italic
    assert "font-style:italic" in built["graph-before-backward.en.svg"]
    after = " ".join(texts(built["graph-after-backward.zh.svg"]))
    assert "○ result：已释放" in after and "未保存任何张量" in after
    before = " ".join(texts(built["graph-before-backward.zh.svg"]))
    assert "result：已保存" in before and "已释放" not in before


def test_boxes_are_wide_enough_for_chinese_text():
    assert autograd_svg.text_width("已释放") == 3 * autograd_svg.FONT
    assert autograd_svg.text_width("freed") == 5 * autograd_svg.CHAR_W
    graph = figures.after_backward()
    boxes, _, _ = autograd_svg.layout(graph, "zh")
    for box in boxes.values():
        widest = max(autograd_svg.text_width(t) for t, _ in box.lines)
        assert box.w >= widest + 2 * autograd_svg.PAD_X


def test_node_count_is_the_number_of_reachable_grad_fn_nodes():
    loss, names = figures.two_layer_net()
    graph = autograd_svg.walk(loss, names)
    assert len(graph.nodes) == len(reachable(loss.grad_fn)) == 8
    assert [n.name for n in graph.nodes][:3] == ["MeanBackward0", "PowBackward0", "SubBackward0"]
    edges = sum(1 for n in graph.nodes for _ in n.children)
    assert edges == 7  # a tree here: every node but the root has one parent
    svg = autograd_svg.render(graph, "t", "title")
    assert svg.count('<g class="node"') == 8
    assert svg.count("marker-end=") == 7


def test_shared_nodes_are_drawn_once():
    w = torch.ones(2, requires_grad=True)
    h = w.exp()
    loss = (h * h + h).sum()  # h's node is reached three times
    graph = autograd_svg.walk(loss, {id(w): "w"})
    assert len(graph.nodes) == len(reachable(loss.grad_fn))
    assert [n.name for n in graph.nodes].count("ExpBackward0") == 1
    mul = next(n for n in graph.nodes if n.name == "MulBackward0")
    assert len(mul.children) == 1  # both inputs are h: one arrow, not two


def saved(graph, name):
    return [n.saved for n in graph.nodes if n.name == name]


def test_saved_tensor_state_before_after_and_retained():
    before = figures.before_backward()
    after = figures.after_backward()
    retained = figures.after_retained_backward()
    present, freed = autograd_svg.PRESENT, autograd_svg.FREED
    assert saved(before, "ReluBackward0") == [[("result", present)]]
    assert saved(after, "ReluBackward0") == [[("result", freed)]]
    assert saved(retained, "ReluBackward0") == [[("result", present)]]
    # The first matmul's input x does not require grad, so mat2 (W1) was never saved.
    assert saved(before, "MmBackward0") == [
        [("mat2", present), ("self", present)],
        [("self", present)],
    ]
    for graph, state in [(before, present), (after, freed), (retained, present)]:
        states = {s for n in graph.nodes for _, s in n.saved}
        assert states == {state}
        assert [n.name for n in graph.nodes] == [n.name for n in before.nodes]
    leaves = [n.detail for n in before.nodes if n.name == "AccumulateGrad"]
    assert sorted(leaves) == ["W1.grad", "W2.grad"]


def test_graph_without_saved_tensors():
    graph = figures.no_saved_tensors_after_backward()
    assert all(n.saved == [] for n in graph.nodes)
    assert len(graph.nodes) == 5


def test_svg_is_self_contained_and_theme_aware():
    for name, svg in figures.build().items():
        assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>"), name
        assert "http://" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "https://" not in svg and "href" not in svg
        assert "\n\n" not in svg  # a blank line would end the raw HTML block in Markdown
        # Colours come from the theme, never fixed black or white.
        assert not re.search(r"#(?:000|fff)\b|black|white", svg, flags=re.I), name
        assert "var(--md-default-fg-color" in svg
        ids = re.findall(r'\bid="([^"]+)"', svg)
        stem = name.split(".")[0]
        assert all(i.startswith(stem) for i in ids), ids  # unique on a page with several


def figure_includes(page: Path) -> list[str]:
    return re.findall(r'^--8<-- "docs/assets/figures/([^"]+)"$', page.read_text("utf-8"), re.M)


def test_both_languages_show_the_same_figures_and_every_figure_is_shown():
    shown = set()
    for en, zh in mdfences.page_pairs(ROOT / "docs"):
        en_figures, zh_figures = figure_includes(en), figure_includes(zh)
        assert all(f.endswith(".en.svg") for f in en_figures), en
        assert all(f.endswith(".zh.svg") for f in zh_figures), zh
        assert [f.removesuffix(".en.svg") for f in en_figures] == [
            f.removesuffix(".zh.svg") for f in zh_figures
        ], en
        shown.update(en_figures + zh_figures)
    assert shown == set(figures.build())
