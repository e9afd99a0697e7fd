"""The parser: concrete syntax (LANGUAGE.md sections 2-5, AD.md section 4) to the core syntax."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lambdad.desugar as desugar_module
import lambdad.parser as parser_module
import lambdad.reading as reading_module
from lambdad import lalr
from lambdad.errors import ParseError, Span, TypeCheckError
from lambdad.parser import (
    is_incomplete,
    parse_entry,
    parse_expr,
    parse_module,
    parse_type,
)
from lambdad.syntax import (
    BOOL,
    COTANGENT,
    REAL,
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
    walk,
)

x, y, z, f, g = (Var(name) for name in "xyzfg")


def num(value: float) -> Const:
    return Const(float(value))


def prim(op: str, *args) -> Prim:
    return Prim(op, tuple(args))


def error_of(text: str, parse=parse_expr) -> ParseError:
    with pytest.raises(ParseError) as caught:
        parse(text)
    return caught.value


# --------------------------------------------------------------------------- the grammar


def test_grammar_is_lalr_without_conflicts():
    """lark resolves shift/reduce conflicts silently (as shifts) and only logs them."""
    grammar = Path(parser_module.__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    level = lark.logger.level
    lark.logger.addHandler(handler)
    lark.logger.setLevel(logging.DEBUG)
    try:
        lark.Lark(grammar, parser="lalr", lexer="contextual", debug=True,
                  start=["module", "repl_entry", "expr_entry", "type_entry"])
    finally:
        lark.logger.removeHandler(handler)
        lark.logger.setLevel(level)
    assert not [r for r in records if "conflict" in r.getMessage().lower()]


# --------------------------------------------------------------------------- lexical structure


@pytest.mark.parametrize("text, value", [
    ("2", 2.0), ("2.0", 2.0), ("0.5", 0.5), ("1e-3", 0.001), ("2.5E+3", 2500.0), ("10e2", 1000.0),
])
def test_numbers_are_reals(text, value):
    term = parse_expr(text)
    assert term == Const(value)
    assert type(term.value) is float


def test_a_leading_minus_is_the_operator():
    assert parse_expr("-2") == prim("neg", num(2))


@pytest.mark.parametrize("text, bad", [
    ("1e", "1e"), ("2x + 1", "2x"), ("1.", "1."), ("1.5.2", "1.5.2"), ("3e+x", "3e+x"),
])
def test_malformed_numbers(text, bad):
    error = error_of(text)
    assert error.message == f"malformed number `{bad}`"
    assert (error.span.line, error.span.col, error.span.end_col) == (1, 1, 1 + len(bad))


def test_too_large_number():
    assert "too large" in error_of("1e999").message


def test_comments_and_whitespace():
    text = "-- a comment\ndef f x = -- another\n  x -- trailing\n--last"
    assert parse_module(text) == Module((Decl("f", Lam("x", x)),))


def test_identifiers():
    assert parse_expr("x' + w_1 + _tmp + x''") == prim(
        "add", prim("add", prim("add", Var("x'"), Var("w_1")), Var("_tmp")), Var("x''"))


@pytest.mark.parametrize("name", ["inner", "iff", "then_", "else'", "definite", "letter",
                                  "true1", "falsey", "R", "Bool", "d"])
def test_names_that_start_like_keywords(name):
    assert parse_expr(name) == Var(name)


@pytest.mark.parametrize("keyword", ["def", "let", "in", "if", "then", "else"])
def test_keywords_are_not_names(keyword):
    with pytest.raises(ParseError):
        parse_expr(f"\\{keyword} -> 1")


def test_unexpected_character():
    error = error_of("x # y")
    assert error.message == "unexpected character `#`"
    assert (error.span.line, error.span.col) == (1, 3)


def test_unicode_spellings():
    assert parse_expr("λx → x") == parse_expr("\\x -> x")
    assert parse_expr("(f : ℝ × ℝ → ℝ)") == parse_expr("(f : R * R -> R)")
    assert parse_expr("λa ⊸ a ⊕ zero") == parse_expr("\\a -o a <+> zero")
    assert parse_type("ℝ ⊸ d") == parse_type("R -o d")


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize("text, expected", [
    ("R", REAL),
    ("Bool", BOOL),
    ("d", COTANGENT),
    ("[R]", ListT(REAL)),
    ("R * R -> R", FunT(PairT(REAL, REAL), REAL)),
    ("R -> R -> R", FunT(REAL, FunT(REAL, REAL))),
    ("(R -> R) -> R", FunT(FunT(REAL, REAL), REAL)),
    ("R * R * R", PairT(REAL, PairT(REAL, REAL), 3)),  # a triple, as written
    ("R * (R * R)", PairT(REAL, PairT(REAL, REAL))),  # a pair holding a pair
    ("(R * R) * R", PairT(PairT(REAL, REAL), REAL)),
    ("R -o d", FunT(REAL, COTANGENT)),
    ("R * (R -o d) -> R -o d", FunT(PairT(REAL, FunT(REAL, COTANGENT)), FunT(REAL, COTANGENT))),
    ("[a * b] -> a", FunT(ListT(PairT(VarT("a"), VarT("b"))), VarT("a"))),
])
def test_types(text, expected):
    assert parse_type(text) == expected


def test_type_variables_are_lower_case_names():
    assert parse_type("elem") == VarT("elem")


def test_unknown_type_name():
    error = error_of("(x : Real)")
    assert error.message.startswith("unknown type `Real`")
    assert (error.span.col, error.span.end_col) == (6, 10)


# --------------------------------------------------------------------------- expressions


@pytest.mark.parametrize("text, explicit", [
    ("-x^2", "-(x ^ 2)"),
    ("-x * y", "(-x) * y"),
    ("a - b - c", "(a - b) - c"),
    ("a / b * c", "(a / b) * c"),
    ("a ^ b ^ c", "a ^ (b ^ c)"),
    ("x ^ -1", "x ^ (-1)"),
    ("2 ^ -x ^ 2", "2 ^ (-(x ^ 2))"),
    ("f x y + g z", "((f x) y) + (g z)"),
    ("a + b * c", "a + (b * c)"),
    ("a * b ^ c", "a * (b ^ c)"),
    ("a + b < c * d", "(a + b) < (c * d)"),
    ("a < b && c == d", "(a < b) && (c == d)"),
    ("a || b && c", "a || (b && c)"),
    ("a && b && c", "(a && b) && c"),
    ("a <+> b <+> c", "(a <+> b) <+> c"),
    ("a <+> b || c", "a <+> (b || c)"),
    ("\\x -> x + 1", "\\x -> (x + 1)"),
    ("let x = 1 in x + 1", "let x = 1 in (x + 1)"),
    ("if a then b else c + 1", "if a then b else (c + 1)"),
    ("f -1", "f - 1"),
    ("a - -b", "a - (-b)"),
])
def test_precedence_and_associativity(text, explicit):
    assert parse_expr(text) == parse_expr(explicit)


def test_operators_are_primitives():
    assert parse_expr("-x^2") == prim("neg", prim("pow", x, num(2)))
    assert parse_expr("a - b - c") == prim("sub", prim("sub", Var("a"), Var("b")), Var("c"))
    assert parse_expr("x <= y") == prim("le", x, y)
    assert parse_expr("x != y") == prim("ne", x, y)


@pytest.mark.parametrize("text, col", [
    ("1 < 2 == true", 7), ("a < b < c", 7), ("a == b != c", 8), ("x >= y <= z", 8),
])
def test_comparisons_do_not_chain(text, col):
    error = error_of(text)
    assert error.message.startswith("comparisons do not chain")
    assert error.span.col == col


def test_atoms():
    assert parse_expr("true") == BoolLit(True)
    assert parse_expr("false") == BoolLit(False)
    assert parse_expr("((x))") == x
    assert parse_expr("(x : R)") == Annot(x, REAL)
    assert parse_expr("[]") == ListLit(())
    assert parse_expr("[x, y, 1]") == ListLit((x, y, num(1)))


def test_tuples_are_as_written():
    """``(x, y, z)`` is a triple: pairs nesting to the right, the outer one of arity 3,
    distinct from the pair ``(x, (y, z))``."""
    assert parse_expr("(x, y)") == Pair(x, y)
    assert parse_expr("(x, y, z)") == Pair(x, Pair(y, z), 3)
    assert parse_expr("(x, (y, z))") == Pair(x, Pair(y, z))
    assert parse_expr("(x, y, z)") != parse_expr("(x, (y, z))")
    assert parse_expr("((x, y), z)") == Pair(Pair(x, y), z)


@pytest.mark.parametrize("text, expected", [
    ("(+)", Lam("p", Lam("p1", prim("add", Var("p"), Var("p1"))))),
    ("(-)", Lam("p", Lam("p1", prim("sub", Var("p"), Var("p1"))))),
    ("(* 2)", Lam("p", prim("mul", Var("p"), num(2)))),
    ("(2 -)", Lam("p", prim("sub", num(2), Var("p")))),
    ("(^ x)", Lam("p", prim("pow", Var("p"), x))),
    ("(x / y *)", Let("q", prim("div", x, y), Lam("p", prim("mul", Var("q"), Var("p"))))),
    ("(<= 0)", Lam("p", prim("le", Var("p"), num(0)))),
    ("(++ [1])", Let("q", ListLit((num(1),)), Lam("p", prim("append", Var("p"), Var("q"))))),
    ("(!! 0)", Lam("p", prim("index", Var("p"), num(0)))),
    ("(&&)", Lam("p", Lam("p1", If(Var("p"), Var("p1"), BoolLit(False))))),
    ("(|| f x)", Lam("p", If(Var("p"), BoolLit(True), App(f, x)))),
    # an operand other than a name or a number is computed once, outside the function
    ("(* f x)", Let("q", App(f, x), Lam("p", prim("mul", Var("p"), Var("q"))))),
])
def test_operator_sections_are_functions(text, expected):
    assert parse_expr(text) == expected


def test_a_parenthesised_minus_and_operand_is_a_negation_not_a_section():
    assert parse_expr("(- x)") == prim("neg", x)


def test_section_parameters_avoid_the_names_of_the_source():
    assert parse_expr("\\p -> (p +)", bound=["p"]) == Lam("p", Lam("p1", prim("add", Var("p"),
                                                                                Var("p1"))))


@pytest.mark.parametrize("text, col", [("(* 2 * 3)", 6), ("(2 + 3 *)", 9), ("(== 1 == 2)", 7)])
def test_a_section_operand_follows_the_operator_s_precedence(text, col):
    error = error_of(text)
    assert error.span.col == col, error.message


def test_boolean_connectives_are_conditionals():
    assert parse_expr("x && y") == If(x, y, BoolLit(False))
    assert parse_expr("x || y") == If(x, BoolLit(True), y)


def test_conditional():
    assert parse_expr("if x then y else z") == If(x, y, z)


def test_lambdas():
    assert parse_expr("\\x -> x") == Lam("x", x)
    assert parse_expr("\\x y -> x") == Lam("x", Lam("y", x))
    assert parse_expr("\\(x : R) _ -> x") == Lam("x", Lam("_", x), REAL)
    assert parse_expr("\\_ _ -> 1") == Lam("_", Lam("_", num(1)))


def test_pattern_parameters_become_fresh_names():
    assert parse_expr("\\(a, b) -> a") == Lam("p", LetPair("a", "b", Var("p"), Var("a")))
    assert parse_expr("\\(a, _, c) -> c") == Lam(
        "p", LetPair("a", "p1", Var("p"), LetPair("_", "c", Var("p1"), Var("c")), 3))


def test_nested_patterns():
    term = parse_expr("let ((a, b), (c, _)) = v in a")
    assert term == LetPair("p", "p1", Var("v"),
                           LetPair("a", "b", Var("p"), LetPair("c", "_", Var("p1"), Var("a"))))


def test_fresh_names_avoid_every_identifier_of_the_source():
    term = parse_expr("\\(a, b) -> p + p1 -- p2")
    assert term == Lam("p3", LetPair("a", "b", Var("p3"), prim("add", Var("p"), Var("p1"))))


def test_names_bound_twice_in_one_parameter_list():
    for text, col in [("\\x x -> 1", 4), ("let (a, (b, a)) = v in a", 13), ("\\x (y, x) -> 1", 8)]:
        error = error_of(text)
        assert "bound twice" in error.message
        assert error.span.col == col


def test_lets():
    assert parse_expr("let x = 1 in x") == Let("x", num(1), x)
    assert parse_expr("let x : R = 1 in x") == Let("x", Annot(num(1), REAL), x)
    assert parse_expr("let f x (y : R) : R = x in f") == Let(
        "f", Lam("x", Lam("y", Annot(x, REAL), REAL)), f)
    assert parse_expr("let (a, b) = x in a") == LetPair("a", "b", x, Var("a"))
    assert parse_expr("let _ = x in 1") == Let("_", x, num(1))


def test_a_let_bound_name_is_not_visible_in_its_own_value():
    assert parse_expr("let sin = sin 1 in sin") == Let("sin", prim("sin", num(1)), Var("sin"))


def test_wildcard_is_not_a_value():
    error = error_of("\\_ -> _")
    assert "`_` is not a value" in error.message
    assert error.span.col == 7


# --------------------------------------------------------------------------- target language


def test_target_language():
    assert parse_expr("\\a -o a") == LinLam("a", Var("a"))
    assert parse_expr("zero") == Zero()
    assert parse_expr("seed 3") == Seed(Const(3.0))
    assert parse_expr("seed 0 a") == App(Seed(Const(0.0)), Var("a"))
    assert parse_expr("x <+> y") == Plus(x, y)
    assert parse_expr("cotangent x e") == ReadOff(x, Var("e"))
    assert parse_expr("\\a -o x_ (a * 2) <+> zero") == LinLam(
        "a", Plus(App(Var("x_"), prim("mul", Var("a"), num(2))), Zero()))
    assert parse_expr("(b : R -o d)") == Annot(Var("b"), FunT(REAL, COTANGENT))


def test_linear_names_are_not_keywords():
    assert parse_expr("\\zero -> zero") == Lam("zero", Var("zero"))
    assert parse_expr("let seed = 1 in seed 2") == Let("seed", num(1), App(Var("seed"), num(2)))
    assert parse_expr("cotangent", bound=["cotangent"]) == Var("cotangent")


@pytest.mark.parametrize("text, col", [("seed 1.5", 6), ("(seed 2.5)", 7)])
def test_a_literal_seed_index_is_a_whole_number(text, col):
    error = error_of(text)
    assert error.message == "`seed` expects a whole number >= 0"
    assert error.span.col == col


def test_a_seed_index_may_be_computed():
    # the reals of a list are numbered when the program runs: seed (k + i)
    assert parse_expr("seed (k + i)") == Seed(Prim("add", (Var("k"), Var("i"))))


@pytest.mark.parametrize("text, message", [
    ("seed", "`seed` needs 1 argument here"),
    ("cotangent x", "`cotangent` needs 2 arguments here"),
])
def test_linear_constructs_need_their_arguments(text, message):
    assert error_of(text).message == message


def test_a_linear_abstraction_has_one_name():
    with pytest.raises(ParseError):
        parse_expr("\\a b -o a")


# --------------------------------------------------------------------------- names


def test_builtins_applied_to_their_arity_are_primitives():
    assert parse_expr("sin x") == prim("sin", x)
    assert parse_expr("max x y") == prim("max", x, y)
    assert parse_expr("map sin xs") == prim("map", Builtin("sin"), Var("xs"))
    assert parse_expr("fold f z xs") == prim("fold", f, z, Var("xs"))


def test_partial_and_over_application_of_builtins():
    assert parse_expr("sin") == Builtin("sin")
    assert parse_expr("map f") == App(Builtin("map"), f)
    assert parse_expr("fst p 1") == App(prim("fst", Var("p")), num(1))
    assert parse_expr("vjp f x 1") == App(prim("vjp", f, x), num(1))


def test_parentheses_end_an_application_spine():
    assert parse_expr("(map f) xs") == App(App(Builtin("map"), f), Var("xs"))
    assert parse_expr("(sin) x") == App(Builtin("sin"), x)
    assert parse_expr("(sin x)") == prim("sin", x)


def test_local_bindings_shadow_builtins():
    assert parse_expr("let sin = \\x -> x in sin 1") == Let(
        "sin", Lam("x", x), App(Var("sin"), num(1)))
    assert parse_expr("\\map -> map f x") == Lam("map", App(App(Var("map"), f), x))
    assert parse_expr("\\(exp, log) -> exp 1") == Lam(
        "p", LetPair("exp", "log", Var("p"), App(Var("exp"), num(1))))
    assert parse_expr("(\\sin -> sin) (sin 1)") == App(Lam("sin", Var("sin")), prim("sin", num(1)))


def test_unbound_names_stay_variables():
    assert parse_expr("nowhere 1") == App(Var("nowhere"), num(1))


def test_bound_names_are_variables():
    assert parse_expr("sin 1", bound=["sin"]) == App(Var("sin"), num(1))


def test_earlier_declarations_are_variables():
    module = parse_module("def f x = x\ndef g = f 1\n")
    assert module.decls[1] == Decl("g", App(f, num(1)))


def test_a_declaration_does_not_see_itself_or_later_ones():
    with pytest.raises(TypeCheckError) as caught:
        parse_module("def f = 2 * g\ndef g = 1")
    assert caught.value.message == ("`g` is defined later, at line 2: a definition sees only "
                                    "the ones above it (move it up)")
    assert (caught.value.span.line, caught.value.span.col, caught.value.span.end_col) == (1, 13, 14)


@pytest.mark.parametrize("text, col", [
    ("def fact n = if n < 1 then 1 else n * fact (n - 1)", 39),
    ("def main = let go n = go n in go 1", 23),
    ("def f x = let f = f in f", 19),
])
def test_recursion_is_refused_with_a_pointer_to_fold(text, col):
    with pytest.raises(TypeCheckError) as caught:
        parse_module(text)
    assert caught.value.message.startswith("no recursion: ")
    assert "iterate with `fold`" in caught.value.message
    assert caught.value.span.col == col


def test_a_name_bound_outside_is_not_recursion():
    module = parse_module("def x = 1\ndef main = let x = x + 1 in x")
    assert len(module.decls) == 2
    parse_module("def sum xs = sum xs", predefined=["sum"], allow_redefinition=True)


@pytest.mark.parametrize("text, message, cols", [
    ("def f x = x ** 2", "there is no `**`: a power is written `x ^ y`", (13, 15)),
    ("def f = fun x -> x", "unexpected `->`: a function is written `\\x -> e`", (15, 17)),
    ("def f = \\x => x", "unexpected `=>`: a function is written `\\x -> e`", (12, 14)),
    ("def f = map (x => x + 1) [1]", "unexpected `=>`: a function is written `\\x -> e`",
     (16, 18)),
    ("def f(x) = x * x", "unexpected `)`: parameters are written apart, without parentheses "
     "(`def f x y = e`", (8, 9)),
    ("def f = \\(x) -> x", "unexpected `)`: parameters are written apart", (12, 13)),
    ("def f = \\x, y -> x", "unexpected `,`: parameters are written apart", (11, 12)),
    ("def f x, y = x", "unexpected `,`: parameters are written apart", (8, 9)),
])
def test_habits_from_other_languages_lead_to_the_spelling(text, message, cols):
    with pytest.raises(ParseError) as caught:
        parse_module(text)
    assert caught.value.message.startswith(message)
    assert (caught.value.span.col, caught.value.span.end_col) == cols


def test_operators_between_a_builtin_and_its_arguments_are_still_parsed():
    # `fold + 0 xs` is `fold` plus `0 xs`: the type checker says why that is wrong
    assert parse_expr("fold + 0 xs", bound=["xs"]) == prim(
        "add", Builtin("fold"), App(num(0), Var("xs")))


# --------------------------------------------------------------------------- declarations


def test_a_declaration_goes_on_over_lines_that_start_with_an_operator():
    module = parse_module("def poly (x : R) : R =\n  3 * x ^ 3\n  - 2 * x + 1\n"
                          "def main = poly 2\n")
    body = module.decls[0].value.body.expr
    assert body == prim("add", prim("sub", prim("mul", num(3), prim("pow", x, num(3))),
                                    prim("mul", num(2), x)), num(1))


def test_declaration_parameters_and_result_type():
    module = parse_module("def f (x : R) y : R = x")
    assert module == Module((Decl("f", Lam("x", Lam("y", Annot(x, REAL)), REAL)),))


def test_declaration_with_pattern_parameter():
    module = parse_module("def f (a, b) = a")
    assert module.decls[0] == Decl("f", Lam("p", LetPair("a", "b", Var("p"), Var("a"))))


def test_the_first_program_of_the_language_page():
    text = ("-- Baydin et al.'s running example\n"
            "def f (x1 : R) (x2 : R) : R =\n"
            "  log x1 + x1 * x2 - sin x2\n\n"
            "def main = (f 2 5, grad (\\(a, b) -> f a b) (2, 5))\n")
    x1, x2 = Var("x1"), Var("x2")
    body = prim("sub", prim("add", prim("log", x1), prim("mul", x1, x2)), prim("sin", x2))
    main = Pair(App(App(f, num(2)), num(5)),
                prim("grad", Lam("p", LetPair("a", "b", Var("p"), App(App(f, Var("a")), Var("b")))),
                     Pair(num(2), num(5))))
    assert parse_module(text) == Module((
        Decl("f", Lam("x1", Lam("x2", Annot(body, REAL), REAL), REAL)),
        Decl("main", main),
    ))


def test_empty_module():
    assert parse_module("-- nothing here\n") == Module(())


def test_redefinition_is_an_error_with_the_first_location():
    error = error_of("def f = 1\n\ndef f = 2", lambda t: parse_module(t, "m.lam"))
    assert error.message == "`f` is already defined at m.lam:1:5"
    assert error.span == Span("m.lam", 3, 5, 3, 6)


@pytest.mark.parametrize("name", ["sin", "map", "grad", "not", "zero", "seed", "cotangent"])
def test_a_definition_of_a_builtin_name_shadows_it_in_the_definitions_after_it(name):
    use = {"seed": "seed 0", "cotangent": "cotangent 1 2"}.get(name, name)
    module = parse_module(f"def before = {use}\ndef {name} x = x\ndef after = {name} 2\n")
    before, defined, after = module.decls
    assert not isinstance(before.value, Var)  # the built-in (or, for `zero`, the construct)
    assert defined == Decl(name, Lam("x", x))
    assert after.value == App(Var(name), num(2))


def test_wildcard_declaration_is_an_error():
    assert "needs a name" in error_of("def _ = 1", parse_module).message


def test_predefined_names():
    module = parse_module("def g = sum [1]", predefined=["sum"])
    assert module.decls[0] == Decl("g", App(Var("sum"), ListLit((num(1),))))
    error = error_of("def sum = 1", lambda t: parse_module(t, predefined=["sum"]))
    assert error.message == "`sum` is already defined"
    redefined = parse_module("def sum = 1", predefined=["sum"], allow_redefinition=True)
    assert redefined.decls[0] == Decl("sum", num(1))
    with pytest.raises(ParseError):
        parse_module("def h = 1\ndef h = 2", predefined=["sum"], allow_redefinition=True)


# --------------------------------------------------------------------------- REPL entries


def test_entries():
    assert parse_entry("def f x = x") == Decl("f", Lam("x", x))
    assert parse_entry("x = 3") == Decl("x", num(3))
    assert parse_entry("x : R = 3") == Decl("x", Annot(num(3), REAL))
    assert parse_entry("x + 1") == prim("add", x, num(1))
    assert parse_entry("x == 1") == prim("eq", x, num(1))
    assert parse_entry("x = x + 1", bound=["x"]) == Decl("x", prim("add", x, num(1)))
    assert parse_entry("sin 1", bound=["sin"]) == App(Var("sin"), num(1))
    assert parse_entry("def cos = 1") == Decl("cos", num(1))


@pytest.mark.parametrize("text", [
    "(1 +", "let x = 1 +", "def f x =", "(x : R", "x =", "def", "\\x ->", "if a then b",
    "[1, 2", "f (g (h", "let x = 1 in", "x <+>",
])
def test_incomplete_inputs(text):
    assert is_incomplete(text)


@pytest.mark.parametrize("text", ["f x", "", "  -- only a comment", "1 )", "x # y", "def f = 1",
                                  "1 < 2 < 3", "1e999 +", "let x = 1"])
def test_complete_or_wrong_inputs(text):
    assert not is_incomplete(text)


# --------------------------------------------------------------------------- error messages


@pytest.mark.parametrize("text, message, line, col", [
    ("def f = (1 + ", "unexpected end of input; expected an expression or `)`", 1, 13),
    ("def f = (1 +\n\n-- the end\n", "unexpected end of input; expected an expression or `)`",
     1, 13),
    ("def f = let x = 1", "unexpected end of input; expected an argument, an operator or `in`",
     1, 18),
    ("def f = (x\n  y ]", "unexpected `]`; expected an argument, an operator, `)`, `,` or `:`",
     2, 5),
    ("def f = 1 1 )", "unexpected `)`; expected an argument, an operator, `def`, `primitive` "
     "or end of input", 1, 13),
    ("def f = 1 +* 2", "unexpected `*`; expected an expression", 1, 12),
    ("def f = let in 1", "unexpected `in`; expected a name or a pattern", 1, 13),
    ("def f x y", "unexpected end of input; expected a parameter, `:` or `=`", 1, 10),
    ("def f = \\x", "unexpected end of input; expected a parameter, `->` or `-o`", 1, 11),
    ("def f = (x : R R)", "unexpected name `R`; expected `)`, `->`, `-o` or `*`", 1, 16),
    ("def f : = 1", "unexpected `=`; expected a type", 1, 9),
    ("def f = 1\nlet x = 2", "unexpected `let`; expected an argument, an operator, `def`, "
     "`primitive` or end of input", 2, 1),
    ("f = 1", "unexpected name `f`; expected `def`, `primitive`, `import` or end of input", 1, 1),
])
def test_error_messages(text, message, line, col):
    error = error_of(text, lambda t: parse_module(t, "m.lam"))
    assert error.message == message
    assert (error.span.file, error.span.line, error.span.col) == ("m.lam", line, col)


def test_spans():
    term = parse_expr("let y = a +\n  sin b in y", file="s.lam")
    assert term.span == Span("s.lam", 1, 1, 2, 13)
    assert term.value.span == Span("s.lam", 1, 9, 2, 8)
    assert term.value.args[1].span == Span("s.lam", 2, 3, 2, 8)
    assert term.value.args[1].args[0].span == Span("s.lam", 2, 7, 2, 8)
    decl = parse_module("def f x = x", "m.lam").decls[0]
    assert decl.span == Span("m.lam", 1, 1, 1, 12)
    assert all(node.span is not None for node in walk(decl.value))


def test_a_chain_of_lets_desugars_as_the_same_lets_one_inside_the_other():
    """A chain of lets is desugared by one loop: the same terms and fresh names as lets each
    in parentheses (which desugar one by one), each let spanning to the end of the chain."""
    lets = ["let (a, (b, c)) = p in", "let f x = x * a in", "let g (u, v) : R = u in",
            "let h = f (g (b, c)) in"]
    chain = parse_expr("\n".join(lets) + "\nh", bound=["p"])
    nested = "\n".join(f"{let} (" for let in lets) + "\nh" + ")" * len(lets)
    assert chain == parse_expr(nested, bound=["p"])
    assert chain.span == Span("<expr>", 1, 1, 5, 2)
    assert [node.span for node in walk(chain) if isinstance(node, Let)] == [
        Span("<expr>", line, 1, 5, 2) for line in (2, 3, 4)]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\n", max_size=40),
       st.lists(st.tuples(st.integers(0, 45), st.integers(0, 45)), max_size=30))
def test_spans_on_the_lines_of_the_last_ones_are_those_the_search_finds(text, extents):
    """The desugarer remembers the lines of the last span it made: in any order of offsets,
    each span is the one the search of the lines gives."""
    desugarer = desugar_module._desugarer(text, "f.lam", ())
    lines = reading_module._Lines(text)
    for start, end in extents:
        start, end = sorted((min(start, len(text)), min(end, len(text))))
        assert desugarer.span_at(start, end) == Span("f.lam", *lines.place((start, end)))


def test_every_node_has_a_span():
    text = ("def f (a, b) (x : R) = let (u, v) = (a, b, [x]) in \\q -> if u && v || q < 1 "
            "then map sin [x ^ -2] else (seed 0 x <+> zero, cotangent x 1, (x : R))")
    for node in walk(parse_module(text).decls[0].value):
        assert node.span is not None, node


# --------------------------------------------------------------------------- depth and size


def test_5000_nested_parentheses():
    depth = 5000
    assert parse_expr("(" * depth + "x" + ")" * depth) == x
    term = parse_expr("f " + "(f " * depth + "x" + ")" * depth)
    assert isinstance(term, App)


def test_3000_deep_let_chain():
    depth = 3000
    text = "".join(f"let x{i} = x{i - 1} + 1 in\n" for i in range(1, depth)) + f"x{depth - 1}"
    term = parse_expr(text, bound=["x0"])
    for _ in range(depth - 1):
        assert isinstance(term, Let)
        term = term.body
    assert term == Var(f"x{depth - 1}")


def test_deep_lambdas_patterns_types_and_spines():
    depth = 3000
    assert isinstance(parse_expr("\\x -> " * depth + "x"), Lam)
    pattern = "(" * depth + "a" + "".join(f", b{i})" for i in range(depth))
    assert isinstance(parse_expr(f"\\{pattern} -> a"), Lam)
    assert isinstance(parse_type("[" * depth + "R" + "]" * depth), ListT)
    assert isinstance(parse_expr("f" + " x" * depth), App)
    assert isinstance(parse_expr("x" + " ^ x" * depth), Prim)
    assert isinstance(parse_expr("- " * depth + "x"), Prim)


def test_pathological_inputs_fail_fast():
    for text in ["(" * 5000, "[" * 5000 + "]", "\\" * 2000, "let " * 2000, "1 " * 5000 + ")",
                 "- " * 5000, "x" + " <" * 2000]:
        start = time.perf_counter()
        with pytest.raises(ParseError):
            parse_module("def f = " + text)
        assert time.perf_counter() - start < 5


# --------------------------------------------------------------------------- fuzzing

_PROGRAM = """\
-- a sample with every construct
def f (x1 : R) (x2 : R) : R = log x1 + x1 * x2 - sin x2
def g (a, (b, _)) c = let (u, v) = (a, b) in if u < v && true || false then -u ^ 2 else v
def h = \\xs -> fold (\\acc x -> acc + x) 0 (map (\\x -> x * 2.5e-1) xs)
def k = \\a -o seed 0 (a * 2) <+> zero
def main = (f 2 5, grad (\\(a, b) -> f a b) (2, 5), [1, 2, 3], (x : [R * Bool]))
"""

_PIECES = ["def", "let", "in", "if", "then", "else", "true", "false", "\\", "λ", "->", "→", "-o",
           "⊸", "(", ")", "[", "]", ",", ":", "=", "==", "<", "<=", "<+>", "⊕", "+", "-", "*",
           "/", "^", "&&", "||", "--", "\n", " ", "x", "f", "_", "sin", "map", "seed", "zero",
           "cotangent", "R", "ℝ", "×", "Bool", "1", "2.5", "1e-3", "1e", ".", "'", "#", "\t",
           "a'", "0"]


def _check_outcome(text: str, parse) -> None:
    try:
        parse(text)
    except (ParseError, TypeCheckError) as error:
        # The parser reports a use of a definition in itself or before it as a type
        # error (no recursion; definitions see only the ones above them), located.
        span = error.span
        assert span is not None and error.message
        assert 1 <= span.line <= text.count("\n") + 1
        assert span.col >= 1 and (span.end_line, span.end_col) >= (span.line, span.col)


_PARSERS = [parse_module, parse_expr, parse_type, parse_entry]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60), st.sampled_from(_PARSERS))
def test_random_text_only_raises_parse_errors(text, parse):
    _check_outcome(text, parse)
    is_incomplete(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join), st.sampled_from(_PARSERS))
def test_token_soup_only_raises_parse_errors(text, parse):
    _check_outcome(text, parse)
    is_incomplete(text)


@st.composite
def _mutated_program(draw):
    text = _PROGRAM
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate"]))
        if action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 10)):]
        elif action == "insert":
            text = text[:at] + draw(st.sampled_from(_PIECES)) + text[at:]
        elif action == "duplicate":
            text = text[:at] + text[at:at + draw(st.integers(1, 20))] + text[at:]
        else:
            text = text[:at]
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_program())
def test_mutated_programs_only_raise_parse_errors(text):
    _check_outcome(text, parse_module)
    is_incomplete(text)


def test_the_sample_program_parses():
    assert len(parse_module(_PROGRAM).decls) == 5


def _concrete_shape(value):
    """A concrete tree (or what a callback made) as plain data, tokens with their positions."""
    if isinstance(value, reading_module._Surface):
        return (value.kind, value.start, value.end, _concrete_shape(value.parts))
    if isinstance(value, reading_module._Token):
        return ("token", value.kind, value.text, value.start, value.end)
    if isinstance(value, (list, tuple)):
        return tuple(_concrete_shape(part) for part in value)
    return value


def _outcome(parse):
    try:
        return _concrete_shape(parse())
    except reading_module._Located as error:
        return ("located", error.message, error.pos)
    except (lalr.Refused, lark.exceptions.UnexpectedInput):
        return "refused"


_TYPED = "def t (p : d<R> * (R -> R) -o [R] × ℝ) : R = p -- a comment\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_program(), st.sampled_from(["module", "repl_entry", "expr_entry", "type_entry"]),
       st.booleans())
def test_the_fast_driver_builds_what_lark_builds(text, start, typed):
    """The driver reads lark's tables with a scanner of its own: on every text it builds the
    same concrete tree as lark's parser (tokens, positions, callbacks' errors) or refuses
    where lark raises a syntax error (which lark then reports)."""
    if typed:
        text = _TYPED + text
    driver, reference = reading_module._driver(), reading_module._parser()
    assert _outcome(lambda: driver.parse(text, start)) == \
        _outcome(lambda: reference.parse(text, start=start))


def test_the_fast_driver_lexes_by_context():
    """`*` is a product in a type and a product of reals in an expression; `d<` opens a
    cotangent type only where a type is expected; `-o` after an operand is a subtraction."""
    driver, reference = reading_module._driver(), reading_module._parser()
    for text, start in [("R * d<R> -o R", "type_entry"), ("d<x * y -o", "expr_entry"),
                        ("x * y", "expr_entry"), ("\\a -o a", "expr_entry"),
                        ("(x : R * R)", "expr_entry"), ("", "module"), ("  -- only\n", "module")]:
        assert _outcome(lambda: driver.parse(text, start)) == \
            _outcome(lambda: reference.parse(text, start=start)), text


def _import_and_parse(cache_home: str) -> str:
    """What a fresh process prints parsing a program, with its cache directory at
    ``cache_home``."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "XDG_CACHE_HOME": cache_home}
    done = subprocess.run(
        [sys.executable, "-c", "import lambdad; p = lambdad.loads('def f (x : R) : R = "
         "let y = x * x in y ^ 2 - sin y'); print(p.value_and_grad('f', 1.5))"],
        capture_output=True, text=True, env=env, check=True)
    assert done.stderr == ""
    return done.stdout


