"""The reals of runtime values: which leaves are reals, dual reals (→D) or reverse reals
(←D); counting and pairing them, the directions of a basis, splitting a forward-mode result,
and the type a value's leaves tell.  Every walk is iterative (deep values do not recurse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .arraylib import ARRAY, zeros_of
from .syntax import ANY_ARITY, BOOL, MAT, REAL, VEC, ListT, PairT, Type
from .tape import Backprop
from .values import SCALAR_TYPES, all_reals, map_value


def is_real(v: Any) -> bool:
    """Whether ``v`` is a real (a float)."""
    return type(v) in SCALAR_TYPES


def is_dual(v: Any) -> bool:
    """A forward-mode real ``(r, r')``: in →D(A) every real of A is a pair of two floats,
    and nothing else is (a source pair of reals becomes a pair of pairs)."""
    return type(v) is tuple and type(v[0]) in SCALAR_TYPES and type(v[1]) in SCALAR_TYPES


def is_reverse_real(v: Any) -> bool:
    """A reverse-mode real ``(r, r_)``: a float paired with its backpropagator."""
    return type(v) is tuple and type(v[0]) in SCALAR_TYPES and isinstance(v[1], Backprop)


def count_reals(value: Any) -> int:
    """How many reals the value ``value`` holds (in pairs and lists)."""
    if type(value) is list and all_reals(value):
        return len(value)
    count = 0

    def tally(r):
        nonlocal count
        count += 1 if type(r) is float else r.size  # an array: each of its reals
        return r

    map_value(value, is_real, tally)
    return count


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


def basis(x: Any, i: int) -> Any:
    """The direction of the i-th real of ``x`` (left to right): 1 there, 0 elsewhere."""
    position = 0

    def entry(r: Any) -> Any:
        nonlocal position
        if type(r) is ARRAY:  # an array: 1 at its element i, if it is there
            t = zeros_of(r.shape)
            if position <= i < position + r.size:
                t.flat[i - position] = 1.0
            position += r.size
            return t
        t = 1.0 if position == i else 0.0
        position += 1
        return t

    return map_value(x, is_real, entry)


def leaves(value: Any) -> list[float]:
    """The reals of ``value`` (pairs, lists, the elements of arrays row by row), left to
    right."""
    out = []
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is float:
            out.append(v)
        elif type(v) is ARRAY:
            out.extend(v.ravel().tolist())
        elif isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
    return out


def replace_leaves(value: Any, reals: Sequence[float]) -> Any:
    """``value`` with its real leaves (array elements included) replaced, in order, by
    ``reals``."""
    it = iter(reals)

    def replaced(r: Any) -> Any:
        if type(r) is ARRAY:
            new = r.copy()
            new.flat[:] = [next(it) for _ in range(r.size)]
            return new
        return next(it)

    return map_value(value, is_real, replaced)


def value_type(value: Any) -> Type | None:
    """The type of the runtime value ``value`` when its values tell it: reals, booleans,
    arrays (``Vec``, ``Mat``), pairs (of any arity, :data:`~lambdad.syntax.ANY_ARITY`) and
    non-empty lists (typed by their first item) of those; None otherwise (a function, an
    empty list).  Iterative: deep pairs do not recurse."""
    # post-order over (value, done): each finished value pushes its type on ``built``
    work: list[tuple[Any, bool]] = [(value, False)]
    built: list[Type | None] = []
    while work:
        v, done = work.pop()
        kind = type(v)
        # (the shared ground types: their hashes, computed once, key the caches of images)
        if kind is float:
            built.append(REAL)
        elif kind is bool:
            built.append(BOOL)
        elif kind is tuple and len(v) == 2:
            if done:
                second, first = built.pop(), built.pop()
                # (the arity a value does not tell: the type unifies with any tuple's)
                built.append(None if first is None or second is None
                             else PairT(first, second, ANY_ARITY))
            else:
                work.extend(((v, True), (v[1], False), (v[0], False)))
        elif kind is ARRAY and 1 <= v.ndim <= 2:
            built.append(VEC if v.ndim == 1 else MAT)
        elif kind is list and v:
            if done:
                item = built.pop()
                built.append(None if item is None else ListT(item))
            else:
                work.extend(((v, True), (v[0], False)))
        else:
            built.append(None)
    return built[0]


def is_flat_reals(value: Any) -> bool:
    """Whether ``value`` is a list of reals (the common point, seeded and read by a loop)."""
    return type(value) is list and all_reals(value)


def has_function(value: Any) -> bool:
    """Whether a function occurs in ``value`` (in its pairs and lists)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is tuple or type(v) is list:
            stack.extend(v)
        elif callable(v) and not isinstance(v, Backprop):
            return True
    return False


def split_flat_duals(out: Any) -> tuple[Any, Any] | None:
    """The primal and the tangent of a forward-mode result that is a dual real, a list of
    them, or a pair of those (a value and its gradient: a Hessian-vector product), by one
    loop each; None for any other result (split by the general walk)."""

    def flat(part: Any) -> tuple[Any, Any] | None:
        if is_dual(part):
            return part
        if type(part) is list and all(map(is_dual, part)):
            return [r for r, _ in part], [t for _, t in part]
        return None

    whole = flat(out)
    if whole is not None:
        return whole
    if type(out) is tuple and len(out) == 2:
        first, second = flat(out[0]), flat(out[1])
        if first is not None and second is not None:
            return (first[0], second[0]), (first[1], second[1])
    return None
