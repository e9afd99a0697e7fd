"""Repeated API gradients of points of Python reals take a prepared path (the function's
image under ←D found once, the point seeded and read off by code for its shape, the
limits raised only when a run needs them).  It must give what the general path gives, bit
for bit, with the same errors, the same costs and the same protection of deep runs.
"""

import math
import sys

import numpy as np
import pytest

import lambdad
from lambdad.calling import real_inputs, real_point, uncurried_term
from lambdad.syntax import LetPair
from lambdad.prepared import PreparedGradient
from lambdad.errors import render
from lambdad.tape import STRATEGIES
from lambdad.values import written

SOURCE = """\
def real (x : R) : R = x * sin x + exp (x / 3)
def curried (x : R) (y : R) (z : R) : R = let s = x * y in s * s + log z - cos (y * z)
def pair (p : R * R) : R = let (a, b) = p in a / b + a * a
def total (xs : [R]) : R = fold (\\acc x -> acc + x * x * sin x) 0.5 xs
def logged (x : R) : R = 2 * log x
def differentiates (x : R) : R = grad (\\y -> x * y * y) x
def unreached (xs : [R]) : R = let n = fold (\\acc x -> acc + 1) 0 xs in n * n + 2 * head xs
def second (p : R * R * R) : R = let (a, b, c) = p in b * b
def net (w : [[R]] * [R] * R) : R =
  let (m, b, c) = w in fold (\\acc (row, bi) -> acc + tanh (fold (\\s x -> s + x * x) bi row)) c (zip m b)
def pairs (ps : [R * R]) : R = fold (\\acc (x, y) -> acc + x * sin y) 0 ps
def mixed (p : R * (R * R) * [R]) : R = let (a, q, xs) = p in let (b, c) = q in a * b / c + fold (\\s x -> s * x) 1 xs
def two (xs : [R]) (p : R * R) : R = let (a, b) = p in fold (\\s x -> s + a * x) b xs
"""

POINTS = [("real", 0.7), ("real", 3), ("curried", (1.25, -0.5, 2.0)), ("pair", (1.5, 0.25)),
          ("total", [0.5, -1.25, 2.0, 3.5]), ("differentiates", 1.5),
          # inputs nothing reaches: their gradient is 0
          ("unreached", [0.5] * 9), ("second", (1.0, -2.0, 3.0)),
          # reals nested in tuples and lists: prepared for their shape
          ("net", ([[0.5, -1.0], [0.25, 2.0], [1.5, 0.75]], [0.1, -0.2, 0.3], 0.5)),
          ("pairs", [(0.5, 1.0), (2.0, -0.5), (1, 3)]),
          ("mixed", (1.5, (2.0, -4.0), [0.5, 3.0, -1.0])),
          ("two", ([1.0, -2.0, 0.5], (3.0, 0.25)))]


def exact(value):
    """A value with each real as its bits, for comparisons that 0.1 + 0.2 == 0.3 cannot
    pass by luck."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, (tuple, list)):
        return type(value)(exact(v) for v in value)
    return value


def general(name, point, strategy=None):
    """value_and_grad by the general path: a fresh program's first call."""
    return lambdad.loads(SOURCE).value_and_grad(name, point, strategy=strategy, stats=True)


@pytest.mark.parametrize("strategy", [None, *STRATEGIES])
@pytest.mark.parametrize("name, point", POINTS)
def test_the_prepared_path_gives_the_general_results_bit_for_bit(name, point, strategy):
    program = lambdad.loads(SOURCE)
    first = program.value_and_grad(name, point, strategy=strategy, stats=True)
    shape = real_inputs(point)[0]
    assert shape == (0 if not isinstance(point, (tuple, list)) else
                     -1 if name in ("total", "unreached") else
                     len(point) if name in ("curried", "pair", "second") else shape)
    prepared = program._derivatives._gradients[(name, shape, strategy or program.strategy)]
    # a function that differentiates runs on a level: it has no prepared path
    assert isinstance(prepared, PreparedGradient) == (name != "differentiates")
    for _ in range(2):
        again = program.value_and_grad(name, point, strategy=strategy, stats=True)
        assert exact(again[:2]) == exact(first[:2]) == exact(general(name, point, strategy)[:2])
        assert again[2] == first[2]  # the same costs, per level
        assert program.stats() == first[2]
        assert program.strategy == "fused"  # a call's strategy holds for that call only
        assert exact(program.grad(name, point, strategy=strategy)) == exact(first[1])


