"""Runtime values of lambdad, the backward phase of backpropagation, and value printing.

Values are plain Python data, so generated code and the AD glue handle them without
wrapping:

=================  ==========================================================
``R``              ``float`` (always a float, never an int)
``Bool``           ``bool``
``A * B``          a 2-tuple; ``(a, b, c)`` is ``(a, (b, c))``
``[A]``            a ``list``
``A -> B``         a Python callable of one argument (curried); closures are
                   ``functools.partial`` objects over lambda-lifted functions,
                   built-ins are :class:`BuiltinFunction` (:func:`function_parts`)
``R -o d``         a :class:`Backprop` (a backpropagator, AD.md section 5)
``d``              cotangent *data*: ``None`` (zero), :class:`Call`, :class:`Sum`
=================  ==========================================================

Applying a backpropagator never runs it.  Inside a compiled linear body of the usual shape
(a sum of applications, what ←D builds) an application ``g e`` is a call
``stage(g, e)`` of the function the backward phase passes to the body; anywhere else it
returns the call :class:`Call` as data, which the backward phase walks and stages alike.
:func:`backward` runs the bodies, either once per backpropagator in decreasing stamp order
(``factored``, BMP's linear factoring: staging adds into an array indexed by stamp) or
once per call (``naive``: staging queues the call to run next).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs

from .errors import DifferentiationError, Span, UsageError
from .primitives import Primitive
from .syntax import BoolT, FunT, Lam, ListT, PairT, Prim, RealT, Type, VarT

STRATEGIES = ("factored", "naive")


# --------------------------------------------------------------------------- cotangents


class Backprop:
    """A backpropagator ``\\a -o e`` of type ``R -o d``, with its creation stamp.

    Its body is the lifted function ``function(captured, a, stage)``: ``captured`` is the
    tuple of values the body closes over, ``a`` the cotangent it is run with, and
    ``stage(g, b)`` hands the application ``g b`` to the backward phase.  A body returns
    the cotangent data it did not stage (``None`` when it staged everything).  Seeds
    (:class:`SeedBackprop`) and the zero backpropagator of a tape (:meth:`Tape.constant`)
    have no function.  ``tape`` is the :class:`Tape` that stamped it.

    Generated code makes these with ``object.__new__`` and five slot stores, which costs
    less than a call of ``__init__`` (this runs once per primitive of a reverse-mode
    program); ``__init__`` is for everything else.
    """

    __slots__ = ("stamp", "function", "captured", "span", "tape")

    seed_index: int | None = None  # which input real a seed stands for (SeedBackprop)

    def __init__(self, stamp: int, function: Callable[..., Any] | None, captured: tuple,
                 span: Span | None, tape: "Tape | None" = None):
        self.stamp = stamp
        self.function = function
        self.captured = captured
        self.span = span
        self.tape = tape

    def __call__(self, a: float) -> "Call":
        # Applied as a value (outside a staging body) it returns the call as data;
        # :func:`backward` decides when bodies run.
        return Call(self, a)

    def run(self, a: float, stage: Callable[["Backprop", float], None] | None = None) -> Any:
        """The body with ``a`` bound: the cotangent data it returns (calls it stages are
        returned as data too when ``stage`` is not given).  ``None`` for a seed or zero."""
        if self.function is None:
            return None
        if stage is not None:
            return self.function(self.captured, a, stage)
        staged: list[Any] = []
        rest = self.function(self.captured, a, lambda g, b: staged.append(g(b)))
        for call in staged:
            rest = add_cotangents(rest, call)
        return rest

    def __repr__(self) -> str:
        return f"<backpropagator #{self.stamp}>"


class SeedBackprop(Backprop):
    """``seed i``: the backpropagator of the i-th input real (``seed_index = i``); what is
    sent to it is that input's adjoint."""

    __slots__ = ("seed_index",)

    def __init__(self, stamp: int, seed_index: int, span: Span | None, tape: "Tape"):
        self.stamp = stamp
        self.function = None
        self.captured = ()
        self.span = span
        self.tape = tape
        self.seed_index = seed_index


