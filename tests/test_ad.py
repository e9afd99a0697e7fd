"""Differentiation end to end: grad/jvp/vjp in the language and through the API, both
strategies, sharing, higher-order code, structured inputs."""

import math

import pytest

import lambdad
from conftest import PROGRAMS
from lambdad.errors import DifferentiationError, LambdadError


def flat(value):
    if isinstance(value, (tuple, list)):
        return [x for item in value for x in flat(item)]
    return [value]


def doubling_chain(n):
    lines = ["def f (x0 : R) : R ="]
    for k in range(1, n + 1):
        lines.append(f"  let x{k} = x{k - 1} + x{k - 1} in")
    lines.append(f"  x{n}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", [1, 5, 10, 12])
def test_doubling_chain_counters(n):
    prog = lambdad.loads(doubling_chain(n))
    (gradient, naive) = prog.grad("f", 1.0, strategy="naive", stats=True)
    assert gradient == 2.0 ** n
    assert naive.bodies_run == 2 ** n - 1
    (gradient, factored) = prog.grad("f", 1.0, strategy="factored", stats=True)
    assert gradient == 2.0 ** n
    assert factored.bodies_run <= 2 * n
    assert factored.bodies_run <= factored.created


def test_deep_sharing_chain_factored_is_linear():
    n = 3000
    text = ["def f (x0 : R) : R ="]
    for k in range(1, n + 1):
        text.append(f"  let x{k} = x{k - 1} * x{k - 1} * 0.5 + sin x{k - 1} in")
    text.append(f"  x{n}")
    prog = lambdad.loads("\n".join(text) + "\n")
    value, gradient, stats = prog.value_and_grad("f", -0.5, stats=True)
    assert math.isfinite(gradient)
    assert stats.bodies_run <= stats.created


def test_forward_equals_reverse_on_reference_programs():
    cases = [("baydin.lam", "f", (2.0, 5.0)), ("jones.lam", "f", (1.0, 2.0)),
             ("bmp.lam", "f", (3.0, 1.0)), ("bmp.lam", "f_shared", (3.0, 1.0)),
             ("quadratic.lam", "f", (1.0, 2.0, 3.0, 4.0))]
    for file, name, point in cases:
        prog = lambdad.load(PROGRAMS / file)
        forward = prog.grad(name, point, mode="forward")
        reverse = prog.grad(name, point)
        naive = prog.grad(name, point, strategy="naive")
        assert flat(forward) == pytest.approx(flat(reverse), rel=1e-12)
        assert flat(naive) == pytest.approx(flat(reverse), rel=1e-12)


CLOSURES = """
def scale (k : R) (x : R) : R = k * x
def twice f x = f (f x)
def compose f g x = f (g x)
def poly (a : R) (x : R) : R = a * x * x + sin x

-- a closure capturing a real: the captured k is a constant
def g1 = grad (scale 3) 2
-- a partial application of a two-argument function, then a higher-order combinator
def g2 = grad (twice (poly 2)) 0.5
def g3 = grad (compose sin (\\x -> x * x)) 1.5
-- a built-in partially applied
def g4 = grad (max 1) 3
def g5 = grad (\\(w, b) -> sum (map (\\x -> w * x + b) [1, 2, 3])) (0.5, 1)
def g6 = grad (\\xs -> fold (\\acc x -> acc * x) 1 xs) [1, 2, 3, 4]
def g7 = grad (\\p -> let (a, b) = p in if a > b then a * b else a - b) (3, 2)
def g8 = grad (\\xs -> sum (map (\\pr -> fst pr * snd pr) (zip xs [4, 5]))) [2, 3]
"""


def test_grad_on_closures_and_higher_order_functions():
    prog = lambdad.loads(CLOSURES)
    assert prog.run("g1") == 3.0
    a, x = 2.0, 0.5
    inner = a * x * x + math.sin(x)
    d_inner = 2 * a * x + math.cos(x)
    assert prog.run("g2") == pytest.approx((2 * a * inner + math.cos(inner)) * d_inner)
    assert prog.run("g3") == pytest.approx(math.cos(1.5 ** 2) * 3.0)
    assert prog.run("g4") == 1.0 or prog.run("g4") == 0.0
    assert prog.run("g5") == pytest.approx((6.0, 3.0))
    assert prog.run("g6") == pytest.approx([24.0, 12.0, 8.0, 6.0])
    assert prog.run("g7") == pytest.approx((2.0, 3.0))
    assert prog.run("g8") == pytest.approx([4.0, 5.0])


def test_gradient_shape_follows_nested_input():
    prog = lambdad.loads("""
def loss (w : [[R]] * [R]) : R =
  let (m, v) = w in
  sum (map (\\row -> sum (map (\\x -> x * x) row)) m) + sum (map (\\x -> 3 * x) v)
""")
    w = ([[1.0, 2.0], [3.0, 4.0]], [5.0, 6.0])
    assert prog.grad("loss", w) == ([[2.0, 4.0], [6.0, 8.0]], [3.0, 3.0])
    assert prog.grad("loss", w, mode="forward") == ([[2.0, 4.0], [6.0, 8.0]], [3.0, 3.0])


