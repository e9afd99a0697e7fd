"""A program's own definition of a built-in's or the prelude's name shadows it for that
program, from the definition on (LANGUAGE.md section 10): adding a built-in never breaks a
program.  Operators keep their meaning; printed programs parse back to the same program."""

import math

import pytest

import lambdad
from lambdad import gradcheck
from lambdad.parser import parse_module
from lambdad.primitives import LINEAR_NAMES, NAMED, PRIMITIVES
from lambdad.printer import print_module, unshadowed
from lambdad.syntax import Decl, Lam, Module, Prim, Var

# Every name that means a built-in without a definition.
BUILTIN_NAMES = sorted([*NAMED, *LINEAR_NAMES])


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_every_builtin_name_can_be_defined_and_then_means_the_definition(name):
    program = lambdad.loads(f"def {name} x = x * 3\ndef main = {name} 2\n", "own.lam")
    assert program.run() == 6
    assert program.types() == [(name, "R -> R"), ("main", "R")]
    assert program.grad(name, 1.5) == 3
    assert program.warnings() == []


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_every_builtin_name_can_be_declared_a_primitive(name):
    program = lambdad.loads(f"primitive {name} x = x * 3\n  partial x = 3\n"
                            f"def f x = {name} x * {name} x\ndef main = f 2\n")
    assert program.run() == 36
    assert program.grad("f", 1.0) == 18 and program.grad("f", 1.0, mode="forward") == 18
    assert program.hessian("f", 1.0, mode="reverse-over-reverse")[2] == [18]
    shown = program.show("f", reverse=True, at=1.0)
    assert lambdad.loads(shown).run() == (9, 18)


# Names added as built-ins in the last release, as programs translated from other AD
# libraries' test suites define them.
LAST_RELEASE = {
    "cosh": ("def cosh x = (exp x + exp (0 - x)) / 2", math.cosh, math.sinh),
    "sign": ("def sign x = if x > 0 then 1 else if x < 0 then 0 - 1 else 0",
             lambda x: 1.0, lambda x: 0.0),
    "clip": ("def clip x = if x > 1 then 1 else if x < 0 then 0 else x",
             lambda x: x, lambda x: 1.0),
}


@pytest.mark.parametrize("name", sorted(LAST_RELEASE))
def test_programs_defining_names_added_as_builtins_still_load(name, tmp_path, lambdad_cli):
    definition, value, derivative = LAST_RELEASE[name]
    path = tmp_path / f"{name}.lam"
    path.write_text(f"{definition}\ndef f x = {name} (x * 2) + 1\ndef main = f 0.25\n",
                    encoding="utf-8")
    done = lambdad_cli("check-types", str(path))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [f"{name} : R -> R", "f : R -> R", "main : R"]
    done = lambdad_cli("grad", str(path), "f", "--at", "0.25")
    assert done.returncode == 0, done.stderr
    printed = dict(line.split(": ") for line in done.stdout.splitlines())
    assert float(printed["value"]) == pytest.approx(value(0.5) + 1)
    assert float(printed["gradient"]) == pytest.approx(2 * derivative(0.5))
    assert gradcheck.check(lambdad.load(str(path)), "f", point=0.25).ok


def test_definitions_above_and_its_own_body_keep_the_builtin():
    program = lambdad.loads("def before x = sin x\n"
                            "def sin x = sin x * 10\n"  # its own body: the built-in
                            "def after x = sin x\n")
    assert program.call("before", 1.0) == math.sin(1.0)
    assert program.call("sin", 1.0) == program.call("after", 1.0) == 10 * math.sin(1.0)
    assert program.grad("after", 1.0) == pytest.approx(10 * math.cos(1.0))


def test_a_local_binding_of_a_shadowed_name_is_local():
    program = lambdad.loads("def cosh x = x * 2\n"
                            "def f x = (let cosh = 5 in cosh) + cosh x + (\\cosh -> cosh) 1\n")
    assert program.call("f", 3.0) == 12


def test_operators_keep_their_meaning_whatever_is_defined():
    program = lambdad.loads("def add x y = x * y\ndef neg x = x\ndef index xs i = 0\n"
                            "def mul x y = x - y\n"
                            "def f a b = (a + b, add a b, -a, [a, b] !! 1, a * b, mul a b)\n")
    assert program.call("f", (2.0, 3.0)) == (5, 6, -2, 3, 6, -1)  # the 6-tuple, as written


def test_a_primitive_declaration_may_shadow_a_builtin():
    program = lambdad.loads("def before x = cosh x\n"
                            "primitive cosh x = x * x\n  partial x = 2 * x\n"
                            "def after x = cosh x + sinh x\n")
    assert program.call("before", 1.0) == math.cosh(1.0)
    assert program.call("after", 1.0) == 1 + math.sinh(1.0)
    assert program.grad("after", 1.0) == pytest.approx(2 + math.cosh(1.0))
    assert PRIMITIVES["cosh"].declaration is None  # the built-in's entry is untouched