class ConstantBackprop(Backprop):
    """``\\a -o zero`` evaluated by an instrumented run: a backpropagator of its own, stamped
    and reported (``BackpropCreated``, and ``BackpropRun`` with what reached it) like any
    other, so traces show the adjoints of constant sub-expressions; it has no body, and like
    the shared zero it is not counted as created."""

    __slots__ = ()


class Call:
    """The cotangent ``g a``: backpropagator ``g`` applied to the real ``a`` (as data)."""

    __slots__ = ("backprop", "cotangent")

    def __init__(self, backprop: Backprop, cotangent: float):
        self.backprop = backprop
        self.cotangent = cotangent

    def __repr__(self) -> str:
        return f"Call({self.backprop!r}, {self.cotangent!r})"


class Sum:
    """The cotangent ``e1 <+> e2``; neither side is ``None`` (see :func:`add_cotangents`)."""

    __slots__ = ("left", "right")

    def __init__(self, left: Any, right: Any):
        self.left = left
        self.right = right

    def __repr__(self) -> str:
        return f"Sum({self.left!r}, {self.right!r})"


def add_cotangents(left: Any, right: Any) -> Any:
    """``left <+> right`` as cotangent data; ``zero`` (``None``) sides are dropped."""
    if left is None:
        return right
    if right is None:
        return left
    return Sum(left, right)


def _run_data_body(captured: tuple, a: float, stage: Any) -> Any:
    """The body of a backpropagator made by :meth:`Tape.backprop` from a Python function."""
    return captured[0](a)


class Tape:
    """The bookkeeping of one differentiation run.

    ``stamps`` is the creation-stamp counter (stamps are dense: ``0 .. stamps - 1``, and only
    increase); ``created`` counts backpropagators with a body (not seeds, not zeros),
    ``bodies_run`` the bodies run by :func:`backward`.  Seeds are made once per index and
    shared; so is the zero backpropagator (AD.md section 3: every constant may share one),
    except that instrumented runs give each constant its own.  ``bodiless`` counts the
    stamps of seeds and zeros.
    """

    __slots__ = ("stamps", "bodies_run", "bodiless", "_seeds", "_zero")

    def __init__(self) -> None:
        self.stamps = 0
        self.bodies_run = 0
        self.bodiless = 0
        self._seeds: dict[int, Backprop] = {}
        self._zero: Backprop | None = None

    @property
    def created(self) -> int:
        """How many backpropagators with a body were stamped (seeds and zeros are not)."""
        # Derived rather than counted, so generated code only bumps ``stamps``.
        return self.stamps - self.bodiless

    def release(self) -> None:
        """Forgets the seeds and the zero of a finished run: they refer back to the tape, and
        without this cycle reference counting frees them at once.  Counts are kept."""
        self._seeds = {}
        self._zero = None

    def next_stamp(self) -> int:
        """A fresh creation stamp, larger than every earlier one."""
        stamp = self.stamps
        self.stamps = stamp + 1
        return stamp

    def backprop(self, body: Callable[[float], Any], span: Span | None = None) -> Backprop:
        """A new backpropagator with the next stamp (counted in ``created``) whose body is
        ``body(a)``, returning cotangent data."""
        stamp = self.stamps
        self.stamps = stamp + 1
        return Backprop(stamp, _run_data_body, (body,), span, self)

    def seed(self, index: int, span: Span | None = None) -> Backprop:
        """``seed index``: the backpropagator of the index-th input real, the same object on
        every request."""
        found = self._seeds.get(index)
        if found is None:
            found = SeedBackprop(self.next_stamp(), index, span, self)
            self._seeds[index] = found
            self.bodiless += 1
        return found

    def seeds(self, first: int, count: int) -> list[Backprop]:
        """``seed first`` ... ``seed (first + count - 1)``, made in that order if new."""
        seeds = self._seeds
        if seeds:
            return [self.seed(first + i) for i in range(count)]
        stamp = self.stamps
        made = []
        new = object.__new__  # as generated code does (see Backprop): one per input real
        for i in range(count):
            seed = new(SeedBackprop)
            seed.stamp, seed.function, seed.captured = stamp + i, None, ()
            seed.span, seed.tape, seed.seed_index = None, self, first + i
            made.append(seed)
        self.stamps = stamp + count
        self.bodiless += count
        seeds.update(zip(range(first, first + count), made))
        return made

    def own_constant(self, span: Span | None) -> ConstantBackprop:
        """A stamped ``\\a -o zero`` of its own, for instrumented runs (not ``created``)."""
        self.bodiless += 1
        return ConstantBackprop(self.next_stamp(), None, (), span, self)

    def constant(self) -> Backprop:
        """``\\a -o zero``, shared by every constant of this run (its calls are dropped)."""
        zero = self._zero
        if zero is None:
            zero = self._zero = Backprop(self.next_stamp(), None, (), None, self)
            self.bodiless += 1
        return zero


