"""The fast paths of value+gradient give what the general paths give.

Linear bodies built by ←D are compiled into staging statements (`stage(g, e)`) while any
other linear body returns cotangent data; constants share one zero backpropagator; points
that are lists of reals are converted, seeded and read off by plain loops.  Each test
states the behaviour both paths must share: the same adjoints under both strategies, the
same counts, the same events, no recursion on deep terms.
"""

import gc
import math
import re
import types

import pytest
from conftest import Calls

import lambdad
from lambdad.reals import count_reals, is_dual
from lambdad.errors import DifferentiationError, UsageError
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr
from lambdad.calling import from_python as _from_python
from lambdad.values import fits as _fits
from lambdad.syntax import REAL, BoolT, ListT, PairT
from lambdad.tape import (STRATEGIES, ZERO, Backprop, BackpropCreated, BackpropRun, Tape,
                          add_cotangents, backward)
from lambdad.values import map_value, to_python

FILE = "<test>"


def run(text, interpreter=None):
    return (interpreter or Interpreter()).evaluate(parse_expr(text, FILE))


def source_of(backprop):
    """The generated module holding a backpropagator's body."""
    return backprop.function.__globals__["__lambdad_source__"]


# --------------------------------------------------------------------------- staging


def test_chain_rule_bodies_stage_their_calls_other_bodies_return_data():
    staged = run("\\a -o seed 0 (2 * a) <+> zero <+> seed 1 a")
    assert "_st(" in source_of(staged) and "_Sum" not in source_of(staged)
    data = run("\\a -o let d = seed 0 a in d <+> d")
    assert "_st(" not in source_of(data) and "_Sum" in source_of(data)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("text, gradient, bodies", [
    # a `d` value bound by `let` and used twice counts twice (data body)
    ("let g = \\a -o (let d = seed 0 a in d <+> d) in cotangent (1, seed 0) (g 1 <+> g 1)",
     4.0, {"factored": 1, "naive": 2}),
    # the same sum written as staged applications
    ("let g = \\a -o seed 0 a <+> seed 0 a in cotangent (1, seed 0) (g 1 <+> g 1)",
     4.0, {"factored": 1, "naive": 2}),
    # a staged application of a function into d (not a backpropagator)
    (("let h = \\b -> seed 0 (3 * b) in let g = \\a -o h a <+> seed 0 a in "
      "cotangent (1, seed 0) (g 1)"), 4.0, {"factored": 1, "naive": 1}),
    # `let` inside a staged body, and a body that stages into the shared zero
    (("let g = \\a -o (let b = 5 * a in seed 0 b <+> (\\c -o zero) b) in "
      "cotangent (1, seed 0) (g 1)"), 5.0, {"factored": 1, "naive": 1}),
])
def test_staged_and_data_bodies_agree(strategy, text, gradient, bodies):
    interpreter = Interpreter(strategy=strategy)
    assert run(text, interpreter) == gradient
    # (The interpreter runs these target terms as written: `fused` only changes which form
    # of ←D reverse mode runs, so it backpropagates as `factored` does.)
    factored = STRATEGIES[strategy].factored
    assert interpreter.stats.bodies_run == bodies["factored" if factored else "naive"]
    assert interpreter.stats.bodies_run <= interpreter.stats.created or not factored


def test_naive_runs_staged_calls_in_order_and_counts_every_call():
    events = []
    interpreter = Interpreter(strategy="naive", on_event=events.append)
    text = ("let p = (1, seed 0) in let (v, v_) = p in "
            "let u = \\a -o v_ a in let w = \\a -o u (2 * a) <+> u (3 * a) in "
            "cotangent p (w 1)")
    assert run(text, interpreter) == 5.0
    runs = [(e.stamp, e.cotangent) for e in events if isinstance(e, BackpropRun)]
    u, w = sorted({stamp for stamp, _ in runs})
    assert runs == [(w, 1.0), (u, 2.0), (u, 3.0)]  # left to right, each right after w


def test_deep_staged_bodies_compile_without_recursion():
    n = 5000
    sums = " <+> ".join(["seed 0 a"] * n)
    assert run(f"cotangent (1, seed 0) ((\\a -o {sums}) 1)") == float(n)
    lets = "".join(f"let b{k} = b{k - 1} + 1 in " for k in range(1, n))
    assert run(f"cotangent (1, seed 0) ((\\a -o let b0 = a in {lets}seed 0 b{n - 1}) 1)") \
        == float(n)


# --------------------------------------------------------------------------- the zero


def test_constants_share_the_zero_backpropagator_and_are_not_created():
    tape = Tape()
    interpreter = Interpreter()
    with interpreter.using_tape(tape):
        first, second = run("(\\a -o zero, \\a -o zero)", interpreter)
    assert first is second is tape.constant() is ZERO and tape.created == 0
    assert backward(tape, first(5.0)) == {}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_what_is_sent_to_a_constant_is_neither_computed_nor_staged(strategy):
    # The adjoint `c` would receive, 1e300 * x, overflows; x's own (1e300 * c) is 1.
    prog = lambdad.loads("def c : R = 1e-300\n"
                         "def f (x : R) : R = 1e300 * (x * c)\n")
    value, gradient, stats = prog.value_and_grad("f", 1e10, strategy=strategy, stats=True)
    assert value == pytest.approx(1e10) and gradient == pytest.approx(1.0)
    assert stats.bodies_run <= stats.created
    # a real that is not a constant still gets its check: the overflow is reported
    other = lambdad.loads("def f (x : R) (c : R) : R = 1e300 * (x * c)\n")
    with pytest.raises(lambdad.EvalError, match="is inf: an overflow"):
        other.value_and_grad("f", (1e10, 1e-300), strategy=strategy)


def test_instrumented_runs_report_each_constant_but_count_the_same():
    text = ("let p = (2, seed 0) in let (x, x_) = p in let z = \\b -o zero in "
            "cotangent p ((\\a -o x_ a <+> z a) 3)")
    plain = Interpreter()
    assert run(text, plain) == 3.0
    events = []
    traced = Interpreter(on_event=events.append)
    assert run(text, traced) == 3.0
    assert (traced.stats.created, traced.stats.bodies_run) == (plain.stats.created,
                                                                plain.stats.bodies_run) == (1, 1)
    zero, body = [e.stamp for e in events if isinstance(e, BackpropCreated)]
    ran = [(e.stamp, e.cotangent) for e in events if isinstance(e, BackpropRun)]
    assert ran == [(body, 3.0), (zero, 3.0)]  # the constant reports what reached it


@pytest.mark.parametrize("lifting", ["\\i -> (i, \\a -o zero)",
                                     "\\i -> let g = \\a -o zero in (i, g)"])
def test_a_lifted_list_pairs_every_element_with_the_one_zero(lifting):
    tape = Tape()
    interpreter = Interpreter()
    with interpreter.using_tape(tape):
        lifted = run(f"map ({lifting}) [1, 2, 3]", interpreter)
    assert [r for r, _ in lifted] == [1.0, 2.0, 3.0]
    assert all(g is tape.constant() for _, g in lifted) and tape.created == 0
    # not this shape: the λ runs per element (here each makes a backpropagator of its own)
    with interpreter.using_tape(Tape()):
        own = run("map (\\i -> (i, \\a -o zero <+> zero)) [1, 2]", interpreter)
    assert own[0][1] is not own[1][1]


