"""lambdad leaves the process as it found it: after any call returns — done, failed with an
error, or interrupted by a KeyboardInterrupt — the cyclic collector is on or off as before,
nothing is left frozen out of it, and the recursion limit and the stack's resource limit
are what they were (STYLE 23).  Runs raise the limits while they last, for deep programs."""

import gc
import resource
import sys

import pytest

import lambdad
from lambdad import LambdadError, pipeline

SOURCE = """\
def f (x : R) (y : R) : R = x * sin y + log x * y
def g (x : R) : R = sqrt x
def total (n : R) : R = fold (\\acc i -> acc + i * 0.5) 0 (range n)
def main = f 0.5 2
def nested = grad (\\x -> grad (\\y -> x * y * y) x) 3
"""


def state():
    """What a call must leave as it found it."""
    return (gc.isenabled(), gc.get_freeze_count(), gc.get_threshold(),
            sys.getrecursionlimit(), resource.getrlimit(resource.RLIMIT_STACK))


# Each call once: on a program, the names of its run-time error and of its success.
CALLS = {
    "run": lambda p: p.run(),
    "run nested": lambda p: p.run("nested"),
    "call": lambda p: p.call("f", (0.5, 2.0)),
    "call fold": lambda p: p.call("total", 50.0),
    "grad": lambda p: p.grad("f", (0.5, 2.0)),
    "grad factored": lambda p: p.grad("f", (0.5, 2.0), strategy="factored"),
    "forward grad": lambda p: p.grad("f", (0.5, 2.0), mode="forward"),
    "hessian": lambda p: p.hessian("f", (0.5, 2.0)),
    "hvp": lambda p: p.hvp("f", (0.5, 2.0), (1.0, 0.0)),
    "jvp": lambda p: p.jvp("f", (0.5, 2.0), (1.0, 0.0)),
    "vjp": lambda p: p.vjp("f", (0.5, 2.0))[1](1.0),
}
FAILING = {
    "call": lambda p: p.call("g", -1.0),
    "grad": lambda p: p.grad("g", 0.0),
    "grad of a domain error": lambda p: p.grad("f", (-0.5, 2.0)),
    "hessian": lambda p: p.hessian("g", -1.0),
    "hvp": lambda p: p.hvp("g", -1.0, 1.0),
    "an unknown name": lambda p: p.grad("nothing", 1.0),
}


@pytest.fixture(params=["collector on", "collector off", "objects frozen"])
def caller(request):
    """The caller's process: its collector on, off, or on with objects frozen (a server
    before it forks); put back after the test."""
    enabled = gc.isenabled()
    if request.param == "collector off":
        gc.disable()
    if request.param == "objects frozen":
        gc.freeze()
    try:
        yield request.param
    finally:
        if request.param == "objects frozen":
            gc.unfreeze()
        if enabled:
            gc.enable()


def test_loading_leaves_the_process_as_it_found_it(caller):
    before = state()
    lambdad.loads(SOURCE)
    assert state() == before
    with pytest.raises(LambdadError):
        lambdad.loads("def f (x : R) : R = x +\n")
    assert state() == before
    with pytest.raises(LambdadError):
        lambdad.loads("def f (x : R) : R = x true\n")
    assert state() == before


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
def test_a_call_that_returns_leaves_the_process_as_it_found_it(call, caller):
    program = lambdad.loads(SOURCE)
    before = state()
    for _ in range(2):  # the first run compiles; the next may take a prepared path
        CALLS[call](program)
        assert state() == before


@pytest.mark.parametrize("call", FAILING, ids=list(FAILING))
def test_a_call_that_fails_leaves_the_process_as_it_found_it(call, caller):
    program = lambdad.loads(SOURCE)
    before = state()
    for _ in range(2):
        with pytest.raises(LambdadError):
            FAILING[call](program)
        assert state() == before


