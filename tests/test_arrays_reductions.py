"""The reductions along an axis of a Mat (sum_rows, sum_cols, maximum_rows, logsumexp_rows
and the derivatives that use them) agree with NumPy's definitions at every shape: small
ones, which NumPy reduces itself, and large ones of few or many columns, which arraylib
computes by a product with ones or by a running maximum over the columns."""

import numpy as np
import pytest

from lambdad import arraylib, loads

# (rows, columns): below the size reduced by the BLAS, above it with few columns (a running
# maximum) and above it with many (NumPy's own maximum)
SHAPES = [(3, 4), (1, 7), (5000, 1), (5000, 2), (700, 9), (600, 16), (300, 17), (40, 300)]


@pytest.fixture(params=SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def m(request):
    rows, cols = request.param
    return np.random.default_rng(rows * 1000 + cols).normal(size=(rows, cols))


def test_sums_and_maxima_of_rows_and_columns(m):
    np.testing.assert_allclose(arraylib.sum_rows(m), m.sum(axis=1), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(arraylib.sum_cols(m), m.sum(axis=0), rtol=1e-13, atol=1e-12)
    top = arraylib.maximum_rows(m)
    assert np.array_equal(top, m.max(axis=1))
    top[0] += 1  # a fresh array, not a view of m
    assert np.array_equal(m.max(axis=1)[1:], arraylib.maximum_rows(m)[1:])
    shifted = m - m.max(axis=1, keepdims=True)
    expected = m.max(axis=1) + np.log(np.exp(shifted).sum(axis=1))
    np.testing.assert_allclose(arraylib.logsumexp_rows(m), expected, rtol=1e-13)
    np.testing.assert_allclose(arraylib.softmax(m),
                               np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True),
                               rtol=1e-12)


def test_a_maximum_row_share_counts_its_ties(m):
    m = m.copy()
    m[::3, -1] = m[::3, 0]  # ties in every third row (where there are two columns or more)
    m[-1, :] = 2.0  # a row all ties
    top = m.max(axis=1)
    ties = m == top[:, None]
    share = arraylib.maximum_share(m, top)
    assert np.array_equal(share, ties / ties.sum(axis=1, keepdims=True))


def test_a_non_finite_element_still_gives_a_non_finite_result():
    m = np.ones((5000, 3))
    m[17, 1] = np.inf
    m[40, 2] = np.nan
    assert arraylib.sum_rows(m)[17] == np.inf and np.isnan(arraylib.sum_rows(m)[40])
    assert arraylib.maximum_rows(m)[17] == np.inf and np.isnan(arraylib.maximum_rows(m)[40])
    assert np.isnan(arraylib.sum_cols(m)[2])


def test_gradients_through_the_reductions_at_a_large_shape():
    program = loads("def f (m : Mat) : R = sum (sum_rows (m * m)) + sum (logsumexp_rows m)"
                    " - sum (maximum_rows m) + sum (sum_cols m * sum_cols m)\n")
    m = np.random.default_rng(1).normal(size=(2000, 5))
    value, gradient = program.value_and_grad("f", m)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    argmax = m == m.max(axis=1, keepdims=True)
    # (logsumexp_rows is the maximum plus the log of the shifted sum: the maxima cancel)
    assert value == pytest.approx((m * m).sum() + np.log(e.sum(axis=1)).sum()
                                  + (m.sum(axis=0) ** 2).sum(), rel=1e-12)
    expected = 2 * m + e / e.sum(axis=1, keepdims=True) - argmax \
        + 2 * m.sum(axis=0)[None, :]
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-10, atol=1e-10)
