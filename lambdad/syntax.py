"""The abstract syntax of lambdad: types, the core source terms, and the target-only terms.

The parser desugars the surface language (multi-argument lambdas, pair patterns, tuples,
``&&``/``||``, local function definitions, operators) into this small core, so every later
stage (types, printer, both transformations, the interpreter) has one arm per class below.

Nodes are frozen attrs classes with tuple children.  The source span is excluded from
equality, and equality and hashing are computed with an explicit stack, so comparing two
terms nested 10^4 deep is fine (``parse(print(t)) == t`` is a property test).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from .errors import Span


class Node:
    """Base of every syntax node.  Structural equality ignoring spans, without recursion."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other):
            return NotImplemented if not isinstance(other, Node) else False
        pending: list[tuple[Any, Any]] = [(self, other)]
        while pending:
            left, right = pending.pop()
            if left is right:
                continue
            if isinstance(left, Node):
                if type(left) is not type(right):
                    return False
                for name in _compared_fields(type(left)):
                    pending.append((getattr(left, name), getattr(right, name)))
            elif isinstance(left, tuple):
                if not isinstance(right, tuple) or len(left) != len(right):
                    return False
                pending.extend(zip(left, right))
            elif isinstance(right, Node) or left != right or type(left) is not type(right):
                return False
        return True

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        digest = 0
        pending: list[Any] = [self]
        while pending:
            item = pending.pop()
            if isinstance(item, Node):
                digest = hash((digest, type(item).__name__))
                pending.extend(getattr(item, name) for name in _compared_fields(type(item)))
            elif isinstance(item, tuple):
                digest = hash((digest, len(item)))
                pending.extend(item)
            else:
                digest = hash((digest, item))
        return digest


_FIELDS: dict[type, tuple[str, ...]] = {}


def _compared_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in attrs.fields(cls) if f.name != "span")
        _FIELDS[cls] = names
    return names


def node(cls):
    """Class decorator: a frozen, slotted attrs class using :class:`Node` equality."""
    return attrs.frozen(eq=False, repr=True)(cls)


def _span_field():
    return attrs.field(default=None, kw_only=True, repr=False)


# --------------------------------------------------------------------------- types


class Type(Node):
    __slots__ = ()


@node
class RealT(Type):
    """``R`` (also ``ℝ``): the reals."""


@node
class BoolT(Type):
    """``Bool``."""


@node
class PairT(Type):
    """``A * B`` (also ``A × B``)."""

    first: Type
    second: Type


@node
class FunT(Type):
    """``A -> B``.  A function into the cotangent space, ``R -> d``, prints as ``R -o d``:
    in the target language those are exactly the backpropagators (linear maps)."""

    arg: Type
    result: Type


@node
class ListT(Type):
    """``[A]``."""

    item: Type


@node
class VarT(Type):
    """A type variable ``a``; ``rigid`` ones come from annotations and unify only with themselves."""

    name: str
    rigid: bool = False


@node
class CotangentT(Type):
    """``d``: the cotangent space of the inputs being differentiated (target language only)."""


def tuple_type(types: "list[Type] | tuple[Type, ...]") -> "Type":
    """``t1 * t2 * ... * tn`` (pairs nest to the right)."""
    result = types[-1]
    for t in reversed(types[:-1]):
        result = PairT(t, result)
    return result


def curried_params(t: "Type") -> "list[Type]":
    """The parameter types of the curried function type ``t1 -> ... -> tn -> r``."""
    params = []
    while isinstance(t, FunT):
        params.append(t.arg)
        t = t.result
    return params


def result_after(t: "Type", k: int) -> "Type":
    """The type of ``f a1 .. ak`` for ``f : t``."""
    for _ in range(k):
        t = t.result
    return t


