"""Batched folds are a fast path with one door (STYLE 22): the plan comes from
``batching.batched_fold_step`` alone, the code generator asks for it only in a unit compiled
with ``batch_folds`` (a fused ←D program, and →D of one), and what it runs is bit for bit
what the same fused program gives run step by step (the general path)."""

import pytest

import lambdad
from lambdad import codegen, foldgen
from lambdad.batching import batched_fold_step
from lambdad.codegen import CompileOptions
from lambdad.fuse import fuse
from lambdad.interpreter import Interpreter
from lambdad.backward import backward_term
from lambdad.parser import parse_expr
from lambdad.tape import BATCHED_FOLD_MIN_STEPS

SOURCE = """
def steps (xs : [R]) : R = fold (\\acc x -> acc * 0.5 + sin (acc * x) + x * x) 0.25 xs
def both (xs : [R]) : R =
  let (a, b) = fold (\\(a, b) x -> (a * x + b, b * cos x)) (1, 2) xs in a * b
def dot (p : [R] * [R]) : R =
  let (xs, ys) = p in fold (\\s (x, y) -> s + x * y) 0 (zip xs ys)
def captured (c : R) (xs : [R]) : R = fold (\\acc x -> acc * c + x * x) c xs
def counted (c : R) : R = fold (\\acc i -> acc * c + sin acc) c (range 12)
"""

XS = [0.1 * k - 0.45 for k in range(3 * BATCHED_FOLD_MIN_STEPS)]
POINTS = [("steps", XS), ("both", XS), ("dot", (XS, [x * x - 0.2 for x in XS])),
          ("captured", (0.9, XS)), ("counted", 0.7)]


def runs(point_of, batched, monkeypatch, inline=True):
    """Every (value, gradient) and Hessian-vector product of POINTS on a fresh program,
    batched or with the plan refused (each fold of the fused program run step by step);
    batched steps run inline, or (not ``inline``) as a function of their own, as when
    Python's indentation would run out."""
    with monkeypatch.context() as patch:
        if not inline:
            patch.setattr(foldgen, "_MAX_IF_DEPTH", 1)
        if not batched:
            patch.setattr(foldgen, "batched_fold_step", lambda step: None)
        calls = []
        plan = foldgen.batched_fold_step
        patch.setattr(foldgen, "batched_fold_step",
                      lambda step: calls.append(1) or plan(step))
        program = lambdad.loads(SOURCE)
        results = []
        for name, point in POINTS:
            results.append(program.value_and_grad(name, point))
            results.append(program.value_and_grad(name, point))  # the prepared path too
            direction = point_of(point)
            results.append(program.hvp(name, point, direction))
        return results, calls


def along(point):
    if isinstance(point, tuple):
        return tuple(along(part) for part in point)
    if isinstance(point, list):
        return [0.5 - 0.01 * k for k, _ in enumerate(point)]
    return 0.75


@pytest.mark.parametrize("inline", [True, False], ids=["steps inline", "step a function"])
def test_batched_folds_give_the_step_by_step_results_bit_for_bit(monkeypatch, inline):
    batched, asked = runs(along, True, monkeypatch, inline)
    general, _ = runs(along, False, monkeypatch)
    assert len(asked) >= len(POINTS), "the code generator did not ask for a plan per fold"
    assert repr(batched) == repr(general)  # bit for bit, down to the last digit printed


def test_the_code_generator_reaches_batched_folds_through_one_door():
    """codegen.py takes the mixin alone from foldgen, and the code generator (codegen.py
    and its arms for linear constructs, lineargen.py) enters it by two arms: ``prim``
    (``batched_fold``) and ``lin_lam`` while a step is batched (``batched_slot``); no other
    module imports foldgen."""
    import ast
    from pathlib import Path
    package = Path(lambdad.__file__).parent
    tree = ast.parse((package / "codegen.py").read_text())
    imported = {alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "foldgen"
                for alias in node.names}
    assert imported == {"BatchedFolds"}
    inside = {name for name, member in vars(foldgen.BatchedFolds).items()
              if callable(member) or isinstance(member, staticmethod)}
    generator = [tree, ast.parse((package / "lineargen.py").read_text())]
    entered = {node.attr for part in generator for node in ast.walk(part)
               if isinstance(node, ast.Attribute) and node.attr in inside}
    assert entered == {"batched_fold", "batched_slot"}
    importers = sorted(path.name for path in package.rglob("*.py") if path.name != "codegen.py"
                       for node in ast.walk(ast.parse(path.read_text()))
                       if isinstance(node, ast.ImportFrom) and node.module == "foldgen")
    assert importers == []


def test_every_fold_here_is_batched_under_the_fused_strategy():
    program = lambdad.loads(SOURCE)
    for name, point in POINTS:
        _, _, stats = program.value_and_grad(name, point, strategy="fused", stats=True)
        # a few records for the accumulator's reals, not some for every step
        assert stats.created <= 4 < len(XS), name


def test_other_strategies_and_instrumented_code_never_batch(monkeypatch):
    program = lambdad.loads(SOURCE)
    _, _, stats = program.value_and_grad("steps", XS, strategy="factored", stats=True)
    assert stats.created >= len(XS)
    asked = []
    monkeypatch.setattr(foldgen, "batched_fold_step", lambda step: asked.append(step))
    fused = fuse(backward_term(parse_expr("\\xs -> fold (\\acc x -> acc * x + x) 1.0 xs")))
    calls = Interpreter()._runtime_calls(True)
    for options in (CompileOptions(instrumented=True, batch_folds=True), CompileOptions()):
        codegen.compile_term(fused, None, calls, options=options, filename="<test>")
    assert asked == []
    codegen.compile_term(fused, None, calls, options=CompileOptions(batch_folds=True),
                         filename="<test>")
    assert len(asked) == 1


def test_the_plan_is_asked_of_the_step_alone():
    # the step of ←D fused, as the fused strategy compiles it: it qualifies; the step of ←D
    # as the paper writes it has a backpropagator per primitive, not all returned
    source = "\\xs -> fold (\\acc x -> acc * x + x) 1.0 xs"
    fused = fuse(backward_term(parse_expr(source)))
    folds = [t for t in lambdad.syntax.walk(fused)
             if isinstance(t, lambdad.syntax.Prim) and t.op == "fold"]
    assert folds and batched_fold_step(folds[0].args[0]) is not None
    assert batched_fold_step(parse_expr("\\acc -> \\x -> acc + x")) is None