def test_a_fold_over_a_range_differentiates_alike_in_every_strategy_and_trace():
    prog = lambdad.loads("def f (x : R) : R = fold (\\acc k -> acc * x + k) x (range 9)\n")
    results = {strategy: prog.value_and_grad("f", 0.7, strategy=strategy)
               for strategy in STRATEGIES}
    value, gradient = results["factored"]
    assert all(r == pytest.approx((value, gradient), rel=1e-12) for r in results.values())
    from lambdad.trace import trace

    traced = trace(prog, "f", 0.7, mode="reverse")  # instrumented: the λ runs per element
    assert traced.input_derivatives[0][0] == pytest.approx(gradient, rel=1e-12)


def test_one_times_a_value_known_finite_is_that_value():
    interpreter = Interpreter()
    checked = run("\\y -> let x = y * 3 in 1 * x + x * 1", interpreter)
    assert checked(2.0) == 12.0
    text = checked.func.__globals__["__lambdad_source__"] if hasattr(checked, "func") \
        else checked.__globals__["__lambdad_source__"]
    assert "1.0 *" not in text and "* 1.0" not in text
    # a parameter is not known finite: `1 * y` is computed and checked where it is
    unchecked = run("\\y -> 1 * y", interpreter)
    with pytest.raises(lambdad.EvalError) as caught:
        interpreter.guarded(unchecked, math.inf)
    assert "`1 * inf` is inf" in str(caught.value)


def test_primitives_applied_to_literals_are_folded_bit_for_bit():
    interpreter = Interpreter()
    folded = run("\\y -> y ^ (2 - 1) + sin 2 * y + (if 2 == 0 then 0 else y)", interpreter)
    text = source_of_function(folded)
    assert "2.0 - 1.0" not in text and "sin(2.0)" not in text and "2.0 == 0.0" not in text
    assert "False - False" not in text  # a folded test is no real to check
    # x ^ 1 and x / 1 are x, bit for bit: no call, only x's check when x is not known finite
    units = run("\\y -> let x = y * 3 in x ^ (2 - 1) + x / 1 + y ^ 1", interpreter)
    assert ", 1.0)" not in source_of_function(units) and units(0.5) == 3.5
    branches = run("\\y -> if y > 0 then y ^ 1 else 1 * y / 1", interpreter)
    for point in (math.inf, -math.inf):
        with pytest.raises(lambdad.EvalError) as caught:
            interpreter.guarded(branches, point)
        assert "is inf" in str(caught.value) or "is -inf" in str(caught.value)
    assert folded(0.75) == 0.75 + math.sin(2.0) * 0.75 + 0.75
    # an application that would fail is left to fail at run time, where it is
    failing = run("\\y -> if y > 0 then y else 1 / 0", interpreter)
    assert failing(2.0) == 2.0
    with pytest.raises(lambdad.EvalError) as caught:
        interpreter.guarded(failing, -1.0)
    assert "division by zero" in str(caught.value)


def source_of_function(value):
    return (value.func if hasattr(value, "func") else value).__globals__["__lambdad_source__"]


def sources_made_by(action):
    """The generated modules ``action()`` compiles (their sources), and what it returns."""
    def modules():
        return {id(found): found for found in gc.get_objects()
                if isinstance(found, dict) and "__lambdad_source__" in found}
    before = modules()
    result = action()
    return [module["__lambdad_source__"] for key, module in modules().items()
            if key not in before], result


def test_an_operation_on_operands_already_combined_so_is_not_computed_again():
    interpreter = Interpreter()
    shared = run("\\y -> let x = y * 3 in sin x + sin x + x * y + y * x", interpreter)
    text = source_of_function(shared)
    assert text.count("sin(") == 1 and len(re.findall(r"\b(t\d+ \* v0|v0 \* t\d+)", text)) == 1
    x = 0.7 * 3
    assert shared(0.7) == math.sin(x) + math.sin(x) + x * 0.7 + 0.7 * x
    # computed in one branch only: not reused after the `if`, nor in the other branch
    branches = run("\\y -> let x = y * 3 in (if y > 0 then sin x else cos x) + sin x "
                   "+ (if y > 1 then 0 else sin x)", interpreter)
    for point in (-1.0, 0.5, 2.0):
        x = point * 3
        assert branches(point) == ((math.sin(x) if point > 0 else math.cos(x)) + math.sin(x)
                                   + (0 if point > 1 else math.sin(x)))
    # instrumented runs report every operation the program writes
    events = []
    counting = Interpreter(on_event=events.append)
    assert run("\\y -> sin y + sin y", counting)(0.3) == 2 * math.sin(0.3)
    assert [event.prim.name for event in events].count("sin") == 2


def test_a_result_that_cannot_be_infinite_is_not_checked():
    interpreter = Interpreter()
    # sin of a value checked finite is finite: no check; of a parameter, checked
    known = run("\\y -> let x = y * 3 in sin x + max x 2", interpreter)
    assert len(re.findall(r"_nonfinite", source_of_function(known))) == 2  # y * 3, the sum
    unknown = run("\\y -> sin y", interpreter)
    assert "_nonfinite" in source_of_function(unknown)
    with pytest.raises(lambdad.EvalError) as caught:
        interpreter.guarded(unknown, math.inf)
    assert "sin" in str(caught.value)
    # a backpropagator's body computing `cos x` of a primal x checked where it was made
    program = lambdad.loads("def f (y : R) : R = let x = y * 3 in sin x")
    sources, gradient = sources_made_by(lambda: program.value_and_grad("f", 0.5))
    assert gradient == (math.sin(1.5), 3 * math.cos(1.5))
    sources = [text for text in sources if "_st(" in text]
    assert sources
    for text in sources:
        cosine = re.search(r"(t\d+) = _m\.cos\((\w+)\)", text)
        assert cosine and f"if {cosine.group(1)} - " not in text, text


@pytest.mark.parametrize("strategy", [name for name in STRATEGIES if STRATEGIES[name].factored])
def test_a_fold_step_computing_one_operation_twice_differentiates_alike(strategy):
    # (long enough to be batched: the step's operands are its own at every element; naive
    # would run 2^40 bodies, acc being used twice)
    program = lambdad.loads("def f (y : R) : R = fold (\\acc e -> acc * e + e * acc) y "
                            "(map (\\i -> 1 + i / 100) (range 40))")
    factor = math.prod(2 * (1 + i / 100) for i in range(40))
    value, gradient = program.value_and_grad("f", 0.5, strategy=strategy)
    assert value == pytest.approx(0.5 * factor, rel=1e-12)
    assert gradient == pytest.approx(factor, rel=1e-12)


def test_a_batched_step_records_a_lone_captured_value_and_assigns_a_lone_sum():
    """A slot whose body captures one value records that value, not a 1-tuple of it; a
    previous step's slot sent to by one statement of a step is assigned, not added to."""
    chain = lambdad.loads("def f (x : R) : R = fold (\\acc i -> acc * acc * 0.5 + sin acc) "
                          "x (range 30)")
    sources, (value, gradient) = sources_made_by(lambda: chain.value_and_grad("f", -0.5))
    text = "\n".join(sources)
    assert re.search(r"\.append\(v\d+\)", text) and re.search(r"\n +c\d+ = _r\n", text)
    assert " is None else " not in text
    expected = chain.value_and_grad("f", -0.5, strategy="factored")
    assert value == expected[0] and gradient == pytest.approx(expected[1], rel=1e-12)
    # two slots sending to the same previous slot: their sum stays a sum
    pairs = lambdad.loads("def g (x : R) : R = let (a, b) = fold (\\(a, b) i -> "
                          "(a * 0.9 + i / 100, a + b * 0.5)) (x, x) (range 30) in a + b")
    sources, (value, gradient) = sources_made_by(lambda: pairs.value_and_grad("g", 0.3))
    assert " is None else " in "\n".join(sources)
    expected = pairs.value_and_grad("g", 0.3, strategy="factored")
    assert value == expected[0] and gradient == pytest.approx(expected[1], rel=1e-12)


