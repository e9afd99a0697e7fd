"""Primitives declared in a program (``primitive f x = body  partial x = ...``): an entry
like the built-ins', read through the one table by every stage."""

import math

import pytest

import lambdad
from lambdad import cli, gradcheck, testing
from lambdad.errors import ParseError
from lambdad.parser import parse_module
from lambdad.primitives import PRIMITIVES
from lambdad.printer import print_module
from lambdad.syntax import Prim, walk

SOURCE = """\
-- softplus with its derivative declared, and a two-argument one naming its result
primitive softplus (x : R) : R = log (1 + exp x)
  partial x = sigmoid x

primitive hyp x y = sqrt (x * x + y * y)
  partial x = x / result
  partial y = y / result

def f (a : R) (b : R) : R = softplus (a * b) + hyp a b * 2

def main = (f 1 2, map softplus [0, 1])
"""

# The partial is deliberately not the derivative of the body: the transformations must
# follow the rule, and the checker must catch it.
WRONG = """\
primitive softplus x = log (1 + exp x)
  partial x = 2 * sigmoid x

def g (a : R) : R = softplus (a * a)
"""


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE, "sp.lam")


def test_values_types_and_one_table_entry(program):
    value, softplus = program.run()
    assert value == pytest.approx(math.log1p(math.exp(2)) + 2 * math.sqrt(5))
    assert softplus == [math.log(2), pytest.approx(math.log1p(math.e))]
    assert program.types()[:2] == [("softplus", "R -> R"), ("hyp", "R -> R -> R")]
    entry = PRIMITIVES[program.declared_primitives()[1].name]
    assert entry.kind == "real" and entry.params == ("x", "y") and entry.result == "result"
    assert "hyp" not in set(PRIMITIVES)  # a program's entry is not added to the built-ins


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_both_transformations_use_the_declared_partials(mode):
    program = lambdad.loads(WRONG)
    gradient = program.grad("g", 1.5, mode=mode)
    assert gradient == pytest.approx(2 * 1.5 * 2 * sigmoid(1.5 ** 2))  # the rule, not the body


def test_gradients_by_name_and_inside_functions(program):
    a, b = 1.0, 2.0
    expected = (b * sigmoid(a * b) + 2 * a / math.hypot(a, b),
                a * sigmoid(a * b) + 2 * b / math.hypot(a, b))
    for mode in ("reverse", "forward"):
        assert program.grad("f", (a, b), mode=mode) == pytest.approx(expected)
    assert program.grad("hyp", (3, 4)) == pytest.approx((0.6, 0.8))


def test_printed_programs_keep_one_operation_and_run_again(program):
    assert print_module(parse_module(print_module(program.module))) == print_module(
        program.module)
    for forward in (True, False):
        text = program.show("f", forward=forward, backward=not forward, at=(1.0, 2.0))
        assert "primitive softplus x = log (1 + exp x)\n  partial x = sigmoid x" in text
        assert "softplus v1" in text and "sigmoid v1" in text  # one call, its rule inline
        value, gradient = lambdad.loads(text).run()
        expected_value, expected_gradient = program.value_and_grad("f", (1.0, 2.0))
        assert value == pytest.approx(expected_value)
        assert gradient == pytest.approx(expected_gradient)


def test_trace_shows_it_as_one_row(tmp_path, capsys):
    path = tmp_path / "sp.lam"
    path.write_text(SOURCE, encoding="utf-8")
    assert cli.main(["trace", str(path), "f", "--at", "1,2"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    operations = [row.split()[1] for row in rows]
    assert operations == ["input", "input", "*", "hyp", "softplus", "*", "+"]
    hyp_row = rows[operations.index("hyp")].split()
    assert hyp_row[-2:] == [repr(1 / math.sqrt(5)), repr(2 / math.sqrt(5))]


def test_check_reports_a_wrong_rule_as_a_mismatch_naming_it():
    report = gradcheck.check(lambdad.loads(WRONG))
    assert not report.ok
    assert report.render().splitlines()[-1] == "FAILED: softplus, g"
    assert any(m.startswith("softplus at ") for m in report.mismatches())
    assert gradcheck.check(lambdad.loads(SOURCE)).ok


def test_fuzz_exercises_declared_primitives():
    wrong = lambdad.loads(WRONG).declared_primitives()
    report = testing.fuzz(lambda text: lambdad.loads(text, "<fuzz>"), count=25, seed=0,
                          shrink_seconds=5, declared=wrong)
    assert report.failure is not None and report.failure.prop == "finite differences"
    assert "primitive softplus x" in report.failure.source


@pytest.mark.parametrize("text, message", [
    ("primitive f x = x * x\n", "unexpected end of input; expected"),
    ("primitive f x = x * x\n  partial y = 1\n", "`y` is not a parameter of `f`"),
    ("primitive f x y = x * y\n  partial x = y\n", "`partial y = ...` is missing"),
    ("primitive f x = x\n  partial x = 1\n  partial x = 2\n", "a second partial for `x`"),
    ("primitive f (p, q) = p\n  partial p = 1\n", "a primitive's parameters are reals"),
    ("primitive f x : Bool = x > 0\n  partial x = 0\n", "a primitive returns R, not Bool"),
    ("primitive f x = sum [x]\n  partial x = 1\n", "`sum` is not a parameter"),
    ("def k = 2\nprimitive f x = k * x\n  partial x = k\n", "`k` is not a parameter"),
    ("primitive f x = f x\n  partial x = 1\n", "`f` is not a parameter"),
    ("primitive f x = x\n  partial x = result\n", None),
    ("primitive f x = map (\\y -> y) [x] !! 0\n  partial x = 1\n", "is not allowed"),
])
def test_declaration_errors(text, message):
    if message is None:  # `result` in a partial is the primitive's value
        assert lambdad.loads(text).grad("f", 3) == 3
        return
    with pytest.raises(Exception) as caught:
        lambdad.loads(text, "bad.lam")
    assert message in caught.value.message
    assert caught.value.span is not None


def test_a_local_binding_shadows_a_declared_primitive():
    program = lambdad.loads("primitive twice x = 2 * x\n  partial x = 2\n"
                            "def main = (twice 3, let twice = 10 in twice + 1)")
    assert program.run() == (6, 11)
    used = [t for d in program.module.decls for t in walk(d.value) if isinstance(t, Prim)
            and t.op == "twice"]
    assert len(used) == 2  # the declaration's own `\x -> twice x`, and `twice 3`