# --------------------------------------------------------------------------- nesting levels


FORWARD_LEVEL = "forward"
REVERSE_LEVEL = "reverse"


class Level:
    """One differentiation that runs the function itself on tagged reals (AD.md section 9):
    the differentiation of a function that in turn differentiates (or that cannot be
    transformed, such as a pull-back).  The reals it perturbs are :class:`Dual` (forward)
    or :class:`Reverse` values carrying this level, so a real of another level can never be
    mistaken for one of this level (Siskind and Pearlmutter's tags); ``order`` says which
    of two levels was opened later (the inner one).

    A reverse level is a tape: ``nodes[i]`` lists the ``(parent index, partial)`` edges of
    the i-th tagged real (inputs have none).  ``arithmetic`` adds and multiplies reals of
    any level (it is the interpreter's, see :meth:`Interpreter.tagged_arithmetic`).
    ``created`` and ``bodies_run`` count the nodes with edges and the nodes the backward
    phase ran (each once when factored).
    """

    __slots__ = ("order", "mode", "arithmetic", "nodes", "bodies_run", "on_run")

    def __init__(self, order: int, mode: str, arithmetic: "Arithmetic"):
        self.order = order
        self.mode = mode
        self.arithmetic = arithmetic
        self.nodes: list[tuple[tuple[int, Any], ...]] = []
        self.bodies_run = 0
        # Told (node, cotangent) each time the backward phase runs a node (traces).
        self.on_run: Callable[[int, Any], None] | None = None

    @property
    def created(self) -> int:
        return sum(1 for edges in self.nodes if edges)

    def input(self, value: Any) -> "Reverse":
        """A new input real of this (reverse) level: a node without edges."""
        self.nodes.append(())
        return Reverse(self, value, len(self.nodes) - 1)

    def record(self, value: Any, edges: tuple[tuple[int, Any], ...]) -> "Reverse":
        """The tagged real ``value`` whose adjoint flows to each ``(parent, partial)``."""
        self.nodes.append(edges)
        return Reverse(self, value, len(self.nodes) - 1)

    def backward(self, seeds: list[tuple[int, Any]], strategy: str) -> dict[int, Any]:
        """The adjoint of every node reached from the ``(node, cotangent)`` seeds.

        ``factored`` runs each node's edges once, newest first, with the sum of what reached
        it (BMP linear factoring on this level's tape); ``naive`` runs them once per path.
        Adjoints may be reals of outer levels: the arithmetic is generic.  No recursion.
        """
        add, multiply = self.arithmetic.add, self.arithmetic.multiply
        nodes = self.nodes
        adjoints: dict[int, Any] = {}
        ran = 0
        if strategy == "naive":
            work = list(reversed(seeds))
            while work:
                index, a = work.pop()
                edges = nodes[index]
                if not edges:
                    adjoints[index] = a if index not in adjoints else add(adjoints[index], a)
                    continue
                ran += 1
                if self.on_run is not None:
                    self.on_run(index, a)
                work.extend((parent, multiply(partial, a)) for parent, partial in reversed(edges))
        elif strategy == "factored":
            for index, a in seeds:
                adjoints[index] = a if index not in adjoints else add(adjoints[index], a)
            top = max((index for index, _ in seeds), default=-1)
            for index in range(top, -1, -1):
                edges = nodes[index]
                if not edges or index not in adjoints:
                    continue
                a = adjoints.pop(index)
                ran += 1
                if self.on_run is not None:
                    self.on_run(index, a)
                for parent, partial in edges:
                    c = multiply(partial, a)
                    adjoints[parent] = c if parent not in adjoints else add(adjoints[parent], c)
        else:
            raise UsageError(f"unknown strategy `{strategy}`; use factored or naive")
        self.bodies_run += ran
        return adjoints


