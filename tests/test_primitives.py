"""Every entry of the primitive table is complete, and its derivative rules are right.

Adding a primitive is one entry in primitives.py; these tests are what make that safe."""

import math
import random

import numpy as np
import pytest

from lambdad.rules import BACKPROPAGATOR, TANGENT, array_rule_term

from lambdad.differentiate import Differentiator
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr
from lambdad.primitives import NAMED, OPERATORS, PRIMITIVES, Primitive
from lambdad.printer import print_term
from lambdad.syntax import MAT, REAL, FunT, Prim, Var, free_vars
from lambdad.typecheck import Scheme, TypeEnv, check_term

KINDS = {"real", "test", "logic", "structural", "constant", "ad", "elementwise", "array"}
ENTRIES = sorted(PRIMITIVES.values(), key=lambda p: p.name)
# The entries an application is elaborated to by the type checker, each with the entry
# written in the source.
ELABORATED = {p.on_arrays: p.name for p in ENTRIES if p.on_arrays is not None}
ELABORATED.update({"matvec": "matmul", "vecmat": "matmul"})


def arity_of_type(t):
    n = 0
    while isinstance(t, FunT):
        n += 1
        t = t.result
    return n


def sample_point(prim: Primitive, rng: random.Random):
    """Arguments inside the primitive's domain and away from its kinks."""
    for _ in range(10000):
        args = tuple(rng.uniform(-3, 3) for _ in prim.params)
        if prim.domain is not None and not prim.domain(*args):
            continue
        if prim.kink is not None and prim.kink(*args) < 1e-2:
            continue
        return args
    raise AssertionError(f"no point found in the domain of {prim.name}")


@pytest.mark.parametrize("prim", ENTRIES, ids=lambda p: p.name)
def test_entry_is_complete(prim):
    assert prim.kind in KINDS
    assert prim.params and len(set(prim.params)) == len(prim.params)
    assert arity_of_type(prim.type) >= prim.arity
    assert prim.doc.strip()
    assert prim.spelling.symbol
    if prim.name in ELABORATED:
        # an entry the type checker chooses, spelled as the entry it is chosen for
        assert prim.spelling.symbol in (NAMED.get(prim.spelling.symbol) or PRIMITIVES[
            ELABORATED[prim.name]]).spelling.symbol
    elif prim.spelling.fixity == "function":
        assert NAMED[prim.spelling.symbol] is prim
    else:
        assert OPERATORS[(prim.spelling.symbol, prim.spelling.fixity)] is prim
    if prim.kind == "array":
        assert len(prim.rule.modes) == prim.arity
        assert set(prim.rule.modes) <= {"split", "primal", "whole", "image"}
        for suffix in (TANGENT, BACKPROPAGATOR):  # each rule parses and type-checks
            array_rule_term(prim, suffix)
    if prim.kind == "ad":
        assert prim.name in Differentiator(Interpreter()).hooks()
    else:
        assert callable(prim.evaluate)
    if prim.kind == "real":
        assert len(prim.partials) == prim.arity, "one partial derivative per argument"
        assert arity_of_type(prim.type) == prim.arity


@pytest.mark.parametrize("prim", [p for p in ENTRIES if p.kind in ("real", "test")],
                         ids=lambda p: p.name)
def test_spelling_prints_and_parses_back(prim):
    term = Prim(prim.name, tuple(Var(p) for p in prim.params))
    text = print_term(term)
    assert parse_expr(text, bound=prim.params) == term


@pytest.mark.parametrize("prim", [p for p in ENTRIES if p.kind == "real"], ids=lambda p: p.name)
def test_partials_are_well_typed_terms_of_the_language(prim):
    names = prim.params + ((prim.result,) if prim.result else ())
    env = TypeEnv.builtins()
    for name in names:
        env = env.extend(name, Scheme((), REAL))
    for partial in prim.partials:
        term = parse_expr(partial, bound=names)
        assert free_vars(term) <= set(names), f"{prim.name}: {partial} mentions unknown names"
        check_term(term, REAL, env)


@pytest.mark.parametrize("prim", [p for p in ENTRIES if p.kind == "real"], ids=lambda p: p.name)
def test_partials_agree_with_finite_differences(prim):
    rng = random.Random(prim.name)
    names = prim.params + ((prim.result,) if prim.result else ())
    interpreter = Interpreter()
    partials = [parse_expr(text, bound=names) for text in prim.partials]
    for _ in range(20):
        args = sample_point(prim, rng)
        env = dict(zip(prim.params, args))
        if prim.result:
            env[prim.result] = prim.evaluate(*args)
        for i, partial in enumerate(partials):
            h = 1e-6 * max(1.0, abs(args[i]))
            up = list(args)
            down = list(args)
            up[i] += h
            down[i] -= h
            numeric = (prim.evaluate(*up) - prim.evaluate(*down)) / (2 * h)
            exact = interpreter.evaluate(partial, env)
            assert exact == pytest.approx(numeric, rel=1e-5, abs=1e-6), (
                f"∂{i + 1} {prim.name} at {args}: rule gives {exact}, differences {numeric}")


