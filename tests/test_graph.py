"""Pictures of an evaluation: labels a reader can use (constants, argument order, rounded
numbers, the user's input names) and SVG with no system package."""

import html
import re
import shutil
import xml.etree.ElementTree as ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lambdad
from conftest import PROGRAMS, missing_tool
from lambdad import cli, graph as graphs
from lambdad.errors import ToolError
from lambdad.trace import trace

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def baydin_graph():
    program = lambdad.load(PROGRAMS / "baydin.lam")
    return graphs.graph_of(trace(program, "f", (2.0, 5.0), mode="reverse"), "f at 2,5")


def labels(graph):
    return {node.id: node.lines for node in graph.nodes}


def test_nodes_show_rounded_values_and_full_precision_on_hover(baydin_graph):
    nodes = {node.id: node for node in baydin_graph.nodes}
    assert nodes["in1"].lines == ("x1", "value 2", "adjoint 5.5")
    assert nodes["in2"].lines == ("x2", "value 5", "adjoint 1.716")
    assert nodes["v2"].lines[0] == "v2 = x1 * x2"  # inputs by their names: no `v-1`
    assert nodes["v5"].lines == ("v5 = v4 - v3", "value 11.65", "adjoint 1")
    assert "value 11.652071455223084" in nodes["v5"].title
    assert "log x1 + x1 * x2 - sin x2" in nodes["v5"].title
    assert nodes["v5"].kind == "output" and nodes["v4"].kind == "operation"


def test_argument_order_is_marked_only_where_it_matters(baydin_graph):
    edges = {(e.source, e.target): e.label for e in baydin_graph.edges}
    assert edges[("v4", "v5")] == "1" and edges[("v3", "v5")] == "2"  # v5 = v4 - v3
    assert edges[("v1", "v4")] == "" and edges[("v2", "v4")] == ""  # + commutes


def test_constants_are_visible_and_inputs_keep_pattern_names():
    program = lambdad.loads("def g (u, x) = u * x - 2 * u / (x ^ 3)\n")
    graph = graphs.graph_of(trace(program, "g", (1.5, 0.25), mode="reverse"))
    lines = [node.lines[0] for node in graph.nodes]
    assert lines[:2] == ["u", "x"]  # not p.0, p.1
    assert "v1 = u * x" in lines
    assert any(re.fullmatch(r"v\d = 2 \* u", line) for line in lines)
    assert any(re.fullmatch(r"v\d = x \^ 3", line) for line in lines)
    power = next(node.id for node in graph.nodes if "^" in node.lines[0])
    assert [e.label for e in graph.edges if e.target == power] == ["1"]


def test_dot_text_is_escaped():
    program = lambdad.loads("def f (x : R) : R = x * x\n")
    graph = graphs.graph_of(trace(program, "f", 3.0, mode="reverse"), 'f at "3" \\ back')
    assert 'label="f at \\"3\\" \\\\ back"' in graph.dot()


def test_builtin_svg_is_well_formed_and_carries_every_label(baydin_graph):
    svg = graphs.to_svg_builtin(baydin_graph)
    root = ElementTree.fromstring(svg)
    texts = {t.text for t in root.iter(f"{SVG}text")}
    for node in baydin_graph.nodes:
        assert set(node.lines) <= texts
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert any("value 0.6931471805599453" in (t or "") for t in titles)
    # left to right: every edge goes from a box to a box further right
    boxes = {g.get("id"): g.find(f"{SVG}rect") for g in root.iter(f"{SVG}g")
             if g.get("class") == "node"}
    for edge in baydin_graph.edges:
        assert float(boxes[edge.source].get("x")) < float(boxes[edge.target].get("x"))


def test_the_mlp_graph_is_drawn_quickly_with_readable_text(tmp_path):
    program = lambdad.load(PROGRAMS / "mlp.lam")
    tr = trace(program, "loss", program.value_of("initial"), mode="reverse")
    svg = graphs.to_svg_builtin(graphs.graph_of(tr, "loss at initial"))
    root = ElementTree.fromstring(svg)
    assert len([g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]) > 250
    assert root.get("font-size") == "12"  # drawn at full size: scroll, never shrink
    assert "w.0[0][0]" in {html.unescape(t.text or "") for t in root.iter(f"{SVG}text")}


