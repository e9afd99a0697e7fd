"""The calling convention: how a point given from outside the language meets a top-level
function of a program, and how values cross between Python and the runtime.

A point is Python data (``R`` ↔ float, pairs ↔ tuples, lists ↔ lists, ``Bool`` ↔ bool) or
text in the language's syntax (``2,5``).  It fits a function of k curried parameters when
it fits the first parameter (then k is 1) or when it is the k-tuple of the first k
(:func:`arguments_covered`); such a function is called with it through the adapter
``\\p -> f (fst p) (fst (snd p)) ... `` (:func:`uncurried_term`).  Each real of a point is
named as the user wrote it (``w.1[2]``, :func:`input_names`).  The pipeline, the gradient
checker and the trace all go through these functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from itertools import islice, product
from typing import Any

import attrs

from . import arraylib
from .errors import DomainError, EvalError, LambdadError, Span, UsageError
from .primitives import FROM_LIST, FROM_ROWS, FST, SND
from .printer import print_type
from .rules import number, real
from .syntax import (
    ArrayT,
    walk,
    App,
    BoolLit,
    FunT,
    Lam,
    LetPair,
    ListLit,
    ListT,
    Pair,
    PairT,
    RealT,
    Term,
    Type,
    Var,
    children,
    ANY_ARITY,
    curried_params,
    free_vars,
    tuple_components,
    tuple_type,
)
from .values import all_reals, fits, format_real, format_value, to_python, written

# ---------------------------------------------------------------- Python data


# How deeply a point may nest pairs and lists (a tuple of k items is k - 1 nested pairs):
# deeper points are refused before anything follows their nesting on Python's stack.
MAX_POINT_DEPTH = 200


def point_too_deep(value: Any) -> bool:
    """Whether the Python data or runtime value ``value`` nests pairs and lists more than
    MAX_POINT_DEPTH deep.  Iterative; stops at the first item too deep."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is not tuple and kind is not list:
            continue
        if depth >= MAX_POINT_DEPTH:
            return True
        if kind is list:
            if not all_reals(item):
                stack.extend((part, depth + 1) for part in item)
        else:
            last = len(item) - 1
            if depth + last > MAX_POINT_DEPTH:
                return True
            stack.extend((part, depth + max(1, min(i + 1, last)))
                         for i, part in enumerate(item))
    return False


def too_deep_message(what: str) -> str:
    """The message refusing a point (``what``) nested deeper than MAX_POINT_DEPTH."""
    return (f"{what} nests pairs and lists more than {MAX_POINT_DEPTH} deep (a tuple of k "
            f"items counts k - 1); write a long vector as a list [x1, x2, ...]")


