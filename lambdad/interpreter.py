"""The interpreter: source and target terms compiled to Python (:mod:`lambdad.codegen`),
then run under the guard of :mod:`lambdad.guard`.

Each term is compiled once per variant (cached per term object): the plain one, and the
instrumented one, which reports every primitive to an event hook and checks step and time
limits.  Nested differentiation runs written-out target programs (AD.md section 9), which
are terms like any other.  Generated code runs under :meth:`Interpreter._run`, which raises Python's
recursion limit for deep call chains at run time and turns Python exceptions into located
:class:`~lambdad.errors.EvalError` / ``ResourceError``.

The runtime state (the current :class:`~lambdad.tape.Tape`, the strategy, the hooks for
``grad``/``jvp``/``vjp``, the event callback) lives on the :class:`Interpreter` object whose
generated code runs (it hands generated code a :class:`~lambdad.codegen.RuntimeCalls`);
there is no module-level mutable state.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from . import arraylib
from .codegen import CompileOptions, RuntimeCalls, compile_term
from .errors import EvalError, LambdadError, ResourceError, Span
from .guard import (
    RAISED_IN_RUNS,
    RUNTIME_ERRORS,
    PrimSite,
    checked_ad_result,
    describe,
    locate,
    located,
    limits_now,
    raise_limits,
    restore_limits,
)
from .memo import Memo
from .syntax import Decl, Module, Term, Var, walk
from .tape import (
    DEFAULT_STRATEGY,
    Backprop,
    BackpropCreated,
    Stats,
    Tape,
    backward,
    ring_adder,
    strategy_named,
)
from .values import (
    BuiltinFunction,
    FunctionParts,
    PrimEvent,
    closure_code,
    function_parts,
    format_value,
    read_off_point,
    ring_of,
    SCALAR_TYPES,
)

__all__ = ["NOT_FINITE", "Interpreter", "compile_open", "evaluate", "evaluate_module"]

# Compiled units kept per interpreter; the least recently used goes first.  Each entry keeps
# its term alive, so the term's id cannot be reused while it is cached.
_CACHE_SIZE = 8192

# --------------------------------------------------------------------------- the interpreter


class _OpenTerm:
    """A compiled open term: calling it with the values of its free names (in the order
    given to :meth:`Interpreter.compile_open`) evaluates it under the runtime guard."""

    __slots__ = ("interpreter", "function", "names")

    def __init__(self, interpreter: "Interpreter", function: Callable[..., Any],
                 names: tuple[str, ...]):
        self.interpreter = interpreter
        self.function = function
        self.names = names

    def __call__(self, *values: Any) -> Any:
        return self.interpreter._run(self.function, values)


def _instrumenting(name: str) -> property:
    """The attribute ``name`` of an :class:`Interpreter`, kept in ``_<name>``, whose
    setting decides with the others whether runs are instrumented."""
    private = "_" + name

    def set_value(self: "Interpreter", value: Any) -> None:
        setattr(self, private, value)
        self._note_instrumented()

    return property(operator.attrgetter(private), set_value)


NOT_FINITE = object()
"""What :meth:`Interpreter.apply_restartable` gives, running nothing, when an array it was
to test has an element that is not finite."""


def _located_call(function: Callable[..., Any], args: Sequence[Any],
                  tested: Sequence[Any] = ()) -> Any:
    """``function(*args)``, a primitive's error located (:func:`located`); NOT_FINITE
    (nothing run) when an array of ``tested`` has an element that is not finite."""
    for array in tested:
        if not finite_in_run(array):
            return NOT_FINITE
    try:
        return function(*args)
    except RAISED_IN_RUNS as exc:
        raise located(exc) from None


def _tested_apart(tested: Sequence[Any]) -> bool:
    """Whether every element of the arrays ``tested`` is finite, told outside a quiet run
    (entering :func:`arraylib.quiet` for the test alone)."""
    with arraylib.quiet():
        return all(map(finite_in_run, tested))


_quietly_located_call = arraylib.quieted(_located_call)
""":func:`_located_call` under :func:`arraylib.quiet`: a run of a program with array
operations (the arrays of its point tested there, where a quick test does not warn)."""
finite_in_run = arraylib.finite_in_run


class Interpreter:
    """Evaluates source and target terms (call-by-value, left to right).

    ``strategy`` (a name of :data:`~lambdad.tape.STRATEGIES`) is how ``cotangent x e`` runs
    backpropagators; ``ad_hooks`` maps ``"grad"``, ``"jvp"``, ``"vjp"`` to the functions
    that evaluate them (supplied by the AD glue).  With ``on_event`` (a callable receiving
    :class:`~lambdad.values.PrimEvent`, ``BackpropCreated`` and ``BackpropRun``), a
    ``max_steps`` budget of primitive evaluations or a ``timeout`` in seconds, terms are
    compiled in an instrumented variant (cached separately; the plain one stays fast).
    """

    def __init__(self, *, strategy: str = DEFAULT_STRATEGY,
                 ad_hooks: Mapping[str, Callable[..., Any]] | None = None,
                 on_event: Callable[[Any], None] | None = None,
                 max_steps: int | None = None, timeout: float | None = None):
        self.strategy = strategy_named(strategy).name
        self.ad_hooks: dict[str, Callable[..., Any]] = dict(ad_hooks or {})
        self._on_event = on_event
        self._max_steps = max_steps
        self._timeout = timeout
        self._note_instrumented()
        self.tape = Tape()
        self.steps = 0
        self._run_tapes: dict[int, Tape] = {id(self.tape): self.tape}
        self._deadline: float | None = None
        self._depth = 0  # nesting of _run (generated code calling the AD hooks, ...)
        self._guarded = False  # inside the outermost guard (of _run or guarded)
        self._pinned = 0  # nesting of using_tape
        # Whether a unit with array operations was compiled: then every run turns NumPy's
        # floating-point warnings off (the operations check their own results): runs under
        # _quietly_located_call, and a run that compiles the first such unit under the context
        # in _quiet from then on (never both in one run: that only once _arrays is set).
        self._arrays = False
        self._quiet: Any = None
        # Once _arrays is set: the context planned points' runs go in, quiet (see
        # arraylib.quiet_context; None where there is none: they run under errstate too).
        self._quiet_context: Any = None
        self._units = itertools.count()
        # Told (tape, ring depth, bodies run, distinct bodies run) after each backward phase
        # a program's `cotangent x e` runs (the differentiator's per-level costs).
        self.on_read_off: Callable[[Tape, int, int, int], None] | None = None
        self._new_backprop = self._backprop_maker()
        # (id(term), names, compile options) -> (term kept alive, function, names); the
        # least recently used unit forgotten first (its closures keep their own code)
        self._compiled = Memo(_CACHE_SIZE)

    # ---- public API
    # The event hook, the step limit and the time limit: setting one notes whether terms
    # compile with event, step and time checks in ``instrumented`` (a plain attribute, read
    # at every API call).
    on_event = _instrumenting("on_event")
    max_steps = _instrumenting("max_steps")
    timeout = _instrumenting("timeout")

    def _note_instrumented(self) -> None:
        self.instrumented = (self._on_event is not None or self._max_steps is not None
                             or self._timeout is not None)

    @property
    def stats(self) -> Stats:
        """Backpropagators created and bodies run by the current program run (started by
        :meth:`evaluate` or :meth:`evaluate_module`): its own tape and those of the
        differentiations it ran."""
        tapes = self._run_tapes.values()
        return Stats(sum(t.created for t in tapes), sum(t.bodies_run for t in tapes))

    @contextlib.contextmanager
    def using_tape(self, tape: Tape) -> Iterator[Tape]:
        """Makes ``tape`` the current tape (stamps, seeds) inside the ``with`` block."""
        saved = self.pin_tape(tape)
        try:
            yield tape
        finally:
            self.unpin_tape(saved)

    def pin_tape(self, tape: Tape) -> Tape:
        """Makes ``tape`` the current tape (stamps, seeds) until :meth:`unpin_tape` is given
        what this returns (in a ``finally``): :meth:`using_tape` without a generator, for
        the paths run once per gradient."""
        saved = self.tape
        self.tape = tape
        self._pinned += 1
        if self._depth:  # differentiation inside a running program: part of its stats
            self._run_tapes.setdefault(id(tape), tape)
        return saved

    def unpin_tape(self, saved: Tape) -> None:
        """Puts back the tape that was current before :meth:`pin_tape` returned ``saved``."""
        self.tape = saved
        self._pinned -= 1

    def evaluate(self, term: Term, env: Mapping[str, Any] | None = None) -> Any:
        """The value of ``term`` with its free variables taken from ``env``.

        Raises EvalError for a runtime error (located at the primitive) or a free variable
        missing from ``env``, ResourceError when a limit is exceeded.
        """
        function, names = self._function(term, None)
        values = self._values_of(names, env or {}, term)
        self._begin_run()
        return self._run(function, values)

    def evaluate_module(self, module: Module, upto: str | None = None,
                        env: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The values of ``module``'s declarations, evaluated in order (stopping after the
        one named ``upto``), added to a copy of ``env`` (values of names defined earlier).

        Each declaration is compiled as a function of the earlier names it uses.  Raises as
        :meth:`evaluate`.
        """
        values = dict(env or {})
        self._begin_run()
        for decl in module.decls:
            values[decl.name] = self._evaluate_decl(decl, values)
            if upto is not None and decl.name == upto:
                break
        return values

    def compile_open(self, term: Term, free_names: Sequence[str], *,
                     batch_folds: bool = False, image: bool = False) -> Callable[..., Any]:
        """``term`` compiled as a function of ``free_names`` (in that order): calling it with
        their values evaluates ``term`` (under the runtime guard, see :meth:`apply`).
        ``batch_folds`` for a fused ←D program (see :class:`~lambdad.codegen.CompileOptions`).
        An ``image`` of a transformation that uses no ``grad``, ``jvp``, ... (so nothing
        differentiates or looks inside the closures it makes), which the caller keeps, is
        compiled afresh (not kept here) and its closures carry no λ-terms: its code keeps
        no term alive.

        Raises EvalError if ``term`` has a free variable not in ``free_names``.
        """
        if image:
            function, names = self._compile(term, tuple(free_names), CompileOptions(
                self.instrumented, batch_folds, closure_terms=False))
        else:
            function, names = self._function(term, tuple(free_names), batch_folds)
        return _OpenTerm(self, function, names)

    @staticmethod
    def function_parts(f: Any) -> FunctionParts | None:
        """The λ-term and captured values of a closure the interpreter made, or the built-in
        and arguments of a partially applied one; None for a function the runtime made (a
        backpropagator, a pull-back).  Other modules look inside function values only
        through this."""
        return function_parts(f)

    @staticmethod
    def closure_code(f: Any) -> tuple[Any, tuple] | None:
        """The code of the closure ``f`` and its captured values, in order (see
        :func:`lambdad.values.closure_code`); None for another function."""
        return closure_code(f)

    def apply(self, f: Any, *args: Any) -> Any:
        """``f a1 .. an`` for a function value ``f`` (curried), run like generated code is:
        deep calls allowed, runtime errors located, limits reported as ResourceError."""
        if len(args) == 1:  # (the differentiator's runs: one argument, no closure made)
            return self._run(f, args)

        def call() -> Any:
            result = f
            for arg in args:
                result = result(arg)
            return result

        return self._run(call, ())

    def run_as_code(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` run as generated code is (see :meth:`apply`): a phase of the
        runtime's own (a backward phase) whose errors are located as the program's."""
        return self._run(function, args)

    def guarded(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` under the runtime guard of generated code (see :meth:`apply`),
        so the runs it makes through this interpreter share one guard: deep calls allowed,
        the cyclic collector paused, runtime errors located, limits as ResourceError."""
        if self._guarded:
            return function(*args)
        return self._outermost(function, args, 0)

    def backward(self, cotangent: Any, strategy: str | None = None) -> dict[int, float]:
        """:func:`~lambdad.tape.backward` on the current tape with this interpreter's
        strategy (or ``strategy``) and event callback."""
        return self._run(backward, (self.tape, cotangent, strategy or self.strategy,
                                    self.on_event))

    # ---- compilation
    def _function(self, term: Term, names: tuple[str, ...] | None, batch_folds: bool = False
                  ) -> tuple[Callable[..., Any], tuple[str, ...]]:
        """The compiled entry function of ``term`` and its parameters (see
        :func:`~lambdad.codegen.compile_term`), compiled once per term, names and options
        (the variant, instrumented or not, and ``batch_folds``)."""
        options = CompileOptions(self.instrumented, batch_folds)
        key = (id(term), names, options)
        compiled = self._compiled
        entry = compiled.get(key)
        if entry is None:
            entry = compiled.put(key, (term, *self._compile(term, names, options)))
        return entry[1], entry[2]

    @staticmethod
    def _values_of(names: Sequence[str], env: Mapping[str, Any], term: Term) -> list[Any]:
        try:
            return [env[name] for name in names]
        except KeyError as missing:
            name = missing.args[0]
            span = next((t.span for t in walk(term) if isinstance(t, Var) and t.name == name),
                        None)
            raise EvalError(f"unbound variable `{name}`", span) from None

    def _compile(self, term: Term, names: tuple[str, ...] | None, options: CompileOptions
                 ) -> tuple[Callable[..., Any], tuple[str, ...]]:
        function, names = compile_term(term, names, self._runtime_calls(options.instrumented),
                                       options=options,
                                       filename=f"<lambdad unit {next(self._units)}>")
        if function.__lambdad_arrays__ and not self._arrays:
            # from now on, the run under way included (its array code runs after this)
            self._arrays = True
            self._quiet_context = arraylib.quiet_context()
            if self._guarded:
                self._quiet = arraylib.quiet()
                self._quiet.__enter__()
        return function, names

    def _runtime_calls(self, instrumented: bool) -> RuntimeCalls:
        """What the generated code of a variant calls back (see :class:`RuntimeCalls`)."""
        return RuntimeCalls(
            new_backprop=self._new_backprop_traced if instrumented else self._new_backprop,
            own_zero=self._new_constant_traced,
            seed=self._seed, read_off=self._read_off, call_ad=self._call_ad,
            prim_event=self._prim_event, count_ahead=self._count_ahead,
            apply_builtin=self._apply_builtin_traced if instrumented else self._apply_builtin)

    def _evaluate_decl(self, decl: Decl, values: Mapping[str, Any]) -> Any:
        function, names = self._function(decl.value, None)
        return self._run(function, self._values_of(names, values, decl.value))

    # ---- running generated code
    def _begin_run(self) -> None:
        """A top-level run starts with a fresh tape (unless the AD glue installed one)."""
        if self._depth == 0 and self._pinned == 0:
            self.tape = Tape()
            self._run_tapes = {id(self.tape): self.tape}

    def _run(self, function: Callable[..., Any], args: Sequence[Any]) -> Any:
        """``function(*args)`` for generated code: the outermost call raises the recursion
        limit (restored after); Python errors become located EvalErrors, RecursionError
        and MemoryError become ResourceErrors."""
        if self._guarded:
            self._depth += 1
            try:
                return function(*args)
            except RAISED_IN_RUNS as exc:  # (a primitive's error, unlocated: located)
                raise located(exc) from None
            finally:
                self._depth -= 1
        return self._outermost(function, args, 1)

    def restartable(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` under the guard of :meth:`guarded`, for a function that may
        be run again from the start: one that computes a result and changes nothing else
        (no events, no call into code outside lambdad, a fresh tape per run).  It runs at
        the recursion limit the process has, without raising the limits (reading and
        setting the stack size takes three system calls, more than a small program's
        run); if it exhausts that, it runs again under the raised limits, as
        :meth:`guarded` runs everything.  So a call that needs deep recursion still gets
        it, and reports ResourceError only when the raised limits do not suffice either."""
        if self._guarded or self.instrumented:
            return self.guarded(function, *args)
        return self._outermost(function, args, 0, raising=False)

    def apply_restartable(self, f: Any, arg: Any, tested: Sequence[Any] | None = None) -> Any:
        """:meth:`restartable` ``self.apply(f, arg)`` in fewer frames: ``f arg`` run at depth
        1 under the outermost guard, as :meth:`apply` runs it there (a repeated call of a
        small array program pays each frame).  Given ``tested`` (a planned point's run: no
        function of the caller's in ``arg``), its arrays (of ``arg``, not tested yet) are
        tested finite first, where the run's array operations go (quiet): when one is not,
        it gives NOT_FINITE, running nothing."""
        if self._guarded or self.instrumented:
            if tested and not _tested_apart(tested):
                return NOT_FINITE
            return self.guarded(self.apply, f, arg)
        return self._outermost(f, (arg,), 1, raising=False, tested=tested)

    def restartable_on(self, tape: Tape, function: Callable[[Any], Any], arg: Any,
                       tested: Sequence[Any] | None = None) -> Any:
        """:meth:`restartable` ``function(arg)`` with ``tape`` the current tape meanwhile
        (as :meth:`pin_tape` makes it): a prepared gradient's run, pinned and guarded in
        one frame rather than three, since a small program's run costs little more.
        ``tested`` as for :meth:`apply_restartable` (NOT_FINITE, nothing run, when an
        array of it is not finite)."""
        if self._guarded or self.instrumented:
            if tested and not _tested_apart(tested):
                return NOT_FINITE
            saved = self.pin_tape(tape)
            try:
                return self.guarded(function, arg)
            finally:
                self.unpin_tape(saved)
        return self._outermost(function, (arg,), 0, raising=False, tape=tape, tested=tested)

    def _outermost(self, function: Callable[..., Any], args: Sequence[Any], depth: int,
                   raising: bool = True, tape: Tape | None = None,
                   tested: Sequence[Any] | None = None) -> Any:
        """``function(*args)`` as the outermost guarded call, at run depth ``depth`` (0 for
        :meth:`guarded`: work around program runs, not one of them).  Without ``raising``
        the limits stay as they are and a RecursionError runs it again with them raised
        (see :meth:`restartable`).  A ``tape`` is the current tape during the call.  The
        arrays ``tested`` are tested first (see :meth:`apply_restartable`); given (a planned
        point's run), the run may go in the interpreter's quiet context."""
        self.steps = 0
        self._deadline = None if self._timeout is None else time.monotonic() + self._timeout
        # Whatever happens from here on (an error, a KeyboardInterrupt), the finally clause
        # puts back the collector and the limits as they are now.
        limits = limits_now() if raising else None
        collecting = gc.isenabled()
        saved_tape, pinned = self.tape, False
        try:
            if limits is not None:
                raise_limits(limits)
            # Generated code makes no reference cycles (values are immutable trees and
            # DAGs), so reference counting frees everything; the cyclic collector would only
            # rescan the ever-growing graph of backpropagators, which can double the cost of
            # a run.
            gc.disable()
            self._depth = depth
            self._guarded = True
            if tape is not None:
                self.tape, pinned = tape, True
                self._pinned += 1
            if self._arrays:
                # (an error is located under it too: locating may run the code again)
                if tested is not None and self._quiet_context is not None:
                    # a planned point's run: no function of the caller's in it, so it may
                    # go in the interpreter's own quiet context, quicker to enter
                    return self._quiet_context.run(_located_call, function, args, tested)
                return _quietly_located_call(function, args, tested or ())
            if tested and not _tested_apart(tested):
                # (no array code compiled yet: the point's arrays tested apart, and the
                # run as any other, which enters quiet() if it compiles some)
                return NOT_FINITE
            return function(*args)
        except RAISED_IN_RUNS as exc:  # (a primitive's error, unlocated: located)
            raise located(exc) from None
        except RecursionError:
            if raising:
                raise ResourceError(
                    "the program nests calls too deeply at run time (Python's stack is "
                    "exhausted)") from None
        except MemoryError:
            raise ResourceError("the program ran out of memory") from None
        finally:
            if limits is not None:
                restore_limits(limits)
            if collecting:
                gc.enable()
            if self._quiet is not None:
                self._quiet.__exit__(None, None, None)
                self._quiet = None
            if pinned:
                self.tape = saved_tape
                self._pinned -= 1
            self._depth = 0
            self._guarded = False
        # Only after a RecursionError without raised limits: again, with them raised.
        return self._outermost(function, args, depth, tape=tape, tested=tested)

    # ---- called by generated code
    def _backprop_maker(self) -> Callable[[Callable[..., Any], tuple, Span | None], Backprop]:
        """The function generated code calls for ``\\a -o e``: a :class:`Backprop` with the
        next stamp of the current tape (what :meth:`Backprop.create` makes, written out:
        ``Backprop()`` and slot stores are the cheapest way in CPython, and this runs once
        per primitive of a reverse-mode program)."""

        def new_backprop(function: Callable[..., Any], captured: tuple,
                         span: Span | None) -> Backprop:
            tape = self.tape
            stamp = tape.stamps
            tape.stamps = stamp + 1
            backprop = Backprop()
            backprop.stamp = stamp
            backprop.function = function
            backprop.captured = captured
            backprop.span = span
            backprop.tape = tape
            return backprop

        return new_backprop

    def _new_backprop_traced(self, function: Callable[..., Any], captured: tuple,
                             span: Span | None) -> Backprop:
        tape = self.tape
        backprop = Backprop.create(tape.next_stamp(), function, captured, span, tape)
        if self.on_event is not None:
            self.on_event(BackpropCreated(backprop.stamp, span))
        return backprop

    def _new_constant_traced(self, span: Span | None) -> Backprop:
        # A step: reverse mode gives one to every real of a list it receives (`range n`),
        # work as long as the list, before any primitive of the program runs.
        self._count_step(span)
        backprop = self.tape.own_constant(span)
        if self.on_event is not None:
            self.on_event(BackpropCreated(backprop.stamp, span))
        return backprop

    def _seed(self, index: Any, span: Span | None) -> Backprop:
        if type(index) is float and index >= 0.0 and index.is_integer():
            return self.tape.seed(int(index), span)  # (what `range` gives, mostly)
        if type(index) is not int:
            if not (type(index) is float and index >= 0 and index.is_integer()):
                raise EvalError(f"`seed` expects a whole number >= 0, not "
                                f"{format_value(index)}", span)
            index = int(index)
        return self.tape.seed(index, span)

    def _read_off(self, point: Any, cotangent: Any) -> Any:
        # The ring of the cotangents is the one of the point's scalars: the reals, or (in a
        # program differentiated again) pairs that add componentwise.  A point without
        # reals says nothing of the ring: the generic addition then serves any.
        tape = self.tape
        sample = ring_of(point)
        if type(sample) in SCALAR_TYPES:  # a first-order phase: its costs are its caller's
            return read_off_point(point, backward(tape, cotangent, self.strategy,
                                                  self.on_event), tape)
        ran, reached = tape.bodies_run, tape.reached
        adjoints = backward(tape, cotangent, self.strategy, self.on_event, ring_adder(tape))
        if self.on_read_off is not None:
            depth = 0  # how many transformations the ring is the image of
            while type(sample) is tuple:
                sample, depth = sample[0], depth + 1
            self.on_read_off(tape, depth, tape.bodies_run - ran, tape.reached - reached)
        return read_off_point(point, adjoints, tape)

    def _call_ad(self, site: PrimSite, *args: Any) -> Any:
        hook = self.ad_hooks.get(site.primitive.name)
        if hook is None:
            raise EvalError(f"`{site.primitive.spelling.symbol}` is not available here",
                            site.span)
        try:
            result = hook(*args)
        except LambdadError as exc:
            raise exc.with_span(site.span)
        return checked_ad_result(site, result)

    def _count_step(self, span: Span | None) -> None:
        """Counts a step of the run; ResourceError at ``span`` past the step limit or the
        time limit."""
        self.steps += 1
        if self.max_steps is not None and self.steps > self.max_steps:
            raise ResourceError(f"stopped after {self.max_steps} steps", span)
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise ResourceError(f"stopped after {self.timeout:g} seconds", span)

    def _count_ahead(self, site: PrimSite, args: tuple) -> None:
        """ResourceError at ``site`` if the list its primitive is about to make (of the
        length its ``size`` gives) would take the run past the step limit: stopped before
        it is made (`range 1e8` is seconds and gigabytes)."""
        if self._max_steps is None:
            return
        size = site.primitive.size(*args)
        if self.steps + 1 + size > self._max_steps:
            raise ResourceError(f"stopped after {self._max_steps} steps", site.span, (
                f"`{site.primitive.spelling.symbol}` would make a list of {size:.0f} "
                f"elements, a step each, after {self.steps} step"
                f"{'' if self.steps == 1 else 's'}",))

    def _prim_event(self, site: PrimSite, args: tuple, result: Any) -> None:
        # (_count_step written out: this runs once per primitive of an instrumented run)
        steps = self.steps + 1
        if type(result) is list:
            # Making a list is a step per element: a mode's work on it is as long
            # (reverse mode's zero adjoints, forward mode's zero tangents).
            steps += len(result)
        self.steps = steps
        if self._max_steps is not None and steps > self._max_steps:
            raise ResourceError(f"stopped after {self._max_steps} steps", site.span)
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise ResourceError(f"stopped after {self._timeout:g} seconds", site.span)
        if self.on_event is not None:
            self.on_event(PrimEvent(site.primitive, site.span, args, result, site.term))

    def _apply_builtin(self, function: BuiltinFunction, args: tuple) -> Any:
        primitive = function.primitive
        if primitive.kind == "ad":
            return self._call_ad(PrimSite(primitive, function.span, None), *args)
        try:
            return primitive.evaluate(*args)
        except RUNTIME_ERRORS as exc:
            # A closure given to `map` or `fold` may have failed inside: locate it there.
            error = locate(exc)
            if error.span is None:
                error = EvalError(describe(primitive, args, exc), function.span)
            raise error from None

    def _apply_builtin_traced(self, function: BuiltinFunction, args: tuple) -> Any:
        result = self._apply_builtin(function, args)
        self._prim_event(PrimSite(function.primitive, function.span, None), args, result)
        return result


# --------------------------------------------------------------------------- conveniences


def evaluate(term: Term, env: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """The value of ``term`` in ``env`` on a fresh :class:`Interpreter` (``options`` are its
    keyword arguments); raises as :meth:`Interpreter.evaluate`."""
    return Interpreter(**options).evaluate(term, env)


def evaluate_module(module: Module, upto: str | None = None,
                    env: Mapping[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """The values of ``module``'s declarations on a fresh :class:`Interpreter`; raises as
    :meth:`Interpreter.evaluate_module`."""
    return Interpreter(**options).evaluate_module(module, upto, env)


def compile_open(term: Term, free_names: Sequence[str], **options: Any) -> Callable[..., Any]:
    """``term`` as a function of ``free_names`` on a fresh :class:`Interpreter`; raises as
    :meth:`Interpreter.compile_open`."""
    return Interpreter(**options).compile_open(term, free_names)
