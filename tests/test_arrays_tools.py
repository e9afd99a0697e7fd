"""The tools on array programs (issue 41): traces and graphs with one row (node) per array
operation, shapes and summaries; gradient checks sampling the elements of large arrays;
`--stats` counts; the fuzzer's array programs."""

import subprocess
import sys

import attrs
import numpy as np
import pytest

from hypothesis import HealthCheck, given, seed, settings

import lambdad
from lambdad import gradcheck, rules, testing
from lambdad import graph as graphs
from lambdad.errors import LambdadError
from lambdad.parser import parse_module
from lambdad.primitives import PRIMITIVES
from lambdad.printer import print_module
from lambdad.probing import SAMPLED_ELEMENTS
from lambdad.syntax import VEC
from lambdad.trace import format_trace, trace
from lambdad.typecheck import infer_module
from lambdad.values import array_summary

LOSS = ("def loss (w : Vec) (x : Mat) (y : Vec) : R =\n"
        "  let z = x @ w in mean (log (1 + exp z) - y * z)\n")
POINT = (np.array([0.5, -0.25]), np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.0, 1.0]))
AT = "([0.5, -0.25], [[1, 2], [3, 4]], [0, 1])"
OPERATIONS = ["@", "exp", "*", "+", "log", "-", "mean"]


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(LOSS)


def _reference(w, x, y):
    """The loss and its gradient with respect to w, x and y, by hand."""
    z = x @ w
    s = 1 / (1 + np.exp(-z))
    n = len(z)
    dz = (s - y) / n
    return np.mean(np.log(1 + np.exp(z)) - y * z), (x.T @ dz, np.outer(dz, w), -z / n)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "lambdad", *args], capture_output=True,
                          text=True, timeout=120)


# ------------------------------------------------------------------ summaries


def test_small_arrays_are_summarised_by_their_elements_large_ones_by_statistics():
    assert array_summary(np.array([0.5, -0.25, 1.0])) == "Vec[3] [0.5, -0.25, 1]"
    assert array_summary(np.array([[1.0, 2.0], [3.0, 4.0]])) == "Mat[2x2] [[1, 2], [3, 4]]"
    assert array_summary(np.arange(100.0)) == "Vec[100] min 0 mean 49.5 max 99"
    assert array_summary(np.zeros((569, 30))) == "Mat[569x30] min 0 mean 0 max 0"


# ------------------------------------------------------------------ traces


def test_reverse_trace_has_one_row_per_array_operation_with_whole_adjoints(program):
    tr = trace(program, "loss", POINT, mode="reverse")
    assert [name for name, _ in tr.inputs] == ["w", "x", "y"]
    assert [row.symbol for row in tr.rows] == OPERATIONS
    value, gradients = _reference(*POINT)
    assert tr.rows[-1].value == pytest.approx(value)
    for (adjoint,), expected in zip(tr.input_derivatives, gradients):
        assert np.allclose(adjoint, expected)
    matmul = tr.rows[0]
    assert matmul.parents == (-1, -2)  # x @ w
    # the adjoint of z = x @ w is dz, whatever path it came back by (exp z and y * z)
    z = POINT[1] @ POINT[0]
    assert np.allclose(matmul.derivatives[0],
                       (1 / (1 + np.exp(-z)) - POINT[2]) / 2)


def test_forward_trace_columns_are_derivatives_along_all_ones_of_each_array(program):
    tr = trace(program, "loss", POINT, mode="forward")
    assert tr.columns == ("∂/∂w·1", "∂/∂x·1", "∂/∂y·1")
    _, gradients = _reference(*POINT)
    output = tr.rows[-1]
    assert output.derivatives == pytest.approx([float(g.sum()) for g in gradients])
    assert np.allclose(tr.rows[0].derivatives[0], POINT[1] @ np.ones(2))  # x @ 1
    text = format_trace(tr)
    assert "Vec[2] [0.5, -0.25]" in text and "Mat[2x2] [[1, 2], [3, 4]]" in text
    assert "x @ w  (2:11)" in text


def test_traces_of_large_arrays_show_shape_and_statistics():
    p = lambdad.loads("def f (v : Vec) : R = sum (v * v)")
    v = np.arange(101.0) - 50
    tr = trace(p, "f", v, mode="reverse")
    text = format_trace(tr)
    assert "Vec[101] min -50 mean 0 max 50" in text  # the input
    assert "Vec[101] min -100 mean 0 max 100" in text  # its adjoint, 2 v
    assert "Vec[101] min 0 mean 850 max 2500" in text  # v * v
    assert tr.rows[-1].value == float(np.sum(v * v))