def first_too_deep(term: Term) -> Term | None:
    """The first pair or list literal of the point ``term`` nested more than
    MAX_POINT_DEPTH deep in pairs and lists (as :func:`point_too_deep` counts), or None.
    Iterative."""
    stack: list[tuple[Any, int]] = [(term, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (Pair, ListLit)):
            depth += 1
            if depth > MAX_POINT_DEPTH:
                return node
        stack.extend((kid, depth) for kid in reversed(children(node)))
    return None


def point_from_python(value: Any, what: str = "the point") -> Any:
    """A point given as Python data (``what`` names it in messages) as a runtime value, as
    :func:`from_python` makes it; raises UsageError for one nested more than
    MAX_POINT_DEPTH deep too (before anything follows its nesting)."""
    if point_too_deep(value):
        raise UsageError(too_deep_message(what))
    return from_python(value)


def from_python(value: Any, finite: bool = True, nested: bool = True) -> Any:
    """Python data as a runtime value: numbers become floats, a k-tuple k - 1 pairs nesting
    to the right (``nested``; else kept a k-tuple, the written form that
    :func:`~lambdad.values.written` makes and results print).  Raises UsageError for data
    that is not a lambdad value, an integer too large for a real, or (with ``finite``) a NaN
    or infinity."""
    kind = type(value)
    if kind is float:
        return finite_input(value) if finite else value
    if kind is list and all_reals(value):
        if finite and not all(map(math.isfinite, value)):  # the common point: a list of reals
            finite_input(next(r for r in value if not math.isfinite(r)))
        return value[:]
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        try:
            return from_python(float(value), finite)
        except OverflowError:
            raise UsageError(f"the integer {abridged(repr(value))} is too large for a real "
                             "(at most about 1.8e308)") from None
    if isinstance(value, tuple):
        if len(value) < 2:
            raise UsageError("a tuple point needs at least two components")
        if len(value) == 2 or not nested:
            return tuple(from_python(v, finite, nested) for v in value)
        return (from_python(value[0], finite), from_python(value[1:], finite))
    if isinstance(value, list):
        return [from_python(v, finite, nested) for v in value]
    if type(value) is arraylib.ARRAY or _is_array_like(value):
        if value.ndim not in (1, 2):
            raise UsageError(f"an array point must have rank 1 (Vec) or 2 (Mat), not "
                             f"{value.ndim}")
        try:
            return arraylib.as_array(value, value.ndim, "an array point")
        except DomainError as error:
            raise UsageError(error.message) from None
    if callable(value):
        return value
    raise UsageError(f"cannot use {abridged(repr(value))} as a lambdad value")


def point_from_file(path: str, what: str = "--at") -> Any:
    """The point stored in the file ``path`` (``--at @FILE``), as a runtime value: a NumPy
    ``.npy`` file holds one array, a ``.npz`` file several (a tuple of them, in the order
    stored), any other file JSON: numbers, lists (a list of numbers fits a Vec, a list of
    rows a Mat) and objects, whose values in order are a tuple (the parameters, named for
    the reader: ``{"w": [0, 0], "b": 0}``).  Raises UsageError naming the file and what is
    wrong with it."""
    import json
    from pathlib import Path

    file = Path(path)
    try:
        if file.suffix == ".npy":
            import numpy as np
            data: Any = np.load(file, allow_pickle=False)
        elif file.suffix == ".npz":
            import numpy as np
            with np.load(file, allow_pickle=False) as stored:
                data = tuple(stored[key] for key in stored.files)
            if len(data) == 1:
                data = data[0]
        else:
            data = json.loads(file.read_text(encoding="utf-8"),
                              object_pairs_hook=lambda pairs: tuple(v for _, v in pairs))
    except FileNotFoundError:
        raise UsageError(f"{what}: no file {path}") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{what}: {path}:{error.lineno}:{error.colno}: not JSON "
                         f"({error.msg})") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{what}: cannot read a point from {path} ({error})") from None
    if isinstance(data, tuple) and len(data) == 1:
        data = data[0]
    if point_too_deep(data):
        raise UsageError(too_deep_message(what))
    value = from_python(data)
    bad = first_non_finite(value)
    if bad is not None:
        raise UsageError(f"{what}: {path} holds the non-finite real {bad!r}")
    return value


def _is_array_like(value: Any) -> bool:
    """Whether ``value`` is an array of another library (a NumPy subclass, a tensor) that
    NumPy can read: it has a rank and a shape."""
    return hasattr(value, "ndim") and hasattr(value, "shape") and hasattr(value, "__array__")


def with_arrays(value: Any, t: Type) -> Any:
    """``value`` with each list where ``t`` has ``Vec`` or ``Mat`` made an array (a list of
    reals a Vec, a list of lists of reals a Mat); anything else unchanged, so that
    :func:`~lambdad.values.fits` decides.  Never fails."""
    if isinstance(t, ArrayT):
        if type(value) is list:
            try:
                return arraylib.as_array(value, t.rank)
            except DomainError:
                return value
        return value
    if isinstance(t, PairT) and type(value) is tuple and len(value) == 2:
        first, second = with_arrays(value[0], t.first), with_arrays(value[1], t.second)
        return value if first is value[0] and second is value[1] else (first, second)
    if isinstance(t, ListT) and type(value) is list and any(
            isinstance(node, ArrayT) for node in walk(t.item)):
        return [with_arrays(v, t.item) for v in value]
    return value


