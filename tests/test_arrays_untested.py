"""Finiteness tests of array results left out where a later test sees them (codegen's
untested_arrays): a non-finite element made in the middle of an array program and hidden
later (by exp, tanh, a maximum, an empty broadcast) is still a located error naming the
operation that made it; a run with no non-finite element gives bit for bit what the
operations give; and the API edge's short paths for points of arrays."""

import numpy as np
import pytest

import lambdad
from lambdad.errors import EvalError

SOURCE = """\
def hidden_exp (x : Vec) : R =
  let m = maximum x in
  m + log (sum (exp (x * 1e308 * 10 - m)))
def hidden_tanh (x : Vec) : R = sum (tanh (x * 1e308 * 10))
def hidden_nan (x : Vec) : R = sum (exp ((x * 1e308 * 10) - (x * 1e308 * 10)))
def hidden_max (x : Vec) : R = maximum (x * 1e308 * 10 + 1)
def log_later (x : Vec) : R = sum (log (x * 1e308 * 10 + 1))
def hidden_empty (x : Vec) : R = sum ((x * 1e308 * 10) + reshape (zeros 0) 0 2)
def lse (x : Vec) : R =
  let m = maximum x in
  m + log (sum (exp (x - m)))
def chain (x : Vec) (y : Vec) : R = mean (sqrt (abs (x * y - y / 3) + 1) * x)
"""

# Each program, and the column (on its line) of the product `x * 1e308 * 10`, which
# overflows at the element -10: the operation every error must name.
HIDDEN = {"hidden_exp": (3, 22), "hidden_tanh": (4, 44), "hidden_nan": (5, 43),
          "hidden_max": (6, 41), "log_later": (7, 41), "hidden_empty": (8, 40)}


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE, "hidden.lam")


@pytest.mark.parametrize("name", sorted(HIDDEN))
@pytest.mark.parametrize("how", ["call", "value_and_grad"])
def test_a_non_finite_element_hidden_later_names_the_operation_that_made_it(program, name,
                                                                              how):
    line, column = HIDDEN[name]
    with pytest.raises(EvalError) as caught:
        getattr(program, how)(name, np.array([-10.0, 1.0]))
    error = caught.value
    assert error.span is not None and (error.span.line, error.span.col) == (line, column)
    assert str(error).startswith("* gave a result that is not finite")


def test_the_error_is_the_same_when_called_again(program):
    # (the run that finds the operation leaves nothing behind: a second call agrees)
    messages = []
    for _ in range(2):
        with pytest.raises(EvalError) as caught:
            program.call("hidden_exp", np.array([-10.0, 1.0]))
        messages.append((str(caught.value), caught.value.span.col))
    assert messages[0] == messages[1]


def test_a_finite_run_gives_what_the_operations_give_bit_for_bit(program):
    rng = np.random.default_rng(5)
    x = rng.normal(size=1000)
    m = np.maximum.reduce(x)
    expected = float(m + np.log(np.add.reduce(np.exp(x - m))))
    assert program.call("lse", x) == expected
    y = rng.normal(size=1000)
    expected = float(np.mean(np.sqrt(np.abs(x * y - y / 3.0) + 1.0) * x))
    assert program.call("chain", (x, y)) == expected
    # and what the value of value_and_grad gives, whose primal keeps every test
    assert program.value_and_grad("lse", x)[0] == pytest.approx(program.call("lse", x),
                                                                rel=1e-15)


def test_a_finite_point_after_a_failing_one_runs_as_before(program):
    x = np.array([-10.0, 1.0])
    with pytest.raises(EvalError):
        program.call("hidden_exp", x)
    small = np.array([-1e-308, 1e-308])
    m = 1e-308
    assert program.call("hidden_exp", small) == float(
        m + np.log(np.add.reduce(np.exp(small * 1e308 * 10 - m))))


def test_a_sum_that_overflows_is_a_located_error(program):
    p = lambdad.loads("def f (x : Vec) : R = sum (x * 1e308)\n", "sum.lam")
    with pytest.raises(EvalError) as caught:
        p.call("f", np.array([1.0, 1.0]))
    assert caught.value.span.col == 23 and "sum" in str(caught.value)


@pytest.mark.parametrize("point", [
    (np.array([1.0, np.nan]), np.array([1.0, 2.0])),
    (np.array([1.0, 2.0]), np.array([np.inf, 2.0])),
])
def test_a_tuple_of_arrays_with_a_non_finite_element_is_refused(program, point):
    program.call("chain", (np.array([1.0, 2.0]), np.array([3.0, 4.0])))  # (a plan made)
    with pytest.raises(lambdad.LambdadError) as caught:
        program.call("chain", point)
    assert "finite" in str(caught.value)


def test_points_of_arrays_and_of_lists_give_the_same_values(program):
    x, y = [0.5, -1.5, 2.0], [1.0, 2.0, -3.0]
    by_arrays = program.call("chain", (np.array(x), np.array(y)))
    by_lists = program.call("chain", (x, y))
    assert by_arrays == by_lists
    assert program.value_and_grad("chain", (np.array(x), np.array(y)))[0] == by_arrays


def _untested_calls(program, name):
    """The evaluations the compiled ``name`` makes without their test (by global), after
    a call has compiled it."""
    program.call(name, np.linspace(0.0, 1.0, 5))
    function = program.value_of(name)
    scope = (function.func if hasattr(function, "func") else function).__globals__
    return {untested for swapped in scope["__lambdad_untested__"].values()
            for untested in swapped}


def test_the_exponential_summed_at_once_is_left_untested_and_nothing_in_a_branch():
    program = lambdad.loads(SOURCE + """\
def branching (x : Vec) : R = if sum x > 0 then sum (exp (x - 1)) else 0
""", "hidden.lam")
    assert len(_untested_calls(program, "lse")) == 1  # exp's, tested by the sum's real
    assert _untested_calls(program, "branching") == set()
