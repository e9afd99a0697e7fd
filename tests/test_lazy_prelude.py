"""A program types and runs only the part of the prelude it uses; the rest is typed when a
name of it is asked for, and every answer is the one the whole prelude gives."""

import pytest

import lambdad
from lambdad.errors import EvalError, TypeCheckError
from lambdad.parser import parse_module
from lambdad.sources import PRELUDE_FILE, prelude_text
from lambdad.printer import print_type
from lambdad.typecheck import infer_module


def whole_prelude_types() -> list[tuple[str, str]]:
    typing = infer_module(parse_module(prelude_text(), PRELUDE_FILE))
    return [(name, str(scheme)) for name, scheme in typing.schemes.items()]


def test_a_program_types_the_prelude_definitions_it_reaches_and_no_others():
    program = lambdad.loads("def f (xs : [R]) : R = norm xs\n")
    assert program._typings._prelude_typed == {"norm", "dot"}  # norm uses dot
    assert lambdad.loads("def g (x : R) : R = x * 2\n")._typings._prelude_typed == frozenset()


def test_a_prelude_name_inside_a_longer_word_is_not_a_use():
    # `summary` and `dots` contain `sum` and `dot` but are words of their own
    program = lambdad.loads("def summary (dots : R) : R = dots * 2\n-- sum of nothing\n")
    assert program._typings._prelude_typed == {"sum"}  # (a word of the comment: typed in vain)
    assert lambdad.loads("def summary (dots : R) : R = dots\n")._typings._prelude_typed == frozenset()
    assert program.call("summary", 2.0) == 4.0
    assert lambdad.loads("def f (xs : [R]) : R = sum xs + dot xs xs\n").call(
        "f", [1.0, 2.0]) == 8.0


def test_prelude_names_asked_for_later_are_typed_as_the_whole_prelude_types_them():
    program = lambdad.loads("def f (x : R) : R = x * 2\n")
    assert program.call("mean", [1.0, 2.0, 6.0]) == 3.0
    assert str(program.scheme("hessian")) == dict(whole_prelude_types())["hessian"]
    value, type_ = program.evaluate_text("norm [3, 4]")
    assert (value, print_type(type_)) == (5.0, "R")
    assert program.points.parse_point("softmax [0, 0]") == [0.5, 0.5]
    assert program.prelude_types() == whole_prelude_types()
    assert program.types() == [("f", "R -> R")]


def test_the_programs_own_declarations_are_still_checked_at_load():
    with pytest.raises(TypeCheckError) as caught:
        lambdad.loads("def f (x : R) : R = sum x\n", "own.lam")
    assert caught.value.span.file == "own.lam"


def test_a_call_evaluates_only_the_declarations_it_uses():
    program = lambdad.loads("def broken : R = head []\ndef f (x : R) : R = x * 2\n")
    assert program.call("f", 2.0) == 4.0
    with pytest.raises(EvalError):
        program.run("broken")


def test_a_redefined_prelude_name_leaves_the_preludes_uses_alone():
    program = lambdad.loads("def dot (xs : [R]) (ys : [R]) : R = 0\n"
                            "def f (xs : [R]) : R = norm xs + dot xs xs\n")
    assert program.call("f", [3.0, 4.0]) == 5.0
    assert ("dot", "[R] -> [R] -> R") in program.types()


def test_nested_differentiation_through_the_lazily_typed_prelude():
    program = lambdad.loads("def cube (xs : [R]) : R = sum (map (\\x -> x * x * x) xs)\n"
                            "def h (xs : [R]) : [[R]] = hessian cube xs\n")
    assert program.call("h", [1.0, 2.0]) == [[6.0, 0.0], [0.0, 12.0]]
    value, gradient = program.value_and_grad("norm", [3.0, 4.0])
    assert value == 5.0 and gradient == pytest.approx([0.6, 0.8])


def test_an_extended_program_sees_the_whole_prelude():
    program = lambdad.loads("def f (x : R) : R = x * 2\n")
    decls = parse_module("def g (xs : [R]) : R = f (maximum xs)\n", "<repl>",
                         predefined=program.decls).decls
    extended = program.extended(decls)
    assert extended.call("g", [1.0, 5.0, 2.0]) == 10.0
    assert extended.prelude_types() == whole_prelude_types()