def test_the_grammar_analysis_is_kept_between_processes_and_read_back(tmp_path):
    first = _import_and_parse(str(tmp_path))
    (kept,) = (tmp_path / "lambdad").glob("*.lark-cache")  # (beside: lambdad.lalr's record)
    assert kept.name.startswith("grammar-") and kept.stat().st_size > 0
    written = kept.stat().st_mtime_ns
    assert _import_and_parse(str(tmp_path)) == first  # read back, not written again
    assert kept.stat().st_mtime_ns == written
    kept.write_bytes(b"not a parser\n")  # a damaged file: analysed again
    assert _import_and_parse(str(tmp_path)) == first


def test_no_cache_directory_is_no_error(tmp_path):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    reference = _import_and_parse(str(tmp_path / "cache"))
    assert _import_and_parse(str(blocked)) == reference


_AT_ONCE_PROGRAMS = [
    "def f (x : R) : R = x * x * 0.5 + sin x",
    "def f (x : R) : R = (x + 1) * (let y = x in y) - exp (x * 2) / cos (sin x)",
    "def f (x : R) : R = let sin = \\y -> y * 2 in sin x + sin (sin x)",
    "def f (x : R) : R = if x < 0 then -x else x ^ 2 + log (1 + x)",
    "def f (g : R -> R) (x : R) : R = g x + g (g x) * abs x",
    "def f (xs : [R]) : R = fold (\\a x -> a + x * x) 0 xs + sum xs",
    "primitive sq x = x * x\n  partial x = 2 * x\ndef f (x : R) : R = sq x + sq (sq x)",
]