def test_a_batched_fold_carries_its_accumulator_as_its_leaves():
    """Inline, a batched fold's accumulator (nested pairs of scalars and backpropagators)
    goes from step to step as its leaves in locals: no step makes a pair of it.  The leaf
    at its slot (a step's record) is not carried: no step reads it."""
    program = lambdad.loads("def wide (xs : [R]) : R = fst (fold (\\(acc, prev) x -> "
                            "(acc + sin (prev * x) + x ^ 2, x)) (0, 0) xs)")
    xs = [0.1 * k - 0.7 for k in range(12)]
    sources, (value, gradient) = sources_made_by(lambda: program.value_and_grad("wide", xs))
    loops = [match for text in sources
             for match in re.finditer(r"\n( +)for v\d+ in \w+:\n((?:\1 .*\n)+)", text)]
    assert len(loops) == 1
    body = loops[0].group(2)
    assert not re.search(r"= \(\w+, \w+\)\n", body), body
    assert re.search(r"\n +(v\d+, ){2}= \w+, \w+,\n", "\n" + body), body
    expected = program.value_and_grad("wide", xs, strategy="factored")
    assert value == expected[0] and gradient == pytest.approx(expected[1], rel=1e-12)


def test_a_batched_step_capturing_parts_of_its_element_only_keeps_no_record():
    """A step whose backpropagator captures parts of the element only (a dot product's)
    records nothing: the backward loop reads them from the folded list again, or from the
    two lists of a `zip`, latest first.  One that captures what it computed still records."""
    program = lambdad.loads(
        "def dot (xs : [R]) (ys : [R]) : R = fold (\\acc (x, y) -> acc + x * y) 0 (zip xs ys)\n"
        "def pairs (ps : [R * R]) : R = fold (\\acc (x, y) -> acc + x * y * 2) 0 ps\n"
        "def f (xs : [R]) : R = dot xs [3, 2, 1] * dot [1, -1, 2] xs "
        "+ pairs (zip xs (map (\\x -> x * x) xs))\n"
        "def g (xs : [R]) : R = fold (\\acc x -> acc + sin (x * acc)) 0 xs\n"
        "def h (xs : [R]) : R = dot xs [1e10, 2, 3] * 1e300")
    xs = [0.3, -1.2, 0.7]
    for name, kept in (("f", False), ("g", True)):
        sources, (value, gradient) = sources_made_by(lambda: program.value_and_grad(name, xs))
        text = "\n".join(sources)
        assert (".append(" in text) is kept, text
        if not kept:
            assert re.search(r"for _n in range\(len\(c\d+\) - 1, -1, -1\):", text), text
            assert re.search(r"for _r in reversed\(c\d+\):", text), text
        expected = program.value_and_grad(name, xs, strategy="factored")
        assert value == expected[0] and gradient == pytest.approx(expected[1], rel=1e-12)
        assert gradient == pytest.approx(program.value_and_grad(name, xs, strategy="naive")[1],
                                         rel=1e-12)
    # forward mode over the loop (a Hessian) agrees with forward mode over forward mode
    _, _, rows = program.hessian("f", xs)
    _, _, expected_rows = program.hessian("f", xs, mode="forward-over-forward")
    assert [row == pytest.approx(want, rel=1e-12) for row, want in zip(rows, expected_rows)] \
        == [True] * len(xs)
    # an error in the loop (`y * a` of the first step) is still located at its source
    with pytest.raises(lambdad.LambdadError, match=r"`10000000000 \* 1e\+300` is inf") as info:
        program.value_and_grad("h", [1e-20, 1e-30, 1e-30])
    assert (info.value.span.line, info.value.span.col) == (1, 64)  # at `x * y`


def test_a_batched_fold_over_a_range_it_does_not_read_runs_over_the_range_itself():
    """The loop of the language, `fold (\\x k -> ...) x0 (range n)`: ←D lifts the range's
    reals to constants, which a step that never reads its element does not need.  The
    batched steps run over the range itself; the lifted list is made only where the
    steps run one by one (a range of one element)."""
    program = lambdad.loads(
        "def loop (x0 : R) (n : R) : R = fold (\\x k -> x * x * 0.5 + sin x) x0 (range n)\n"
        "def reads (x0 : R) (n : R) : R = fold (\\x k -> x * k + sin x) x0 (range n)")
    for name, lifted_in_loop in (("loop", False), ("reads", True)):
        sources, _ = sources_made_by(lambda: program.value_and_grad(name, (0.3, 6.0)))
        text = "\n".join(sources)
        batched = text.split("else:")[0]
        assert ("[(_i, _Z) for _i in " in batched) is lifted_in_loop, text
        assert text.count("= [(_i, _Z) for _i in ") == 1, text
        for n in (6.0, 1.0, 0.0):  # batched, then step by step
            value, gradient = program.value_and_grad(name, (0.3, n))
            for strategy in ("factored", "naive"):
                expected = program.value_and_grad(name, (0.3, n), strategy=strategy)
                assert value == expected[0]
                assert gradient == pytest.approx(expected[1], rel=1e-12, abs=1e-300)
            assert gradient == pytest.approx(
                program.value_and_grad(name, (0.3, n), mode="forward")[1], rel=1e-12,
                abs=1e-300)
    # forward mode over the loop (a Hessian) agrees with forward mode over forward mode
    _, _, rows = program.hessian("loop", (0.3, 6.0))
    _, _, expected_rows = program.hessian("loop", (0.3, 6.0), mode="forward-over-forward")
    assert rows == [pytest.approx(row, rel=1e-12, abs=1e-300) for row in expected_rows]


def test_forward_over_reverse_checks_the_adjoint_arithmetic_where_it_leaves_the_body():
    program = lambdad.loads("def f (x : R) : R = let y = x * x * 0.5 + sin x in y * y")
    bodies, (_, _, product) = sources_made_by(lambda: program.hvp("f", 0.3, 1.0))
    y, dy, ddy = 0.3 * 0.3 * 0.5 + math.sin(0.3), 0.3 + math.cos(0.3), 1 - math.sin(0.3)
    assert product == pytest.approx(2 * (dy * dy + y * ddy), rel=1e-12)
    bodies = [text for text in bodies if "_st(" in text and "cos(" in text]
    assert bodies
    # the linear bodies: functions of (captured, adjoint, stage)
    bodies = [function for text in bodies for function in re.split(r"\n(?=def )", text)
              if re.match(r"def \w+\(_c, \w+, _st\):", function)]
    assert bodies
    for text in bodies:
        checked = re.findall(r"if (\w+) - \1: _nonfinite", text)
        # what leaves the linear body: the staged pair's parts (or the staged value)
        leaving = set()
        for line in text.splitlines():
            staged = re.search(r"_st\(\w+, (\w+)\)", line)
            if staged:
                leaving.add(staged.group(1))
                pair = re.search(rf"{staged.group(1)} = \((\w+), (\w+)\)", text)
                if pair:
                    leaving.update(pair.groups())
        # a check in a linear body is of a primitive that does not propagate (cos, sin) or
        # of what leaves it: none between two operations of the adjoint chain
        calls = set(re.findall(r"(\w+) = _m\.", text))
        assert checked and all(atom in calls or atom in leaving for atom in checked), text


def test_traces_show_adjoints_of_constant_subexpressions():
    from lambdad.trace import trace

    prog = lambdad.loads("def f (x : R) : R = x * sin 2\n")
    rows = {row.symbol: row for row in trace(prog, "f", 1.5, mode="reverse").rows}
    assert rows["sin"].derivatives == [pytest.approx(1.5)]