def test_other_points_of_the_same_shape_and_other_strategies_use_their_own_runs():
    program = lambdad.loads(SOURCE)
    for x in (0.5, 1.5, -2.0):
        assert exact(program.value_and_grad("real", x)) == exact(general("real", x)[:2])
    for xs in ([1.0], [1.0, 2.0, 3.0], [0.25] * 40):
        assert exact(program.value_and_grad("total", xs)) == exact(general("total", xs)[:2])
    fused = program.value_and_grad("curried", (1.0, 2.0, 3.0), stats=True)[2]
    naive = program.value_and_grad("curried", (1.0, 2.0, 3.0), strategy="naive", stats=True)[2]
    assert program.value_and_grad("curried", (1.0, 2.0, 3.0), stats=True)[2] == fused
    assert program.strategy == "fused"
    assert naive == general("curried", (1.0, 2.0, 3.0), "naive")[2] != fused


def test_errors_on_the_prepared_path_are_located_as_on_the_general_path():
    program = lambdad.loads(SOURCE, file="fast.lam")
    assert program.value_and_grad("logged", 2.0)[1] == 1.0
    assert isinstance(program._derivatives._gradients[("logged", 0, "fused")], PreparedGradient)
    with pytest.raises(lambdad.EvalError) as fast:
        program.value_and_grad("logged", -1.0)
    with pytest.raises(lambdad.EvalError) as slow:
        lambdad.loads(SOURCE, file="fast.lam").value_and_grad("logged", -1.0)
    assert fast.value.message == slow.value.message
    assert fast.value.span == slow.value.span is not None
    assert (fast.value.span.line, fast.value.span.col) == (5, 30)  # at `log`
    assert "^" in render(fast.value, {"fast.lam": SOURCE})
    # the program still works afterwards, on the prepared path
    assert program.value_and_grad("logged", 4.0) == (2 * 1.3862943611198906, 0.5)


def _closure_chain(n):
    """A function calling through ``n`` closures, one inside the other: its run nests
    ``n`` Python calls."""
    body = "\n".join(f"  let g{i + 1} = \\y -> g{i} (y * 1.0001) in" for i in range(n))
    return f"def f (x : R) : R =\n  let g0 = \\y -> y + 1 in\n{body}\n  g{n} x\n"


@pytest.fixture
def low_recursion_limit():
    """Python's recursion limit lowered (to 400) for the test, as a process deep in its
    own calls would have it: a run nesting a few hundred calls exceeds it."""
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    yield 400
    sys.setrecursionlimit(saved)


def test_a_prepared_run_that_needs_the_raised_limits_gets_them(low_recursion_limit):
    program = lambdad.loads(_closure_chain(500))
    first = program.value_and_grad("f", 1.0, stats=True)
    prepared = program._derivatives._gradients[("f", 0, "fused")]
    assert isinstance(prepared, PreparedGradient)
    assert prepared(1.0) == first[:2]  # (which makes its tape and seeds)
    with pytest.raises(RecursionError):  # at the process's limit the run cannot finish
        prepared.image((1.0, prepared._seeds[0]))
    assert program.value_and_grad("f", 1.0, stats=True) == first
    assert sys.getrecursionlimit() == low_recursion_limit  # and the limits are put back
    assert first[1] == pytest.approx(1.0001 ** 500)


