"""A repeated call at an array point (the planned path: its arrays tested finite inside the
run, the run in the interpreter's own quiet context) gives what the first call, by the
general path, gives: the same value bit for bit, the same refusal of a point with a
non-finite element, the same located error for a result that is not finite, never a NumPy
warning, and NumPy's state and the caller's context as they were."""

import contextvars
import warnings

import numpy as np
import pytest

import lambdad
from lambdad import arraylib
from lambdad.errors import LambdadError, UsageError

SOURCE = """
def lse (x : Vec) : R =
  let m = maximum x in
  m + log (sum (exp (x - m)))

def scaled (x : Vec) (k : R) : R = sum (exp (x * k))

def frob (m : Mat) : R = sum (m * m)

def constant (x : Vec) : R = 1.0
"""

NOT_FINITE = "an array point has an element that is not a finite number"


def _program():
    return lambdad.loads(SOURCE, "calls.lam")


def _planned(p, name, point):
    """The first call's value (the general path), after which the point's plan is kept."""
    return p.call(name, point)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_non_finite_element_is_refused_as_the_general_path_refuses_it(bad):
    p = _program()
    x = np.array([1.0, 2.0, 3.0])
    for name, point in [("lse", x), ("scaled", (x, 0.5)), ("frob", np.ones((2, 3)))]:
        _planned(p, name, point)
        for _ in range(2):  # (the second gradient takes the prepared path)
            p.value_and_grad(name, point)
    for name, point in [("lse", np.array([1.0, bad, 3.0])),
                        ("scaled", (np.array([bad, 2.0, 3.0]), 0.5)),
                        ("frob", np.array([[1.0, 2.0, 3.0], [4.0, 5.0, bad]]))]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UsageError, match=NOT_FINITE):
                p.call(name, point)
            with pytest.raises(UsageError, match=NOT_FINITE):
                p.value_and_grad(name, point)


def test_a_program_that_reads_no_element_still_refuses_a_non_finite_one():
    p = lambdad.loads("def constant (x : Vec) : R = 1.0", "constant.lam")
    before = np.geterr()
    assert p.call("constant", np.array([1.0, 2.0])) == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UsageError, match=NOT_FINITE):
            p.call("constant", np.array([1.0, np.nan]))
        # squares that overflow, of finite elements: tested exactly, quietly
        assert p.call("constant", np.array([1e200, -1e300])) == 1.0
    assert np.geterr() == before


