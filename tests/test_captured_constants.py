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


# A closure made at every call (a partial application over the call's data) capturing
# top-level functions: after the first call its image is its unit applied to the data made
# constants and the functions' kept images, without looking at its λ again.
CAPTURING_FUNCTIONS = (
    "def dist2 (u : R) (v : R) : R = (u - v) * (u - v) + 1\n"
    "def pot (cs : [R]) (x : R) : R = sum (map (\\c -> 1 / dist2 c x) cs)\n"
    "def force (w : R) : R = grad (pot [w, 3]) 0.5\n"
    "def apply (f : R -> R) (x : R) : R = f x * x\n"
    "def plain_then_not (w : R) : R * R =\n"
    "  (grad (apply (\\y -> y * w)) 2, grad (apply (\\y -> grad (\\z -> z * z * y) y)) 2)\n"
    "def not_then_plain (w : R) : R * R =\n"
    "  (grad (apply (\\y -> grad (\\z -> z * z * y) y)) 2, grad (apply (\\y -> y * w)) 2)\n")


def test_a_closure_capturing_functions_is_not_looked_at_again():
    from conftest import Calls
    from lambdad.images import Images

    program = lambdad.loads(CAPTURING_FUNCTIONS)

    def expected(w):  # d/dx of 1/((w - x)^2 + 1) + 1/((3 - x)^2 + 1) at x = 0.5
        return sum(2 * (c - 0.5) / ((c - 0.5) ** 2 + 1) ** 2 for c in (w, 3.0))

    assert program.call("force", 1.0) == pytest.approx(expected(1.0))
    with Calls(Images._specialised) as looked_at:
        for w in (2.0, -1.5, 7.0):
            assert program.call("force", w) == pytest.approx(expected(w))
    assert looked_at.count == 0


@pytest.mark.parametrize("name", ["plain_then_not", "not_then_plain"])
def test_the_same_code_capturing_a_function_that_differentiates(name):
    # `apply f` captures a closure that does not differentiate, then one that does, in the
    # same place: the second has no kept image and takes the general path
    program = lambdad.loads(CAPTURING_FUNCTIONS)
    for _ in range(2):
        pair = program.call(name, 3.0)
        assert (pair if name == "plain_then_not" else pair[::-1]) == pytest.approx((12.0, 24.0))


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_list_of_constants_made_at_once_is_what_the_general_walk_makes(mode):
    from lambdad.images import _constant, _list_of_constants
    from lambdad.reals import is_real
    from lambdad.values import map_value

    for data in ([1.5, -2.0], [(1.0, 2.0), (3.0, -4.5)]):
        made = _list_of_constants(data, mode)
        assert made == map_value(data, is_real, lambda r: _constant(r, mode))
    # anything else is left to the general walk
    for data in ([], [1.0, (2.0, 3.0)], [(1.0, 2.0), (3.0, [4.0])], [[1.0]], [(1.0, 2.0, 3.0)]):
        assert _list_of_constants(data, mode) is None