# --------------------------------------------------------------------------- the driver


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_seed_first_made_during_the_backward_phase_is_read_off(strategy):
    tape = Tape()
    u = tape.backprop(lambda a: tape.seed(0)(2.0 * a))
    assert backward(tape, u(1.5), strategy) == {0: 3.0}


def test_a_backpropagator_made_during_the_backward_phase_is_an_error():
    with pytest.raises(DifferentiationError, match="created during the backward phase"):
        run("cotangent (1, seed 0) ((\\a -o (\\b -o seed 0 b) a) 1)")


def test_seeds_and_other_backpropagators_are_one_class():
    # The backward phase reads the same attributes of seeds and of bodies in turn; CPython
    # specialises such a read for one class, so a class of seeds of its own would slow it.
    interpreter = Interpreter()
    tape = Tape()
    with interpreter.using_tape(tape):
        g = run("let s = seed 2 in \\a -o s (2 * a)", interpreter)
    first, second = tape.seeds(0, 2)
    made = [first, second, tape.seed(2), g, tape.backprop(lambda a: None)]
    assert {type(b) for b in made} == {Backprop}
    assert [b.seed_index for b in made] == [0, 1, 2, None, None]
    assert backward(tape, g(1.0)) == {2: 2.0}


def test_backward_rejects_a_foreign_backpropagator_in_a_staged_body():
    mine, theirs = Tape(), Tape()
    interpreter = Interpreter()
    with interpreter.using_tape(mine):
        g = run("let s = seed 0 in \\a -o s a", interpreter)
    assert backward(mine, g(1.0)) == {0: 1.0}
    with interpreter.using_tape(theirs):
        h = interpreter.evaluate(parse_expr("\\a -o g (2 * a)", FILE, bound=("g",)), {"g": g})
    assert "_st(" in source_of(h)
    with pytest.raises(DifferentiationError, match="another differentiation"):
        backward(theirs, h(1.0))


def test_a_gradient_leaves_no_reference_cycles_and_no_tapes_behind():
    prog = lambdad.loads("def f (xs : [R]) : R = fold (\\acc x -> acc + x * x) 0 xs\n")
    point = [0.5 * k for k in range(50)]
    for strategy in STRATEGIES:  # compiling (once per form of ←D) makes cycles; runs do not
        prog.value_and_grad("f", point, strategy=strategy)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for strategy in STRATEGIES:
            prog.value_and_grad("f", point, strategy=strategy)
            assert gc.collect() == 0  # reference counting freed the whole run
    finally:
        if enabled:
            gc.enable()
    for _ in range(20):
        prog.value_and_grad("f", point)
    assert len(prog.runtime.interpreter._run_tapes) <= 1


def test_second_derivatives_leave_no_reference_cycles():
    # a backward phase over dual pairs adds them with a function of its tape: were it a
    # cycle, every product would leave its tape for the cyclic collector to find
    prog = lambdad.loads("def f (x : R) : R = x * x * sin x\n"
                         "def g (x : R) : R = grad (\\y -> grad (\\z -> z * y * y * sin z) y) x\n"
                         "def h (xs : [R]) : R = fold (\\acc x -> acc + x * sin x) 0 xs\n")
    calls = [lambda: prog.hvp("f", 0.5, 1.0),  # the prepared path, after the first
             lambda: prog.hvp("h", [0.5, 1.0, 2.0], [1.0, 0.0, 1.0]),
             lambda: prog.value_and_grad("g", 0.7), lambda: prog.hvp("g", 0.7, 1.0),
             lambda: prog.hessian("f", 0.5), lambda: prog.call("g", 0.7),
             # a pull-back keeps its run's seeds, not a tape holding them
             lambda: prog.hessian("f", 0.5, mode="reverse-over-reverse"),
             lambda: prog.vjp("h", [0.5, 1.0, 2.0])[1](1.0)]
    for call in calls:  # (compiling makes cycles; runs do not)
        call()
        call()
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for call in calls:
            call()
            assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_backward_phase_drops_the_zero_of_no_tape(strategy):
    tape = Tape()
    zero = ZERO
    u = tape.backprop(lambda a: add_cotangents(zero(a), tape.seed(0)(2.0 * a)))
    assert backward(tape, add_cotangents(zero(1.0), u(1.5)), strategy) == {0: 3.0}
    assert tape.created == 1 and tape.bodies_run == 1
    stray = Backprop.create(-1, lambda captured, a, stage: None, (), None)  # a body, but no tape
    with pytest.raises(DifferentiationError, match="another differentiation"):
        backward(tape, stray(1.0), strategy)


