"""Type inference, as a specification: source in, printed type (or error and location) out."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lambdad.errors import Span, TypeCheckError, render
from lambdad.parser import parse_expr, parse_module, parse_type
from lambdad.primitives import PRIMITIVES
from lambdad.printer import print_type
from lambdad.syntax import (
    BOOL,
    COTANGENT,
    CotangentT,
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
    LinLam,
    ListLit,
    ListT,
    Module,
    Pair,
    PairT,
    Plus,
    Prim,
    Seed,
    Var,
    VarT,
    Zero,
    type_vars,
    walk,
)
from lambdad.typecheck import (
    Scheme,
    TypeEnv,
    check_term,
    infer_module,
    infer_term,
    print_scheme,
)

ROOT = Path(__file__).resolve().parent.parent
FILE = "t.lam"


def types_of(source: str) -> dict[str, str]:
    """Each top-level name of ``source`` with its printed scheme."""
    typing = infer_module(parse_module(source, FILE))
    return {name: str(scheme) for name, scheme in typing.schemes.items()}


def type_of(expr: str) -> str:
    return str(infer_term(parse_expr(expr, FILE)).scheme)


def error_of(source: str) -> TypeCheckError:
    with pytest.raises(TypeCheckError) as info:
        infer_module(parse_module(source, FILE))
    return info.value


def rendered(source: str) -> str:
    return render(error_of(source), {FILE: source})


# --------------------------------------------------------------------------- built-ins

BUILTIN_TYPES = {
    "sin": "R -> R",
    "max": "R -> R -> R",
    "pow": "R -> R -> R",
    "lt": "R -> R -> Bool",
    "not": "Bool -> Bool",
    "fst": "a * b -> a",
    "snd": "a * b -> b",
    "map": "(a -> b) -> [a] -> [b]",
    "fold": "(a -> b -> a) -> a -> [b] -> a",  # (b -> a -> b) -> b -> [a] -> b, renamed
    "zip": "[a] -> [b] -> [a * b]",
    "length": "[a] -> R",
    "range": "R -> [R]",
    "grad": "(a -> R) -> a -> a",
    "jvp": "(a -> b) -> a -> a -> b * b",
    "vjp": "(a -> b) -> a -> b * (b -> a)",
}


@pytest.mark.parametrize("name, expected", sorted(BUILTIN_TYPES.items()))
def test_principal_type_of_a_builtin(name, expected):
    assert str(infer_term(Builtin(name)).scheme) == expected


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_every_primitive_has_its_table_type(name):
    scheme = infer_term(Builtin(name)).scheme
    table = PRIMITIVES[name].type
    assert str(scheme) == print_scheme(Scheme(tuple(type_vars(table)), table))


def test_builtins_by_their_surface_names():
    assert type_of("map") == "(a -> b) -> [a] -> [b]"
    assert type_of("map sin") == "[R] -> [R]"
    assert type_of("fold (\\acc x -> acc + x) 0") == "[R] -> R"
    assert type_of("zip [1, 2] [true]") == "[R * Bool]"
    assert type_of("grad (\\(a, b) -> a * b)") == "R * R -> R * R"
    assert type_of("vjp sin 1") == "R * (R -> R)"


def test_a_free_primitive_name_as_a_variable_means_the_primitive():
    assert print_type(infer_term(App(Var("sin"), Const(1.0))).type) == "R"


def test_the_environment_of_builtins_holds_no_primitive():
    assert len(TypeEnv.builtins()) == 0


# --------------------------------------------------------------------------- programs


def test_the_reference_programs_of_the_language():
    assert types_of("def f (x1 : R) (x2 : R) : R = log x1 + x1 * x2 - sin x2\n"
                    "def main = (f 2 5, grad (\\(a, b) -> f a b) (2, 5))") == {
        "f": "R -> R -> R", "main": "R * (R * R)"}
    assert types_of("def f x1 x2 = exp (2*x1) + x1*x2^2 + cos x2")["f"] == "R -> R -> R"
    assert types_of("def f x1 x2 = sin ((x1 - x2)^2)")["f"] == "R -> R -> R"
    assert types_of("def f (a, b, c, x) = a*x^2 + b*x + c")["f"] == "R * R * R * R -> R"


def _with_prelude(path: Path) -> dict[str, str]:
    prelude = parse_module((ROOT / "lambdad" / "prelude.lam").read_text(), "<prelude>")
    base = infer_module(prelude)
    module = parse_module(path.read_text(), str(path), predefined=tuple(base.schemes))
    typing = infer_module(module, base.env)
    assert set(base.schemes) <= set(typing.env) and set(typing.schemes) <= set(typing.env)
    return {name: str(scheme) for name, scheme in typing.schemes.items()}


@pytest.mark.parametrize("path", sorted((ROOT / "programs").glob("*.lam")), ids=lambda p: p.name)
def test_every_example_program_type_checks(path):
    schemes = _with_prelude(path)
    assert schemes


def test_the_combinators_example():
    path = ROOT / "programs" / "combinators.lam"
    if not path.exists():
        pytest.skip("no combinators example")
    schemes = _with_prelude(path)
    assert schemes["compose"] == "(a -> b) -> (c -> a) -> c -> b"
    assert schemes["twice"] == "(a -> a) -> a -> a"
    assert schemes["flip"] == "(a -> b -> c) -> b -> a -> c"
    assert schemes["quartic"] == "R -> R"


@pytest.mark.parametrize("expr, expected", [
    ("\\x -> x", "a -> a"),
    ("\\x y -> x", "a -> b -> a"),
    ("\\f g x -> f (g x)", "(a -> b) -> (c -> a) -> c -> b"),
    ("\\f x -> f (f x)", "(a -> a) -> a -> a"),
    ("\\f x y -> f y x", "(a -> b -> c) -> b -> a -> c"),
    ("\\(x, y) -> (y, x)", "a * b -> b * a"),
    ("\\p -> fst p + snd p", "R * R -> R"),
    ("\\xs -> map (\\x -> (x, x > 0)) xs", "[R] -> [R * Bool]"),
    ("\\b x -> if b then x else 0", "Bool -> R -> R"),
    ("\\x -> x && not x || true", "Bool -> Bool"),
    ("[]", "[a]"),
    ("[[], [1]]", "[[R]]"),
    ("\\(x : R) -> x", "R -> R"),
    ("(\\x -> x : R -> R)", "R -> R"),
    ("let id = \\x -> x in (id 1, id true)", "R * Bool"),
    ("let (f, g) = (\\x -> x, \\y -> y) in (f 1, f true, g [])", "R * Bool * [a]"),
    ("let f x = let g y = (x, y) in (g 1, g true) in f", "a -> (a * R) * (a * Bool)"),
    ("\\f g h k -> (f, g, h, k)", "a -> b -> c -> e -> a * b * c * e"),
])
def test_principal_types_of_small_programs(expr, expected):
    assert type_of(expr) == expected


def test_lambda_bound_names_are_not_generalised():
    error = error_of("def f = \\id -> (id 1, id true)")
    assert error.message == "this function expects R, but the argument has type Bool"
    assert (error.span.line, error.span.col, error.span.end_col) == (1, 26, 30)


def test_declarations_are_generalised_and_visible_later():
    assert types_of("def id x = x\ndef pair = (id 1, id [true])\ndef twice f x = f (f x)\n"
                    "def four = twice (\\x -> x + x) 1") == {
        "id": "a -> a", "pair": "R * [Bool]", "twice": "(a -> a) -> a -> a", "four": "R"}


def test_schemes_name_variables_in_order_of_occurrence():
    typing = infer_module(parse_module("def k x y = x", FILE))
    scheme = typing.schemes["k"]
    assert scheme.vars == ("a", "b")
    assert scheme.type == parse_type("a -> b -> a")
    assert print_scheme(Scheme(("x", "y"), FunT(VarT("y"), VarT("x")))) == "a -> b"
    assert str(Scheme((), FunT(REAL, COTANGENT))) == "R -o d"


# --------------------------------------------------------------------------- errors


def test_a_primitive_argument_of_the_wrong_type():
    assert rendered("def g x = x + [1, 2]") == (
        "t.lam:1:15: type error: `+` expects R, but this has type [R]\n"
        "    1 | def g x = x + [1, 2]\n"
        "      |               ^^^^^^")


def test_an_operator_is_named_by_its_spelling():
    assert error_of("def f = -true").message == "`-` expects R, but this has type Bool"
    assert error_of("def f = 1 < true").message == "`<` expects R, but this has type Bool"
    error = error_of("def f = map (\\x -> x + 1) [true]")
    assert error.message == "`map` expects [R], but this has type [Bool]"
    assert error.span.col == 27


def test_an_argument_of_the_wrong_type():
    error = error_of("def f (g : R -> R) = g (1, 2)")
    assert error.message == "this function expects R, but the argument has type R * R"
    assert (error.span.col, error.span.end_col) == (24, 30)


def test_applying_what_is_not_a_function():
    error = error_of("def f (x : R) = x 1")
    assert error.message == "`x` is not a function; it has type R"
    assert (error.span.col, error.span.end_col) == (17, 18)
    error = error_of("def f = sin 1 2")
    assert error.message == "`sin` applied to 1 argument is not a function; it has type R"
    assert error_of("def f = (1, 2) 3").message == "this is not a function; it has type R * R"


def test_if_conditions_and_branches():
    error = error_of("def f x = if x + 1 then 1 else 2")
    assert error.message == "expected Bool, but the condition of `if` has type R"
    assert (error.span.col, error.span.end_col) == (14, 19)
    error = error_of("def f x = if x then 1 else true")
    assert error.message == "the branches of `if` have different types: R and Bool"
    assert (error.span.col, error.span.end_col) == (28, 32)


def test_logical_operators_are_named_as_written():
    error = error_of("def f x = x && 1")
    assert error.message == "`&&` expects Bool, but this has type R"
    assert error.span.col == 16
    assert error_of("def f x = 1 || x").message == "`||` expects Bool, but this has type R"


def test_list_items_of_different_types():
    error = error_of("def f x = [x, 1, true]")
    assert error.message == ("the items of a list must have one type, but the first has type R "
                             "and this one Bool")
    assert error.span.col == 18


def test_annotations_are_checked():
    error = error_of("def f (x : R) = (x : Bool)")
    assert error.message == "annotated Bool, but the expression has type R"
    assert error.span.col == 18
    assert error_of("def f : R = true").message == "annotated R, but the expression has type Bool"


def test_unknown_names_with_a_suggestion():
    error = error_of("def f = quux 1")
    assert error.message == "unknown name `quux`"
    assert (error.span.col, error.span.end_col) == (9, 13)
    assert error_of("def f xs = lenght xs").message == (
        "unknown name `lenght`; did you mean `length`?")
    assert error_of("def f count = cuont + 1").message == (
        "unknown name `cuont`; did you mean `count`?")


def test_the_occurs_check():
    error = error_of("def f x = x x")
    assert error.message == "infinite type: a = a -> b"
    assert error.span.col == 13


def test_a_pair_pattern_needs_a_pair():
    assert error_of("def f = let (a, b) = 1 in a").message == (
        "a pair pattern needs a pair, but this has type R")


def test_a_name_defined_twice():
    module = Module((Decl("f", Const(1.0)), Decl("f", Const(2.0), span=Span(FILE, 2, 1, 2, 4))))
    with pytest.raises(TypeCheckError, match="`f` is already defined") as info:
        infer_module(module)
    assert info.value.span.line == 2


def test_a_culprit_without_a_location_is_reported_at_its_nearest_located_ancestor():
    where = Span(FILE, 3, 5, 3, 20)
    term = Lam("x", Prim("add", (Var("x"), BoolLit(True))), span=where)
    with pytest.raises(TypeCheckError) as info:
        infer_term(term)
    assert info.value.span == where


# --------------------------------------------------------------------------- annotations


def test_annotation_variables_are_rigid():
    error = error_of("def id (x : a) : a = x + 1")
    assert error.message == "`+` expects R, but this has type a"
    assert "`a` is a type variable of an annotation" in error.notes[0]
    assert error.span.col == 22
    error = error_of("def f (x : a) (y : b) : a = y")
    assert error.message == "annotated a, but the expression has type b"


def test_annotated_declarations_are_generalised():
    assert types_of("def id (x : a) : a = x\ndef use = (id 1, id true)") == {
        "id": "a -> a", "use": "R * Bool"}
    assert types_of("def k (x : b) (y : a) = x")["k"] == "a -> b -> a"
    assert types_of("def p (x : a) (y : a) = (x, y)")["p"] == "a -> a -> a * a"
    assert types_of("def f (x : a) : R = 1\ndef g (x : a) : [a] = [x]") == {
        "f": "a -> R", "g": "a -> [a]"}


def test_a_local_annotated_definition_is_polymorphic():
    assert type_of("let id (x : a) : a = x in (id 1, id true)") == "R * Bool"


def test_a_rigid_variable_of_the_enclosing_scope_is_not_generalised():
    error = error_of("def f (x : a) = let g (y : a) = y in (g x, g 1)")
    assert error.message == "this function expects a, but the argument has type R"


# --------------------------------------------------------------------------- target language


def test_a_backpropagation_style_term():
    src = "def f p = let (x, x_) = p in (sin x, \\a -o x_ (cos x * a))"
    assert types_of(src)["f"] == "R * (R -o d) -> R * (R -o d)"


def test_linear_constructs():
    # the linear constructs are polymorphic in the ring of the cotangents (a nesting level)
    assert type_of("\\a -o zero") == "a -o d<a>"
    assert type_of("seed 3") == "a -o d<a>"
    assert type_of("\\a -o seed 0 (a * 2)") == "R -o d"
    assert type_of("(\\a -o seed 0 a : R * R -o d<R * R>)") == "R * R -o d<R * R>"
    assert type_of("seed 0 (1, 2) <+> zero") == "d<R * R>"
    assert type_of("seed 0 1 <+> zero") == "d"
    applied = infer_term(parse_expr("\\(g : R -o d) -> g 1", FILE)).type
    assert applied == FunT(FunT(REAL, COTANGENT), COTANGENT)
    term = LinLam("a", Plus(App(Seed(Const(0.0)), Var("a")), Zero()))
    ring = infer_term(term).type.arg
    assert infer_term(term).type == FunT(ring, CotangentT(ring))


def test_reading_off_a_gradient():
    assert type_of("cotangent (1, seed 0) (seed 0 1)") == "R"
    assert type_of("cotangent ((1, seed 0), [(2, seed 1)], true) zero") == "R * [R] * Bool"
    assert type_of("\\p -> cotangent (p : R * (R -o d)) zero") == "R * (R -o d) -> R"
    # over another ring: the adjoints are in that ring
    assert type_of("\\p -> cotangent (p : (R * R) * (R * R -o d<R * R>)) zero") == (
        "(R * R) * (R * R -o d<R * R>) -> R * R")


def test_reading_off_needs_a_known_seeded_input():
    error = error_of("def f xs = cotangent xs zero")
    assert error.message.startswith("`cotangent` needs a seeded input")
    assert error.message.endswith("but this has type a")
    assert error.span.col == 22
    assert error_of("def f = cotangent 1 zero").message.endswith("but this has type R")
    assert error_of("def f = cotangent (1, seed 0) 2").message == (
        "`cotangent` expects d, but this has type R")


def test_linear_errors():
    assert error_of("def f = zero <+> 1").message == (
        "`<+>` expects d (over any ring: d<K>), but this has type R")
    assert error_of("def f = seed 0 (1, 2) <+> seed 1 1").message == (
        "`<+>` expects d<R * R>, but this has type d")
    assert error_of("def f = \\a -o a").message == (
        "the body of a linear abstraction must be a cotangent over the type of its parameter "
        "(d<K> when the parameter has type K), not a value of that type")
    assert error_of("def f = \\a -o 1").message == (
        "the body of a linear abstraction must have type d (over any ring: d<K>), but this "
        "has type R")


def test_check_term_against_a_transformed_type():
    term = parse_expr("\\p -> let (x, x_) = p in (sin x, \\a -o x_ (cos x * a))", FILE)
    expected = parse_type("R * (R -o d) -> R * (R -o d)")
    assert check_term(term, expected, TypeEnv.builtins()).type == expected
    assert check_term(parse_expr("\\x -> x"), parse_type("a -> a"), None).type == (
        parse_type("a -> a"))
    with pytest.raises(TypeCheckError) as info:
        check_term(parse_expr("\\x -> x + 1", FILE), parse_type("a -> a"), TypeEnv.builtins())
    assert info.value.message == "expected a -> a, but this has type R -> R"


def test_check_term_uses_the_environment():
    env = TypeEnv.builtins().extend("g", Scheme(("a",), FunT(VarT("a"), VarT("a"))))
    assert check_term(parse_expr("g 1", FILE, bound=("g",)), REAL, env).type == REAL
    assert "g" not in TypeEnv.builtins()


# --------------------------------------------------------------------------- the types table


def test_every_node_has_a_type():
    module = parse_module("def f (xs : [R]) = map (\\(x, y) -> x * y) (zip xs xs)\n"
                          "def g = let id = \\x -> x in (id 1, id [true], f [1])", FILE)
    typing = infer_module(module)
    for decl in module.decls:
        for node in walk(decl.value):
            assert id(node) in typing.types


@pytest.mark.parametrize("depth", [2, 15, 16, 17, 60])
def test_arithmetic_of_any_depth_types_every_node_and_locates_its_errors(depth):
    """Trees of primitive applications over leaves, typed by recursion up to a bound and by
    steps beyond it: every node gets its type, and an error is located at its culprit."""
    body = "x"
    for i in range(depth):
        body = f"(sin {body} * {i} + x)"
    module = parse_module(f"def f (x : R) : R = {body}\n"
                          f"def g (x : R) = map (\\y -> {body} + y) [x]", FILE)
    typing = infer_module(module)
    for decl in module.decls:
        for node in walk(decl.value):
            assert id(node) in typing.types
            if isinstance(node, Prim) and PRIMITIVES[node.op].kind == "real":
                assert typing.types[id(node)] == REAL
    wrong = body.replace("sin x", "sin true", 1)
    with pytest.raises(TypeCheckError) as caught:
        infer_module(parse_module(f"def f (x : R) : R = {wrong}", FILE))
    assert caught.value.span.col == len("def f (x : R) : R = ") + wrong.index("true") + 1
    assert "`sin` expects R, but this has type Bool" in caught.value.message


def test_a_let_chain_of_reals_and_booleans_types_every_node():
    # real and boolean let values, and real variable operands, are typed inline
    module = parse_module("def f (x : R) : R =\n  let y = x * x * 0.5 + sin x in\n"
                          "  let b = y < 1 in\n  let z = if b then sin y else y - x in\n"
                          "  z * y + z", FILE)
    typing = infer_module(module)
    for node in walk(module.decls[0].value):
        assert id(node) in typing.types
        if isinstance(node, Var):
            assert typing.types[id(node)] == (BOOL if node.name == "b" else REAL)
    assert print_type(typing.schemes["f"].type) == "R -> R"
    wrong = parse_module("def f (x : R) : R = let b = x < 1 in b * x", FILE)
    with pytest.raises(TypeCheckError, match="`\\*` expects R, but this has type Bool"):
        infer_module(wrong)


def test_equal_nodes_at_different_places_have_their_own_types():
    first, second = Var("id"), Var("id")
    term = Let("id", Lam("x", Var("x")), Pair(App(first, Const(1.0)), App(second, BoolLit(True))))
    typing = infer_term(term)
    assert print_type(typing.types[id(first)]) == "R -> R"
    assert print_type(typing.types[id(second)]) == "Bool -> Bool"
    assert print_type(typing.types[id(term.value)]) == "a -> a"


def test_table_variables_agree_with_the_scheme():
    module = parse_module("def swap p = let (x, y) = p in (y, x)", FILE)
    typing = infer_module(module)
    value = module.decls[0].value
    assert typing.types[id(value)] == typing.schemes["swap"].type
    assert print_type(typing.types[id(value)]) == "a * b -> b * a"


# --------------------------------------------------------------------------- depth


def _sum_chain(depth):
    term = Const(1.0)
    for _ in range(depth):
        term = Prim("add", (Const(1.0), term))
    return term


def test_deeply_nested_arithmetic():
    typing = infer_term(_sum_chain(10_000))
    assert typing.type == REAL


def test_a_long_let_chain():
    depth = 10_000
    term = Var(f"x{depth}")
    for i in reversed(range(depth + 1)):
        value = Const(1.0) if i == 0 else Prim("mul", (Var(f"x{i-1}"), Var(f"x{i-1}")))
        term = Let(f"x{i}", value, term)
    assert infer_term(term).type == REAL


def test_deep_types():
    item = Const(1.0)
    for _ in range(3_000):
        item = Pair(Const(1.0), item)
    typing = infer_term(ListLit((item, item)))
    expected = REAL
    for _ in range(3_000):
        expected = PairT(REAL, expected)
    assert typing.type == ListT(expected)

    term = Var("x2999")
    for i in reversed(range(3_000)):
        term = Let(f"x{i}", Const(1.0) if i == 0 else ListLit((Var(f"x{i-1}"),)), term)
    expected = REAL
    for _ in range(2_999):
        expected = ListT(expected)
    assert infer_term(term).type == expected


def test_deeply_nested_lambdas():
    depth = 5_000
    term = Var("x0")
    for i in reversed(range(depth)):
        term = Lam(f"x{i}", term)
    printed = str(infer_term(term).scheme)
    # Printed in bounded size, saying so; in full on request (without recursion either).
    assert printed.startswith("a -> b -> c -> e ->")
    assert printed.endswith("… [type abbreviated: it has 10001 parts]")
    full = print_type(infer_term(term).type, limit=None)
    first = full.split(" ", 1)[0]
    assert full.count(" -> ") == depth and full.endswith(f"-> {first}")


def test_an_error_deep_inside_is_located():
    where = Span(FILE, 9, 2, 9, 6)
    term = Prim("add", (BoolLit(True, span=where), Const(1.0)))
    for _ in range(10_000):
        term = Prim("add", (Const(1.0), term))
    with pytest.raises(TypeCheckError) as info:
        infer_term(term)
    assert info.value.span == where
    assert info.value.message == "`+` expects R, but this has type Bool"


def test_a_chain_of_lets_types_each_let_and_locates_errors_at_the_innermost_located_one():
    """A chain of lets is typed by one loop: each inner let still has its type, and an
    error without a location is reported at the innermost let with one around it."""
    outer, middle = Span(FILE, 1, 1, 4, 2), Span(FILE, 2, 3, 4, 2)
    culprit = Prim("add", (Var("y"), BoolLit(True)))
    term = Let("x", Const(1.0), Let("y", Var("x"), Let("z", culprit, Var("z")), span=middle),
               span=outer)
    with pytest.raises(TypeCheckError) as info:
        infer_term(term)
    assert info.value.span == middle
    fine = Let("x", Const(1.0), Let("y", Var("x"), Let("z", Var("y"), Pair(Var("z"), Var("x")))))
    typing = infer_term(fine)
    assert [print_type(typing.types[id(node)]) for node in walk(fine)
            if isinstance(node, Let)] == ["R * R"] * 3


def _doubling(depth):
    # x_{i+1} = (x_i, x_i): a type of size 2^n as a tree, n as a graph.
    term = Var(f"x{depth}")
    for i in reversed(range(depth + 1)):
        value = Const(1.0) if i == 0 else Pair(Var(f"x{i-1}"), Var(f"x{i-1}"))
        term = Let(f"x{i}", value, term)
    return term


def test_shared_types_are_not_unfolded():
    # 2^18 leaves: within the bound on the size of types, inferred as a graph
    assert isinstance(infer_term(_doubling(18)).type, PairT)
    # 2^2000 leaves: beyond the bound, which is found without unfolding the type either
    with pytest.raises(TypeCheckError, match="type is too large"):
        infer_term(_doubling(2_000))


# --------------------------------------------------------------------------- a property


def _typed_terms():
    """Pairs (term, printed type) of closed well-typed terms built from known-typed parts."""
    leaves = st.one_of(
        st.floats(-5, 5).map(lambda r: (Const(r), REAL)),
        st.booleans().map(lambda b: (BoolLit(b), BOOL)),
    )

    def extend(children):
        def pair(a, b):
            return Pair(a[0], b[0]), PairT(a[1], b[1])

        def first(a, b):
            return Prim("fst", (Pair(a[0], b[0]),)), a[1]

        def listed(a):
            return ListLit((a[0], a[0])), ListT(a[1])

        def let(a, b):
            return Let("v", a[0], Pair(Var("v"), b[0])), PairT(a[1], b[1])

        def identity(a):
            return App(Lam("x", Var("x")), a[0]), a[1]

        def choose(c, a):
            return If(Prim("lt", (Const(0.0), Const(1.0))), a[0], Annot(a[0], a[1])), a[1]

        def length(a):
            return Prim("length", (ListLit((a[0],)),)), REAL

        return st.one_of(
            st.builds(pair, children, children),
            st.builds(first, children, children),
            st.builds(listed, children),
            st.builds(let, children, children),
            st.builds(identity, children),
            st.builds(choose, children, children),
            st.builds(length, children),
        )

    return st.recursive(leaves, extend, max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(_typed_terms())
def test_generated_terms_get_their_types(case):
    term, expected = case
    typing = infer_term(term)
    assert typing.type == expected
    assert all(id(node) in typing.types for node in walk(term))
    assert check_term(term, expected).type == expected


def test_a_list_applied_like_python_indexing_gets_a_hint():
    error = error_of("def xs = [1, 2]\ndef main = xs[1]")
    assert error.message == "`xs` is not a function; it has type [R]"
    assert error.notes == ("to take an element of a list, index it with `!!`: `xs !! i` (from 0)",)
    assert error_of("def xs = [1, 2]\ndef main = 1 [2, 3]").notes == ()


@pytest.mark.parametrize("text, message, note", [
    ("def f (xs : [R]) : R = fold + 0 xs",
     "`+` expects R, but this has type (a -> b -> a) -> a -> [b] -> a",
     "`fold + ...` applies `+` to `fold` itself; to pass the operator to `fold` as a "
     "function, put it in parentheses: `fold (+) ...`"),
    ("def f (xs : [R]) : [R] = map (- 1) xs", "`map` expects a -> b, but this has type R",
     "`-1` is a negation (a number), not a section: subtracting is written "
     "`(\\x -> x - 1)` or `(+ (-1))`"),
    ("def f (x : R) (xs : [R]) : [R] = map (-x) xs", "`map` expects a -> b, but this has type R",
     "`-x` is a negation (a number), not a section: subtracting is written "
     "`(\\y -> y - x)` or `(+ (-x))`"),
])
def test_operators_passed_as_functions_lead_to_sections(text, message, note):
    with pytest.raises(TypeCheckError) as caught:
        infer_module(parse_module(text, FILE))
    assert caught.value.message == message
    assert caught.value.notes == (note,)


def test_a_local_binding_named_like_a_builtin_is_an_operand_without_a_note():
    assert types_of("def f (xs : [R]) : R = let map = 2 in map + 1") == {"f": "[R] -> R"}