class Arithmetic:
    """Addition and multiplication of reals of any level, for the backward phase of tagged
    levels and the operators of tagged reals (an interpreter provides ``apply_real``)."""

    __slots__ = ("apply_real", "plus", "times", "minus", "divide", "negate")

    def __init__(self, apply_real: Callable[[Primitive, tuple], Any], plus: Primitive,
                 times: Primitive, minus: Primitive, divide: Primitive, negate: Primitive):
        self.apply_real = apply_real
        self.plus, self.times, self.minus = plus, times, minus
        self.divide, self.negate = divide, negate

    def add(self, x: Any, y: Any) -> Any:
        """``x + y``; dual numbers over floats are added componentwise at once (the ring's
        addition), everything else by the chain rule of ``+``."""
        kind_x, kind_y = type(x), type(y)
        if kind_x is float and kind_y is float:
            return x + y
        if kind_x is Dual and kind_y is Dual and x.level is y.level:
            if (type(x.primal) is float and type(y.primal) is float
                    and type(x.tangent) is float and type(y.tangent) is float):
                return Dual(x.level, x.primal + y.primal, x.tangent + y.tangent)
        elif kind_x is Dual and kind_y is float:
            if type(x.primal) is float:
                return Dual(x.level, x.primal + y, x.tangent)
        elif kind_y is Dual and kind_x is float:
            if type(y.primal) is float:
                return Dual(y.level, x + y.primal, y.tangent)
        return self.apply_real(self.plus, (x, y))

    def multiply(self, x: Any, y: Any) -> Any:
        """``x * y``; a dual number over floats times a float scales both components."""
        kind_x, kind_y = type(x), type(y)
        if kind_x is float and kind_y is float:
            return x * y
        if kind_x is Dual and kind_y is float:
            if type(x.primal) is float and type(x.tangent) is float:
                return Dual(x.level, x.primal * y, x.tangent * y)
        elif kind_y is Dual and kind_x is float:
            if type(y.primal) is float and type(y.tangent) is float:
                return Dual(y.level, x * y.primal, x * y.tangent)
        return self.apply_real(self.times, (x, y))


class Tagged:
    """A real perturbed by a :class:`Level`: arithmetic operators go through the level's
    generic arithmetic (so compiled backpropagator bodies and the backward phase of a
    transformed run accept them as cotangents); comparisons look at the plain value."""

    __slots__ = ("level", "primal")

    def _apply(self, primitive: Primitive, args: tuple) -> Any:
        return self.level.arithmetic.apply_real(primitive, args)

    def __add__(self, other):
        return self.level.arithmetic.add(self, other)

    def __radd__(self, other):
        return self.level.arithmetic.add(other, self)

    def __sub__(self, other):
        return self._apply(self.level.arithmetic.minus, (self, other))

    def __rsub__(self, other):
        return self._apply(self.level.arithmetic.minus, (other, self))

    def __mul__(self, other):
        return self.level.arithmetic.multiply(self, other)

    def __rmul__(self, other):
        return self.level.arithmetic.multiply(other, self)

    def __truediv__(self, other):
        return self._apply(self.level.arithmetic.divide, (self, other))

    def __rtruediv__(self, other):
        return self._apply(self.level.arithmetic.divide, (other, self))

    def __neg__(self):
        return self._apply(self.level.arithmetic.negate, (self,))

    def __lt__(self, other):
        return plain_real(self) < plain_real(other)

    def __le__(self, other):
        return plain_real(self) <= plain_real(other)

    def __gt__(self, other):
        return plain_real(self) > plain_real(other)

    def __ge__(self, other):
        return plain_real(self) >= plain_real(other)

    def __eq__(self, other):
        return plain_real(self) == plain_real(other)

    def __ne__(self, other):
        return plain_real(self) != plain_real(other)

    __hash__ = None  # type: ignore[assignment]


class Dual(Tagged):
    """A real of a forward level: ``primal + tangent·ε`` for the level's ε."""

    __slots__ = ("tangent",)

    def __init__(self, level: Level, primal: Any, tangent: Any):
        self.level = level
        self.primal = primal
        self.tangent = tangent

    def __repr__(self) -> str:
        return f"Dual#{self.level.order}({self.primal!r}, {self.tangent!r})"