CAPTURING = """
def data : [R * R] = [(1, 2), (3, 4), (0.5, -1)]
def scale (x : R) : R = 2 * x
def loss (w : R) : R = fold (\\acc (x, y) -> acc + (scale w * x - y) ^ 2) 0 data
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_closure_differentiated_again_reuses_the_embedding_of_what_it_captured(
        strategy, monkeypatch):
    from lambdad.differentiate import Differentiator

    prog = lambdad.loads(CAPTURING)
    first = prog.value_and_grad("loss", 0.7, strategy=strategy, stats=True)
    embedded = []
    original = Differentiator._embedded
    monkeypatch.setattr(Differentiator, "_embedded",
                        lambda self, *args: embedded.append(args) or original(self, *args))
    again = prog.value_and_grad("loss", 0.7, strategy=strategy, stats=True)
    assert embedded == []  # the data set and `scale` were not embedded a second time
    fresh = lambdad.loads(CAPTURING).value_and_grad("loss", 0.7, strategy=strategy, stats=True)
    assert first == again == fresh  # same value, gradient and counts
    value = sum((1.4 * x - y) ** 2 for x, y in [(1, 2), (3, 4), (0.5, -1)])
    gradient = sum(2 * (1.4 * x - y) * 2 * x for x, y in [(1, 2), (3, 4), (0.5, -1)])
    assert first[0] == pytest.approx(value) and first[1] == pytest.approx(gradient)


def test_kept_images_serve_each_strategy_and_nesting_its_own_form():
    prog = lambdad.loads(CAPTURING + "def outer (w : R) : R = w * grad loss w\n")
    runs = [(strategy, name, prog.value_and_grad(name, 0.7, strategy=strategy, stats=True))
            for _ in range(2) for strategy in STRATEGIES for name in ("loss", "outer")]
    for strategy, name, result in runs:
        fresh = lambdad.loads(CAPTURING + "def outer (w : R) : R = w * grad loss w\n")
        assert result == fresh.value_and_grad(name, 0.7, strategy=strategy, stats=True)


# --------------------------------------------------------------------------- value walking


def test_map_value_rebuilds_flat_nested_and_deep_values_left_to_right():
    seen = []

    def visit(leaf):
        seen.append(leaf)
        return -leaf

    value = (1.0, [2.0, (3.0, True), [4.0]])
    rebuilt = map_value(value, lambda v: type(v) is float, visit)
    assert rebuilt == (-1.0, [-2.0, (-3.0, True), [-4.0]])
    assert seen == [1.0, 2.0, 3.0, 4.0]
    assert map_value([1.0, 2.0], lambda v: type(v) is float, lambda v: 2 * v) == [2.0, 4.0]
    assert map_value([(1.0, 0.0), (2.0, 1.0)], is_dual, lambda p: p[1]) == [0.0, 1.0]
    deep = 0.0
    for _ in range(20000):
        deep = (1.0, [deep])
    assert count_reals(deep) == 20001
    assert count_reals([1.0, 2.0, 3.0]) == 3 and count_reals([]) == 0


def test_list_points_and_structured_points_differentiate_alike():
    prog = lambdad.loads(
        "def f (xs : [R]) : R = fold (\\acc x -> acc + x * x) 0 xs\n"
        "def g (p : R * [R]) : R = let (a, xs) = p in a * f xs\n"
        "def h (xss : [[R]]) : R = fold (\\acc xs -> acc + f xs) 0 xss\n")
    assert prog.value_and_grad("f", [1, 2.0, 3]) == (14.0, [2.0, 4.0, 6.0])
    assert prog.value_and_grad("f", []) == (0.0, [])
    assert prog.value_and_grad("g", (2.0, [1.0, 3.0])) == (20.0, (10.0, [4.0, 12.0]))
    assert prog.value_and_grad("h", [[1.0], [2.0, 3.0]]) == (14.0, [[2.0], [4.0, 6.0]])
    for mode in ("forward", "reverse"):
        assert prog.grad("f", [1.0, 2.0], mode=mode) == [2.0, 4.0]


def test_point_conversion_fast_paths_keep_their_meaning():
    point = [1.0, 2.0]
    converted = _from_python(point)
    assert converted == point and converted is not point  # a copy, as before
    assert _from_python([1, 2.5]) == [1.0, 2.5] and type(_from_python([1])[0]) is float
    assert _from_python([True, 1.0]) == [True, 1.0]
    assert _from_python((1, 2, 3)) == (1.0, (2.0, 3.0))
    assert _fits([1.0, 2.0], ListT(REAL)) and _fits([], ListT(REAL))
    assert not _fits([1.0, True], ListT(REAL)) and not _fits((1.0, 2.0), ListT(REAL))
    assert _fits([(1.0, True)], ListT(PairT(REAL, BoolT())))
    assert to_python([1.0, 2.0]) == [1.0, 2.0] and to_python(2.0) == 2.0
    prog = lambdad.loads("def f (xs : [R]) : R = fold (\\acc x -> acc + x) 0 xs\n")
    with pytest.raises(UsageError, match="does not fit"):
        prog.grad("f", [1.0, True])


# --------------------------------------------------------------------------- fold


@pytest.mark.parametrize("text, value", [
    ("fold (\\acc x -> acc + x * x) 0 [1, 2, 3]", 14.0),  # no captured values
    ("let k = 2 in fold (\\acc x -> acc + k * x) 0 [1, 2, 3]", 12.0),  # captured k
    ("fold (\\(s, p) x -> (s + p * x, x)) (0, 1) [2, 3]", (8.0, 3.0)),  # a pattern first
    ("fold (\\acc -> if acc > 1 then (\\x -> acc) else (\\x -> acc + x)) 0 [1, 2, 3]", 3.0),
    ("fold max 0 [1, 5, 2]", 5.0),  # a built-in: no two-argument form
])
def test_fold_gives_the_same_with_or_without_the_two_argument_form(text, value):
    assert run(text) == value
    assert run(text, Interpreter(on_event=lambda e: None)) == value


def test_two_argument_forms_are_offered_by_short_curried_closures_only():
    from lambdad.primitives import TWO_ARGUMENTS

    closure = run("let k = 2 in \\acc x -> acc + k * x")
    both = getattr(closure.func, TWO_ARGUMENTS)
    assert both(*closure.args, 1.0, 3.0) == closure(1.0)(3.0) == 7.0
    assert not hasattr(run("\\x -> x + 1"), TWO_ARGUMENTS)
    long_body = "".join(f"let y{k} = x * {k} in " for k in range(40))
    assert not hasattr(run(f"\\x -> {long_body}\\y -> y0 + y"), TWO_ARGUMENTS)


CURRIED = """
def shift (k : R) : R -> R = let c = log k in \\x -> c + x * x
def twice (a : R) : R = shift a 3
def later (a : R) : R = shift a (log a)
def scaled (k : R) (s : R) : R -> R = let c = log k in \\x -> s * (c + x)
def thrice (a : R) : R = scaled a 2 a
"""


def test_a_call_of_two_arguments_calls_the_two_argument_form_of_a_curried_definition():
    prog = lambdad.loads(CURRIED)
    expected = math.log(2.0) + 9.0
    assert prog.call("twice", 2.0) == expected
    shift = prog.value_of("shift")  # its application to one argument builds the closure
    with Calls(shift) as applied:
        assert prog.call("twice", 2.0) == expected
    assert applied.count == 0  # the form of both arguments ran instead
    assert prog.value_and_grad("twice", 2.0) == pytest.approx((expected, 0.5), rel=1e-15)
    with Calls(shift) as applied:
        assert prog.call("later", 2.0) == math.log(2.0) + math.log(2.0) * math.log(2.0)
    assert applied.count == 1  # an argument that is computed: `shift a` first, as written
    with Calls(prog.value_of("scaled")) as applied:
        assert prog.call("thrice", 2.0) == 2.0 * (math.log(2.0) + 2.0)
    assert applied.count == 0  # `scaled a 2` by its form of both, then its closure on `a`


def test_a_call_of_two_arguments_fails_where_its_first_application_fails():
    from lambdad.errors import EvalError

    prog = lambdad.loads(CURRIED)
    for name in ("twice", "later"):
        with pytest.raises(EvalError, match="log") as caught:
            prog.call(name, -1.0)
        # in `shift`, the `log` of its first argument: `shift a` is applied before `log a`
        assert caught.value.span.line == 2


def test_errors_inside_a_fold_step_are_located_in_the_step():
    from lambdad.errors import EvalError

    text = "fold (\\acc x -> acc + log x) 0 [1, 0]"
    with pytest.raises(EvalError, match="log") as caught:
        run(text)
    assert caught.value.span is not None and caught.value.span.col == text.index("log x") + 1


def test_counts_survive_the_release_of_a_finished_tape():
    prog = lambdad.loads("def g = grad (\\x -> x * sin x + 2) 2\n")
    prog.set_strategy("factored")  # one backpropagator per operation
    prog.run_raw("g")
    stats = prog.runtime.interpreter.stats  # the in-language grad's tape, released after use
    assert (stats.created, stats.bodies_run) == (3, 3)  # `2`'s zero is not created
    tape = Tape()
    tape.seeds(0, 3)
    tape.constant()
    tape.backprop(lambda a: None)
    tape.release()
    assert tape.created == 1 and tape.stamps == 4  # the zero is on no tape


# --------------------------------------------------------------------------- compiling


def test_compiling_a_gradient_leaves_no_cyclic_garbage():
    # what code generation builds is freed by reference counting as soon as it is done
    # with, not kept until the cyclic collector runs (for a long program, a million objects)
    prog = lambdad.loads(_chain(40))
    prog.call("chain", -0.5)
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for strategy in ("factored", "fused"):
            prog.value_and_grad("chain", -0.5, strategy=strategy)
        assert gc.collect() == 0
    finally:
        if collecting:
            gc.enable()


def test_a_dropped_program_is_freed_at_once_whatever_it_computed():
    # Freed by reference counting, not by the cyclic collector (which may be off, or not
    # run for a long time in a process holding many objects).  A Hessian-vector
    # product used to leave one: the error by which it finds that it must nest, kept by the
    # driver of recursive passes, whose traceback held every frame up to the program's.
    import weakref
    collecting = gc.isenabled()
    gc.disable()
    try:
        uses = {
            "gradient": lambda p: p.value_and_grad("f", 0.5),
            "factored gradient": lambda p: p.value_and_grad("f", 0.5, strategy="factored"),
            "Hessian-vector product": lambda p: p.hvp("f", 0.5, 1.0),
            "Hessian": lambda p: p.hessian("f", 0.5),
            "nested in the program": lambda p: p.value_of("second"),
            "a run-time error": lambda p: p.value_and_grad("g", 0.0),
        }
        for use, run in uses.items():
            prog = lambdad.loads("def f (x : R) : R = x * x * sin x\n"
                                 "def g (x : R) : R = sqrt x\n"
                                 "def second : R = grad (grad f) 0.5\n")
            try:
                run(prog)
            except lambdad.LambdadError:
                pass
            dropped = weakref.ref(prog)
            del prog
            assert dropped() is None, use
    finally:
        if collecting:
            gc.enable()


def _chain(depth, result="x{k}"):
    lines = ["def chain (x0 : R) : R ="]
    for k in range(depth):
        lines.append(f"  let x{k + 1} = x{k} * x{k} * 0.5 + sin x{k} in")
    lines.append("  " + result.format(k=depth))
    return "\n".join(lines) + "\n"


def test_long_functions_are_cut_into_pieces_that_compute_the_same():
    """A body longer than a piece is cut into functions called in turn; values, gradients
    (both strategies) and located errors are those of the body in one piece."""
    from lambdad import codegen
    program = lambdad.loads(_chain(300))
    value = program.call("chain", -0.5)
    pieces = program.value_of("chain").__globals__["__lambdad_source__"]
    assert pieces.count("\ndef ") > 300 // lambdad.pieces.MAX_PIECE_LINES + 1
    x = -0.5
    for _ in range(300):
        x = x * x * 0.5 + math.sin(x)
    assert value == x
    factored = program.value_and_grad("chain", -0.5)
    fused = program.value_and_grad("chain", -0.5, strategy="fused")
    assert factored[0] == fused[0] == x and factored[1] == pytest.approx(fused[1], rel=1e-12)
    failing = lambdad.loads(_chain(300, "log (x{k} - 1)"))
    for run in (lambda: failing.call("chain", -0.5),
                lambda: failing.value_and_grad("chain", -0.5)):
        with pytest.raises(lambdad.EvalError) as error:
            run()
        assert "log" in str(error.value) and error.value.span.line == 302


def test_an_error_in_a_piece_of_a_long_fused_body_is_located_as_in_one_piece(monkeypatch):
    # The fused body of 700 bindings is cut into pieces.  Its checks are deferred: the
    # overflow of the first thing it computes (1e300 * 1e300, the last line's derivative)
    # is caught where the infinity is staged, in a later piece, and located by running the
    # body again, every piece with every check: the same report as the factored strategy's.
    from lambdad import guard
    fill = "".join(f"  let z{k + 1} = z{k} * 1.0001 in\n" for k in range(700))
    source = ("def f (x : R) : R =\n  let z0 = x in\n" + fill
              + "  let v = z700 * 1e-300 in\n  let w = v * 1e300 in\n  w * 1e300\n")
    reruns = []
    rerun = guard._run_checked
    monkeypatch.setattr(guard, "_run_checked", lambda frame: reruns.append(
        frame.f_code.co_name in frame.f_globals["__lambdad_piece_of__"]) or rerun(frame))
    errors = []
    for strategy in ("fused", "factored"):
        with pytest.raises(lambdad.EvalError) as error:
            lambdad.loads(source, "long.lam").value_and_grad("f", 1.0, strategy=strategy)
        errors.append((str(error.value), error.value.span))
    assert reruns[0]  # the fused report came from a piece
    assert errors[0] == errors[1]
    assert "1e+300 * 1e+300" in errors[0][0] and errors[0][1].line == 704


def _with_and_without_pieces(monkeypatch, source, name, point):
    """The value, and the gradients under both strategies, of ``name`` at ``point``, as
    the code cut into pieces computes them and as the same code in one piece does; and
    whether the first was cut."""
    from lambdad import codegen

    def results():
        program = lambdad.loads(source)
        texts, value = sources_made_by(lambda: program.call(name, point))
        made, grads = sources_made_by(lambda: [
            program.value_and_grad(name, point, strategy=strategy)
            for strategy in ("fused", "factored")])
        return (value, grads), texts + made

    cut, texts = results()
    monkeypatch.setattr(lambdad.pieces, "MAX_PIECE_LINES", 10 ** 9)
    whole, _ = results()
    return cut, whole, any("_o0 = _f" in text for text in texts)


def test_a_long_function_with_loops_is_cut_into_pieces_that_compute_the_same(monkeypatch):
    """A loop's targets (`for v3 in ...`) are bound where the loop is, not read from the
    pieces before it: a long function holding folds gives what it gives in one piece."""
    lines = ["def f (x0 : R) (xs : [R]) : R ="]
    lines += [f"  let x{k + 1} = x{k} * x{k} * 0.5 + sin x{k} in" for k in range(150)]
    lines += ["  let d = fold (\\acc (a, b) -> acc + a * b * x150) 0 (zip xs xs) in",
              "  let e = fold (\\acc a -> acc + a * d) 0 xs in"]
    lines += [f"  let x{k + 1} = x{k} * x{k} * 0.5 + sin x{k} + d * 0.001 in"
              for k in range(150, 300)]
    source = "\n".join(lines + ["  x300 + e"]) + "\n"
    cut, whole, was_cut = _with_and_without_pieces(
        monkeypatch, source, "f", (-0.5, [0.1 * i for i in range(12)]))
    assert was_cut and cut == whole


def test_a_batched_fold_whose_step_is_long_is_cut_into_pieces_that_compute_the_same(
        monkeypatch):
    """A fold whose step is a long straight-line region: its loop function, the body of
    the fold's backpropagator, which reads the steps it captures, is cut like any long
    function."""
    body = "".join(f"let a{k + 1} = a{k} * 0.999 + sin a{k} * x * 0.001 in "
                   for k in range(100))
    source = f"def f (xs : [R]) : R =\n  fold (\\acc x -> let a0 = acc in {body} a100) 0.5 xs\n"
    cut, whole, was_cut = _with_and_without_pieces(
        monkeypatch, source, "f", [0.1 * i for i in range(12)])
    assert was_cut and cut == whole
    value, gradient = cut[1][0]
    h = 1e-6
    shifted = [0.1 * i for i in range(12)]
    shifted[1] += h
    assert gradient[1] == pytest.approx(
        (lambdad.loads(source).call("f", shifted) - value) / h, rel=1e-4)


@pytest.mark.parametrize("strategy", ["fused", "factored"])
def test_the_frames_of_a_long_program_stay_as_small_as_a_piece(monkeypatch, strategy):
    """Values crossing between the pieces of a long function go from piece to piece in
    tuples, not through the function's locals: no generated function of a 2400-binding
    chain has a larger frame than those of a 600-binding chain, about a piece's.  (A
    frame too large for the chunk of CPython's frame stack in use costs a chunk mapped and
    unmapped per call.)"""
    from lambdad import codegen, interpreter
    made = []
    compile_term = interpreter.compile_term
    monkeypatch.setattr(interpreter, "compile_term", lambda *args, **options: made.append(
        compile_term(*args, **options)) or made[-1])

    def largest_frame(depth):
        program = lambdad.loads(_chain(depth))
        made.clear()
        value, gradient = program.value_and_grad("chain", -0.5, strategy=strategy)
        assert math.isfinite(value) and math.isfinite(gradient)
        return max(found.__code__.co_nlocals + found.__code__.co_stacksize
                   for entry, _ in made for found in entry.__globals__.values()
                   if isinstance(found, types.FunctionType))

    short, long = largest_frame(600), largest_frame(2400)
    assert long <= short < 2 * lambdad.pieces.MAX_PIECE_LINES


def test_functions_alike_share_one_compilation(monkeypatch):
    """Generated functions of the same text but for their name (locals are numbered per
    function) are compiled once; each copy has its own name and first line (errors find
    their site by line number)."""
    from lambdad import codegen
    source = ("def _f1(c0, v1):\n    t2 = (c0 / v1)\n    return t2\n"
              "def _f4(c0, v1):\n    t2 = (c0 / v1)\n    return t2\n"
              "def _f8(c0, v1):\n    t2 = (v1 / c0)\n    return t2\n")
    compiled = []
    monkeypatch.setattr(lambdad.pieces, "compile", lambda text, *rest: compiled.append(text) or
                        compile(text, *rest), raising=False)
    functions = lambdad.pieces._compiled_functions(
        source.split("\n"), [("_f1", 1, 3), ("_f4", 4, 3), ("_f8", 7, 3)], {}, "<test unit>")
    assert len(compiled) == 1 and compiled[0].count("def ") == 2
    first, second, third = (functions[name] for name in ("_f1", "_f4", "_f8"))
    assert first.__code__.co_code == second.__code__.co_code
    assert second.__name__ == "_f4"
    assert [first(6.0, 3.0), second(6.0, 2.0), third(2.0, 6.0)] == [2.0, 3.0, 3.0]
    for function, line in ((first, 2), (second, 5), (third, 8)):
        with pytest.raises(ZeroDivisionError) as error:
            function(1.0, 0.0) if function is not third else function(0.0, 1.0)
        assert error.tb.tb_next.tb_lineno == line


def test_pieces_alike_up_to_their_names_share_one_compilation(monkeypatch):
    """Pieces of a long function equal up to the numbers of their locals and of the globals
    they read are compiled once; each has its own local names (errors read operands by
    name), its own globals' values and its own first line."""
    from lambdad import codegen
    source = ("def _f1(t3, v4):\n    t5 = _k6(t3, v4)\n    return t5\n"
              "def _f7(t8, v9):\n    t10 = _k11(t8, v9)\n    return t10\n")
    compiled = []
    monkeypatch.setattr(lambdad.pieces, "compile", lambda text, *rest: compiled.append(text) or
                        compile(text, *rest), raising=False)
    namespace = {"_k6": lambda a, b: a / b, "_k11": lambda a, b: a - b}
    functions = lambdad.pieces._compiled_functions(
        source.split("\n"), [("_f1", 1, 3), ("_f7", 4, 3)], namespace, "<test unit>",
        {"_f1", "_f7"})
    assert len(compiled) == 1 and compiled[0].count("def ") == 1
    first, second = functions["_f1"], functions["_f7"]
    assert first.__code__ is not second.__code__
    assert first.__code__.co_code == second.__code__.co_code
    assert (second.__name__, second.__code__.co_varnames) == ("_f7", ("t8", "v9", "_k11", "t10"))
    assert [first(6.0, 3.0), second(6.0, 2.0)] == [2.0, 4.0]
    with pytest.raises(ZeroDivisionError) as error:
        second.__kwdefaults__["_k11"] = namespace["_k6"]
        second(1.0, 0.0)
    assert error.tb.tb_next.tb_lineno == 5