class Interrupt:
    """An event hook that raises KeyboardInterrupt at the ``at``-th primitive evaluation,
    as a Ctrl-C there would; it notes the limits as they are then."""

    def __init__(self, at):
        self.at = at
        self.seen = 0
        self.limits = None

    def __call__(self, event):
        self.seen += 1
        if self.seen == self.at:
            self.limits = (sys.getrecursionlimit(), resource.getrlimit(resource.RLIMIT_STACK),
                           gc.isenabled())
            raise KeyboardInterrupt


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
def test_a_call_interrupted_by_ctrl_c_leaves_the_process_as_it_found_it(call, caller):
    program = lambdad.loads(SOURCE)
    before = state()
    hook = Interrupt(at=2)
    program.runtime.interpreter.on_event = hook
    with pytest.raises(KeyboardInterrupt):
        CALLS[call](program)
    assert state() == before
    # the run had raised the limits and paused the collector, and put them back
    recursion, _, collecting = hook.limits
    assert recursion > before[3] and not collecting
    program.runtime.interpreter.on_event = None
    CALLS[call](program)  # and the program still works
    assert state() == before


def test_loading_interrupted_by_ctrl_c_leaves_the_process_as_it_found_it(caller, monkeypatch):
    from lambdad import typecheck
    seen = []

    def interrupted(*args, **kwargs):
        seen.append(gc.isenabled())
        raise KeyboardInterrupt

    monkeypatch.setattr(typecheck.ModuleTyping, "__init__", interrupted)
    monkeypatch.setattr(pipeline, "infer_module", interrupted)
    before = state()
    with pytest.raises(KeyboardInterrupt):
        lambdad.loads(SOURCE)
    assert seen == [False]  # loading pauses the collector, and resumes it as it was
    assert state() == before


def test_a_run_nesting_calls_deeply_raises_the_limits_only_while_it_lasts():
    # one Python call per element of the list: deeper than the recursion limit outside runs
    program = lambdad.loads("def deep (n : R) : R = "
                            "fold (\\f _ -> \\x -> f x + 1) (\\x -> x) (range n) 0\n")
    before = state()
    depth = 3 * sys.getrecursionlimit()
    assert program.call("deep", float(depth)) == depth
    assert program.grad("deep", float(depth)) == 0.0
    assert state() == before


def test_a_run_exhausting_the_raised_limits_fails_and_leaves_them_as_found():
    program = lambdad.loads("def deep (n : R) : R = "
                            "fold (\\f _ -> \\x -> f x + 1) (\\x -> x) (range n) 0\n")
    before = state()
    with pytest.raises(lambdad.ResourceError, match="too deeply"):
        program.call("deep", 100000.0)
    assert state() == before
    assert program.call("deep", 10.0) == 10.0


def test_the_collector_is_paused_while_programs_are_loaded_compiled_and_transformed(
        monkeypatch):
    """A large program's load and first gradient make many long-lived objects; the
    collector, scanning them in the middle of a call, cost it half a second at 10^4
    bindings.  Each stage that makes them runs with the collector paused."""
    from lambdad import differentiate, interpreter
    seen = []

    def watched(module, name):
        real = getattr(module, name)

        def stage(*args, **kwargs):
            seen.append((name, gc.isenabled()))
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, stage)

    watched(pipeline, "gather")  # reads the program's files
    watched(pipeline, "link")  # desugars their declarations into one module
    watched(interpreter, "compile_term")
    watched(differentiate.Differentiator, "transform_function")
    assert gc.isenabled()
    program = lambdad.loads(SOURCE)
    for call in CALLS.values():
        call(program)
    assert {name for name, _ in seen} == {"gather", "link", "compile_term",
                                          "transform_function"}
    assert [name for name, collecting in seen if collecting] == []
    assert gc.isenabled()


def _calls_and_globals():
    """(module file name, dotted name called) for every call of ``gc.*``, ``sys.*`` and
    ``resource.*`` in lambdad's modules, and the modules with a ``global`` statement."""
    import ast
    from pathlib import Path
    calls, rebinding = set(), set()
    for path in sorted(Path(lambdad.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Global):
                rebinding.add(path.name)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in ("gc", "sys", "resource")):
                calls.add((path.name, f"{node.func.value.id}.{node.func.attr}"))
    return calls, rebinding


def test_only_the_guard_changes_limits_and_nothing_freezes_or_tunes_the_collector():
    calls, rebinding = _calls_and_globals()
    limits = {(module, name) for module, name in calls
              if name in ("sys.setrecursionlimit", "resource.setrlimit")}
    assert {module for module, _ in limits} == {"guard.py"}
    assert {name for _, name in calls} & {"gc.freeze", "gc.unfreeze", "gc.set_threshold",
                                          "gc.collect", "sys.setswitchinterval",
                                          "sys.settrace", "sys.setprofile"} == set()
    assert rebinding == set()  # no function rebinds a module's variable
