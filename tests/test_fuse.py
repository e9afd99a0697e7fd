"""The fused form of ←D (lambdad.fuse) and the `fused` strategy that runs it: one
backpropagator per straight-line region, the same numbers, a printable target program."""

import sys
from pathlib import Path

import numpy as np
import pytest

import lambdad
from lambdad import cli, codegen, foldgen, lineargen, tape
from lambdad.backward import backward_term
from lambdad.errors import UsageError
from lambdad.fuse import fuse
from lambdad.parser import parse_expr
from lambdad.printer import print_term
from lambdad.rules import NameSupply, NestedDifferentiationError
from lambdad.syntax import LinLam, Zero, bound_names, free_vars, walk
from lambdad.tape import BATCHED_FOLD_MIN_STEPS

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"

CHAIN = "".join(["def chain (x0 : R) : R =\n"]
                + [f"  let x{k + 1} = x{k} * x{k} * 0.5 + sin x{k} in\n" for k in range(5)]
                + ["  x5\n"])

PROGRAM = CHAIN + """
def steps (xs : [R]) : R = fold (\\acc x -> acc * x + sin x) 1 xs
def inner (x : R) : R = grad (\\y -> y * y * sin y) x
def outer (x : R) : R = grad inner x
def pair (x : R) : R * R = let y = x * x in (sin y, y * cos y)
"""


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(PROGRAM)


def test_a_let_chain_fuses_into_one_backpropagator(program):
    value, gradient, stats = program.value_and_grad("chain", 0.3, strategy="fused", stats=True)
    factored = program.value_and_grad("chain", 0.3, strategy="factored", stats=True)
    assert (value, gradient) == pytest.approx(factored[:2], rel=1e-12)
    assert value == factored[0]  # the primal is untouched, bit for bit
    assert factored[2].created == 20 and (stats.created, stats.bodies_run) == (1, 1)


def test_a_fold_whose_step_is_one_region_runs_batched(program):
    # one backpropagator for the accumulator's one real, running the loop, however many steps
    for xs in (LONG[:2], LONG, [0.01 * k - 0.3 for k in range(40)]):
        value, gradient, stats = program.value_and_grad("steps", xs, strategy="fused",
                                                        stats=True)
        expected = program.value_and_grad("steps", xs, strategy="factored", stats=True)
        assert value == expected[0]  # the primal is untouched, bit for bit
        assert gradient == pytest.approx(expected[1], rel=1e-12)
        assert (stats.created, stats.bodies_run) == (1, 1) and expected[2].created >= 3 * len(xs)


def test_a_fold_too_short_to_batch_runs_step_by_step(program):
    # below BATCHED_FOLD_MIN_STEPS the loop's own records would cost more than they save
    xs = LONG[:BATCHED_FOLD_MIN_STEPS - 1]
    value, gradient, stats = program.value_and_grad("steps", xs, stats=True)
    expected = program.value_and_grad("steps", xs, strategy="factored")
    assert (value, gradient) == (expected[0], pytest.approx(expected[1], rel=1e-12))
    assert stats.created == len(xs)


LONG = [0.5, -0.3, 0.8, 1.2, 0.3, -0.7, 0.2, 0.9, -0.1]  # batched: BATCHED_FOLD_MIN_STEPS or more
assert len(LONG) >= BATCHED_FOLD_MIN_STEPS

BATCHED = """
def wide (xs : [R]) : R =
  fst (fold (\\(acc, prev) x -> (acc + sin (prev * x) + x ^ 2, x)) (0, 0) xs)
def both (xs : [R]) : R =
  let (a, b) = fold (\\(a, b) x -> (a * x + b, b * cos x)) (1, 2) xs in a * b
def swap (xs : [R]) : R =
  let (a, b) = fold (\\(a, b) x -> (b * x, a + x)) (1, 2) xs in a + b
def passed (xs : [R]) : R =
  let (a, b) = fold (\\(a, b) x -> (b, a * x)) (1, 2) xs in a + b
def captured (c : R) (xs : [R]) : R = fold (\\acc x -> acc * c + x * x) c xs
def root (xs : [R]) : R = fold (\\acc x -> acc + sqrt (x * x + acc)) 0 xs
def hidden (xs : [R]) : R =
  fold (\\acc x -> let g z = z in x + fst (g (let y = acc in y, x))) 1 xs
"""


def flat(g):
    return [r for part in g for r in flat(part)] if isinstance(g, (list, tuple)) else [g]


@pytest.fixture(scope="module")
def folds():
    return lambdad.loads(BATCHED)