def test_graph_cli_writes_svg_without_graphviz(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")  # no Graphviz to be found
    out = tmp_path / "g.svg"
    assert cli.main(["graph", str(PROGRAMS / "baydin.lam"), "f", "--at", "2,5", "-o", str(out)]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"
    ElementTree.fromstring(out.read_text())


def test_png_without_graphviz_is_a_tool_error_with_a_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    out = tmp_path / "g.png"
    status = cli.main(["graph", str(PROGRAMS / "baydin.lam"), "f", "--at", "2,5", "-o", str(out)])
    assert status == ToolError.exit_code == 4
    err = capsys.readouterr().err
    assert err.startswith("tool error: Graphviz (`dot`) is not installed")
    assert "apt-get install graphviz" in err and "Traceback" not in err
    assert not out.exists()


GRAPHVIZ_HINT = ("Graphviz's `dot` is not installed; to run this test install it from the OS "
                 "packages (Debian/Ubuntu: `apt-get install graphviz`)")


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".pdf", b"%PDF-"),
                                           (".svg", b"<?xml")], ids=["png", "pdf", "svg"])
def test_graphviz_draws_the_graph(suffix, magic, tmp_path, capsys):
    if shutil.which("dot") is None:
        missing_tool(GRAPHVIZ_HINT)
    out = tmp_path / f"g{suffix}"
    status = cli.main(["graph", str(PROGRAMS / "baydin.lam"), "f", "--at", "2,5", "-o", str(out)])
    assert status == 0, capsys.readouterr().err
    data = out.read_bytes()
    assert data.startswith(magic) and len(data) > 1000
    if suffix == ".svg":  # Graphviz's layout, not lambdad's own
        root = ElementTree.fromstring(data)
        assert root.find(f"{SVG}g").get("class") == "graph"
        labels = {html.unescape(t.text or "") for t in root.iter(f"{SVG}text")}
        assert {"v5 = v4 - v3", "x1", "x2"} <= labels


def test_unknown_picture_format_is_a_usage_error(tmp_path, capsys):
    status = cli.main(["graph", str(PROGRAMS / "baydin.lam"), "f", "--at", "2,5",
                       "-o", str(tmp_path / "g.jpeg")])
    assert status == 2
    assert "unknown graph format `.jpeg`" in capsys.readouterr().err


# ---------------------------------------------------------------- constants, names, zeros

CONSTANTS = "def f (x : R) : R = x * (1 - 0) + 0 * (0 - 1) * x\n"


def test_constants_are_folded_into_the_labels_that_read_them():
    tr = trace(lambdad.loads(CONSTANTS), "f", -1.0, mode="reverse")
    graph = graphs.graph_of(tr)
    assert [node.lines[0] for node in graph.nodes] == [
        "x", "v1 = x * 1", "v2 = 0 * x", "v3 = v1 + v2"]  # numbered with no gaps
    assert {(e.source, e.target) for e in graph.edges} == {
        ("in1", "v1"), ("in1", "v2"), ("v1", "v3"), ("v2", "v3")}
    everything = graphs.graph_of(tr, constants=True)
    assert len(everything.nodes) == len(tr.rows) + 1
    assert any(node.lines[0] == "v1 = 1 - 0" and node.lines[2].startswith("adjoint")
               for node in everything.nodes)


def test_a_zero_is_printed_without_its_sign():
    tr = trace(lambdad.loads(CONSTANTS), "f", -1.0, mode="reverse")
    assert -0.0 in [row.value for row in tr.rows]  # 0 * (0 - 1) is -0 ...
    labels = [line for node in graphs.graph_of(tr, constants=True).nodes for line in node.lines]
    assert "value 0" in labels and not any("-0" in line for line in labels)  # ... shown as 0
    assert " -0 " not in str(tr) and "-0\n" not in str(tr)


