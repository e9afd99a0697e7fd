"""The interpreter and runtime values: every built-in, closures, runtime errors at their
spans, deep programs, the linear constructs and both backpropagation strategies, events."""

import functools
import gc
import json
import math
import sys
import time

import pytest

from lambdad.errors import EvalError, ResourceError
from lambdad.interpreter import Interpreter, compile_open, evaluate, evaluate_module
from lambdad.parser import parse_expr
from lambdad.primitives import PRIMITIVES
from lambdad.syntax import (
    App,
    Builtin,
    Const,
    Decl,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    Module,
    Pair,
    Plus,
    Prim,
    ReadOff,
    Seed,
    Var,
    Zero,
)
from lambdad.tape import (
    Backprop,
    BackpropCreated,
    BackpropRun,
    Call,
    Sum,
    Tape,
    add_cotangents,
    backward,
)
from lambdad.values import (
    PrimEvent,
    format_value,
    function_parts,
    read_off_point,
    seed_point,
    to_json,
    to_python,
)

FILE = "<test>"


def run(text, interpreter=None, **env):
    """The value of the expression ``text`` with ``env`` bound."""
    term = parse_expr(text, FILE, bound=tuple(env))
    return (interpreter or Interpreter()).evaluate(term, env)


def error_of(text, **env):
    with pytest.raises(EvalError) as caught:
        run(text, **env)
    return caught.value


def at(text, fragment):
    """1-based column of ``fragment`` in the one-line ``text``."""
    return text.index(fragment) + 1


# --------------------------------------------------------------------------- built-ins


def sample_args(primitive):
    """Arguments inside the real primitive's domain (a few evenly spaced candidates)."""
    for start in (0.5, 1.5, -0.5):
        args = tuple(start + 0.25 * i for i in range(primitive.arity))
        if primitive.domain is None or primitive.domain(*args):
            return args
    raise AssertionError(f"no sample point in the domain of {primitive.name}")


@pytest.mark.parametrize("name", [p.name for p in PRIMITIVES.values()
                                  if p.kind in ("real", "test")])
def test_each_real_and_test_primitive_evaluates_as_its_table_entry(name):
    primitive = PRIMITIVES[name]
    args = sample_args(primitive)
    expected = primitive.evaluate(*args)
    applied = Prim(name, tuple(Const(a) for a in args))
    assert evaluate(applied) == expected
    # The same primitive used as a value, applied one argument at a time.
    curried = Builtin(name)
    for a in args:
        curried = App(curried, Const(a))
    assert evaluate(curried) == expected
    f = evaluate(Builtin(name))
    for a in args:
        f = f(a)
    assert f == expected


@pytest.mark.parametrize("name", sorted(n for n, p in PRIMITIVES.items()
                                         if p.inline_at_literals is not None))
def test_an_inline_form_at_literals_computes_what_the_evaluation_computes(name):
    """Where the literal operands meet its condition, generated code computes the primitive
    by its inline form: bit for bit the value of ``evaluate``, at every non-literal operand."""
    primitive = PRIMITIVES[name]
    condition = primitive.inline_at_literals[0]
    literals = [0.0, 1.0, 2.0, 3.0, 7.0, 0.5, -1.0, -2.0]
    operands = [0.0, -0.0, 1.0, -1.0, 0.3, -2.5, 1e-200, 1e100, -1e100, 123.456]
    for position in range(primitive.arity):
        for literal in literals:
            mask = [None] * primitive.arity
            mask[position] = literal
            if not condition(*mask):
                continue
            for operand in operands:
                args = [literal if i == position else operand for i in range(primitive.arity)]
                if primitive.arity > 2:  # (one operand for all the others)
                    pytest.skip("written for binary primitives")
                try:
                    expected = primitive.evaluate(*args)
                except Exception:
                    continue
                # the other operands are parameters: unknown when the code is generated
                function = evaluate(Lam("a", Prim(name, tuple(
                    Const(literal) if i == position else Var("a")
                    for i in range(primitive.arity)))))
                got = function(operand)
                assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