class Reverse(Tagged):
    """A real of a reverse level: its value and its node on the level's tape."""

    __slots__ = ("index",)

    def __init__(self, level: Level, primal: Any, index: int):
        self.level = level
        self.primal = primal
        self.index = index

    def __repr__(self) -> str:
        return f"Reverse#{self.level.order}({self.primal!r}, node {self.index})"


SCALAR_TYPES = frozenset((float, Dual, Reverse))
"""The runtime types of a value of type ``R``: a float, or a real of a nesting level."""


def is_scalar(v: Any) -> bool:
    """Whether ``v`` is a real: a float or a tagged real of some nesting level."""
    return type(v) in SCALAR_TYPES


def plain_real(v: Any) -> float:
    """The float under every level's perturbation of the real ``v``."""
    while type(v) is not float:
        if isinstance(v, Tagged):
            v = v.primal
        else:
            return v
    return v


# --------------------------------------------------------------------------- events


@attrs.frozen
class PrimEvent:
    """One primitive evaluation: ``prim`` is the table entry, ``term`` the ``Prim`` node
    (``None`` for a built-in used as a value), ``args`` the argument values."""

    prim: Primitive
    span: Span | None
    args: tuple
    result: Any
    term: Prim | None = None


@attrs.frozen
class BackpropCreated:
    """A linear abstraction ``\\a -o e`` was evaluated and received ``stamp``."""

    stamp: int
    span: Span | None


@attrs.frozen
class BackpropRun:
    """The backward phase ran the body of backpropagator ``stamp`` with ``cotangent``."""

    stamp: int
    span: Span | None
    cotangent: float


# --------------------------------------------------------------------------- backward phase


def _foreign(backprop: Backprop) -> DifferentiationError:
    return DifferentiationError(
        "a backpropagator of another differentiation reached this backward phase "
        "(nested differentiation of this kind is not supported)", backprop.span)


def _created_late() -> DifferentiationError:
    return DifferentiationError("a backpropagator was created during the backward phase")


def backward(tape: Tape, cotangent: Any, strategy: str = "factored",
             on_event: Callable[[Any], None] | None = None) -> dict[int, float]:
    """The adjoint of every seed reached by the cotangent data ``cotangent``, by seed index.

    ``factored`` runs each pending backpropagator's body once, largest stamp first, with the
    sum of what was sent to it (BMP linear factoring); ``naive`` runs a body per call.
    Bodies stage the applications they make through the ``stage`` function they are given
    (compiled linear bodies), or return them as cotangent data (any other body), which is
    walked and staged alike.  Counts bodies in ``tape.bodies_run`` and reports each as a
    :class:`BackpropRun` event.  Raises UsageError for an unknown strategy,
    DifferentiationError if a backpropagator of another tape is reached or one is created
    while bodies run.  No recursion: work stacks and stamp-indexed arrays.
    """
    if strategy == "factored":
        return _backward_factored(tape, cotangent, on_event)
    if strategy == "naive":
        return _backward_naive(tape, cotangent, on_event)
    raise UsageError(f"unknown strategy `{strategy}`; use factored or naive")


def _calls(data: Any, into: Callable[[Any, float], Any]) -> None:
    """Hands every call ``g a`` of the cotangent data ``data`` to ``into(g, a)``, left to
    right.  Raises TypeError on anything that is not cotangent data."""
    work: list[Any] = []
    while True:
        kind = type(data)
        if kind is Call:
            into(data.backprop, data.cotangent)
        elif kind is Sum:
            work.append(data.right)
            data = data.left
            continue
        elif data is not None:
            raise TypeError(f"not cotangent data: {data!r}")
        if not work:
            return
        data = work.pop()