def real_point(point: Any, test_arrays: bool = True) -> tuple[Shape, Any] | None:
    """For a point of Python reals (a float or int, a tuple of them, a non-empty list of
    floats, or reals nested in tuples and lists: see :func:`point_shape`): its shape (0
    for a real, n for an n-tuple, -1 for a list; else what :func:`point_shape` gives) and
    its runtime value (what :func:`from_python` makes of it), made in one pass or two.
    None for any other point, and for one holding a NaN, an infinity or an integer too
    large for a real: :func:`from_python` says what is wrong.  Repeated calls with such
    points skip the general conversion and fitting (the shape decides how the point fits
    a function).  Not ``test_arrays``: a point that is an array, or a tuple of arrays
    and reals, has its arrays left untested (:func:`point_arrays` gives them): the caller
    tests them (:func:`lambdad.arraylib.finite_in_run`) and takes the general path for
    one that is not."""
    kind = type(point)
    if kind is list:
        # Not an empty list: it fits lists of any item type, a list of reals only [R].
        if point and all_reals(point):
            return (-1, point[:]) if all(map(math.isfinite, point)) else None
    elif kind is tuple and len(point) >= 2:
        value = None
        for item in reversed(point):
            item = _finite_real(item)
            if item is None:
                break
            value = item if value is None else (item, value)
        else:
            return len(point), value
        arrays = _array_tuple(point, test_arrays)
        if arrays is not None:
            return arrays
    elif kind is arraylib.ARRAY:
        leaf = _array_leaf(point, test_arrays)
        return None if leaf is None else (leaf, point)
    else:
        point = _finite_real(point)
        return None if point is None else (0, point)
    found = point_shape(point)
    return None if found is None else (found[0], shaped(found[0], iter(found[1])))


def _array_leaf(value: Any, test: bool = True) -> Shape:
    """The shape :func:`point_shape` gives the array ``value`` (``("a", its shape)``) when
    it is a finite float64 array of rank 1 or 2 (finite unless not ``test``: see
    :func:`real_point`), else None."""
    dtype = value.dtype  # (float64's is one object: `is` first, quicker than `!=`)
    if (dtype is not arraylib.FLOAT and dtype != arraylib.FLOAT) \
            or value.ndim not in (1, 2) or test and not arraylib.all_finite(value):
        return None
    return ("a", value.shape)


def _array_tuple(point: tuple, test: bool = True) -> tuple[Shape, Any] | None:
    """For a tuple of arrays and reals with at least one array (the arguments of an array
    program, such as a Vec and a size, the commonest point there): what
    :func:`point_shape` and :func:`shaped` make of it, in one pass, without their walk;
    None for any other tuple (one holding a list, a pair, an int), and for one with a
    real that is not finite or an array :func:`_array_leaf` refuses (``test`` as
    there)."""
    leaves = []
    arrays = False
    for item in point:
        kind = type(item)
        if kind is arraylib.ARRAY:
            leaf = _array_leaf(item, test)
            if leaf is None:
                return None
            arrays = True
        elif kind is float and item - item == 0.0:  # (NaN for a NaN or an infinity)
            leaf = None
        else:
            return None
        leaves.append(leaf)
    if not arrays:
        return None
    value = point[-1]
    for index in range(len(point) - 2, -1, -1):
        value = (point[index], value)
    return ("t", tuple(leaves)), value


def point_arrays(point: Any, shape: Shape) -> tuple | None:
    """The arrays :func:`real_point` (or :func:`real_inputs`) left untested in ``point``,
    whose shape it gave as ``shape``: the point itself when it is an array, the arrays
    among a tuple's items; None when there are none (a point of reals: its shape is a
    number).  (Arrays deeper in a point were tested by :func:`point_shape`.)"""
    if type(shape) is int:
        return None
    kind = type(point)
    if kind is arraylib.ARRAY:
        return (point,)
    if kind is tuple:
        return tuple(item for item in point if type(item) is arraylib.ARRAY) or None
    return None


def holds_lists(shape: Shape) -> bool:
    """Whether a point of the shape ``shape`` (:func:`real_point`'s) holds a list."""
    if type(shape) is int:
        return shape < 0
    work = [shape]
    while work:
        item = work.pop()
        if item is None:
            continue
        kind = item[0]
        if kind in ("l", "L"):
            return True
        if kind == "t":
            work.extend(item[1])
    return False


