"""→D, forward mode as a program transformation (AD.md section 2), as specifications:
source in, transformed program out.

Expected programs are written as target-language source; they are compared as syntax (the
layout of the printer does not matter, the names and the structure do).
"""

import math

import pytest

from lambdad.errors import DifferentiationError, EvalError
from lambdad.forward import forward_module, forward_term, forward_type
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr, parse_module, parse_type
from lambdad.primitives import OPERATORS
from lambdad.printer import print_term, print_type
from lambdad.rules import NameSupply
from lambdad.simplify import simplify
from lambdad.syntax import App, Const, Lam, Let, Pair, Prim, Term, Var, walk
from lambdad.typecheck import check_term, infer_module, infer_term


def forward(source: str) -> Term:
    return forward_term(parse_expr(source, "test.lam"))


def assert_program(actual: Term, expected: str) -> None:
    assert actual == parse_expr(expected), (
        f"got:\n{print_term(actual)}\nexpected:\n{expected}")


# ---------------------------------------------------------------- each rule


@pytest.mark.parametrize("source, expected", [
    # →D(r) = (r, 0)
    (r"\x -> 2.5", r"\x -> (2.5, 0)"),
    # homomorphic on variables, λ, application, let, pairs, booleans, if, lists
    (r"\f x -> f x", r"\f x -> f x"),
    (r"\x -> let y = x in y", r"\x -> let y = x in y"),
    (r"\p -> let (a, b) = p in (b, a)", r"\p -> let (a, b) = p in (b, a)"),
    (r"\x -> if true then x else x", r"\x -> if true then x else x"),
    (r"\x -> [x, 1]", r"\x -> [x, (1, 0)]"),
    # annotations are transformed: →D(R) = R * R
    (r"\(x : R) -> (x : R)", r"\(x : R * R) -> (x : R * R)"),
    (r"\(xs : [R]) (b : Bool) -> xs", r"\(xs : [R * R]) (b : Bool) -> xs"),
])
def test_homomorphic_rules(source, expected):
    assert_program(forward(source), expected)


@pytest.mark.parametrize("source, expected", [
    # a real primitive: let (x, x') = →D(t) in (f x, ∂f x * x')
    (r"\x -> sin x", r"\x -> let (x, x') = x in (sin x, cos x * x')"),
    (r"\x y -> x * y",
     r"\x y -> let (x, x') = x in let (y, y') = y in (x * y, y * x' + x * y')"),
    # a variable used twice is destructured once
    (r"\x -> x * x", r"\x -> let (x, x') = x in (x * x, x * x' + x * x')"),
    # a compound argument gets fresh names
    (r"\x -> sin (cos x)",
     r"""\x -> let (v1, v1') = (let (x, x') = x in (cos x, -sin x * x')) in
               (sin v1, cos v1 * v1')"""),
    # compound arguments are bound before variables (whose pair they may still need)
    (r"\x -> x - sin x",
     r"""\x -> let (v1, v1') = (let (x, x') = x in (sin x, cos x * x')) in
               let (x, x') = x in
               (x - v1, 1 * x' + -1 * v1')"""),
    # partials mentioning the result: let r = f x in (r, ...)
    (r"\x -> exp x", r"\x -> let (x, x') = x in let r = exp x in (r, r * x')"),
    (r"\x -> sqrt x", r"\x -> let (x, x') = x in let r = sqrt x in (r, 0.5 / r * x')"),
    # a constant argument: its tangent is the literal 0
    (r"\x -> x / 2",
     r"""\x -> let (v1, v1') = (2, 0) in let (x, x') = x in
               (x / v1, 1 / v1 * x')"""),
])
def test_chain_rule(source, expected):
    assert_program(forward(source), expected)


@pytest.mark.parametrize("source, expected", [
    # comparisons look at primals only
    (r"\x -> x < 2", r"\x -> fst x < fst (2, 0)"),
    (r"\x y -> x == y", r"\x y -> fst x == fst y"),
    # logic primitives are unchanged
    (r"\b -> not b", r"\b -> not b"),
    # locally constant primitives: primals in, zero tangents out
    (r"\xs -> length xs", r"\xs -> (length xs, 0)"),
    (r"\n -> range n", r"\n -> map (\i -> (i, 0)) (range (fst n))"),
    # structural primitives map to themselves
    (r"\p -> fst p", r"\p -> fst p"),
    (r"\xs ys -> zip xs ys", r"\xs ys -> zip xs ys"),
    (r"\f xs -> map f xs", r"\f xs -> map f xs"),
    (r"\f xs -> fold f (0, 1) xs", r"\f xs -> fold f ((0, 0), (1, 0)) xs"),
])
def test_primitives_that_are_not_real_functions(source, expected):
    assert_program(forward(source), expected)