def _backward_factored(tape: Tape, cotangent: Any, on_event) -> dict[int, float]:
    n = tape.stamps
    acc = [0.0] * n  # stamp -> sum of the cotangents sent to it (linear factoring)
    pending: list[Backprop | None] = [None] * n  # stamp -> backpropagator, once sent to
    late: dict[int, float] = {}  # adjoints of seeds made after the phase began

    def stage(g: Backprop, a: float) -> None:
        # Linear factoring: `g u <+> g v` becomes one run of g's body with u + v.
        try:
            if g.tape is not tape:
                raise _foreign(g)
            s = g.stamp
            acc[s] += a
            pending[s] = g
        except AttributeError:
            # Not a backpropagator: a function into d, applied; walk what it returns.
            _calls(g(a), stage)
        except IndexError:
            # Stamped after the phase began: fine for seeds (read directly) and the zero.
            if g.function is not None:
                raise _created_late() from None
            if g.seed_index is not None:
                late[g.seed_index] = late.get(g.seed_index, 0.0) + a

    ran = 0
    try:
        _calls(cotangent, stage)
        # Largest stamp first: a body only sends to older backpropagators, so nothing is
        # added to a backpropagator once it has run.  Seeds and the zero have no body; what
        # reaches a seed is read off at the end.
        for s in range(n - 1, -1, -1):
            g = pending[s]
            if g is None:
                continue
            function = g.function
            if function is None:
                if on_event is not None and type(g) is ConstantBackprop:
                    on_event(BackpropRun(s, g.span, acc[s]))
                continue
            ran += 1
            a = acc[s]
            if on_event is not None:
                on_event(BackpropRun(s, g.span, a))
            rest = function(g.captured, a, stage)
            if rest is not None:
                _calls(rest, stage)
    finally:
        tape.bodies_run += ran
        # `stage` refers to itself: unbound, it no longer keeps every backpropagator alive
        # until the cyclic collector runs.
        stage = None
    adjoints: dict[int, float] = {}
    for index, seed in tape._seeds.items():
        s = seed.stamp
        if s < n and pending[s] is not None:
            adjoints[index] = acc[s]
    adjoints.update(late)
    return adjoints


def _backward_naive(tape: Tape, cotangent: Any, on_event) -> dict[int, float]:
    adjoints: dict[int, float] = {}
    staged: list[tuple[Backprop, float]] = []

    def stage(g: Backprop, a: float) -> None:
        if isinstance(g, Backprop):
            staged.append((g, a))
        else:  # a function into d, applied: stage the calls it returns
            _calls(g(a), stage)

    # Calls still to run, the next one last: each body's calls run right after it, left to
    # right, so a backpropagator sent to k times runs k times.
    work: list[tuple[Backprop, float]] = []
    ran = 0
    try:
        _calls(cotangent, stage)
        work.extend(reversed(staged))
        staged.clear()
        while work:
            g, a = work.pop()
            if g.tape is not tape:
                raise _foreign(g)
            function = g.function
            if function is None:
                if g.seed_index is not None:
                    adjoints[g.seed_index] = adjoints.get(g.seed_index, 0.0) + a
                elif on_event is not None and type(g) is ConstantBackprop:
                    on_event(BackpropRun(g.stamp, g.span, a))
                continue
            ran += 1
            if on_event is not None:
                on_event(BackpropRun(g.stamp, g.span, a))
            rest = function(g.captured, a, stage)
            if rest is not None:
                _calls(rest, stage)
            if staged:
                work.extend(reversed(staged))
                staged.clear()
    finally:
        tape.bodies_run += ran
        stage = None  # it refers to itself (see _backward_factored)
    return adjoints


# --------------------------------------------------------------------------- value shapes


def map_leaves(value: Any, replace: Callable[[Any], tuple[bool, Any]],
               pair: type = tuple) -> Any:
    """``value`` rebuilt bottom-up: ``replace(v)`` is asked first about every sub-value, left
    to right in pre-order; ``(True, w)`` puts ``w`` in its place, ``(False, _)`` descends
    into pairs and lists (anything else is kept).  Pairs are rebuilt with ``pair`` (``list``
    for JSON).  Iterative, so deep and long values work.
    """
    built: list[Any] = []
    # Work items: (value, None) to visit, or (container type, length) to assemble.
    work: list[tuple[Any, Any]] = [(value, None)]
    while work:
        item, assemble = work.pop()
        if assemble is not None:
            count = assemble
            parts = built[len(built) - count:] if count else []
            del built[len(built) - count:]
            built.append(pair(parts) if item is tuple else parts)
            continue
        hit, replacement = replace(item)
        if hit:
            built.append(replacement)
        elif isinstance(item, tuple):
            work.append((tuple, len(item)))
            work.extend((child, None) for child in reversed(item))
        elif isinstance(item, list):
            work.append((list, len(item)))
            work.extend((child, None) for child in reversed(item))
        else:
            built.append(item)
    return built[0]