def test_an_input_name_that_could_be_misread_is_replaced_by_its_position():
    program = lambdad.loads("def g (v1 : R) (y : R) : R = v1 * y\n")
    graph = graphs.graph_of(trace(program, "g", (1.0, 2.0), mode="reverse"))
    assert [node.lines[0] for node in graph.nodes] == ["x1 (v1)", "x2 (y)", "v1 = x1 * x2"]
    program = lambdad.loads("def g (v1 : R) (x1 : R) : R = v1 * x1\n")
    graph = graphs.graph_of(trace(program, "g", (1.0, 2.0), mode="reverse"))
    assert [node.lines[0] for node in graph.nodes] == ["in1 (v1)", "in2 (x1)", "v1 = in1 * in2"]


def test_the_cli_draws_constants_when_asked(tmp_path, capsys):
    source = tmp_path / "constants.lam"
    source.write_text(CONSTANTS)
    assert cli.main(["graph", str(source), "f", "--at", "-1"]) == 0
    folded = capsys.readouterr().out
    assert cli.main(["graph", str(source), "f", "--at", "-1", "--constants"]) == 0
    drawn = capsys.readouterr().out
    assert 'label="v1 = x * 1\\n' in folded and 'label="v1 = 1 - 0\\n' in drawn


# ---------------------------------------------------------------- every edge in the picture

Q = "def q (x : R) (y : R) : R = x ^ 2 * y + 3 * x * y ^ 2 - y\n"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def drawn_extent(svg):
    """The viewBox (width, height), the title's height, and every point of every path,
    rectangle corner and text anchor, in the picture's coordinates."""
    root = ElementTree.fromstring(svg)
    _, _, width, height = map(float, root.get("viewBox").split())
    shift = 0.0
    points = []
    for group in root.iter(f"{SVG}g"):
        match = re.fullmatch(r"translate\(0,([\d.]+)\)", group.get("transform") or "")
        if match:
            shift = float(match.group(1))
            drawing = group
    for path in drawing.iter(f"{SVG}path"):
        numbers = [float(n) for n in NUMBER.findall(path.get("d"))]
        points += [(x, y + shift) for x, y in zip(numbers[::2], numbers[1::2])]
    for rect in drawing.iter(f"{SVG}rect"):
        x, y, w, h = (float(rect.get(a)) for a in ("x", "y", "width", "height"))
        points += [(x, y + shift), (x + w, y + h + shift)]
    for text in drawing.iter(f"{SVG}text"):
        points.append((float(text.get("x")), float(text.get("y")) + shift))
    return width, height, shift, points


def assert_inside(svg):
    width, height, title, points = drawn_extent(svg)
    assert points
    for x, y in points:
        assert 0 <= x <= width and title <= y <= height, (x, y, width, height, title)


def test_every_edge_of_q_is_inside_the_picture_and_below_the_title():
    graph = graphs.graph_of(trace(lambdad.loads(Q), "q", (1.0, 2.0), mode="reverse"), "q at 1,2")
    assert_inside(graphs.to_svg_builtin(graph))


@st.composite
def dags(draw):
    """Graphs shaped as traces make them: some inputs, then operations reading one to
    three earlier nodes (a node may be read twice), labels of random widths."""
    inputs = draw(st.integers(1, 4))
    count = draw(st.integers(0, 14))
    ids = [f"in{i + 1}" for i in range(inputs)] + [f"v{i + 1}" for i in range(count)]
    text = st.text("abcxyz0123456789 .*+-", min_size=1, max_size=24)
    nodes, edges, read = [], [], set()
    for position, node_id in enumerate(ids):
        if position >= inputs:
            for _ in range(draw(st.integers(1, 3))):
                source = ids[draw(st.integers(0, position - 1))]
                edges.append(graphs.Edge(source, node_id, draw(st.sampled_from(["", "1", "2"]))))
                read.add(source)
        lines = tuple(draw(st.lists(text, min_size=1, max_size=3)))
        nodes.append((node_id, lines, position < inputs))
    title = draw(st.sampled_from(["", "f at 1,2", "a much longer title than any box"]))
    return graphs.Graph(title, tuple(
        graphs.Node(node_id, lines, "", "input" if is_input else
                    "operation" if node_id in read else "output", node_id)
        for node_id, lines, is_input in nodes), tuple(edges))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_the_layout_keeps_every_edge_inside_the_picture(graph):
    assert_inside(graphs.to_svg_builtin(graph))
