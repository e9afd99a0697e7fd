"""Gradient checking (lambdad.gradcheck, `lambdad check`): forward mode, both reverse-mode
strategies and central finite differences agree on correct programs; a wrong derivative is
caught and the disagreeing mode named; inputs are named by their paths; sampling keeps away
from kinks and branch switches."""

import math

import pytest

import lambdad
from lambdad import cli, forward, gradcheck, rules
from lambdad.parser import parse_expr
from lambdad.primitives import PRIMITIVES
from conftest import PROGRAMS

SHAPES = """
def g (w : (R * R) * [R]) (x : R) : R =
  fst (fst w) * x + fold (\\acc v -> acc + v * snd (fst w)) 0 (snd w)
def h (a, b) = a * sin b
def k (p : R * R * R) : R = 1 * (let (a, b, c) = p in a * b + c)
"""

KINKS = """
def r (x : R) : R = relu x + abs (x - 1) + max x 0.5 + (if x > 0.3 then x else 2 * x)
def dense (x : R) : R = abs (sin (1000000 * x))
"""


def wrong_table(name: str, *partials: str):
    """A copy of the derivative rules in which primitive ``name`` has ``partials``."""
    prim = PRIMITIVES[name]
    bound = prim.params + ((prim.result,) if prim.result else ())
    table = dict(rules.PARTIALS)
    table[name] = tuple(parse_expr(text, "<partial>", bound=bound) for text in partials)
    return table


# ---------------------------------------------------------------- correct programs


@pytest.mark.parametrize("path", sorted(PROGRAMS.glob("*.lam")), ids=lambda p: p.name)
def test_every_example_program_passes_the_check(path):
    report = gradcheck.check(lambdad.load(path), samples=2, seed=0)
    assert report.functions, "every example defines a differentiable function"
    assert report.ok, report.render()


def test_check_at_a_point_gives_every_mode_and_the_finite_difference():
    report = gradcheck.check(lambdad.load(PROGRAMS / "baydin.lam"), "f", point=(2.0, 5.0))
    [function] = report.functions
    [point] = function.checks
    assert [row.path for row in point.rows] == ["x1", "x2"]
    for row, expected in zip(point.rows, (5.5, 1.7163378145367738)):
        assert set(row.derivatives) == {"forward", "fused", "reverse", "naive"}
        for d in row.derivatives.values():
            assert d == pytest.approx(expected, rel=1e-12)
        assert row.finite_difference == pytest.approx(expected, rel=1e-8)
        assert not row.disagreeing
    assert point.value == pytest.approx(11.652071455223084)
    assert report.ok


def test_a_wrong_gradient_of_the_default_strategy_alone_fails_the_check(monkeypatch):
    """The default strategy (fused) runs a program of its own: a fault there must not hide
    behind the other routes agreeing."""
    program = lambdad.load(PROGRAMS / "baydin.lam")
    honest = type(program).value_and_grad

    def faulty(self, name, point, *args, strategy=None, **kwargs):
        value, gradient = honest(self, name, point, *args, strategy=strategy, **kwargs)
        if strategy == "fused":
            gradient = (gradient[0] * 1.01, gradient[1])
        return value, gradient

    monkeypatch.setattr(type(program), "value_and_grad", faulty)
    report = gradcheck.check(program, "f", point=(2.0, 5.0))
    assert not report.ok
    problems = report.functions[0].checks[0].mismatches()
    assert any(p.startswith("reverse (fused) disagrees with finite differences on `x1`")
               for p in problems), problems
    assert any(p.startswith("reverse (fused) disagrees with forward on `x1`") for p in problems)
    assert not any("x2" in p for p in problems)


def test_a_point_in_lambdad_syntax_is_accepted():
    program = lambdad.load(PROGRAMS / "quadratic.lam")
    report = gradcheck.check(program, "f", point="1, 2, 3, 4")
    assert report.ok
    assert [r.path for r in report.functions[0].checks[0].rows] == ["a", "b", "c", "x"]


def test_a_steep_function_still_checks():
    """Central differences alone are off by ~1e-4 here; the step-halving extrapolation is
    not."""
    program = lambdad.loads("def f (x : R) : R = sin (1000 * x * x)")
    assert gradcheck.check(program, "f", point=2.0).ok


def test_default_names_are_the_differentiable_functions():
    program = lambdad.loads(SHAPES + "def main = g ((1, 2), [3]) 4\n"
                            "def poly x = x\ndef flag (b : Bool) : R = 1")
    assert gradcheck.differentiable_functions(program) == ["g", "h", "k"]


# ---------------------------------------------------------------- wrong derivatives


def test_a_wrong_partial_is_caught_in_every_mode(monkeypatch):
    monkeypatch.setattr(rules, "PARTIALS", wrong_table("sin", "cos x + 0.001"))
    report = gradcheck.check(lambdad.load(PROGRAMS / "baydin.lam"), "f", point=(2.0, 5.0))
    assert not report.ok
    row = report.functions[0].checks[0].rows[1]
    assert row.path == "x2"
    assert row.disagreeing == ("forward", "fused", "reverse", "naive")
    text = report.render()
    assert "forward disagrees with finite differences on `x2`" in text
    assert "reverse (naive) disagrees with finite differences on `x2`" in text
    assert "FAILED: f" in text


