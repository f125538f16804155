"""Drawing EXPLAIN's query graphs (``plan.explain.QueryGraph``) as SVG, Graphviz DOT or Mermaid, with nothing
but Python: one document for all the queries of a script (SVG: one under the other; DOT and Mermaid: a
cluster or subgraph per query).

The SVG layout: a query's graph is a tree into its sink (every step feeds exactly one next step), so each step
is drawn one row above the step it feeds, sink at the bottom, and each subtree gets its own band of columns;
edges then never cross and always span one row.
"""
from __future__ import annotations

import textwrap
from xml.sax.saxutils import escape

from .explain import QueryGraph, Step

FORMATS = ("svg", "dot", "mermaid")
WRAP = 58  # characters per line in a box
CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7.0, 15, 8, 24, 34  # px, for 12px monospace text
FILL = {"source": "#e8f0fe", "step": "#f1f3f4", "shuffle": "#fff4e5", "operator": "#e6f4ea", "sink": "#fce8e6"}


def draw(graphs: list[QueryGraph], fmt: str) -> str:
    """``graphs`` as one document in ``fmt`` (one of ``FORMATS``)."""
    return {"svg": svg, "dot": dot, "mermaid": mermaid}[fmt](graphs)


def _box_lines(step: Step) -> list[str]:
    lines = textwrap.wrap(f"[{step.number}] {step.title}", WRAP)
    for line in step.lines:
        lines.extend(textwrap.wrap(line, WRAP, subsequent_indent="  ") or [""])
    return lines


# ------------------------------------------------------------------ SVG

class _Box:
    def __init__(self, step: Step):
        self.step, self.lines = step, _box_lines(step)
        self.w = max(len(line) for line in self.lines) * CHAR_W + 2 * PAD
        self.h = len(self.lines) * LINE_H + 2 * PAD
        self.x = self.y = 0.0  # top-left corner
        self.inputs: list[tuple[_Box, str]] = []


def _layout(graph: QueryGraph) -> tuple[list[_Box], float, float]:
    """Boxes placed as the module says; the drawing's width and height."""
    boxes = {s.number: _Box(s) for s in graph.steps}
    fed = {a for a, _, _ in graph.edges}
    for a, b, label in graph.edges:
        boxes[b].inputs.append((boxes[a], label))
    roots = [box for number, box in boxes.items() if number not in fed]
    depth: dict[int, int] = {}

    def set_depth(box: _Box, d: int) -> None:
        depth[box.step.number] = d
        for child, _ in box.inputs:
            set_depth(child, d + 1)

    def width(box: _Box) -> float:
        children = sum(width(c) for c, _ in box.inputs) + GAP_X * max(len(box.inputs) - 1, 0)
        return max(box.w, children)

    def place(box: _Box, left: float) -> None:
        span = width(box)
        children = sum(width(c) for c, _ in box.inputs) + GAP_X * max(len(box.inputs) - 1, 0)
        x = left + (span - children) / 2
        for child, _ in box.inputs:
            place(child, x)
            x += width(child) + GAP_X
        centre = (sum(c.x + c.w / 2 for c, _ in box.inputs) / len(box.inputs) if box.inputs else left + span / 2)
        box.x = centre - box.w / 2

    left = 0.0
    for root in roots:
        set_depth(root, 0)
        place(root, left)
        left += width(root) + GAP_X
    rows = max(depth.values()) + 1
    heights = [max(b.h for n, b in boxes.items() if depth[n] == r) for r in range(rows)]
    tops, y = {}, 0.0
    for r in reversed(range(rows)):  # the deepest row (the inputs) on top
        tops[r] = y
        y += heights[r] + GAP_Y
    for n, box in boxes.items():
        box.y = tops[depth[n]] + (heights[depth[n]] - box.h) / 2
    return list(boxes.values()), max(left - GAP_X, 0.0), y - GAP_Y


