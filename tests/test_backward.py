"""←D, backpropagation with linear negation (AD.md section 3; Brunel, Mazza, Pagani), as
specifications: source in, transformed program out.

Expected programs are written as target-language source; they are compared as syntax (the
layout of the printer does not matter, the names and the structure do).
"""

import math

import pytest

from lambdad.backward import backward_module, backward_term, backward_type
from lambdad.errors import DifferentiationError, EvalError
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr, parse_module, parse_type
from lambdad.primitives import PRIMITIVES
from lambdad.printer import print_term, print_type
from lambdad.simplify import simplify
from lambdad.syntax import (
    App,
    Const,
    Lam,
    Let,
    LetPair,
    Pair,
    Prim,
    ReadOff,
    Seed,
    Term,
    Var,
    walk,
)
from lambdad.typecheck import check_term, infer_module, infer_term


def backward(source: str) -> Term:
    return backward_term(parse_expr(source, "test.lam"))


def assert_program(actual: Term, expected: str) -> None:
    assert actual == parse_expr(expected), (
        f"got:\n{print_term(actual)}\nexpected:\n{expected}")


# ---------------------------------------------------------------- each rule


@pytest.mark.parametrize("source, expected", [
    # BMP ←D, constant: (r, \a -o zero)
    (r"\x -> 2.5", r"\x -> (2.5, \a -o zero)"),
    # homomorphic on variables, λ, application, let, pairs, booleans, if, lists
    (r"\f x -> f x", r"\f x -> f x"),
    (r"\x -> let y = x in y", r"\x -> let y = x in y"),
    (r"\p -> let (a, b) = p in (b, a)", r"\p -> let (a, b) = p in (b, a)"),
    (r"\x -> if false then x else x", r"\x -> if false then x else x"),
    (r"\x -> [x, 1]", r"\x -> [x, (1, \a -o zero)]"),
    # annotations are transformed: ←D(R) = R * (R -o d)
    (r"\(x : R) -> (x : R)", r"\(x : R * (R -o d)) -> (x : R * (R -o d))"),
])
def test_homomorphic_rules(source, expected):
    assert_program(backward(source), expected)


@pytest.mark.parametrize("source, expected", [
    # BMP ←D, primitive application
    (r"\x -> sin x", r"\x -> let (x, x_) = x in (sin x, \a -o x_ (cos x * a))"),
    (r"\x y -> x * y",
     r"""\x y -> let (x, x_) = x in let (y, y_) = y in
                 (x * y, \a -o x_ (y * a) <+> y_ (x * a))"""),
    (r"\x -> x * x",
     r"\x -> let (x, x_) = x in (x * x, \a -o x_ (x * a) <+> x_ (x * a))"),
    (r"\x -> sin (cos x)",
     r"""\x -> let (v1, v1_) = (let (x, x_) = x in (cos x, \a -o x_ (-sin x * a))) in
               (sin v1, \a -o v1_ (cos v1 * a))"""),
    (r"\x -> exp x", r"\x -> let (x, x_) = x in let r = exp x in (r, \a -o x_ (r * a))"),
    (r"\x -> -x", r"\x -> let (x, x_) = x in (-x, \a -o x_ (-1 * a))"),
])
def test_chain_rule(source, expected):
    assert_program(backward(source), expected)


@pytest.mark.parametrize("source, expected", [
    (r"\x -> x < 2", r"\x -> fst x < fst (2, \a -o zero)"),
    (r"\b -> not b", r"\b -> not b"),
    (r"\xs -> length xs", r"\xs -> (length xs, \a -o zero)"),
    (r"\n -> range n", r"\n -> map (\i -> (i, \a -o zero)) (range (fst n))"),
    (r"\p -> snd p", r"\p -> snd p"),
    (r"\xs ys -> zip xs ys", r"\xs ys -> zip xs ys"),
])
def test_primitives_that_are_not_real_functions(source, expected):
    assert_program(backward(source), expected)


def test_builtin_used_as_a_value_is_eta_expanded():
    assert_program(backward(r"\xs -> map sin xs"),
                   r"\xs -> map (\x -> let (x, x_) = x in (sin x, \a -o x_ (cos x * a))) xs")


def test_the_linear_parameter_avoids_the_rule_names():
    # the program's own `a` is a primal here, so the linear parameter is renamed
    assert_program(backward(r"\a -> sin a"),
                   r"\a -> let (a, a_) = a in (sin a, \a1 -o a_ (cos a * a1))")


def test_let_keeps_sharing():
    """Every use of a let-bound real sees the same backpropagator."""
    assert_program(
        backward(r"\x -> let y = sin x in y * y"),
        r"""\x -> let y = (let (x, x_) = x in (sin x, \a -o x_ (cos x * a))) in
                  let (y, y_) = y in (y * y, \a -o y_ (y * a) <+> y_ (y * a))""")


# ---------------------------------------------------------------- types


