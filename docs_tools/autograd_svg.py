"""Draw the autograd graph that torch really built, as an SVG that needs nothing from any host.

:func:`walk` follows ``grad_fn.next_functions`` from an output and records every node it
reaches, with the state of each tensor the node saved for the backward pass: ``present``,
or ``freed`` when reading its ``_saved_*`` attribute raises (what ``backward()`` leaves
behind). :func:`render` lays the graph out in layers (the output at the top, the leaf
tensors' ``AccumulateGrad`` nodes at the bottom) and draws boxes and arrows. Colours come
from Material's CSS variables (with ``currentColor`` as the fallback), so the figure reads
the same in the light and the dark theme when it is inlined into a page.

Pure Python and standard library only; torch is imported by the caller, not here.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from html import escape

PRESENT = "present"
FREED = "freed"

# The words inside the boxes, in the language of the page that shows the figure.
LABELS = {
    "en": {PRESENT: "saved", FREED: "freed", "none": "no saved tensors", "colon": ": "},
    "zh": {PRESENT: "已保存", FREED: "已释放", "none": "未保存任何张量", "colon": "："},
}


@dataclass
class Node:
    index: int
    name: str  # the node's class, e.g. "MulBackward0"
    detail: str = ""  # e.g. "W1.grad" for the AccumulateGrad node of leaf W1
    saved: list[tuple[str, str]] = field(default_factory=list)  # (name, PRESENT | FREED)
    children: list[int] = field(default_factory=list)  # indices, in next_functions order


@dataclass
class Graph:
    nodes: list[Node]

    @property
    def edges(self) -> list[tuple[int, int]]:
        return [(n.index, c) for n in self.nodes for c in n.children]


def saved_state(fn) -> list[tuple[str, str]]:
    """The tensors ``fn`` saved for backward and whether each is still there.

    Every saved *tensor* has a ``_raw_saved_<name>`` attribute beside ``_saved_<name>``
    (saved sizes, scalars and flags have only the latter, and backward never frees them).
    Reading ``_saved_<name>`` returns the tensor, ``None`` when the node never needed it,
    or raises ``RuntimeError`` once backward has freed it.
    """
    state = []
    for attr in sorted(dir(fn)):
        if not attr.startswith("_raw_saved_"):
            continue
        name = attr[len("_raw_saved_") :]
        try:
            value = getattr(fn, "_saved_" + name)
        except RuntimeError:
            state.append((name, FREED))
            continue
        if value is None or (isinstance(value, (list, tuple)) and not value):
            continue  # not saved at all: no input of this node needed it
        state.append((name, PRESENT))
    return state


def walk(output, leaf_names: dict | None = None) -> Graph:
    """Every node reachable from ``output.grad_fn`` (or from a node), breadth first.

    ``leaf_names`` maps ``id(tensor)`` of leaf tensors to the name to show on their
    ``AccumulateGrad`` node.
    """
    leaf_names = leaf_names or {}
    root = getattr(output, "grad_fn", output)
    if root is None:
        raise ValueError("the tensor has no grad_fn: nothing recorded a graph for it")
    order = [root]  # keeps every node object alive while ids are compared
    index = {id(root): 0}
    nodes: list[Node] = []
    i = 0
    while i < len(order):
        fn = order[i]
        children = []
        for next_fn, _ in fn.next_functions:
            if next_fn is None:
                continue  # an input that does not require grad
            if id(next_fn) not in index:
                index[id(next_fn)] = len(order)
                order.append(next_fn)
            if index[id(next_fn)] not in children:
                children.append(index[id(next_fn)])
        detail = ""
        variable = getattr(fn, "variable", None)
        if variable is not None and id(variable) in leaf_names:
            detail = f"{leaf_names[id(variable)]}.grad"
        nodes.append(Node(i, type(fn).__name__, detail, saved_state(fn), children))
        i += 1
    return Graph(nodes)


# --- Layout --------------------------------------------------------------------------

FONT = 13.0  # px
CHAR_W = FONT * 0.62  # a generous estimate for monospace fonts
LINE_H = FONT * 1.45
PAD_X, PAD_Y = 10.0, 7.0
GAP_X, GAP_Y = 22.0, 38.0
MARGIN = 8.0


def node_lines(node: Node, lang: str = "en") -> list[tuple[str, str]]:
    """(text, kind) lines of a box; kind picks the style."""
    words = LABELS[lang]
    lines = [(node.name, "name")]
    if node.detail:
        lines.append((f"→ {node.detail}", "detail"))
    if node.saved:
        for name, state in node.saved:
            mark = "●" if state == PRESENT else "○"
            lines.append((f"{mark} {name}{words['colon']}{words[state]}", state))
    elif node.name != "AccumulateGrad":
        lines.append((words["none"], "none"))
    return lines


def text_width(text: str) -> float:
    """Estimated width in px: a wide (CJK) character takes a full em, others CHAR_W."""
    return sum(FONT if unicodedata.east_asian_width(c) in "WF" else CHAR_W for c in text)


def layers(graph: Graph) -> list[list[int]]:
    """Longest-path layering from the root, then one barycentre pass against crossings."""
    depth = [0] * len(graph.nodes)
    changed = True
    while changed:  # the graph is a DAG: this settles in at most len(nodes) rounds
        changed = False
        for a, b in graph.edges:
            if depth[b] < depth[a] + 1:
                depth[b] = depth[a] + 1
                changed = True
    result: list[list[int]] = [[] for _ in range(max(depth) + 1)]
    for n in graph.nodes:
        result[depth[n.index]].append(n.index)
    parents: dict[int, list[int]] = {n.index: [] for n in graph.nodes}
    for a, b in graph.edges:
        parents[b].append(a)
    for k in range(1, len(result)):
        above = {n: p for p, n in enumerate(result[k - 1])}

        def centre(n, above=above):
            ps = [above[p] for p in parents[n] if p in above]
            return sum(ps) / len(ps) if ps else float("inf")

        result[k].sort(key=lambda n: (centre(n), n))
    return result


@dataclass
class Box:
    x: float
    y: float
    w: float
    h: float
    lines: list[tuple[str, str]]


def layout(graph: Graph, lang: str = "en") -> tuple[dict[int, Box], float, float]:
    boxes: dict[int, Box] = {}
    rows = layers(graph)
    sizes = {}
    for n in graph.nodes:
        lines = node_lines(n, lang)
        w = max(text_width(t) for t, _ in lines) + 2 * PAD_X
        h = len(lines) * LINE_H + 2 * PAD_Y
        sizes[n.index] = (w, h, lines)
    row_widths = [sum(sizes[i][0] for i in row) + GAP_X * (len(row) - 1) for row in rows]
    width = max(row_widths) + 2 * MARGIN
    y = MARGIN
    for row, row_w in zip(rows, row_widths, strict=True):
        x = (width - row_w) / 2
        row_h = max(sizes[i][1] for i in row)
        for i in row:
            w, h, lines = sizes[i]
            boxes[i] = Box(x, y, w, h, lines)
            x += w + GAP_X
        y += row_h + GAP_Y
    height = y - GAP_Y + MARGIN
    return boxes, width, height


# --- Drawing -------------------------------------------------------------------------

FG = "var(--md-default-fg-color, currentColor)"
FG_LIGHT = "var(--md-default-fg-color--light, currentColor)"
FG_LIGHTER = "var(--md-default-fg-color--lighter, currentColor)"
BG = "var(--md-code-bg-color, transparent)"
ACCENT = "var(--md-accent-fg-color, currentColor)"
MONO = "var(--md-code-font-family, monospace)"

TEXT_STYLE = {
    "name": f"fill:{FG};font-weight:bold",
    "detail": f"fill:{FG_LIGHT}",
    PRESENT: f"fill:{FG}",
    FREED: f"fill:{FG_LIGHT};text-decoration:line-through",
    "none": f"fill:{FG_LIGHT};font-style:italic",
}


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def render(graph: Graph, fig_id: str, title: str, lang: str = "en") -> str:
    """The graph as an inline SVG element (no XML prolog, no external references).

    ``lang`` picks the words inside the boxes (:data:`LABELS`); Chinese text is never italic.
    """
    boxes, width, height = layout(graph, lang)
    arrow = f"{fig_id}-arrow"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="autograd-graph" id="{fig_id}" '
        f'viewBox="0 0 {_f(width)} {_f(height)}" width="{_f(width)}" '
        f'role="img" aria-labelledby="{fig_id}-title" '
        f'style="max-width:100%;height:auto;font-family:{MONO};font-size:{_f(FONT)}px">',
        f'<title id="{fig_id}-title">{escape(title)}</title>',
        f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" '
        f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" style="fill:{FG_LIGHT}"/></marker></defs>',
    ]
    for a, b in graph.edges:
        s, t = boxes[a], boxes[b]
        x1, y1 = s.x + s.w / 2, s.y + s.h
        x2, y2 = t.x + t.w / 2, t.y
        my = (y1 + y2) / 2
        out.append(
            f'<path d="M{_f(x1)},{_f(y1)} C{_f(x1)},{_f(my)} {_f(x2)},{_f(my)} '
            f'{_f(x2)},{_f(y2 - 1)}" style="fill:none;stroke:{FG_LIGHT};stroke-width:1.3" '
            f'marker-end="url(#{arrow})"/>'
        )
    for i in sorted(boxes):
        box = boxes[i]
        freed = any(kind == FREED for _, kind in box.lines)
        dash = ";stroke-dasharray:5 3" if freed else ""
        out.append(
            f'<g class="node" data-name="{escape(graph.nodes[i].name)}">'
            f'<rect x="{_f(box.x)}" y="{_f(box.y)}" width="{_f(box.w)}" height="{_f(box.h)}" '
            f'rx="5" style="fill:{BG};stroke:{FG_LIGHTER if freed else FG};'
            f'stroke-width:1.2{dash}"/>'
        )
        for k, (text, kind) in enumerate(box.lines):
            ty = box.y + PAD_Y + LINE_H * (k + 0.75)
            style = TEXT_STYLE[kind]
            if lang != "en":
                style = style.replace(";font-style:italic", "")
            if kind == PRESENT:
                mark, rest = text.split(" ", 1)
                out.append(
                    f'<text x="{_f(box.x + PAD_X)}" y="{_f(ty)}" data-kind="{kind}" '
                    f'style="{style}"><tspan style="fill:{ACCENT}">{escape(mark)}</tspan> '
                    f"{escape(rest)}</text>"
                )
            else:
                out.append(
                    f'<text x="{_f(box.x + PAD_X)}" y="{_f(ty)}" data-kind="{kind}" '
                    f'style="{style}">{escape(text)}</text>'
                )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