@pytest.mark.parametrize("name, point", [
    ("wide", LONG),            # a slot passed on from the element
    ("both", LONG),            # two slots, each sending to both of the previous
    ("swap", LONG),            # each slot sends to the other's previous one
    ("passed", LONG),          # a slot passed on from the accumulator: not batched
    ("captured", (0.9, LONG)),  # sends to a value from outside the fold
    ("hidden", LONG),          # the accumulator bound by a `let` off the spine: not batched
])
def test_batched_folds_give_the_factored_gradient(folds, name, point):
    value, gradient = folds.value_and_grad(name, point)
    expected = folds.value_and_grad(name, point, strategy="factored")
    assert value == expected[0]
    assert flat(gradient) == pytest.approx(flat(expected[1]), rel=1e-12, abs=1e-15)
    naive = folds.value_and_grad(name, point, strategy="naive")
    assert flat(gradient) == pytest.approx(flat(naive[1]), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("name, point", [("wide", LONG), ("both", LONG), ("swap", LONG),
                                         ("captured", (0.9, LONG))])
def test_a_batched_fold_runs_its_steps_inline_or_else_as_a_function(monkeypatch, inline,
                                                                    name, point):
    # Steps run inline in a Python loop unless Python's indentation would run out; then
    # the batched step is a function run by tape.batched_fold.  Both give the same.
    if not inline:
        monkeypatch.setattr(codegen, "_MAX_IF_DEPTH", 1)
        monkeypatch.setattr(lineargen, "_MAX_IF_DEPTH", 1)
        monkeypatch.setattr(foldgen, "_MAX_IF_DEPTH", 1)
    calls = []
    by_function = codegen.batched_fold
    monkeypatch.setattr(codegen, "batched_fold",
                        lambda *args: calls.append(1) or by_function(*args))
    program = lambdad.loads(BATCHED)
    value, gradient, stats = program.value_and_grad(name, point, stats=True)
    expected = program.value_and_grad(name, point, strategy="factored")
    assert value == expected[0]
    assert flat(gradient) == pytest.approx(flat(expected[1]), rel=1e-12, abs=1e-15)
    assert bool(calls) is not inline
    # batched either way: one record per slot, the fold's when there are two, `a * b`
    assert stats.created == {"wide": 1, "both": 4, "swap": 4, "captured": 1}[name]


def test_only_a_fold_whose_accumulator_stays_in_its_slots_is_batched(folds):
    xs = LONG
    _, _, batched = folds.value_and_grad("both", xs, stats=True)
    _, _, passed = folds.value_and_grad("passed", xs, stats=True)
    _, _, hidden = folds.value_and_grad("hidden", xs, stats=True)
    assert batched.created == 4  # two slots, the fold and `a * b`
    assert passed.created >= len(xs) and hidden.created >= len(xs)


def test_an_error_in_a_batched_fold_is_located_as_in_the_factored_form(folds):
    # sqrt's derivative at 0 (the second step) is infinite
    errors = []
    for strategy in ("fused", "factored"):
        with pytest.raises(lambdad.EvalError) as caught:
            folds.value_and_grad("root", [0.0] * 2 + LONG, strategy=strategy)
        errors.append(caught.value)
    assert errors[0].span == errors[1].span
    assert "sqrt" in str(errors[0])


def test_second_derivatives_of_a_batched_fold(folds):
    xs = LONG
    for mode in ("forward-over-reverse", "reverse-over-reverse"):
        _, gradient, hessian = folds.hessian("wide", xs, mode=mode)
        _, _, expected = folds.hessian("wide", xs, mode="forward-over-forward")
        for row, expected_row in zip(hessian, expected, strict=True):
            assert row == pytest.approx(expected_row, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name, point", [("wide", LONG), ("both", LONG), ("swap", LONG),
                                         ("captured", (0.9, LONG))])
def test_forward_over_reverse_runs_a_batched_fold_batched_in_dual_numbers(monkeypatch, name,
                                                                          point):
    # →D of the fused step shadows names (its rules do): renamed apart, it is batched too,
    # its adjoints pairs of reals added componentwise
    runs = LoopRuns(monkeypatch)
    program = lambdad.loads(BATCHED)
    direction = direction_like(point)
    with runs:
        value, gradient, product = program.hvp(name, point, direction)
    # step by step: the threshold as the run reads it and as code generation writes it
    monkeypatch.setattr(tape, "BATCHED_FOLD_MIN_STEPS", 10**6)
    monkeypatch.setattr(foldgen, "BATCHED_FOLD_MIN_STEPS", 10**6)
    assert runs.count
    runs.count = 0
    with runs:
        step_by_step = lambdad.loads(BATCHED).hvp(name, point, direction)
    assert not runs.count
    assert value == step_by_step[0]
    assert flat(gradient) == pytest.approx(flat(step_by_step[1]), rel=1e-12, abs=1e-15)
    assert flat(product) == pytest.approx(flat(step_by_step[2]), rel=1e-12, abs=1e-15)