def test_gradient_descent_written_in_the_language():
    prog = lambdad.loads("""
def loss (w : R * R) : R =
  let (a, b) = w in
  sum (map (\\p -> let (x, y) = p in (a * x + b - y) ^ 2) [(0, 1), (1, 3), (2, 5)])

def step (rate : R) (g : R * R) (w : R * R) : R * R =
  let (a, b) = w in
  let (ga, gb) = g in
  (a - rate * ga, b - rate * gb)

def train (w : R * R) : R * R =
  fold (\\w i -> step 0.05 (grad loss w) w) w (range 500)

def main = (loss (0, 0), loss (train (0, 0)), train (0, 0))
""")
    before, after, (a, b) = prog.run()  # a triple, as written
    assert after < before / 1000
    assert a == pytest.approx(2.0, abs=1e-3) and b == pytest.approx(1.0, abs=1e-3)


def test_jvp_and_vjp_in_the_language():
    prog = lambdad.loads("""
def f (p : R * R) : R * R = let (x, y) = p in (x * y, sin x)
def j = jvp f (2, 3) (1, 0)
def v = let (value, back) = vjp f (2, 3) in (value, back (1, 0), back (0, 1))
""")
    value, tangent = prog.run("j")
    assert value == pytest.approx((6.0, math.sin(2)))
    assert tangent == pytest.approx((3.0, math.cos(2)))
    value, row1, row2 = prog.run("v")  # a triple, as written
    assert row1 == pytest.approx((3.0, 2.0))
    assert row2 == pytest.approx((math.cos(2), 0.0))


def test_api_jvp_and_vjp():
    prog = lambdad.load(PROGRAMS / "baydin.lam")
    value, derivative = prog.jvp("f", (2.0, 5.0), (1.0, 0.0))
    assert derivative == pytest.approx(5.5)
    value, pullback = prog.vjp("f", (2.0, 5.0))
    assert pullback(2.0) == pytest.approx((11.0, 2 * 1.7163378145367738))


def test_a_function_that_differentiates_is_differentiated():
    prog = lambdad.loads("def h (x : R) : R = x * grad (\\y -> y * x) 1\n"
                         "def main = grad h 2\n")
    assert prog.run() == 4.0  # h x = x * x


def test_constant_exponent_with_negative_base_never_fails():
    prog = lambdad.loads("def loss (w : R) : R = (w * 2 - 5) ^ 2\n")
    assert prog.grad("loss", 1.0) == pytest.approx(2 * (2 - 5) * 2)
    assert prog.grad("loss", 1.0, mode="forward") == pytest.approx(-12.0)


def test_domain_error_in_a_gradient_is_located():
    prog = lambdad.loads("def f (x : R) : R = sqrt x\n")
    with pytest.raises(LambdadError) as info:
        prog.grad("f", 0.0)
    assert info.value.span is not None and info.value.span.line == 1


def test_factored_never_runs_a_body_twice_on_programs():
    for file, name, point in [("baydin.lam", "f", (2.0, 5.0)), ("bmp.lam", "f_shared", (3.0, 1.0))]:
        prog = lambdad.load(PROGRAMS / file)
        _, stats = prog.grad(name, point, stats=True)
        assert stats.bodies_run <= stats.created


def test_jvp_on_closures_partial_applications_and_structured_inputs():
    prog = lambdad.loads("""
def scale (k : R) (v : [R]) : [R] = map (\\x -> k * x) v
def j1 = jvp (scale 3) [1, 2] [1, 0]
def j2 = jvp (\\p -> let (a, b) = p in a * b) (2, 5) (1, 1)
def j3 = jvp (max 2) 3 1
def j4 = jvp (\\xs -> fold (\\acc x -> acc + x * x) 0 xs) [1, 2, 3] [1, 1, 1]
""")
    assert prog.run("j1") == ([3.0, 6.0], [3.0, 0.0])
    assert prog.run("j2") == (10.0, 7.0)
    assert prog.run("j3") == (3.0, 1.0)
    assert prog.run("j4") == (14.0, 12.0)


def test_max_steps_stops_a_run(lambdad_cli):
    result = lambdad_cli("run", "programs/sharing.lam", "--max-steps", "50")
    assert result.returncode == 1
    assert "stopped after 50 steps" in result.stderr


def test_overflow_never_passes_silently_as_a_gradient():
    prog = lambdad.loads("def f (x : R) : R = x * x * x\ndef g (x : R) : R = sqrt (x * x * 1e300 * 1e10)\n")
    for mode in ("reverse", "forward"):
        with pytest.raises(LambdadError, match="inf"):
            prog.grad("f", 1e200, mode=mode)
    assert prog.grad("f", 2.0) == 12.0
