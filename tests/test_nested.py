"""Nested differentiation (AD.md section 9): grad, jvp and vjp compose in any combination and
to any depth, with exact results and no perturbation confusion."""

import math

import pytest

import lambdad
import lambdad.calling
from lambdad.errors import LambdadError


def run(source: str, entry: str = "main"):
    return lambdad.loads(source).run(entry)


# ---------------------------------------------------------------- the examples of the spec


def test_second_derivative_through_a_closure_over_the_outer_variable():
    assert run(r"def main = grad (\x -> grad (\y -> x * y * y) x) 3") == 12.0


def test_perturbation_confusion_gives_one_not_two():
    # Siskind and Pearlmutter: d/dx (x * d/dy (x + y)) = 1; confusing the levels gives 2.
    assert run(r"def main = grad (\x -> x * grad (\y -> x + y) 1) 1") == 1.0
    assert run(r"def main = snd (jvp (\x -> x * snd (jvp (\y -> x + y) 1 1)) 1 1)") == 1.0


def test_jvp_of_grad_is_the_hessian_vector_product():
    source = r"""
def f (p : R * R) : R = let (x, y) = p in x * x * y + y * y * y
def main = jvp (grad f) (1, 2) (1, 0)
"""
    value, product = run(source)
    assert value == (4.0, 13.0)       # ∇f = (2xy, x² + 3y²)
    assert product == (4.0, 2.0)      # H = [[2y, 2x], [2x, 6y]] times (1, 0)


def test_reverse_over_forward():
    assert run(r"def main = grad (\x -> snd (jvp (\y -> y * y * x) x 1)) 3") == 12.0


def test_reverse_over_reverse_and_forward_over_forward():
    assert run(r"def main = grad (grad (\x -> sin x * x)) 2") == pytest.approx(
        -math.sin(2) * 2 + 2 * math.cos(2), abs=1e-15)
    assert run(r"def main = snd (jvp (\x -> snd (jvp (\y -> x * y * y) x 1)) 3 1)") == 12.0


def test_third_derivative_of_a_scalar_function():
    assert run(r"def main = grad (grad (grad (\x -> x * x * x * x))) 2") == 48.0
    assert run(r"def main = snd (jvp (grad (grad (\x -> x ^ 4))) 2 1)") == 48.0


def test_a_pull_back_is_differentiated():
    # the pull-back of y -> x y² at 3, applied to 1, is 6x
    assert run(r"def main = grad (\x -> let (_, pb) = vjp (\y -> x * y * y) 3 in pb 1) 2") == 6.0
    # a pull-back made outside is linear in its cotangent
    assert run(r"def main = let (_, pb) = vjp (\x -> x * x) 3 in grad (\c -> pb c) 2") == 6.0


def test_closures_capturing_outer_values_and_maps():
    source = r"def main = grad (\x -> sum (map (\y -> grad (\z -> z * x * y) 1) [x, 2 * x])) 3"
    assert run(source) == 18.0  # d/dx (x·x + x·2x)


def test_functions_returning_functions():
    # Manzyuk et al.: the derivative of a function-valued function is a function
    assert run(r"def main = let (f, t) = jvp (\x -> \y -> x * y * x) 2 1 in (f 5, t 5)") == (
        20.0, 20.0)
    assert run(r"def main = grad (\x -> let (_, t) = jvp (\a -> \y -> a * y * a) x 1 in t x) 2"
               ) == 8.0


def test_partial_applications_of_grad_nest():
    value, second = run(r"def main = jvp (grad sin) 1 1")
    assert value == math.cos(1.0) and second == -math.sin(1.0)


def test_nesting_through_top_level_definitions_and_the_prelude():
    source = r"""
def d (f : R -> R) (x : R) : R = grad f x
def cube (x : R) : R = x * x * x
def main = (d (d cube) 2, d (\x -> sum [x * x, d cube x]) 1)
"""
    assert run(source) == (12.0, 8.0)


