"""Every entry of the primitive table is complete, and its derivative rules are right.

Adding a primitive is one entry in primitives.py; these tests are what make that safe."""

import math
import random

import pytest

from lambdad.differentiate import Differentiator
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr
from lambdad.primitives import NAMED, OPERATORS, PRIMITIVES, Primitive
from lambdad.printer import print_term
from lambdad.syntax import REAL, FunT, Prim, Var, free_vars
from lambdad.typecheck import Scheme, TypeEnv, check_term

KINDS = {"real", "test", "logic", "structural", "constant", "ad"}
ENTRIES = sorted(PRIMITIVES.values(), key=lambda p: p.name)


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
    if prim.spelling.fixity == "function":
        assert NAMED[prim.spelling.symbol] is prim
    else:
        assert OPERATORS[(prim.spelling.symbol, prim.spelling.fixity)] is prim
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
    code = prim.inline.format(**{p: f"_{p}" for p in prim.params})
    for _ in range(20):
        if prim.kind in ("real", "test"):
            args = sample_point(prim, rng)
        elif prim.kind == "logic":
            args = (rng.random() < 0.5,)
        elif prim.name in ("fst", "snd"):
            args = ((1.0, 2.0),)
        else:
            args = ([1.0, 2.0, 3.0],)
        scope = {f"_{p}": a for p, a in zip(prim.params, args)}
        scope["_m"] = math
        assert eval(code, scope) == prim.evaluate(*args)


def test_domain_errors_are_domain_errors_not_python_errors():
    from lambdad.primitives import DomainError

    bad = {"log": (0.0,), "sqrt": (-1.0,), "div": (1.0, 0.0), "pow": (-8.0, 0.5),
           "exp": (1000.0,), "range": (-1.0,)}
    for name, args in bad.items():
        with pytest.raises(DomainError):
            PRIMITIVES[name].evaluate(*args)
