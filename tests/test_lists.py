"""Lists and the numeric prelude: values, located errors, types, and derivatives through
both transformations (the prelude's definitions have no derivative rules of their own)."""

import math

import pytest

import lambdad
from lambdad.errors import EvalError
from lambdad.parser import parse_expr
from lambdad.printer import print_term

XS = [3.0, 1.0, 4.0, 1.0, 5.0]

VALUES = [
    ("xs !! 2", 4), ("xs !! 0 + xs !! 4", 8), ("head xs", 3), ("last xs", 5),
    ("tail xs", [1, 4, 1, 5]), ("tail []", []), ("take 2 xs", [3, 1]), ("take 9 xs", XS),
    ("take (-1) xs", []), ("drop 3 xs", [1, 5]), ("drop 9 xs", []), ("drop 0 xs", XS),
    ("reverse xs", [5, 1, 4, 1, 3]), ("reverse []", []), ("[1] ++ xs ++ []", [1] + XS),
    ("concat [[1], [], [2, 3]]", [1, 2, 3]), ("filter (\\x -> x > 2) xs", [3, 4, 5]),
    ("replicate 3 7", [7, 7, 7]), ("scan (\\acc x -> acc + x) 0 xs", [0, 3, 4, 8, 9, 14]),
    ("last (scan (\\acc x -> acc * x) 1 xs) == fold (\\acc x -> acc * x) 1 xs", True),
    ("sum xs", 14), ("product xs", 60), ("dot xs xs", 52), ("mean xs", 2.8),
    ("norm [3, 4]", 5), ("maximum xs", 5), ("minimum xs", 1),
    ("logsumexp [1000, 1000]", 1000 + math.log(2)), ("softmax [5, 5]", [0.5, 0.5]),
    ("logsumexp [-1000, -1000]", -1000 + math.log(2)),
]


def evaluate(text):
    return lambdad.loads(f"def xs = {XS}\ndef main = {text}").run()


@pytest.mark.parametrize("text, expected", VALUES, ids=[v[0] for v in VALUES])
def test_values(text, expected):
    assert evaluate(text) == pytest.approx(expected)


ERRORS = [
    ("xs !! 5", "index 5 is out of range for a list of length 5"),
    ("xs !! (-1)", "index -1 is out of range for a list of length 5 (indices count from 0)"),
    ("xs !! 1.5", "index 1.5 is not a whole number"),
    ("head ([] : [R])", "head of an empty list"),
    ("last ([] : [R])", "last of an empty list"),
]


@pytest.mark.parametrize("text, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_located_at_the_use(text, message):
    with pytest.raises(EvalError) as caught:
        evaluate(f"1 + {text}")
    assert caught.value.message == message
    span = caught.value.span
    assert (span.line, span.col, span.end_col) == (2, 16, 16 + len(text))


def test_types_are_those_documented():
    program = lambdad.loads("def main = 0")
    schemes = program.typing.schemes
    expected = {"take": "R -> [a] -> [a]", "drop": "R -> [a] -> [a]", "tail": "[a] -> [a]",
                "reverse": "[a] -> [a]", "replicate": "R -> a -> [a]", "dot": "[R] -> [R] -> R",
                "softmax": "[R] -> [R]", "logsumexp": "[R] -> R", "maximum": "[R] -> R"}
    for name, text in expected.items():
        assert str(schemes[name]) == text
    typed = lambdad.loads("def f (xs : [R * R]) = (xs !! 0, head xs, xs ++ xs, scan "
                          "(\\n _ -> n + 1) 0 xs, concat [xs], filter (\\p -> fst p > 0) xs)")
    assert typed.types() == [
        ("f", "[R * R] -> (R * R) * (R * R) * [R * R] * [R] * [R * R] * [R * R]")]


def test_operators_print_and_parse_back():
    for text in ("xs !! 0 ^ 2", "f xs !! (i + 1)", "xs !! 0 !! 1", "xs ++ ys ++ zs", "xs !! (ys !! 0)",
                 "-xs !! 0", "(xs ++ ys) !! 2"):
        term = parse_expr(text, bound=("xs", "ys", "zs", "f", "i"))
        assert print_term(term) == text
        assert parse_expr(print_term(term), bound=("xs", "ys", "zs", "f", "i")) == term


# Functions of a list, and their gradients by hand.
GRADIENTS = [
    ("xs !! 1 * xs !! 2", lambda w: [0, w[2], w[1], 0]),
    ("head xs * last xs", lambda w: [w[3], 0, 0, w[0]]),
    ("sum (take 2 xs) + 3 * sum (drop 3 xs)", lambda w: [1, 1, 0, 3]),
    ("dot (reverse xs) xs", lambda w: [2 * w[3], 2 * w[2], 2 * w[1], 2 * w[0]]),
    ("sum (xs ++ tail xs)", lambda w: [1, 2, 2, 2]),
    ("sum (concat [xs, xs])", lambda w: [2, 2, 2, 2]),
    ("sum (filter (\\x -> x > 0) xs)", lambda w: [1 if x > 0 else 0 for x in w]),
    ("last (scan (\\acc x -> acc * x) 1 xs)",
     lambda w: [math.prod(w) / x for x in w]),
    ("sum (replicate 3 (xs !! 0))", lambda w: [3, 0, 0, 0]),
    ("mean xs", lambda w: [0.25] * 4),
    ("product xs", lambda w: [math.prod(w) / x for x in w]),
    ("norm xs", lambda w: [x / math.hypot(*w) for x in w]),
    ("maximum xs + 2 * minimum xs",
     lambda w: [(w.index(max(w)) == i) + 2 * (w.index(min(w)) == i) for i in range(4)]),
    ("logsumexp xs", lambda w: [math.exp(x) / sum(map(math.exp, w)) for x in w]),
    ("softmax xs !! 0",
     lambda w: [(s := math.exp(w[0]) / sum(map(math.exp, w))) * ((i == 0) - math.exp(x)
                / sum(map(math.exp, w))) for i, x in enumerate(w)]),
]


@pytest.mark.parametrize("text, gradient", GRADIENTS, ids=[g[0] for g in GRADIENTS])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_gradients_through_both_transformations(text, gradient, mode):
    program = lambdad.loads(f"def f (xs : [R]) : R = {text}")
    point = [0.5, -1.25, 2.0, 1.5]
    assert program.grad("f", point, mode=mode) == pytest.approx(gradient(point))


def test_a_program_may_redefine_a_prelude_name_without_breaking_the_prelude():
    program = lambdad.loads("def dot (xs : [R]) (ys : [R]) : R = 0\n"
                            "def main = (dot [1] [2], norm [3, 4])")
    assert program.run() == (0, 5)
    assert "dot" in program.names() and "norm" not in program.names()


def test_check_types_lists_the_builtins_and_the_prelude(capsys, tmp_path):
    from lambdad import cli

    path = tmp_path / "one.lam"
    path.write_text("def f (xs : [R]) = take 2 xs !! 0\n", encoding="utf-8")
    assert cli.main(["check-types", str(path), "--prelude"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for line in ("(!!) : [a] -> R -> a", "(++) : [a] -> [a] -> [a]", "head : [a] -> a",
                 "scan : (b -> a -> b) -> b -> [a] -> [b]", "take : R -> [a] -> [a]",
                 "replicate : R -> a -> [a]", "logsumexp : [R] -> R",
                 "jacrev : (a -> [R]) -> a -> [a]"):
        assert line in lines
    assert lines[-1] == "f : [R] -> R"
