"""The Python API raises only the documented error family: every error a caller can cause
is a ``lambdad.LambdadError``, and Python functions given as points are checked."""

import math

import pytest

import lambdad

SOURCE = """
def f x y = x * y + sin x
def h (g : R -> R) x = g x * x
def s (xs : [R]) = fold (\\a b -> a + b) 0 xs
"""


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE)


@pytest.mark.parametrize("call, expected", [
    (lambda p: p.grad("f", (10**400, 1.0)), "too large for a real"),
    (lambda p: p.call("s", [1, 2, 10**400]), "too large for a real"),
    (lambda p: p.jvp("f", (math.inf, 5.0), (1.0, 0.0)), "finite reals only"),
    (lambda p: p.grad("f", (math.nan, 5.0)), "finite reals only"),
    (lambda p: p.grad("s", [1.0, math.inf]), "finite reals only"),
    (lambda p: p.show("f", forward=True, at=(1e308 * 10, 2.0)), "finite reals only"),
    (lambda p: p.grad("f", None), "cannot use None"),
    (lambda p: p.grad("f", {}), "cannot use {}"),
    (lambda p: p.grad("f", "1,,"), "not a value"),
    (lambda p: p.set_max_steps("many"), "positive number"),
    (lambda p: p.evaluate_text(None), "must be a str"),
    (lambda p: lambdad.loads(None), "must be a str"),
    (lambda p: lambdad.loads(b"def f x = x"), "must be a str"),
    (lambda p: lambdad.loads(3), "must be a str"),
    (lambda p: lambdad.loads("def f x = x", None), "`file` must be a str"),
    (lambda p: lambdad.load(None), "needs a file name"),
    (lambda p: lambdad.loads("def main = log (0 - 1)").run(), "log"),
])
def test_every_error_a_caller_can_cause_is_a_lambdad_error(program, call, expected):
    with pytest.raises(lambdad.LambdadError) as info:
        call(program)
    assert expected in info.value.message


@pytest.mark.parametrize("function, expected", [
    (lambda x: "text", "returned 'text'"),
    (lambda x: (1.0, 2.0), "not a value of type R"),
    (lambda x: math.nan, "finite reals only"),
    (lambda x: 1 / 0, "raised ZeroDivisionError"),
    (lambda x, y: x, "raised TypeError"),
])
def test_a_python_function_given_as_a_point_has_its_results_checked(program, function,
                                                                    expected):
    with pytest.raises(lambdad.EvalError) as info:
        program.call("h", (function, 3.0))
    assert expected in info.value.message
    assert "`h`" in info.value.message and "R -> R" in info.value.message


def test_a_well_behaved_python_function_is_used_as_is(program):
    assert program.call("h", (lambda x: 2 * x, 3.0)) == 18.0
    assert program.call("h", (lambda x: 2, 3.0)) == 6.0  # an int result is a real


def test_the_error_classes_are_exported_and_documented():
    from pathlib import Path

    api = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    for name in lambdad.__all__:
        kind = getattr(lambdad, name)
        if isinstance(kind, type) and issubclass(kind, Exception):
            assert issubclass(kind, lambdad.LambdadError)
            assert f"`{name}`" in api or f"`lambdad.{name}`" in api, name


def test_a_domain_error_is_of_the_family_and_a_run_reports_it_located():
    from lambdad.primitives import PRIMITIVES, DomainError

    assert issubclass(DomainError, lambdad.EvalError) and lambdad.DomainError is DomainError
    with pytest.raises(lambdad.LambdadError):
        PRIMITIVES["log"].evaluate(-1.0)
    program = lambdad.loads("def f x = log x\ndef g xs = xs !! 3", "d.lam")
    with pytest.raises(lambdad.EvalError) as info:
        program.call("f", -1.0)
    assert (info.value.span.line, info.value.span.col) == (1, 11)
    with pytest.raises(lambdad.EvalError) as info:
        program.call("g", [1.0])
    assert info.value.span.line == 2 and "out of range" in info.value.message


# ---------------------------------------------------------------- the public API walked

import inspect

from conftest import PROGRAMS
from lambdad.parser import parse_expr
from lambdad.points import Points

WALKED = """
def f x1 x2 = log x1 + x1 * x2 - sin x2
def v (xs : [R]) = fold (\\a b -> a + b) 0 xs
def main = f 2 5
"""

# Wrong values of every kind: nothing, numbers, text, bytes, junk nested in containers,
# objects and functions that are no lambdad value, and sizes that are.
JUNK = [None, 0, -1, 10**400, 2.5, math.nan, True, "", "x", "f", "\x00", b"f", [], [None],
        [[{}]], {}, {"a": [None]}, (), (None,), (1, "x"), (None, (1, {})), object(), object,
        len, lambda *a: None, int, Exception("x"), ...]