def test_a_step_limit_set_after_the_first_gradient_still_counts_the_steps():
    program = lambdad.loads(SOURCE)
    program.value_and_grad("real", 1.0)
    program.set_max_steps(2)
    with pytest.raises(lambdad.ResourceError):
        program.value_and_grad("real", 1.0)
    program.set_max_steps(None)
    assert exact(program.value_and_grad("real", 1.0)) == exact(general("real", 1.0)[:2])


def test_repeated_calls_raise_the_limits_only_when_a_run_needs_them(low_recursion_limit):
    program = lambdad.loads(_closure_chain(500) + SOURCE)
    first = program.call("f", 1.0)
    assert program.call("f", 1.0) == first == pytest.approx(1.0001 ** 500 + 1)
    assert sys.getrecursionlimit() == low_recursion_limit
    assert program.call("logged", 2.0) == program.call("logged", 2.0)
    with pytest.raises(lambdad.EvalError) as error:
        program.call("logged", -2.0)
    assert error.value.span is not None and "log" in error.value.message


def _flattened(shape, value):
    if not isinstance(shape, int):  # reals nested in pairs and lists: left to right
        reals = []
        lambdad.values.map_value(value, lambda v: type(v) is float, reals.append)
        return reals
    if shape <= 0:
        return value
    reals = []
    for _ in range(shape - 1):
        reals.append(value[0])
        value = value[1]
    return (*reals, value)


@pytest.mark.parametrize("point", [
    2.0, 3, -0.0, True, 10 ** 400, math.inf, math.nan, "1", None,
    (1.0, 2), (1, 2, 3.5), (2.0, 5.0), (1.0,), (1.0, math.nan), (2.0, 10 ** 400),
    (1.0, (2.0, 3.0)), (True, 1.0), [1.0, 2.0], [0.5], [1, 2], [], [1.0, math.inf]])
def test_the_reals_a_prepared_gradient_seeds_are_those_of_the_runtime_point(point):
    nested, flat = real_point(point), real_inputs(point)
    assert (nested is None) == (flat is None)
    if nested is not None:
        assert flat[0] == nested[0]
        assert exact(flat[1]) == exact(_flattened(*nested))
        assert all(type(r) is float for r in (flat[1] if nested[0] else [flat[1]]))