def real_inputs(point: Any, test_arrays: bool = True) -> tuple[Shape, Any] | None:
    """For a point :func:`real_point` takes: the same shape, and the point's reals flat,
    as a prepared gradient seeds them (no right-nested pairs made): the real (shape 0), a
    tuple of the n reals (shape n; the point itself when its items are floats already), a
    copy of the list (shape -1), a list of the reals left to right (any other shape).
    None when :func:`real_point` gives None; ``test_arrays`` as there."""
    kind = type(point)
    if kind is float:
        return (0, point) if point - point == 0.0 else None
    if kind is tuple and len(point) >= 2:
        for item in point:
            if type(item) is not float or item - item != 0.0:
                break
        else:
            return len(point), point
        reals = tuple(map(_finite_real, point))
        if None not in reals:
            return len(point), reals
        arrays = _array_tuple(point, test_arrays)
        if arrays is not None:
            return arrays[0], list(point)
    elif kind is list:
        if point and all_reals(point):
            return (-1, point[:]) if all(map(math.isfinite, point)) else None
    elif kind is arraylib.ARRAY:
        leaf = _array_leaf(point, test_arrays)
        return None if leaf is None else (leaf, [point])
    else:
        point = _finite_real(point)
        return None if point is None else (0, point)
    return point_shape(point)


# The shape of a point of reals nested in tuples and lists, as point_shape gives it: None
# for a real, ("t", (s1, ..., sk)) for a k-tuple of items of shapes s1 ... sk, ("l", n) for
# a list of n reals, ("L", n, s) for a list of n items of shape s.  Points of the shapes
# real_inputs knows first have the numbers 0, n and -1 instead.
Shape = Any
_NO_SHAPE = object()
# Deeper points take the general path (and Python's stack is not at risk).
_MAX_SHAPE_DEPTH = 32


def point_shape(point: Any) -> tuple[Shape, list[float]] | None:
    """The shape of ``point``, finite reals (floats or ints) nested in tuples of two or
    more items and in non-empty lists whose items all have one shape, and its reals flat,
    left to right; None for any other point.  The shape says how the point fits a
    function (its types, hence the curried parameters it covers) and how to build a value
    like it from reals (:func:`shaped`): prepared calls and gradients key on it."""
    flat: list[float] = []
    shape = _shape_of(point, flat, 0)
    return None if shape is _NO_SHAPE else (shape, flat)


def _shape_of(value: Any, flat: list[float], depth: int) -> Shape:
    kind = type(value)
    if kind is float:
        if value - value != 0.0:  # NaN for a NaN or an infinity
            return _NO_SHAPE
        flat.append(value)
        return None
    if kind is arraylib.ARRAY:  # an array of reals: a leaf, keyed by its shape
        leaf = _array_leaf(value)
        if leaf is None:
            return _NO_SHAPE
        flat.append(value)
        return leaf
    if depth > _MAX_SHAPE_DEPTH:
        return _NO_SHAPE
    if kind is list:
        if not value:  # it fits every list type: the general path sees which
            return _NO_SHAPE
        if all_reals(value):
            if not all(map(math.isfinite, value)):
                return _NO_SHAPE
            flat.extend(value)
            return ("l", len(value))
        first = _shape_of(value[0], flat, depth + 1)
        if first is _NO_SHAPE:
            return _NO_SHAPE
        for index in range(1, len(value)):
            if _shape_of(value[index], flat, depth + 1) != first:
                return _NO_SHAPE
        return ("L", len(value), first)
    if kind is tuple:
        if len(value) < 2:
            return _NO_SHAPE
        parts = []
        for item in value:
            part = _shape_of(item, flat, depth + 1)
            if part is _NO_SHAPE:
                return _NO_SHAPE
            parts.append(part)
        return ("t", tuple(parts))
    real = _finite_real(value)
    if real is None:
        return _NO_SHAPE
    flat.append(real)
    return None


def shaped(shape: Shape, items: Iterator[Any]) -> Any:
    """The value of the :func:`point_shape` ``shape`` whose reals are the next of
    ``items`` in order (a tuple as right-nested pairs): the runtime value of a point from
    its reals, a seeded point from pairs of reals and seeds, a gradient from adjoints."""
    if shape is None:
        return next(items)
    kind = shape[0]
    if kind == "a":  # an array, or its adjoint (made dense, zeros if it was never reached)
        item = next(items)
        return item if type(item) is not float and type(item) is not arraylib.Sparse \
            else arraylib.array_adjoint(arraylib.zeros_of(shape[1]), item)
    if kind == "l":
        return list(islice(items, shape[1]))
    if kind == "L":
        inner = shape[2]
        return [shaped(inner, items) for _ in range(shape[1])]
    parts = [shaped(part, items) for part in shape[1]]
    value = parts.pop()
    while parts:
        value = (parts.pop(), value)
    return value