def test_builtin_used_as_a_value_is_eta_expanded():
    assert_program(forward(r"\xs -> map sin xs"),
                   r"\xs -> map (\x -> let (x, x') = x in (sin x, cos x * x')) xs")
    assert_program(
        forward(r"\xs -> fold max 0 xs"),
        r"""\xs -> fold (\x y -> let (x, x') = x in let (y, y') = y in
                           (max x y, (if x >= y then 1 else 0) * x'
                                     + (if x >= y then 0 else 1) * y'))
                    (0, 0) xs""")
    assert_program(forward(r"\xs -> map length xs"), r"\xs -> map (\xs -> (length xs, 0)) xs")


def test_generated_names_avoid_the_program_and_the_built_ins():
    # `r` and `v1` are taken by the program, so the rules pick other names
    assert_program(forward(r"\r -> exp r"),
                   r"\r -> let (r, r') = r in let r1 = exp r in (r1, r1 * r')")
    assert_program(forward(r"\v1 -> sin (sin v1)"),
                   r"""\v1 -> let (v2, v2') = (let (v1, v1') = v1 in (sin v1, cos v1 * v1')) in
                              (sin v2, cos v2 * v2')""")
    # a tangent name that is a variable of the program
    assert_program(forward(r"\x x' -> x * x'"),
                   r"""\x x' -> let (x, x'1) = x in let (x', x'') = x' in
                               (x * x', x' * x'1 + x * x'')""")
    # a variable named like a built-in is not used as a binder of the rule
    term = forward(r"\cos -> sin cos")
    pattern = next(node for node in walk(term) if hasattr(node, "first"))
    assert pattern.first not in ("cos", "sin")


def test_a_name_supply_can_be_shared():
    names = NameSupply.for_terms(parse_expr(r"\x -> sin (sin x)"))
    first = forward_term(parse_expr(r"\x -> sin (sin x)"), names)
    second = forward_term(parse_expr(r"\x -> sin (sin x)"), names)
    assert first != second  # the second transformation got fresh names
    assert "v1" in print_term(first) and "v1" not in print_term(second)


# ---------------------------------------------------------------- types


@pytest.mark.parametrize("source, expected", [
    ("R", "R * R"),
    ("Bool", "Bool"),
    ("R -> R", "R * R -> R * R"),
    ("[R] * Bool -> R", "[R * R] * Bool -> R * R"),
    ("(a -> b) -> [a] -> [b]", "(a -> b) -> [a] -> [b]"),
])
def test_forward_type(source, expected):
    assert print_type(forward_type(parse_type(source))) == expected


def test_forward_type_of_target_types():
    # D(d<K>) = d<D(K)>: the cotangent space of the level below, over the transformed ring
    assert print_type(forward_type(parse_type("R -o d"))) == "R * R -o d<R * R>"


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
    r"\x -> x < 2 && not (x > 5)",
    r"\x -> [x, 2, x * x]",
    r"\(x : R) -> (x : R) * 2",
    r"\x -> map (\f -> f x) [sin, cos, exp]",
    r"\x -> fold max x [1, 2, 3]",
    r"\x -> let id = \y -> y in (id x, id true)",
    r"\x -> x ^ 0.5 + sqrt x + tanh x + sigmoid x + relu x + abs x + min x 1 + tan x",
    r"\x -> x / 2 - (-x)",
    r"\x -> 3",
    r"\x -> let (a, b) = (x, x * x) in a + b",
    r"\x -> map (\_ -> x) (range 3)",
    r"\w b -> fold (\acc p -> let (x, y) = p in acc + (w * x + b - y) ^ 2) 0 [(1, 2), (3, 4)]",
    r"\f -> \x -> f (f x)",
    r"\xs -> let n = length xs in map (\x -> x / n) xs",
]


@pytest.mark.parametrize("source", TYPED_PROGRAMS)
def test_types_are_preserved(source):
    """Γ ⊢ t : A implies →D(Γ) ⊢ →D(t) : →D(A), for the raw and the simplified program."""
    term = parse_expr(source)
    expected = forward_type(infer_term(term).type)
    transformed = forward_term(term)
    check_term(transformed, expected)
    check_term(simplify(transformed), expected)


def test_module_keeps_names_and_types():
    module = parse_module("def sq x = x * x\ndef f y = sq (sin y) + y\ndef c = [1, 2]\n")
    source_types = infer_module(module).schemes
    transformed = forward_module(module)
    assert [d.name for d in transformed.decls] == ["sq", "f", "c"]
    target_types = infer_module(transformed).schemes
    for name, scheme in source_types.items():
        assert target_types[name].type == forward_type(scheme.type)


# ---------------------------------------------------------------- the paper's example


BMP_RAW = r"""
\x1 x2 ->
  let (v3, v3') =
    let (v1, v1') =
      let (x1, x1') = x1 in
      let (x2, x2') = x2 in
      (x1 - x2, 1 * x1' + -1 * x2') in
    let (v2, v2') = (2, 0) in
    let r = v1 ^ v2 in
    (r, (if v2 == 0 then 0 else v2 * v1 ^ (v2 - 1)) * v1') in
  (sin v3, cos v3 * v3')
"""

