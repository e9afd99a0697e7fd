"""A function that takes a forward-mode derivative (`jvp`) inside is differentiated again
in every composition: only the innermost reverse transformation of a nested image may be
fused, since fusion adds what a body sends to a backpropagator as reals, and after an
inner transformation those are pairs."""

import pytest

import lambdad
from lambdad.differentiate import COMPOSITIONS

SOURCE = """
def cube (x : R) : R = x * x * x
def along (y : R) : R = snd (jvp cube y 1)
def cubes (x : [R]) : R = fold (\\acc y -> acc + y * y * y) 0 x
def alongs (y : [R]) : R = snd (jvp cubes y [1, 0, 2])
def twice = grad (grad along) 2
def nested = grad (\\y -> grad (\\z -> snd (jvp cube z 1)) y) 2
"""


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE)


@pytest.mark.parametrize("strategy", ["fused", "factored"])
def test_reverse_over_reverse_of_a_jvp_inside(strategy):
    # d/dy 3y^2 = 6y, d2/dy2 = 6
    program = lambdad.loads(SOURCE)
    program.set_strategy(strategy)
    assert program.run("twice") == pytest.approx(6.0)
    assert program.run("nested") == pytest.approx(6.0)


@pytest.mark.parametrize("mode", COMPOSITIONS)
def test_every_composition_of_a_hessian_over_a_jvp_inside(program, mode):
    assert program.hessian("along", 2.0, mode=mode) == (12.0, 12.0, [pytest.approx(6.0)])
    rows = program.hessian("alongs", [1.0, 2.0, -0.5], mode=mode)[2]
    assert rows == [pytest.approx(row) for row in ([6, 0, 0], [0, 0, 0], [0, 0, 12])]