@pytest.mark.parametrize("text, expected", [
    ("1 + 2 * 3", 7.0),
    ("2 ^ 10", 1024.0),
    ("-2 ^ 2", -4.0),
    ("(0 - 8) ^ 2", 64.0),
    ("10 / 4 - 1", 1.5),
    ("sigmoid 0", 0.5),
    ("relu (0 - 3) + relu 3", 3.0),
    ("abs (0 - 2.5)", 2.5),
    ("max 3 4 + min 3 4", 7.0),
    ("not (1 < 2)", False),
    ("1 <= 1 && 2 >= 3", False),
    ("1 == 1 || 1 / 0 > 0", True),
    ("1 != 1", False),
    ("fst (1, true)", 1.0),
    ("snd (1, true)", True),
    ("map (\\x -> x * x) [1, 2, 3]", [1.0, 4.0, 9.0]),
    ("map sin []", []),
    ("fold (\\acc x -> acc - x) 10 [1, 2, 3]", 4.0),
    ("fold (\\acc x -> x :: acc) [] [1]" if False else "fold (\\acc x -> (x, acc)) (0, 0) [1, 2]",
     (2.0, (1.0, (0.0, 0.0)))),
    ("zip [1, 2] [true, false]", [(1.0, True), (2.0, False)]),
    ("length [1, 2, 3]", 3.0),
    ("range 3", [0.0, 1.0, 2.0]),
    ("range 0", []),
    ("map fst (zip (range 2) [5, 6])", [0.0, 1.0]),
])
def test_builtins_in_programs(text, expected):
    value = run(text)
    assert value == expected
    assert type(value) is type(expected)


def test_reals_are_always_floats():
    assert all(type(v) is float for v in run("(length [1], (range 2, 3))")[1][0])
    assert type(run("length []")) is float


def test_logic_and_structural_builtins_as_values():
    assert run("map not [true, false]") == [False, True]
    assert run("map fst [(1, 2), (3, 4)]") == [1.0, 3.0]
    assert run("(fold (\\a x -> a + x)) 0 [1, 2]") == 3.0
    assert run("let z = zip [1] in z [2]") == [(1.0, 2.0)]
    assert run("map (max 3) [1, 5]") == [3.0, 5.0]


def test_builtin_values_expose_their_parts():
    partial = run("max 3")
    parts = function_parts(partial)
    assert (parts.builtin, parts.args, parts.lam) == ("max", (3.0,), None)
    assert partial(5.0) == 5.0
    assert function_parts(run("sin")).args == ()


# --------------------------------------------------------------------------- functions


def test_closures_and_partial_application():
    assert run("let add x y = x + y in let inc = add 1 in (inc 2, add 10 20)") == (3.0, 30.0)
    assert run("let k = 5 in let f = \\x -> x * k in map f [1, 2]") == [5.0, 10.0]
    assert run("let compose f g x = f (g x) in compose sin cos 0") == math.sin(1.0)
    assert run("(\\(a, b) -> a - b) (5, 3)") == 2.0


def test_let_polymorphism():
    assert run("let id = \\x -> x in (id 1, id true)") == (1.0, True)
    assert run("let twice f x = f (f x) in (twice (\\x -> x + 1) 0, twice not true)") == (2.0, True)


def test_closures_expose_lambda_and_captured_values():
    f = run("let k = 2 in let j = true in \\x -> if j then x * k else x")
    parts = function_parts(f)
    assert isinstance(parts.lam, Lam) and parts.lam.param == "x"
    assert parts.captured == {"k": 2.0, "j": True}
    g = run("\\x -> x")
    assert function_parts(g).captured == {}
    inner = run("(\\a -> \\b -> a + b) 4")
    assert function_parts(inner).captured == {"a": 4.0}
    assert inner(1.0) == 5.0
    assert function_parts(len) is None


