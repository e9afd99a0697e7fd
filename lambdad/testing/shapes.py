"""Shapes: what the generator knows of a value (a real's estimated range, a list's length),
and the bounds that keep generated programs inside the primitives' domains."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs

from ..primitives import PRIMITIVES, DomainError, Primitive
from ..syntax import BOOL, REAL, BoolT, FunT, ListT, PairT, RealT, Type


INPUT_BOUND = 3.0
PARAM_BOUND = 4.0
MAGNITUDE = 50.0
MAX_LIST = 4
INPUT_KINDS = ("reals", "tuple", "list", "nested")

# Literals a generated program uses; non-negative because `-2` is `neg 2` in the syntax.
_CONSTANTS = (1.0, 2.0, 0.5, 3.0, 0.25, 1.5, 0.0)
# Literal second arguments tried for binary primitives (`e ^ 2`, `e / 3`).
_LITERAL_ARGUMENTS = (2.0, 3.0)



# --------------------------------------------------------------------------- shapes
# A shape is a type whose reals carry an estimated range and whose lists carry a length key
# (an int, the name of an input list, or None when unknown): what the generator needs to
# keep primitives in their domains and `zip` on lists of equal lengths.


@attrs.frozen
class RealShape:
    """A real in ``[lo, hi]`` (estimated)."""

    lo: float
    hi: float

    @property
    def type(self) -> Type:
        return REAL

    @property
    def magnitude(self) -> float:
        return max(abs(self.lo), abs(self.hi))


@attrs.frozen
class BoolShape:
    """A boolean."""

    @property
    def type(self) -> Type:
        return BOOL


@attrs.frozen
class PairShape:
    """A pair of two shapes (of ``arity`` k > 2: a k-tuple, ``second`` the shape of the
    rest)."""

    first: Any
    second: Any
    arity: int = 2

    @property
    def type(self) -> Type:
        return PairT(self.first.type, self.second.type, self.arity)


@attrs.frozen
class ListShape:
    """A list whose items have shape ``item``; ``length`` is a key: equal keys, equal lengths."""

    item: Any
    length: int | str | None

    @property
    def type(self) -> Type:
        return ListT(self.item.type)


@attrs.frozen
class FunShape:
    """A function accepting arguments of shape ``arg`` and returning ``result``."""

    arg: Any
    result: Any

    @property
    def type(self) -> Type:
        return FunT(self.arg.type, self.result.type)


PARAM_REAL = RealShape(-PARAM_BOUND, PARAM_BOUND)
INPUT_REAL = RealShape(-INPUT_BOUND, INPUT_BOUND)


def standard_shape(t: Type) -> Any:
    """The shape a λ-parameter of type ``t`` is generated for (reals in the parameter box);
    raises ValueError for a type the generator does not produce."""
    if isinstance(t, RealT):
        return PARAM_REAL
    if isinstance(t, BoolT):
        return BoolShape()
    if isinstance(t, PairT):
        return PairShape(standard_shape(t.first), standard_shape(t.second))
    if isinstance(t, ListT):
        return ListShape(standard_shape(t.item), None)
    if isinstance(t, FunT):
        return FunShape(standard_shape(t.arg), standard_shape(t.result))
    raise ValueError(f"no standard shape for {t!r}")


def _within(shape: Any, target: Any) -> bool:
    """Whether every value of ``shape`` is acceptable where ``target`` is expected."""
    stack = [(shape, target)]
    while stack:
        s, t = stack.pop()
        if isinstance(s, RealShape):
            if s.lo < t.lo or s.hi > t.hi:
                return False
        elif isinstance(s, PairShape):
            stack.extend(((s.first, t.first), (s.second, t.second)))
        elif isinstance(s, ListShape):
            if t.length is not None and s.length != t.length:
                return False
            stack.append((s.item, t.item))
        elif isinstance(s, FunShape):
            stack.append((s.result, t.result))
    return True


def _join(a: Any, b: Any) -> Any:
    """The shape of ``if c then a else b``."""
    if isinstance(a, RealShape):
        return RealShape(min(a.lo, b.lo), max(a.hi, b.hi))
    if isinstance(a, PairShape):
        return PairShape(_join(a.first, b.first), _join(a.second, b.second))
    if isinstance(a, ListShape):
        return ListShape(_join(a.item, b.item), a.length if a.length == b.length else None)
    if isinstance(a, FunShape):
        return FunShape(a.arg, _join(a.result, b.result))
    return a


# --------------------------------------------------------------------------- ranges


def _grid(shape: RealShape, n: int) -> list[float]:
    if shape.lo == shape.hi:
        return [shape.lo]
    points = [shape.lo + (shape.hi - shape.lo) * i / (n - 1) for i in range(n)]
    if shape.lo < 0.0 < shape.hi:
        points.append(0.0)
    return points


def image(prim: Primitive, args: Sequence[RealShape], respect_domain: bool = True
          ) -> RealShape | None:
    """The estimated range of the real primitive ``prim`` over the box ``args``, evaluated on
    a grid; None when some grid point is outside its ``domain`` (if ``respect_domain``), fails,
    or gives a non-finite value."""
    n = 61 if len(args) == 1 else 15 if len(args) == 2 else 7
    lo, hi = math.inf, -math.inf
    for point in itertools.product(*(_grid(a, n) for a in args)):
        if respect_domain and prim.domain is not None and not prim.domain(*point):
            return None
        try:
            value = prim.evaluate(*point)
        except (DomainError, ArithmeticError, ValueError):
            return None
        if not math.isfinite(value):
            return None
        lo, hi = min(lo, value), max(hi, value)
    return RealShape(lo, hi)


def _is_real_function(p: Primitive) -> bool:
    return p.kind == "real" and p.evaluate is not None


class Ranges:
    """:func:`image` with a cache, and the primitives the generator squashes with: one per
    strategy, shared by every program it draws (the estimates are pure functions)."""

    def __init__(self) -> None:
        self._cache: dict[tuple, RealShape | None] = {}
        self.squashers = self._squashers()

    def image(self, prim: Primitive, args: Sequence[RealShape], respect_domain: bool = True
              ) -> RealShape | None:
        """:func:`image`, remembered."""
        key = (prim.name, respect_domain, tuple((round(a.lo, 6), round(a.hi, 6)) for a in args))
        if key not in self._cache:
            self._cache[key] = image(prim, args, respect_domain)
        return self._cache[key]

    def _squashers(self) -> list[Primitive]:
        """Unary real primitives written as functions, defined and smooth everywhere, with a
        bounded range (``sin``, ``cos``, ``tanh``, ``sigmoid`` in the standard table)."""
        wide = RealShape(-1000.0, 1000.0)
        found = []
        for p in PRIMITIVES.values():
            if (_is_real_function(p) and p.arity == 1 and p.spelling.fixity == "function"
                    and p.domain is None and p.kink is None):
                r = self.image(p, [wide])
                if r is not None and r.magnitude <= 1.5:
                    found.append(p)
        return found
