"""One rule for NaN and infinity everywhere: a real that is not finite is a located error
naming the operation that produced it -- in values, in-language grad/jvp/vjp, traces, the
gradient checker and the Python API -- and derivative errors speak of the source operation,
in lambdad syntax.  The derivative of a constant power is 0, as in every peer."""

import math

import pytest

import lambdad
from lambdad import cli, gradcheck

OVERFLOWS = """
def g (x : R) : R = x * 1e308 * 10
def h (x : R) : R = x * 1e300
def lg (x : R) : R = log x
def sq (x : R) : R = sqrt x
def half (x : R) : R = x ^ 0.5
"""


def run_cli(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def overflows(tmp_path):
    file = tmp_path / "overflows.lam"
    file.write_text(OVERFLOWS)
    return str(file)


@pytest.mark.parametrize("expression,operation", [
    ("1e300 * 1e300", "`1e+300 * 1e+300` is inf: an overflow"),
    ("-1e300 * 1e300", "is -inf: an overflow"),
    ("1e308 + 1e308", "`1e+308 + 1e+308` is inf"),
    ("-1e308 - 1e308", "`-1e+308 - 1e+308` is -inf"),
    ("1e300 / 1e-300", "`1e+300 / 1e-300` is inf"),
    ("grad g 1", "`1e+308 * 10` is inf"),
    ("fst (jvp h 1 1e300)", "`1e+300 * 1e+300` is inf"),
    ("grad lg 1e-320", "the derivative of `log` is not finite at 1e-320"),
    ("snd (jvp lg 1e-320 1)", "the derivative of `log` is not finite at 1e-320"),
    ("snd (vjp lg 1e-320) 1", "the derivative of `log` is not finite"),
])
def test_a_value_that_is_not_finite_is_a_located_error(tmp_path, capsys, expression, operation):
    file = tmp_path / "main.lam"
    file.write_text(OVERFLOWS + f"def main = {expression}\n")
    status, out, err = run_cli(capsys, "run", str(file))
    assert status == 1 and out == ""
    assert "runtime error" in err and operation in err, err
    assert f"{file}:" in err and "^" in err  # located, with a caret
    assert "nan" not in out and "inf" not in out


@pytest.mark.parametrize("command", [
    ["grad", "lg", "--at", "1e-320"],
    ["grad", "lg", "--at", "1e-320", "--mode", "forward"],
    ["jvp", "h", "--at", "1", "--dir", "1e300"],
    ["trace", "lg", "--at", "1e-320", "--mode", "reverse"],
    ["trace", "lg", "--at", "1e-320"],
    ["check", "lg", "--at", "1e-320"],
])
def test_commands_report_derivatives_that_are_not_finite(overflows, capsys, command):
    status, out, err = run_cli(capsys, command[0], overflows, *command[1:])
    assert status == 1, (out, err)
    assert "is not finite" in err or "is inf" in err, err
    assert "ok" not in out and "inf" not in out


def test_a_point_that_overflows_is_an_error(overflows, capsys):
    status, out, err = run_cli(capsys, "grad", overflows, "h", "--at", "1e308*10")
    assert status in (1, 2) and "`1e+308 * 10` is inf" in err and out == ""


@pytest.mark.parametrize("point", [math.inf, -math.inf, math.nan, (math.inf, 5.0), [1.0, math.nan]])
def test_the_api_refuses_points_that_are_not_finite(point):
    program = lambdad.loads("def f x y = x * y\ndef s (xs : [R]) = fold (\\a x -> a + x) 0 xs")
    name = "s" if isinstance(point, list) else "f"
    if not isinstance(point, (tuple, list)):
        point = (point, 5.0)
    with pytest.raises(lambdad.UsageError, match="finite reals only"):
        program.jvp(name, point, point)
    with pytest.raises(lambdad.UsageError, match="finite reals only"):
        program.grad(name, point)


def test_the_api_refuses_a_direction_or_cotangent_that_is_not_finite():
    program = lambdad.loads("def f (x : R) (y : R) : R = x * y")
    with pytest.raises(lambdad.UsageError, match="finite reals only"):
        program.jvp("f", (1.0, 5.0), (math.inf, 5.0))
    _, pullback = program.vjp("f", (1.0, 5.0))
    with pytest.raises(lambdad.UsageError, match="finite reals only"):
        pullback(math.nan)


def test_the_gradient_checker_never_reports_a_value_that_is_not_finite():
    program = lambdad.loads(OVERFLOWS)
    with pytest.raises(lambdad.EvalError, match="derivative of `log` is not finite"):
        gradcheck.check(program, "lg", point=1e-320)
    with pytest.raises(lambdad.EvalError, match="is inf"):
        gradcheck.check(program, "g", point=1.0)


# ---------------------------------------------------------------- derivative errors


def test_a_derivative_error_names_the_source_operation(overflows, capsys):
    status, _, err = run_cli(capsys, "grad", overflows, "sq", "--at", "0")
    assert status == 1
    # sqrt's partial is written with its value (0.5 / r): both modes say where the value
    # is what it is (by backpropagation the argument is not at hand there)
    assert "the derivative of `sqrt` is undefined at a point where `sqrt` is 0\n" in err
    assert "sqrt x" in err and "0.0" not in err
    status, _, err = run_cli(capsys, "grad", overflows, "sq", "--at", "0", "--mode", "forward")
    assert "the derivative of `sqrt` is undefined at a point where `sqrt` is 0\n" in err
    status, _, err = run_cli(capsys, "grad", overflows, "half", "--at", "0")
    assert "the derivative of `^` is undefined at `0 ^ 0.5`" in err and "-0.5" in err


SQRT_AT_ZERO = "the derivative of `sqrt` is undefined at a point where `sqrt` is 0"
LOG_AT_TINY = "the derivative of `log` is not finite at 1e-320"


@pytest.mark.parametrize("main, message, where", [
    ("grad sqrt 0", SQRT_AT_ZERO, "2:12"),
    ("grad (\\x -> sqrt x) 0", SQRT_AT_ZERO, "2:24"),
    ("grad s 0", SQRT_AT_ZERO, "1:21"),
    ("jvp sqrt 0 1", SQRT_AT_ZERO, "2:12"),
    ("jvp s 0 1", SQRT_AT_ZERO, "1:21"),
    ("snd (vjp sqrt 0) 1", SQRT_AT_ZERO, "2:17"),
    ("map (grad sqrt) [1, 0]", SQRT_AT_ZERO, "2:17"),
    # nested: the written-out program of the inner `grad sqrt` runs inside the outer one,
    # and the error is placed at the differentiation that runs it
    ("grad (grad sqrt) 0", SQRT_AT_ZERO, "2:12"),
    ("grad log 1e-320", LOG_AT_TINY, "2:12"),
    ("grad (\\x -> log x) 1e-320", LOG_AT_TINY, "2:24"),
    ("jvp log 1e-320 1", LOG_AT_TINY, "2:12"),
])
def test_a_derivative_error_is_the_same_wherever_the_primitive_is(main, message, where, tmp_path,
                                                                   capsys):
    """A built-in passed as a value (`grad sqrt 0`), applied in a λ or in a definition:
    the error names the derivative of the built-in, in every mode and at every depth."""
    file = tmp_path / "m.lam"
    file.write_text(f"def s (x : R) : R = sqrt x\ndef main = {main}\n")
    status, _, err = run_cli(capsys, "run", str(file))
    assert status == 1
    assert f"{file}:{where}: runtime error: {message}\n" in err
    assert "note: computing it:" in err


def test_domain_errors_print_numbers_as_lambdad_writes_them(overflows, capsys):
    status, _, err = run_cli(capsys, "grad", overflows, "half", "--at=-1")
    assert status == 1
    assert "(-1 ^ 0.5)" in err and "-1.0" not in err


@pytest.mark.parametrize("source,expected", [
    ("grad (\\x -> x ^ 0) 0", 0.0),
    ("grad (\\x -> x ^ 0) 3", 0.0),
    ("snd (jvp (\\x -> x ^ 0) 0 1)", 0.0),
    ("grad (\\x -> x ^ 1) 0", 1.0),
    ("grad (\\x -> x ^ 2) 0", 0.0),
    ("grad (\\x -> x ^ 2) (-1)", -2.0),
])
def test_the_derivative_of_a_constant_power_is_zero(source, expected):
    assert lambdad.loads(f"def main = {source}").run() == expected


def test_the_api_gradient_of_x_to_the_zero_at_zero():
    program = lambdad.loads("def f (x : R) (y : R) : R = x ^ y")
    assert program.grad("f", (0.0, 0.0), mode="forward")[0] == 0.0
    assert program.grad("f", (0.0, 0.0))[0] == 0.0
