"""Nested differentiation (AD.md section 9): grad, jvp and vjp compose in any combination and
to any depth, with exact results and no perturbation confusion."""

import math

import pytest

import lambdad
from lambdad.errors import LambdadError


def run(source: str, entry: str = "main"):
    return lambdad.loads(source).run(entry)


# ---------------------------------------------------------------- the examples of the spec


def test_second_derivative_through_a_closure_over_the_outer_variable():
    assert run(r"def main = grad (\x -> grad (\y -> x * y * y) x) 3") == 12.0


def test_perturbation_confusion_gives_one_not_two():
    # Siskind and Pearlmutter: d/dx (x * d/dy (x + y)) = 1; confusing the levels gives 2.
    assert run(r"def main = grad (\x -> x * grad (\y -> x + y) 1) 1") == 1.0
    assert run(r"def main = snd (jvp (\x -> x * snd (jvp (\y -> x + y) 1 1)) 1 1)") == 1.0


def test_jvp_of_grad_is_the_hessian_vector_product():
    source = r"""
def f (p : R * R) : R = let (x, y) = p in x * x * y + y * y * y
def main = jvp (grad f) (1, 2) (1, 0)
"""
    value, product = run(source)
    assert value == (4.0, 13.0)       # ∇f = (2xy, x² + 3y²)
    assert product == (4.0, 2.0)      # H = [[2y, 2x], [2x, 6y]] times (1, 0)


def test_reverse_over_forward():
    assert run(r"def main = grad (\x -> snd (jvp (\y -> y * y * x) x 1)) 3") == 12.0


def test_reverse_over_reverse_and_forward_over_forward():
    assert run(r"def main = grad (grad (\x -> sin x * x)) 2") == pytest.approx(
        -math.sin(2) * 2 + 2 * math.cos(2), abs=1e-15)
    assert run(r"def main = snd (jvp (\x -> snd (jvp (\y -> x * y * y) x 1)) 3 1)") == 12.0


def test_third_derivative_of_a_scalar_function():
    assert run(r"def main = grad (grad (grad (\x -> x * x * x * x))) 2") == 48.0
    assert run(r"def main = snd (jvp (grad (grad (\x -> x ^ 4))) 2 1)") == 48.0


def test_a_pull_back_is_differentiated():
    # the pull-back of y -> x y² at 3, applied to 1, is 6x
    assert run(r"def main = grad (\x -> let (_, pb) = vjp (\y -> x * y * y) 3 in pb 1) 2") == 6.0
    # a pull-back made outside is linear in its cotangent
    assert run(r"def main = let (_, pb) = vjp (\x -> x * x) 3 in grad (\c -> pb c) 2") == 6.0


def test_closures_capturing_outer_values_and_maps():
    source = r"def main = grad (\x -> sum (map (\y -> grad (\z -> z * x * y) 1) [x, 2 * x])) 3"
    assert run(source) == 18.0  # d/dx (x·x + x·2x)


def test_functions_returning_functions():
    # Manzyuk et al.: the derivative of a function-valued function is a function
    assert run(r"def main = let (f, t) = jvp (\x -> \y -> x * y * x) 2 1 in (f 5, t 5)") == (
        20.0, 20.0)
    assert run(r"def main = grad (\x -> let (_, t) = jvp (\a -> \y -> a * y * a) x 1 in t x) 2"
               ) == 8.0


def test_partial_applications_of_grad_nest():
    value, second = run(r"def main = jvp (grad sin) 1 1")
    assert value == math.cos(1.0) and second == -math.sin(1.0)


def test_nesting_through_top_level_definitions_and_the_prelude():
    source = r"""
def d (f : R -> R) (x : R) : R = grad f x
def cube (x : R) : R = x * x * x
def main = (d (d cube) 2, d (\x -> sum [x * x, d cube x]) 1)
"""
    assert run(source) == (12.0, 8.0)


def test_derivatives_of_kinks_and_constant_exponents_stay_defined():
    assert run(r"def main = grad (\x -> grad (\y -> relu y * x) x) 2") == 1.0
    assert run(r"def main = grad (grad (\w -> (w * 2 - 5) ^ 2)) 1") == 8.0


# ---------------------------------------------------------------- API, strategies, stats


def test_api_gradient_of_a_function_that_differentiates():
    prog = lambdad.loads("def slope (x : R) : R = grad (\\y -> y * y * x) x\n")
    assert prog.grad("slope", 3.0) == 12.0
    assert prog.grad("slope", 3.0, mode="forward") == 12.0
    _, pullback = prog.vjp("slope", 3.0)
    assert pullback(1.0) == 12.0
    assert prog.jvp("slope", 3.0, 1.0) == (18.0, 12.0)


@pytest.mark.parametrize("strategy", ["factored", "naive"])
def test_strategies_agree_and_stats_are_per_level(strategy):
    prog = lambdad.loads(r"def f (x : R) : R = grad (\y -> sin (y * x) * y) x")
    value, gradient, stats = prog.value_and_grad("f", 0.7, strategy=strategy, stats=True)
    assert len(stats.levels) == 2
    assert stats.created == sum(level.created for level in stats.levels)
    if strategy == "factored":
        for level in stats.levels:
            assert level.bodies_run <= level.created
    assert gradient == pytest.approx(
        lambdad.loads(r"def f (x : R) : R = grad (\y -> sin (y * x) * y) x").grad(
            "f", 0.7, strategy="factored"), rel=1e-12)


def test_naive_stays_naive_on_an_outer_level():
    # the outer level's tape: (x * x) shared by two uses, each a path for the naive phase
    source = r"def f (x : R) : R = let s = x * x in s * s * grad (\y -> y * x) 1"
    prog = lambdad.loads(source)
    _, _, factored = prog.value_and_grad("f", 1.5, strategy="factored", stats=True)
    _, _, naive = prog.value_and_grad("f", 1.5, strategy="naive", stats=True)
    assert naive.levels[0].bodies_run > factored.levels[0].bodies_run


def test_differentiating_with_respect_to_a_function_is_a_located_error():
    prog = lambdad.loads("def main = grad (\\f -> 1) sin\n")
    with pytest.raises(LambdadError, match="function-typed input") as info:
        prog.run()
    assert info.value.span is not None and info.value.span.line == 1


def test_first_order_stats_are_unchanged():
    prog = lambdad.loads("def f (x : R) : R = x * x + sin x\n")
    _, stats = prog.grad("f", 1.0, stats=True)
    assert str(stats).splitlines()[0].startswith("backpropagators created:")
    assert len(stats.levels) == 1
