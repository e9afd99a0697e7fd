"""Cotangent arrays computed in place: a sum of k cotangents in a backpropagator's body
makes one new array and adds the others into it, and an elementwise operation on a new
cotangent array made for it alone (`z * a` in `2 * (z * a)`, a name bound to one used
once) writes into it, giving bit for bit the gradient that new arrays give, and never
writing into an array something else holds (a user's input, a value, a cotangent sent to
two uses, a read-only broadcast)."""

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
def squares (m : Mat) : R =
  let z = m * 3 - 1 in
  sum (reshape (sum_rows (reshape (flatten (z * z)) 6 2)) 2 3)
def views (m : Mat) : R = sum (transpose m * transpose m) + sum (flatten m * flatten m)
"""

X = np.array([0.5, -1.25, 2.0])
Y = np.array([1.5, 0.25, -0.75])
M = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25]])
WIDE = np.arange(12.0).reshape(2, 6) / 7 - 0.5


def _elementwise():
    return [name for name in PRIMITIVES._entries
            if PRIMITIVES[name].kind == "elementwise" and PRIMITIVES[name].accumulate]


def _counting(monkeypatch):
    """Replaces the elementwise entries' accumulate by ones counting the calls that name
    an array to write into; returns the count."""
    calls = {"in place": 0}

    def counted(inner):
        def accumulate(into, *args):
            if any(type(args[k]) is np.ndarray for k in into):
                calls["in place"] += 1
            return inner(into, *args)
        return accumulate

    for name in _elementwise():
        entry = PRIMITIVES[name]
        monkeypatch.setitem(PRIMITIVES._entries, name,
                            attrs.evolve(entry, accumulate=counted(entry.accumulate)))
    return calls


def _gradients(name, point):
    return lambdad.loads(SOURCE).value_and_grad(name, point)


def _parts(gradient):
    return gradient if isinstance(gradient, tuple) else (gradient,)


@pytest.mark.parametrize("name, point", [("f", (X, Y)), ("shared", X), ("rows", (M, X)),
                                         ("squares", WIDE), ("views", M)])
def test_in_place_gives_the_gradient_bit_for_bit(monkeypatch, name, point):
    with monkeypatch.context() as m:
        for entry in _elementwise():
            m.setitem(PRIMITIVES._entries, entry,
                      attrs.evolve(PRIMITIVES[entry], accumulate=None))
        reference = _gradients(name, point)
    calls = _counting(monkeypatch)
    value, gradient = _gradients(name, point)
    assert calls["in place"] > 0
    assert value == reference[0]
    for got, expected in zip(_parts(gradient), _parts(reference[1])):
        assert got.tobytes() == expected.tobytes()


def test_the_gradients_written_in_place_are_right():
    # against the derivatives written out by hand
    _, g = _gradients("squares", WIDE)
    assert np.allclose(g, 2 * (3 * WIDE - 1) * 3)
    _, g = _gradients("views", M)
    assert np.allclose(g, 4 * M)
    _, (gm, gv) = _gradients("rows", (M, X))
    assert np.allclose(gm, X * X + 2 * M)
    assert np.allclose(gv, (2 * M * X).sum(axis=0) + 2)


def test_user_inputs_and_shared_cotangents_are_not_written():
    x, y, m = X.copy(), Y.copy(), WIDE.copy()
    program = lambdad.loads(SOURCE)
    _, (gx, gy) = program.value_and_grad("f", (x, y))
    assert x.tobytes() == X.tobytes() and y.tobytes() == Y.tobytes()
    assert gx is not gy and not np.shares_memory(gx, gy)
    # u's cotangent goes to three uses (u * u, u, u): each sees it unchanged
    _, g = program.value_and_grad("shared", x)
    u = X * X
    assert np.allclose(g, (2 * u + 2) * 2 * X)
    assert x.tobytes() == X.tobytes()
    # views of the input (transpose, flatten) are values the backpropagator reads
    program.value_and_grad("views", m)
    program.value_and_grad("squares", m)
    assert m.tobytes() == WIDE.tobytes()


def test_in_place_writes_into_an_owned_array_only_when_the_shapes_fit():
    accumulate = PRIMITIVES[ADD].accumulate
    total, x = np.ones(3), np.arange(3.0)
    out = accumulate((0,), total, x)
    assert out is total and list(total) == [1, 2, 3] and list(x) == [0, 1, 2]
    # a smaller operand would be broadcast to a new shape: a new array
    grown = np.ones((2, 3))
    out = accumulate((0,), x, grown)
    assert out is not x and out.shape == (2, 3) and list(x) == [0, 1, 2]
    # ... but a Vec against the rows of an owned Mat is written into the Mat
    out = accumulate((1,), x, grown)
    assert out is grown and grown.tolist() == [[1, 2, 3], [1, 2, 3]]
    # a sparse cotangent of the same shape is scattered into the total
    total = np.array([1.0, 2.0, 3.0])
    sparse = arraylib.Sparse((3,), 1, 5.0)
    out = accumulate((0,), total, sparse)
    assert out is total and list(total) == [1, 7, 3]
    # a sparse total is never written (its nodes are shared): a new array
    other = arraylib.Sparse((3,), 0, 1.0)
    out = accumulate((0,), other, x)
    assert type(out) is np.ndarray and list(out) == [1, 1, 2] and other.entries() == ([0], [1.0])


def test_in_place_skips_reals_and_read_only_broadcasts():
    multiply = PRIMITIVES["array.mul"].accumulate
    row = np.array([1.0, 2.0, 3.0])
    spread = np.broadcast_to(row, (2, 3))  # (read-only, as per_row's)
    fresh = np.full((2, 3), 2.0)
    # the first operand named that can be written: not the real, not the broadcast
    assert multiply((0, 1), 2.0, fresh) is fresh and fresh.tolist() == [[4.0] * 3] * 2
    out = multiply((0, 1), spread, np.full((2, 3), 0.5))
    assert out.tolist() == [[0.5, 1, 1.5]] * 2 and row.tolist() == [1, 2, 3]
    out = multiply((0,), spread, 2.0)
    assert out is not spread and row.tolist() == [1, 2, 3]


def test_the_primitives_not_computed_by_a_ufunc_write_nothing():
    # `_power`, `relu`, `max`, ... are NumPy functions of several steps: no in-place entry
    assert PRIMITIVES["array.pow"].accumulate is None
    assert PRIMITIVES["array.relu"].accumulate is None
    assert PRIMITIVES["array.mul"].accumulate is not None


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



def _spreads_called(program, name, strategy):
    """How many statements of the code compiled for ``name``'s gradient (by
    ``strategy``) call spread's evaluation."""
    import gc

    def modules():
        return [found for found in gc.get_objects()
                if isinstance(found, dict) and "__lambdad_source__" in found]

    before = {id(module) for module in modules()}
    program.value_and_grad(name, X, strategy=strategy)
    evaluate = PRIMITIVES["spread"].evaluate
    count = 0
    for found in modules():
        if id(found) not in before:
            for key, value in found.items():
                if value is evaluate:
                    count += found["__lambdad_source__"].count(f" = {key}(")
    return count


