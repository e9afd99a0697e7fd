"""A closure's captured reals and arrays are constants of its derivative (AD.md section 6):
the transformations are told so, and leave out the terms their zero derivative parts
would send or add.  The derivatives stay those of the general rules; a name that a binder
of the closure takes again is no constant there."""

import numpy as np
import pytest

import lambdad
from lambdad.backward import backward_term
from lambdad.forward import forward_term
from lambdad.parser import parse_expr
from lambdad.primitives import PRIMITIVES
from lambdad.printer import print_term
from lambdad.rules import array_rule_term, without_zero_parts, zero_derivative


def test_reverse_mode_sends_nothing_to_a_constant():
    term = parse_expr(r"\x -> x * a + sin a", "<test>")
    assert print_term(backward_term(term, constants=frozenset({"a"}))) == (
        "\\x ->\n"
        "  let (v1, v1_) =\n"
        "    let (x, x_) = x in\n"
        "    let (a, a_) = a in\n"
        "    (x * a, \\a1 -o x_ (a * a1)) in\n"
        "  let (v2, v2_) = let (a, a_) = a in (sin a, \\a1 -o zero) in\n"
        "  (v1 + v2, \\a -o v1_ (1 * a))")
    # without constants, the general rule: a_ receives its share
    assert "a_ (x * a1)" in print_term(backward_term(term))


def test_forward_mode_adds_no_tangent_of_a_constant():
    term = parse_expr(r"\x -> x * a + sin a", "<test>")
    printed = print_term(forward_term(term, constants=frozenset({"a"})))
    assert "(x * a, a * x')" in printed and "(sin a, 0)" in printed
    assert "a'" not in printed.replace("let (a, a') = a in", "")


def test_an_array_rule_leaves_out_the_summands_of_zero_parts():
    matmul = PRIMITIVES["matmul"]
    tangents, backs = {"x'", "y'"}, {"x_", "y_"}
    tangent, cotangent = array_rule_term(matmul, "'"), array_rule_term(matmul, "_")
    assert print_term(without_zero_parts(tangent, {"x'"}, tangents)) == "x @ y'"
    assert print_term(without_zero_parts(tangent, {"y'"}, tangents)) == "x' @ y"
    assert print_term(without_zero_parts(cotangent, {"x_"}, backs)) == "y_ (transpose x @ a)"
    assert without_zero_parts(cotangent, backs, backs) is None
    assert without_zero_parts(tangent, set(), tangents) is tangent


def test_which_primitives_have_a_zero_derivative():
    assert zero_derivative(PRIMITIVES["maximum_share"])
    assert zero_derivative(PRIMITIVES["lt"]) and zero_derivative(PRIMITIVES["size"])
    for name in ("mul", "matmul", "sum", "fst", "map", "grad"):
        assert not zero_derivative(PRIMITIVES[name]), name


PROGRAM = """
-- captured a, and names of the closure that take a again
def shadowed (a : R) (x : R) : R =
  grad (\\y -> (let a = y * 2 in a * a) + a * y) x
def shadowed_by_lambda (a : R) (x : R) : R =
  grad (\\y -> a * (\\a -> a * y) y) x
def shadowed_by_pair (a : R) (x : R) : R =
  grad (\\y -> let (a, b) = (y, a) in a * a * b) x
-- a value bound to constants only is a constant
def through_let (a : R) (x : R) : R =
  grad (\\y -> let c = a * a + 1 in c * y * y) x
-- the same code capturing a real, then a function, in one place
def scaled (c : a) (x : R) : R = grad (\\y -> y * y + fst (y, c)) x
def both (x : R) : R * R = (scaled 2 x, scaled (\\t -> t) x)
-- arrays: a captured matrix, reverse mode and forward over reverse
def product (m : Mat) (c : Vec) : Vec = grad (\\(c : Vec) -> sum (exp (m @ c))) c
def curvature (m : Mat) (c : Mat) : Mat * Mat =
  jvp (grad (\\(c : Mat) -> sum (maximum_rows (m @ transpose c)) * sum (c * c))) c (c * 0 + 1)
"""


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(PROGRAM)


