"""Pictures of one evaluation: the computational graph of a trace, as DOT text or SVG.

A :class:`Graph` has one node per input real and one per primitive evaluation (a trace
row), and an edge from each operand's node to the operation that read it.  Labels are for
reading: every operand is written out (``v2 = 2 * x``, so a constant operand is visible
even though it has no node), inputs are called by the names the user wrote (``x``,
``w.1[2]``) and operations ``v1``, ``v2``, … (no minus sign in a name, so ``v1 = x * 0.5``
cannot read as a subtraction), edges into an operation whose argument order matters
(``-``, ``/``, ``^``; every primitive not marked ``commutative`` in the table) carry the
argument's position, numbers are rounded to four significant digits (a zero's sign
dropped), with full precision in the hover text (SVG ``<title>``, DOT ``tooltip``).

An operation that reads no input, directly or not (``1 - 0``), is a constant: by default
it gets no box of its own (it carries no derivative worth reading) and its value is
written into the labels of the operations that read it; ``constants=True`` draws it.

SVG is drawn without any system package: the layered (Sugiyama) layout of ``grandalf``, a
pure-Python library, places the nodes; this module writes the SVG.  When Graphviz's ``dot``
is installed it draws instead (its spline routing is better); PNG and PDF need it.
"""

from __future__ import annotations

import html
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs

from .errors import FileAccessError, ToolError, UsageError
from .primitives import PRIMITIVES
from .arraylib import ARRAY
from .values import array_summary, format_real

GRAPHVIZ_HINT = ("install Graphviz (Debian/Ubuntu: `apt-get install graphviz`, macOS: "
                 "`brew install graphviz`), or write .svg or .dot, which need no Graphviz")


@attrs.frozen
class Node:
    """One box: ``lines`` are its label, ``title`` the hover text (full precision),
    ``name`` what the other labels call it (``x``, ``v3``)."""

    id: str
    lines: tuple[str, ...]
    title: str
    kind: str  # "input", "operation" or "output"
    name: str = ""


@attrs.frozen
class Edge:
    """From an operand's node to the operation that read it; ``label`` is the argument's
    position ("1", "2") where the order matters, else empty."""

    source: str
    target: str
    label: str = ""


@attrs.frozen
class Graph:
    """The computational graph of one evaluation.  In a notebook it shows as SVG."""

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def dot(self) -> str:
        """Graphviz DOT text."""
        return to_dot(self)

    def svg(self) -> str:
        """SVG text, through Graphviz when it is installed, else the built-in layout."""
        return to_svg(self)

    def _repr_svg_(self) -> str:
        return self.svg()

    def text(self) -> str:
        """A terminal's view: one line per node with the nodes it reads."""
        reads: dict[str, list[str]] = {}
        names = self.names()
        for edge in self.edges:
            source = names[edge.source]
            reads.setdefault(edge.target, []).append(
                f"{source} ({edge.label})" if edge.label else source)
        lines = [self.title] if self.title else []
        for node in self.nodes:
            line = "  ".join(node.lines)
            if node.id in reads:
                line += "   <- " + ", ".join(reads[node.id])
            lines.append(line)
        return "\n".join(lines)

    def names(self) -> dict[str, str]:
        """What the labels call each node, by node id."""
        return {node.id: node.name or node.id for node in self.nodes}

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def __str__(self) -> str:
        return self.dot()


# ------------------------------------------------------------------ labels


def rounded(x: Any) -> str:
    """``x`` to four significant digits for a label (integral values as integers; a zero
    is ``0`` whatever its sign, which in a picture is noise: ``0 * (0 - 1)`` is ``-0``);
    an array as its shape and a summary (``Vec[3] [0.5, -0.25, 1]``)."""
    if type(x) is ARRAY:
        return array_summary(x, rounded)
    if isinstance(x, float) and x == 0.0:
        return "0"
    if isinstance(x, float) and math.isfinite(x) and not (x.is_integer() and abs(x) < 1e6):
        return f"{x:.4g}"
    return format_real(x) if isinstance(x, float) else str(x)


_OPERATION_NAME = re.compile(r"v\d+")