def test_a_product_by_a_spread_of_its_other_operand_multiplies_by_the_real():
    # `log (sum (exp v))`: sum's cotangent `spread e a` meets exp's partial `e * _` in one
    # fused body, where it is `e * a`, bit for bit, with no array of copies of a made
    source = "def lse (x : Vec) : R =\n  let m = maximum x in\n  m + log (sum (exp (x - m)))\n"
    x = np.array([0.5, -1.25, 2.0, 1.0])
    program = lambdad.loads(source)
    value, gradient = program.value_and_grad("lse", x)
    e = np.exp(x - 2.0)
    others = x != 2.0
    assert np.array_equal(gradient[others], (e * (1.0 / e.sum() * 1.0))[others])
    assert _spreads_called(lambdad.loads(source), "lse", "fused") == 0
    # (each backpropagator its own body: the spread and the product apart)
    assert _spreads_called(lambdad.loads(source), "lse", "factored") == 1


def test_sum_to_and_spread_take_sparse_arguments_themselves():
    # (called unwrapped by the table: a sparse cotangent, or a sparse operand of an inner
    # level, is made dense inside, as the wrapper would have)
    from lambdad.sparse import Sparse

    operand = Sparse.of((4,), [1, 3], [2.0, -1.0])
    cotangent = Sparse.of((4,), [0, 1], [0.5, 1.5])
    dense_operand, dense_cotangent = operand.dense(), cotangent.dense()
    for function in (arraylib.sum_to, arraylib.spread):
        assert function in arraylib.DENSE_INSIDE
        assert np.array_equal(function(operand, cotangent),
                              function(dense_operand, dense_cotangent))
        assert np.array_equal(function(operand, 2.0), function(dense_operand, 2.0))
    assert arraylib.sum_to(3.0, cotangent) == 2.0