def test_derivatives_of_kinks_and_constant_exponents_stay_defined():
    assert run(r"def main = grad (\x -> grad (\y -> relu y * x) x) 2") == 1.0
    assert run(r"def main = grad (grad (\w -> (w * 2 - 5) ^ 2)) 1") == 8.0


# ---------------------------------------------------------------- API, strategies, stats


def test_api_gradient_of_a_function_that_differentiates():
    prog = lambdad.loads("def slope (x : R) : R = grad (\\y -> y * y * x) x\n")
    assert prog.grad("slope", 3.0) == 12.0
    assert prog.grad("slope", 3.0, mode="forward") == 12.0
    _, pullback = prog.vjp("slope", 3.0)
    assert pullback(1.0) == 12.0
    assert prog.jvp("slope", 3.0, 1.0) == (18.0, 12.0)


@pytest.mark.parametrize("strategy", ["factored", "naive"])
def test_strategies_agree_and_stats_are_per_level(strategy):
    prog = lambdad.loads(r"def f (x : R) : R = grad (\y -> sin (y * x) * y) x")
    value, gradient, stats = prog.value_and_grad("f", 0.7, strategy=strategy, stats=True)
    assert len(stats.levels) == 2
    assert stats.created == sum(level.created for level in stats.levels)
    if strategy == "factored":
        for level in stats.levels:
            assert level.bodies_run <= level.created
    assert gradient == pytest.approx(
        lambdad.loads(r"def f (x : R) : R = grad (\y -> sin (y * x) * y) x").grad(
            "f", 0.7, strategy="factored"), rel=1e-12)


def test_naive_stays_naive_on_an_outer_level():
    # the outer level's tape: (x * x) shared by two uses, each a path for the naive phase
    source = r"def f (x : R) : R = let s = x * x in s * s * grad (\y -> y * x) 1"
    prog = lambdad.loads(source)
    _, _, factored = prog.value_and_grad("f", 1.5, strategy="factored", stats=True)
    _, _, naive = prog.value_and_grad("f", 1.5, strategy="naive", stats=True)
    assert naive.levels[0].bodies_run > factored.levels[0].bodies_run


def test_differentiating_with_respect_to_a_function_is_a_located_error():
    prog = lambdad.loads("def main = grad (\\f -> 1) sin\n")
    with pytest.raises(LambdadError, match="function-typed input") as info:
        prog.run()
    assert info.value.span is not None and info.value.span.line == 1


def test_stats_have_a_level_per_depth_of_a_written_out_program():
    # f x = 4 x^4 through three nested grads: each level's backward phases run in the ring
    # of its own cotangents, counted at its own depth
    prog = lambdad.loads(
        r"def f (x : R) : R = x * grad (\y -> x * grad (\z -> z * z * y * x) y) x")
    value, gradient, stats = prog.value_and_grad("f", 0.7, strategy="factored", stats=True)
    assert (value, gradient) == pytest.approx((4 * 0.7 ** 4, 16 * 0.7 ** 3), rel=1e-12)
    assert [level.depth for level in stats.levels] == [1, 2, 3]
    assert all(0 < level.bodies_run <= level.created for level in stats.levels)


def test_reverse_mode_over_a_function_that_differentiates_runs_its_program(monkeypatch):
    from lambdad import nesting

    written = []
    expand = nesting.expand_closure
    monkeypatch.setattr(nesting, "expand_closure",
                        lambda *args: written.append(1) or expand(*args))
    assert run(r"def main = grad (\x -> x * grad (\y -> x + y) 1) 1") == 1.0
    assert run(r"def main = grad (grad (grad (\x -> x ^ 4))) 2") == 48.0
    assert written


