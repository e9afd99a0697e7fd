"""Array work computed once: a rule's value shared by its tangent and its backpropagator
(maximum_rows' share of the maximum, under forward over reverse), the same array
operation on the same operands in one function, `1 * x` of an array, and the share of a
maximum without ties — each counted by a profile hook on lambdad/arraylib.py, with the
numbers those of a formula."""

import numpy as np
import pytest
from conftest import Calls

import lambdad
from lambdad import arraylib
from lambdad.primitives import PRIMITIVES


NEAREST = """
def cost (p : Mat) (c : Mat) : R = sum (maximum_rows (p @ transpose c))
def nearest (p : Mat) (c : Mat) : R =
  sum (maximum_rows (p @ transpose (2 * c) - sum_rows (c * c)))
def newton (p : Mat) (c : Mat) : Mat =
  let (j, h) = jvp (grad (nearest p)) c (c * 0 + 1) in j / h
"""


@pytest.fixture(scope="module")
def nearest():
    return lambdad.loads(NEAREST)


def _points(n=40, k=5, d=3):
    rng = np.random.default_rng(7)
    p = rng.random((n, d))
    return p, p[-k:].copy()


def test_forward_over_reverse_computes_the_share_of_a_row_maximum_once(nearest):
    p, c = _points()
    nearest.call("newton", (p, c))  # (compiled)
    with Calls(arraylib.maximum_share) as shares:
        result = np.asarray(nearest.call("newton", (p, c)))
    # its tangent and its backpropagator both use it: once, not once each
    assert shares.count == 1
    # the formula: s = 2 p c^T - |c|^2, S the one-hot share of each row's maximum;
    # f = sum of the maxima, df/dc = 2 S^T p - 2 c * count, its derivative along ones
    # -2 count (the centroids are points: each is nearest to one at least)
    s = 2 * p @ c.T - (c * c).sum(axis=1)
    share = (s == s.max(axis=1, keepdims=True)).astype(float)
    count = share.sum(axis=0)[:, None]
    j = 2 * (share.T @ p) - 2 * c * count
    np.testing.assert_allclose(result, j / (-2 * count + 0 * c), rtol=1e-13)


def test_reverse_mode_of_a_row_maximum_computes_its_share_once(nearest):
    p, c = _points()
    with Calls(arraylib.maximum_share) as shares:
        value, (gp, gc) = nearest.value_and_grad("cost", (p, c))
    assert shares.count == 1
    s = p @ c.T
    share = (s == s.max(axis=1, keepdims=True)).astype(float)
    assert value == pytest.approx(s.max(axis=1).sum(), rel=1e-14)
    np.testing.assert_allclose(np.asarray(gc), share.T @ p, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(gp), share @ c, rtol=1e-14)


def test_the_same_array_operation_on_the_same_operands_runs_once():
    p = lambdad.loads("def f (m : Mat) : R = sum (sum_rows m) * sum (sum_rows m)")
    m = np.arange(12.0).reshape(3, 4)
    p.call("f", m)
    with Calls(arraylib.sum_rows) as sums:
        assert p.call("f", m) == m.sum() ** 2
    assert sums.count == 1


def test_one_times_an_array_is_the_array():
    p = lambdad.loads("def f (x : Vec) (y : Vec) : Vec = 1 * x + y * 1")
    x, y = np.array([1.0, 2.0]), np.array([0.5, -3.0])
    p.call("f", (x, y))
    # (the elementwise entries of two arguments share the code of their evaluation)
    with Calls(PRIMITIVES["array.add"].evaluate) as operations:
        assert np.array_equal(p.call("f", (x, y)), x + y)
    assert operations.count == 1  # the addition; no product by 1


def test_the_share_of_a_row_maximum_without_ties_is_one_at_the_maximum():
    m = np.random.default_rng(3).normal(size=(2000, 7))
    top = m.max(axis=1)
    share = arraylib.maximum_share(m, top)
    assert np.array_equal(share, (m == top[:, None]).astype(float))