def test_a_bug_in_one_mode_names_that_mode(monkeypatch):
    broken = wrong_table("mul", "y", "2 * x")
    real_forward = forward.forward_term

    def forward_with_wrong_product(term, names=None):
        with monkeypatch.context() as patch:
            patch.setattr(rules, "PARTIALS", broken)
            return real_forward(term, names)

    monkeypatch.setattr(forward, "forward_term", forward_with_wrong_product)
    report = gradcheck.check(lambdad.load(PROGRAMS / "baydin.lam"), "f", point=(2.0, 5.0))
    problems = report.mismatches()
    assert any("forward disagrees with finite differences on `x2`" in p for p in problems)
    assert any("reverse (factored) disagrees with forward on `x2`" in p for p in problems)
    assert not any(p.split(": ", 1)[1].startswith("reverse (factored) disagrees with finite")
                   for p in problems)


def test_naive_backpropagation_is_left_out_where_it_would_take_exponential_time():
    chain = ["def f (x : R) : R =", "  let y0 = x in"]
    chain += [f"  let y{i} = sin y{i - 1} * 0.5 + y{i - 1} * 0.5 in" for i in range(1, 80)]
    program = lambdad.loads("\n".join(chain + ["  y79"]))
    report = gradcheck.check(program, "f", point=0.3, naive_seconds=0.2)
    assert report.ok, report.render()
    [row] = report.functions[0].checks[0].rows
    assert row.derivatives["naive"] is None and row.derivatives["reverse"] is not None
    assert "reverse (naive) not run" in report.render()


# ---------------------------------------------------------------- naming inputs


def test_inputs_are_named_by_their_paths():
    program = lambdad.loads(SHAPES)
    at = {"g": (((1.0, 2.0), [3.0, 4.0, 5.0]), 6.0), "h": (1.0, 2.0), "k": (1.0, 2.0, 3.0)}
    paths = {}
    for name, point in at.items():
        report = gradcheck.check(program, name, point=point)
        assert report.ok, report.render()
        paths[name] = [row.path for row in report.functions[0].checks[0].rows]
    assert paths["g"] == ["w.0.0", "w.0.1", "w.1[0]", "w.1[1]", "w.1[2]", "x"]
    assert paths["h"] == ["a", "b"]
    assert paths["k"] == ["p.0", "p.1", "p.2"]  # a triple is named flat, as written


def test_nested_pattern_parameters_name_their_components():
    program = lambdad.loads("def f ((a, b), (c, _)) (d : R) = a * b + c * d")
    report = gradcheck.check(program, "f", point=(((1.0, 2.0), (3.0, 4.0)), 5.0))
    assert [r.path for r in report.functions[0].checks[0].rows] == ["a", "b", "c", "_", "d"]


def test_a_tuple_point_for_a_single_pair_parameter_is_one_argument():
    program = lambdad.loads("def f (p : R * R) (q : R) : R = fst p * snd p * q")
    report = gradcheck.check(program, "f", point=((1.0, 2.0), 3.0))
    assert [r.path for r in report.functions[0].checks[0].rows] == ["p.0", "p.1", "q"]


# ---------------------------------------------------------------- kinks and branches


def test_sampled_points_stay_away_from_kinks_and_branch_switches():
    program = lambdad.loads(KINKS)
    report = gradcheck.check(program, "r", samples=12, seed=3)
    assert report.ok, report.render()
    [function] = report.functions
    assert len(function.checks) == 12
    for c in function.checks:
        assert not c.notes
        assert all(not math.isnan(row.error) for row in c.rows)
        assert min(abs(c.point - kink) for kink in (0.0, 1.0, 0.5, 0.3)) > 1e-4


@pytest.mark.parametrize("point,culprit", [(0.5, "max"), (1.0, "abs"), (0.0, "relu"),
                                           (0.3 + 1e-7, ">")])
def test_at_a_kink_finite_differences_are_not_compared(point, culprit):
    report = gradcheck.check(lambdad.loads(KINKS), "r", point=point)
    [c] = report.functions[0].checks
    # The modes agree (the derivative of the branch taken is the documented answer), but
    # nothing independent confirms it: the function is not reported as checked.
    assert c.ok and not c.compared
    assert not report.ok and not report.functions[0].failed
    assert any(f"`{culprit}`" in note and "not compared" in note for note in c.notes), c.notes
    assert "-" in report.render().splitlines()[2].split()
    assert report.render().splitlines()[-1].startswith("NOT CHECKED: r")


def test_a_function_with_kinks_everywhere_cannot_be_sampled():
    report = gradcheck.check(lambdad.loads(KINKS), "dense", samples=1, seed=0)
    assert not report.ok
    assert "found 0 of 1 points" in report.render()


def test_a_failing_point_is_rejected_while_sampling():
    program = lambdad.loads("def f (x : R) : R = log x + sqrt (x - 0.5)")
    report = gradcheck.check(program, "f", samples=5, seed=1)
    assert report.ok, report.render()
    assert all(c.point > 0.5 for c in report.functions[0].checks)