# --------------------------------------------------------------------------- API calls


@pytest.mark.parametrize("point", [(2.0, 5.0), (2, 5), (2.0, 5)])
def test_repeated_calls_with_points_of_reals_give_the_general_results(point):
    program = lambdad.load("programs/baydin.lam")
    first = [program.call("f", point), program.value_and_grad("f", point),
             program.grad("f", point)]
    for _ in range(3):
        assert [program.call("f", point), program.value_and_grad("f", point),
                program.grad("f", point)] == first
    assert first[1][0] == pytest.approx(11.652, abs=1e-3)
    assert first[1][1] == pytest.approx((5.5, 1.716), abs=1e-3)


def test_repeated_calls_with_lists_of_reals_give_the_general_results():
    program = lambdad.loads("def total (xs : [R]) : R = fold (\\acc x -> acc + x * x) 0 xs\n"
                            "def nested (xss : [[R]]) : R = fold (\\a xs -> a + length xs) 0 xss\n")
    point = [0.5, -1.0, 2.0]
    first = program.value_and_grad("total", point)
    assert first == (5.25, [1.0, -2.0, 4.0])
    for _ in range(3):
        assert program.value_and_grad("total", point) == first
        assert program.call("total", [1.0, 2.0]) == 5.0
    assert point == [0.5, -1.0, 2.0]  # the caller's list is not the runtime's
    with pytest.raises(UsageError):
        program.call("total", [1.0, math.nan])
    # An empty list fits lists of lists; a list of reals, afterwards, still does not.
    assert program.call("nested", []) == 0.0
    with pytest.raises(UsageError):
        program.call("nested", [1.0, 2.0])