@pytest.mark.parametrize("prim", [p for p in ENTRIES if p.inline], ids=lambda p: p.name)
def test_inline_code_computes_what_evaluate_computes(prim):
    rng = random.Random(prim.name)
    code = prim.inline.format(**{p: f"_p_{p}" for p in prim.params})
    for _ in range(20):
        if prim.kind in ("real", "test"):
            args = sample_point(prim, rng)
        elif prim.kind == "logic":
            args = (rng.random() < 0.5,)
        elif prim.name in ("fst", "snd"):
            args = ((1.0, 2.0),)
        elif prim.kind == "constant":  # a size read from an array (Vec or Mat, as typed)
            shape = (rng.randint(0, 4), rng.randint(0, 4))
            args = (np.zeros(shape if prim.type.arg == MAT else shape[:1]),)
        else:
            args = ([1.0, 2.0, 3.0],)
        scope = {f"_p_{p}": a for p, a in zip(prim.params, args)}
        scope["_m"] = math
        assert eval(code, scope) == prim.evaluate(*args)


def test_domain_errors_are_domain_errors_not_python_errors():
    from lambdad.primitives import DomainError

    bad = {"log": (0.0,), "sqrt": (-1.0,), "div": (1.0, 0.0), "pow": (-8.0, 0.5),
           "exp": (1000.0,), "range": (-1.0,)}
    for name, args in bad.items():
        with pytest.raises(DomainError):
            PRIMITIVES[name].evaluate(*args)


# Reference values from the mathematical definitions (not from Python's math module where
# an exact value is known): name, arguments, value.
GOLDEN = [
    ("asin", (0.5,), math.pi / 6), ("acos", (0.5,), math.pi / 3), ("atan", (1.0,), math.pi / 4),
    ("atan2", (1.0, -1.0), 3 * math.pi / 4), ("atan2", (-1.0, 0.0), -math.pi / 2),
    ("atan2", (0.0, 0.0), 0.0),
    ("sinh", (1.0,), (math.e - 1 / math.e) / 2), ("cosh", (1.0,), (math.e + 1 / math.e) / 2),
    ("asinh", (0.75,), math.log(0.75 + math.sqrt(0.75 ** 2 + 1))),
    ("acosh", (2.0,), math.log(2 + math.sqrt(3))), ("atanh", (0.5,), 0.5 * math.log(3)),
    ("log1p", (1e-12,), 9.999999999995e-13), ("expm1", (1e-12,), 1.0000000000005e-12),
    ("erf", (1.0,), 0.8427007929497149), ("erf", (0.0,), 0.0),
    ("floor", (-1.5,), -2.0), ("floor", (2.0,), 2.0), ("ceil", (-1.5,), -1.0),
    ("ceil", (1.2,), 2.0), ("round", (2.5,), 2.0), ("round", (3.5,), 4.0),
    ("round", (-1.6,), -2.0), ("sign", (-3.0,), -1.0), ("sign", (0.0,), 0.0),
    ("sign", (0.1,), 1.0), ("clip", (0.0, 1.0, 2.0), 1.0), ("clip", (0.0, 1.0, -2.0), 0.0),
    ("clip", (0.0, 1.0, 0.25), 0.25),
]


@pytest.mark.parametrize("name, args, expected", GOLDEN, ids=[f"{g[0]}{g[1]}" for g in GOLDEN])
def test_golden_values_in_the_language(name, args, expected):
    import lambdad

    prim = PRIMITIVES[name]
    text = print_term(Prim(name, tuple(Var(p) for p in prim.params)))
    params = " ".join(f"({p} : R)" for p in prim.params)
    program = lambdad.loads(f"def f {params} : R = {text}")
    assert program.call("f", args if len(args) > 1 else args[0]) == pytest.approx(
        expected, rel=1e-15, abs=1e-300)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "sign"])
def test_step_functions_have_derivative_zero_in_both_modes(name):
    import lambdad

    program = lambdad.loads(f"def f (x : R) : R = x * {name} (3 * x)")
    for x in (0.3, -1.27, 2.6):
        for mode in ("reverse", "forward"):
            value, gradient = program.value_and_grad("f", x, mode=mode)
            assert value == x * PRIMITIVES[name].evaluate(3 * x)
            assert gradient == PRIMITIVES[name].evaluate(3 * x)


