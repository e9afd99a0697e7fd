"""The prelude's pseudo-random numbers (docs/language.md, "Random initial weights"): the
minimal standard generator written with exact reals, checked against integer arithmetic."""

from __future__ import annotations

import pytest

import lambdad

M = 2**31 - 1
PROGRAM = lambdad.loads("def steps (s : R) (n : R) : R = fold (\\t _ -> minstd_next t) s (range n)")


def reference_uniforms(seed: float, n: int) -> list[float]:
    """The numbers `uniforms seed n` must give, computed on Python integers."""
    k = int(round(abs(seed)))
    state = 1 + k % (M - 1)
    state = state * 48271 % M
    state = state * 48271 % M
    numbers = []
    for _ in range(n):
        state = state * 48271 % M
        numbers.append(state / M)
    return numbers


def reference_normals(seed: float, n: int) -> list[float]:
    us = reference_uniforms(seed, 12 * n)
    out = []
    for i in range(n):
        total = 0.0
        for j in range(12):
            total += us[12 * i + j]
        out.append(total - 6)
    return out


def test_the_generator_is_the_minimal_standard_of_cpp_minstd_rand():
    # The C++ standard requires the 10000th number of minstd_rand seeded with 1 to be this.
    assert PROGRAM.call("steps", (1.0, 10000.0)) == 399268537


@pytest.mark.parametrize("seed", [0, 1, 42, 2.6, -7, 2**31 - 3, 2**31 - 2, 2**31, 10**12])
def test_uniforms_are_exactly_the_integer_computation(seed):
    assert PROGRAM.call("uniforms", (float(seed), 50.0)) == reference_uniforms(seed, 50)


def test_normals_are_sums_of_twelve_uniforms():
    assert PROGRAM.call("normals", (3.0, 40.0)) == reference_normals(3, 40)


def test_uniforms_lie_strictly_between_zero_and_one_and_normals_look_standard():
    us = PROGRAM.call("uniforms", (5.0, 3000.0))
    assert all(0 < u < 1 for u in us)
    assert abs(sum(us) / len(us) - 0.5) < 0.02
    zs = PROGRAM.call("normals", (5.0, 2000.0))
    mean = sum(zs) / len(zs)
    variance = sum((z - mean) ** 2 for z in zs) / len(zs)
    assert abs(mean) < 0.1 and abs(variance - 1) < 0.1
    assert max(abs(z) for z in zs) < 6


def test_a_seed_gives_the_same_numbers_and_another_seed_others():
    assert PROGRAM.call("uniforms", (9.0, 5.0)) == PROGRAM.call("uniforms", (9.0, 5.0))
    assert PROGRAM.call("uniforms", (9.0, 5.0)) != PROGRAM.call("uniforms", (10.0, 5.0))


def test_random_initial_weights_train_like_any_others():
    program = lambdad.loads(
        "def loss (ws : [R]) : R = sum (map (\\w -> (w - 1) ^ 2) ws)\n"
        "def start = normals 1 3\n")
    weights = program.run("start")
    gradient = program.grad("loss", weights)
    assert gradient == pytest.approx([2 * (w - 1) for w in weights])
