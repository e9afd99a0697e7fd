"""A backpropagator keeps of an array operand what its body reads: where that is the shape
alone (``sum_to x a`` of an elementwise rule, ``size x``), a stand-in of the shape, so the
forward phase of a long run does not hold every such operand until the backward phase."""

import tracemalloc

import numpy as np

import lambdad
from lambdad import arraylib
from lambdad.lineargen import _read_for_shape_only
from lambdad.parser import parse_expr


def test_the_stand_in_has_the_shape_and_no_memory_of_its_own():
    x = np.arange(6000.0).reshape(2, 3000)
    stand_in = arraylib.shape_stand_in(x)
    assert type(stand_in) is np.ndarray and stand_in.shape == x.shape
    assert not stand_in.flags.writeable
    assert not np.shares_memory(stand_in, x)
    assert stand_in.base is not None and len(stand_in.base) == 8  # one zero, zero strides
    assert arraylib.sum_to(stand_in, np.ones((2, 3000))).shape == (2, 3000)
    assert arraylib.sum_to(stand_in, 2.0).shape == (2, 3000)


def test_small_arrays_and_reals_are_kept_as_they_are():
    small = np.ones(10)
    assert arraylib.shape_stand_in(small) is small
    assert arraylib.shape_stand_in(2.5) == 2.5


def test_the_variables_read_for_their_shape_alone():
    body = parse_expr("x_ (sum_to x a) <+> y_ (sum_to y (x * a)) <+> z_ (size z * a)")
    assert _read_for_shape_only(body) == {"y", "z"}


_STEPS = """
def f (x : Vec) (s : R) : R =
  sum (fold (\\(y : Vec) _ -> y + (y + 1) + 2 * (x + y)) x (range s))
"""


def test_a_long_run_does_not_hold_the_operands_read_for_their_shape():
    # Each of the 50 steps adds three arrays of 10 000 elements (80 kB each); the sums'
    # backpropagators read only their shapes, and the product's constant partial needs
    # nothing of its operand.  Holding them would take 50 * 4 * 80 kB = 16 MB.
    program = lambdad.loads(_STEPS)
    x = np.linspace(0.0, 1.0, 10_000)
    expected = program.value_and_grad("f", (x, 50.0))
    tracemalloc.start()
    try:
        value, gradient = program.value_and_grad("f", (x, 50.0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value == expected[0]
    assert np.array_equal(gradient[0], expected[1][0])
    assert peak < 2_000_000  # (0.5 MB: the cotangents of one step)


def test_the_gradient_is_that_of_the_list_program():
    arrays = lambdad.loads(_STEPS)
    x = np.linspace(0.0, 1.0, 3000)
    _, (gradient, _) = arrays.value_and_grad("f", (x, 4.0))
    # y_{k+1} = 4 y_k + 2 x + 1: dy_4/dx per element is 4^4 + 2 (4^3 + 4^2 + 4 + 1)
    assert np.allclose(gradient, 4.0 ** 4 + 2 * (4 ** 3 + 4 ** 2 + 4 + 1))