def valid_arguments(program):
    """A valid value for each parameter name of the public API."""
    return {
        "name": "f", "entry": "main", "point": (2.0, 5.0), "direction": (1.0, 0.0),
        "text": "2", "term": parse_expr("1 + 2"), "decls": program.module.decls[-1:],
        "wrt": ["x1"], "steps": 10, "strategy": None, "mode": "reverse",
        "path": str(PROGRAMS / "baydin.lam"), "file": "walked.lam", "typing": program.typing,
        "module": program.module, "user_names": ("f",), "error": lambdad.UsageError("x"),
        "sources": None, "what": "--at", "forward": True,
    }


def public_calls():
    """(label, a function of a program giving the callable, its parameters as (name, has a
    default), whether it is a setter) for every public function of lambdad and every public
    method of Program (a property's setter included)."""
    calls = []
    for name in lambdad.__all__:
        item = getattr(lambdad, name)
        if inspect.isfunction(item):
            calls.append((name, lambda p, item=item: item, _parameters(item), False))
    calls.append(("Program", lambda p: lambdad.Program,
                  _parameters(lambdad.Program.__init__)[1:], False))
    for name, member in vars(lambdad.Program).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            if member.fset is not None:
                calls.append((f"Program.{name} =",
                              lambda p, name=name: lambda value: setattr(p, name, value),
                              [(name, False)], True))
        elif isinstance(member, staticmethod):
            calls.append((f"Program.{name}", lambda p, name=name: getattr(p, name),
                          _parameters(member.__func__), False))
        elif inspect.isfunction(member):
            calls.append((f"Program.{name}", lambda p, name=name: getattr(p, name),
                          _parameters(member)[1:], False))
    for name, member in vars(Points).items():  # a program's points: program.points
        if not name.startswith("_") and inspect.isfunction(member):
            calls.append((f"Program.points.{name}",
                          lambda p, name=name: getattr(p.points, name),
                          _parameters(member)[1:], False))
    return calls


def _parameters(function):
    return [(parameter.name, parameter.default is not inspect.Parameter.empty)
            for parameter in inspect.signature(function).parameters.values()]


PUBLIC = public_calls()


def escaped(call):
    """The exception other than a LambdadError that ``call()`` raises, or None."""
    try:
        call()
    except lambdad.LambdadError:
        return None
    except Exception as exc:  # noqa: BLE001 - what the test looks for
        return exc
    return None


def test_the_walk_covers_the_public_api():
    labels = {label for label, *_ in PUBLIC}
    assert {"load", "loads", "render", "Program", "Program.types", "Program.grad",
            "Program.hessian", "Program.jacobian", "Program.show", "Program.builtin_types",
            "Program.module ="} <= labels
    assert len(labels) > 40


@pytest.mark.parametrize("label, get, parameters, setter", PUBLIC, ids=[c[0] for c in PUBLIC])
def test_the_public_api_raises_only_lambdad_errors_on_wrong_arguments(label, get, parameters,
                                                                      setter):
    program = lambdad.loads(WALKED, "walked.lam")  # a fresh one: setters may spoil it
    valid = valid_arguments(program)
    escapes = []

    def attempt(description, *args, **kwargs):
        exc = escaped(lambda: get(program)(*args, **kwargs))
        if exc is not None:
            escapes.append(f"{label}{description}: {type(exc).__name__}: {exc}"[:300])

    for index, (name, has_default) in enumerate(parameters):
        before = [valid.get(n) for n, _ in parameters[:index]]
        for junk in JUNK:
            attempt(f"({name}={junk!r})", *before, junk)
            if not setter:
                attempt(f"({name}={junk!r} by keyword)", *before, **{name: junk})
    if not setter:
        everything = [valid.get(n) for n, _ in parameters]
        attempt("(one argument too many)", *everything, 7)
        attempt("(an unknown keyword)", *everything, nonsense=1)
        attempt("(twice the same argument)", *everything[:1], **dict(parameters[:1] and
                                                                     [(parameters[0][0], 1)]))
        attempt("(no arguments)")
    assert not escapes, "\n".join(escapes)


@pytest.mark.parametrize("call, message", [
    (lambda p: lambdad.render(None, {}), "render(error, sources): `error` must be an error of "
                                         "the lambdad family, not None"),
    (lambda p: lambdad.render(lambdad.UsageError("x"), {"f": 1}), "`sources` must be None or "
                                                                   "a mapping"),
    (lambda p: p.types(5), "Program.types(): too many positional arguments"),
    (lambda p: p.grad(["f"], (1.0, 2.0)), "Program.grad(name, point, mode, strategy, stats, "
                                          "wrt): `name` must be a str, not ['f']"),
    (lambda p: p.grad("f", (1.0, 2.0), wrt="x1"), "`wrt` must be a list or tuple of names"),
    (lambda p: p.grad(), "missing a required argument: 'name'"),
    (lambda p: p.call("f", (1.0, 2.0), at=1), "unexpected keyword argument 'at'"),
    (lambda p: p.run({}), "Program.run(entry): `entry` must be a str, not {}"),
    (lambda p: p.evaluate_term("1 + 2"), "`term` must be a term"),
])
def test_the_reported_api_misuses_are_usage_errors(program, call, message):
    with pytest.raises(lambdad.UsageError) as info:
        call(program)
    assert message in info.value.message