def is_differentiable(t: "Type") -> bool:
    """Whether ``t`` is built from ``R``, pairs and lists only: the types whose values have
    derivatives.  A type variable (an unused component, ``def f (a, _) = a``) stands for
    ``R`` here."""
    stack = [t]
    while stack:
        current = stack.pop()
        if isinstance(current, PairT):
            stack.extend((current.first, current.second))
        elif isinstance(current, ListT):
            stack.append(current.item)
        elif not isinstance(current, (RealT, VarT)):
            return False
    return True


REAL = RealT()
BOOL = BoolT()
COTANGENT = CotangentT()
BACKPROPAGATOR = FunT(REAL, COTANGENT)


# --------------------------------------------------------------------------- terms


class Term(Node):
    __slots__ = ()


@node
class Const(Term):
    """A real literal ``2.5`` (always a float)."""

    value: float
    span: Span | None = _span_field()


@node
class BoolLit(Term):
    """``true`` / ``false``."""

    value: bool
    span: Span | None = _span_field()


@node
class Var(Term):
    """A variable ``x``."""

    name: str
    span: Span | None = _span_field()


@node
class Builtin(Term):
    """A primitive of the table used as a value, not applied to all its arguments: ``map sin``
    has ``Builtin("sin")`` as its first argument."""

    name: str
    span: Span | None = _span_field()


@node
class Prim(Term):
    """A primitive applied to exactly its arity of arguments: ``x + y``, ``sin x``, ``map f xs``."""

    op: str
    args: tuple[Term, ...]
    span: Span | None = _span_field()


@node
class Lam(Term):
    """``\\x -> e`` or ``\\(x : A) -> e``; ``x`` may be ``_``."""

    param: str
    body: Term
    param_type: Type | None = None
    span: Span | None = _span_field()


@node
class App(Term):
    """``f a``: application of a function value."""

    fn: Term
    arg: Term
    span: Span | None = _span_field()


@node
class Let(Term):
    """``let x = e1 in e2``; a local function ``let f x = e1 in e2`` has a ``Lam`` value."""

    name: str
    value: Term
    body: Term
    span: Span | None = _span_field()


@node
class LetPair(Term):
    """``let (x, y) = e1 in e2``; either name may be ``_``.  Nested patterns are nested LetPairs."""

    first: str
    second: str
    value: Term
    body: Term
    span: Span | None = _span_field()


@node
class Pair(Term):
    """``(e1, e2)``; ``(a, b, c)`` is ``(a, (b, c))``."""

    first: Term
    second: Term
    span: Span | None = _span_field()


@node
class If(Term):
    """``if c then e1 else e2``; ``a && b`` is ``if a then b else false``, ``a || b`` is
    ``if a then true else b``."""

    cond: Term
    then: Term
    orelse: Term
    span: Span | None = _span_field()


@node
class ListLit(Term):
    """``[e1, ..., en]``."""

    items: tuple[Term, ...]
    span: Span | None = _span_field()


@node
class Annot(Term):
    """``(e : A)``: an annotation, checked by type inference."""

    expr: Term
    type: Type
    span: Span | None = _span_field()


# ----- target-language terms (linear negation, AD.md section 4)


@node
class LinLam(Term):
    """``\\a -o e`` (``λa ⊸ e``): a linear abstraction, a backpropagator of type ``R -o d``.
    Each evaluation receives a fresh creation stamp."""

    param: str
    body: Term
    span: Span | None = _span_field()


@node
class Zero(Term):
    """``zero``: the zero cotangent, of type ``d``."""

    span: Span | None = _span_field()


@node
class Plus(Term):
    """``e1 <+> e2`` (``e1 ⊕ e2``): the sum of two cotangents."""

    left: Term
    right: Term
    span: Span | None = _span_field()


@node
class Seed(Term):
    """``seed i``: the backpropagator of the i-th input real (``\\a -o a·e_i``)."""

    index: int
    span: Span | None = _span_field()


