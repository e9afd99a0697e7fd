"""Pictures of an evaluation: labels a reader can use (constants, argument order, rounded
numbers, the user's input names) and SVG with no system package."""

import html
import re
import shutil
import xml.etree.ElementTree as ElementTree

import pytest

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
    assert nodes["vm1"].lines == ("x1", "v-1 = 2", "adjoint 5.5")
    assert nodes["vm0"].lines == ("x2", "v0 = 5", "adjoint 1.716")
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
    assert "v1 = v-1 * v0" in lines
    assert any(re.fullmatch(r"v\d = 2 \* v-1", line) for line in lines)
    assert any(re.fullmatch(r"v\d = v0 \^ 3", line) for line in lines)
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