@pytest.mark.parametrize("source, expected", [
    ("R", "R * (R -o d)"),
    ("Bool", "Bool"),
    ("R -> R", "R * (R -o d) -> R * (R -o d)"),
    ("[R * R] -> Bool", "[(R * (R -o d)) * (R * (R -o d))] -> Bool"),
    ("R * R * R -> R", "(R * (R -o d)) * (R * (R -o d)) * (R * (R -o d)) -> R * (R -o d)"),
    ("a -> b", "a -> b"),
])
def test_backward_type(source, expected):
    assert print_type(backward_type(parse_type(source))) == expected


def test_backward_type_of_target_types():
    # D(d<K>) = d<D(K)>: the cotangent space of the level below, over the transformed ring
    assert print_type(backward_type(parse_type("R -o d"))) == "R * (R -o d) -o d<R * (R -o d)>"


TYPED_PROGRAMS = [
    r"\x1 x2 -> sin ((x1 - x2) ^ 2)",
    r"\x1 x2 -> log x1 + x1 * x2 - sin x2",
    r"\xs -> map sin xs",
    r"\xs -> fold (\acc x -> acc + x * x) 0 xs",
    r"\x -> if x > 0 then x * 2 else 3",
    r"\n -> map (\i -> i * n) (range n)",
    r"\xs -> length xs * 2",
    r"\x -> let sq = \y -> y * y in sq (sq x)",
    r"\xs ys -> map (\(a, b) -> a * b) (zip xs ys)",
    r"\p -> fst p * snd p",
    r"\x -> let f = \g -> g x in f sin + f cos",
    r"\x -> x < 2 || not (x > 5)",
    r"\x -> [x, 2, x * x]",
    r"\(x : R) -> (x : R) * 2",
    r"\x -> map (\f -> f x) [sin, cos, exp]",
    r"\x -> fold min x [1, 2, 3]",
    r"\x -> let id = \y -> y in (id x, id true)",
    r"\x -> x ^ 0.5 + sqrt x + tanh x + sigmoid x + relu x + abs x + max x 1 + tan x",
    r"\x -> x / 2 - (-x)",
    r"\x -> 3",
    r"\x -> let (a, b) = (x, x * x) in a + b",
    r"\w b -> fold (\acc p -> let (x, y) = p in acc + (w * x + b - y) ^ 2) 0 [(1, 2), (3, 4)]",
    r"\f -> \x -> f (f x)",
    r"\xs -> let n = length xs in map (\x -> x / n) xs",
]


@pytest.mark.parametrize("source", TYPED_PROGRAMS)
def test_types_are_preserved(source):
    """Γ ⊢ t : A implies ←D(Γ) ⊢ ←D(t) : ←D(A), for the raw and the simplified program."""
    term = parse_expr(source)
    expected = backward_type(infer_term(term).type)
    transformed = backward_term(term)
    check_term(transformed, expected)
    check_term(simplify(transformed), expected)


def test_module_keeps_names_and_types():
    module = parse_module("def sq x = x * x\ndef f y = sq (sin y) + y\n")
    source_types = infer_module(module).schemes
    transformed = backward_module(module)
    assert [d.name for d in transformed.decls] == ["sq", "f"]
    target_types = infer_module(transformed).schemes
    for name, scheme in source_types.items():
        assert target_types[name].type == backward_type(scheme.type)


# ---------------------------------------------------------------- the paper's example


BMP_RAW = r"""
\x1 x2 ->
  let (v3, v3_) =
    let (v1, v1_) =
      let (x1, x1_) = x1 in
      let (x2, x2_) = x2 in
      (x1 - x2, \a -o x1_ (1 * a) <+> x2_ (-1 * a)) in
    let (v2, v2_) = (2, \a -o zero) in
    let r = v1 ^ v2 in
    (r, \a -o v1_ ((if v2 == 0 then 0 else v2 * v1 ^ (v2 - 1)) * a)) in
  (sin v3, \a -o v3_ (cos v3 * a))
"""

BMP_SIMPLIFIED = r"""
\x1 x2 ->
  let (x1, x1_) = x1 in
  let (x2, x2_) = x2 in
  let (v1, v1_) = (x1 - x2, \a -o x1_ a <+> x2_ (-a)) in
  let (v3, v3_) = (v1 ^ 2, \a -o v1_ (2 * v1 * a)) in
  (sin v3, \a -o v3_ (cos v3 * a))
"""


def test_bmp_example_raw_and_simplified():
    raw = backward(r"\x1 x2 -> sin ((x1 - x2) ^ 2)")
    assert_program(raw, BMP_RAW)
    assert_program(simplify(raw), BMP_SIMPLIFIED)


# ---------------------------------------------------------------- numbers


def value_and_gradient(term: Term, point, strategy="factored"):
    """Run the ←D program ``term`` (curried over the reals of ``point``) seeding input i
    with ``seed i``, then read the gradient off ``v_ 1``."""
    names = [f"in{i}" for i in range(len(point))]
    call: Term = term
    for name in names:
        call = App(call, Var(name))
    inputs: Term = Var(names[-1])
    for name in reversed(names[:-1]):
        inputs = Pair(Var(name), inputs)
    body: Term = LetPair("v", "v_", call,
                         Pair(Var("v"), ReadOff(inputs, App(Var("v_"), Const(1.0)))))
    for i in reversed(range(len(point))):
        body = Let(names[i], Pair(Const(point[i]), Seed(Const(float(i)))), body)
    return Interpreter(strategy=strategy).evaluate(body)