def _finite_real(x: Any) -> float | None:
    """``x`` (a Python float or int) as a finite real; None for anything else, a NaN, an
    infinity or an integer too large for a real."""
    kind = type(x)
    if kind is int:
        try:
            x = float(x)
        except OverflowError:
            return None
    elif kind is not float:
        return None
    return x if x - x == 0.0 else None  # x - x is NaN for a NaN or an infinity


def finite_reals(value: Any) -> bool:
    """Whether the runtime value ``value`` is a finite real or right-nested pairs of finite
    reals (a gradient of a :func:`real_point`): then it is its own Python data."""
    while type(value) is tuple and len(value) == 2:
        first = value[0]
        if type(first) is not float or first - first != 0.0:
            return False
        value = value[1]
    return type(value) is float and value - value == 0.0


def abridged(text: str, limit: int = 60) -> str:
    """``text`` cut to about ``limit`` characters for a message."""
    return text if len(text) <= limit else text[:limit] + "..."


def finite_input(r: float) -> float:
    """``r``, or a UsageError if it is NaN or infinite: lambdad computes with finite reals
    only, and an infinite input would only come back as a NaN far away."""
    if not math.isfinite(r):
        raise UsageError(f"a point or direction holds {format_real(r)}: lambdad computes with "
                         "finite reals only")
    return r


def first_non_finite(value: Any) -> float | None:
    """The first NaN or infinite real inside the runtime value ``value``, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is float:
            if not math.isfinite(item):
                return item
        elif type(item) in (tuple, list):
            stack.extend(item)
    return None


def check_functions(value: Any, type_: Type, where: str) -> Any:
    """``value`` (a runtime value of type ``type_``) with each Python callable at a function
    type wrapped so that its results are checked: a callable that raises, or returns
    something that is not a finite value of the function's result type, is an EvalError
    naming ``where``.  Follows the type, whose depth is that of the written type."""
    if isinstance(type_, FunT):
        if callable(value) and not hasattr(value, "__lambdad_checked__"):
            return _CheckedFunction(value, type_, where)
        return value
    if isinstance(type_, PairT) and type(value) is tuple:
        return (check_functions(value[0], type_.first, where),
                check_functions(value[1], type_.second, where))
    if isinstance(type_, ListT) and type(value) is list and not isinstance(type_.item, RealT):
        return [check_functions(item, type_.item, where) for item in value]
    return value


class _CheckedFunction:
    """A Python callable given as a function-typed argument, with its results checked."""

    __lambdad_checked__ = True

    def __init__(self, function: Callable[[Any], Any], type_: FunT, where: str):
        self.function = function
        self.type = type_
        self.where = where

    def __call__(self, argument: Any) -> Any:
        described = f"the Python function in {self.where} ({print_type(self.type)})"
        try:
            result = self.function(to_python(argument))
        except LambdadError:
            raise
        except Exception as exc:
            raise EvalError(f"{described} raised {type(exc).__name__}: "
                            f"{abridged(str(exc), 200)}") from None
        try:
            value = point_from_python(result, "the value")
        except UsageError as exc:
            raise EvalError(f"{described} returned {abridged(repr(result))}: "
                            f"{exc.message}") from None
        if not fits(value, self.type.result):
            raise EvalError(f"{described} returned {abridged(repr(result))}, which is not a "
                            f"value of type {print_type(self.type.result)}")
        return check_functions(value, self.type.result, self.where)

    def __repr__(self) -> str:
        return repr(self.function)


# ---------------------------------------------------------------- points written as text


def point_source(text: str, what: str) -> str:
    """The text of a point as an expression: ``2,5`` is the pair ``(2,5)``.  Raises
    UsageError for an empty point."""
    source = text.strip()
    if not source:
        raise UsageError(f"{what} needs a value")
    depth = 0
    for ch in source:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            return f"({source})"
    return source


def point_span(span: Span | None, text: str, source: str) -> Span | None:
    """The first character of ``span``, in the point ``source`` that :func:`point_source`
    made of ``text``, as a span in ``text`` itself (the columns moved by the stripping and
    the parentheses added), so that an error points into the point as the user wrote it."""
    if span is None or span.line != 1 or "\n" in text:
        return span
    col = span.col + (len(text) - len(text.lstrip())) - (1 if source != text.strip() else 0)
    return attrs.evolve(span, col=col, end_line=1, end_col=col + 1)


def literal_value(term: Term) -> Any | None:
    """The runtime value the point ``term`` denotes when it is written with literals only
    (reals, negated reals, booleans, pairs, lists), found without evaluating anything; None
    for any other term.  Iterative."""
    values: list[Any] = []
    stack: list[tuple[Term, bool]] = [(term, False)]
    while stack:
        current, built = stack.pop()
        real = number(current)
        if real is not None:
            values.append(real)
        elif isinstance(current, BoolLit):
            values.append(current.value)
        elif not isinstance(current, (Pair, ListLit)):
            return None
        elif not built:
            stack.append((current, True))
            stack.extend((kid, False) for kid in reversed(children(current)))
        else:
            count = len(children(current))
            parts = values[len(values) - count:]
            del values[len(values) - count:]
            values.append(tuple(parts) if isinstance(current, Pair) else parts)
    return values[0]


# ---------------------------------------------------------------- fitting and calling


def arguments_covered(name: str, f_type: Type, value: Any) -> int:
    """How many of the curried parameters of ``name : f_type`` the point ``value`` (a
    runtime value) supplies: 1 if it fits the first parameter, k if it is a k-tuple fitting
    the first k.  Raises UsageError if the point does not fit the function's input."""
    params = curried_params(f_type)
    if not params:
        raise UsageError(f"`{name}` is not a function; it has type {print_type(f_type)}")
    if fits(with_arrays(value, params[0]), params[0]):
        return 1
    for k in range(2, len(params) + 1):
        if fits(with_arrays(value, tuple_type(params[:k])), tuple_type(params[:k])):
            return k
    expected = print_type(params[0])
    if len(params) > 1:
        expected += " (or the tuple " + print_type(tuple_type(params)) + ")"
    raise UsageError(
        f"the point {format_value(value, summarised=True)} does not fit `{name}`, which "
        f"expects {expected}")