def input_names(tr: "Trace") -> list[str]:
    """What the labels call the inputs: the names the user wrote (``x``, ``w.1[2]``), or
    ``x1``, ``x2``, … by position when those are not distinct or look like an
    operation's ``v3`` (``in1``, ``in2``, … if the user's names include ``x1``, …)."""
    names = [name for name, _ in tr.inputs]
    if len(set(names)) == len(names) and all(name and not _OPERATION_NAME.fullmatch(name)
                                             for name in names):
        return names
    for prefix in ("x", "in", "input_"):
        positional = [f"{prefix}{position + 1}" for position in range(len(names))]
        if not set(positional) & set(names):
            break
    return positional


def constant_rows(tr: "Trace") -> set[int]:
    """The indices of the rows that read no input, directly or through other rows."""
    constant: set[int] = set()
    for row in tr.rows:  # a row comes after the rows it reads (rows are by level)
        if all(parent in constant for parent in row.parents):
            constant.add(row.index)
    return constant


def exact(x: Any) -> str:
    """``x`` in full precision for hover text (an array: its shape and a summary)."""
    return array_summary(x) if type(x) is ARRAY else format_real(x)


def _operand_text(row: Any, position: int, names: dict[int, str]) -> str:
    producer = row.operands[position] if position < len(row.operands) else None
    if producer in names:
        return names[producer]
    value = row.args[position]
    if type(value) is ARRAY:
        return f"({rounded(value)})"
    text = rounded(value) if isinstance(value, float) else str(value)
    return f"({text})" if text.startswith("-") else text


def operation_text(row: Any, names: dict[int, str]) -> str:
    """The row's operation with its operands written out: ``v4 - v3``, ``2 * x``,
    ``sin v1``.  ``names`` maps the row indices of the operands' producers to what the
    labels call them; an operand whose producer has no name is written as its value."""
    spelling = PRIMITIVES[row.primitive].spelling if row.primitive else None
    operands = [_operand_text(row, i, names) for i in range(len(row.args))]
    if spelling is not None and spelling.fixity == "infix" and len(operands) == 2:
        return f"{operands[0]} {spelling.symbol} {operands[1]}"
    if spelling is not None and spelling.fixity == "prefix":
        return spelling.symbol + " ".join(operands)
    return " ".join([row.symbol, *operands])


def graph_of(tr: "Trace", title: str = "", constants: bool = False) -> Graph:
    """The computational graph of the trace ``tr`` (a :class:`lambdad.trace.Trace`, which
    this module reads without importing), labelled with primal values and the tangents
    (forward trace) or adjoints (reverse trace).  Constant operations (see
    :func:`constant_rows`) read by another operation are folded into its label unless
    ``constants`` is true."""
    derivative_name = "adjoint" if tr.mode == "reverse" else "tangent"
    n = len(tr.inputs)
    nodes: list[Node] = []
    edges: list[Edge] = []

    def derivative_lines(values: Any, full: bool) -> list[str]:
        values = tuple(values)
        if not values:
            return []
        show = exact if full else rounded
        return [f"{derivative_name} " + ", ".join(show(d) for d in values)]

    used = {parent for row in tr.rows for parent in row.parents}
    folded = set() if constants else constant_rows(tr) & used
    # names by row index (inputs are -(n-1) .. 0); node ids avoid DOT's forbidden minus
    names: dict[int, str] = {}
    ids: dict[int, str] = {}
    for position, name in enumerate(input_names(tr)):
        names[position - n + 1] = name
        ids[position - n + 1] = f"in{position + 1}"
    shown = [row for row in tr.rows if row.index not in folded]
    for number, row in enumerate(shown, 1):
        names[row.index] = ids[row.index] = f"v{number}"

    for position, (name, value) in enumerate(tr.inputs):
        index = position - n + 1
        derivs = tr.input_derivatives[position] if tr.input_derivatives else ()
        first = names[index] if names[index] == name else f"{names[index]} ({name})"
        nodes.append(Node(ids[index],
                          (first, f"value {rounded(value)}", *derivative_lines(derivs, False)),
                          "\n".join([f"input {name}", f"value {exact(value)}",
                                      *derivative_lines(derivs, True)]),
                          "input", names[index]))
    for row in shown:
        source = tr.source_excerpt(row.span)
        where = f" ({row.span.line}:{row.span.col})" if row.span is not None and row.span.line \
            else ""
        kind = "operation" if row.index in used else "output"
        operation = operation_text(row, names)
        nodes.append(Node(ids[row.index],
                          (f"{names[row.index]} = {operation}", f"value {rounded(row.value)}",
                           *derivative_lines(row.derivatives, False)),
                          "\n".join([f"{source}{where}".strip() or operation,
                                      f"value {exact(row.value)}",
                                      *derivative_lines(row.derivatives, True)]),
                          kind, names[row.index]))
        ordered = row.primitive and not PRIMITIVES[row.primitive].commutative
        producers = [(position, p) for position, p in enumerate(row.operands)
                     if p is not None and p in ids]
        for position, producer in producers:
            label = str(position + 1) if ordered and len(row.args) > 1 else ""
            edges.append(Edge(ids[producer], ids[row.index], label))
    return Graph(title, tuple(nodes), tuple(edges))


