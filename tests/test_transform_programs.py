"""Both transformations on every program in programs/: type-preserving (the transformed
declaration type-checks at the transformed type), and printed programs re-parse to the
same terms."""

from pathlib import Path

import pytest

import lambdad
from conftest import PROGRAMS
from lambdad.backward import backward_type
from lambdad.forward import forward_type
from lambdad.parser import parse_module
from lambdad.testing.properties import same_up_to_elaboration
from lambdad.showing import Showing
from lambdad.printer import print_module
from lambdad.syntax import Module
from lambdad.typecheck import TypeEnv, check_term, infer_module

FILES = sorted(p.name for p in PROGRAMS.glob("*.lam"))


def _typed_env(transformed_decls, program, transform_type):
    """The transformed declarations type-checked in order, each against the transform of
    its source scheme's type (type variables stay type variables)."""
    env = None
    for decl in transformed_decls:
        source = program.typing.schemes[decl.name].type
        typing = check_term(decl.value, transform_type(source), env)
        module = infer_module(Module((decl,)), env)
        env = module.env
        assert typing is not None
    return env


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("raw", [True, False])
def test_transformed_programs_type_check_and_round_trip(file, mode, raw):
    program = lambdad.load(PROGRAMS / file)
    transform_type = forward_type if mode == "forward" else backward_type
    for name in program.names():
        if "grad" in print_module(Module(tuple(program.dependencies(name)))) or \
                "jvp" in print_module(Module(tuple(program.dependencies(name)))):
            continue  # definitions that differentiate cannot be differentiated (nested AD)
        decls = Showing(program).transformed_decls(name, mode, raw=raw)
        _typed_env(decls, program, transform_type)
        module = Module(tuple(decls))
        again = parse_module(print_module(module), "printed.lam")
        # (equal but for the array entries the type checker elaborates operations to)
        assert [d.name for d in again.decls] == [d.name for d in module.decls]
        assert all(same_up_to_elaboration(a.value, b.value)
                   for a, b in zip(again.decls, module.decls)), print_module(module)


@pytest.mark.parametrize("name", ["x", "v", "v_", "r0", "r1", "main", "p", "a"])
@pytest.mark.parametrize("mode", ["forward", "backward"])
def test_show_at_builds_a_hygienic_main_whatever_the_function_is_called(name, mode):
    # The generated main's own names (the point, the value, the results of each run) and
    # the name `main` itself must not capture the user's definitions.
    source = (f"def helper x = x * x\n"
              f"def {name} (a : R) (b : R) : R = helper a * b + sin a\n"
              f"def uses = {name} 1 2\n")
    program = lambdad.loads(source)
    printed = program.show(name, forward=mode == "forward", backward=mode == "backward",
                           at=(2.0, 3.0))
    value, gradient = program.value_and_grad(name, (2.0, 3.0))
    assert lambdad.loads(printed, "printed.lam").run() == (value, gradient)


SHOW_MODES = {"forward": dict(forward=True), "reverse": dict(reverse=True),
              "fused": dict(reverse=True, fused=True),
              "forward-raw": dict(forward=True, raw=True),
              "reverse-raw": dict(reverse=True, raw=True)}


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("mode", SHOW_MODES)
def test_shown_programs_fit_in_100_columns(file, mode):
    """`lambdad show` of every top-level function: no line longer than 100 columns, but one
    that is a single token (a name or literal longer than the width, which cannot break).
    A function printed with another one's dependencies is checked there (the text of a
    declaration does not depend on what is shown with it)."""
    program = lambdad.load(PROGRAMS / file)
    checked: set[str] = set()
    shown = 0
    for name in reversed(program.names()):
        if name in checked:
            continue
        try:
            text = program.show(name, **SHOW_MODES[mode])
        except lambdad.LambdadError:
            continue  # no program for it in this mode (a located refusal, tested elsewhere)
        shown += 1
        checked |= {line.split()[1] for line in text.splitlines() if line.startswith("def ")}
        for line in text.splitlines():
            assert len(line) <= 100 or len(line.split()) == 1, f"{name}: {line}"
    assert shown