def test_repeated_calls_still_refuse_bad_points():
    program = lambdad.load("programs/baydin.lam")
    program.value_and_grad("f", (2.0, 5.0))
    for bad in [(2.0, math.inf), (2.0, math.nan), (10 ** 400, 1.0), (2.0, 5.0, 1.0), 2.0]:
        with pytest.raises(UsageError):
            program.value_and_grad("f", bad)
    with pytest.raises(lambdad.EvalError):
        program.value_and_grad("f", (-2.0, 5.0))  # log of a negative real


def test_repeated_restricted_gradients_reuse_the_program_of_the_fixed_values():
    program = lambdad.load("programs/quadratic.lam")
    first = program.value_and_grad("f", (1.0, 2.0, 3.0, 4.0), wrt=["x"])
    assert first == (27.0, 10.0)
    again = [program.value_and_grad("f", (1.0, 2.0, 3.0, x), wrt=["x"]) for x in (4.0, 5.0)]
    assert again == [(27.0, 10.0), (38.0, 12.0)]
    assert len(program._derivatives._restrictions) == 1
    assert program.value_and_grad("f", (1.0, 2.0, 3.0, 4.0), wrt=["x", "a"]) == \
        (27.0, (10.0, 16.0))
    assert program.value_and_grad("f", (2.0, 2.0, 3.0, 4.0), wrt=["x"]) == (43.0, 18.0)


@pytest.mark.parametrize("body", ["zero <+> zero", "let b = (a, a) in zero"])
def test_a_linear_body_staging_nothing_compiles(body):
    program = lambdad.loads(f"def f (x : R) : R = cotangent (x, seed 0) ((\\a -o {body}) 1)")
    assert program.call("f", 2.0) == 0.0


def test_a_whole_literal_exponent_is_computed_inline_with_the_same_value_and_message():
    program = lambdad.loads("def f (x : R) : R = x ^ 2 + x ^ 3\n"
                            "def g (x : R) (y : R) : R = x ^ y + x ^ 0.5\n")
    value, gradient = program.value_and_grad("f", 1.7)
    assert (value, gradient) == (math.pow(1.7, 2.0) + math.pow(1.7, 3.0),
                                 2.0 * 1.7 + 3.0 * math.pow(1.7, 2.0))
    texts, _ = sources_made_by(lambda: program.value_and_grad("f", 1.3))
    assert texts == []  # made by the first gradient already
    f_sources, _ = sources_made_by(lambda: lambdad.loads(
        "def f (x : R) : R = x ^ 2 + x ^ 3").value_and_grad("f", 1.3))
    assert all("_m.pow(" in text for text in f_sources)
    # an exponent that is not a whole literal >= 0 may fail otherwise: the evaluation runs
    g_sources, _ = sources_made_by(lambda: program.value_and_grad("g", (1.3, 2.0)))
    assert g_sources and not any("_m.pow(" in text for text in g_sources)
    with pytest.raises(lambdad.EvalError, match=r"overflow in 1e\+200 \^ 2"):
        program.value_and_grad("f", 1e200)


