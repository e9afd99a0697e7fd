"""Differentiating function *values*: what ``grad``, ``jvp`` and ``vjp`` do at run time.

A function value is a closure built by the interpreter: a λ-term plus its captured
environment (or a built-in applied to some arguments).  To differentiate it (AD.md section 6)
we transform its λ-term with →D or ←D (once per term, cached), embed the captured environment
into the transformed world — reals become constants ``(r, 0)`` / ``(r, \\a -o zero)``,
closures are transformed in turn — seed the argument, apply, and read off.  The images are
made by :mod:`lambdad.images` (:class:`Differentiator` is an :class:`~lambdad.images.Images`);
this module seeds, runs and reads off.

Nesting (AD.md section 9).  Every derivative takes this one route.  A closure that itself
differentiates is written out as a target program first (:mod:`lambdad.nesting`): each
``grad``/``jvp``/``vjp`` in it becomes the program of its read-off over the image of the
function it differentiates, specialised to the values and closures it captured (a closure
captured that differentiates is defined in its body, so that a function given to it is
known by its term), then transformed like any other term, compiled once per (term, types,
strategy) and run.  The linear constructs of the inner transformations have rules of their
own, so each level's backpropagators live in a ring of their own and levels never mix: a
real captured from an outer level is a constant of the inner one, which is why
``grad (\\x -> x * grad (\\y -> x + y) 1) 1`` is 1.  Each level's costs are those of the
backward phases run in its ring.  A pull-back is the closure of ``\\c -> snd (vjp f x) c``
and a function in the result of ``jvp`` the closure of a term that differentiates afresh
(:meth:`Differentiator._split`), so they are differentiated the same way.  What has no
program (a function made outside the language, a use of ``grad`` on a function given as an
argument under reverse mode) is refused with an error saying why.

This module and :mod:`lambdad.images` are where the transformations meet the interpreter;
neither imports the other.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Callable
from typing import Any

from .arraylib import ARRAY, array_adjoint
from .errors import DifferentiationError, LambdadError
from .images import FORWARD, FUSED, REVERSE, Images
from .interpreter import Interpreter
from .parser import parse_expr
from .reals import (basis, count_reals, has_function, is_dual, is_flat_reals, is_real,
                    is_reverse_real, leaves, replace_leaves, split_flat_duals, zip_values)
from .syntax import Term
from .tape import (
    DEFAULT_STRATEGY,
    Backprop,
    Call,
    LevelStats,
    Stats,
    Tape,
    add_cotangents,
    strategy_named,
)
from .values import (
    SCALAR_TYPES,
    MadeFunction,
    map_value,
)


# ---------------------------------------------------------------- the differentiator


class Differentiator(Images):
    """Runs →D / ←D versions of function values on an interpreter, and nests (see the
    module docstring).

    ``strategy`` (a name in :data:`lambdad.tape.STRATEGIES`) is how backpropagators are
    evaluated (and, for ``fused``, which form of ←D is run);
    ``last_stats`` is the cost of the most recent reverse-mode run, per nesting level.
    """

    def __init__(self, interpreter: Interpreter, strategy: str = DEFAULT_STRATEGY):
        super().__init__(interpreter, strategy)
        # The costs of the most recent reverse-mode run, a log of records (see _costs),
        # made into Stats when asked for: most runs are not asked.
        self._last_costs: list[tuple[int, str, int, int]] | None = None
        interpreter.on_read_off = self._on_read_off
        # per tape of a run: the distinct bodies its inner levels' backward phases ran
        self._inner_reached: dict[int, int] = {}
        self._depth = 0  # differentiations in progress, one inside the other
        # the log of the differentiation running: (depth, mode, created, bodies run) per phase
        self._costs: list[tuple[int, str, int, int]] = []

    # ---- hooks for the interpreter's `grad`, `jvp`, `vjp` primitives
    def hooks(self) -> dict[str, Callable[..., Any]]:
        return {
            "grad": lambda f, x: self.grad(f, x)[1],
            "jvp": lambda f, x, v: self.jvp(f, x, v),
            "vjp": lambda f, x: self.vjp(f, x),
            "jacfwd": lambda f, x: self.jacobian(f, x, FORWARD)[1],
            "jacrev": lambda f, x: self.jacobian(f, x, REVERSE)[1],
        }

    # ---- per-level costs
    # A differentiation's costs are a log of records (depth, mode, created, bodies run), one
    # per phase, appended as it runs (depth 1 is the outermost differentiation); they are
    # summed per depth only when ``last_stats`` is asked for, which most runs are not.
    @property
    def last_stats(self) -> Stats | None:
        """What the most recent reverse-mode run cost, per nesting level (None before
        the first)."""
        log = self._last_costs
        if log is None:
            return None
        deepest = max(record[0] for record in log)
        modes: list[set[str]] = [set() for _ in range(deepest)]
        created, run = [0] * deepest, [0] * deepest
        for depth, mode, made, ran in log:
            modes[depth - 1].add(mode)
            created[depth - 1] += made
            run[depth - 1] += ran
        levels = tuple(LevelStats(depth, tuple(sorted(modes[depth - 1])),
                                  created[depth - 1], run[depth - 1])
                       for depth in range(1, deepest + 1))
        return Stats(sum(created), sum(run), levels)

    def _begin_differentiation(self) -> bool:
        """Starts one differentiation, perhaps inside another; True for the outermost.
        :meth:`_end_differentiation` must follow (in a ``finally``)."""
        outermost = self._depth == 0
        if outermost:
            self._costs = []
            if self._inner_reached:
                self._inner_reached = {}
        self._depth += 1
        return outermost

    def _end_differentiation(self, outermost: bool) -> None:
        """Ends a differentiation: the outermost one publishes the costs of every depth as
        ``last_stats`` if it ran reverse mode."""
        self._depth -= 1
        if outermost:
            for record in self._costs:  # (a loop, not any(): this ends every HVP)
                if record[1] == REVERSE:
                    self._last_costs = self._costs
                    break

    def _on_read_off(self, tape: Tape, ring_depth: int, ran: int, reached: int) -> None:
        """A backward phase of a program run (``cotangent x e``) over a ring that is the image
        of ``ring_depth`` transformations: the phase of a differentiation that many levels
        inside the one running, whose backpropagators are those the phase reached."""
        if ring_depth == 0:
            return  # a printed program run as it is: its own first-order phase
        inner, key = self._inner_reached, id(tape)
        inner[key] = inner.get(key, 0) + reached
        if self._depth == 0:
            self._record(REVERSE, reached, ran, ring_depth)
        else:  # (_record written out: this ends the reverse phase of every HVP)
            self._costs.append((self._depth + ring_depth, REVERSE, reached, ran))

    def _record(self, mode: str, created: int, bodies_run: int, inner: int = 0) -> None:
        """Adds costs to the level of the differentiation running (``inner`` levels
        inside it)."""
        if self._depth == 0:  # a pull-back called after its vjp: a run of its own
            self._costs = [(1 + inner, mode, created, bodies_run)]
            self._last_costs = self._costs
            return
        self._costs.append((self._depth + inner, mode, created, bodies_run))

    # ---- reverse mode
    def grad(self, f: Any, x: Any, strategy: str | None = None) -> tuple[Any, Any]:
        """``(f x, ∇f(x))`` by backpropagation; the gradient has the shape of ``x``.
        Raises DifferentiationError if ``f x`` is not a real or ``x`` is a function."""
        # One guarded run for seeding, both phases and the read-off: the tape's objects are
        # never rescanned by the cyclic collector between them.
        _require_differentiable_input(x)
        return self.interpreter.guarded(self._grad_any, f, x, strategy)

    def _grad_any(self, f: Any, x: Any, strategy: str | None) -> tuple[Any, Any]:
        outermost = self._begin_differentiation()
        try:
            return self._grad(f, x, strategy)
        finally:
            self._end_differentiation(outermost)

    def _grad(self, f: Any, x: Any, strategy: str | None) -> tuple[float, Any]:
        tape = Tape()
        interpreter = self.interpreter
        chosen = strategy_named(strategy or self.strategy)
        saved = interpreter.pin_tape(tape)
        try:
            if type(x) in SCALAR_TYPES:  # one real or one array: seed 0
                seeded: Any = (x, tape.seed(0))
            else:
                seeded = self._seed(x, tape)
            # whether every stamp so far is a seed (0 .. count - 1, made in that order)
            count = tape.stamps if tape.bodiless == tape.stamps else None
            g = self.transform_function(f, FUSED if chosen.fuses else REVERSE, tape, x)
            out = interpreter.apply(g, seeded)
        finally:
            interpreter.unpin_tape(saved)
        if not is_reverse_real(out):
            raise DifferentiationError("grad needs a function whose result is a real")
        value, back = out
        if count is not None and chosen.run_first_seeds is not None \
                and not interpreter.instrumented:
            # the adjoints of the seeds as a list, not looked up one by one in a table
            # (what the backward phase gives, without events in the reals)
            flat = self._backward_first_seeds(tape, back, count, chosen.run_first_seeds)
            tape.release()
            if type(x) is float:
                return value, flat[0]
            if type(x) is ARRAY:
                return value, array_adjoint(x, flat[0])
            if is_flat_reals(x):
                return value, flat
            return value, self._read_off(x, dict(enumerate(flat)))
        adjoints = self._backward(tape, back(1.0), strategy)
        tape.release()  # the run is over: its seeds need not wait for the cyclic collector
        return value, self._read_off(x, adjoints)

    def kept_image(self, f: Any) -> Any:
        """The image of the closure ``f`` under the reverse mode of the strategy set, kept
        by a :meth:`grad` of ``f`` by that strategy (see :meth:`transform_function`); None
        when none was kept: ``f`` differentiates, or embedding what it captures stamped the
        tape, or runs are instrumented (their images report events)."""
        if self.interpreter.instrumented:
            return None
        return self._kept_image(self._image_key(f, (self._reverse(None),)), f)

    def record_reverse_run(self, tape: Tape) -> None:
        """Publishes as ``last_stats`` the costs of one first-order reverse-mode run made
        outside :meth:`grad` (by :mod:`lambdad.prepared`) on ``tape``."""
        self._last_costs = [(1, REVERSE, tape.stamps - tape.bodiless, tape.bodies_run)]

    def vjp(self, f: Any, x: Any) -> tuple[Any, Callable[[Any], Any]]:
        """``(f x, pull-back)``: the pull-back maps a cotangent of the result's shape to one
        of ``x``'s shape, and may be called any number of times (and differentiated)."""
        _require_differentiable_input(x)
        outermost = self._begin_differentiation()
        try:
            return self._vjp(f, x)
        finally:
            self._end_differentiation(outermost)

    def _vjp(self, f: Any, x: Any) -> tuple[Any, Callable[[Any], Any]]:
        tape = Tape()
        saved = self.interpreter.pin_tape(tape)
        try:
            seeded = self._seed(x, tape)
            g = self.transform_function(f, self._reverse(None), tape, x)
            out = self.interpreter.apply(g, seeded)
        finally:
            self.interpreter.unpin_tape(saved)
        # The pull-back keeps the seeds, not the tape: a seed refers back to its tape, so
        # a tape holding its seeds would be a cycle left for the cyclic collector by every
        # vjp (each reverse-over-reverse Hessian).
        seeds = tape.release()
        if has_function(out):
            raise DifferentiationError("vjp needs a function whose result has no functions")
        value = map_value(out, is_reverse_real, lambda pair: pair[0])
        strategy = self.strategy

        def pullback(cotangent: Any) -> Any:
            total = None
            try:
                for (_, back), c in zip_values(out, cotangent, is_reverse_real):
                    total = add_cotangents(
                        total, Call(back, c if type(c) in SCALAR_TYPES else float(c)))
            except (ValueError, TypeError, IndexError):
                raise DifferentiationError(
                    "the cotangent given to a pull-back must have the shape of the function's "
                    "result") from None
            tape.resume(seeds)
            try:
                return self._read_off(x, self._backward(tape, total, strategy))
            finally:
                tape.release()

        # the pull-back is the closure of `\c -> snd (vjp f x) c`: differentiating it
        # differentiates that program
        return value, MadeFunction(pullback, self._term("pull-back", PULLBACK_TERM),
                                   {"f": f, "x": x})

    def _seed(self, x: Any, tape: Tape) -> Any:
        """``x`` with its i-th real ``r`` (left to right) replaced by ``(r, seed i)`` and its
        functions transformed."""
        if is_flat_reals(x):
            return list(zip(x, tape.seeds(0, len(x))))
        index = 0

        def seed(r: Any):
            nonlocal index
            pair = (r, tape.seed(index))
            index += 1
            return pair

        def leaf(v: Any) -> bool:
            return type(v) in SCALAR_TYPES or callable(v)

        def embed(v: Any):
            return seed(v) if type(v) in SCALAR_TYPES else self.transform_function(
                v, REVERSE, tape)

        return map_value(x, leaf, embed)

    def _backward(self, tape: Tape, cotangent: Any, strategy: str | None) -> dict[int, Any]:
        interpreter = self.interpreter
        saved = interpreter.pin_tape(tape)
        ran = tape.bodies_run
        try:
            adjoints = interpreter.backward(cotangent, strategy or self.strategy)
        finally:
            interpreter.unpin_tape(saved)
        # the backpropagators of the inner levels' phases (on this tape) are theirs
        self._record(REVERSE, tape.created - self._inner_reached.get(id(tape), 0),
                     tape.bodies_run - ran)
        return adjoints

    def _backward_first_seeds(self, tape: Tape, back: Backprop, count: int,
                              run: Callable[[Tape, Any, int], list[Any]]) -> list[Any]:
        """:meth:`_backward` of ``back 1`` on ``tape`` by ``run``, a strategy's backward
        phase for the seeds ``0 .. count - 1`` made first (see :class:`Strategy`): their
        adjoints as a list, 0 for one not reached; the costs recorded as there."""
        interpreter = self.interpreter
        saved = interpreter.pin_tape(tape)
        ran = tape.bodies_run
        try:
            flat = interpreter.run_as_code(run, tape, back, count)
        finally:
            interpreter.unpin_tape(saved)
        inner = self._inner_reached
        self._record(REVERSE, tape.created - (inner.get(id(tape), 0) if inner else 0),
                     tape.bodies_run - ran)
        return flat

    @staticmethod
    def _read_off(x: Any, adjoints: dict[int, Any]) -> Any:
        """The gradient in the shape of ``x``: its i-th real replaced by the i-th adjoint
        (0 if the seed was never reached)."""
        if is_flat_reals(x):
            get = adjoints.get
            return [get(i, 0.0) for i in range(len(x))]
        index = 0

        def adjoint(r: Any) -> Any:
            nonlocal index
            value = adjoints.get(index, 0.0)
            index += 1
            return value if type(r) is float else array_adjoint(r, value)

        return map_value(x, is_real, adjoint)

    # ---- forward mode
    def jvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        """``(f x, ∂f(x)·v)`` by dual numbers; ``v`` has the shape of ``x``."""
        _require_differentiable_input(x)
        # one guarded run for the transformation and the run (see grad)
        return self.interpreter.guarded(self._jvp_any, f, x, v)

    def _jvp_any(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        outermost = self._begin_differentiation()
        try:
            return self._jvp(f, x, v)
        finally:
            self._end_differentiation(outermost)

    def _jvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        if is_flat_reals(x) and is_flat_reals(v) and len(v) == len(x):
            seeded: Any = list(zip(x, v))  # the usual point, paired by one loop
        else:
            tangents = iter(self._tangent_list(x, v))
            seeded = map_value(x, lambda leaf: type(leaf) in SCALAR_TYPES or callable(leaf),
                               lambda leaf: (leaf, next(tangents)) if type(leaf) in SCALAR_TYPES
                               else self.transform_function(leaf, FORWARD, None))
        # a function that differentiates runs reverse mode inside: on a tape of this run
        tape = Tape()
        saved = self.interpreter.pin_tape(tape)
        try:
            g = self.transform_function(f, FORWARD, None, x)
            out = self.interpreter.apply(g, seeded)
        finally:
            self.interpreter.unpin_tape(saved)
        tape.release()
        self._record(FORWARD, 0, 0)
        split = split_flat_duals(out)
        if split is not None:
            return split
        if has_function(out):
            return self._split(out, f, x, v, True), self._split(out, f, x, v, False)
        return self._split_duals(out)

    @staticmethod
    def _split_duals(out: Any) -> tuple[Any, Any]:
        """The primal and the tangent of the forward-mode result ``out`` (without
        functions)."""
        split = split_flat_duals(out)
        if split is not None:
            return split
        return (map_value(out, is_dual, lambda pair: pair[0]),
                map_value(out, is_dual, lambda pair: pair[1]))

    def _split(self, out: Any, f: Any, x: Any, v: Any, primal: bool) -> Any:
        """The value (``primal``) or the tangent part of the forward-mode result ``out`` of
        ``f`` at ``x`` along ``v`` that holds functions (Manzyuk et al., JFP 2019).  A
        function at ``path`` in ``f x`` gives the closure of ``\\a -> (f x)@path a``, its
        tangent the closure of ``\\a -> snd (jvp (\\y -> (f y)@path a) x v)``: applied, the
        tangent differentiates afresh, so it may be applied inside other differentiations
        (and differentiated: it is a closure of a term)."""
        # post-order over (value, path, done): each finished value pushes its part
        work: list[tuple[Any, tuple[tuple[bool, int], ...], bool]] = [(out, (), False)]
        built: list[Any] = []
        while work:
            value, path, done = work.pop()
            if is_dual(value):
                built.append(value[0] if primal else value[1])
            elif type(value) is tuple or type(value) is list:
                if done:
                    items = built[len(built) - len(value):]
                    del built[len(built) - len(value):]
                    built.append(tuple(items) if type(value) is tuple else items)
                else:
                    work.append((value, path, True))
                    in_list = type(value) is list
                    work.extend((item, path + ((in_list, i),), False)
                                for i, item in reversed(list(enumerate(value))))
            elif callable(value) and not isinstance(value, Backprop):
                built.append(self._part_function(path, primal)(f, x, v))
            else:
                built.append(value)
        return built[0]

    def _part_function(self, path: tuple[tuple[bool, int], ...], primal: bool) -> Callable[..., Any]:
        """The closure over ``f``, ``x``, ``v`` of the function at ``path`` in ``f x``
        (``primal``) or of its tangent along ``v`` (see :meth:`_split`), compiled once per
        path."""
        key = ("part", path, primal)
        found = self._pieces.get(key)
        if found is None:
            term = _part_term(path, primal)
            found = self._pieces.put(key, (term, self.interpreter.compile_open(
                term, ("f", "x", "v"))))
        return found[1]

    def _term(self, name: str, source: str) -> Term:
        """The term ``source``, parsed once."""
        key = ("term", name)
        found = self._pieces.get(key)
        if found is None:
            found = self._pieces.put(key, (parse_expr(source, "<differentiation>"), None))
        return found[0]

    @staticmethod
    def _tangent_list(x: Any, v: Any) -> list[Any]:
        if callable(v) and not callable(x):
            raise DifferentiationError("a direction cannot be a function")
        try:
            pairs = list(zip_values(x, v, is_real))
        except (ValueError, TypeError, IndexError):
            pairs = None
        if pairs is None or not all(type(t) in SCALAR_TYPES for _, t in pairs):
            raise DifferentiationError("the direction given to jvp must have the shape of the point")
        return [t for _, t in pairs]

    def _one_guard(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)``, whose many differentiations share one guard of the
        interpreter (the limits raised once, not per run) unless runs are instrumented:
        a step or time limit then applies to each run, as when called one by one."""
        if self.interpreter.instrumented:
            return function(*args)
        return self.interpreter.guarded(function, *args)

    def forward_grad(self, f: Any, x: Any) -> tuple[Any, Any]:
        """``(f x, ∇f(x))`` by forward mode: one run per input real, seeding it with 1."""
        return self._one_guard(self._forward_grad, f, x)

    def _forward_grad(self, f: Any, x: Any) -> tuple[Any, Any]:
        n = count_reals(x)
        value = None
        columns: list[Any] = []
        for i in range(n):
            value, tangent = self.jvp(f, x, basis(x, i))
            if type(tangent) not in SCALAR_TYPES:
                raise DifferentiationError("grad needs a function whose result is a real")
            columns.append(tangent)
        if n == 0:
            value, _ = self.jvp(f, x, x)
        it = iter(columns)

        def column(r: Any) -> Any:
            if type(r) is ARRAY:  # the gradient of an array, from its reals' columns
                return np.array([next(it) for _ in range(r.size)]).reshape(r.shape)
            return next(it)

        return value, map_value(x, is_real, column)

    # ---- Jacobians
    def jacobian(self, f: Any, x: Any, mode: str) -> tuple[Any, Any]:
        """``(f x, J)``: ``J`` has the shape of ``f x`` with each real replaced by the
        gradient of that output real, in the shape of ``x`` (for ``f : a -> [R]``, a list of
        rows ``[a]``).  Forward mode (``mode == FORWARD``) takes one dual-number run per real
        of ``x``; reverse mode one run and one backward pass per real of ``f x``."""
        return self._one_guard(self._jacobian, f, x, mode)

    def _jacobian(self, f: Any, x: Any, mode: str) -> tuple[Any, Any]:
        if mode == FORWARD:
            n = count_reals(x)
            value = None
            tangents: list[list[Any]] = []
            for j in range(n):  # a run per real of x (per element of an array)
                value, tangent = self.jvp(f, x, basis(x, j))
                tangents.append(leaves(tangent))
            if n == 0:
                value, _ = self.jvp(f, x, x)
            rows = [replace_leaves(x, [tangent[i] for tangent in tangents])
                    for i in range(count_reals(value))]
        else:
            value, pullback = self.vjp(f, x)
            rows = [pullback(basis(value, i)) for i in range(count_reals(value))]
        it = iter(rows)
        return value, map_value(value, is_real, lambda r: next(it) if type(r) is not ARRAY
                                else _rows_of(r, it))

    # ---- second derivatives
    def hvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any, Any]:
        """``(f x, ∇f(x), H(x)·v)`` by forward-over-reverse (Pearlmutter 1994): one gradient
        computed in dual numbers."""
        (value, gradient), (_, product) = self.jvp(self._value_and_gradient(f), x, v)
        return value, gradient, product

    def value_and_gradient_image(self, f: Any, x: Any) -> Any:
        """The image under →D of ``\\y -> (f y, grad f y)`` (what :meth:`hvp` runs) for
        points like ``x``, by the strategy set, to be run by :meth:`run_forward_image`;
        None when it has none to keep: runs are instrumented, ``f`` has no target program,
        or making the image stamps a tape (it would embed a backpropagator of one run)."""
        interpreter = self.interpreter
        if interpreter.instrumented:
            return None
        tape = Tape()
        saved = interpreter.pin_tape(tape)
        try:
            image = interpreter.guarded(
                lambda: self.transform_function(self._value_and_gradient(f), FORWARD, None, x))
        except LambdadError:
            return None
        finally:
            interpreter.unpin_tape(saved)
        return image if tape.stamps == 0 else None

    def run_forward_image(self, image: Any, seeded: Any) -> tuple[Any, Any]:
        """The primal and the tangent of ``image`` (an image under →D without functions in
        its result) applied to the dual point ``seeded``: one differentiation, its reverse
        mode inside on a tape of its own, its costs recorded as :meth:`jvp` records them."""
        interpreter = self.interpreter
        outermost = self._begin_differentiation()
        try:
            tape = Tape()  # where the reverse mode inside runs
            saved = interpreter.pin_tape(tape)
            try:
                out = image(seeded)
            finally:
                interpreter.unpin_tape(saved)
            tape.release()
            self._costs.append((self._depth, FORWARD, 0, 0))  # (_record written out)
            return self._split_duals(out)
        finally:
            self._end_differentiation(outermost)

    def _value_and_gradient(self, f: Any) -> Any:
        """The function value ``\\y -> (f y, grad f y)``, written with ``vjp`` so that one
        run gives both: a closure of the interpreter, so differentiating it transforms its
        written-out program (AD.md section 9)."""
        return self._closure("value_and_gradient",
                             r"\y -> let (v, back) = vjp f y in (v, back 1)", f)

    def _gradient(self, f: Any) -> Any:
        """The function value ``\\y -> grad f y``."""
        return self._closure("gradient", r"\y -> grad f y", f)

    def _closure(self, name: str, source: str, *captured: Any) -> Any:
        """The closure of the λ ``source`` (parsed once) over ``f`` (and ``es``): a closure
        of the interpreter, so differentiating it transforms its written-out program."""
        key = ("closure", name)
        found = self._pieces.get(key)
        if found is None:
            term = parse_expr(source, "<differentiation>")
            names = ("f", "es")[:len(captured)]
            found = self._pieces.put(key, (term, self.interpreter.compile_open(term, names)))
        return found[1](*captured)

    def _directional_derivative(self, f: Any, direction: Any) -> Any:
        """The function value ``\\y -> snd (jvp f y es)`` for a scalar ``f`` and the
        direction ``es``."""
        return self._closure("directional derivative", r"\y -> (snd (jvp f y es) : R)", f,
                             direction)

    def _directional_derivatives(self, f: Any, directions: list[Any]) -> Any:
        """The function value ``\\y -> map (\\e -> snd (jvp f y e)) directions`` for a
        scalar ``f``."""
        return self._closure("directional", r"\y -> map (\e -> (snd (jvp f y e) : R)) es", f,
                             directions)

    def hessian_rows(self, f: Any, x: Any, mode: str = "forward-over-reverse") -> list[Any]:
        """The Hessian of ``f`` at ``x``: for each input real ``i`` (left to right) the
        gradient of ``∂f/∂x_i``, in the shape of ``x``.  ``mode`` is the composition:
        ``forward-over-reverse`` (n Hessian-vector products), ``reverse-over-reverse``,
        ``reverse-over-forward`` or ``forward-over-forward`` (n² directional runs)."""
        return self._one_guard(self._hessian_rows, f, x, mode)

    def _hessian_rows(self, f: Any, x: Any, mode: str) -> list[Any]:
        n = count_reals(x)
        rows = []
        pullback = None
        for i in range(n):
            e_i = basis(x, i)
            if mode == "forward-over-reverse":
                rows.append(self.jvp(self._gradient(f), x, e_i)[1])
            elif mode == "reverse-over-reverse":
                # e_i H is the pull-back of the gradient's map along e_i
                if pullback is None:
                    pullback = self.vjp(self._gradient(f), x)[1]
                rows.append(pullback(e_i))
            elif mode == "reverse-over-forward":
                rows.append(self.grad(self._directional_derivative(f, e_i), x)[1])
            elif mode == "forward-over-forward":
                # the derivative along e_i of the n directional derivatives ∂f/∂x_j
                derivatives = self._directional_derivatives(f, [basis(x, j) for j in range(n)])
                rows.append(replace_leaves(x, self.jvp(derivatives, x, e_i)[1]))
            else:
                raise DifferentiationError(f"unknown composition `{mode}`; use one of "
                                           + ", ".join(COMPOSITIONS))
        return rows


def _rows_of(output: Any, rows: Any) -> list[Any]:
    """The next ``output.size`` of ``rows`` (one per element of the array ``output``) as a
    list in its shape (a list of lists for a Mat)."""
    if output.ndim == 1:
        return [next(rows) for _ in range(output.shape[0])]
    return [[next(rows) for _ in range(output.shape[1])] for _ in range(output.shape[0])]


COMPOSITIONS = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward",
                "forward-over-forward")
"""The ways to compute second derivatives: outer mode over inner mode."""


PULLBACK_TERM = r"\c -> snd (vjp f x) c"
"""The program a pull-back of ``f`` at ``x`` computes (what differentiating it transforms)."""


def _part_term(path: tuple[tuple[bool, int], ...], primal: bool) -> Term:
    """``\\a -> (f x)@path a`` (``primal``) or ``\\a -> snd (jvp (\\y -> (f y)@path a) x
    v)``, ``@path`` selecting by ``fst``/``snd`` in pairs and ``!!`` in lists (each step of
    ``path`` is whether it is in a list, and the position)."""

    def at(point: str) -> str:
        selected = f"f {point}"
        for in_list, index in path:
            selected = (f"({selected}) !! {index}" if in_list
                        else f"{'fst' if index == 0 else 'snd'} ({selected})")
        return f"({selected}) a"

    if primal:
        return parse_expr(f"\\a -> {at('x')}", "<differentiation>")
    return parse_expr(f"\\a -> snd (jvp (\\y -> {at('y')}) x v)", "<differentiation>")


def _require_differentiable_input(x: Any) -> None:
    if callable(x) and not isinstance(x, Backprop):
        raise DifferentiationError(
            "cannot differentiate with respect to a function-typed input: the point must be "
            "built from reals, pairs and lists")