def flatten(value):
    if isinstance(value, tuple):
        return tuple(x for part in value for x in flatten(part))
    return (value,)


GOLDEN = [
    (r"\x1 x2 -> log x1 + x1 * x2 - sin x2", (2.0, 5.0), 11.652071455223084,
     (5.5, 1.7163378145367738)),
    (r"\x1 x2 -> exp (2 * x1) + x1 * x2 ^ 2 + cos x2", (1.0, 2.0), 10.972909262383508,
     (18.7781121978613, 3.090702573174318)),
    (r"\x1 x2 -> sin ((x1 - x2) ^ 2)", (3.0, 1.0), -0.7568024953079282,
     (-2.6145744834544478, 2.6145744834544478)),
    (r"\a b c x -> a * x ^ 2 + b * x + c", (1.0, 2.0, 3.0, 4.0), 27.0, (16.0, 4.0, 1.0, 10.0)),
]


@pytest.mark.parametrize("strategy", ["factored", "naive"])
@pytest.mark.parametrize("source, point, value, gradient", GOLDEN)
def test_golden_gradients(source, point, value, gradient, strategy):
    term = backward(source)
    for program in (term, simplify(term)):
        primal, adjoints = value_and_gradient(program, point, strategy)
        assert primal == value
        for got, expected in zip(flatten(adjoints), gradient):
            assert math.isclose(got, expected, rel_tol=1e-12)


def test_gradient_through_lists_and_closures():
    source = (r"\w b -> fold (\acc p -> let (x, y) = p in acc + (w * x + b - y) ^ 2) 0"
              r" [(1, 2), (3, 4)]")
    # d/dw = sum 2 (w x + b - y) x, d/db = sum 2 (w x + b - y)
    w, b = 0.5, 0.25
    residuals = [(w * 1 + b - 2, 1), (w * 3 + b - 4, 3)]
    expected = (sum(2 * r * x for r, x in residuals), sum(2 * r for r, _ in residuals))
    term = backward(source)
    for program in (term, simplify(term)):
        _, adjoints = value_and_gradient(program, (w, b))
        assert all(math.isclose(g, e, rel_tol=1e-12) for g, e in zip(flatten(adjoints), expected))


def test_runtime_errors_point_at_the_source():
    source = "\\x ->\n  1 + sqrt x"
    term = backward_term(parse_expr(source, "err.lam"))
    with pytest.raises(EvalError) as caught:
        value_and_gradient(term, (-4.0,))
    assert (caught.value.span.line, caught.value.span.col) == (2, 7)


# ---------------------------------------------------------------- purity, errors, depth


@pytest.mark.parametrize("source", TYPED_PROGRAMS[:8])
def test_pure_and_deterministic(source):
    term = parse_expr(source)
    copy = parse_expr(source)
    once = backward_term(term)
    assert term == copy
    assert backward_term(term) == once


@pytest.mark.parametrize("source", [
    r"\x -> x * grad (\y -> y * x) x",
    r"\x -> fst (jvp sin x 1)",
    r"\x -> snd (vjp sin x) 1",
    r"\xs -> map (grad sin) xs",
])
def test_nested_differentiation_is_rejected(source):
    with pytest.raises(DifferentiationError, match="nested differentiation") as caught:
        backward(source)
    assert caught.value.span is not None


def test_deep_terms_transform():
    depth = 10_000
    nested: Term = Var("x")
    for _ in range(depth):
        nested = Prim("cos", (nested,))
    assert backward_term(Lam("x", nested)) is not None
    chain: Term = Var(f"x{depth}")
    for k in range(depth, 0, -1):
        chain = Let(f"x{k}", Prim("mul", (Var(f"x{k - 1}"), Var(f"x{k - 1}"))), chain)
    transformed = backward_term(Lam("x0", chain))
    assert sum(1 for node in walk(transformed) if isinstance(node, Let)) == depth


@pytest.mark.parametrize("name", sorted(n for n, p in PRIMITIVES.items() if p.kind == "real"))
def test_partials_instantiate_as_the_general_renaming_does(name):
    # most partials bind nothing and are built by closures made once per term; the result is
    # the same term
    from lambdad.errors import Span
    from lambdad.rules import PARTIALS, partials, rename

    prim = PRIMITIVES[name]
    primals = [f"{param}9" for param in prim.params]
    span = Span("<test>", 3, 4, 3, 9)
    made = partials(prim, primals, "r9" if prim.result else None, span)
    renaming = dict(zip(prim.params, primals))
    if prim.result is not None:
        renaming[prim.result] = "r9"
    located = made[0].span if made else None
    expected = [rename(term, renaming, located) for term in PARTIALS[name]]
    assert made == expected
    assert all(node.span == located for term in made for node in walk(term))
