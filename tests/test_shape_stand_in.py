"""A backpropagator keeps of an array operand what its body reads: where that is the shape
alone (``sum_to x a`` of an elementwise rule, ``size x``), a stand-in of the shape; where
only a derivative with respect to a constant reads it, nothing once that constant's
backpropagator is zero.  So the forward phase of a long run does not hold every such
operand until the backward phase."""

import tracemalloc

import numpy as np

import lambdad
from lambdad import arraylib
from lambdad.guard import PrimSite
from lambdad.lineargen import _kept, _reads
from lambdad.primitives import MUL, SUM_TO


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


def test_the_zero_tangent_of_a_large_array_is_a_stand_in_of_zeros():
    # (→D pairs a constant array with `spread v 0`: made each call, for data and masks of
    # the size of the program's arrays)
    x = np.arange(6000.0).reshape(2, 3000)
    zeros = arraylib.spread(x, 0.0)
    assert zeros.shape == x.shape and not zeros.flags.writeable
    assert not zeros.any() and not np.signbit(zeros).any()
    assert zeros.strides == (0, 0) and not np.shares_memory(zeros, x)
    # what it meets computes what filled zeros give, and is a new array
    assert np.array_equal(x * zeros, x * np.zeros_like(x))
    assert np.array_equal(arraylib.sum_to(np.ones(3000), zeros), np.zeros(3000))
    # -0 keeps its sign, another real fills, and a small array is filled as before
    assert np.signbit(arraylib.spread(x, -0.0)).all()
    assert (arraylib.spread(x, 1.5) == 1.5).all() and arraylib.spread(x, 1.5).flags.writeable
    small = arraylib.spread(np.ones(10), 0.0)
    assert small.flags.writeable and small.strides == (8,) and not small.any()


def test_a_jvp_through_large_constant_arrays_returns_arrays_users_may_write():
    program = lambdad.loads(
        "def f (m : Mat) (x : Vec) : Vec = m @ (x * x)\n"
        "def t (m : Mat) (x : Vec) : Vec = snd (jvp (f m) x (x * 0 + 1))\n"
        "def z (m : Mat) (x : Vec) : Vec = snd (jvp (\\y -> m @ x) x x)\n")
    m = np.arange(3000.0 * 4).reshape(3000, 4) / 1000
    x = np.linspace(-1, 1, 4)
    tangent = program.call("t", (m, x))
    assert np.allclose(tangent, m @ (2 * x))
    zero = program.call("z", (m, x))  # (the tangent of a constant: a stand-in inside)
    assert zero.shape == (3000,) and not zero.any()
    zero[0] = 1.0  # (what the API returns is the caller's own array)


def test_what_a_backpropagator_keeps_of_each_value_it_captures():
    mul = PrimSite(MUL, None, None)
    lines = [
        (1, "t2 = _k7(c1, v0)", PrimSite(SUM_TO, None, None), (), ("c1", "v0")),
        (1, "if c5 is not _Z:", None, (), ("c5",)),
        (2, "t3 = _k8(c2, t2)", mul, (), ("c2", "t2")),
        (2, "t6 = _k7(c4, t3)", PrimSite(SUM_TO, None, None), (), ("c4", "t3")),
        (2, "_st(c5, t6)", None, (), ("c5", "t6")),
        (1, "t4 = _k8(c3, c4)", mul, (), ("c3", "c4")),
        (1, "_st(c6, t4)", None, (), ("c6", "t4")),
    ]
    captured = [("x", "c1"), ("k", "c2"), ("y", "c3"), ("z", "c4"), ("g", "c5"), ("h", "c6")]
    values = ["t10", "t11", "t12", "t13", "v9", "v8"]
    assert _reads(lines)["c2"] == {"c5"}
    assert _kept(captured, values, _reads(lines)) == [
        "_standin(t10)",                    # read for its shape alone
        "(t11 if v9 is not _Z else None)",  # only for what g is sent
        "t12", "t13",                       # read outside the guards
        "v9", "v8"]


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


def test_runge_kutta_steps_do_not_hold_what_only_the_step_size_would_need():
    # GradBench's ode: s steps of 4 stages; the step size h = 2 / s is captured, and its
    # backpropagator is zero (s is not differentiated), so the stages' arrays that only
    # its derivative reads (k1 in h / 2 * k1) are not kept.
    from lambdad.gradbench import PROGRAMS

    program = lambdad.load(PROGRAMS / "ode.lam")
    x = np.linspace(0.5, 1.0, 10_000)
    expected = program.call("gradient", (x, 20.0))
    tracemalloc.start()
    try:
        gradient = program.call("gradient", (x, 20.0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(gradient, expected)
    # 7.9 MB: what x's derivative needs, one array of 80 kB per stage (x times the shifted
    # y); 20 MB when every operand of the steps was kept
    assert peak < 10_000_000