def seed_point(point: Any, tape: Tape, first_index: int = 0) -> tuple[Any, int]:
    """``point`` with every real ``r`` replaced by ``(r, seed i)`` (``i`` numbering the reals
    left to right from ``first_index``), and how many reals there were."""
    count = 0

    def replace(v: Any) -> tuple[bool, Any]:
        nonlocal count
        if type(v) in SCALAR_TYPES:
            pair = (v, tape.seed(first_index + count))
            count += 1
            return True, pair
        return False, None

    return map_leaves(point, replace), count


def is_reverse_real(v: Any) -> bool:
    """Whether ``v`` is a real of ←D(R): a pair of a float and its backpropagator."""
    return (type(v) is tuple and len(v) == 2 and type(v[0]) in SCALAR_TYPES
            and isinstance(v[1], Backprop))


def read_off_point(seeded: Any, adjoints: dict[int, float]) -> Any:
    """The shape of ``seeded`` (a value of ←D(A)) back in A, each ``(r, seed i)`` replaced by
    the i-th adjoint (0.0 if never reached) and other ``(r, backpropagator)`` reals by 0.0;
    pairs and lists rebuilt, booleans and functions kept."""

    def replace(v: Any) -> tuple[bool, Any]:
        if is_reverse_real(v):
            index = v[1].seed_index
            return True, (0.0 if index is None else adjoints.get(index, 0.0))
        return False, None

    return map_leaves(seeded, replace)


# --------------------------------------------------------------------------- closures


class BuiltinFunction:
    """A built-in used as a value, with the arguments applied so far (curried).

    ``apply(self, args)`` evaluates the primitive once all its arguments are there; the
    interpreter supplies it (so errors are located at ``span`` and events are reported).
    """

    __slots__ = ("primitive", "args", "span", "apply")

    def __init__(self, primitive: Primitive, args: tuple, span: Span | None,
                 apply: Callable[["BuiltinFunction", tuple], Any]):
        self.primitive = primitive
        self.args = args
        self.span = span
        self.apply = apply

    def __call__(self, x: Any) -> Any:
        args = self.args + (x,)
        if len(args) < len(self.primitive.params):
            return BuiltinFunction(self.primitive, args, self.span, self.apply)
        return self.apply(self, args)

    def __repr__(self) -> str:
        return f"<built-in {self.primitive.name} applied to {len(self.args)}>"


@attrs.frozen
class FunctionParts:
    """What a function value is made of: a closure (``lam`` and the ``captured`` values by
    source name) or a built-in (``builtin`` name and the ``args`` applied so far)."""

    lam: Lam | None = None
    captured: dict[str, Any] = attrs.field(factory=dict)
    builtin: str | None = None
    args: tuple = ()


def function_parts(f: Any) -> FunctionParts | None:
    """The parts of the function value ``f``, or ``None`` if the interpreter did not make it
    from a λ-term or a built-in (a backpropagator, a pull-back made by the runtime)."""
    if isinstance(f, BuiltinFunction):
        return FunctionParts(builtin=f.primitive.name, args=f.args)
    target, bound = f, ()
    if type(f) is functools.partial:
        if f.keywords:
            return None
        target, bound = f.func, f.args
    lam = getattr(target, "__lambdad_lam__", None)
    if lam is None:
        return None
    names = target.__lambdad_captured__
    if len(names) != len(bound):
        return None
    return FunctionParts(lam=lam, captured=dict(zip(names, bound)))


# --------------------------------------------------------------------------- printing


def format_real(x: float) -> str:
    """``x`` as the language writes it: shortest round-trip digits, integral values without
    ``.0`` (``27``, ``-0``), ``nan``, ``inf``, ``-inf``."""
    if x != x:
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x.is_integer() and abs(x) < 1e16:
        text = str(int(x))
        return "-0" if text == "0" and math.copysign(1.0, x) < 0 else text
    return repr(x)


