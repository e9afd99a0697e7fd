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

Applying a backpropagator does not run it: it returns the staged call :class:`Call` as
data.  :func:`backward` later runs the bodies, either once per backpropagator in decreasing
stamp order (``factored``, BMP's linear factoring) or once per call (``naive``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs

from .errors import DifferentiationError, Span, UsageError
from .primitives import Primitive
from .syntax import Lam, Prim

STRATEGIES = ("factored", "naive")


# --------------------------------------------------------------------------- cotangents


class Backprop:
    """A backpropagator ``\\a -o e`` of type ``R -o d``, with its creation stamp.

    ``body(a)`` evaluates the linear body with ``a`` bound and returns cotangent data.  A
    seed (``seed i``) has ``seed_index = i`` and no body; the zero backpropagator of a tape
    (:meth:`Tape.constant`) has neither.  ``tape`` is the :class:`Tape` that stamped it.
    """

    __slots__ = ("stamp", "body", "span", "seed_index", "tape")

    def __init__(self, stamp: int, body: Callable[[float], Any] | None, span: Span | None,
                 seed_index: int | None = None, tape: "Tape | None" = None):
        self.stamp = stamp
        self.body = body
        self.span = span
        self.seed_index = seed_index
        self.tape = tape

    def __call__(self, a: float) -> "Call":
        # Applying only stages the call; :func:`backward` decides when bodies run.
        return Call(self, a)

    def __repr__(self) -> str:
        return f"<backpropagator #{self.stamp}>"


class Call:
    """The cotangent ``g a``: backpropagator ``g`` applied to the real ``a`` (staged)."""

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


class Tape:
    """The bookkeeping of one differentiation run.

    ``stamps`` is the creation-stamp counter (stamps are dense: ``0 .. stamps - 1``, and only
    increase); ``created`` counts non-seed backpropagators, ``bodies_run`` the bodies run by
    :func:`backward`.  Seeds are made once per index and shared.
    """

    __slots__ = ("stamps", "bodies_run", "_seeds", "_zero")

    def __init__(self) -> None:
        self.stamps = 0
        self.bodies_run = 0
        self._seeds: dict[int, Backprop] = {}
        self._zero: Backprop | None = None

    @property
    def created(self) -> int:
        """How many backpropagators other than seeds and the shared zero were stamped."""
        # Derived rather than counted, so generated code only bumps ``stamps``.
        return self.stamps - len(self._seeds) - (self._zero is not None)

    def next_stamp(self) -> int:
        """A fresh creation stamp, larger than every earlier one."""
        stamp = self.stamps
        self.stamps = stamp + 1
        return stamp

    def backprop(self, body: Callable[[float], Any], span: Span | None = None) -> Backprop:
        """A new backpropagator with the next stamp (counted in ``created``)."""
        stamp = self.stamps
        self.stamps = stamp + 1
        return Backprop(stamp, body, span, None, self)

    def seed(self, index: int, span: Span | None = None) -> Backprop:
        """``seed index``: the backpropagator of the index-th input real, the same object on
        every request."""
        found = self._seeds.get(index)
        if found is None:
            found = Backprop(self.next_stamp(), None, span, index, self)
            self._seeds[index] = found
        return found

    def constant(self) -> Backprop:
        """``\\a -o zero``, shared by every constant of this run (its calls are dropped)."""
        if self._zero is None:
            self._zero = Backprop(self.next_stamp(), None, None, None, self)
        return self._zero


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


def backward(tape: Tape, cotangent: Any, strategy: str = "factored",
             on_event: Callable[[Any], None] | None = None) -> dict[int, float]:
    """The adjoint of every seed reached by the cotangent data ``cotangent``, by seed index.

    ``factored`` runs each pending backpropagator's body once, largest stamp first, with the
    sum of what was sent to it (BMP linear factoring); ``naive`` runs a body per call.
    Counts bodies in ``tape.bodies_run`` and reports each as a :class:`BackpropRun` event.
    Raises UsageError for an unknown strategy and DifferentiationError if the data holds a
    backpropagator of another tape.  No recursion: work stacks and a stamp-indexed array.
    """
    if strategy == "factored":
        return _backward_factored(tape, cotangent, on_event)
    if strategy == "naive":
        return _backward_naive(tape, cotangent, on_event)
    raise UsageError(f"unknown strategy `{strategy}`; use factored or naive")


def _backward_factored(tape: Tape, cotangent: Any, on_event) -> dict[int, float]:
    n = tape.stamps
    acc = [0.0] * n  # stamp -> sum of the cotangents sent to it (linear factoring)
    nodes: list[Backprop | None] = [None] * n  # stamp -> backpropagator, while pending
    adjoints: dict[int, float] = {}
    top = -1  # no pending stamp is larger
    ran = 0
    work: list[Any] = []
    push, pop = work.append, work.pop
    item = cotangent
    try:
        while True:
            # Stage every call in ``item`` and ``work``.
            while True:
                kind = type(item)
                if kind is Call:
                    bp = item.backprop
                    if bp.tape is not tape:
                        raise _foreign(bp)
                    if bp.body is not None:
                        s = bp.stamp
                        acc[s] += item.cotangent
                        if nodes[s] is None:
                            nodes[s] = bp
                            if s > top:
                                top = s
                    elif bp.seed_index is not None:
                        index = bp.seed_index
                        adjoints[index] = adjoints.get(index, 0.0) + item.cotangent
                elif kind is Sum:
                    push(item.right)
                    item = item.left
                    continue
                elif item is not None:
                    raise TypeError(f"not cotangent data: {item!r}")
                if not work:
                    break
                item = pop()
            # The pending backpropagator with the largest stamp runs next, once: bodies
            # only send to older backpropagators, so nothing will be added to it later.
            stamp = top
            while stamp >= 0 and nodes[stamp] is None:
                stamp -= 1
            if stamp < 0:
                return adjoints
            bp = nodes[stamp]
            nodes[stamp] = None
            top = stamp - 1
            a = acc[stamp]
            ran += 1
            if on_event is not None:
                on_event(BackpropRun(stamp, bp.span, a))
            item = bp.body(a)
    except IndexError:
        if any(type(x) is Call and x.backprop.stamp >= n for x in (item, *work)):
            raise DifferentiationError(
                "a backpropagator was created during the backward phase") from None
        raise
    finally:
        tape.bodies_run += ran


def _backward_naive(tape: Tape, cotangent: Any, on_event) -> dict[int, float]:
    adjoints: dict[int, float] = {}
    work = [cotangent]
    while work:
        item = work.pop()
        kind = type(item)
        if kind is Call:
            bp = item.backprop
            if bp.tape is not tape:
                raise _foreign(bp)
            if bp.body is None:
                if bp.seed_index is not None:
                    index = bp.seed_index
                    adjoints[index] = adjoints.get(index, 0.0) + item.cotangent
                continue
            tape.bodies_run += 1
            if on_event is not None:
                on_event(BackpropRun(bp.stamp, bp.span, item.cotangent))
            work.append(bp.body(item.cotangent))
        elif kind is Sum:
            work.append(item.right)
            work.append(item.left)
        elif item is not None:
            raise TypeError(f"not cotangent data: {item!r}")
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
        if type(v) is float:
            pair = (v, tape.seed(first_index + count))
            count += 1
            return True, pair
        return False, None

    return map_leaves(point, replace), count


def is_reverse_real(v: Any) -> bool:
    """Whether ``v`` is a real of ←D(R): a pair of a float and its backpropagator."""
    return type(v) is tuple and len(v) == 2 and type(v[0]) is float and isinstance(v[1], Backprop)


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


def format_value(v: Any) -> str:
    """``v`` in the language's syntax: ``27``, ``(a, (b, c))`` for nested pairs,
    ``[1, 2]``, ``true``, ``<function>``, ``<backpropagator #3>``.  Iterative."""
    out: list[str] = []
    # Work items: (True, text) to emit, (False, value) to print.
    work: list[tuple[bool, Any]] = [(False, v)]
    while work:
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


def to_python(v: Any) -> Any:
    """``v`` as plain Python data: floats, bools, tuples, lists (functions kept as they are)."""
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