def test_a_use_reverse_mode_cannot_write_out_is_a_located_refusal():
    # g is a λ parameter: ←D would need ←D(g) at a second cotangent type
    source = ("def total (xs : [R]) : R = fold (\\a b -> a + b) 0 xs\n"
              "def main = grad (\\x -> total (map (\\(g : R -> R) -> grad (g : R -> R) x)\n"
              "  [\\y -> x * y * y, sin])) 3\n")
    with pytest.raises(LambdadError, match="a function given as an argument") as info:
        run(source)
    assert (info.value.span.line, info.value.span.col) == (2, 58)
    # forward mode writes the same use out
    prog = lambdad.loads(source.replace("def main = grad", "def k = ").replace(") 3\n", ")\n"))
    value, derivative = prog.jvp("k", 3.0, 1.0)
    assert derivative == pytest.approx(2.0 * 3.0 + 2.0 * 3.0 - math.sin(3.0), rel=1e-12)


def test_functions_bound_by_a_pattern_are_differentiated_inside_a_differentiation():
    # t (a tangent function) and pb (a pull-back) are parts of a result, bound by a
    # pattern: the written-out program knows them as `snd` of that result
    assert run(r"def main = grad (\x -> let (_, t) = jvp (\a -> \y -> a * y * a) x 1 in "
               r"t x + grad t x) 2") == 10.0
    assert run(r"def main = jvp (\x -> let (_, t) = jvp (\a -> \y -> a * y * a) x 1 in "
               r"t x + grad t x) 2 1") == (12.0, 10.0)
    assert run(r"def main = grad (\x -> let (v, pb) = vjp (\y -> y * y * x) x in "
               r"v + grad pb 1) 2") == 20.0


def test_a_pull_back_is_the_closure_of_a_program():
    from lambdad.interpreter import Interpreter

    _, pullback = run(r"def main = vjp (\x -> x * x * x) 2")
    parts = Interpreter.function_parts(pullback)
    assert parts is not None and set(parts.captured) == {"f", "x"}
    assert pullback(1.0) == 12.0


def test_first_order_stats_are_unchanged():
    prog = lambdad.loads("def f (x : R) : R = x * x + sin x\n")
    _, stats = prog.grad("f", 1.0, stats=True)
    assert str(stats).splitlines()[0].startswith("backpropagators created:")
    assert len(stats.levels) == 1


# ---------------------------------------------------------------- Hessians: API, CLI, REPL

from lambdad import cli  # noqa: E402
from lambdad.differentiate import COMPOSITIONS  # noqa: E402

from conftest import PROGRAMS  # noqa: E402

# log x1 + x1 x2 - sin x2 at (2, 5): H = [[-1/x1², 1], [1, sin x2]]


@pytest.mark.parametrize("mode", COMPOSITIONS)
def test_every_composition_gives_the_exact_hessian(mode):
    prog = lambdad.load(PROGRAMS / "baydin.lam")
    value, gradient, rows = prog.hessian("f", (2.0, 5.0), mode=mode)
    assert gradient == (5.5, pytest.approx(1.7163378145367738))
    assert [tuple(row) for row in rows] == [
        (pytest.approx(-0.25), pytest.approx(1.0)),
        (pytest.approx(1.0), pytest.approx(math.sin(5.0), rel=1e-15))]


def test_hessian_of_structured_input_is_symmetric_and_shaped_like_the_input():
    prog = lambdad.loads("def f (p : R * [R]) : R = let (a, xs) = p in "
                         "a * sum (map (\\x -> x * x * a) xs) + sin a\n")
    point = (0.5, [1.0, 2.0])
    _, _, rows = prog.hessian("f", point)
    assert prog.input_names("f", point) == ["p.0", "p.1[0]", "p.1[1]"]
    flat = [[row[0], *row[1]] for row in rows]
    for i in range(3):
        for j in range(3):
            assert flat[i][j] == pytest.approx(flat[j][i], rel=1e-14)
    assert flat[0][0] == pytest.approx(2 * 5.0 - math.sin(0.5))  # ∂²/∂a² = 2 Σx² - sin a
    for mode in COMPOSITIONS[1:]:
        _, _, other = prog.hessian("f", point, mode=mode)
        for got, want in zip([[r[0], *r[1]] for r in other], flat):
            assert got == pytest.approx(want, rel=1e-13)