def _leaf_text(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is float or type(v) is int:
        return format_real(float(v))
    if isinstance(v, Backprop):
        return f"<backpropagator #{v.stamp}>"
    if v is None:
        return "zero"
    if isinstance(v, (Call, Sum)):
        return "<cotangent>"
    if callable(v):
        return "<function>"
    return repr(v)


# Longest value text printed in full (a value may share structure: `let p = (x, x) in
# (p, p)` ... doubles its printed size with every step and none of its memory).
MAX_VALUE_TEXT = 100_000


def format_value(v: Any, limit: int | None = MAX_VALUE_TEXT) -> str:
    """``v`` in the language's syntax: ``27``, ``(a, (b, c))`` for nested pairs,
    ``[1, 2]``, ``true``, ``<function>``, ``<backpropagator #3>``.  Iterative.  Text
    longer than ``limit`` characters is cut there and ends with ``… [value abbreviated]``
    (``limit=None``: never)."""
    out: list[str] = []
    # Work items: (True, text) to emit, (False, value) to print.
    work: list[tuple[bool, Any]] = [(False, v)]
    while work:
        if limit is not None and len(out) >= limit:  # every piece has a character at least
            return "".join(out)[:limit] + " … [value abbreviated]"
        is_text, item = work.pop()
        if is_text:
            out.append(item)
        elif isinstance(item, tuple) and len(item) == 2:
            # Pairs print as built, (a, (b, c)): the nesting shows gradient shapes.
            out.append("(")
            _push_items(work, [item[0], item[1]], ")")
        elif isinstance(item, list):
            out.append("[")
            _push_items(work, item, "]")
        else:
            out.append(_leaf_text(item))
    return "".join(out)


def _push_items(work: list[tuple[bool, Any]], items: list, closing: str) -> None:
    work.append((True, closing))
    for index in range(len(items) - 1, -1, -1):
        work.append((False, items[index]))
        if index:
            work.append((True, ", "))


_JUST_FLOAT = frozenset((float,))


def all_reals(items: list | tuple) -> bool:
    """Whether every item is a real (a float); true of an empty list.  One C-level pass:
    the fast paths for points that are lists of reals check this first."""
    return set(map(type, items)) <= _JUST_FLOAT


def to_python(v: Any) -> Any:
    """``v`` as plain Python data: floats, bools, tuples, lists (functions kept as they are)."""
    kind = type(v)
    if kind is float or kind is bool:
        return v
    if kind is list and all_reals(v):
        return v[:]  # a list of reals (a gradient, a point): copied in one pass
    return map_leaves(v, _descend)


def to_json(v: Any) -> Any:
    """``v`` as JSON-ready data: reals as numbers (non-finite ones as the strings ``"nan"``,
    ``"inf"``, ``"-inf"``), pairs as 2-element arrays, lists as arrays, booleans as
    booleans, anything else as its :func:`format_value` text."""

    def replace(item: Any) -> tuple[bool, Any]:
        if type(item) is float:
            return True, (item if math.isfinite(item) else format_real(item))
        if type(item) is bool or isinstance(item, (tuple, list)):
            return False, None
        return True, format_value(item)

    return map_leaves(v, replace, pair=list)


def _descend(item: Any) -> tuple[bool, Any]:
    return False, None


def fits(value: Any, t: Type) -> bool:
    """Whether the runtime value could have type ``t`` (type variables fit anything)."""
    stack = [(value, t)]
    while stack:
        v, ty = stack.pop()
        if isinstance(ty, VarT):
            continue
        if isinstance(ty, RealT):
            if type(v) is not float:
                return False
        elif isinstance(ty, BoolT):
            if type(v) is not bool:
                return False
        elif isinstance(ty, PairT):
            if type(v) is not tuple:
                return False
            stack.extend(((v[0], ty.first), (v[1], ty.second)))
        elif isinstance(ty, ListT):
            if type(v) is not list:
                return False
            if isinstance(ty.item, RealT):  # a list of reals: one loop, no stack entries
                if not all_reals(v):
                    return False
            elif not isinstance(ty.item, VarT):
                stack.extend((item, ty.item) for item in v)
        elif isinstance(ty, FunT):
            if not callable(v):
                return False
        else:
            return False
    return True