def test_sparse_cotangents_of_elements_read_in_a_loop_reach_the_trace():
    p = lambdad.loads("def f (v : Vec) : R = fold (\\acc i -> acc + v !! i * v !! i) 0 "
                      "(range (size v))")
    v = np.array([1.0, -2.0, 3.0])
    tr = trace(p, "f", v, mode="reverse")
    assert np.allclose(tr.input_derivatives[0][0], 2 * v)
    reads = [row for row in tr.rows if row.symbol == "!!"]
    assert len(reads) == 6 and all(row.parents[0] == 0 for row in reads)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_trace_cli_on_an_array_program(tmp_path, mode):
    source = tmp_path / "g.lam"
    source.write_text(LOSS)
    done = _cli("trace", str(source), "loss", "--at", AT, "--mode", mode)
    assert done.returncode == 0, done.stderr
    assert "mean v6" in done.stdout and "@ v-1, v-2" in done.stdout
    assert "Vec[2] [0, 0.5]" in done.stdout  # z = x @ w


# ------------------------------------------------------------------ graphs


def test_graph_has_one_node_per_array_operation_labelled_with_shapes(program):
    g = graphs.graph_of(trace(program, "loss", POINT, mode="reverse"))
    nodes = {node.id: node for node in g.nodes}
    assert [nodes[f"in{i}"].lines[0] for i in (1, 2, 3)] == ["w", "x", "y"]
    assert len(g.nodes) == 3 + len(OPERATIONS)
    assert nodes["v1"].lines[:2] == ("v1 = x @ w", "value Vec[2] [0, 0.5]")
    assert nodes["v7"].lines == ("v7 = mean v6", "value 0.5836", "adjoint 1")
    assert nodes["in2"].lines[2] == "adjoint Mat[2x2] [[0.125, -0.0625], [-0.09439, 0.04719]]"
    assert "adjoint Vec[2] [-0.3163110031972183, -0.25508133759629104]" in nodes["in1"].title
    edges = {(e.source, e.target): e.label for e in g.edges}
    assert edges[("in2", "v1")] == "1" and edges[("in1", "v1")] == "2"  # @ does not commute