def longer_tuple(data: Any, t: Type) -> tuple[tuple, Type] | None:
    """The first tuple of the Python data ``data`` with more components than the tuple
    type ``t`` has at its place, and that type: a flat ``(1, 2, 3)`` where ``t`` is the
    pair ``R * (R * R)`` (a tuple is what was written); None when there is none.  A pair
    where ``t`` has a longer tuple is not one: nested pairs are also how the runtime holds
    a tuple.  Iterative."""
    stack = [(data, t)]
    while stack:
        value, type_ = stack.pop()
        if type(value) is tuple and isinstance(type_, PairT):
            components = tuple_components(type_)
            if len(value) > 2 and type_.arity != ANY_ARITY and len(value) != len(components):
                return value, type_
            if len(value) == len(components):
                stack.extend(zip(value, components))
            elif len(value) == 2:
                stack.extend(((value[0], type_.first), (value[1], type_.second)))
        elif type(value) is list and isinstance(type_, ListT) and not all_reals(value):
            stack.extend((item, type_.item) for item in value)
    return None


def argument_type(f_type: Type, k: int) -> Type:
    """The type of a point giving the first ``k`` curried arguments of ``f_type``."""
    params = curried_params(f_type)
    return params[0] if k == 1 else tuple_type(params[:k])


def curried_parts(value: Any, k: int) -> list[Any]:
    """The k arguments packed in the point ``value`` (the value itself when k is 1)."""
    parts = []
    for _ in range(k - 1):
        parts.append(value[0])
        value = value[1]
    parts.append(value)
    return parts


def packed(parts: Sequence[Any]) -> Any:
    """The point packing ``parts`` (the inverse of :func:`curried_parts`)."""
    point = parts[-1]
    for part in reversed(parts[:-1]):
        point = (part, point)
    return point