@pytest.mark.parametrize("pattern, plain", [
    ("_LOCAL_OR_PARAMETER", r"\b(?:[tvc][0-9]+|_c|_st|_r0|_r1)\b"),
    ("_LOCAL_OR_NUMBERED_NAME", r"\b([tvc][0-9]+|_[fk][0-9]+)\b"),
])
def test_the_name_patterns_of_code_generation_find_what_word_boundaries_would(pattern, plain):
    import random
    fast, slow = getattr(lambdad.pieces, pattern), re.compile(plain)
    generated, _ = sources_made_by(lambda: lambdad.loads(
        "def f (x : R) : R = let y = x * x in let z = sin y * x in y * z - z ^ 2")
        .value_and_grad("f", 0.3))
    rng = random.Random(7)
    pieces = ["t", "v", "c", "_", "f", "k", "st", "r", "1", "0", "9", "a", "x", " ", "(", ".",
              "é"]
    samples = generated + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
                           for _ in range(20000)]
    for text in samples:
        assert fast.findall(text) == slow.findall(text), text
        assert fast.split(text) == slow.split(text), text


def test_a_fold_started_by_literals_batches_without_looking_at_its_start():
    source = ("def wide (xs : [R]) : R =\n"
              "  fst (fold (\\(acc, prev) x -> (acc + sin (prev * x) + x ^ 2, x)) (0, 0) xs)\n"
              "def chain (x0 : R) : R = fold (\\x k -> x * x * 0.5 + sin x) x0 (range 5)\n")
    program = lambdad.loads(source)
    point = [0.5, -0.3, 0.8, 1.1]
    texts, fused = sources_made_by(lambda: program.value_and_grad("wide", point))
    assert fused == program.value_and_grad("wide", point, strategy="factored")
    looped = [text for text in texts if "for _r in reversed(" in text]  # (the backward loop)
    assert looped and all("_batches(" not in text for text in looped)
    # the same in forward mode over reverse mode, its start a pair of dual numbers
    stepped = lambdad.loads(
        "def wide (xs : [R]) : R =\n"
        "  let step = \\(acc, prev) x -> (acc + sin (prev * x) + x ^ 2, x) in\n"
        "  fst (fold step (0, 0) xs)\n")
    direction = [1.0, -0.5, 0.25, 2.0]
    texts, (_, _, product) = sources_made_by(lambda: stepped.hvp("wide", point, direction))
    looped = [text for text in texts if "for _r in reversed(" in text]
    assert looped and all("_batches(" not in text for text in looped)
    _, _, rows = stepped.hessian("wide", point, mode="forward-over-forward")
    expected = [sum(h * v for h, v in zip(row, direction)) for row in rows]
    assert product == pytest.approx(expected, rel=1e-12)
    # a start that is a variable is looked at (in nested differentiation it may not batch)
    texts, fused = sources_made_by(lambda: program.value_and_grad("chain", 0.7))
    assert fused == program.value_and_grad("chain", 0.7, strategy="factored")
    assert any("_batches(" in text for text in texts)


@pytest.mark.parametrize("step, passes", [
    ("\\acc x -> acc + sin (x * x)", True),             # reads its element again
    ("\\acc x -> let y = exp x in acc + y * y", True),  # keeps a record of its own
    ("\\acc x -> sin x + acc", True),                   # the accumulator on the right
    ("\\acc x -> acc + 1", True),                       # nothing else: no loop at all
    ("\\acc x -> acc * 0.5 + x", False),                # scales what it sends back
    ("\\acc x -> acc + acc * x", False),                # sends back a sum
])
def test_a_batched_step_sending_back_what_reached_it_carries_nothing(step, passes):
    """A step that sends the previous step exactly the adjoint that reached it (a sum's
    accumulator): that adjoint is the same for every step, tested and copied once before
    the backward loop, and nothing is carried from step to step."""
    program = lambdad.loads(f"def f (xs : [R]) : R = fold ({step}) 0.5 xs")
    xs = [0.3, -1.2, 0.7, 0.1, 2.0]
    texts, (value, gradient) = sources_made_by(lambda: program.value_and_grad("f", xs))
    loops = [found for text in texts for found in re.findall(
        r"\ndef _f\d+\(_c, v\d+, _st\):\n    c\d+, c\d+, = _c\n    t\d+ = v\d+\n(?: .*\n)+", text)]
    assert len(loops) == 1
    carried = re.search(r"\n +(t\d+), = t\d+,\n", loops[0])
    assert (carried is None) is passes, loops[0]
    assert ("reversed(" in loops[0]) is ("+ 1" not in step), loops[0]
    for strategy in ("factored", "naive"):
        expected = program.value_and_grad("f", xs, strategy=strategy)
        assert value == expected[0] and gradient == pytest.approx(expected[1], rel=1e-12)
    _, _, rows = program.hessian("f", xs)
    _, _, expected_rows = program.hessian("f", xs, mode="forward-over-forward")
    assert [row == pytest.approx(want, rel=1e-12) for row, want in zip(rows, expected_rows)] \
        == [True] * len(xs)


def test_a_fold_over_zip_runs_over_both_lists_and_fails_as_zip_does():
    program = lambdad.loads("def dot (xs : [R]) (ys : [R]) : R =\n"
                            "  fold (\\acc (x, y) -> acc + x * y) 0 (zip xs ys)\n"
                            "def pairs (xs : [R]) : R =\n"
                            "  fold (\\acc p -> acc + fst p * snd p) 0 (zip xs xs)\n")
    for name, point in [("dot", ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0])), ("dot", ([2.0], [3.0])),
                        ("pairs", [1.5, -2.0, 0.25])]:
        texts, fused = sources_made_by(lambda: program.value_and_grad(name, point))
        assert fused == program.value_and_grad(name, point, strategy="factored")
    alone = lambdad.loads(  # (kept alive: its generated modules are looked for after)
        "def dot (xs : [R]) (ys : [R]) : R = fold (\\acc (x, y) -> acc + x * y) 0 (zip xs ys)")
    texts, _ = sources_made_by(lambda: alone.value_and_grad("dot", ([1.0, 2.0], [3.0, 4.0])))
    looped = [text for text in texts if "for _n in range(len(" in text]  # (over two lists)
    assert looped and all(re.search(r"for v\d+, v\d+ in zip\(", text) for text in looped)
    # the loop is the fold's backpropagator's body, capturing both lists and the start's
    # backpropagator, which it sends to unless it is the zero (a start of `0`'s); each
    # step sends the previous one what reached it: nothing is carried from step to step
    for text in looped:
        loop, start = re.search(r"\ndef (_f\d+)\(_c, v\d+, _st\):\n    c\d+, c\d+, (c\d+), = _c\n"
                                r"    (t\d+) = v\d+\n    if \3 is not None:\n        v\d+ = \3\n"
                                r"        for _n in range\(len\(", text).group(1, 2)
        assert f"_newbp({loop}, (" in text
        # the start `0`, lifted by ←D to `(0, \a -o zero)`, is one tuple made when compiled
        assert "(0.0, _Z)" not in text, text
        body = text[text.index(f"def {loop}("):].split("\ndef ")[0]
        assert " = None" not in body and ", = " not in body.replace(", = _c", ""), body
        assert re.search(rf"\n    if t\d+ is not None and {start} is not _Z:\n"
                         rf"        _st\({start}, t\d+\)\n", text), text
    errors = []
    for strategy in ("fused", "factored"):
        with pytest.raises(lambdad.EvalError) as caught:
            program.value_and_grad("dot", ([1.0, 2.0, 3.0], [1.0, 2.0]), strategy=strategy)
        errors.append((caught.value.message, caught.value.span))
    assert errors[0] == errors[1]
    assert "zip of lists of different lengths (3 and 2)" in errors[0][0]
    assert (errors[0][1].line, errors[0][1].col) == (2, 40)  # at `zip`
