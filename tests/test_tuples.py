"""A tuple is what was written (LANGUAGE.md section 10): ``(1, 2, 3)`` is a triple, distinct
from the pair ``(1, (2, 3))``, in types, patterns and both transformations; values print,
write JSON and come back to Python with exactly the written nesting."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lambdad
from lambdad import cli
from lambdad.errors import TypeCheckError, UsageError, render
from lambdad.parser import parse_module
from lambdad.printer import print_module
from lambdad.values import JSON_ABBREVIATED, format_value, to_json, written

PROGRAM = lambdad.loads(
    "def triple = (1, 2, 3)\n"
    "def nested = ((1, 2), 3)\n"
    "def written = (1, (2, 3))\n"
    "def mixed = ([1, 2], (true, [(3, 4, 5)]), -6)\n"
    "def f (x : R) = (x, x * x, x * x * x)\n"
    "def g (x : R) : R = let (a, b, c) = f x in a + b * c\n"
    "def q (x : R) (y : R) (z : R) : R = x * y + z\n"
    "def s (a, b, c) = a * b * c\n"
    "def p (t : R * (R * R)) : R = let (a, (b, c)) = t in a * b - c\n")


def shown(name: str) -> str:
    return format_value(PROGRAM.run_written(name))


# ---------------------------------------------------------------- types


def test_a_triple_type_is_distinct_from_a_pair_holding_a_pair():
    types = dict(PROGRAM.types())
    assert types["triple"] == "R * R * R"
    assert types["written"] == "R * (R * R)"
    assert types["nested"] == "(R * R) * R"
    assert types["mixed"] == "[R] * (Bool * [R * R * R]) * R"
    assert types["s"] == "R * R * R -> R"


def test_an_annotation_of_the_wrong_nesting_is_a_located_type_error():
    source = "def t : R * (R * R) = (1, 2, 3)\n"
    with pytest.raises(TypeCheckError) as caught:
        lambdad.loads(source, "t.lam")
    text = render(caught.value, {"t.lam": source})
    assert "t.lam:1:" in text and "^" in text
    assert "R * (R * R)" in text and "R * R * R" in text


@pytest.mark.parametrize("source, column", [
    ("def f (t : R * R * R) : R =\n  let (a, b) = t in a\n", 16),  # too few names
    ("def f (t : R * R * R) : R =\n  let (a, (b, c)) = t in a\n", 21),  # nested, not flat
    ("def f (t : R * (R * R)) : R =\n  let (a, b, c) = t in a\n", 19),  # flat, not nested
    ("def f (t : R * R) : R =\n  let (a, b, c) = t in a\n", 19),  # too many
])
def test_a_pattern_of_the_wrong_arity_or_nesting_is_a_located_type_error(source, column):
    with pytest.raises(TypeCheckError) as caught:
        lambdad.loads(source, "p.lam")
    text = render(caught.value, {"p.lam": source})
    assert f"p.lam:2:{column}:" in text
    assert "pattern needs a" in text
    assert any(line.strip().startswith("|") and line.strip().endswith("^")
               for line in text.splitlines())


def test_patterns_take_tuples_apart_as_written():
    program = lambdad.loads(
        "def a = let (x, y, z) = (1, 2, 3) in x - y * z\n"
        "def b = let (x, (y, z)) = (1, (2, 3)) in x - y * z\n"
        "def c = let ((x, y), z) = ((1, 2), 3) in x - y * z\n"
        "def d = (\\(w, x, y, z) -> w + x * y - z) (1, 2, 3, 4)\n"
        "def e = let (_, y, _) = (1, 2, 3) in y\n")
    assert [program.run(n) for n in "abcde"] == [-5.0, -5.0, -5.0, 3.0, 2.0]
    assert dict(program.types())["d"] == "R"


@pytest.mark.parametrize("use", ["fst", "snd"])
def test_fst_and_snd_of_a_triple_are_an_error_with_a_hint(use):
    source = f"def t = (1, 2, 3)\ndef main = {use} t\n"
    with pytest.raises(TypeCheckError) as caught:
        lambdad.loads(source, "fs.lam")
    text = render(caught.value, {"fs.lam": source})
    assert "fs.lam:2:" in text and "^" in text
    assert "R * R * R" in text
    assert "take a tuple apart with a pattern" in text
    # on a pair they still work
    assert lambdad.loads(f"def main = {use} (1, (2, 3))").run() in (1.0, (2.0, 3.0))


# ---------------------------------------------------------------- values


def test_values_print_as_written():
    assert shown("triple") == "(1, 2, 3)"
    assert shown("written") == "(1, (2, 3))"
    assert shown("nested") == "((1, 2), 3)"
    assert shown("mixed") == "([1, 2], (true, [(3, 4, 5)]), -6)"


def test_python_results_keep_the_written_nesting():
    assert PROGRAM.run("triple") == (1.0, 2.0, 3.0)
    assert PROGRAM.run("written") == (1.0, (2.0, 3.0))
    assert PROGRAM.run("mixed") == ([1.0, 2.0], (True, [(3.0, 4.0, 5.0)]), -6.0)
    assert PROGRAM.call("f", 2.0) == (2.0, 4.0, 8.0)
    assert PROGRAM.call("f", 2.0) == (2.0, 4.0, 8.0)  # (the prepared path too)


def test_json_keeps_the_written_nesting(capsys, tmp_path):
    file = tmp_path / "t.lam"
    file.write_text("def main = ((1, 2), 3, (true, [4]))\n"
                    "def pair = (1, (2, 3))\n"
                    "def triple = (1, 2, 3)\n")
    outputs = []
    for entry in ("main", "pair", "triple"):
        assert cli.main(["run", str(file), "--entry", entry, "--json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out)["value"])
    assert outputs == [[[1.0, 2.0], 3.0, [True, [4.0]]], [1.0, [2.0, 3.0]], [1.0, 2.0, 3.0]]


def test_text_output_of_run_keeps_the_written_nesting(capsys, tmp_path):
    file = tmp_path / "t.lam"
    file.write_text("def main = ((1, 2), 3, (4, (5, 6)))\n")
    assert cli.main(["run", str(file)]) == 0
    assert capsys.readouterr().out.strip() == "((1, 2), 3, (4, (5, 6)))"


def test_json_of_a_huge_shared_value_is_bounded_and_says_so():
    value = 1.0
    for _ in range(40):  # 2^40 reals written out, a few objects in memory
        value = (value, value)
    data = to_json(value)
    text = json.dumps(data)
    assert JSON_ABBREVIATED in text and len(text) < 2_000_000
    assert json.loads(text) == data
    assert to_json([[1.0, 2.0], [3.0, 4.0]], limit=4) == [[1.0, 2.0], JSON_ABBREVIATED]


def test_a_shared_triple_is_written_without_copying_its_sharing():
    program = lambdad.loads("def t = (1, 2, 3)\n"
                            "def main = [(t, t), (t, t)]\n")
    value = program.run_written("main")
    assert value == [((1.0, 2.0, 3.0), (1.0, 2.0, 3.0))] * 2
    assert value[0][0] is value[0][1]  # one written triple for one runtime triple


# ---------------------------------------------------------------- derivatives


def test_the_gradient_of_k_parameters_is_a_k_tuple():
    assert PROGRAM.grad("q", (1, 2, 3)) == (2.0, 1.0, 1.0)
    assert PROGRAM.grad("q", (1.0, 2.0, 3.0)) == (2.0, 1.0, 1.0)  # the prepared path
    assert PROGRAM.grad("q", (1.0, 2.0, 3.0), mode="forward") == (2.0, 1.0, 1.0)
    assert PROGRAM.value_and_grad("q", (1, 2, 3)) == (5.0, (2.0, 1.0, 1.0))
    assert PROGRAM.grad("s", (1, 2, 3)) == (6.0, 3.0, 2.0)  # one triple parameter
    assert PROGRAM.grad("p", (1, (2, 3))) == (2.0, (1.0, -1.0))  # a pair holding a pair


def test_jvp_keeps_the_value_and_the_tangent_apart():
    value, tangent = PROGRAM.jvp("f", 2.0, 1.0)
    assert value == (2.0, 4.0, 8.0) and tangent == (1.0, 4.0, 12.0)
    inside = lambdad.loads("def f (x : R) = (x, x * x, x * x * x)\n"
                           "def main = jvp f 2 1\n")
    assert format_value(inside.run_written("main")) == "((2, 4, 8), (1, 4, 12))"


def test_hessians_and_jacobians_of_tuples_are_as_written():
    value, gradient, rows = PROGRAM.hessian("q", (1, 2, 3))
    assert gradient == (2.0, 1.0, 1.0) and rows[0] == (0.0, 1.0, 0.0)
    result = PROGRAM.jacobian("f", 2.0)
    assert result.value == (2.0, 4.0, 8.0) and result.jacobian == (1.0, 4.0, 12.0)
    assert result.outputs == ["f.0", "f.1", "f.2"]


def test_the_cli_prints_gradients_as_written(capsys):
    assert cli.main(["grad", "programs/baydin.lam", "f", "--at", "2,5"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "gradient: (5.5, 1.7163378145367738)"


def test_nested_differentiation_over_a_triple_returning_function():
    program = lambdad.loads(
        "def f (x : R) : R * R * R = (x, x * x, x * x * x)\n"
        "def g (x : R) : R = let (a, b, c) = f x in a + b + c\n"
        "def main = (grad g 2, grad (grad g) 2, snd (jvp f 2 1))\n")
    assert program.run() == (17.0, 14.0, (1.0, 4.0, 12.0))
    assert program.grad("g", 2.0) == 17.0
    value, gradient, product = program.hvp("g", 2.0, 1.0)
    assert product == 14.0


def test_python_arguments_are_tuples_of_the_parameters_arity():
    assert PROGRAM.call("s", (1, 2, 3)) == 6.0
    assert PROGRAM.call("p", (1, (2, 3))) == -1.0
    with pytest.raises(UsageError):
        PROGRAM.call("s", (1, 2))
    with pytest.raises(UsageError, match=r"\(1, 2, 3\) has 3 components where `p` expects "
                                         r"R \* \(R \* R\)"):
        PROGRAM.call("p", (1, 2, 3))  # flat, where `p` takes a pair holding a pair
    with pytest.raises(UsageError, match="has 3 components"):
        PROGRAM.grad("p", (1, 2, 3))


# ---------------------------------------------------------------- both transformations


@pytest.mark.parametrize("mode", [{"forward": True}, {"reverse": True}, {"reverse": True,
                                                                          "fused": True}])
def test_transformed_programs_print_triples_and_run(mode):
    """The printed →D and ←D programs of functions over triples parse, type-check and
    compute the numbers the program does (D of a k-tuple type is the k-tuple of D's)."""
    text = PROGRAM.show("g", at=2.0, **mode)
    assert "R * R * R" in text  # (in the comments: the types transformed)
    assert re.search(r"let \(a\w*, b\w*, c\w*\) = f x", text)
    assert lambdad.loads(text).run() == pytest.approx((34.0, 81.0))  # g 2 and g' 2
    text = PROGRAM.show("s", at=(1, 2, 3), **mode)
    assert lambdad.loads(text).run() == (6.0, (6.0, 3.0, 2.0))  # exact: products of 1, 2, 3


def test_the_transformed_type_of_a_triple_is_a_triple():
    text = PROGRAM.show("f", forward=True)
    assert "-- f : R * R -> (R * R) * (R * R) * (R * R)" in text
    text = PROGRAM.show("s", reverse=True)
    assert "(R * (R -o d)) * (R * (R -o d)) * (R * (R -o d)) -> R * (R -o d)" in text


# ---------------------------------------------------------------- printing parses back


leaves = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.booleans()
values = st.recursive(
    leaves,
    lambda inner: (st.lists(inner, min_size=2, max_size=4).map(tuple)
                   | st.lists(inner, min_size=1, max_size=3)),
    max_leaves=12)


def _one_shape(value) -> bool:
    """Whether every list holds items of one shape (a well-typed value)."""
    def shape(v):
        if isinstance(v, tuple):
            return ("tuple",) + tuple(shape(item) for item in v)
        if isinstance(v, list):
            shapes = {shape(item) for item in v}
            return ("list", shapes.pop()) if len(shapes) == 1 else None
        return type(v).__name__
    return "None" not in repr(shape(value))


@settings(max_examples=60, deadline=None)
@given(values)
def test_what_prints_parses_back_to_the_same_structure(value):
    """A value written as Python data (tuples of any length, nested as they are) prints
    as text that the language reads back as the same structure: same type, same value."""
    if not _one_shape(value):
        return
    text = format_value(value)
    runtime, type_ = PROGRAM.evaluate_text(text)
    assert written(runtime, type_) == value
    assert format_value(written(runtime, type_)) == text


tuple_terms = st.recursive(
    st.sampled_from(["1", "x", "true", "[1, 2]"]),
    lambda inner: st.lists(inner, min_size=2, max_size=4).map(
        lambda items: "(" + ", ".join(items) + ")"),
    max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(tuple_terms)
def test_printed_programs_parse_back_to_the_same_tuples(term):
    """A program built of tuples prints as text that parses back to the same program,
    and its type prints as written."""
    source = f"def main (x : R) = {term}\n"
    module = parse_module(source)
    printed = print_module(module)
    assert parse_module(printed) == module
    program = lambdad.loads(printed)
    again = lambdad.loads(source)
    assert program.types() == again.types()


def test_a_written_point_nested_otherwise_than_the_parameters_is_a_usage_error(tmp_path):
    """`--at (1, (2, 3))` for an `R * R * R` parameter: the tuple is what was written, so
    the point does not fit (in the CLI, the REPL and the notebook, which read points as
    text), while the triple itself and points of curried parameters do."""
    import subprocess
    import sys
    source = tmp_path / "t.lam"
    source.write_text("def f (p : R * R * R) : R = let (a, b, c) = p in a * b * c\n"
                      "def r (ps : [R * R * R]) : R = sum (map (\\(a, b, c) -> a * b * c) ps)\n"
                      "def h (x : R) (y : R) (z : R) : R = x * y * z\n")

    def grad(name, at):
        return subprocess.run([sys.executable, "-m", "lambdad", "grad", str(source), name,
                               "--at", at], capture_output=True, text=True)

    refused = grad("f", "(1, (2, 3))")
    assert refused.returncode == 2
    assert "--at: the point (1, (2, 3)) does not fit `f`, which expects R * R * R" \
        in refused.stderr
    assert grad("r", "[(1, (2, 3))]").returncode == 2
    assert "gradient: (6, 3, 2)" in grad("f", "(1, 2, 3)").stdout
    assert "gradient: [(6, 3, 2)]" in grad("r", "[(1, 2, 3)]").stdout
    assert "gradient: (6, 3, 2)" in grad("h", "1, 2, 3").stdout
    program = lambdad.load(str(source))
    with pytest.raises(lambdad.UsageError, match="a tuple is what was written"):
        program.points.parse_point_for("f", "(1, (2, 3))")