def curried_call(function: Term, point: Term, k: int) -> Term:
    """``let (x1, ..., xk) = point in function x1 ... xk``: the call of a function of ``k``
    curried parameters with the k-tuple ``point`` (``function point`` when k is 1,
    ``function (fst point) (snd point)`` when k is 2).  The names it binds capture nothing
    of ``function``."""
    if k == 1:
        return App(function, point)
    if k == 2:
        return App(App(function, FST.applied(point)), SND.applied(point))
    used = free_vars(function) | free_vars(point)
    names: list[str] = []
    serial = 0
    while len(names) < 2 * k - 2:  # x1 .. xk, then the rests r2 .. r(k-1)
        serial += 1
        candidate = f"x'{serial}"
        if candidate not in used:
            names.append(candidate)
    parts, rests = names[:k], [None, *names[k:]]
    body = function
    for name in parts:
        body = App(body, Var(name))
    for i in range(k - 2, -1, -1):  # the pattern (x(i+1), ..., xk) takes apart rest i
        second = parts[k - 1] if i == k - 2 else rests[i + 1]
        value = point if i == 0 else Var(rests[i])
        body = LetPair(parts[i], second, value, body, k - i)
    return body


def uncurried_term(name: str, k: int) -> Term:
    """``\\p -> name (fst p) ... ``: the top-level function ``name`` of ``k`` curried
    parameters as a function of one k-tuple.  The parameter never captures ``name``."""
    param = "p" if name != "p" else "p'1"
    return Lam(param, curried_call(Var(name), Var(param), k))


def uncurried_lambda(lam: Term, k: int) -> Lam | None:
    """``\\p -> let (x1, r1) = p in ... let (x(k-1), xk) = r(k-2) in e``: the λ
    ``\\x1 -> ... \\xk -> e`` as a function of one k-tuple, its parameters bound by
    patterns rather than by k applications (the same function, one call instead of k,
    and one region of straight-line code for ←D to fuse); None when ``lam`` does not
    begin with k λs.  The names it adds are fresh for ``e``; ``p`` is typed when every
    parameter is."""
    params: list[Lam] = []
    body = lam
    for _ in range(k):
        if not isinstance(body, Lam):
            return None
        params.append(body)
        body = body.body
    names = [param.param for param in params]
    used = set(names) | free_vars(body)
    fresh: list[str] = []
    serial = 0
    while len(fresh) < k - 1:  # p, then r1 .. r(k-2)
        serial += 1
        candidate = f"p'{serial}"
        if candidate not in used:
            fresh.append(candidate)
    term = body
    for i in range(k - 2, -1, -1):
        second = names[k - 1] if i == k - 2 else fresh[i + 1]
        term = LetPair(names[i], second, Var(fresh[i]), term, k - i)
    types = [param.param_type for param in params]
    typed = all(t is not None for t in types)
    return Lam(fresh[0], term, param_type=tuple_type(types) if typed else None)


# ---------------------------------------------------------------- naming input reals


def parameter_names(term: Term) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The names of a definition's curried parameters, and the names its patterns give to
    pair components: a pattern parameter ``(a, (b, c))`` is a fresh parameter ``p`` with
    ``let (a, p1) = p in let (b, c) = p1 in ...`` (parser), read back as ``{p: (a, p1),
    p1: (b, c)}``."""
    names: list[str] = []
    components: dict[str, tuple[str, str]] = {}
    while True:
        if isinstance(term, Lam):
            names.append(term.param)
        elif isinstance(term, LetPair) and isinstance(term.value, Var):
            components[term.value.name] = (term.first, term.second)
        else:
            return names, components
        term = term.body


def argument_names(definition: Term, k: int) -> list[str]:
    """A name for each of the first ``k`` curried arguments of ``definition``: its
    parameter's name, else ``x`` (one argument) or ``x1, x2, ...``."""
    params, _ = parameter_names(definition)
    return [params[i] if i < len(params) else ("x" if k == 1 else f"x{i + 1}")
            for i in range(k)]