class LoopRuns:
    """Counts, while entered, the runs of the loop functions batched folds compile to
    (:meth:`lambdad.foldgen.BatchedFolds.batched_loop`) from now on: their calls, seen by
    a profile function, told apart by name and module."""

    def __init__(self, monkeypatch):
        self.count = 0
        self.loops: set[tuple[int, str]] = set()
        made = codegen._CodeGenerator.batched_loop

        def recording(generator, *args, **kwargs):
            name = made(generator, *args, **kwargs)
            self.loops.add((id(generator.namespace), name))
            return name
        monkeypatch.setattr(codegen._CodeGenerator, "batched_loop", recording)

    def profile(self, frame, event, _):
        if event == "call" and (id(frame.f_globals), frame.f_code.co_name) in self.loops:
            self.count += 1

    def __enter__(self):
        sys.setprofile(self.profile)

    def __exit__(self, *_):
        sys.setprofile(None)


def direction_like(point):
    """A direction of the point's shape: 1, -0.5, 0.25, ... over its reals."""
    reals = iter([(-0.5) ** k for k in range(100)])
    if isinstance(point, tuple):
        return tuple(direction_like(p) for p in point)
    if isinstance(point, list):
        return [next(reals) for _ in point]
    return next(reals)


def test_nested_differentiation_runs_on_the_fused_form(program):
    for name in ("inner", "outer"):
        fused = program.value_and_grad(name, 0.4, strategy="fused")
        assert fused == pytest.approx(program.value_and_grad(name, 0.4), rel=1e-12)


def test_a_backpropagator_that_escapes_keeps_its_record():
    term = parse_expr("\\x -> let y = x * x in (sin y, y * cos y)", "<test>")
    fused = fuse(backward_term(term))
    # y's backpropagator is used by the two that are returned: each keeps its record, and
    # y's body is not copied into both (that would run it twice).
    assert sum(isinstance(t, LinLam) for t in walk(fused)) == 3


def test_the_fused_form_prints_parses_back_and_runs_to_the_same_numbers(program):
    text = program.show("chain", reverse=True, fused=True, at=0.3)
    assert "(fused ←D of R -> R)" in text
    shown = lambdad.loads(text)
    assert shown.run("main") == pytest.approx(program.value_and_grad("chain", 0.3), rel=1e-12)
    term = fuse(backward_term(program.decls["chain"].value))
    assert parse_expr(print_term(term), "<fused>") == term
    bodies = [t for t in walk(term) if isinstance(t, LinLam) and not isinstance(t.body, Zero)]
    assert len(bodies) == 1  # constants keep their zero backpropagator, never created


def test_fused_is_only_a_form_of_reverse_mode(program):
    with pytest.raises(UsageError, match="--reverse"):
        program.show("chain", forward=True, fused=True)


def test_the_command_line_runs_and_counts_the_fused_strategy(tmp_path, capsys):
    file = tmp_path / "chain.lam"
    file.write_text(CHAIN)
    assert cli.main(["grad", str(file), "chain", "--at", "0.3", "--strategy", "fused",
                     "--stats"]) == 0
    out = capsys.readouterr().out
    assert "backpropagators created: 1" in out and "bodies run: 1" in out


def test_a_difference_is_sent_as_a_subtraction_not_a_product_by_minus_one():
    term = fuse(backward_term(parse_expr("\\x y -> let z = x * y in z * z - y", "<test>")))
    text = print_term(term)
    assert "-1 *" not in text and " - " in text
    program = lambdad.loads("def f (x : R) (y : R) : R = let z = x * y in z * z - y")
    assert program.value_and_grad("f", (1.5, 2.0), strategy="fused") == \
        program.value_and_grad("f", (1.5, 2.0), strategy="factored")


OVERFLOWING_ADJOINT = """
def f (x : R) : R =
  let y = x * 1e300 in
  let z = y * 1e300 in
  z - sin z * 0 + x * x
"""


