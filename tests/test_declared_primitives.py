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
    ("primitive f x = sum [x]\n  partial x = 1\n", "this use of `sum` is not allowed"),
    ("def k = 2\nprimitive f x = k * x\n  partial x = k\n", "`k` is not a parameter"),
    ("primitive f x = f x\n  partial x = 1\n", "`f` is not a parameter"),
    ("primitive f x = x\n  partial x = result\n", None),
    ("primitive f x = map (\\y -> y) [x] !! 0\n  partial x = 1\n", "is not allowed"),
    ("primitive f x = x > 1\n  partial x = 1\n",
     "the body of `f` must be a real (R), but it has type Bool"),
    ("primitive f x = let b = x > 1 in b\n  partial x = 1\n", "the body of `f` must be a real"),
    ("primitive f x = x\n  partial x = true\n",
     "the partial of `f` for `x` must be a real (R), but it has type Bool"),
    ("primitive f x y = x\n  partial x = 1\n  partial y = x < y\n",
     "the partial of `f` for `y` must be a real"),
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
            and str(t.op) == "twice"]
    assert len(used) == 2  # the declaration's own `\x -> twice x`, and `twice 3`


# ---- a declared primitive lives in the program's namespace (issue: it could capture an
# operator's internal entry): each operator's entry named by a declaration keeps its meaning.

# (the name of the operator's entry in the table, the operator applied to `a` and `b`)
OPERATOR_ENTRIES = [("add", "a + b"), ("sub", "a - b"), ("mul", "a * b"), ("div", "a / b"),
                    ("pow", "a ^ b"), ("neg", "-a"), ("index", "[a, b, 7] !! 1")]


def _capturing(name: str, operator: str) -> str:
    """A program declaring ``name`` (a different function) and using both it and the
    operator, unit laws included (``mul 1 a`` is no multiplication by one)."""
    unary = name == "neg"
    params, partials = ("x", "  partial x = 10") if unary else (
        "x y", "  partial x = 10\n  partial y = 1")
    body = "x * 10" if unary else "x * 10 + y"
    call = f"{name} a" if unary else f"{name} a b"
    unit = f"{name} 1" if unary else f"{name} 1 a + {name} a 1 + {name} 0 a"
    return (f"primitive {name} {params} = {body}\n{partials}\n"
            f"def f a b = let s = {operator} in let p = {call} in (s, p)\n"
            f"def u a b = {unit} + ({operator}) * {call}\n"
            "def main = f 2 3\n")


@pytest.mark.parametrize("name, operator", OPERATOR_ENTRIES)
def test_a_declaration_named_like_an_operators_entry_leaves_the_operator_alone(name, operator):
    text = _capturing(name, operator)
    program = lambdad.loads(text, "capture.lam")
    reference = lambdad.loads(text.replace(name, "other"), "reference.lam")
    operator_value, declared_value = program.run()
    assert (operator_value, declared_value) == reference.run()
    assert declared_value == (20 if name == "neg" else 23)  # the declared body, not the operator
    point = (2.0, 3.0)
    assert program.call("u", point) == reference.call("u", point)
    for mode in ("reverse", "forward"):
        assert program.grad("u", point, mode=mode) == pytest.approx(
            reference.grad("u", point, mode=mode))
    # every route agrees with finite differences (grad reported 5 where check said 6)
    assert gradcheck.check(program, "u", point=point).ok
    # printed, it parses back to a program computing the same
    shown = program.show("u", forward=False, backward=True, at=point)
    value, gradient = lambdad.loads(shown).run()
    expected_value, expected_gradient = reference.value_and_grad("u", point)
    assert value == pytest.approx(expected_value)
    assert gradient == pytest.approx(expected_gradient)


def test_mul_one_is_not_simplified_as_a_multiplication_by_one():
    program = lambdad.loads("primitive mul x y = x + y\n  partial x = 1\n  partial y = 1\n"
                            "def f a = mul 1 a\n")
    assert program.call("f", 5.0) == 6
    assert program.grad("f", 5.0) == 1
    assert "mul 1 a" in program.show("f", forward=True)


def test_the_table_keeps_declarations_apart_from_built_in_entries():
    program = lambdad.loads("primitive add x y = x * y\n  partial x = y\n  partial y = x\n")
    declared = program.declared_primitives()[0].name
    assert declared != "add" and "add" != declared and declared not in {"add"}
    assert PRIMITIVES[declared] is not PRIMITIVES["add"]
    assert PRIMITIVES["add"].declaration is None


# ---- partials found by every route: nested reverse mode included

NESTED = """\
primitive sq x = x * x
  partial x = 2 * x
primitive ex x = exp x
  partial x = result
primitive cube x = x * sq x
  partial x = 3 * sq x
primitive ex2 x = ex (2 * x)
  partial x = 2 * ex (2 * x)
"""

# f, its second and third derivatives at x
DERIVATIVES = {
    "sq": (lambda x: 2.0, lambda x: 0.0),
    "ex": (math.exp, math.exp),
    "cube": (lambda x: 6 * x, lambda x: 6.0),
    "ex2": (lambda x: 4 * math.exp(2 * x), lambda x: 8 * math.exp(2 * x)),
}


def _derivative(route: str, inner: str) -> str:
    """The derivative of the function ``inner`` by ``route``, read innermost last
    (``fr``: forward mode over reverse mode), as a function of one real."""
    for mode in reversed(route):
        inner = (f"(grad {inner})" if mode == "r" else f"(\\y -> snd (jvp {inner} y 1))")
    return inner


ROUTES = ["rr", "fr", "rf", "ff", "rrr", "frr", "rfr", "rrf", "ffr", "frf", "rff", "fff"]