def test_hvp_api_and_prelude_agree():
    prog = lambdad.loads("def f (xs : [R]) : R = fold (\\acc x -> acc * x + sin x) 1 xs\n"
                         "def h = hvp f [0.5, 1.5, -1] [1, 2, 3]\n"
                         "def full = hessian f [0.5, 1.5, -1]\n")
    value, gradient, product = prog.hvp("f", [0.5, 1.5, -1.0], [1.0, 2.0, 3.0])
    assert prog.run("h") == pytest.approx(product, rel=1e-15)
    _, _, rows = prog.hessian("f", [0.5, 1.5, -1.0])
    for got, want in zip(prog.run("full"), rows):
        assert got == pytest.approx(want, rel=1e-15)
    assert product == pytest.approx([sum(r[j] * v for j, v in enumerate([1, 2, 3]))
                                     for r in rows], rel=1e-13)


PREPARED_PRODUCTS = """
def one (x : R) : R = x * x * sin x + exp (0.5 * x)
def two (x : R) (y : R) : R = let z = x * y in z * z + cos x
def three (p : R * R * R) : R = let (a, b, c) = p in a * b * c + a ^ 3
def many (xs : [R]) : R = fold (\\acc x -> acc * x + sin x) 1 xs
def scale : R = 3
def captures (x : R) : R = scale * x * x
"""


@pytest.mark.parametrize("strategy", ["fused", "factored"])
@pytest.mark.parametrize("name, first, second", [
    ("one", (0.5, 1.0), (-1.25, 0.5)),
    ("two", ((0.5, 2.0), (1.0, -1.0)), ((1.5, -0.5), (0.25, 2.0))),
    ("three", ((1.0, 2.0, 3.0), (1.0, 0.0, -1.0)), ((0.5, -2.0, 1.5), (2.0, 1.0, 0.5))),
    ("many", ([0.5, 1.5, -1.0], [1.0, 2.0, 3.0]), ([2.0, -0.5, 0.25], [0.0, 1.0, -2.0])),
    ("captures", (2.0, 1.0), (-3.0, 0.5)),
])
def test_a_repeated_hvp_runs_prepared_and_gives_the_general_paths_numbers(
        strategy, name, first, second):
    prog = lambdad.loads(PREPARED_PRODUCTS)
    prog.set_strategy(strategy)
    general = lambdad.loads(PREPARED_PRODUCTS)
    general.set_strategy(strategy)
    assert prog.hvp(name, *first) == general.hvp(name, *first)
    shape = lambdad.calling.real_inputs(first[0])[0]
    assert prog._derivatives._products[(name, shape, strategy)] is not None  # the next call is prepared
    want = lambdad.loads(PREPARED_PRODUCTS)
    want.set_strategy(strategy)
    assert prog.hvp(name, *second) == want.hvp(name, *second)  # bit for bit


def test_a_prepared_hvp_reports_errors_and_shape_mismatches_as_the_general_path():
    source = "def f (xs : [R]) : R = fold (\\acc x -> acc + log x * x) 0 xs\n"
    prog = lambdad.loads(source)
    prog.hvp("f", [1.0, 2.0], [1.0, 1.0])
    with pytest.raises(LambdadError) as prepared:
        prog.hvp("f", [1.0, -2.0], [1.0, 1.0])
    with pytest.raises(LambdadError) as general:
        lambdad.loads(source).hvp("f", [1.0, -2.0], [1.0, 1.0])
    assert str(prepared.value) == str(general.value) and "log" in str(prepared.value)
    assert prepared.value.span == general.value.span is not None
    with pytest.raises(lambdad.UsageError, match="shape of the point"):
        prog.hvp("f", [1.0, 2.0], [1.0, 1.0, 1.0])