def test_if_evaluates_only_the_branch_taken():
    assert run("if 1 < 2 then 1 else log (0 - 1)") == 1.0
    assert run("if 1 > 2 then 1 / 0 else 7") == 7.0


def test_pairs_taken_apart_in_some_branches_only():
    # Unpacking reuse and dead-tuple removal must respect which branch ran.
    f = run("\\p -> (if fst p < 0 then (let (a, b) = p in a) else 0, let (a, b) = p in b)")
    assert f((1.0, 2.0)) == (0.0, 2.0) and f((-1.0, 2.0)) == (-1.0, 2.0)
    g = run("\\x -> let p = (x, x + 1) in if x > 0 then (let (a, b) = p in b) else fst p")
    assert g(1.0) == 2.0 and g(-1.0) == -1.0


def test_identifiers_never_clash_with_generated_names():
    names = ["x'", "None", "class", "_rt", "_m", "t0", "v1", "c2", "_f3", "_k4", "lambda"]
    term = Const(0.0)
    for i, name in enumerate(names):
        term = Prim("add", (term, Var(name)))
    for i, name in reversed(list(enumerate(names))):
        term = Let(name, Const(float(i)), term)
    assert evaluate(term) == float(sum(range(len(names))))
    f = evaluate(Lam("x'", Lam("x''", Prim("sub", (Var("x'"), Var("x''"))))))
    assert f(5.0)(2.0) == 3.0


def test_generated_code_holds_no_user_text():
    interpreter = Interpreter()
    term = parse_expr("let weird_name' = 2 in \\secret -> secret * weird_name'", FILE)
    f = interpreter.evaluate(term)
    source = f.func.__globals__["__lambdad_source__"]
    assert "weird_name" not in source and "secret" not in source


def test_free_variables_come_from_the_environment():
    assert run("x + y", x=1.0, y=2.0) == 3.0
    term = parse_expr("x + 1", FILE, bound=("x",))
    with pytest.raises(EvalError, match="unbound variable `x`"):
        evaluate(term, {})


def test_compile_open_takes_values_in_the_order_given():
    term = parse_expr("a - b", FILE, bound=("a", "b"))
    f = compile_open(term, ("b", "a", "unused"))
    assert f(1.0, 10.0, None) == 9.0
    with pytest.raises(EvalError, match="unbound variable `a`"):
        compile_open(term, ("b",))


def test_compiled_code_is_cached_per_term():
    interpreter = Interpreter()
    term = parse_expr("\\x -> x + 1", FILE)
    first = interpreter.evaluate(term)
    second = interpreter.evaluate(term)
    assert first is second  # the same lifted function, no recompilation


def test_the_compiled_code_cache_is_bounded(monkeypatch):
    import lambdad.interpreter as interpreter_module

    monkeypatch.setattr(interpreter_module, "_CACHE_SIZE", 2)
    interpreter = Interpreter()
    terms = [parse_expr(f"{i} + 1", FILE) for i in range(3)]
    assert [interpreter.evaluate(t) for t in terms] == [1.0, 2.0, 3.0]
    assert len(interpreter._compiled) == 2
    assert interpreter.evaluate(terms[0]) == 1.0  # compiled again


def test_modules_evaluate_in_order_up_to_a_name():
    module = Module((
        Decl("a", Const(2.0)),
        Decl("f", Lam("x", Prim("mul", (Var("x"), Var("a"))))),
        Decl("b", App(Var("f"), Const(5.0))),
        Decl("boom", Prim("div", (Const(1.0), Const(0.0)))),
    ))
    values = evaluate_module(module, upto="b")
    assert values["b"] == 10.0 and "boom" not in values
    with pytest.raises(EvalError, match="division by zero"):
        evaluate_module(module)
    more = evaluate_module(Module((Decl("c", Prim("add", (Var("b"), Var("a")))),)), env=values)
    assert more["c"] == 12.0 and more["a"] == 2.0


# --------------------------------------------------------------------------- runtime errors


