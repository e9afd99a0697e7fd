"""Runtime values of lambdad and value printing.

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
``R -o d``         a :class:`~lambdad.tape.Backprop` (a backpropagator, AD.md section 5)
``d``              cotangent *data*: ``None`` (zero), :class:`~lambdad.tape.Call`,
                   :class:`~lambdad.tape.Sum`
=================  ==========================================================

Backpropagators, tapes and the backward phase are in :mod:`lambdad.tape`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs

from .errors import Span
from .primitives import Primitive
from .arraylib import ARRAY, array_adjoint, dense, shape_text
from .syntax import ArrayT, BoolT, FunT, Lam, ListT, PairT, Prim, RealT, Type, VarT
from .tape import Backprop, Call, Sum, Tape, ring_zero

SCALAR_TYPES = frozenset((float, ARRAY))
"""The runtime types of a value of type ``R``: a float (every level of nested
differentiation is a transformed program over floats)."""


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


# --------------------------------------------------------------------------- value shapes


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


def seed_point(point: Any, tape: Tape, first_index: int = 0) -> tuple[Any, int]:
    """``point`` with every real ``r`` replaced by ``(r, seed i)`` (``i`` numbering the reals
    left to right from ``first_index``), and how many reals there were."""
    count = 0

    def seeded(r: Any) -> tuple[Any, Backprop]:
        nonlocal count
        pair = (r, tape.seed(first_index + count))
        count += 1
        return pair

    return map_value(point, lambda v: type(v) in SCALAR_TYPES, seeded), count


def is_reverse_real(v: Any) -> bool:
    """Whether ``v`` is a real of ←D(R): a pair of a float and its backpropagator."""
    return (type(v) is tuple and len(v) == 2 and type(v[0]) in SCALAR_TYPES
            and isinstance(v[1], Backprop))


def _is_seeded_scalar(v: Any) -> bool:
    """Whether ``v`` is a scalar of ←D over some ring: ``(k, backpropagator)``.  Scanned from
    the root, the first pair whose second part is a backpropagator is one (a source type
    has no backpropagators of its own)."""
    return type(v) is tuple and len(v) == 2 and isinstance(v[1], Backprop)


def read_off_point(seeded: Any, adjoints: dict[int, Any], tape: Tape | None = None) -> Any:
    """The shape of ``seeded`` (a value of ←D(A)) back in A, each ``(k, seed i)`` replaced by
    the i-th adjoint (the ring's zero if never reached) and other ``(k, backpropagator)``
    scalars by the ring's zero; pairs and lists rebuilt, booleans and functions kept.  The
    ring's zero has the shape of ``k`` (:func:`~lambdad.tape.ring_zero`, which needs
    ``tape`` for a ring holding backpropagators)."""

    def adjoint(v: tuple[Any, Backprop]) -> Any:
        index, k = v[1].seed_index, v[0]
        if index is not None and index in adjoints:
            if type(k) is float or (type(k) is tuple and type(k[0]) is float
                                    and type(k[1]) is float) or not _holds_array(k):
                return adjoints[index]  # no array to make dense (a dual real, mostly)
            return _dense_primal(k, adjoints[index])
        if type(k) is ARRAY:
            return array_adjoint(k, 0.0)
        return 0.0 if type(k) in SCALAR_TYPES else ring_zero(k, tape)

    def plain(v: tuple[Any, Backprop]) -> Any:  # adjoint, for a scalar without arrays
        index = v[1].seed_index
        if index is not None and index in adjoints:
            return adjoints[index]
        return 0.0 if type(v[0]) in SCALAR_TYPES else ring_zero(v[0], tape)

    if type(seeded) is list and all(map(_is_seeded_scalar, seeded)):
        # A list of scalars, by one loop: its elements have one type, so the first says
        # whether the ring holds arrays.
        each = adjoint if seeded and _holds_array(seeded[0][0]) else plain
        return [each(v) for v in seeded]
    return map_value(seeded, _is_seeded_scalar, adjoint)


def _holds_array(k: Any) -> bool:
    """Whether the scalar ``k`` of a ring (a real, an array, or pairs of them, nested as
    deep as the transformations) has an array in it."""
    if type(k) is tuple:
        if type(k[0]) is float and type(k[1]) is float:
            return False  # a dual real, mostly (a Hessian-vector product's)
        return _holds_array(k[0]) or _holds_array(k[1])
    return type(k) is ARRAY


def _dense_primal(k: Any, adjoint: Any) -> Any:
    """``adjoint``, an element of the ring of ``k`` (a value of →D(Vec) or ←D(Vec), nested
    for higher orders), with each array in it made dense where ``k`` has an array: a
    gradient read off at one level is a primal of the next, which must be an array, not a
    lazy sum of cotangents.  Recursive in the ring's nesting, which is as deep as the
    transformations (not the input)."""
    if type(k) is ARRAY:
        return array_adjoint(k, adjoint)
    if type(k) is tuple and type(adjoint) is tuple:
        return (_dense_primal(k[0], adjoint[0]), _dense_primal(k[1], adjoint[1]))
    return adjoint


def ring_of(seeded: Any) -> Any:
    """The scalar ``k`` of the first ``(k, backpropagator)`` of the seeded input ``seeded``
    (None when it has none): a sample of the ring its cotangents live in."""
    stack = [seeded]
    while stack:
        v = stack.pop()
        if _is_seeded_scalar(v):
            return v[0]
        if type(v) is tuple or type(v) is list:
            stack.extend(reversed(v))
    return None


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


class MadeFunction:
    """A function the runtime made (a pull-back) that is also the closure of a λ-term
    computing it: applying it runs ``call``; differentiating it transforms ``lam`` over
    the ``captured`` values (:func:`function_parts`), as for any closure."""

    __slots__ = ("call", "lam", "captured")

    def __init__(self, call: Callable[[Any], Any], lam: Lam, captured: dict[str, Any]):
        self.call = call
        self.lam = lam
        self.captured = captured

    def __call__(self, x: Any) -> Any:
        return self.call(x)

    def calling(self, call: Callable[[Any], Any]) -> "MadeFunction":
        """The same closure, applied by ``call``."""
        return MadeFunction(call, self.lam, self.captured)

    def __repr__(self) -> str:
        return "<function made by the runtime>"


@attrs.frozen
class FunctionParts:
    """What a function value is made of: a closure (``lam`` and the ``captured`` values by
    source name) or a built-in (``builtin`` name and the ``args`` applied so far)."""

    lam: Lam | None = None
    captured: dict[str, Any] = attrs.field(factory=dict)
    builtin: str | None = None
    args: tuple = ()


def function_parts(f: Any) -> FunctionParts | None:
    """The parts of the function value ``f``, or ``None`` if it is not made from a λ-term
    or a built-in (a backpropagator, a function from outside)."""
    if isinstance(f, BuiltinFunction):
        return FunctionParts(builtin=f.primitive.name, args=f.args)
    if type(f) is MadeFunction:
        return FunctionParts(lam=f.lam, captured=dict(f.captured))
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


def closure_code(f: Any) -> tuple[Any, tuple] | None:
    """The code of the closure ``f`` and the values it captured, in the order of its
    λ-term's captured names: the code is the same object for every closure of that λ-term
    that one compiled unit makes, so what :func:`function_parts` tells of one closure holds
    for every closure of the same code with as many values.  None for a function that is
    no closure made by generated code (a built-in, a function the runtime made)."""
    if type(f) is functools.partial and not f.keywords:
        return f.func, f.args
    return None


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
    if type(v) is ARRAY:
        return array_text(v)
    if isinstance(v, Backprop):
        return f"<backpropagator #{v.stamp}>"
    if v is None:
        return "zero"
    if isinstance(v, (Call, Sum)):
        return "<cotangent>"
    if callable(v):
        return "<function>"
    return repr(v)


def array_text(v: Any) -> str:
    """An array as the language writes it: ``array [1, 2]``, ``matrix [[1, 2], [3, 4]]``."""
    if v.ndim == 1:
        return "array [" + ", ".join(map(format_real, v.tolist())) + "]"
    return "matrix [" + ", ".join(
        "[" + ", ".join(map(format_real, row)) + "]" for row in v.tolist()) + "]"


SUMMARY_ELEMENTS = 6
"""Arrays of at most this many elements are summarised by their elements, larger ones by
their smallest, mean and largest element (:func:`array_summary`)."""


def array_summary(v: Any, number: Callable[[float], str] = format_real) -> str:
    """A short text for an array in a table or a picture: its shape and its elements when
    it is small (``Vec[3] [0.5, -0.25, 1]``, ``Mat[2x2] [[1, 2], [3, 4]]``), else its
    shape and the smallest, mean and largest element to four significant digits
    (``Vec[100] min -2.31 mean 0.0127 max 2.6``).  ``number`` writes an element; a sparse
    cotangent is summarised as the dense array it stands for."""
    v = dense(v)
    shape = shape_text(v)
    if v.size <= SUMMARY_ELEMENTS:
        if v.ndim == 1:
            return f"{shape} [" + ", ".join(map(number, v.tolist())) + "]"
        return f"{shape} [" + ", ".join(
            "[" + ", ".join(map(number, row)) + "]" for row in v.tolist()) + "]"
    low, mean, high = float(v.min()), float(v.mean()), float(v.max())
    return f"{shape} min {low:.4g} mean {mean:.4g} max {high:.4g}"


# Longest value text printed in full (a value may share structure: `let p = (x, x) in
# (p, p)` ... doubles its printed size with every step and none of its memory).
MAX_VALUE_TEXT = 100_000


def format_value(v: Any, limit: int | None = MAX_VALUE_TEXT, summarised: bool = False) -> str:
    """``v`` in the language's syntax: ``27``, ``(a, (b, c))`` for a pair, ``(a, b, c)`` for
    a triple as :func:`written` gives it, ``[1, 2]``, ``true``, ``<function>``,
    ``<backpropagator #3>``.  Iterative.  Text
    longer than ``limit`` characters is cut there and ends with ``… [value abbreviated]``
    (``limit=None``: never).  With ``summarised`` (for messages), an array of more than
    ``SUMMARY_ELEMENTS`` elements is written by :func:`array_summary` instead."""
    out: list[str] = []
    # Work items: (True, text) to emit, (False, value) to print.
    work: list[tuple[bool, Any]] = [(False, v)]
    while work:
        if limit is not None and len(out) >= limit:  # every piece has a character at least
            return "".join(out)[:limit] + " … [value abbreviated]"
        is_text, item = work.pop()
        if is_text:
            out.append(item)
        elif isinstance(item, tuple) and len(item) >= 2:
            # A tuple prints as it is held: a pair (a, (b, c)) keeps its parentheses, and a
            # written triple (see written()) is the Python 3-tuple (a, b, c).
            out.append("(")
            _push_items(work, list(item), ")")
        elif isinstance(item, list):
            out.append("[")
            _push_items(work, item, "]")
        elif summarised and type(item) is ARRAY and item.size > SUMMARY_ELEMENTS:
            out.append(array_summary(item))
        else:
            out.append(_leaf_text(item))
    return "".join(out)


def written(v: Any, t: Type) -> Any:
    """The runtime value ``v`` of type ``t`` with each k-tuple of ``t`` (k > 2, stored as k -
    1 nested pairs, see :class:`~lambdad.syntax.PairT`) made the Python k-tuple of its
    components: a value as it was written (LANGUAGE.md section 10), for printing, JSON and
    the Python API.  ``v`` itself when ``t`` has no such tuple; a part at a type variable
    or a function type is kept as it is.  Iterative; shared parts stay shared."""
    if not has_tuples(t):
        return v
    out: list[Any] = []
    done: dict[tuple[int, int], Any] = {}
    keep: list[Any] = []  # (the values whose ids key `done` stay alive)
    # Work items: (value, type) to convert, or (None, (kind, count, key)) to build.
    work: list[tuple[Any, Any]] = [(v, t)]
    while work:
        value, ty = work.pop()
        if value is None and type(ty) is tuple:
            kind, count, key = ty
            items = out[len(out) - count:]
            del out[len(out) - count:]
            built = tuple(items) if kind is tuple else items
            if key is not None:
                done[key] = built
            out.append(built)
            continue
        if type(value) is tuple and isinstance(ty, PairT):
            key = (id(value), id(ty))
            if key in done:
                out.append(done[key])
                continue
            keep.append(value)
            parts: list[tuple[Any, Type]] = []
            rest, rest_type = value, ty
            while isinstance(rest_type, PairT) and rest_type.arity > 2 and type(rest) is tuple:
                parts.append((rest[0], rest_type.first))
                rest, rest_type = rest[1], rest_type.second
            if isinstance(rest_type, PairT) and type(rest) is tuple:
                parts.extend(((rest[0], rest_type.first), (rest[1], rest_type.second)))
            else:
                parts.append((rest, rest_type))
            work.append((None, (tuple, len(parts), key)))
            work.extend(reversed(parts))
        elif type(value) is list and isinstance(ty, ListT) and has_tuples(ty.item):
            work.append((None, (list, len(value), None)))
            work.extend((item, ty.item) for item in reversed(value))
        else:
            out.append(value)
    return out[0]


def has_tuples(t: Type) -> bool:
    """Whether the type ``t`` holds a tuple of more than two components."""
    if type(t) is RealT or type(t) is BoolT:
        return False
    stack = [t]
    while stack:
        current = stack.pop()
        if type(current) is PairT:
            if current.arity > 2:
                return True
            stack.extend((current.first, current.second))
        elif type(current) is ListT:
            stack.append(current.item)
    return False


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
    if kind is ARRAY:
        return v.copy()
    return map_value(v, _never, lambda leaf: leaf.copy() if type(leaf) is ARRAY else leaf)


# The most items (reals, booleans, texts, arrays) one JSON value is written with.
MAX_JSON_ITEMS = 100_000
JSON_ABBREVIATED = "... [value abbreviated]"  # ASCII: json.dumps writes it as is


def to_json(v: Any, limit: int | None = MAX_JSON_ITEMS) -> Any:
    """``v`` as JSON-ready data: reals as numbers (non-finite ones as the strings ``"nan"``,
    ``"inf"``, ``"-inf"``), tuples as arrays of their components (``[1, [2, 3]]`` for the
    pair ``(1, (2, 3))``, ``[1, 2, 3]`` for the triple as :func:`written` gives it), lists as arrays, booleans
    as booleans, anything else as its :func:`format_value` text.  At most ``limit`` items
    are written (``None``: no limit): the array being filled when the limit is reached ends
    with the string ``JSON_ABBREVIATED``, and the arrays around it end there too.
    Iterative; a value sharing structure (of exponential size written out) costs only
    what is written."""
    built: list[Any] = []
    # Work items: (value, None) to write, or (None, start) to close the array whose items
    # begin at built[start].
    work: list[tuple[Any, int | None]] = [(v, None)]
    written = 0
    cut = False
    while work:
        item, start = work.pop()
        if start is not None:
            items = built[start:]
            del built[start:]
            built.append(items)
            continue
        if cut:
            continue
        written += 1
        if limit is not None and written > limit:
            built.append(JSON_ABBREVIATED)
            cut = True
            continue
        kind = type(item)
        if kind is float:
            built.append(item if math.isfinite(item) else format_real(item))
        elif kind is ARRAY:  # nested lists of numbers, as JSON writes arrays
            built.append(item.tolist())
            written += item.size - 1
        elif kind is bool:
            built.append(item)
        elif isinstance(item, (tuple, list)):
            children = item
            work.append((None, len(built)))
            work.extend((child, None) for child in reversed(children))
        else:
            built.append(format_value(item))
    return built[0]


def _never(item: Any) -> bool:
    """No value is a leaf of :func:`to_python`: every pair and list is copied."""
    return False


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
        elif isinstance(ty, ArrayT):
            if type(v) is not ARRAY or v.ndim != ty.rank:
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