def lambdad_main(capsys, *args):
    status = cli.main([*args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out, captured.err


def test_cli_hessian_names_the_rows_by_input(capsys):
    status, out, _ = lambdad_main(capsys, "hessian", str(PROGRAMS / "baydin.lam"), "f",
                                  "--at", "2,5")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "value: 11.652071455223084"
    assert lines[3] == "  x1 : (-0.25, 1)"
    assert lines[4] == f"  x2 : (1, {math.sin(5.0)!r})"


def test_cli_hessian_json_every_mode_and_hvp(capsys):
    import json

    for mode in COMPOSITIONS:
        status, out, _ = lambdad_main(capsys, "hessian", str(PROGRAMS / "baydin.lam"), "f",
                                      "--at", "2,5", "--mode", mode, "--json")
        data = json.loads(out)
        assert status == 0 and data["inputs"] == ["x1", "x2"] and data["mode"] == mode
        assert data["hessian"] == [[pytest.approx(-0.25), pytest.approx(1.0)],
                                   [pytest.approx(1.0), pytest.approx(math.sin(5.0))]]
    status, out, _ = lambdad_main(capsys, "hvp", str(PROGRAMS / "baydin.lam"), "f",
                                  "--at", "2,5", "--dir", "0,1", "--json")
    assert json.loads(out)["hvp"] == [1.0, pytest.approx(math.sin(5.0))]


def test_cli_hessian_of_a_non_scalar_function_is_a_usage_error(capsys):
    status, _, err = lambdad_main(capsys, "hessian", str(PROGRAMS / "mlp.lam"), "layer",
                                  "--at", "([[1]], [1], [1])")
    assert status == 2 and "returning R" in err


def test_repl_hessian():
    from lambdad.repl import Session

    session = Session()
    session.load(str(PROGRAMS / "baydin.lam"))
    shown = session.execute(":hessian f 2,5", session.record(":hessian f 2,5"))
    assert "  x1 : (-0.25, 1)" in shown.splitlines()


# ---------------------------------------------------------------- check --order 2


def test_check_order_2_passes_on_correct_rules(capsys):
    status, out, _ = lambdad_main(capsys, "check", str(PROGRAMS / "baydin.lam"), "f",
                                  "--at", "2,5", "--order", "2")
    assert status == 0, out
    assert "  x1, x2  1" in out
    assert out.splitlines()[-1].startswith("ok: 1 function(s), 1 point(s)")


def test_check_order_2_reports_a_wrong_second_derivative(capsys, monkeypatch, tmp_path):
    from lambdad import rules
    from lambdad.parser import parse_expr

    # cos's partial doubled: gradients of sin stay right, second derivatives go wrong
    table = dict(rules.PARTIALS)
    table["cos"] = (parse_expr("2 * (-sin x)", "<broken>", bound=("x",)),)
    monkeypatch.setattr(rules, "PARTIALS", table)
    source = tmp_path / "s.lam"
    source.write_text("def f (p : R * R) : R = let (a, b) = p in sin a * b\n")
    status, out, err = lambdad_main(capsys, "check", str(source), "--order", "2",
                                    "--samples", "1")
    assert status == 1
    assert out.splitlines()[-1] == "FAILED: f"
    assert "mismatch: f: p.0, p.0:" in err


# ---------------------------------------------------------------- properties


from hypothesis import HealthCheck, Phase, assume, given, seed, settings  # noqa: E402

from lambdad import testing  # noqa: E402
from lambdad.gradcheck import leaves, replace_leaves  # noqa: E402


def _flat(rows):
    return [leaves(as_runtime(row)) for row in rows]


def as_runtime(value):
    return lambdad.calling.from_python(value)


@seed(20261123)
@settings(max_examples=10, deadline=None, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.data_too_large])
@given(testing.cases())
def test_compositions_agree_hessians_are_symmetric_and_match_differences(case):
    generated, point = case
    program = lambdad.loads(generated.source())
    try:
        hessians = {mode: _flat(program.hessian("f", point, mode=mode)[2])
                    for mode in COMPOSITIONS}
        reals = leaves(as_runtime(point))
        gradients = {}
        for i, r in enumerate(reals):
            for step in (1e-4, 5e-5):
                h = step * max(1.0, abs(r))
                for sign in (1, -1):
                    moved = [x + sign * h if k == i else x for k, x in enumerate(reals)]
                    gradients[(i, step, sign)] = leaves(as_runtime(program.grad(
                        "f", replace_leaves(as_runtime(point), moved))))
    except LambdadError:
        assume(False)
    reference = hessians[COMPOSITIONS[0]]
    scale = max([1.0] + [abs(x) for row in reference for x in row])
    n = len(reals)
    for mode in COMPOSITIONS[1:]:
        for i in range(n):
            for j in range(n):
                assert abs(hessians[mode][i][j] - reference[i][j]) <= 1e-8 * scale, (
                    mode, i, j)
    for i in range(n):
        for j in range(n):
            assert abs(reference[i][j] - reference[j][i]) <= 1e-8 * scale, (i, j)
    for i, r in enumerate(reals):
        quotients = []
        for step in (1e-4, 5e-5):
            h = step * max(1.0, abs(r))
            up, down = gradients[(i, step, 1)], gradients[(i, step, -1)]
            quotients.append([(u - d) / (2 * h) for u, d in zip(up, down)])
        for j in range(n):
            coarse, fine = quotients[0][j], quotients[1][j]
            if abs(coarse - fine) > 1e-4 * scale:
                continue  # a kink or branch switch between the probes: nothing to compare
            assert abs(reference[i][j] - fine) <= 1e-4 * scale, (i, j, reference[i][j], fine)


def test_trace_and_graph_of_a_function_that_differentiates(capsys):
    from lambdad.trace import trace

    program = lambdad.load(PROGRAMS / "nested.lam")
    reverse = trace(program, "closure", 3.0, mode="reverse")
    assert reverse.output == 18.0 and reverse.input_derivatives == ((12.0,),)
    assert all(type(row.value) is float for row in reverse.rows) and reverse.rows
    forward = trace(program, "closure", 3.0, mode="forward")
    assert [row.value for row in forward.rows] == [row.value for row in reverse.rows]
    status, out, _ = lambdad_main(capsys, "graph", str(PROGRAMS / "nested.lam"), "closure",
                                  "--at", "3")
    assert status == 0 and out.startswith("digraph")


def test_a_returned_tangent_function_applied_inside_other_differentiations():
    # t y = ∂/∂x (x y²) = y²: differentiating t itself (Manzyuk et al.'s setting) must see y²
    source = r"""
def t = snd (jvp (\x -> \y -> x * y * y) 2 1)
def main = (t 3, snd (jvp t 3 1), grad t 3, grad (\z -> t (z * z)) 3)
"""
    assert run(source) == (9.0, 6.0, 6.0, 108.0)  # a 4-tuple, as written


# ---------------------------------------------------------------- forward mode over programs


@pytest.fixture
def no_levels(monkeypatch):
    """Forward mode over a function that differentiates must transform its written-out
    program: the test fails unless a closure was written out."""
    from lambdad import nesting

    written = []
    expand = nesting.expand_closure

    def counting(*args, **kwargs):
        written.append(1)
        return expand(*args, **kwargs)

    monkeypatch.setattr(nesting, "expand_closure", counting)
    yield
    assert written, "no closure was written out as a program"


@pytest.mark.parametrize("source, expected", [
    (r"def main = snd (jvp (\x -> x * snd (jvp (\y -> x + y) 1 1)) 1 1)", 1.0),
    (r"def main = snd (jvp (\x -> x * grad (\y -> x + y) 1) 1 1)", 1.0),
    (r"def main = snd (jvp (grad (grad (\x -> x ^ 4))) 2 1)", 48.0),
    (r"def main = snd (jvp (\x -> grad (\y -> x * y * y) x) 3 1)", 12.0),
    (r"def main = snd (jvp (\x -> snd (vjp (\y -> x * y * y) 3) 1) 2 1)", 6.0),
    (r"def main = snd (jvp (\x -> grad (\y -> snd (jvp (\z -> x * z * z) y 1)) x) 3 1)", 2.0),
    ("def f (p : R * R) : R = let (x, y) = p in x * x * y + y * y * y\n"
     "def main = jvp (grad f) (1, 2) (1, 0)", ((4.0, 13.0), (4.0, 2.0))),
    ("def main = snd (jvp (\\x -> let k = \\g -> grad g x in k (\\y -> x * sin y)) 1 1)",
     math.cos(1.0) - math.sin(1.0)),
])
def test_forward_mode_over_a_function_that_differentiates_runs_its_program(
        no_levels, source, expected):
    result = run(source)
    if isinstance(expected, float):
        assert result == pytest.approx(expected, rel=1e-15)
    else:
        assert result == expected


def test_hessian_vector_products_over_lists_of_lists_run_their_program(no_levels):
    prog = lambdad.loads(
        "def f (w : [[R]] * R) : R =\n"
        "  let (m, c) = w in sum (map (\\row -> sum (map (\\x -> c * x * x * x) row)) m)\n")
    point = ([[1.0, 2.0], [], [3.0]], 0.5)
    _, gradient, product = prog.hvp("f", point, ([[1.0, 0.0], [], [1.0]], 2.0))
    assert gradient == ([[1.5, 6.0], [], [13.5]], 36.0)
    # H v: ∂²/∂x² = 6cx, ∂²/∂x∂c = 3x², ∂²/∂c² = 0
    assert product == ([[3.0 + 3.0 * 2.0, 12.0 * 2.0], [], [9.0 + 27.0 * 2.0]], 3.0 + 27.0)


def test_a_tangent_function_taking_a_function_applies_it_at_the_level():
    # ∂/∂y (g y) along 1 at 2, for the g given to the tangent afterwards: cos 2 for sin
    assert run(r"def main = (snd (jvp (\y -> \(g : R -> R) -> g y) 2 1)) sin") == math.cos(2.0)


def test_a_vjp_whose_result_holds_a_function_is_refused():
    with pytest.raises(LambdadError, match="no functions"):
        run(r"def main = fst (fst (vjp (\y -> (\z -> y * z, y)) 2)) 3")


def test_a_hessian_by_another_strategy_runs_that_strategys_backward_program(monkeypatch):
    """Forward mode over ←D runs ←D as the strategy evaluates it: after a factored
    Hessian, a fused one on the same program fuses what it does on a fresh program."""
    from lambdad import images

    fusions = []
    fused = images.fused_backward_term

    def counting(*args, **kwargs):
        fusions.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(images, "fused_backward_term", counting)
    source = "def f (x : R) (y : R) : R = x * x * y + sin y\n"
    lambdad.loads(source).hessian("f", (1.0, 2.0), strategy="fused")
    on_a_fresh_program = len(fusions)
    program = lambdad.loads(source)
    _, _, factored = program.hessian("f", (1.0, 2.0), strategy="factored")
    fusions.clear()
    _, _, by_default = program.hessian("f", (1.0, 2.0), strategy="fused")
    assert len(fusions) == on_a_fresh_program, "the factored strategy's program was reused"
    expected = [4.0, 2.0, 2.0, -math.sin(2.0)]
    assert [h for row in factored for h in row] == pytest.approx(expected, rel=1e-12)
    assert [h for row in by_default for h in row] == pytest.approx(expected, rel=1e-12)