@pytest.mark.parametrize("text, culprit, message", [
    ("let y = 2 in 1 + y / 0", "y / 0", "division by zero (2 / 0)"),
    ("1 + log (0 - 1)", "log (0 - 1)", "log of a non-positive number (-1)"),
    ("sqrt (0 - 4)", "sqrt (0 - 4)", "sqrt of a negative number (-4)"),
    ("zip [1, 2] [3]", "zip [1, 2] [3]", "zip of lists of different lengths (2 and 1)"),
    ("range 2.5", "range 2.5", "range needs a non-negative integer, got 2.5"),
    ("length (range (0 - 1))", "range (0 - 1)", "range needs a non-negative integer, got -1"),
    ("(0 - 2) ^ 0.5", "(0 - 2) ^ 0.5", "negative base"),
    ("exp 1000", "exp 1000", "overflow in exp 1000"),
    ("let y = 1e200 in 1 + y ^ 2", "y ^ 2", "overflow in 1e+200 ^ 2"),
    ("sin (exp 700 * exp 700)", "exp 700 * exp 700", "is inf: an overflow"),
    ("map (\\x -> 2 * log x) [1, 0]", "log x", "log of a non-positive number (0)"),
    ("map log [1, 0]", "log", "log of a non-positive number (0)"),
    ("(map (\\x -> sqrt x)) [0 - 1]", "sqrt x", "sqrt of a negative number (-1)"),
    ("let m = fold in m (\\a x -> a / x) 1 [0]", "a / x", "division by zero (1 / 0)"),
    ("(max 1) (sqrt (0 - 1))", "sqrt (0 - 1)", "sqrt of a negative number"),
])
def test_runtime_errors_name_the_operation_at_its_span(text, culprit, message):
    error = error_of(text)
    assert message in error.message
    assert (error.span.file, error.span.line, error.span.col) == (FILE, 1, at(text, culprit))


def test_errors_inside_closures_called_later_are_located():
    interpreter = Interpreter()
    f = run("\\x -> 1 / x", interpreter)
    with pytest.raises(EvalError) as caught:
        interpreter.apply(f, 0.0)
    assert caught.value.span.col == at("\\x -> 1 / x", "1 / x")


def test_missing_ad_hook_is_an_error_at_the_call():
    text = "grad (\\x -> x * x) 3"
    error = error_of(text)
    assert error.message == "`grad` is not available here"
    assert error.span.col == 1


def test_ad_hooks_receive_the_arguments():
    calls = []

    def grad(f, x):
        calls.append(x)
        return f(x) * 10.0

    interpreter = Interpreter(ad_hooks={"grad": grad})
    assert run("grad (\\x -> x + 1) 2", interpreter) == 30.0
    assert run("map (grad (\\x -> x)) [1, 2]", interpreter) == [10.0, 20.0]
    assert calls == [2.0, 1.0, 2.0]


# --------------------------------------------------------------------------- deep programs


def test_deeply_nested_arithmetic():
    term = Const(0.0)
    for _ in range(5000):
        term = Prim("add", (Const(1.0), term))
    assert evaluate(term) == 5000.0


def test_long_let_chain():
    body = Var("x3000")
    for i in range(3000, 0, -1):
        body = Let(f"x{i}", Prim("add", (Var(f"x{i - 1}"), Const(1.0))), body)
    assert evaluate(Let("x0", Const(0.0), body)) == 3000.0


def test_deeply_nested_ifs_and_lambdas():
    term = Const(0.0)
    for i in range(2000):
        term = If(Prim("lt", (Const(float(i)), Const(-1.0))), Const(-1.0),
                  Prim("add", (term, Const(1.0))))
    assert evaluate(term) == 2000.0
    body = Var("x0")
    for i in range(2000, 0, -1):
        body = App(Lam(f"x{i}", Prim("add", (body, Var(f"x{i}")))), Const(1.0))
    assert evaluate(Let("x0", Const(0.0), body)) == 2000.0