def input_names(definition: Term, value: Any, k: int, whole_arrays: bool = False,
                t: Type | None = None) -> list[str]:
    """A name for each real of the point ``value`` (of type ``t``, the point's type, when
    given) giving ``k`` arguments of the function ``definition``, left to right, as the
    user wrote it: the parameter's name, with ``.0``, ``.1``, ... for the components of a
    tuple as written (``.0, .1, .2`` for a triple, ``.0, .1.0, .1.1`` for ``(a, (b, c))``)
    and ``[i]`` for list elements and array elements (``w.1[2]``, ``m[1][0]``); a
    component that a pattern parameter names (``\\(a, b) ->``) has that name.  With
    ``whole_arrays``, an array is named once, as a whole (``m``)."""
    _, components = parameter_names(definition)
    roots = argument_names(definition, k)
    names: list[str] = []
    if t is not None:
        value = written(value, t)
        parts = list(value) if k > 1 else [value]
    else:
        parts = curried_parts(value, k)
    # (value, its name as text, the variable bound to it if a pattern names it)
    stack = [(part, root, root) for part, root in reversed(list(zip(parts, roots)))]
    while stack:
        v, path, bound = stack.pop()
        if type(v) is float or (whole_arrays and type(v) is arraylib.ARRAY):
            names.append(path)
        elif type(v) is arraylib.ARRAY:
            names.extend(path + "".join(f"[{i}]" for i in at) 
                         for at in product(*map(range, v.shape)))
        elif type(v) is tuple and bound in components:
            # the pattern (a, b, c) binds a and the rest (b, c) to a fresh name, and so on
            bound_names: list[str | None] = []
            rest: str | None = bound
            for _ in range(len(v) - 1):
                first, rest = components.get(rest, (None, None)) if rest else (None, None)
                bound_names.append(first)
            bound_names.append(rest)
            stack.extend((item, _component_path(path, name, f".{i}"), name)
                         for i, (item, name) in reversed(list(enumerate(zip(v, bound_names)))))
        elif type(v) is tuple:
            stack.extend((item, f"{path}.{i}", None) for i, item in reversed(list(enumerate(v))))
        elif type(v) is list:
            stack.extend((item, f"{path}[{i}]", None)
                         for i, item in reversed(list(enumerate(v))))
    return names


def _component_path(path: str, bound: str | None, step: str) -> str:
    """The name of a pair component: the pattern's name for it (``_`` included), else
    ``path`` + ``step``."""
    return bound if bound is not None else path + step


def output_names(root: str, value: Any) -> list[str]:
    """A name for each real of a result (its tuples as written, see
    :func:`~lambdad.values.written`), left to right: ``f``, ``f[2]``, ``f.1[0]``; the
    components of a tuple are named as written (``f.0``, ``f.1``, ``f.2`` for a triple),
    as the inputs are (:func:`input_names`)."""
    names: list[str] = []
    stack = [(value, root)]
    while stack:
        v, path = stack.pop()
        if type(v) is float:
            names.append(path)
        elif type(v) is arraylib.ARRAY:  # an element per name, row by row
            names.extend(path + "".join(f"[{i}]" for i in at)
                         for at in product(*map(range, v.shape)))
        elif type(v) is tuple:
            stack.extend((item, f"{path}.{i}") for i, item in reversed(list(enumerate(v))))
        elif type(v) is list:
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(v))))
    return names


# ---------------------------------------------------------------- points as terms


def point_term(value: Any, on_real: Callable[[float], Term],
               on_array: Callable[[Any], Term] | None = None, t: Type | None = None) -> Term:
    """A term rebuilding the runtime value ``value`` (of type ``t``: its tuples are written
    as ``t`` has them; without ``t``, as pairs), each real replaced by ``on_real(r)`` (an
    array's too, unless ``on_array`` is given: each array replaced by
    ``on_array(array)``).  Raises UsageError for a value holding a function."""
    if type(value) is float:
        return on_real(value)
    if type(value) is bool:
        return BoolLit(value)
    if type(value) is tuple:
        pair = t if isinstance(t, PairT) else None
        return Pair(point_term(value[0], on_real, on_array, pair and pair.first),
                    point_term(value[1], on_real, on_array, pair and pair.second),
                    pair.arity if pair is not None else 2)
    if type(value) is list:
        item = t.item if isinstance(t, ListT) else None
        return ListLit(tuple(point_term(v, on_real, on_array, item) for v in value))
    if type(value) is arraylib.ARRAY and on_array is not None:
        return on_array(value)
    if type(value) is arraylib.ARRAY:  # `array [..]`, `matrix [[..], ..]`
        items = value.tolist()
        if value.ndim == 1:
            return FROM_LIST.applied(ListLit(tuple(map(on_real, items))))
        return FROM_ROWS.applied(ListLit(tuple(
            ListLit(tuple(map(on_real, row))) for row in items)))
    raise UsageError("a point containing a function cannot be written as a program")


def real_term(r: float) -> Term:
    """The literal ``r`` as the parser reads it (``-2`` is the negation of ``2``)."""
    return real(r, None)