def test_a_program_may_use_a_prelude_name_above_its_own_definition_of_it():
    program = lambdad.loads("def a = sum [1, 2]\ndef sum xs = 42\ndef main = (a, sum [1])\n")
    assert program.run() == (3, 42)
    wrapper = lambdad.loads("def sum xs = sum xs + 1\ndef main = sum [1, 2]\n")
    assert wrapper.run() == 4
    assert wrapper.warnings() == []


# ---- printing: a definition shadowing a built-in that is used after it is printed renamed

SHADOWING = """\
def cosh x = 1 + x * x
def seed x = x * 3
def fst x = x - 1
def f x = sinh x + cosh x + seed x + fst x
"""


@pytest.mark.parametrize("mode", ["forward", "reverse", "fused"])
def test_shown_programs_of_a_shadowing_program_parse_back_and_compute_the_same(mode):
    program = lambdad.loads(SHADOWING, "shadow.lam")
    x = 0.5
    text = program.show("f", forward=mode == "forward", reverse=mode != "forward",
                        fused=mode == "fused", at=x)
    assert "def cosh'1 x" in text  # the partial of `sinh` is the built-in `cosh`
    assert "cosh x" in text
    shown = lambdad.loads(text, "shown.lam")
    assert shown.run() == pytest.approx(program.value_and_grad("f", x))
    expected = math.sinh(x) + 1 + x * x + 3 * x + x - 1
    assert shown.run()[0] == pytest.approx(expected)


def test_the_shown_entry_follows_its_renaming():
    program = lambdad.loads("def seed x = x * 3\n")
    text = program.show("seed", reverse=True, at=2.0)
    assert "def seed'1 x" in text and "seed'1 x" in text.split("def main")[1]
    assert lambdad.loads(text).run() == (6, 3)


def test_printed_modules_parse_back_to_the_same_terms():
    x = Var("x")
    cosh = PRIMITIVES["cosh"].name
    module = Module((Decl("cosh", Lam("x", x)),
                     Decl("f", Lam("x", Prim(cosh, (Var("cosh"),)))),
                     Decl("g", Lam("x", Var("cosh")))))
    text = print_module(module)
    assert text.splitlines()[0] == "def cosh'1 x = x"
    assert parse_module(text, closed=False) == Module(tuple(unshadowed(module.decls)[0]))
    decls, renamed = unshadowed(module.decls)
    assert renamed == {"cosh": "cosh'1"}
    assert decls[2].value == Lam("x", Var("cosh'1"))
    assert decls[1].value == Lam("x", Prim(cosh, (Var("cosh'1"),)))
    # a program as written prints as it is: nothing after `def cosh` uses the built-in
    written = parse_module("def a x = cosh x\ndef cosh x = x\ndef b x = cosh x\n")
    assert print_module(written).splitlines()[2] == "def cosh x = x"
    assert parse_module(print_module(written)) == written


def test_a_renamed_primitive_declaration_is_renamed_in_later_bodies_too():
    program = lambdad.loads("primitive cosh x = 1 + x * x\n  partial x = 2 * x\n"
                            "primitive g x = cosh x * 2\n  partial x = 4 * x\n"
                            "def f x = sinh x + cosh x + g x\n")
    text = program.show("f", forward=True, at=0.5)
    assert "primitive cosh'1 x = 1 + x * x" in text
    assert "primitive g x = cosh'1 x * 2" in text
    assert "-- cosh'1 : R -> R    (a primitive" in text
    assert lambdad.loads(text).run() == pytest.approx(program.value_and_grad("f", 0.5))


def test_a_primitive_named_main_is_printed_renamed_with_a_main():
    program = lambdad.loads("primitive main x = x * x\n  partial x = 2 * x\n"
                            "def f x = main x + 1\n")
    text = program.show("f", forward=True, at=0.5)
    assert "primitive main'1 x = x * x" in text and "main'1 x" in text
    assert lambdad.loads(text).run() == (1.25, 1)


# ---- warnings, never errors


def test_a_name_meaning_both_in_one_program_is_a_located_warning(tmp_path, lambdad_cli):
    path = tmp_path / "both.lam"
    path.write_text("def old x = sin x + sum [x]\ndef sin x = x * 2\ndef sum xs = 0\n"
                    "def new x = sin x\n", encoding="utf-8")
    program = lambdad.load(str(path))
    warnings = program.warnings()
    assert [(w.span.line, w.span.col, w.span.end_col, w.kind) for w in warnings] == [
        (2, 5, 8, "warning"), (3, 5, 8, "warning")]  # at the names defined
    assert "shadows the built-in `sin`, which a definition above uses (`old`, line 1)" in \
        warnings[0].message
    assert "shadows the prelude's `sum`" in warnings[1].message
    done = lambdad_cli("check-types", str(path))
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["old : R -> R", "sin : R -> R", "sum : a -> R",
                                        "new : R -> R"]
    assert f"{path}:2:5: warning: this definition of `sin` shadows" in done.stderr
    done = lambdad_cli("grad", str(path), "new", "--at", "1")  # other commands: quiet
    assert (done.returncode, done.stdout, done.stderr) == (0, "value: 2\ngradient: 2\n", "")