def test_fold_over_a_million_elements():
    start = time.perf_counter()
    assert run("fold (\\acc x -> acc + x) 0 (range 1000000)") == 499999500000.0
    assert time.perf_counter() - start < 20  # seconds; typically well under 1


def test_chain_of_definitions_each_calling_the_previous():
    decls = [Decl("f0", Lam("x", Var("x")))]
    for i in range(1, 3001):
        decls.append(Decl(f"f{i}", Lam("x", Prim("add", (App(Var(f"f{i - 1}"), Var("x")),
                                                          Const(1.0))))))
    decls.append(Decl("main", App(Var("f3000"), Const(0.0))))
    limit = sys.getrecursionlimit()
    assert evaluate_module(Module(tuple(decls)))["main"] == 3000.0
    assert sys.getrecursionlimit() == limit and gc.isenabled()


def test_runaway_call_depth_is_a_resource_error():
    # A closure chain built at run time by fold: calling it nests one call per element.
    text = "fold (\\f _ -> \\x -> f x + 1) (\\x -> x) (range n) 0"
    assert run(text, n=5000.0) == 5000.0
    with pytest.raises(ResourceError, match="too deeply"):
        run(text, n=100000.0)


# --------------------------------------------------------------------------- linear constructs

SQUARE = ("let p = (3, seed 0) in let (x, x_) = p in "
          "let (y, y_) = (x * x, \\a -o x_ (x * a) <+> x_ (x * a)) in (y, cotangent p (y_ 1))")


def test_hand_written_backpropagation_of_a_square_reads_off_2x():
    assert run(SQUARE) == (9.0, 6.0)
    assert run(SQUARE, Interpreter(strategy="naive")) == (9.0, 6.0)


def test_read_off_rebuilds_the_point_shape():
    text = ("let p = ((2, seed 0), [(5, seed 1), (7, seed 2)], true) in "
            "let ((a, a_), xs, _) = p in "
            "cotangent p (a_ 10 <+> fold (\\acc q -> let (r, r_) = q in acc <+> r_ r) zero xs)")
    assert run(text) == (10.0, ([5.0, 7.0], True))
    assert run("let p = (1, seed 0) in cotangent p zero") == 0.0


def doubling_chain(n):
    lines = ["let p = (1, seed 0) in let x0 = p in"]
    for k in range(1, n + 1):
        lines.append(f"let x{k} = let (v, v_) = x{k - 1} in (v + v, \\a -o v_ a <+> v_ a) in")
    lines.append(f"let (r, r_) = x{n} in (r, cotangent p (r_ 1))")
    return parse_expr("\n".join(lines), FILE)


@pytest.mark.parametrize("strategy, bodies", [("naive", 2 ** 10 - 1), ("factored", 10)])
def test_doubling_chain_costs_by_strategy(strategy, bodies):
    events = []
    interpreter = Interpreter(strategy=strategy)
    assert interpreter.evaluate(doubling_chain(10)) == (1024.0, 1024.0)
    assert interpreter.stats.created == 10
    assert interpreter.stats.bodies_run == bodies
    assert str(interpreter.stats) == ("backpropagators created: 10\n"
                                      f"backpropagator bodies run: {bodies}")
    traced = Interpreter(strategy=strategy, on_event=events.append)
    assert traced.evaluate(doubling_chain(10)) == (1024.0, 1024.0)
    created = [e.stamp for e in events if isinstance(e, BackpropCreated)]
    ran = [e.stamp for e in events if isinstance(e, BackpropRun)]
    assert created == sorted(created) and len(set(created)) == 10
    assert len(ran) == bodies
    if strategy == "factored":
        assert ran == sorted(created, reverse=True)  # largest stamp first, each once
        runs = [e for e in events if isinstance(e, BackpropRun)]
        assert [e.cotangent for e in runs] == [2.0 ** i for i in range(10)]


def test_factored_backward_is_linear_on_a_long_doubling_chain():
    interpreter = Interpreter()
    result = interpreter.evaluate(doubling_chain(400))
    assert result == (2.0 ** 400, 2.0 ** 400)
    assert interpreter.stats.bodies_run == 400


