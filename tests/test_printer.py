"""The printer: syntax back to text that parses to the same syntax, laid out for reading."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lambdad
from conftest import PROGRAMS
from lambdad.document import HARD, LINE, Group, Nest, render
from lambdad.parser import parse_expr, parse_module
from lambdad.primitives import NAMED, OPERATORS, PRIMITIVES
from lambdad.printer import (
    WIDTH,
    print_decl,
    print_module,
    print_term,
    print_type,
    print_type_comment,
)
from lambdad.syntax import (
    BOOL,
    COTANGENT,
    MAT,
    REAL,
    VEC,
    Annot,
    App,
    BoolLit,
    Builtin,
    Const,
    Decl,
    FunT,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    ListT,
    Module,
    Pair,
    PairT,
    Plus,
    Prim,
    ReadOff,
    Seed,
    Var,
    VarT,
    Zero,
)

x, y, z, f = (Var(name) for name in "xyzf")


def num(value: float) -> Const:
    return Const(float(value))


def prim(op: str, *args) -> Prim:
    return Prim(op, tuple(args))


def round_trips(term) -> str:
    text = print_term(term)
    assert parse_expr(text) == term, text
    return text


# --------------------------------------------------------------------------- examples


@pytest.mark.parametrize("value, text", [
    (2.0, "2"), (0.5, "0.5"), (1e-10, "1e-10"), (2500.0, "2500"), (1e16, "1e+16"),
    (0.1 + 0.2, "0.30000000000000004"), (-1.0, "(-1)"), (-0.0, "(-0)"), (5e-324, "5e-324"),
])
def test_reals_print_shortest(value, text):
    assert print_term(Const(value)) == text
    if value >= 0 and math.copysign(1, value) > 0:
        assert parse_expr(text) == Const(value)


def test_a_negative_constant_reads_back_as_a_negation():
    assert parse_expr(print_term(num(-1))) == prim("neg", num(1))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_reals_have_no_literal(value):
    with pytest.raises(ValueError):
        print_term(Const(value))


@pytest.mark.parametrize("text", [
    "-x ^ 2",
    "(-x) ^ 2",
    "-(-x)",
    "a - b - c",
    "a - (b - c)",
    "a + (b + c)",
    "a ^ b ^ c",
    "(a ^ b) ^ c",
    "x ^ (-1)",
    "a * -b",
    "f x y + g z",
    "f (g x) (h y z)",
    "(a < b) == (c < d)",
    "a < b + c",
    "a && b || c",
    "a && (b || c)",
    "a <+> b <+> c",
    "a <+> (b <+> c)",
    "(\\x -> x) 1",
    "f (\\x -> x)",
    "1 + (if a then b else c)",
    "(let x = 1 in x) + 1",
    "(x, (y, z))",
    "((x, y), z)",
    "[x, (y, z), []]",
    "(x : R * R -> [R])",
    "\\x y -> x",
    "\\(x : R) _ (y : R -> R) -> y x",
    "\\x -> \\x -> x",
    "sin x",
    "sin (cos x)",
    "map sin xs",
    "(map f) xs",
    "(sin) x",
    "(fold f z) xs",
    "fst p 1",
    "-sin x",
    "if a then b else if c then d else e",
    "if true then 1 else 2",
    "\\a -o x_ (a * 2) <+> y_ (a * 3)",
    "(b : R -o d)",
    "seed 0",
    "seed 0 a",
    "f (seed 1)",
    "zero",
    "cotangent (x, seed 0) (x_ 1)",
    "cotangent x e 1",
    "let (a, b) = p in a",
    "let (_, b) = \\x -> x in b",
    "let f x y = x in f",
    "let x : R = 1 in x",
])
def test_examples_round_trip_to_the_same_text(text):
    assert round_trips(parse_expr(text)) == text


def test_boolean_connectives_are_resugared():
    assert print_term(If(x, y, BoolLit(False))) == "x && y"
    assert print_term(If(x, BoolLit(True), y)) == "x || y"


@pytest.mark.parametrize("text", ["(+)", "(* 2)", "(2 -)", "(^ x)", "(&& f x)", "(x ||)",
                                  "(* sin x)", "fold (+) 0 [1, 2]", "map (2 -) [x]"])
def test_operator_sections_print_as_terms_that_parse_back(text):
    term = parse_expr(text, bound=["x", "f"])
    printed = print_term(term)
    assert parse_expr(printed, bound=["x", "f"]) == term, printed


def test_builtins_and_operators_as_values():
    assert print_term(Builtin("sin")) == "sin"
    assert round_trips(App(App(Builtin("max"), x), y)) == "(max x) y"
    # An operator has no name of its own: it prints as a function (equal up to eta).
    assert parse_expr(print_term(Builtin("add"))) == Lam("x", Lam("y", prim("add", x, y)))
    assert parse_expr(print_term(Builtin("neg"))) == Lam("x", prim("neg", x))


def test_declarations_are_resugared():
    decl = Decl("f", Lam("x", Lam("y", Annot(prim("add", x, y), REAL), REAL)))
    assert print_decl(decl) == "def f x (y : R) : R = x + y"
    assert print_decl(Decl("g", Annot(num(1), REAL))) == "def g : R = 1"
    assert print_decl(Decl("h", Lam("x", Lam("x", x)))) == "def h x = \\x -> x"
    annotated = Decl("k", Annot(Lam("x", x), FunT(REAL, REAL)))
    assert print_decl(annotated) == "def k : R -> R = \\x -> x"


def test_let_chains_one_binding_per_line():
    text = "def f x =\n  let y = x * x in\n  let z = sin y in\n  (y, z)"
    module = parse_module(text)
    assert print_module(module) == text + "\n"


def test_long_conditionals_are_broken():
    long = " + ".join(f"variable_{i}" for i in range(6))
    term = parse_expr(f"if x < 0 then {long} else if x > 0 then 1 else {long}")
    text = round_trips(term)
    assert text == (f"if x < 0 then\n  {long}\nelse if x > 0 then\n  1\nelse\n  {long}")


def test_short_terms_stay_on_one_line():
    assert round_trips(parse_expr("let x = 1 in if x > 0 then x else -x")) == (
        "let x = 1 in if x > 0 then x else -x")


def test_modules():
    text = ("def f (x1 : R) (x2 : R) : R = log x1 + x1 * x2 - sin x2\n\n"
            "def main = (f 2 5, grad (\\p -> let (a, b) = p in f a b) (2, 5))\n")
    module = parse_module(text)
    assert print_module(module) == text
    assert print_module(Module(())) == ""


def test_the_language_page_program_round_trips():
    text = ("def f (x1 : R) (x2 : R) : R =\n  log x1 + x1 * x2 - sin x2\n\n"
            "def main = (f 2 5, grad (\\(a, b) -> f a b) (2, 5))\n")
    module = parse_module(text)
    assert parse_module(print_module(module)) == module


def test_binders_that_would_capture_a_builtin_are_renamed():
    term = Lam("sin", prim("sin", Var("sin")))
    text = print_term(term)
    assert text == "\\sin1 -> sin sin1"
    assert parse_expr(text) == Lam("sin1", prim("sin", Var("sin1")))
    term = Let("zero", num(1), Plus(Zero(), Var("zero")))
    assert print_term(term) == "let zero1 = 1 in zero <+> zero1"
    # Without a captured built-in the name is kept.
    assert round_trips(Lam("sin", App(Var("sin"), num(1)))) == "\\sin -> sin 1"


def test_print_type():
    assert print_type(FunT(REAL, COTANGENT)) == "R -o d"
    assert print_type(FunT(PairT(REAL, REAL), ListT(BOOL))) == "R * R -> [Bool]"
    assert print_type(PairT(PairT(REAL, REAL), REAL)) == "(R * R) * R"
    assert print_type(FunT(FunT(REAL, REAL), REAL)) == "(R -> R) -> R"


# --------------------------------------------------------------------------- layout


def test_a_group_breaks_when_the_text_after_it_would_overflow():
    """`f aaaa bbbb` fits in 19 columns after `let x =`, but ` in` follows it: the group
    breaks rather than spill over the width (a fit looks past the group to the next break)."""
    doc = ["let x =", Group(Nest(2, [LINE, "f aaaa bbbb"])), " in"]
    assert render(doc, 22) == "let x = f aaaa bbbb in"
    assert render(doc, 21) == "let x =\n  f aaaa bbbb in"


def test_inner_groups_are_decided_again_and_hard_breaks_break_their_groups():
    inner = Group(["(", Nest(1, ["a,", LINE, "b"]), ")"])
    doc = Group(["f", Nest(2, [LINE, inner, LINE, "cccccc"])])
    assert render(doc, 20) == "f (a, b) cccccc"
    assert render(doc, 10) == "f\n  (a, b)\n  cccccc"
    assert render(doc, 5) == "f\n  (a,\n   b)\n  cccccc"
    assert render(Group(["x", LINE, "y", HARD, "z"]), 80) == "x\ny\nz"


def test_indentation_stops_growing_at_the_cap():
    doc: object = "x"
    for _ in range(100):
        doc = Group(["f", Nest(2, [LINE, doc])])
    text = render(doc, 10, max_indent=6)
    assert max(len(line) - len(line.lstrip()) for line in text.splitlines()) == 6


def test_operator_chains_break_before_each_operator():
    long = " + ".join(f"variable_{i}" for i in range(9))
    text = round_trips(parse_expr(long))
    assert text == "variable_0\n" + "".join(f"  + variable_{i}\n" for i in range(1, 9))[:-1]
    text = round_trips(parse_expr(f"\\a -o x_ ({long}) <+> y_ a <+> z_ a"))
    assert text.splitlines()[-2:] == ["    <+> y_ a", "    <+> z_ a"]


def test_lists_tuples_and_applications_break_between_items():
    items = ", ".join(f"(item_{i}, \\a -o zero)" for i in range(6))
    text = round_trips(parse_expr(f"[{items}]"))
    assert text.splitlines() == [f"{'[' if i == 0 else ' '}(item_{i}, \\a -o zero)"
                                 f"{',' if i < 5 else ']'}" for i in range(6)]
    call = "function_name " + " ".join(f"argument_{i}" for i in range(8))
    text = round_trips(parse_expr(call))
    assert text.splitlines() == ["function_name"] + [f"  argument_{i}" for i in range(8)]


def test_long_parameter_lists_and_types_break():
    long = " * ".join(["(R * (R -o d))"] * 3 + ["R * (R -o d)"])
    decl = parse_module(f"def f (w : {long}) (x : {long}) : {long} = x").decls[0]
    text = print_decl(decl)
    assert text.splitlines() == ["def f", f"    (w : {long})", f"    (x : {long})",
                                 f"    : {long} =", "  x"]
    assert parse_module(text).decls[0] == decl
    comment = print_type_comment("f", FunT(PairT(REAL, REAL), FunT(REAL, REAL)), "←D",
                                 of=REAL)
    assert comment == "-- f : R * R -> R -> R    (←D of R)"
    wide = decl.value.param_type
    assert print_type_comment("g", wide, "a note") == f"-- g : {long}    (a note)"
    comment = print_type_comment("g", FunT(wide, FunT(wide, wide)), "a note")
    assert comment.splitlines() == ["-- g :", f"--     {long}", f"--     -> {long}",
                                    f"--     -> {long}", "--   (a note)"]


def test_show_of_a_logistic_loss_reads_well():
    """The reverse-mode program of programs/logistic_regression.lam: within the width,
    each item of the data on a line of its own, no break inside a `\\a -o` head, and
    indentation that grows with nesting only."""
    text = lambdad.load(PROGRAMS / "logistic_regression.lam").show("loss", reverse=True)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH
    assert max(len(line) - len(line.lstrip()) for line in lines) <= 10
    start = lines.index("def data : [((R * (R -o d)) * (R * (R -o d))) * (R * (R -o d))] =")
    assert lines[start + 1] == "  [(((0.1, \\a -o zero), (0.2, \\a -o zero)), (0, \\a -o zero)),"
    assert lines[start + 8] == "   (((1, \\a -o zero), (0.4, \\a -o zero)), (0, \\a -o zero))]"
    assert lines[lines.index("-- predict :") + 4] == "--   (←D of R * R * R -> R * R -> R)"
    assert not any(line.rstrip().endswith("\\a") or line.lstrip().startswith("-o")
                   for line in lines)


# --------------------------------------------------------------------------- deep terms


def test_deep_terms_print_and_read_back():
    """A term 10^4 constructs deep, cycling through every kind of nesting."""
    builders = [
        lambda t: Pair(num(1), t),
        lambda t: prim("add", t, num(1)),
        lambda t: prim("neg", t),
        lambda t: App(f, t),
        lambda t: Lam("x", t),
        lambda t: LinLam("a", t),
        lambda t: Let("x", num(1), t),
        lambda t: LetPair("u", "v", t, x),
        lambda t: If(x, t, num(2)),
        lambda t: ListLit((t,)),
        lambda t: Plus(t, Zero()),
        lambda t: Annot(t, REAL),
        lambda t: prim("pow", x, t),
        lambda t: prim("map", t, x),
        lambda t: ReadOff(x, t),
    ]
    term = x
    for depth in range(10000):
        term = builders[depth % len(builders)](term)
    text = print_term(term)
    assert parse_expr(text) == term


def test_deep_let_chain_is_linear_in_size():
    depth = 10000
    term = x
    for i in range(depth):
        term = Let("x", prim("mul", x, x), term)
    text = print_term(term)
    assert text.count("\n") == depth
    assert len(text) < 25 * depth


# --------------------------------------------------------------------------- the property

_NAMES = ["x", "y", "f", "x'", "w_1", "p"]
_BINDERS = _NAMES + ["_"]
# The entries written in source (not those the type checker elaborates applications to,
# which print as the entry written and parse back to it).
_WRITTEN = {p.name for p in NAMED.values()} | {p.name for p in OPERATORS.values()}
_SURFACE = [p for p in PRIMITIVES.values() if p.name in _WRITTEN]
_FUNCTIONS = [p for p in _SURFACE if p.spelling.fixity == "function"]

types = st.recursive(
    st.sampled_from([REAL, BOOL, COTANGENT, VEC, MAT, VarT("a"), VarT("b")]),
    lambda inner: st.one_of(
        st.builds(ListT, inner), st.builds(PairT, inner, inner), st.builds(FunT, inner, inner)),
    max_leaves=5,
)

reals = st.floats(min_value=0, allow_nan=False, allow_infinity=False).filter(
    lambda value: math.copysign(1.0, value) > 0)

leaves = st.one_of(
    st.builds(Const, reals),
    st.builds(BoolLit, st.booleans()),
    st.builds(Var, st.sampled_from(_NAMES)),
    st.builds(Builtin, st.sampled_from([p.name for p in _FUNCTIONS])),
    st.just(Zero()),
    st.builds(lambda i: Seed(Const(float(i))), st.integers(0, 30)),
)


def _compound(inner):
    def primitive(p):
        return st.tuples(*[inner] * p.arity).map(lambda args: Prim(p.name, args))

    pair_names = st.tuples(st.sampled_from(_BINDERS), st.sampled_from(_BINDERS)).filter(
        lambda names: names[0] != names[1] or names[0] == "_")
    return st.one_of(
        st.sampled_from(_SURFACE).flatmap(primitive),
        st.builds(App, inner, inner),
        st.builds(Lam, st.sampled_from(_BINDERS), inner, st.none() | types),
        st.builds(Let, st.sampled_from(_BINDERS), inner, inner),
        st.builds(lambda names, value, body: LetPair(names[0], names[1], value, body),
                  pair_names, inner, inner),
        st.builds(Pair, inner, inner),
        st.builds(If, inner, inner, inner),
        st.builds(lambda items: ListLit(tuple(items)), st.lists(inner, max_size=3)),
        st.builds(Annot, inner, types),
        st.builds(LinLam, st.sampled_from(_BINDERS), inner),
        st.builds(Plus, inner, inner),
        st.builds(ReadOff, inner, inner),
    )


terms = st.recursive(leaves, _compound, max_leaves=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms)
def test_printed_terms_parse_back_to_equal_terms(term):
    text = print_term(term)
    assert parse_expr(text) == term, text


@st.composite
def modules(draw):
    names = draw(st.lists(st.sampled_from(["f", "g", "main", "loss", "h'"]), unique=True,
                          max_size=4))
    return Module(tuple(Decl(name, draw(terms)) for name in names))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_printed_modules_parse_back_to_equal_modules(module):
    text = print_module(module)
    # Random modules use names they do not define: parse them as open terms.
    assert parse_module(text, closed=False) == module, text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms)
def test_printing_is_stable(term):
    text = print_term(term)
    assert print_term(parse_expr(text)) == text