def test_new_domain_errors_are_located_runtime_errors():
    import lambdad
    from lambdad.errors import EvalError

    cases = {"asin 2": "asin needs -1 <= x <= 1, got 2", "acos (-1.5)": "acos needs",
             "acosh 0.5": "acosh needs x >= 1", "atanh 1": "atanh needs -1 < x < 1",
             "log1p (-1)": "log1p needs x > -1", "sinh 1000": "overflow in sinh",
             "cosh 1000": "overflow in cosh", "expm1 1000": "overflow in expm1"}
    for text, message in cases.items():
        program = lambdad.loads(f"def main = 1 + {text}")
        with pytest.raises(EvalError) as caught:
            program.run()
        assert message in caught.value.message
        assert caught.value.span.col == 16


LAWFUL = [p for p in ENTRIES if p.laws is not None]


@pytest.mark.parametrize("prim", LAWFUL, ids=lambda p: p.name)
def test_declared_laws_hold_for_the_evaluation(prim):
    """The simplifier rewrites with these laws, so each must hold exactly."""
    laws, f = prim.laws, prim.evaluate
    rng = random.Random(prim.name)
    points = [rng.uniform(0.5, 3.0) * rng.choice((-1, 1)) for _ in range(50)] + [2.0, -3.0]
    for x in points:
        if laws.involution:
            assert f(f(x)) == x
            continue
        if laws.left_unit is not None:
            assert f(laws.left_unit, x) == x
        if laws.right_unit is not None:
            assert f(x, laws.right_unit) == x
        if laws.absorbing is not None:
            assert f(laws.absorbing, x) == laws.absorbing == f(x, laws.absorbing)
        if laws.negating is not None:
            assert f(laws.negating, x) == -x == f(x, laws.negating)
        if laws.left_negating is not None:
            assert f(laws.left_negating, x) == -x
        if laws.of_negation is not None:
            assert f(2.5, -x) == PRIMITIVES[laws.of_negation].evaluate(2.5, x)


def test_the_arithmetic_declares_its_laws():
    assert {p.name for p in LAWFUL} >= {"add", "sub", "mul", "div", "pow", "neg"}


def test_value_at_literals_is_what_a_run_computes_or_none():
    assert PRIMITIVES["sin"].value_at(2.0) == math.sin(2.0)
    assert PRIMITIVES["sub"].value_at(2.0, 1.0) == 1.0
    assert math.copysign(1.0, PRIMITIVES["pow"].value_at(-0.0, 1.0)) == -1.0
    assert PRIMITIVES["eq"].value_at(2.0, 0.0) is False
    assert PRIMITIVES["div"].value_at(1.0, 0.0) is None      # fails: left to the run
    assert PRIMITIVES["exp"].value_at(1000.0) is None       # not finite
    assert PRIMITIVES["mul"].value_at(1e200, 1e200) is None  # overflows to inf


FINITE_AT_FINITE = [p for p in ENTRIES if p.finite_at_finite]
EXTREMES = (0.0, -0.0, 5e-324, -5e-324, 1.0, -1.0, math.pi, 1e16 + 1, -1e16, 1.7976931348623157e308,
            -1.7976931348623157e308)


@pytest.mark.parametrize("prim", FINITE_AT_FINITE, ids=lambda p: p.name)
def test_primitives_finite_at_finite_arguments_are_so_and_never_fail(prim):
    """Generated code leaves out the finiteness check of such a primitive's result when its
    operands are known finite: it must be finite for every finite argument, inline or not."""
    assert prim.kind == "real"
    rng = random.Random(prim.name)
    points = [tuple(rng.choice(EXTREMES) for _ in prim.params) for _ in range(200)]
    points += [tuple(rng.uniform(-1e3, 1e3) for _ in prim.params) for _ in range(200)]
    code = prim.inline.format(**{p: f"_p_{p}" for p in prim.params}) if prim.inline else None
    for args in points:
        assert math.isfinite(prim.evaluate(*args)), (prim.name, args)
        if code is not None:
            scope = {f"_p_{p}": a for p, a in zip(prim.params, args)}
            scope["_m"] = math
            assert math.isfinite(eval(code, scope)), (prim.name, args)


def test_the_primitives_that_overflow_or_fail_are_not_marked_finite_at_finite():
    assert {p.name for p in FINITE_AT_FINITE} >= {"sin", "cos", "tanh", "neg", "abs", "max"}
    assert not {"add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "sinh", "cosh", "tan",
                "expm1"} & {p.name for p in FINITE_AT_FINITE}