def test_finite_elements_whose_squares_overflow_are_finite():
    p = _program()
    x = np.array([1e200, 1e200, -1e300])
    first = p.call("lse", x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = p.call("lse", x)
        big = np.full((3, 4), 1e-160)
        assert p.call("frob", big) == p.call("frob", big)
    assert again == first == 1e200 + np.log(2.0)


def test_a_large_or_strided_point_is_tested_as_a_small_one():
    p = _program()
    rng = np.random.default_rng(3)
    big = rng.normal(size=20_001)
    m = rng.normal(size=(6, 8)).T  # (not contiguous)
    for name, point in [("lse", big), ("frob", m), ("lse", big[::3])]:
        assert p.call(name, point) == p.call(name, point)
        bad = point.copy()
        bad[(-1,) * bad.ndim] = np.inf
        with pytest.raises(UsageError, match=NOT_FINITE):
            p.call(name, bad)


def test_repeated_calls_give_the_first_calls_value_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(5)
    general = []
    original = lambdad.points.Points.function_and_point
    monkeypatch.setattr(lambdad.points.Points, "function_and_point",
                        lambda self, *a: general.append(a[0]) or original(self, *a))
    for n in (1, 7, 1000, 10_001):
        x = rng.normal(size=n) * 30
        first = _program().call("lse", x)  # each program's first call: the general path
        p = _program()
        p.call("lse", x)
        del general[:]
        assert [p.call("lse", x) for _ in range(3)] == [first] * 3
        assert general == []  # (the planned path)
        p.call("scaled", (x, 0.25))
        assert p.call("scaled", (x, 0.25)) == _program().call("scaled", (x, 0.25))
        with pytest.raises(UsageError, match=NOT_FINITE):
            p.call("scaled", (np.full(n, np.nan), 0.25))
        assert general[-1] == "scaled"  # (refused by the general path)


def test_an_overflow_is_a_located_error_with_no_warning_and_numpys_state_kept():
    p = _program()
    x = np.array([1.0, 2.0])
    _planned(p, "scaled", (x, 1.0))
    before = np.geterr()
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for run in (p.call, p.value_and_grad):
                with pytest.raises(LambdadError) as caught:
                    run("scaled", (np.array([1.0, 800.0]), 1.0))
                assert "exp gave a result that is not finite" in caught.value.message
                assert caught.value.span is not None and caught.value.span.line == 6
                assert np.geterr() == before
    assert p.call("scaled", (x, 1.0)) == pytest.approx(np.exp(1.0) + np.exp(2.0))


def test_a_callers_numpy_state_and_context_are_left_as_they_were():
    p = _program()
    x = np.array([1.0, 800.0])
    _planned(p, "lse", np.array([1.0, 2.0]))
    marker = contextvars.ContextVar("marker", default="unset")
    marker.set("the caller's")
    with np.errstate(over="raise", invalid="raise"):
        state = np.geterr()
        assert p.call("lse", x) == pytest.approx(800.0)  # (exp (x - m) never overflows)
        with pytest.raises(LambdadError, match="exp gave a result that is not finite"):
            p.call("scaled", (x, 1.0))
        with pytest.raises(LambdadError, match="exp gave a result that is not finite"):
            p.call("scaled", (x, 1.0))
        assert np.geterr() == state
    assert marker.get() == "the caller's"


def test_the_quiet_context_is_quiet_and_changes_nothing_outside():
    before = np.geterr()
    context = arraylib.quiet_context()
    assert np.geterr() == before
    if context is None:  # (NumPy 1 keeps its error state process-wide)
        pytest.skip("NumPy keeps no error state per context")
    assert context.run(np.geterr) == {"divide": "ignore", "over": "ignore",
                                      "under": "ignore", "invalid": "ignore"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert context.run(np.exp, 1000.0) == np.inf
    assert np.geterr() == before


@pytest.mark.parametrize("size", [3, 10_000, 10_001])
def test_finite_in_run_tells_what_all_finite_tells(size):
    rng = np.random.default_rng(size)
    x = rng.normal(size=size)
    cases = [x, x * 1e200, x.reshape(-1, 1) if size % 2 else x.reshape(2, -1)]
    for bad in (np.inf, -np.inf, np.nan):
        y = x.copy()
        y[size // 2] = bad
        cases.append(y)
    with arraylib.quiet():
        for case in cases:
            assert arraylib.finite_in_run(case) == arraylib.all_finite(case)


def test_repeated_gradients_give_the_first_ones_bit_for_bit():
    rng = np.random.default_rng(9)
    x, k = rng.normal(size=1000) * 3, 0.75
    for name, point in [("lse", x), ("scaled", (x, k)), ("frob", x.reshape(20, 50))]:
        value, gradient = _program().value_and_grad(name, point)
        p = _program()
        runs = [p.value_and_grad(name, point) for _ in range(3)]
        for got_value, got_gradient in runs:
            assert got_value == value
            got = got_gradient if isinstance(got_gradient, tuple) else (got_gradient,)
            expected = gradient if isinstance(gradient, tuple) else (gradient,)
            assert [np.asarray(g).tobytes() for g in got] == \
                [np.asarray(g).tobytes() for g in expected]


def test_a_planned_run_that_exhausts_the_stack_runs_again_under_raised_limits():
    import sys

    p = _program()
    _planned(p, "lse", np.array([1.0, 2.0]))
    interpreter = p.runtime.interpreter
    limit = sys.getrecursionlimit()
    seen = []

    def deep(x):
        seen.append(sys.getrecursionlimit())
        if len(seen) == 1:
            raise RecursionError  # (as a run deeper than the limit would)
        return float(x.sum())

    assert interpreter.apply_restartable(deep, np.array([1.0, 2.0]), []) == 3.0
    assert len(seen) == 2 and seen[0] == limit and seen[1] > limit
    assert sys.getrecursionlimit() == limit
    assert interpreter.apply_restartable(deep, np.array([1.0, np.nan]), [np.array([np.nan])]) \
        is lambdad.interpreter.NOT_FINITE
    assert len(seen) == 2  # (nothing run)
