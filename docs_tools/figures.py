"""The autograd-graph figures of the guide, built from graphs that torch really records.

Each figure runs a small example, walks the graph it built with
:func:`docs_tools.autograd_svg.walk` and renders it. The SVGs are committed under
``docs/assets/figures/``, one per language (``name.en.svg``, ``name.zh.svg``: the words
inside the boxes are the page's), and inlined into the page of that language;
``tests/test_figures.py`` rebuilds them and fails if a committed file differs.

Regenerate after a deliberate change with ``python -m docs_tools.figures``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from docs_tools.autograd_svg import render, walk

ROOT = Path(__file__).resolve().parent.parent
FIGURES_DIR = ROOT / "docs" / "assets" / "figures"


def two_layer_net():
    """The example of the guide's first page: the same seed and shapes as its snippets."""
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    W1 = torch.randn(3, 4, requires_grad=True)
    W2 = torch.randn(4, 1, requires_grad=True)
    y = torch.randn(2, 1)
    h = (x @ W1).relu()
    loss = ((h @ W2) - y).pow(2).mean()
    return loss, {id(W1): "W1", id(W2): "W2"}


def before_backward():
    loss, names = two_layer_net()
    return walk(loss, names)


def after_backward():
    loss, names = two_layer_net()
    loss.backward()
    return walk(loss, names)


def after_retained_backward():
    loss, names = two_layer_net()
    loss.backward(retain_graph=True)
    return walk(loss, names)


def no_saved_tensors_after_backward():
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    loss = (w + b - 0.5).sum()
    loss.backward()
    return walk(loss, {id(w): "w", id(b): "b"})


FIGURES = {
    "graph-before-backward": (
        before_backward,
        {
            "en": "The graph of the two-layer example after the forward pass: "
            "every saved tensor present",
            "zh": "两层网络的例子在前向传播之后的计算图：保存的张量全部都在",
        },
    ),
    "graph-after-backward": (
        after_backward,
        {
            "en": "The same graph after backward(): every node still there, "
            "every saved tensor freed",
            "zh": "同一张图在 backward() 之后：节点都还在，保存的张量全部被释放",
        },
    ),
    "graph-retained": (
        after_retained_backward,
        {
            "en": "The same graph after backward(retain_graph=True): "
            "every saved tensor still present",
            "zh": "同一张图在 backward(retain_graph=True) 之后：保存的张量全部还在",
        },
    ),
    "graph-no-saved-tensors": (
        no_saved_tensors_after_backward,
        {
            "en": "A graph of additions, a subtraction and a sum after backward(): "
            "no saved tensors to free",
            "zh": "只有加法、减法和求和的计算图在 backward() 之后：没有保存的张量可释放",
        },
    ),
}

LANGUAGES = ("en", "zh")


def build() -> dict[str, str]:
    """File name (``name.<lang>.svg``, one per page language) -> SVG text of every figure."""
    return {
        f"{name}.{lang}.svg": render(make(), fig_id=name, title=titles[lang], lang=lang)
        for name, (make, titles) in FIGURES.items()
        for lang in LANGUAGES
    }


def main() -> None:
    FIGURES_DIR.mkdir(parents=True, exist_ok=True)
    for filename, svg in build().items():
        (FIGURES_DIR / filename).write_text(svg, encoding="utf-8")
        print("wrote", (FIGURES_DIR / filename).relative_to(ROOT))


if __name__ == "__main__":
    main()