def test_a_name_a_binder_takes_again_is_differentiated(program):
    for _ in range(2):  # (the second call takes the path of code already seen)
        assert program.call("shadowed", (3.0, 5.0)) == pytest.approx(8 * 5 + 3)
        assert program.call("shadowed_by_lambda", (3.0, 5.0)) == pytest.approx(2 * 3 * 5)
        assert program.call("shadowed_by_pair", (3.0, 5.0)) == pytest.approx(2 * 5 * 3)


def test_a_value_of_constants_is_a_constant(program):
    for _ in range(2):
        assert program.call("through_let", (3.0, 5.0)) == pytest.approx(2 * 10 * 5)


def test_one_code_capturing_a_real_then_a_function(program):
    for _ in range(2):
        assert program.call("both", 4.0) == (9.0, 9.0)


def test_gradients_with_a_captured_matrix(program):
    rng = np.random.default_rng(3)
    m, c = rng.standard_normal((5, 3)), rng.standard_normal(3)
    for _ in range(2):
        assert np.allclose(program.call("product", (m, c)), m.T @ np.exp(m @ c))


def test_forward_over_reverse_with_a_captured_matrix(program):
    rng = np.random.default_rng(4)
    m, c = rng.standard_normal((6, 3)), rng.standard_normal((4, 3))

    def gradient(c):
        scores = m @ c.T  # one row per row of m, one column per row of c
        nearest = scores.argmax(axis=1)
        shares = np.zeros_like(c)
        np.add.at(shares, nearest, m)
        return shares * (c * c).sum() + scores.max(axis=1).sum() * 2 * c

    h = 1e-6  # the derivative of the gradient along ones, by central differences
    along = (gradient(c + h) - gradient(c - h)) / (2 * h)
    for _ in range(2):
        g, hv = program.call("curvature", (m, c))
        assert np.allclose(g, gradient(c))
        assert np.allclose(hv, along, atol=1e-5)


# A function called with a constant argument is compiled for any argument: at run time the
# argument's backpropagator is the zero one, and so is each backpropagator sending only to
# it; what would be sent to them is not computed (in a fused body, not even the values
# computed only for them).
CONSTANT_ARGUMENT = (
    "def scaled (x : Vec) (s : R) : Vec =\n"
    "  let h = 2 / s in\n"
    "  let step (y : Vec) _ = h / 2 * (y * x) in\n"
    "  fold step x (range 2)\n"
    "def g (x : Vec) (s : R) : Vec = grad (\\y -> sum (scaled y s)) x\n"
    "def h (x : Vec) (s : R) : Vec * R = grad (\\(y, t) -> sum (scaled y t)) (x, s)\n")


@pytest.mark.parametrize("strategy", ["fused", "factored"])
def test_no_array_work_for_the_share_of_a_constant_argument(monkeypatch, strategy):
    import attrs
    entry = PRIMITIVES["array.mul"]
    products = []

    def counted(*args):
        products.append(args)
        return entry.cotangent_evaluate(*args)

    monkeypatch.setitem(PRIMITIVES._entries, "array.mul",
                        attrs.evolve(entry, cotangent_evaluate=counted))
    program = lambdad.loads(CONSTANT_ARGUMENT)
    program.set_strategy(strategy)
    x = np.array([1.0, 2.0, 3.0])
    # y_{k+1} = (1/s) y_k x, so y_2 = x^3 / s^2, whose derivative in x is 3 x^2 / s^2
    assert np.allclose(program.call("g", (x, 4.0)), 3 * x * x / 16)
    # two steps, each scaling the cotangent by h / 2, then sending it times x to y and times
    # y to x; the share of h (a product and a sum per step) is not computed
    assert len(products) == 6
    products.clear()
    # with s differentiated, its share is computed: a product more per step
    gradient_x, gradient_s = program.call("h", (x, 4.0))
    assert np.allclose(gradient_x, 3 * x * x / 16)
    assert np.isclose(gradient_s, -2 * (x ** 3).sum() / 4 ** 3)
    assert len(products) == 8