BMP_SIMPLIFIED = r"""
\x1 x2 ->
  let (x1, x1') = x1 in
  let (x2, x2') = x2 in
  let (v1, v1') = (x1 - x2, x1' - x2') in
  let (v3, v3') = (v1 ^ 2, 2 * v1 * v1') in
  (sin v3, cos v3 * v3')
"""


def test_bmp_example_raw_and_simplified():
    raw = forward(r"\x1 x2 -> sin ((x1 - x2) ^ 2)")
    assert_program(raw, BMP_RAW)
    assert_program(simplify(raw), BMP_SIMPLIFIED)


# ---------------------------------------------------------------- numbers


def jvp(term: Term, point, direction):
    """Evaluate the →D program ``term`` (curried over the reals of ``point``)."""
    call = term
    for x, dx in zip(point, direction):
        call = App(call, Pair(Const(x), Const(dx)))
    return Interpreter().evaluate(call)


GOLDEN = [
    (r"\x1 x2 -> log x1 + x1 * x2 - sin x2", (2.0, 5.0), 11.652071455223084,
     (5.5, 1.7163378145367738)),
    (r"\x1 x2 -> exp (2 * x1) + x1 * x2 ^ 2 + cos x2", (1.0, 2.0), 10.972909262383508,
     (18.7781121978613, 3.090702573174318)),
    (r"\x1 x2 -> sin ((x1 - x2) ^ 2)", (3.0, 1.0), -0.7568024953079282,
     (-2.6145744834544478, 2.6145744834544478)),
    (r"\a b c x -> a * x ^ 2 + b * x + c", (1.0, 2.0, 3.0, 4.0), 27.0, (16.0, 4.0, 1.0, 10.0)),
]


@pytest.mark.parametrize("source, point, value, gradient", GOLDEN)
def test_golden_gradients(source, point, value, gradient):
    term = forward(source)
    for program in (term, simplify(term)):
        for i, expected in enumerate(gradient):
            seed = [1.0 if j == i else 0.0 for j in range(len(point))]
            primal, tangent = jvp(program, point, seed)
            assert primal == value
            assert math.isclose(tangent, expected, rel_tol=1e-12)


def test_runtime_errors_point_at_the_source():
    source = "\\x ->\n  log x"
    term = forward_term(parse_expr(source, "err.lam"))
    with pytest.raises(EvalError) as caught:
        jvp(term, (-1.0,), (1.0,))
    assert caught.value.span is not None
    assert (caught.value.span.line, caught.value.span.col) == (2, 3)


def test_generated_nodes_carry_the_span_of_their_source():
    divide = OPERATORS[("/", "infix")].name
    source = r"\x -> x / 3"
    term = parse_expr(source, "s.lam")
    division = next(n for n in walk(term) if isinstance(n, Prim) and n.op == divide)
    transformed = forward_term(term)
    assert all(node.span is not None for node in walk(transformed))
    generated = [n for n in walk(transformed) if isinstance(n, Prim) and n.op == divide]

    def place(span):
        return (span.file, span.line, span.col, span.end_line, span.end_col)

    # The nodes of the derivative carry the same place, marked as the derivative's.
    assert generated and all(place(n.span) == place(division.span) for n in generated)


# ---------------------------------------------------------------- purity, errors, depth


@pytest.mark.parametrize("source", TYPED_PROGRAMS[:8])
def test_pure_and_deterministic(source):
    term = parse_expr(source)
    copy = parse_expr(source)
    once = forward_term(term)
    assert term == copy                      # the input is unchanged
    assert forward_term(term) == once        # and transforming again gives the same term


@pytest.mark.parametrize("source, culprit", [
    (r"\x -> x * grad (\y -> y * x) x", "grad (\\y -> y * x) x"),
    (r"\x -> fst (jvp sin x 1)", "jvp sin x 1"),
    (r"\x -> fst (vjp sin x)", "vjp sin x"),
    (r"\xs -> map (grad sin) xs", "grad"),
])
def test_nested_differentiation_is_rejected(source, culprit):
    with pytest.raises(DifferentiationError, match="nested differentiation") as caught:
        forward(source)
    span = caught.value.span
    assert source[span.col - 1:span.end_col - 1].startswith(culprit)


def test_deep_terms_transform():
    depth = 10_000
    nested: Term = Var("x")
    for _ in range(depth):
        nested = Prim("sin", (nested,))
    assert forward_term(Lam("x", nested)) is not None
    chain: Term = Var(f"x{depth}")
    for k in range(depth, 0, -1):
        chain = Let(f"x{k}", Prim("add", (Var(f"x{k - 1}"), Const(1.0))), chain)
    assert forward_term(Lam("x0", chain)) is not None
