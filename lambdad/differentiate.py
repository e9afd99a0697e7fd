"""Differentiating function *values*: what ``grad``, ``jvp`` and ``vjp`` do at run time.

A function value is a closure built by the interpreter: a λ-term plus its captured
environment (or a built-in applied to some arguments).  To differentiate it (AD.md section 6)
we transform its λ-term with →D or ←D (once per term, cached), embed the captured environment
into the transformed world — reals become constants ``(r, 0)`` / ``(r, \\a -o zero)``,
closures are transformed in turn — seed the argument, apply, and read off.

This module is where the transformations meet the interpreter; neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from . import backward as backward_mode
from . import forward as forward_mode
from .errors import DifferentiationError
from .interpreter import Interpreter
from .syntax import Builtin, Lam, Term
from .values import Backprop, Call, Tape, add_cotangents, all_reals, function_parts

FORWARD = "forward"
REVERSE = "reverse"


@attrs.frozen
class Stats:
    """What one reverse-mode run cost: backpropagators created and bodies run."""

    created: int
    bodies_run: int

    def __str__(self) -> str:
        return (f"backpropagators created: {self.created}\n"
                f"backpropagator bodies run: {self.bodies_run}")


# ---------------------------------------------------------------- walking runtime values


def map_value(value: Any, is_leaf: Callable[[Any], bool], on_leaf: Callable[[Any], Any]) -> Any:
    """``value`` rebuilt with every leaf (``is_leaf``) replaced by ``on_leaf(leaf)``, left to
    right; pairs and lists are rebuilt, anything else is kept.  Iterative: a stack of the
    containers being rebuilt, each scanned by a plain loop (a flat list is one loop)."""
    if is_leaf(value):
        return on_leaf(value)
    if type(value) is not tuple and type(value) is not list:
        return value
    # (container, its rebuilt items so far)
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while True:
        source, built = stack[-1]
        for index in range(len(built), len(source)):
            item = source[index]
            if is_leaf(item):
                built.append(on_leaf(item))
            elif type(item) is tuple or type(item) is list:
                stack.append((item, []))
                break
            else:
                built.append(item)
        else:
            stack.pop()
            done = built if type(source) is list else tuple(built)
            if not stack:
                return done
            stack[-1][1].append(done)


def zip_values(left: Any, right: Any, is_leaf: Callable[[Any], bool]) -> Iterator[tuple[Any, Any]]:
    """Pairs of corresponding leaves of two values of the same shape (leaves of ``left``);
    raises ValueError when the shapes differ."""
    stack = [(left, right)]
    while stack:
        a, b = stack.pop()
        if is_leaf(a):
            yield a, b
        elif isinstance(a, tuple):
            if not isinstance(b, tuple):
                raise ValueError("shape mismatch")
            stack.extend(((a[1], b[1]), (a[0], b[0])))
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                raise ValueError("shape mismatch")
            stack.extend(reversed(list(zip(a, b))))


def is_real(v: Any) -> bool:
    return type(v) is float


def is_dual(v: Any) -> bool:
    """A forward-mode real ``(r, r')``: in →D(A) every real of A is a pair of two floats,
    and nothing else is (a source pair of reals becomes a pair of pairs)."""
    return type(v) is tuple and type(v[0]) is float and type(v[1]) is float


def is_reverse_real(v: Any) -> bool:
    """A reverse-mode real ``(r, r_)``: a float paired with its backpropagator."""
    return type(v) is tuple and type(v[0]) is float and isinstance(v[1], Backprop)


def count_reals(value: Any) -> int:
    """How many reals the value ``value`` holds (in pairs and lists)."""
    if type(value) is list and all_reals(value):
        return len(value)
    count = 0

    def tally(_):
        nonlocal count
        count += 1
        return _

    map_value(value, is_real, tally)
    return count


def _is_flat_reals(value: Any) -> bool:
    """Whether ``value`` is a list of reals (the common point, seeded and read by a loop)."""
    return type(value) is list and all_reals(value)


# ---------------------------------------------------------------- the differentiator


class Differentiator:
    """Runs →D / ←D versions of function values on an interpreter.

    ``strategy`` (``"factored"`` or ``"naive"``) is how backpropagators are evaluated;
    ``last_stats`` is the cost of the most recent reverse-mode run.
    """

    def __init__(self, interpreter: Interpreter, strategy: str = "factored"):
        self.interpreter = interpreter
        self.strategy = strategy
        self.last_stats: Stats | None = None
        # (mode, id(λ-term)) -> (λ-term kept alive, function of the captured values)
        self._compiled: dict[tuple[str, int], tuple[Term, Callable[..., Any]]] = {}

    # ---- hooks for the interpreter's `grad`, `jvp`, `vjp` primitives
    def hooks(self) -> dict[str, Callable[..., Any]]:
        return {
            "grad": lambda f, x: self.grad(f, x)[1],
            "jvp": lambda f, x, v: self.jvp(f, x, v),
            "vjp": lambda f, x: self.vjp(f, x),
        }

    # ---- transforming function values
    def _transformer(self, mode: str) -> Callable[[Term], Term]:
        return forward_mode.forward_term if mode == FORWARD else backward_mode.backward_term

    def _compiled_lambda(self, lam: Lam, names: tuple[str, ...], mode: str) -> Callable[..., Any]:
        key = (mode, id(lam), names)
        entry = self._compiled.get(key)
        if entry is None:
            transformed = self._transformer(mode)(lam)
            entry = (lam, self.interpreter.compile_open(transformed, names))
            self._compiled[key] = entry
        return entry[1]

    def transform_value(self, value: Any, mode: str, tape: Tape | None) -> Any:
        """``value`` embedded into the →D / ←D world as a constant: reals get a zero
        tangent / a zero backpropagator, functions are transformed."""

        def constant(r: float):
            if mode == FORWARD:
                return (r, 0.0)
            return (r, tape.constant())

        def leaf(v: Any) -> bool:
            return type(v) is float or callable(v) or isinstance(v, Backprop)

        def embed(v: Any) -> Any:
            if type(v) is float:
                return constant(v)
            if isinstance(v, Backprop):
                raise DifferentiationError(
                    "a backpropagator cannot be differentiated again (nested differentiation "
                    "is not supported)")
            return self.transform_function(v, mode, tape)

        return map_value(value, leaf, embed)

    def transform_function(self, f: Any, mode: str, tape: Tape | None) -> Any:
        """The →D / ←D image of the function value ``f`` (AD.md section 6)."""
        parts = function_parts(f)
        if parts is None:
            raise DifferentiationError(
                "this function cannot be differentiated: it was made by the runtime "
                "(e.g. a pull-back returned by vjp); nested differentiation is not supported")
        if parts.lam is not None:
            names = tuple(parts.captured)
            make = self._compiled_lambda(parts.lam, names, mode)
            env = [self.transform_value(parts.captured[name], mode, tape) for name in names]
            return make(*env)
        transformed = self._transformer(mode)(Builtin(parts.builtin))
        g = self.interpreter.evaluate(transformed, {})
        for arg in parts.args:
            g = self.interpreter.apply(g, self.transform_value(arg, mode, tape))
        return g

    # ---- reverse mode
    def grad(self, f: Any, x: Any, strategy: str | None = None) -> tuple[float, Any]:
        """``(f x, ∇f(x))`` by backpropagation; the gradient has the shape of ``x``.
        Raises DifferentiationError if ``f x`` is not a real."""
        # One guarded run for seeding, both phases and the read-off: the tape's objects are
        # never rescanned by the cyclic collector between them.
        return self.interpreter.guarded(self._grad, f, x, strategy)

    def _grad(self, f: Any, x: Any, strategy: str | None) -> tuple[float, Any]:
        tape = Tape()
        with self.interpreter.using_tape(tape):
            seeded = self._seed(x, tape)
            g = self.transform_function(f, REVERSE, tape)
            out = self.interpreter.apply(g, seeded)
        if not is_reverse_real(out):
            raise DifferentiationError("grad needs a function whose result is a real")
        value, back = out
        adjoints = self._backward(tape, back(1.0), strategy)
        tape.release()  # the run is over: its seeds need not wait for the cyclic collector
        return value, self._read_off(x, adjoints)

    def vjp(self, f: Any, x: Any) -> tuple[Any, Callable[[Any], Any]]:
        """``(f x, pull-back)``: the pull-back maps a cotangent of the result's shape to one
        of ``x``'s shape, and may be called any number of times."""
        tape = Tape()
        with self.interpreter.using_tape(tape):
            seeded = self._seed(x, tape)
            g = self.transform_function(f, REVERSE, tape)
            out = self.interpreter.apply(g, seeded)
        value = self._primal(out, is_reverse_real)
        strategy = self.strategy

        def pullback(cotangent: Any) -> Any:
            total = None
            try:
                for (_, back), c in zip_values(out, cotangent, is_reverse_real):
                    total = add_cotangents(total, Call(back, float(c)))
            except (ValueError, TypeError, IndexError):
                raise DifferentiationError(
                    "the cotangent given to a pull-back must have the shape of the function's "
                    "result") from None
            return self._read_off(x, self._backward(tape, total, strategy))

        return value, pullback

    def _seed(self, x: Any, tape: Tape) -> Any:
        """``x`` with its i-th real ``r`` (left to right) replaced by ``(r, seed i)`` and its
        functions transformed."""
        if _is_flat_reals(x):
            return list(zip(x, tape.seeds(0, len(x))))
        index = 0

        def seed(r: float):
            nonlocal index
            pair = (r, tape.seed(index))
            index += 1
            return pair

        def leaf(v: Any) -> bool:
            return type(v) is float or callable(v)

        def embed(v: Any):
            return seed(v) if type(v) is float else self.transform_function(v, REVERSE, tape)

        return map_value(x, leaf, embed)

    def _backward(self, tape: Tape, cotangent: Any, strategy: str | None) -> dict[int, float]:
        with self.interpreter.using_tape(tape):
            adjoints = self.interpreter.backward(cotangent, strategy or self.strategy)
        self.last_stats = Stats(tape.created, tape.bodies_run)
        return adjoints

    @staticmethod
    def _read_off(x: Any, adjoints: dict[int, float]) -> Any:
        """The gradient in the shape of ``x``: its i-th real replaced by the i-th adjoint
        (0 if the seed was never reached)."""
        if _is_flat_reals(x):
            get = adjoints.get
            return [get(i, 0.0) for i in range(len(x))]
        index = 0

        def adjoint(_: float) -> float:
            nonlocal index
            value = adjoints.get(index, 0.0)
            index += 1
            return value

        return map_value(x, is_real, adjoint)

    @staticmethod
    def _primal(out: Any, is_leaf: Callable[[Any], bool]) -> Any:
        if callable(out) and not isinstance(out, Backprop):
            raise DifferentiationError("cannot differentiate a function whose result is a function")
        return map_value(out, is_leaf, lambda pair: pair[0])

    # ---- forward mode
    def jvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        """``(f x, ∂f(x)·v)`` by dual numbers; ``v`` has the shape of ``x``."""
        tangents = iter(self._tangent_list(x, v))
        seeded = map_value(x, lambda leaf: type(leaf) is float or callable(leaf),
                           lambda leaf: (leaf, next(tangents)) if type(leaf) is float
                           else self.transform_function(leaf, FORWARD, None))
        g = self.transform_function(f, FORWARD, None)
        out = self.interpreter.apply(g, seeded)
        return self._primal(out, is_dual), map_value(out, is_dual, lambda pair: pair[1])

    @staticmethod
    def _tangent_list(x: Any, v: Any) -> list[float]:
        try:
            pairs = list(zip_values(x, v, is_real))
        except (ValueError, TypeError, IndexError):
            pairs = None
        if pairs is None or not all(type(t) is float for _, t in pairs):
            raise DifferentiationError("the direction given to jvp must have the shape of the point")
        return [t for _, t in pairs]

    def forward_grad(self, f: Any, x: Any) -> tuple[float, Any]:
        """``(f x, ∇f(x))`` by forward mode: one run per input real, seeding it with 1."""
        n = count_reals(x)
        value = None
        columns: list[float] = []
        for i in range(n):
            position = 0

            def basis(_: float) -> float:
                nonlocal position
                t = 1.0 if position == i else 0.0
                position += 1
                return t

            direction = map_value(x, is_real, basis)
            value, tangent = self.jvp(f, x, direction)
            if type(tangent) is not float:
                raise DifferentiationError("grad needs a function whose result is a real")
            columns.append(tangent)
        if n == 0:
            value, _ = self.jvp(f, x, x)
        it = iter(columns)
        return value, map_value(x, is_real, lambda _: next(it))