@pytest.mark.parametrize("strategy", ["factored", "fused", "naive"])
def test_an_adjoint_that_overflows_is_located_at_its_operation(strategy):
    # Backpropagator bodies check finiteness where a value leaves them; the operation that
    # overflowed is found by running the body again with every check in place.
    program = lambdad.loads(OVERFLOWING_ADJOINT, "ovf.lam")
    with pytest.raises(lambdad.EvalError) as caught:
        program.value_and_grad("f", 1e-300, strategy=strategy)
    error = caught.value
    assert "`1e+300 * 1e+300` is inf: an overflow" in str(error)
    assert (error.span.line, error.span.col) == (3, 11)  # `y * 1e300`, whose derivative it is


@pytest.mark.parametrize("file", sorted(PROGRAMS.glob("*.lam")), ids=lambda p: p.stem)
def test_fusion_renames_apart_with_the_supply_of_backward(file):
    # Fusion gives every binder a fresh name from the supply ←D used, which knows the
    # source's names, so the free names of ←D's output (the source's) are never captured.
    program = lambdad.load(file)
    for decl in program.decls.values():
        names = NameSupply.for_terms(decl.value)
        try:
            transformed = backward_term(decl.value, names)
        except NestedDifferentiationError:
            continue  # written out as a target program first (lambdad.nesting)
        assert all(names.is_taken(name) for name in free_vars(transformed))
        fused = fuse(transformed, names)
        assert free_vars(fused) == free_vars(transformed)
        bound = [name for t in walk(fused) for name in bound_names(t) if name != "_"]
        assert len(bound) == len(set(bound))  # renamed apart


def test_partials_at_literal_exponents_are_computed_when_compiled():
    # ←D's partial of `x ^ y` is `if y == 0 then 0 else y * x ^ (y - 1)`: at y = 2 the fused
    # form computes it as `2 * x` (the same operations on the same literals).
    term = fuse(backward_term(parse_expr("\\x -> x ^ 2 + x ^ -3", "<test>")))
    text = print_term(term)
    assert "==" not in text and "2 * x" in text and "-3 * x" in text
    program = lambdad.loads("def f (x : R) : R = x ^ 2 + x ^ -3")
    assert program.value_and_grad("f", 1.5, strategy="fused") == pytest.approx(
        program.value_and_grad("f", 1.5, strategy="factored"), rel=1e-15)


def test_a_body_that_stages_nothing_compiles():
    program = lambdad.loads("def f (xs : [R]) : R =\n"
                            "  (max (1 + (let y1 = 1 in y1))) 1 + fold (\\acc v -> acc + v) 0 xs")
    assert program.value_and_grad("f", [1.0, 2.0]) == (5.0, [1.0, 1.0])


def test_an_array_cotangent_sent_twice_is_computed_once_and_doubled():
    # `dot r r` sends `a * r` to r's backpropagator twice: the fused body computes the
    # product once and doubles it (2 * u is u + u bit for bit), as for reals
    source = ("def f (x : Vec) : R = dot x x\n"
              "def g (x : Vec) (v : Mat) : R = let r = 1 - x @ v in dot r r / 2\n")
    program = lambdad.loads(source)
    assert "x1_1 (2 * (a2 * x3))" in program.show("f", reverse=True, fused=True)
    x = np.array([0.5, -1.25, 2.0])
    v = np.array([[1.0, 0.5], [-2.0, 0.25], [0.75, 3.0]])
    for name, point in (("f", x), ("g", (x, v))):
        fused = program.value_and_grad(name, point, strategy="fused")
        factored = program.value_and_grad(name, point, strategy="factored")
        assert fused[0] == factored[0]
        for got, expected in zip(*(g if isinstance(g, tuple) else (g,)
                                   for g in (fused[1], factored[1]))):
            assert got.tobytes() == expected.tobytes()
    assert program.grad("f", x, strategy="fused").tobytes() == (2 * x).tobytes()


@pytest.mark.parametrize("uses", [1, 4, 5, 9])
def test_a_term_sent_twice_is_sent_once_doubled(uses):
    # each x * x sends `x * a` twice to x's backpropagator: each pair of equal terms is
    # one `2 * (x * a)`, for a few sends (compared pairwise) or many (hashed)
    source = f"def f (x : R) : R = {' + '.join(['x * x'] * uses)}\n"
    term = fuse(backward_term(lambdad.loads(source).decls["f"].value))
    assert print_term(term).count("2 * (") == uses
    program = lambdad.loads(source)
    fused = program.value_and_grad("f", 0.7, strategy="fused")
    factored = program.value_and_grad("f", 0.7, strategy="factored")
    assert fused[0] == factored[0] and fused[1] == pytest.approx(factored[1], rel=1e-12)
