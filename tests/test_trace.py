"""Trace tables and graphs: Baydin et al.'s Figures 2 (forward) and 3 (reverse) for their
running example at (2, 5)."""

import math

import pytest

import lambdad
from conftest import PROGRAMS
from lambdad.trace import format_trace, trace


@pytest.fixture(scope="module")
def baydin():
    return lambdad.load(PROGRAMS / "baydin.lam")


def test_forward_trace_is_baydin_figure_2(baydin):
    tr = trace(baydin, "f", (2.0, 5.0), mode="forward")
    assert [name for name, _ in tr.inputs] == ["x1", "x2"]
    symbols = [row.symbol for row in tr.rows]
    assert symbols == ["log", "*", "sin", "+", "-"]
    values = [row.value for row in tr.rows]
    expected = [math.log(2), 10.0, math.sin(5), math.log(2) + 10, math.log(2) + 10 - math.sin(5)]
    assert values == pytest.approx(expected, rel=1e-15)
    tangents_x1 = [row.derivatives[0] for row in tr.rows]
    assert tangents_x1 == pytest.approx([0.5, 5.0, 0.0, 5.5, 5.5])
    tangents_x2 = [row.derivatives[1] for row in tr.rows]
    assert tangents_x2 == pytest.approx([0.0, 2.0, math.cos(5), 2.0, 2.0 - math.cos(5)])
    # v4 = v1 + v2 and v5 = v4 - v3, as in the figure
    assert tr.rows[3].parents == (1, 2)
    assert tr.rows[4].parents == (4, 3)


def test_reverse_trace_is_baydin_figure_3(baydin):
    tr = trace(baydin, "f", (2.0, 5.0), mode="reverse")
    adjoints = {row.index: row.derivatives[0] for row in tr.rows}
    assert adjoints == pytest.approx({5: 1.0, 4: 1.0, 3: -1.0, 2: 1.0, 1: 1.0})
    assert [d[0] for d in tr.input_derivatives] == pytest.approx([5.5, 1.7163378145367738])


def test_trace_table_text(baydin):
    text = format_trace(trace(baydin, "f", (2.0, 5.0), mode="forward"), baydin.sources)
    lines = text.splitlines()
    assert lines[0].split() == ["var", "operation", "source", "value", "∂/∂x1", "∂/∂x2"]
    assert lines[2].split()[:4] == ["v-1", "input", "x1", "2"]
    assert "log x1" in lines[4] and "0.6931471805599453" in lines[4]


def test_trace_cli(lambdad_cli):
    result = lambdad_cli("trace", "programs/baydin.lam", "f", "--at", "2,5", "--mode", "reverse")
    assert result.returncode == 0, result.stderr
    assert "adjoint" in result.stdout.splitlines()[0]
    assert "11.652071455223084" in result.stdout


def test_trace_through_map_and_closures():
    prog = lambdad.loads("def f (xs : [R]) : R = sum (map (\\x -> x * x) xs)\n")
    tr = trace(prog, "f", [1.0, 2.0], mode="reverse")
    squares = [row for row in tr.rows if row.symbol == "*"]
    assert [row.value for row in squares] == [1.0, 4.0]
    assert [d[0] for d in tr.input_derivatives] == pytest.approx([2.0, 4.0])


def test_graph_cli_writes_dot(lambdad_cli, tmp_path):
    out = tmp_path / "g.dot"
    result = lambdad_cli("graph", "programs/baydin.lam", "f", "--at", "2,5", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("digraph")


def test_the_reals_of_a_tuple_are_named_as_written():
    program = lambdad.loads("def t (a, b, c) = a * b + c\n"
                            "def k (p : R * R * R) = t p\n"
                            "def g (a, b) (c : R * R * R) = a * b + (let (x, _, _) = c in x)\n"
                            "def n (p : R * (R * R)) = 1 * (let (a, (b, c)) = p in a * b + c)")
    assert program.input_names("k", (1.0, 2.0, 3.0)) == ["p.0", "p.1", "p.2"]
    assert program.input_names("g", ((1.0, 2.0), (1.0, 2.0, 3.0))) == \
        ["a", "b", "c.0", "c.1", "c.2"]
    assert program.input_names("n", (1.0, (2.0, 3.0))) == ["p.0", "p.1.0", "p.1.1"]
    assert program.input_names("t", (1.0, 2.0, 3.0)) == ["a", "b", "c"]
    assert [name for name, _ in trace(program, "k", (1.0, 2.0, 3.0)).inputs] == \
        ["p.0", "p.1", "p.2"]


def test_the_rows_of_a_builtin_differentiated_as_a_value_have_no_place_of_their_own():
    """`grad sqrt x`: the rows of sqrt's derivative have no text to show (not `:0:0`)."""
    program = lambdad.loads("def g (x : R) : R = grad sqrt x * x\n", "g.lam")
    for mode in ("forward", "reverse"):
        table = trace(program, "g", 4.0, mode=mode)
        text = format_trace(table, {"g.lam": "def g (x : R) : R = grad sqrt x * x\n"})
        assert "0:0" not in text
        assert "grad sqrt x * x  (1:21)" in text


def test_the_recorder_keeps_each_registered_term_alive_so_its_ids_stay_unique():
    # The recorder knows a transformed term's nodes by id; were a registered term freed,
    # a node made later could take one of its ids and be taken for a derivative.
    # (syntax nodes take no weak references, so the term is watched by its id)
    import gc

    from lambdad.trace import _Recorder

    program = lambdad.loads("def f (x : R) : R = x * sin x")
    term = program.decls["f"].value
    recorder = _Recorder()
    recorder.register(term)
    watched = id(term)
    del term, program
    gc.collect()
    assert any(id(kept) == watched for kept in recorder.registered)