# ------------------------------------------------------------------ DOT


def _dot_string(text: str) -> str:
    """A DOT double-quoted string holding ``text`` (newlines as centred line breaks)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


_DOT_STYLE = {
    "input": 'style="rounded,filled", fillcolor="#e3f0fb"',
    "operation": 'style=filled, fillcolor="#ffffff"',
    "output": 'style="filled,bold", fillcolor="#fff4d6"',
}


def to_dot(graph: Graph) -> str:
    """The graph in Graphviz DOT, left to right."""
    lines = ["digraph lambdad {", "  rankdir=LR;",
             '  node [shape=box, fontname="Helvetica", fontsize=12];',
             # argument positions, as large as the labels and bold, beside the arrowhead
             '  edge [fontname="Helvetica-Bold", fontsize=12, labelfontsize=12, '
             'labelfontcolor="#b03000", labeldistance=1.6, labelangle=35];']
    if graph.title:
        lines.append(f"  label={_dot_string(graph.title)}; labelloc=t; "
                     'fontname="Helvetica-Bold"; fontsize=14;')
    for node in graph.nodes:
        lines.append(f"  {node.id} [label={_dot_string(chr(10).join(node.lines))}, "
                     f"tooltip={_dot_string(node.title)}, {_DOT_STYLE[node.kind]}];")
    for edge in graph.edges:
        label = f" [headlabel={_dot_string(edge.label)}]" if edge.label else ""
        lines.append(f"  {edge.source} -> {edge.target}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ SVG

FONT_SIZE = 12
CHAR_WIDTH = 7.3  # of the monospace font at FONT_SIZE, generously
LINE_HEIGHT = 16
PADDING = 8
LAYER_GAP = 56  # between columns: room for the arrows and their position labels
NODE_GAP = 14  # between boxes of one column
MARGIN = 16

_SVG_FILL = {"input": "#e3f0fb", "operation": "#ffffff", "output": "#fff4d6"}


def _box_size(node: Node) -> tuple[float, float]:
    width = max(len(line) for line in node.lines) * CHAR_WIDTH + 2 * PADDING
    height = len(node.lines) * LINE_HEIGHT + 2 * PADDING - 4
    return width, height


class _View:
    """What grandalf reads and writes for a vertex or an edge."""

    def __init__(self, w: float = 0.0, h: float = 0.0):
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)
        self.points: list[tuple[float, float]] = []

    def setpath(self, points: list[tuple[float, float]]) -> None:
        self.points = [tuple(p) for p in points]


def layout(graph: Graph) -> tuple[dict[str, tuple[float, float, float, float]],
                                  list[list[tuple[float, float]]]]:
    """Box centres and sizes ``{id: (x, y, w, h)}`` and one polyline per edge (in
    ``graph.edges`` order), left to right: columns are the layers of a Sugiyama layout.

    grandalf lays layers out top to bottom; it is given boxes turned a quarter (width and
    height swapped) and the result is transposed."""
    from grandalf.graphs import Edge as LayoutEdge, Graph as LayoutGraph, Vertex
    from grandalf.layouts import SugiyamaLayout

    vertices = {}
    for node in graph.nodes:
        width, height = _box_size(node)
        vertex = Vertex(node.id)
        vertex.view = _View(height, width)
        vertices[node.id] = vertex
    # One layout edge per connected pair (an operand used twice is drawn twice, laid once).
    layout_edges = {}
    for edge in graph.edges:
        key = (edge.source, edge.target)
        if key not in layout_edges:
            layout_edge = LayoutEdge(vertices[edge.source], vertices[edge.target])
            layout_edge.view = _View()
            layout_edges[key] = layout_edge
    whole = LayoutGraph(list(vertices.values()), list(layout_edges.values()))
    left = 0.0
    boxes: dict[str, tuple[float, float, float, float]] = {}
    paths: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for component in whole.C:  # side by side, top-aligned
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = NODE_GAP, LAYER_GAP
        roots = [v for v in component.sV if not v.e_in()]
        sugiyama.init_all(roots=roots, inverted_edges=[])
        sugiyama.draw(3)
        members = list(component.sV)
        # The component's extent: its boxes, and its edges' routes, which may pass outside
        # them (an edge across several layers bends around the boxes between).
        routes = [point for e in component.sE for point in e.view.points]
        low = min([v.view.xy[0] - v.view.w / 2 for v in members]
                  + [gx for gx, _ in routes])
        top = min([v.view.xy[1] - v.view.h / 2 for v in members]
                  + [gy for _, gy in routes])
        high = max([v.view.xy[0] + v.view.w / 2 for v in members]
                   + [gx for gx, _ in routes])
        # transposed: grandalf's layer axis (y) is our x
        for v in members:
            gx, gy = v.view.xy
            boxes[v.data] = (gy - top + MARGIN, gx - low + left + MARGIN, v.view.h, v.view.w)
        for layout_edge in component.sE:
            key = (layout_edge.v[0].data, layout_edge.v[1].data)
            paths[key] = [(gy - top + MARGIN, gx - low + left + MARGIN)
                          for gx, gy in layout_edge.view.points]
        left += high - low + NODE_GAP
    # Edges end at ports spread down the target's left side in argument order, so that
    # "1" is above "2" and neither arrow hides the other.
    incoming: dict[str, list[int]] = {}
    for number, edge in enumerate(graph.edges):
        incoming.setdefault(edge.target, []).append(number)
    port: dict[int, float] = {}
    for target, numbers in incoming.items():
        _, ty, _, th = boxes[target]
        for rank, number in enumerate(numbers):
            port[number] = ty - th / 2 + (rank + 1) * th / (len(numbers) + 1)
    polylines = []
    for number, edge in enumerate(graph.edges):
        points = list(paths.get((edge.source, edge.target), []))
        if len(points) < 2:
            sx, sy, _, _ = boxes[edge.source]
            tx, ty, _, _ = boxes[edge.target]
            points = [(sx, sy), (tx, ty)]
        # from the right side of the source box to the left side of the target box
        sx, sy, sw, _ = boxes[edge.source]
        tx, ty, tw, _ = boxes[edge.target]
        points[0] = (sx + sw / 2, sy)
        points[-1] = (tx - tw / 2, port[number])
        polylines.append(points)
    return boxes, polylines


def _path_data(points: list[tuple[float, float]]) -> str:
    """An SVG path through ``points``: horizontal-tangent cubic curves between them."""
    parts = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        middle = (x0 + x1) / 2
        parts.append(f"C{middle:.1f},{y0:.1f} {middle:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
    return " ".join(parts)


def to_svg_builtin(graph: Graph) -> str:
    """The graph as a standalone SVG document, laid out by grandalf, drawn here."""
    boxes, polylines = layout(graph)
    title_height = LINE_HEIGHT + 8 if graph.title else 0
    # Everything drawn lies within the boxes and the edges' points (a curve between two
    # points stays in their rectangle), so the picture holds every edge.
    width = max([x + w / 2 for x, _, w, _ in boxes.values()]
                + [x for points in polylines for x, _ in points], default=0.0) + MARGIN
    height = max([y + h / 2 for _, y, _, h in boxes.values()]
                 + [y for points in polylines for _, y in points], default=0.0) + MARGIN
    width = max(width, len(graph.title) * CHAR_WIDTH + 2 * MARGIN)
    total_height = height + title_height
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{total_height:.0f}" viewBox="0 0 {width:.0f} {total_height:.0f}" '
           f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
           f'font-size="{FONT_SIZE}" class="lambdad-graph">',
           "<defs><marker id=\"lambdad-arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
           "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">"
           "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker></defs>",
           '<rect width="100%" height="100%" fill="white"/>']
    if graph.title:
        out.append(f'<text x="{width / 2:.1f}" y="{LINE_HEIGHT + 2}" text-anchor="middle" '
                   f'font-weight="bold">{html.escape(graph.title)}</text>')
    out.append(f'<g transform="translate(0,{title_height})">')
    names = graph.names()
    for edge, points in zip(graph.edges, polylines):
        out.append(f'<g class="edge"><title>{html.escape(names[edge.source])} → '
                   f'{html.escape(names[edge.target])}</title>'
                   f'<path d="{_path_data(points)}" fill="none" stroke="#555" '
                   f'stroke-width="1.2" marker-end="url(#lambdad-arrow)"/>')
        if edge.label:
            x, y = points[-1]
            out.append(f'<text x="{x - 5:.1f}" y="{y - 4:.1f}" text-anchor="end" '
                       f'font-size="{FONT_SIZE}" font-weight="bold" fill="#b03000">'
                       f'{html.escape(edge.label)}</text>')
        out.append("</g>")
    for node in graph.nodes:
        x, y, w, h = boxes[node.id]
        radius = 10 if node.kind == "input" else 2
        stroke = 2 if node.kind == "output" else 1
        out.append(f'<g class="node" id="{node.id}"><title>{html.escape(node.title)}</title>'
                   f'<rect x="{x - w / 2:.1f}" y="{y - h / 2:.1f}" width="{w:.1f}" '
                   f'height="{h:.1f}" rx="{radius}" fill="{_SVG_FILL[node.kind]}" '
                   f'stroke="#333" stroke-width="{stroke}"/>')
        first = y - h / 2 + PADDING + FONT_SIZE - 1
        for number, line in enumerate(node.lines):
            weight = ' font-weight="bold"' if number == 0 else ""
            out.append(f'<text x="{x:.1f}" y="{first + number * LINE_HEIGHT:.1f}" '
                       f'text-anchor="middle"{weight}>{html.escape(line)}</text>')
        out.append("</g>")
    out.append("</g></svg>")
    return "\n".join(out) + "\n"


def _graphviz(dot: str, fmt: str) -> bytes:
    """Graphviz's rendering of ``dot`` in ``fmt``.  Raises ToolError if it is missing or
    fails."""
    program = shutil.which("dot")
    if program is None:
        raise ToolError(f"Graphviz (`dot`) is not installed, so .{fmt} cannot be made; "
                        + GRAPHVIZ_HINT)
    result = subprocess.run([program, f"-T{fmt}"], input=dot.encode(), capture_output=True)
    if result.returncode != 0:
        raise ToolError(f"Graphviz failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def to_svg(graph: Graph, engine: str = "auto") -> str:
    """SVG text.  ``engine``: ``"graphviz"``, ``"builtin"`` or ``"auto"`` (Graphviz when
    installed).  Raises ToolError if Graphviz is asked for and missing."""
    if engine == "graphviz" or (engine == "auto" and shutil.which("dot")):
        return _graphviz(to_dot(graph), "svg").decode()
    return to_svg_builtin(graph)


FORMATS = (".dot", ".gv", ".svg", ".png", ".pdf")


def write_graph(graph: Graph, output: str) -> str:
    """Writes ``graph`` to ``output`` by its suffix: ``.dot``/``.gv`` text, ``.svg`` (Graphviz
    if installed, else the built-in layout), ``.png``/``.pdf`` (Graphviz).  Returns a note
    for the user.  Raises UsageError for an unknown suffix, ToolError if Graphviz is needed
    and missing."""
    path = Path(output)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"unknown graph format `{suffix or output}`; use "
                         + ", ".join(FORMATS))
    if suffix in (".dot", ".gv"):
        data = to_dot(graph).encode()
    elif suffix == ".svg":
        data = to_svg(graph).encode()
    else:
        data = _graphviz(to_dot(graph), suffix[1:])
    try:
        path.write_bytes(data)
    except OSError as error:
        raise FileAccessError(f"cannot write {output}: {error.strerror}") from None
    return f"wrote {path}"
