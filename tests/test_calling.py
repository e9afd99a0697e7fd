"""The calling convention: points fitted to a function's curried parameters, the
uncurrying adapter, the names of a point's reals, and Python data in and out."""

import numpy as np
import pytest

import lambdad
from lambdad import calling, gradcheck
from lambdad.errors import UsageError
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr

from lambdad.primitives import FST, SND
from lambdad.syntax import App, Lam, LetPair, Var


def test_a_point_written_with_literals_is_read_without_evaluating():
    for text, value in [("2,5", (2.0, 5.0)), ("(-1, [1, -2.5], true)", (-1.0, ([1.0, -2.5], True))),
                        ("[]", [])]:
        assert calling.literal_value(parse_expr(calling.point_source(text, "--at"))) == value
    for text in ["1 + 1", "w0", "fst (1, 2)"]:
        assert calling.literal_value(parse_expr(text, bound=("w0",))) is None


def test_a_deep_literal_point_does_not_recurse():
    text = "(" * 5000 + "1" + ", 2)" * 5000
    value = calling.literal_value(parse_expr(text))
    depth = 0
    while type(value) is tuple:
        value, depth = value[0], depth + 1
    assert depth == 5000


def test_show_at_builds_main_without_evaluating(monkeypatch):
    program = lambdad.loads("def boom = log (0 - 1)\ndef f x y = x * y + boom * 0")
    expected = program.show("f", reverse=True, at="2,5")

    def refuse(*args, **kwargs):
        raise AssertionError("show --at evaluated something")

    monkeypatch.setattr(Interpreter, "evaluate", refuse)
    monkeypatch.setattr(Interpreter, "evaluate_module", refuse)
    assert program.show("f", reverse=True, at="2,5") == expected
    assert program.show("f", forward=True, at=(2, 5)).count("let r") == 2
    assert "def main =" in expected


def test_a_point_fits_one_argument_or_a_tuple_of_several():
    program = lambdad.loads("def f (x : R * R) (y : R) = fst x * y")
    assert program.points.arguments_covered("f", (1.0, 2.0)) == 1
    assert program.points.arguments_covered("f", ((1.0, 2.0), 3.0)) == 2
    with pytest.raises(UsageError, match="does not fit `f`"):
        program.points.arguments_covered("f", [1.0])


def test_a_point_that_does_not_fit_is_named_with_its_large_arrays_summarised():
    # (a point of a million elements would otherwise be written out in the message)
    program = lambdad.loads("def f (m : Mat) (c : Mat) : R = sum (m @ transpose c)")
    with pytest.raises(UsageError) as raised:
        program.call("f", [np.ones((1000, 8)), np.array([[1.0, 2.0]])])
    message = str(raised.value)
    assert "Mat[1000x8] min 1 mean 1 max 1" in message
    assert "[1, 2]" in message  # (small arrays keep their elements)
    assert len(message) < 200


def test_the_adapter_never_captures_a_function_named_p():
    term = calling.uncurried_term("p", 2)
    q = Var(term.param)
    assert term.param != "p"
    assert term == Lam(term.param, App(App(Var("p"), FST.applied(q)), SND.applied(q)))
    term = calling.uncurried_term("p", 3)  # a triple is taken apart by a pattern
    q = Var(term.param)
    assert term == Lam(term.param, LetPair("x'1", "x'4", q, LetPair(
        "x'2", "x'3", Var("x'4"), App(App(App(Var("p"), Var("x'1")), Var("x'2")),
                                      Var("x'3"))), 3))
    program = lambdad.loads("def p x y = x * y")
    report = gradcheck.check(program, "p", point=(2.0, 5.0))
    assert report.ok, report.render()


def test_reals_are_named_alike_by_every_tool():
    source = "def f ((a, b), (c, _)) (d : R) = a * b + c * d\ndef g = \\(x : R) -> x * x"
    program = lambdad.loads(source)
    point = (((1.0, 2.0), (3.0, 4.0)), 5.0)
    names = ["a", "b", "c", "_", "d"]
    assert program.input_names("f", point) == names
    report = gradcheck.check(program, "f", point=point)
    assert [row.path for row in report.functions[0].checks[0].rows] == names
    assert program.jacobian("f", point).inputs == names


def test_python_data_crosses_both_ways():
    assert calling.from_python((1, 2, 3)) == (1.0, (2.0, 3.0))
    assert calling.packed(calling.curried_parts((1.0, (2.0, 3.0)), 3)) == (1.0, (2.0, 3.0))
    with pytest.raises(UsageError, match="finite reals only"):
        calling.from_python([1.0, float("nan")])
    assert calling.from_python(float("inf"), finite=False) == float("inf")