@pytest.mark.parametrize("primitive", sorted(DERIVATIVES))
def test_nested_derivatives_of_declared_primitives_by_every_composition(primitive):
    defs = "".join(f"def d_{route} x = {_derivative(route, primitive)} x\n" for route in ROUTES)
    program = lambdad.loads(NESTED + defs, "nested.lam")
    x = 0.7
    for route in ROUTES:
        expected = DERIVATIVES[primitive][len(route) - 2](x)
        assert program.call(f"d_{route}", x) == pytest.approx(expected, rel=1e-9, abs=1e-12), route


@pytest.mark.parametrize("mode", ["forward-over-reverse", "reverse-over-reverse",
                                  "reverse-over-forward", "forward-over-forward"])
def test_hessians_of_declared_primitives_in_every_mode(mode):
    program = lambdad.loads(NESTED + "def g (x, y) = sq x * ex y + cube (ex2 x)\n")
    x, y = 0.3, 0.5
    _, _, rows = program.hessian("g", (x, y), mode=mode)
    e4 = math.exp(2 * x) ** 3  # cube (ex2 x) = exp (6 x)
    assert rows[0][0] == pytest.approx(2 * math.exp(y) + 36 * e4)
    assert rows[0][1] == rows[1][0] == pytest.approx(2 * x * math.exp(y))
    assert rows[1][1] == pytest.approx(x * x * math.exp(y))


def test_second_order_check_and_jacrev_of_a_gradient_over_declared_primitives():
    program = lambdad.loads(NESTED + "def g (x, y) = sq x * ex y + cube (ex2 x)\n"
                            "def j x = jacrev (\\y -> [grad cube y, grad ex2 y]) x\n")
    assert gradcheck.check_second_order(program, "g", point=(0.3, 0.5)).ok
    assert program.call("j", 2.0) == pytest.approx([12.0, 4 * math.exp(4)])


def test_grad_of_grad_of_a_declared_primitive_on_the_command_line(tmp_path, lambdad_cli):
    path = tmp_path / "nested.lam"
    path.write_text("primitive f x = x * x\n  partial x = 2 * x\n"
                    "def a = grad (grad f) 3\n", encoding="utf-8")
    done = lambdad_cli("run", str(path), "--entry", "a")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "2", "")
    done = lambdad_cli("hessian", str(path), "f", "--at", "3", "--mode",
                       "reverse-over-reverse")
    assert done.returncode == 0 and done.stderr == ""
    done = lambdad_cli("check", str(path), "f", "--at", "3", "--order", "2")
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("ok")


def test_a_redefined_primitive_uses_its_own_partials_when_nested():
    program = lambdad.loads("primitive f x = x * x\n  partial x = 2 * x\n")
    assert program.evaluate_text("grad (grad f) 1")[0] == 2
    again = parse_module("primitive f x = x * x * x\n  partial x = 3 * x * x\n",
                         predefined=["f"], allow_redefinition=True)
    redefined = program.extended(again.decls)  # as the REPL does, on the same runtime
    assert redefined.evaluate_text("grad (grad f) 1")[0] == 6


def test_a_boolean_body_is_a_located_type_error_on_the_command_line(tmp_path, lambdad_cli):
    path = tmp_path / "bool.lam"
    path.write_text("primitive f x = x > 1\n  partial x = 1\n", encoding="utf-8")
    for command in (["check-types", str(path)], ["trace", str(path), "f", "--at", "2"]):
        done = lambdad_cli(*command)
        assert done.returncode == 1, done.stderr
        assert f"{path}:1:17: type error: the body of `f` must be a real" in done.stderr


def test_an_infinite_intermediate_in_a_body_is_a_located_error_as_in_a_def():
    body = "1 / (x * 1e300 * 1e300)"
    as_def = lambdad.loads(f"def f x = {body}\ndef main = f 1\n", "def.lam")
    declared = lambdad.loads(f"primitive f x = {body}\n  partial x = 1\n"
                             "def main = f 1\n", "prim.lam")
    for program in (as_def, declared):
        with pytest.raises(lambdad.EvalError) as caught:
            program.run()
        assert "`1e+300 * 1e+300` is inf" in caught.value.message
        assert "an overflow" in caught.value.message and caught.value.span is not None
    assert "in a declared primitive's body (at prim.lam:1:22)" in caught.value.message
    assert (caught.value.span.line, caught.value.span.col) == (3, 12)  # the call `f 1`
    with pytest.raises(lambdad.EvalError, match="is inf in a declared primitive's body"):
        declared.grad("f", 1.0)
    for mode in ("reverse-over-reverse", "forward-over-reverse"):  # nested routes too
        with pytest.raises(lambdad.EvalError, match="is inf in a declared primitive's body"):
            declared.hessian("f", 1.0, mode=mode)
    # the partials are checked as everywhere else
    steep = lambdad.loads("primitive h x = x\n  partial x = x * 1e300 * 1e300\n")
    with pytest.raises(lambdad.EvalError, match="inf"):
        steep.grad("h", 1.0)
    with pytest.raises(lambdad.EvalError, match="`1e\\+300 \\* 1e\\+300` is inf"):
        steep.evaluate_text("grad (grad h) 1")


@pytest.mark.parametrize("form", ["forward", "reverse", "fused"])
def test_a_shown_primitive_with_a_point_runs_through_its_transformed_application(form):
    program = lambdad.loads("primitive sq x = x * x\n  partial x = 2 * x\n")
    text = program.show("sq", forward=form == "forward", reverse=form != "forward",
                        fused=form == "fused", at=0.5)
    assert "primitive sq x = x * x" in text and "def sq'1 x" in text
    assert lambdad.loads(text).run() == (0.25, 1)
