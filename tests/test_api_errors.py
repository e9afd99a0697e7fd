"""The Python API raises only the documented error family: every error a caller can cause
is a ``lambdad.LambdadError``, and Python functions given as points are checked."""

import math

import pytest

import lambdad

SOURCE = """
def f x y = x * y + sin x
def h (g : R -> R) x = g x * x
def s (xs : [R]) = fold (\\a b -> a + b) 0 xs
"""


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE)


@pytest.mark.parametrize("call, expected", [
    (lambda p: p.grad("f", (10**400, 1.0)), "too large for a real"),
    (lambda p: p.call("s", [1, 2, 10**400]), "too large for a real"),
    (lambda p: p.jvp("f", (math.inf, 5.0), (1.0, 0.0)), "finite reals only"),
    (lambda p: p.grad("f", (math.nan, 5.0)), "finite reals only"),
    (lambda p: p.grad("s", [1.0, math.inf]), "finite reals only"),
    (lambda p: p.show("f", forward=True, at=(1e308 * 10, 2.0)), "finite reals only"),
    (lambda p: p.grad("f", None), "cannot use None"),
    (lambda p: p.grad("f", {}), "cannot use {}"),
    (lambda p: p.grad("f", "1,,"), "not a value"),
    (lambda p: p.set_max_steps("many"), "positive number"),
    (lambda p: p.evaluate_text(None), "must be a str"),
    (lambda p: lambdad.loads(None), "must be a str"),
    (lambda p: lambdad.loads(b"def f x = x"), "must be a str"),
    (lambda p: lambdad.loads(3), "must be a str"),
    (lambda p: lambdad.loads("def f x = x", None), "file name must be a str"),
    (lambda p: lambdad.load(None), "needs a file name"),
    (lambda p: lambdad.loads("def main = log (0 - 1)").run(), "log"),
])
def test_every_error_a_caller_can_cause_is_a_lambdad_error(program, call, expected):
    with pytest.raises(lambdad.LambdadError) as info:
        call(program)
    assert expected in info.value.message


@pytest.mark.parametrize("function, expected", [
    (lambda x: "text", "returned 'text'"),
    (lambda x: (1.0, 2.0), "not a value of type R"),
    (lambda x: math.nan, "finite reals only"),
    (lambda x: 1 / 0, "raised ZeroDivisionError"),
    (lambda x, y: x, "raised TypeError"),
])
def test_a_python_function_given_as_a_point_has_its_results_checked(program, function,
                                                                    expected):
    with pytest.raises(lambdad.EvalError) as info:
        program.call("h", (function, 3.0))
    assert expected in info.value.message
    assert "`h`" in info.value.message and "R -> R" in info.value.message


def test_a_well_behaved_python_function_is_used_as_is(program):
    assert program.call("h", (lambda x: 2 * x, 3.0)) == 18.0
    assert program.call("h", (lambda x: 2, 3.0)) == 6.0  # an int result is a real


def test_the_error_classes_are_exported_and_documented():
    from pathlib import Path

    api = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    for name in lambdad.__all__:
        kind = getattr(lambdad, name)
        if isinstance(kind, type) and issubclass(kind, Exception):
            assert issubclass(kind, lambdad.LambdadError)
            assert f"`{name}`" in api or f"`lambdad.{name}`" in api, name


def test_a_domain_error_is_of_the_family_and_a_run_reports_it_located():
    from lambdad.primitives import PRIMITIVES, DomainError

    assert issubclass(DomainError, lambdad.EvalError) and lambdad.DomainError is DomainError
    with pytest.raises(lambdad.LambdadError):
        PRIMITIVES["log"].evaluate(-1.0)
    program = lambdad.loads("def f x = log x\ndef g xs = xs !! 3", "d.lam")
    with pytest.raises(lambdad.EvalError) as info:
        program.call("f", -1.0)
    assert (info.value.span.line, info.value.span.col) == (1, 11)
    with pytest.raises(lambdad.EvalError) as info:
        program.call("g", [1.0])
    assert info.value.span.line == 2 and "out of range" in info.value.message