@node
class ReadOff(Term):
    """``cotangent x e``: run the backward phase of ``e : d`` and return the adjoints of the
    seeded input ``x : ←D(A)`` in the shape of ``A`` (each ``(r, seed i)`` leaf becomes the
    i-th adjoint)."""

    point: Term
    cotangent: Term
    span: Span | None = _span_field()


@node
class Decl(Node):
    """``def name = value`` at top level (parameters already turned into lambdas)."""

    name: str
    value: Term
    span: Span | None = _span_field()


@node
class Module(Node):
    """A whole program: declarations in order."""

    decls: tuple[Decl, ...]


# --------------------------------------------------------------------------- traversal

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    Const: (),
    BoolLit: (),
    Var: (),
    Builtin: (),
    Prim: ("args",),
    Lam: ("body",),
    App: ("fn", "arg"),
    Let: ("value", "body"),
    LetPair: ("value", "body"),
    Pair: ("first", "second"),
    If: ("cond", "then", "orelse"),
    ListLit: ("items",),
    Annot: ("expr",),
    LinLam: ("body",),
    Zero: (),
    Plus: ("left", "right"),
    Seed: (),
    ReadOff: ("point", "cotangent"),
}


def children(term: Term) -> Iterator[Term]:
    """The immediate sub-terms of ``term``, left to right (evaluation order)."""
    for name in _CHILD_FIELDS[type(term)]:
        value = getattr(term, name)
        if isinstance(value, tuple):
            yield from value
        else:
            yield value


def with_children(term: Term, new_children: list[Term]) -> Term:
    """``term`` with its immediate sub-terms replaced, in :func:`children` order."""
    changes = {}
    position = 0
    for name in _CHILD_FIELDS[type(term)]:
        value = getattr(term, name)
        if isinstance(value, tuple):
            changes[name] = tuple(new_children[position:position + len(value)])
            position += len(value)
        else:
            changes[name] = new_children[position]
            position += 1
    return attrs.evolve(term, **changes) if changes else term


def binders(term: Term) -> tuple[tuple[str, ...], ...]:
    """For each child of ``term`` (as in :func:`children`), the names it binds there."""
    if isinstance(term, (Lam, LinLam)):
        return ((term.param,),)
    if isinstance(term, Let):
        return ((), (term.name,))
    if isinstance(term, LetPair):
        return ((), (term.first, term.second))
    return tuple(() for _ in children(term))


def walk(term: Term) -> Iterator[Term]:
    """Every sub-term of ``term`` (pre-order), without recursion."""
    stack = [term]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def free_vars(term: Term) -> frozenset[str]:
    """The variables occurring free in ``term``, without recursion, in time linear in its
    size (bound names are counted on the way down and released on the way back up)."""
    free: set[str] = set()
    bound: dict[str, int] = {}
    _ENTER, _LEAVE = 1, -1
    # Work items: a term to visit, or (±1, names) to enter / leave the scope of names.
    stack: list = [term]
    while stack:
        item = stack.pop()
        if type(item) is tuple:
            step, names = item
            for name in names:
                bound[name] = bound.get(name, 0) + step
            continue
        if isinstance(item, Var):
            if not bound.get(item.name):
                free.add(item.name)
            continue
        for child, names in reversed(list(zip(children(item), binders(item)))):
            if names:
                stack.append((_LEAVE, names))
                stack.append(child)
                stack.append((_ENTER, names))
            else:
                stack.append(child)
    return frozenset(free)


def type_vars(t: Type) -> list[str]:
    """Names of the type variables of ``t``, in order of first occurrence."""
    seen: list[str] = []
    stack = [t]
    while stack:
        current = stack.pop()
        if isinstance(current, VarT):
            if current.name not in seen:
                seen.append(current.name)
        elif isinstance(current, PairT):
            stack.extend((current.second, current.first))
        elif isinstance(current, FunT):
            stack.extend((current.result, current.arg))
        elif isinstance(current, ListT):
            stack.append(current.item)
    return seen