def test_the_pull_back_of_vjp_raises_only_lambdad_errors():
    program = lambdad.loads(WALKED, "walked.lam")
    _, pull_back = program.vjp("f", (2.0, 5.0))
    deep = 1.0
    for _ in range(5000):
        deep = [deep]
    escapes = [f"{junk!r}: {type(exc).__name__}: {exc}"[:200]
               for junk in [*JUNK, deep] if (exc := escaped(lambda: pull_back(junk)))]
    assert not escapes, "\n".join(escapes)
    with pytest.raises(lambdad.UsageError, match="the cotangent nests pairs and lists more "
                                                 "than 200 deep"):
        pull_back(deep)
    assert pull_back(1.0) == program.grad("f", (2.0, 5.0))


@pytest.mark.parametrize("point", [
    tuple([1.0] * 100_000),  # 100,000 commas, as Python data
    "[" * 1000 + "1" + "]" * 1000,
])
def test_a_deep_or_long_point_from_python_is_a_usage_error(point):
    program = lambdad.loads(WALKED, "walked.lam")
    deep = 1.0
    for _ in range(100_000):
        deep = [deep]
    for value in (point, deep):
        for call in (program.grad, program.call, program.input_names,
                     lambda name, x: program.jvp(name, x, x),
                     lambda name, x: program.show(name, forward=True, at=x)):
            with pytest.raises(lambdad.UsageError) as info:
                call("f", value)
            assert "more than 200 deep" in info.value.message


def test_a_python_function_returning_a_deep_value_is_an_eval_error(program):
    deep = 1.0
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(lambdad.EvalError, match="the value nests pairs and lists more than "
                                                "200 deep"):
        program.call("h", (lambda x: deep, 3.0))


def test_a_checked_function_calls_and_refuses_as_binding_its_signature_does():
    """edge.checked's wrapper (compiled for positional parameters: the hot path takes the
    arguments as they come) gives, for every way to call, what binding the signature gives:
    the same result with the same defaults, or a UsageError with the same message."""
    import inspect

    from lambdad import edge

    def sample(self, name: "str", point: "Any", strategy: "str | None" = None,
               stats: "bool" = False):
        return (self, name, point, strategy, stats)

    signature = inspect.signature(sample)
    label = f"{sample.__qualname__}(name, point, strategy, stats): "
    kinds = {"name": edge.KINDS["str"], "strategy": edge.KINDS["str | None"]}

    def bound(*args, **kwargs):
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError as exc:
            return label + str(exc)
        for parameter, (accepts, wanted) in kinds.items():
            if parameter in given and not accepts(given[parameter]):
                return label + f"`{parameter}` must be {wanted}, not " \
                    + edge._described(given[parameter])
        return sample(*args, **kwargs)

    def checked(*args, **kwargs):
        try:
            return door(*args, **kwargs)
        except lambdad.UsageError as exc:
            return exc.message

    door = edge.checked(sample)
    values = ["s", "f", 3, None, 1.5, ["x"]]
    calls = [((), {}), ((), {"name": "f"}), (("s",), {"name": "f", "point": 1.0}),
             (("s", "f"), {"point": 1.0, "strategy": 4}), (("s", "f", 1.0), {"stats": True}),
             (("s", "f"), {"name": "g"}), (("s", "f", 1.0), {"bogus": 1}),
             (("s", "f", 1.0, None, False, 7), {}),
             # named parameters go to their places, skipped ones take their defaults
             (("s", "f", 1.0), {"strategy": "fused"}), (("s", "f", 1.0), {"strategy": 4}),
             (("s",), {"stats": 1, "point": 2.0, "name": "g"}), (("s", "f"), {"stats": 1}),
             ((), {"self": "s", "name": "f", "point": 1.0}), (("s", "f", 1.0), {"self": 2}),
             (("s", 3), {"point": 1.0, "stats": True}), (("s", 3, 1.0), {"strategy": 4}),
             # an optional parameter named: given twice, with others, with too many
             (("s", "f", 1.0, "naive"), {"strategy": "fused"}),
             (("s", "f", 1.0), {"strategy": "fused", "stats": True}),
             (("s", "f", 1.0, "naive"), {"stats": True}), (("s", "f"), {"strategy": "fused"}),
             (("s", "f", 1.0), {"strategy": "fused", "bogus": 1}),
             (("s", "f", 1.0, None, False, 7), {"strategy": "x"})]
    for count in range(6):  # every count of positional arguments, every value at each
        for position in range(count):
            for value in values:
                args = ["s", "f", 1.0, "naive", True][:count]
                args[position] = value
                calls.append((tuple(args), {}))
    for args, kwargs in calls:
        assert checked(*args, **kwargs) == bound(*args, **kwargs), (args, kwargs)
    assert inspect.signature(door) == signature and door.__doc__ == sample.__doc__