def svg(graphs: list[QueryGraph]) -> str:
    parts, y, width = [], PAD, 0.0
    for graph in graphs:
        header = [graph.name or "query", *graph.notes]
        for i, line in enumerate(header):
            weight = ' font-weight="bold"' if i == 0 else ""
            parts.append(f'<text x="{PAD}" y="{y + LINE_H * (i + 1):.0f}"{weight}>{escape(line)}</text>')
        y += LINE_H * len(header) + PAD * 2
        boxes, w, h = _layout(graph)
        width = max(width, w, max(len(line) for line in header) * CHAR_W)
        parts.append(f'<g transform="translate({PAD},{y:.0f})">')
        for box in boxes:
            for child, label in box.inputs:
                x1, y1 = child.x + child.w / 2, child.y + child.h
                x2, y2 = box.x + box.w / 2, box.y
                parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2 - 2:.1f}" stroke="#555" '
                             'marker-end="url(#arrow)"/>')
                if label:
                    parts.append(f'<text x="{(x1 + x2) / 2 + 4:.1f}" y="{(y1 + y2) / 2:.1f}" fill="#555">'
                                 f'{escape(label)}</text>')
        for box in boxes:
            parts.append(f'<g class="step {box.step.kind}"><title>{escape(box.step.title)}</title>'
                         f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6" '
                         f'fill="{FILL.get(box.step.kind, "#fff")}" stroke="#888"/>')
            for i, line in enumerate(box.lines):
                weight = ' font-weight="bold"' if i == 0 else ""
                parts.append(f'<text x="{box.x + PAD:.1f}" y="{box.y + PAD + LINE_H * (i + 1) - 4:.1f}"{weight}>'
                             f'{escape(line)}</text>')
            parts.append("</g>")
        parts.append("</g>")
        y += h + GAP_Y * 2
    total_w, total_h = width + 2 * PAD, y
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="monospace" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        '<rect width="100%" height="100%" fill="white"/>', *parts, "</svg>", ""])


# ------------------------------------------------------------------ DOT

def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(graphs: list[QueryGraph]) -> str:
    out = ["digraph streamjoin {", "  rankdir=TB;",
           '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];']
    for q, graph in enumerate(graphs):
        out.append(f"  subgraph cluster_{q} {{")
        out.append(f"    label={_dot_string(chr(10).join([graph.name or 'query', *graph.notes]))};")
        for step in graph.steps:
            label = "\\l".join(s.replace("\\", "\\\\").replace('"', '\\"') for s in _box_lines(step)) + "\\l"
            out.append(f'    q{q}_{step.number} [label="{label}", fillcolor="{FILL.get(step.kind, "#ffffff")}"];')
        for a, b, label in graph.edges:
            out.append(f"    q{q}_{a} -> q{q}_{b}" + (f" [label={_dot_string(label)}]" if label else "") + ";")
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ Mermaid

def _mermaid_text(text: str) -> str:
    """Text inside a quoted Mermaid label: its entity codes for what would end or break the label."""
    for raw, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(raw, code)
    return text


def mermaid(graphs: list[QueryGraph]) -> str:
    out = ["flowchart TD"]
    for q, graph in enumerate(graphs):
        out.append(f'  subgraph q{q}["{_mermaid_text(graph.name or "query")}"]')
        for step in graph.steps:
            title, *rest = _box_lines(step)
            label = "<br/>".join([f"<b>{_mermaid_text(title)}</b>", *map(_mermaid_text, rest)])
            out.append(f'    q{q}_{step.number}["{label}"]:::{step.kind}')
        for a, b, label in graph.edges:
            out.append(f"    q{q}_{a} -->" + (f"|{_mermaid_text(label)}|" if label else "") + f" q{q}_{b}")
        out.append("  end")
    out.extend(f"  classDef {kind} fill:{colour},stroke:#888" for kind, colour in FILL.items())
    return "\n".join(out) + "\n"
