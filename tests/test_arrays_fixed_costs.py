"""The short paths that keep a small array program's fixed costs low give what the general
paths give, bit for bit: a sparse cotangent of a few entries added entry by entry, the
unchecked elementwise operations of backpropagators' bodies on reals and arrays, an
elementwise operation of literal reals folded when the code is generated, and NumPy's
floating-point state entered once per call and put back after an error."""

import numpy as np
import pytest

import lambdad
from lambdad.arraylib import Sparse
from lambdad.errors import DomainError, LambdadError
from lambdad.peephole import folded_elementwise
from lambdad.primitives import PRIMITIVES


@pytest.mark.parametrize("count", [1, 3, 8, 9, 40])
@pytest.mark.parametrize("shape", [(7,), (5, 3)])
def test_a_few_sparse_entries_add_as_numpys_add_at_does(count, shape):
    rng = np.random.default_rng(count)
    positions = rng.integers(0, shape[0], count).tolist()  # (repeated positions too)
    values = (rng.normal(size=count).tolist() if len(shape) == 1
              else list(rng.normal(size=(count, shape[1]))))
    base = rng.normal(size=shape) * 1e3
    got = base.copy()
    Sparse.of(shape, positions, values)._scatter(got)
    expected = base.copy()
    np.add.at(expected, np.asarray(positions, dtype=np.intp), np.asarray(values))
    assert got.tobytes() == expected.tobytes()


def test_a_few_sparse_entries_make_the_dense_array_add_at_makes():
    positions, values = [2, 0, 2], [0.1, 0.2, 0.7]
    expected = np.zeros(4)
    np.add.at(expected, np.asarray(positions), np.asarray(values))
    assert Sparse.of((4,), positions, values).dense().tobytes() == expected.tobytes()


@pytest.mark.parametrize("name", ["array.add", "array.sub", "array.mul", "array.div",
                                  "array.pow", "array.atan2"])
def test_unchecked_binary_operations_give_what_the_general_path_gives(name):
    entry = PRIMITIVES[name]
    unchecked = entry.cotangent_evaluate
    x = np.array([0.5, 1.5, 2.5])
    m = np.array([[1.0, 2.0, 3.0], [0.25, 0.5, 4.0]])
    real = PRIMITIVES[name.split(".", 1)[1]]
    for args in [(1.5, 2.0), (x, 2.0), (2.0, x), (x, x), (m, x), (x, m)]:
        got = unchecked(*args)
        if all(type(a) is float for a in args):
            expected = real.evaluate(*args)
        else:
            with np.errstate(all="ignore"):
                expected = _general(name)(*args)
        assert type(got) is type(expected)
        assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()
    with pytest.raises(DomainError, match=r"Vec\[3\] and Vec\[2\] do not match"):
        unchecked(x, np.array([1.0, 2.0]))


def _general(name):
    """The NumPy function of an elementwise entry (the general path: the ufunc)."""
    from lambdad.arraylib import UFUNCS
    return UFUNCS[name.split(".", 1)[1]][0]


def test_unchecked_operations_add_and_scale_sparse_cotangents_as_before():
    add, mul = PRIMITIVES["array.add"].cotangent_evaluate, \
        PRIMITIVES["array.mul"].cotangent_evaluate
    one, other = Sparse((3,), 1, 2.0), Sparse((3,), 2, 1.0)
    assert isinstance(add(one, other), Sparse)
    assert mul(one, 3.0).dense().tolist() == [0.0, 6.0, 0.0]
    assert mul(one, np.ones(3)).tolist() == [0.0, 2.0, 0.0]


def test_elementwise_operations_of_literal_reals_are_folded_when_they_hold():
    neg, div, log = PRIMITIVES["array.neg"], PRIMITIVES["array.div"], PRIMITIVES["array.log"]
    assert folded_elementwise(neg, ["1.0"]) == "(-1.0)"
    assert folded_elementwise(div, ["1.0", "4.0"]) == "0.25"
    assert folded_elementwise(div, ["1.0", "0.0"]) is None  # fails at run time
    assert folded_elementwise(log, ["(-1.0)"]) is None
    assert folded_elementwise(neg, ["t1"]) is None


def test_a_subtractions_gradient_is_the_same_with_its_minus_one_folded():
    p = lambdad.loads("def f (x : Vec) (y : Vec) : R = sum (x - y) + maximum (x - y)")
    x, y = np.array([1.0, 3.0, -2.0]), np.array([0.5, 0.5, 0.5])
    value, (gx, gy) = p.value_and_grad("f", (x, y))
    assert value == pytest.approx(np.sum(x - y) + np.max(x - y))
    assert gx.tolist() == [1.0, 2.0, 1.0] and gy.tolist() == [-1.0, -2.0, -1.0]


def test_an_error_in_an_array_run_is_located_and_leaves_numpys_state_as_it_was():
    p = lambdad.loads("def f (v : Vec) : R = sum (exp v) + 1")
    before = np.geterr()
    for _ in range(2):
        with pytest.raises(LambdadError) as caught:
            p.call("f", np.array([1.0, 800.0]))
        assert "exp gave a result that is not finite" in caught.value.message
        assert caught.value.span is not None and caught.value.span.col == 28
        assert np.geterr() == before
        with pytest.raises(LambdadError):
            p.value_and_grad("f", np.array([1.0, 800.0]))
        assert np.geterr() == before
    assert p.call("f", np.array([0.0, 0.0])) == 3.0
    assert np.geterr() == before


@pytest.mark.parametrize("shape", [(3,), (1797,), (64, 10), (7, 513), (100_001,)])
def test_mean_is_numpys_mean_bit_for_bit(shape):
    from lambdad.arraylib import mean
    rng = np.random.default_rng(len(shape) * 7 + shape[0])
    for scale in (1e-5, 1.0, 1e5):
        x = rng.normal(size=shape) * scale
        for array in (x, np.asfortranarray(x), x.T):
            assert mean(array) == float(np.mean(array))


@pytest.mark.parametrize("v", [np.array([1.0, -2.5, 3.25]), np.arange(6.0)[::2],
                               np.arange(12.0).reshape(3, 4)[:, 1], np.zeros(3)])
def test_a_vec_spread_per_row_is_numpys_read_only_broadcast(v):
    from lambdad.arraylib import per_row
    m = np.ones((3, 5))
    got = per_row(v, m)
    expected = np.broadcast_to(v[:, None], m.shape)
    assert got.shape == expected.shape and got.tobytes() == expected.tobytes()
    assert not got.flags.writeable  # (never written into by a later operation)
    assert np.shares_memory(got, v)
    with pytest.raises(ValueError):
        got[0, 0] = 1.0


def test_a_vec_spread_per_row_of_a_sparse_cotangent_is_dense():
    from lambdad.arraylib import per_row
    got = per_row(Sparse((2,), 1, 4.0), np.ones((2, 3)))
    assert got.tolist() == [[0.0, 0.0, 0.0], [4.0, 4.0, 4.0]]


def test_sparse_cotangents_scaled_by_a_real_scale_each_entry():
    one = Sparse((4,), 2, 1.5) * -2.0
    assert isinstance(one, Sparse) and one.entries() == ([2], [-3.0])
    several = Sparse.of((4,), [0, 2, 0], [1.0, 0.25, 3.0]) * 4.0
    assert several.entries() == ([0, 2, 0], [4.0, 1.0, 12.0])
    row = Sparse((2, 3), 1, np.array([1.0, 2.0, 3.0])) * 0.5
    assert row.dense().tolist() == [[0.0, 0.0, 0.0], [0.5, 1.0, 1.5]]