UNCURRIED = """\
def p'1 = 3
def f (p : R) (x : R) (y : R) : R = p * x + p'1 * log y - sin (p * y)
def g (_ : R) (z : R) = z * z
def h (a : R) = let c = a * a in \\(b : R) -> c * b
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name, point", [("f", (2.0, 5.0, 0.75)), ("g", (1.0, 3.0)),
                                         ("h", (1.5, -2.0))])
def test_a_curried_function_of_a_tuple_binds_its_parameters_by_patterns(name, point, strategy):
    program = lambdad.loads(UNCURRIED)
    adapter = program.points._uncurried(name, len(point))
    lam = program.runtime.function_parts(adapter).lam
    # `h` is not k λs (a `let` comes between): it keeps the adapter of applications
    assert isinstance(lam.body, LetPair) == (name != "h")
    if name == "f":
        assert lam.param not in ("p", "p'1")  # fresh for the body, which uses both
    applied = program.runtime.evaluate(uncurried_term(name, len(point)),
                                       {name: program.value_of(name)})
    x = real_point(point)[1]
    differentiator = program.runtime.differentiator
    program.set_strategy(strategy)
    assert exact(differentiator.grad(adapter, x)) == exact(differentiator.grad(applied, x))
    assert exact(program.runtime.apply(adapter, x)) == exact(program.runtime.apply(applied, x))
    value, gradient = differentiator.grad(applied, x)
    # (the API's gradient is the k-tuple as written, the runtime's k - 1 nested pairs)
    assert exact(program.value_and_grad(name, point, strategy=strategy)) == \
        exact((value, written(gradient, program.points.point_type(name, point))))


def test_forward_gradients_share_one_guard_and_keep_its_protection(low_recursion_limit):
    program = lambdad.loads(_closure_chain(500))
    value, gradient = program.value_and_grad("f", 1.0, mode="forward")
    assert exact((value, gradient)) == exact(program.value_and_grad("f", 1.0))
    assert program.jacobian("f", 1.0, mode="forward").matrix == [[gradient]]
    assert sys.getrecursionlimit() == low_recursion_limit


def _steps_of_one_run(program, run):
    """The smallest step limit under which ``run`` finishes."""
    for steps in range(1, 500):
        program.set_max_steps(steps)
        try:
            run()
        except lambdad.ResourceError:
            continue
        finally:
            program.set_max_steps(None)
        return steps
    raise AssertionError("no step limit lets the run finish")


def test_a_step_limit_applies_to_each_run_of_a_forward_gradient():
    program = lambdad.loads(SOURCE)
    point = (1.25, -0.5, 2.0)
    steps = _steps_of_one_run(program, lambda: program.jvp("curried", point, (1.0, 0.0, 0.0)))
    program.set_max_steps(steps)
    value, gradient = program.value_and_grad("curried", point, mode="forward")  # 3 runs
    program.set_max_steps(None)
    assert exact((value, gradient)) == exact(program.value_and_grad("curried", point,
                                                                    mode="forward"))


@pytest.mark.parametrize("point, shape, reals", [
    ([[1.0, 2.0], [3.0, 4.0]], ("L", 2, ("l", 2)), [1.0, 2.0, 3.0, 4.0]),
    (([1.0], 2), ("t", (("l", 1), None)), [1.0, 2.0]),
    ([(1.0, [2.0]), (3, [4.0])], ("L", 2, ("t", (None, ("l", 1)))), [1.0, 2.0, 3.0, 4.0]),
    ((1.0, (2.0, 3.0)), ("t", (None, ("t", (None, None)))), [1.0, 2.0, 3.0]),
    ([1, 2], ("L", 2, None), [1.0, 2.0]),
    # not of one shape, or holding what is not a finite real: the general path
    ([[1.0], [1.0, 2.0]], None, None), ([[]], None, None), ([[1.0], []], None, None),
    ((1.0, [math.nan]), None, None), ([(1.0, True)], None, None), ((1.0, "x"), None, None),
    ([[10 ** 400]], None, None), ((1.0, (2.0,)), None, None)])
def test_the_shape_of_a_point_of_nested_reals(point, shape, reals):
    found = lambdad.calling.point_shape(point)
    if shape is None:
        assert found is None and real_point(point) is None and real_inputs(point) is None
        return
    assert found == (shape, reals)
    assert all(type(r) is float for r in found[1])
    assert real_inputs(point) == found
    assert real_point(point) == (shape, lambdad.calling.from_python(point))
    assert lambdad.calling.shaped(shape, iter(reals)) == lambdad.calling.from_python(point)


@pytest.mark.parametrize("point, general", [
    ((np.arange(3.0), 16.0), True), ((2.0, np.ones((2, 3)), np.arange(2.0)), True),
    ((np.arange(3.0), np.ones(2)), True),
    # an int, a list, a pair, a real that is not finite: not this path
    ((np.arange(3.0), 16), False), ((np.arange(3.0), [1.0]), False),
    ((np.arange(3.0), (1.0, 2.0)), False), ((np.arange(3.0), math.nan), False),
    ((np.array([1.0, math.inf]), 1.0), False)])
def test_a_tuple_of_arrays_and_reals_is_read_in_one_pass(point, general, monkeypatch):
    """A tuple of arrays and reals (a Vec and a size) is read without the general walk,
    into what that walk makes of it; any other tuple is left to it."""
    walked = lambdad.calling.point_shape(point)
    expected = None if walked is None else (
        walked[0], lambdad.calling.shaped(walked[0], iter(walked[1])))
    flat = real_inputs(point)
    monkeypatch.setattr(lambdad.calling, "point_shape", lambda point: None)
    found = real_point(point)
    if not general:
        assert found is None  # (the walk was needed, or refuses it)
        return
    assert found is not None and found[0] == expected[0]
    assert _bits(found[1]) == _bits(expected[1])
    assert flat[0] == walked[0] and _bits(flat[1]) == _bits(walked[1]) == _bits(list(point))


def _bits(value):
    """``value`` (reals and arrays in tuples and lists) with its reals and arrays as bits."""
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.tobytes())
    return exact(type(value)(map(_bits, value)) if isinstance(value, (tuple, list)) else value)


def test_a_point_nested_too_deep_takes_the_general_path():
    point = 1.0
    for _ in range(40):
        point = [point]
    assert lambdad.calling.point_shape(point) is None and real_point(point) is None
    program = lambdad.loads("def f (x : " + "[" * 40 + "R" + "]" * 40 + ") : R = 1")
    assert program.call("f", point) == 1.0


def test_nested_points_of_other_lengths_are_prepared_for_their_own_shape():
    program = lambdad.loads(SOURCE)
    points = [([[0.5, -1.0]], [0.1], 0.5), ([[0.5, -1.0, 2.0]] * 4, [0.1, 0.2, 0.3, 0.4], 1.0),
              ([[0.5, -1.0]], [0.1], -0.5)]
    for point in points * 2:
        assert exact(program.value_and_grad("net", point)) == exact(general("net", point)[:2])
        assert exact(program.call("net", point)) == exact(lambdad.loads(SOURCE).call("net", point))
    shapes = {key[1] for key in program._derivatives._gradients}
    assert shapes == {("t", (("L", 1, ("l", 2)), ("l", 1), None)),
                      ("t", (("L", 4, ("l", 3)), ("l", 4), None))}
    assert all(isinstance(prepared, PreparedGradient) for prepared in program._derivatives._gradients.values())
    assert {key[1] for key in program.points._plans} == shapes


def test_prepared_caches_start_again_when_points_of_many_shapes_fill_them():
    program = lambdad.loads(SOURCE)
    for n in range(1, 300):
        point = ([1.0] * n, (0.5, 2.0))
        assert program.value_and_grad("two", point) == ((n * 0.5 + 2.0), ([0.5] * n, (n, 1.0)))
        assert len(program._derivatives._gradients) <= 256 and len(program.points._plans) <= 256


def test_hessian_vector_products_of_nested_points_are_prepared_and_agree():
    program = lambdad.loads(SOURCE)
    point = ([[0.5, -1.0], [0.25, 2.0]], [0.1, -0.2], 0.5)
    direction = ([[1.0, 0.0], [0.5, -1.0]], [0.0, 2.0], 1.0)
    first = program.hvp("net", point, direction)
    shape = real_inputs(point)[0]
    assert program._derivatives._products[("net", shape, "fused")] is not None
    assert exact(program.hvp("net", point, direction)) == exact(first) == \
        exact(lambdad.loads(SOURCE).hvp("net", point, direction))
    # a direction of another shape is the general path's to refuse
    with pytest.raises(lambdad.UsageError):
        program.hvp("net", point, ([[1.0, 0.0]], [0.0], 1.0))


def test_a_gradient_at_a_nested_point_that_overflows_is_reported_as_by_the_general_path():
    source = "def o (p : [R] * R) : R = let (xs, c) = p in fold (\\acc x -> acc + c * x) 0 xs\n"
    program = lambdad.loads(source)
    assert program.value_and_grad("o", ([1.0, 2.0], 3.0)) == (9.0, ([3.0, 3.0], 3.0))
    assert isinstance(program._derivatives._gradients[("o", real_inputs(([1.0, 2.0], 3.0))[0], "fused")],
                      PreparedGradient)
    overflowing = ([1e308, 1e308], 1e-10)  # the value is finite, c's adjoint is not
    with pytest.raises(lambdad.EvalError) as fast:
        program.value_and_grad("o", overflowing)
    with pytest.raises(lambdad.EvalError) as slow:
        lambdad.loads(source).value_and_grad("o", overflowing)
    assert fast.value.message == slow.value.message
    assert "(p.1 = inf): adjoints summed to an overflow" in fast.value.message