# ---------------------------------------------------------------- errors


def test_unknown_or_unsuitable_names_are_usage_errors():
    program = lambdad.loads(SHAPES + "def flag (b : Bool) : R = 1\ndef pair (x : R) = (x, x)")
    for name in ("nope", "flag", "pair"):
        with pytest.raises(lambdad.UsageError):
            gradcheck.check(program, name, point=1.0)
    with pytest.raises(lambdad.UsageError):
        gradcheck.check(program, "h", point=[1.0])


def test_a_runtime_error_at_the_given_point_is_the_programs_error():
    program = lambdad.loads("def f (x : R) : R = log x")
    with pytest.raises(lambdad.EvalError):
        gradcheck.check(program, "f", point=-1.0)


# ---------------------------------------------------------------- command line


def test_cli_check_passes_with_a_table(lambdad_cli):
    result = lambdad_cli("check", "programs/baydin.lam", "--samples", "2", "--seed", "4")
    assert result.returncode == 0, result.stderr
    assert "finite diff." in result.stdout and "reverse (naive)" in result.stdout
    assert "x1" in result.stdout and "x2" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("ok:")


def test_cli_check_at_a_point(lambdad_cli):
    result = lambdad_cli("check", "programs/bmp.lam", "f", "f_shared", "--at", "3,1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("at (3, 1)") == 2


@pytest.mark.parametrize("args", [
    ("programs/baydin.lam", "--at", "2,5", "--samples", "3"),
    ("programs/baydin.lam", "nope"),
    ("programs/baydin.lam", "f", "--at", "[1, 2]"),
    ("programs/missing.lam",),
    ("programs/baydin.lam", "--rtol", "much"),
])
def test_cli_check_usage_errors_exit_2(lambdad_cli, args):
    result = lambdad_cli("check", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr


def test_cli_check_exits_1_on_a_mismatch_naming_the_mode(monkeypatch, capsys):
    monkeypatch.setattr(rules, "PARTIALS", wrong_table("log", "2 / x"))
    status = cli.main(["check", str(PROGRAMS / "baydin.lam"), "--at", "2,5"])
    out, err = capsys.readouterr()
    assert status == 1
    assert "MISMATCH: forward disagrees with finite differences on `x1`" in out
    assert "reverse (factored) disagrees with finite differences on `x1`" in err


def test_cli_check_rtol_and_eps_are_used(monkeypatch, capsys):
    # A derivative off by 2e-4 relative: beyond the default tolerance, within --rtol 1e-3.
    monkeypatch.setattr(rules, "PARTIALS", wrong_table("log", "1 / x + 0.001"))
    file = str(PROGRAMS / "baydin.lam")
    assert cli.main(["check", file, "--at", "2,5"]) == 1
    assert cli.main(["check", file, "--at", "2,5", "--rtol", "1e-3"]) == 0
    capsys.readouterr()
    # A step so large that halving it changes the differences: they are not compared, and
    # a derivative not compared is not reported as checked.
    assert cli.main(["check", file, "--at", "2,5", "--eps", "0.5"]) == 1
    assert "do not settle" in capsys.readouterr().out


# ---------------------------------------------------------------- limits and processes


def test_a_step_limit_hit_while_checking_is_a_failure_never_ok(lambdad_cli, tmp_path):
    file = tmp_path / "long.lam"
    file.write_text("def f (x : R) : R = fold (\\a i -> a + sin (x * i)) 0 (range 2000)\n")
    for where in (("--samples", "2"), ("--at", "0.5")):
        result = lambdad_cli("check", str(file), *where, "--max-steps", "500")
        assert result.returncode == 1, (where, result.stdout, result.stderr)
        assert "stopped after 500 steps" in result.stderr
        assert "ok" not in result.stdout


def test_a_time_limit_hit_while_checking_is_a_failure_never_ok(lambdad_cli, tmp_path):
    file = tmp_path / "slow.lam"
    file.write_text("def f (x : R) : R = fold (\\a i -> a + sin (x * i)) 0 (range 200000)\n")
    result = lambdad_cli("check", str(file), "--timeout", "1", "--jobs", "2")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "time limit" in result.stderr or "stopped after" in result.stderr
    assert "ok" not in result.stdout


def test_parallel_sampling_gives_the_serial_report():
    program = lambdad.loads(SHAPES + KINKS)
    serial = gradcheck.check(program, samples=4, seed=7, jobs=1)
    parallel = gradcheck.check(program, samples=4, seed=7, jobs=3)
    assert parallel == serial
    assert parallel.render() == serial.render()
    assert "found 0 of 4 points" in serial.render()  # `dense`: a serial run gives up early


def test_an_error_in_a_worker_is_raised_in_order(monkeypatch):
    monkeypatch.setattr(rules, "PARTIALS", wrong_table("sin", "cos x * 1e308 * 10"))
    program = lambdad.loads("def f (x : R) : R = x * x\ndef g (x : R) : R = sin x")
    with pytest.raises(lambdad.EvalError):
        gradcheck.check(program, samples=2, jobs=2)