def test_applying_a_backpropagator_stages_a_call_as_data():
    call = run("seed 0 2")
    assert isinstance(call, Call) and call.cotangent == 2.0 and call.backprop.seed_index == 0
    through_polymorphic = run("let app = \\f x -> f x in app (seed 1) 3")
    assert isinstance(through_polymorphic, Call) and through_polymorphic.cotangent == 3.0
    assert run("zero") is None
    assert run("zero <+> seed 0 1").cotangent == 1.0
    assert isinstance(run("seed 0 1 <+> seed 0 2"), Sum)


def test_seeds_are_shared_and_stamps_increase_within_a_run():
    first, (again, (other, bp)) = run("(seed 0, seed 0, seed 1, \\a -o seed 0 a)")
    assert first is again and first is not other
    assert first.stamp < other.stamp < bp.stamp
    assert bp.run(2.0).cotangent == 2.0  # the staged call, returned as data


def test_backward_directly_with_both_strategies():
    tape = Tape()
    x = tape.seed(0)
    y = tape.seed(1)
    u = tape.backprop(lambda a: add_cotangents(x(2.0 * a), y(a)))
    v = tape.backprop(lambda a: add_cotangents(u(a), u(3.0 * a)))
    assert [x.stamp, y.stamp, u.stamp, v.stamp] == [0, 1, 2, 3] and tape.created == 2
    assert backward(tape, v(1.0), "factored") == {0: 8.0, 1: 4.0}
    assert tape.bodies_run == 2
    assert backward(tape, v(1.0), "naive") == {0: 8.0, 1: 4.0}
    assert tape.bodies_run == 2 + 3
    assert backward(tape, tape.constant()(5.0)) == {}


def test_backward_rejects_backpropagators_of_another_tape():
    from lambdad.errors import DifferentiationError

    mine, theirs = Tape(), Tape()
    with pytest.raises(DifferentiationError):
        backward(mine, theirs.seed(0)(1.0))


def test_seed_point_and_read_off_point_round_trip_shapes():
    tape = Tape()
    point = ((1.0, [2.0, 3.0]), (True, 4.0))
    seeded, count = seed_point(point, tape)
    assert count == 4
    assert seeded[0][1][1][1].seed_index == 2
    assert read_off_point(seeded, {0: 10.0, 3: 40.0}) == ((10.0, [0.0, 0.0]), (True, 40.0))


def test_using_tape_swaps_the_current_tape():
    interpreter = Interpreter()
    tape = Tape()
    term = parse_expr("(seed 0, \\a -o zero)", FILE)
    with interpreter.using_tape(tape):
        seed, bp = interpreter.evaluate(term)
    # `\a -o zero` is the tape's shared zero backpropagator, not counted as created
    assert seed.tape is tape and bp is tape.constant() and tape.created == 0
    outside, _ = interpreter.evaluate(term)
    assert outside.tape is not tape


# --------------------------------------------------------------------------- events and limits


def test_prim_events_report_each_operation_in_order():
    events = []
    interpreter = Interpreter(on_event=events.append)
    text = "let x = 2 in log x + x * 5"
    assert run(text, interpreter) == math.log(2.0) + 10.0
    prims = [e for e in events if isinstance(e, PrimEvent)]
    assert [e.prim.name for e in prims] == ["log", "mul", "add"]
    assert prims[1].args == (2.0, 5.0) and prims[1].result == 10.0
    assert prims[0].span.col == at(text, "log x")
    assert prims[0].term.op == prims[0].prim.name


def test_builtin_values_report_events_too():
    events = []
    run("map sin [1, 2]", Interpreter(on_event=events.append))
    assert [e.prim.name for e in events] == ["sin", "sin", "map"]


def test_the_plain_and_instrumented_variants_are_cached_apart():
    interpreter = Interpreter()
    term = parse_expr("\\x -> sin x", FILE)
    plain = interpreter.evaluate(term)
    events = []
    interpreter.on_event = events.append
    traced = interpreter.evaluate(term)
    assert traced is not plain
    traced(1.0)
    plain(1.0)
    assert len(events) == 1
    assert "_ev" not in plain.__globals__["__lambdad_source__"]