def test_graph_cli_draws_an_array_program(tmp_path):
    source = tmp_path / "g.lam"
    source.write_text(LOSS)
    done = _cli("graph", str(source), "loss", "--at", AT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("->") == 10 and "v7 = mean v6" in done.stdout
    svg = tmp_path / "g.svg"
    done = _cli("graph", str(source), "loss", "--at", AT, "-o", str(svg))
    assert done.returncode == 0, done.stderr
    assert "Mat[2x2]" in svg.read_text()


def test_an_array_constant_operand_is_written_into_the_label():
    p = lambdad.loads("def f (v : Vec) : R = sum (v * ones 3)")
    g = graphs.graph_of(trace(p, "f", np.array([1.0, 2.0, 3.0]), mode="reverse"))
    lines = [node.lines[0] for node in g.nodes]
    assert "v1 = v * (Vec[3] [1, 1, 1])" in lines


# ------------------------------------------------------------------ gradient checks


def test_check_compares_every_element_of_small_arrays(program):
    report = gradcheck.check(program, "loss", point=AT)
    assert report.ok, report.render()
    (c,) = report.functions[0].checks
    assert [row.path for row in c.rows] == ["w[0]", "w[1]", "x[0][0]", "x[0][1]", "x[1][0]",
                                            "x[1][1]", "y[0]", "y[1]"]
    _, (gw, gx, gy) = _reference(*POINT)
    assert [row.derivatives["reverse"] for row in c.rows] == pytest.approx(
        [*gw, *gx.ravel(), *gy])
    assert all(row.compared for row in c.rows)


def test_check_samples_the_elements_of_large_arrays_and_says_so(program):
    rng = np.random.default_rng(0)
    w, x = 0.1 * rng.normal(size=30), rng.normal(size=(200, 30))
    y = (rng.uniform(size=200) > 0.5) * 1.0
    report = gradcheck.check(program, "loss", point=(w, x, y))
    assert report.ok, report.render()
    (c,) = report.functions[0].checks
    assert len(c.rows) == 3 * SAMPLED_ELEMENTS
    assert len({row.path for row in c.rows if row.path.startswith("x[")}) == SAMPLED_ELEMENTS
    _, (gw, gx, gy) = _reference(w, x, y)
    exact = {f"w[{i}]": g for i, g in enumerate(gw)}
    exact.update({f"y[{i}]": g for i, g in enumerate(gy)})
    exact.update({f"x[{i}][{j}]": gx[i, j] for i in range(200) for j in range(30)})
    for row in c.rows:
        for mode in ("forward", "fused", "reverse", "naive"):
            assert row.derivatives[mode] == pytest.approx(exact[row.path], rel=1e-9, abs=1e-15)
    text = report.render()
    n = SAMPLED_ELEMENTS
    assert f"{n} of the 30 of `w`, {n} of the 6000 of `x`, {n} of the 200 of `y`" in text
    assert "loss at (Vec[30] min" in text and "Mat[200x30] min" in text  # no 6000 numbers


def test_check_samples_array_points_of_its_own():
    p = lambdad.loads("def f (v : Vec) (m : Mat) : R = sum (tanh (m @ v)) + logsumexp v\n"
                      "def g (v : Vec) : R = sum (relu v * v) + maximum (abs v)\n"
                      "def h (t : Vec) (x : Vec) : R =\n"
                      "  sum (stack (map (\\(ti : R) -> ti * x) (tolist t)) @ x)\n")
    report = gradcheck.check(p, samples=2)
    assert report.ok, report.render()
    f, g, _ = report.functions
    assert [(c.point[0].shape, c.point[1].shape) for c in f.checks] == [((3,), (3, 3))] * 2
    assert [c.point.shape for c in g.checks] == [(3,)] * 2
    assert len(f.checks[0].rows) == 3 + 9  # every element of Vec[3] and Mat[3x3]


def test_check_catches_a_wrong_array_derivative(monkeypatch):
    mean = PRIMITIVES["mean"]
    broken = attrs.evolve(mean, rule=attrs.evolve(
        mean.rule, cotangent="x_ (spread x (2 * a / count x))"))
    monkeypatch.setattr(rules, "_ARRAY_RULES", {})
    rules.array_rule_term(broken, rules.BACKPROPAGATOR)  # (the rule's term, made once)
    p = lambdad.loads("def f (v : Vec) : R = mean (v * v)")
    report = gradcheck.check(p, point=np.array([1.0, -2.0, 0.5]))
    assert not report.ok
    rows = report.functions[0].checks[0].rows
    assert all(set(row.disagreeing) == {"fused", "reverse", "naive"} for row in rows)


def test_check_cli_on_an_array_program(tmp_path):
    source = tmp_path / "g.lam"
    source.write_text(LOSS)
    done = _cli("check", str(source), "loss", "--at", AT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "x[1][0]" in done.stdout and done.stdout.rstrip().splitlines()[-1].startswith("ok:")


# ------------------------------------------------------------------ --stats


@pytest.mark.parametrize("strategy, created, run", [("naive", 7, 8), ("factored", 7, 7),
                                                    ("fused", 1, 1)])
@pytest.mark.parametrize("rows", [3, 300])
def test_stats_count_backpropagators_per_array_operation_not_per_element(strategy, created,
                                                                         run, rows):
    # seven array operations: factored and naive make one backpropagator each, naive runs
    # z's twice (z = x @ w is read by exp z and by y * z); fused merges the straight-line
    # body into one; none of the counts depends on the number of elements
    p = lambdad.loads(LOSS)
    rng = np.random.default_rng(1)
    point = (rng.normal(size=2), rng.normal(size=(rows, 2)), rng.normal(size=rows))
    _, _, stats = p.value_and_grad("loss", point, strategy=strategy, stats=True)
    assert (stats.created, stats.bodies_run) == (created, run)
    if strategy == "factored":
        assert created == len(trace(p, "loss", point, mode="reverse").rows)


def test_stats_of_elements_read_in_a_loop():
    # 4 steps of `acc + v !! i * v !! i`: two reads, a product and a sum each
    p = lambdad.loads("def f (v : Vec) : R = fold (\\acc i -> acc + v !! i * v !! i) 0 "
                      "(range (size v))")
    _, _, stats = p.value_and_grad("f", np.arange(4.0), strategy="factored", stats=True)
    assert (stats.created, stats.bodies_run) == (16, 16)


def test_grad_cli_stats_on_an_array_program(tmp_path):
    source = tmp_path / "g.lam"
    source.write_text(LOSS)
    done = _cli("grad", str(source), "loss", "--at", AT, "--stats", "--strategy", "naive")
    assert done.returncode == 0, done.stderr
    assert "backpropagators created: 7\nbackpropagator bodies run: 8" in done.stdout


# ------------------------------------------------------------------ the fuzzer


@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@seed(3)
@given(testing.array_cases())
def test_random_array_programs_keep_every_property(case):
    generated, point = case
    assert any(t == VEC for _, t in generated.params)
    try:
        testing.check_properties(generated, point, lambdad.loads)
    except testing.PointRejected:
        pass


@settings(max_examples=10, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@seed(4)
@given(testing.array_cases(matrices=True))
def test_random_programs_of_matrices_run_and_differentiate_right(case):
    # (not yet the `types` property: the ←D of several operations making Mats, printed,
    # does not type-check again, e.g. `def f (m : Mat) : R = sum (m * m)`)
    generated, point = case
    wanted = [p for p in testing.PROPERTIES if p not in ("types", "nested programs")]
    try:
        testing.check_properties(generated, point, lambdad.loads, wanted)
    except testing.PointRejected:
        pass


def test_the_round_trip_compares_terms_up_to_what_the_type_checker_elaborates():
    elaborated = parse_module("def f (v : Vec) : R = sum (v * v) + v @ v", "<f>")
    infer_module(elaborated)  # (`*` of Vecs becomes the elementwise product, in place)
    printed = print_module(elaborated)
    plain = parse_module(printed, "<f>")
    other = parse_module(printed.replace("v * v", "v + v"), "<f>")
    assert elaborated.decls[0].value != plain.decls[0].value
    assert testing.same_up_to_elaboration(elaborated.decls[0].value, plain.decls[0].value)
    assert not testing.same_up_to_elaboration(elaborated.decls[0].value, other.decls[0].value)


def test_fuzz_draws_array_programs_and_reports_them():
    report = testing.fuzz(lambdad.loads, count=8, seed=2, jobs=1)
    assert report.ok, report.render()
    assert report.arrays > 0
    assert f"; {report.arrays} of them array programs" in report.render()


def test_fuzz_finds_a_wrong_array_derivative(monkeypatch):
    total = PRIMITIVES["sum"]
    broken = attrs.evolve(total, rule=attrs.evolve(total.rule,
                                                   cotangent="x_ (spread x (2 * a))"))
    monkeypatch.setattr(rules, "_ARRAY_RULES", {})
    rules.array_rule_term(broken, rules.BACKPROPAGATOR)
    report = testing.fuzz(lambdad.loads, count=10, seed=0, jobs=1, shrink_seconds=5.0)
    assert not report.ok
    assert report.failure.prop in ("modes agree", "finite differences", "in-language AD")
    assert "Vec" in report.failure.source and "sum" in report.failure.source


def test_check_and_grad_with_respect_to_some_array_parameters(program, tmp_path):
    report = gradcheck.check(program, "loss", point=AT, wrt=["x"])
    assert report.ok, report.render()
    assert [row.path for row in report.functions[0].checks[0].rows] == [
        "x[0][0]", "x[0][1]", "x[1][0]", "x[1][1]"]
    _, gradient = program.value_and_grad("loss", AT, wrt=["w", "y"])
    _, (gw, _, gy) = _reference(*POINT)
    assert np.allclose(gradient[0], gw) and np.allclose(gradient[1], gy)


def test_second_order_checks_take_array_programs(program):
    report = gradcheck.check_second_order(program, "loss", point=AT)
    assert report.ok, report.render()
    assert len(report.checks[0].inputs) == 2 + 4 + 2
    assert "x[1][0], w[1]" in report.render()


def test_forward_graph_of_an_array_program_shows_unit_tangents_without_signed_zeros(program):
    g = graphs.graph_of(trace(program, "loss", POINT, mode="forward"))
    w = next(node for node in g.nodes if node.id == "in1")
    assert w.lines[2] == "tangent Vec[2] [1, 1], Vec[2] [0, 0], Vec[2] [0, 0]"
    assert w.title.endswith("tangent Vec[2] [1, 1], Vec[2] [0, 0], Vec[2] [0, 0]")