def _as_step(arm):
    def step(self, node):
        return arm(self, node)
        yield  # a generator function

    return step


@pytest.mark.parametrize("text", _AT_ONCE_PROGRAMS)
def test_leaves_converted_at_once_are_those_of_the_steps(text, monkeypatch):
    # operators over leaves, and built-ins applied to a leaf, are converted without a
    # step of the recursion driver: the same terms, with the same spans, as the steps give
    def spans(module):
        return [(type(node).__name__, node.span) for decl in module.decls
                for node in walk(decl.value)]

    at_once = parse_module(text, "f.lam", predefined=["sum"])
    desugarer = desugar_module._Desugarer
    for arm in ("_name", "_number"):  # every leaf a step (one that returns at once)
        monkeypatch.setattr(desugarer, arm, _as_step(getattr(desugarer, arm)))
    by_steps = parse_module(text, "f.lam", predefined=["sum"])
    assert at_once == by_steps
    assert spans(at_once) == spans(by_steps)


@pytest.mark.parametrize("text, message", [
    ("def f (x : R) : R = x * _ + sin x", "`_` is not a value"),
    ("def f (x : R) : R = x + f x", "no recursion"),
    ("def f (x : R) : R = x + seed 1.5", "`seed` expects a whole number"),
])
def test_errors_of_leaves_converted_at_once(text, message):
    with pytest.raises((ParseError, TypeCheckError), match=message):
        parse_module(text, "f.lam")
