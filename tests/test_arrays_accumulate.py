"""Cotangent arrays summed in place: a sum of k cotangents in a backpropagator's body makes
one new array and adds the others into it, giving bit for bit the gradient the sum of new
arrays gives, and never writing into an array something else holds (a user's input, a
value, a cotangent sent to two uses)."""

import attrs
import numpy as np
import pytest

import lambdad
from lambdad import arraylib
from lambdad.primitives import PRIMITIVES

ADD = "array.add"

SOURCE = """
def f (x : Vec) (y : Vec) : R = sum (x * x * x + y * x * y + exp x * y)
def shared (x : Vec) : R = let u = x * x in sum (u * u + u + u)
def rows (m : Mat) (v : Vec) : R = sum (m * v * v + m * m + v)
"""

X = np.array([0.5, -1.25, 2.0])
Y = np.array([1.5, 0.25, -0.75])
M = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25]])


def _counting(monkeypatch):
    """Replaces the addition's accumulate by one counting its calls; returns the count."""
    calls = {"in place": 0}
    entry = PRIMITIVES[ADD]
    inner = entry.accumulate

    def accumulate(total, x):
        if type(total) is np.ndarray:
            calls["in place"] += 1
        return inner(total, x)

    monkeypatch.setitem(PRIMITIVES._entries, ADD, attrs.evolve(entry, accumulate=accumulate))
    return calls


def _gradients(name, point):
    return lambdad.loads(SOURCE).value_and_grad(name, point)


@pytest.mark.parametrize("name, point", [("f", (X, Y)), ("shared", X), ("rows", (M, X))])
def test_sums_in_place_give_the_gradient_bit_for_bit(monkeypatch, name, point):
    with monkeypatch.context() as m:
        m.setitem(PRIMITIVES._entries, ADD, attrs.evolve(PRIMITIVES[ADD], accumulate=None))
        reference = _gradients(name, point)
    calls = _counting(monkeypatch)
    value, gradient = _gradients(name, point)
    assert calls["in place"] > 0
    assert value == reference[0]
    for got, expected in zip(gradient if isinstance(gradient, tuple) else (gradient,),
                             reference[1] if isinstance(gradient, tuple) else (reference[1],)):
        assert got.tobytes() == expected.tobytes()


def test_user_inputs_and_shared_cotangents_are_not_written():
    x, y = X.copy(), Y.copy()
    program = lambdad.loads(SOURCE)
    _, (gx, gy) = program.value_and_grad("f", (x, y))
    assert x.tobytes() == X.tobytes() and y.tobytes() == Y.tobytes()
    assert gx is not gy and not np.shares_memory(gx, gy)
    # u's cotangent goes to three uses (u * u, u, u): each sees it unchanged
    _, g = program.value_and_grad("shared", x)
    u = X * X
    assert np.allclose(g, (2 * u + 2) * 2 * X)
    assert x.tobytes() == X.tobytes()


def test_accumulate_adds_into_an_owned_array_only_when_the_shapes_fit():
    accumulate = PRIMITIVES[ADD].accumulate
    total, x = np.ones(3), np.arange(3.0)
    out = accumulate(total, x)
    assert out is total and list(total) == [1, 2, 3] and list(x) == [0, 1, 2]
    # a smaller operand would be broadcast to a new shape: a new array
    grown = np.ones((2, 3))
    out = accumulate(x, grown)
    assert out is not x and out.shape == (2, 3) and list(x) == [0, 1, 2]
    # a sparse cotangent of the same shape is scattered into the total
    sparse = arraylib.Sparse((3,), 1, 5.0)
    out = accumulate(total, sparse)
    assert out is total and list(total) == [1, 7, 3]
    # a sparse total is never written (its nodes are shared): a new array
    other = arraylib.Sparse((3,), 0, 1.0)
    out = accumulate(other, x)
    assert type(out) is np.ndarray and list(out) == [1, 1, 2] and other.entries() == ([0], [1.0])


def test_cotangents_nothing_uses_are_not_computed(monkeypatch):
    # ←D sends cotangents to the base and the exponents of the matrix of powers, both
    # constants: the power in the base's partial (`k * b ^ (k - 1)`) is never evaluated
    calls = {"power": 0}
    entry = PRIMITIVES["array.pow"]
    inner = entry.cotangent_evaluate

    def counted(*args):
        calls["power"] += 1
        return inner(*args)

    monkeypatch.setitem(PRIMITIVES._entries, "array.pow",
                        attrs.evolve(entry, cotangent_evaluate=counted))
    program = lambdad.loads(
        "def f (x : Vec) : R =\n"
        "  let t = linspace (-1) 1 5 in\n"
        "  sum ((outer t (ones (size x)) ^ arange (size x)) @ x)\n")
    _, gradient = program.value_and_grad("f", np.array([1.0, 2.0, 3.0]))
    t = np.linspace(-1, 1, 5)
    assert np.allclose(gradient, [5.0, t.sum(), (t * t).sum()])
    assert calls["power"] == 0