def test_the_share_of_a_row_maximum_counts_ties_when_a_row_has_no_maximum():
    # a row whose maximum is NaN has no element equal to it, a row with two ties two: as
    # many as rows in all, yet the tied row's shares are halves (and the NaN row's 0/0)
    m = np.array([[1.0, 2.0, 0.0], [np.nan, 1.0, 0.0], [3.0, 3.0, 1.0]])
    top = np.array([2.0, np.nan, 3.0])
    with np.errstate(all="ignore"):
        share = arraylib.maximum_share(m, top)
    assert np.array_equal(share[[0, 2]], [[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    assert np.isnan(share[1]).all()


PRODUCTS = """
def shifted (p : Mat) (q : Mat) : Mat = p @ q - 1
def twice (p : Mat) (q : Mat) : Mat = (p @ q - 1) + p @ q
def kept (p : Mat) (q : Mat) : Mat = let m = p @ q in (m - 1) * m
def huge (p : Mat) (q : Mat) : R = sum (maximum_rows (p @ q * 1e308 * 10))
"""


@pytest.fixture(scope="module")
def products():
    return lambdad.loads(PRODUCTS, "products.lam")


P = np.array([[1.0, 2.0], [3.0, -4.0], [0.5, 0.25]])
Q = np.array([[2.0, 0.0, -1.0], [1.0, 1.0, 3.0]])


@pytest.mark.parametrize("name, expected", [
    ("shifted", P @ Q - 1), ("twice", (P @ Q - 1) + P @ Q), ("kept", (P @ Q - 1) * (P @ Q))])
def test_an_operation_writing_into_a_new_array_gives_numpys_values(products, name, expected):
    p, q = P.copy(), Q.copy()
    for _ in range(2):  # (compiled, then run again)
        assert np.array_equal(products.call(name, (p, q)), expected)
    assert np.array_equal(p, P) and np.array_equal(q, Q)  # the inputs as they were


def test_a_new_array_written_into_is_not_found_computed_again(products):
    # `p @ q` computed once would have been the product less 1 by the time it is added
    with Calls(arraylib.matmul) as products_made:
        products.call("twice", (P, Q))
    assert products_made.count == 2


def test_an_overflow_written_into_a_new_array_is_located_at_its_operation(products):
    with pytest.raises(lambdad.LambdadError) as caught:
        products.call("huge", (P, Q))
    error = caught.value
    assert "not finite" in str(error)
    # the product by 1e308 (written into the matrix product), as when it made an array
    assert (error.span.line, error.span.col, error.span.end_col) == (5, 55, 68)


SQUARES = """
def squared (p : Mat) (q : Mat) : Mat = let z = p @ q - 1 in z * z
def reused (p : Mat) (q : Mat) : Mat = let z = p @ q - 1 in z * z + z
def nested (p : Mat) (q : Mat) : Mat = let z = p @ q - 1 in (z * z) * z
def total (p : Mat) (q : Mat) : R = let z = p @ q - 1 in sum (z * z)
"""


@pytest.fixture(scope="module")
def squares():
    return lambdad.loads(SQUARES, "squares.lam")


@pytest.mark.parametrize("name, formula", [
    ("squared", lambda z: z * z), ("reused", lambda z: z * z + z),
    ("nested", lambda z: (z * z) * z)])
def test_a_name_read_only_by_one_operation_is_written_into_with_numpys_values(
        squares, name, formula):
    p, q = P.copy(), Q.copy()
    for _ in range(2):  # (compiled, then run again)
        assert np.array_equal(squares.call(name, (p, q)), formula(P @ Q - 1))
    assert np.array_equal(p, P) and np.array_equal(q, Q)


def test_squaring_a_let_bound_product_makes_no_second_array(squares):
    # `z * z` writes into z, which nothing else reads: the call's arrays at their peak are
    # the product alone (and the operands), not the product and its square
    import tracemalloc

    rng = np.random.default_rng(3)
    p, q = rng.random((500, 20)), rng.random((20, 500))
    squares.call("total", (p, q))  # (compiled)
    tracemalloc.start()
    try:
        value = squares.call("total", (p, q))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    z = p @ q - 1
    assert value == pytest.approx(float(np.sum(z * z)), rel=1e-12)
    assert peak < 1.5 * z.nbytes


def test_an_overflow_in_an_untested_operation_writing_into_an_array_is_located(squares):
    # `z * z` writes into z untested (the sum after it tests the elements): an overflow
    # there is still reported at the product
    big = np.full((2, 2), 1e200)
    with pytest.raises(lambdad.LambdadError) as caught:
        squares.call("total", (big, np.eye(2)))
    error = caught.value
    assert "not finite" in str(error)
    assert (error.span.line, error.span.col) == (5, 63)