def test_max_steps_stops_a_run():
    interpreter = Interpreter(max_steps=100)
    assert run("fold (\\a x -> a + x) 0 (range 10)", interpreter) == 45.0
    with pytest.raises(ResourceError, match="stopped after 100 steps"):
        run("fold (\\a x -> a + x) 0 (range 1000)", interpreter)


def test_timeout_stops_a_run():
    interpreter = Interpreter(timeout=0.01)
    with pytest.raises(ResourceError, match="stopped after 0.01 seconds"):
        run("fold (\\a x -> a + sin x) 0 (range 1000000)", interpreter)


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("value, text", [
    (27.0, "27"),
    (5.5, "5.5"),
    (-0.75, "-0.75"),
    (1e-05, "1e-05"),
    (-0.0, "-0"),
    (float("nan"), "nan"),
    (float("inf"), "inf"),
    (float("-inf"), "-inf"),
    ((1.0, 2.0), "(1, 2)"),
    ((11.652071455223084, (5.5, 1.7163378145367738)),
     "(11.652071455223084, (5.5, 1.7163378145367738))"),
    ((1.0, 2.0, 3.0), "(1, 2, 3)"),  # a triple as values.written gives it
    ([1.0, 2.0], "[1, 2]"),
    ([], "[]"),
    ((True, [False]), "(true, [false])"),
    (len, "<function>"),
])
def test_format_value(value, text):
    assert format_value(value) == text


def test_format_value_of_runtime_objects():
    assert format_value(run("\\x -> x")) == "<function>"
    assert format_value(run("max 1")) == "<function>"
    assert format_value(Backprop.create(7, None, (), None)) == "<backpropagator #7>"


def test_deep_and_long_values_print_and_convert():
    value = left = 0.0
    for _ in range(20000):
        value, left = (1.0, value), (left, 1.0)
    assert format_value(value).count("(") == 20000  # pairs nested 20000 deep
    assert format_value(value).count(",") == 20000
    assert format_value(left).count("(") == 20000
    assert format_value(tuple([1.0] * 20001)).count("(") == 1  # a 20001-tuple as written
    assert format_value(to_python(value)) == format_value(value)
    assert format_value(to_python(left)) == format_value(left)
    assert len(to_json([1.5] * 100000)) == 100000


def test_to_json_and_to_python():
    value = (1.0, ([2.5, float("inf")], (True, float("nan"))))
    assert to_json(value) == [1.0, [[2.5, "inf"], [True, "nan"]]]  # the nesting kept
    assert to_json((1.0, [2.5], True)) == [1.0, [2.5], True]  # a triple as written
    assert json.loads(json.dumps(to_json(value))) == to_json(value)
    assert to_python(value)[1][0] == [2.5, float("inf")]
    assert to_json(run("\\x -> x")) == "<function>"


def test_partials_are_plain_functools_partials():
    f = run("let k = 3 in \\x -> x + k")
    assert isinstance(f, functools.partial) and f(1.0) == 4.0


def test_a_cotangent_sent_once_is_the_adjoint_itself():
    # (linear factoring adds what a backpropagator receives; a single array sent is not
    # added to a zero, which would copy it)
    import numpy as np

    tape = Tape()
    x = tape.seed(0)
    sent = np.array([1.0, -2.0, 3.0])
    u = tape.backprop(lambda a: x(sent * a))
    adjoints = backward(tape, u(1.0), "factored")
    assert np.array_equal(adjoints[0], sent)
    both = tape.backprop(lambda a: add_cotangents(x(sent), x(sent)))
    assert np.array_equal(backward(tape, both(1.0), "factored")[0], 2 * sent)
    once = tape.backprop(lambda a: x(sent))
    assert backward(tape, once(1.0), "factored")[0] is sent
