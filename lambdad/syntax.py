"""The abstract syntax of lambdad: types, the core source terms, and the target-only terms.

The parser desugars the surface language (multi-argument lambdas, pair patterns, tuples,
``&&``/``||``, local function definitions, operators) into this small core, so every later
stage (types, printer, both transformations, the interpreter) has one arm per class below.

Nodes are frozen attrs classes with tuple children.  The source span is excluded from
equality, and equality and hashing are computed with an explicit stack, so comparing two
terms nested 10^4 deep is fine (``parse(print(t)) == t`` is a property test).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from .errors import Span, direct_init
from .iterate import run

N = TypeVar("N", bound="Node")
T = TypeVar("T", bound="Term")


class Node:
    """Base of every syntax node.  Structural equality ignoring spans, without recursion;
    the hash is computed once per node (nodes never change): type terms are hashed in the
    keys of every cache of images and compiled code, at every call that looks one up."""

    __slots__ = ("_hash",)

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
        try:
            return self._hash
        except AttributeError:
            pass
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
        object.__setattr__(self, "_hash", digest)  # (frozen: set past attrs' guard)
        return digest


_FIELDS: dict[type, tuple[str, ...]] = {}


def _compared_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in attrs.fields(cls) if f.name != "span")
        _FIELDS[cls] = names
    return names


def node(cls=None, *, children: tuple[str, ...] = (), binds: dict[str, tuple[str, ...]] | None = None,
         types: tuple[str, ...] = ()):
    """Class decorator: a frozen, slotted attrs class using :class:`Node` equality, with its
    shape declared once for every pass (see :func:`children`, :func:`binders`):

    - ``children``: the fields holding sub-nodes, in evaluation order (a field annotated
      ``tuple[...]`` holds a tuple of them);
    - ``binds``: for a child field, the fields naming the variables bound in it;
    - ``types``: the fields holding a type annotation (``None`` when absent).
    """

    def make(cls):
        cls = attrs.frozen(eq=False, repr=True, weakref_slot=False)(cls)
        cls.__init__ = direct_init(cls)
        fields = {f.name: f for f in attrs.fields(cls)}
        unknown = {*children, *(binds or {}), *types} - fields.keys()
        assert not unknown, f"{cls.__name__} declares no fields {sorted(unknown)}"
        many = frozenset(name for name in children
                         if str(fields[name].type).startswith("tuple"))
        cls._shape = _Shape(children, many, tuple(tuple((binds or {}).get(name, ()))
                                                  for name in children), types,
                            _children_reader(children, many))
        return cls

    return make if cls is None else make(cls)


@attrs.frozen
class _Shape:
    """How a node class holds its sub-nodes (see :func:`node`)."""

    fields: tuple[str, ...]            # child fields, in order
    many: frozenset[str]               # those holding a tuple of children
    binder_fields: tuple[tuple[str, ...], ...]  # per child field: fields naming its binders
    type_fields: tuple[str, ...]       # fields holding a type annotation
    read_children: Callable[[Node], tuple[Node, ...]]  # what children() returns


def _children_reader(fields: tuple[str, ...], many: frozenset[str]
                     ) -> Callable[[Node], tuple[Node, ...]]:
    """The function giving a node's children, made once per class from its shape: every
    pass calls :func:`children` on every node, so the common shapes read their fields
    with one ``attrgetter`` instead of a loop over the shape."""
    if not fields:
        return lambda node: ()
    if not many:
        if len(fields) == 1:
            read_one = operator.attrgetter(fields[0])
            return lambda node: (read_one(node),)
        return operator.attrgetter(*fields)  # a tuple of the fields' values
    if len(fields) == 1:  # one tuple of children (a primitive's arguments, a list's items)
        read_many = operator.attrgetter(fields[0])
        return lambda node: tuple(read_many(node))  # (the tuple itself: no copy)

    def read(node: Node) -> tuple[Node, ...]:
        kids: list[Node] = []
        for name in fields:
            value = getattr(node, name)
            if name in many:
                kids.extend(value)
            else:
                kids.append(value)
        return tuple(kids)

    return read


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
class ArrayT(Type):
    """``Vec`` (``rank`` 1) and ``Mat`` (``rank`` 2): arrays of reals, a ground type like
    ``R`` (LANGUAGE.md section 9).  Shapes are checked when the program runs."""

    rank: int


ARRAY_TYPE_NAMES = {1: "Vec", 2: "Mat"}
"""How each rank of :class:`ArrayT` is written."""


@node(children=("first", "second"))
class PairT(Type):
    """``A * B`` (also ``A × B``); with ``arity`` k > 2 the written k-tuple type ``A * B *
    ... * K`` whose ``second`` is the (k-1)-tuple type ``B * ... * K``.

    A tuple is what was written (LANGUAGE.md section 10): ``R * R * R`` is
    ``PairT(R, PairT(R, R), arity=3)`` and ``R * (R * R)`` is ``PairT(R, PairT(R, R))``.
    The arity is part of type equality and unification, so the two never meet, while
    every pass that only follows ``first`` and ``second`` (the transformations, the
    compiled code, the runtime, whose values are nested pairs either way) treats a tuple
    as the chain of pairs it is stored as.  Printing, JSON and the Python API read the
    arity off the type (:func:`lambdad.values.written`).  (Binary cells with a written
    arity rather than n-ary nodes: the many passes that take pairs apart stay as they
    are.)"""

    first: Type
    second: Type
    arity: int = 2


ANY_ARITY = 0
"""The arity of a pair type read off a runtime value (:func:`lambdad.reals.value_type`):
values are nested pairs whatever was written, so such a type unifies with a tuple type of
any arity (it prints as a pair)."""


@node(children=("arg", "result"))
class FunT(Type):
    """``A -> B``.  A function into the cotangent space, ``R -> d``, prints as ``R -o d``:
    in the target language those are exactly the backpropagators (linear maps)."""

    arg: Type
    result: Type


@node(children=("item",))
class ListT(Type):
    """``[A]``."""

    item: Type


@node
class VarT(Type):
    """A type variable ``a``; ``rigid`` ones come from annotations and unify only with themselves."""

    name: str
    rigid: bool = False


@node(children=("ring",))
class CotangentT(Type):
    """``d<K>``: the cotangent space of the inputs being differentiated, with scalars in the
    ring ``K`` (target language only); ``d`` alone is ``d<R>``.  A transformation maps
    ``d<K>`` to ``d<D(K)>``, so the cotangents of each nesting level have a type of their
    own (``d<R * R>`` under →D, ``d<R * (R -o d)>`` under ←D)."""

    ring: Type = RealT()


def tuple_type(types: "list[Type] | tuple[Type, ...]") -> "Type":
    """``t1 * t2 * ... * tn``: the n-tuple type (stored as pairs nesting to the right, each
    with the arity of the tuple it begins); ``t1`` itself when n is 1."""
    result = types[-1]
    for k, t in enumerate(reversed(types[:-1]), start=2):
        result = PairT(t, result, k)
    return result


def tuple_components(t: "Type") -> "list[Type]":
    """The components of the tuple type ``t`` as written: three for ``R * R * R``, two for
    ``R * (R * R)``; ``[t]`` for a type that is not a pair."""
    if not isinstance(t, PairT):
        return [t]
    items = []
    for _ in range(max(t.arity, 2) - 1):
        items.append(t.first)
        t = t.second
        if not isinstance(t, PairT):
            break
    items.append(t)
    return items


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
    return all(isinstance(current, (PairT, ListT, RealT, ArrayT, VarT)) for current in walk(t))


REAL = RealT()
BOOL = BoolT()
VEC = ArrayT(1)
MAT = ArrayT(2)
COTANGENT = CotangentT()
BACKPROPAGATOR = FunT(REAL, COTANGENT)


def backpropagator_type(ring: Type) -> FunT:
    """``K -o d<K>``: a backpropagator whose scalars are in the ring ``K``."""
    return FunT(ring, CotangentT(ring))


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


@node(children=("args",))
class Prim(Term):
    """A primitive applied to exactly its arity of arguments: ``x + y``, ``sin x``, ``map f xs``."""

    op: str
    args: tuple[Term, ...]
    span: Span | None = _span_field()


@node(children=("body",), binds={"body": ("param",)}, types=("param_type",))
class Lam(Term):
    """``\\x -> e`` or ``\\(x : A) -> e``; ``x`` may be ``_``."""

    param: str
    body: Term
    param_type: Type | None = None
    span: Span | None = _span_field()


@node(children=("fn", "arg"))
class App(Term):
    """``f a``: application of a function value."""

    fn: Term
    arg: Term
    span: Span | None = _span_field()


@node(children=("value", "body"), binds={"body": ("name",)})
class Let(Term):
    """``let x = e1 in e2``; a local function ``let f x = e1 in e2`` has a ``Lam`` value."""

    name: str
    value: Term
    body: Term
    span: Span | None = _span_field()


@node(children=("value", "body"), binds={"body": ("first", "second")})
class LetPair(Term):
    """``let (x, y) = e1 in e2``; either name may be ``_``.  Nested patterns are nested
    LetPairs.  With ``arity`` k > 2 it takes apart a k-tuple (:class:`PairT`): ``x`` is its
    first component and ``y`` the (k-1)-tuple of the others, so ``let (a, b, c) = t in e``
    is ``LetPair(a, r, t, LetPair(b, c, r, e), arity=3)``."""

    first: str
    second: str
    value: Term
    body: Term
    arity: int = 2
    span: Span | None = _span_field()


@node(children=("first", "second"))
class Pair(Term):
    """``(e1, e2)``; with ``arity`` k > 2 the k-tuple ``(e1, ..., ek)`` whose ``second`` is
    the (k-1)-tuple ``(e2, ..., ek)``: ``(a, b, c)`` is ``Pair(a, Pair(b, c), arity=3)``,
    distinct from ``(a, (b, c))`` (see :class:`PairT`)."""

    first: Term
    second: Term
    arity: int = 2
    span: Span | None = _span_field()


@node(children=("cond", "then", "orelse"))
class If(Term):
    """``if c then e1 else e2``; ``a && b`` is ``if a then b else false``, ``a || b`` is
    ``if a then true else b``."""

    cond: Term
    then: Term
    orelse: Term
    span: Span | None = _span_field()


@node(children=("items",))
class ListLit(Term):
    """``[e1, ..., en]``."""

    items: tuple[Term, ...]
    span: Span | None = _span_field()


@node(children=("expr",), types=("type",))
class Annot(Term):
    """``(e : A)``: an annotation, checked by type inference."""

    expr: Term
    type: Type
    span: Span | None = _span_field()


# ----- target-language terms (linear negation, AD.md section 4)


@node(children=("body",), binds={"body": ("param",)})
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


@node(children=("left", "right"))
class Plus(Term):
    """``e1 <+> e2`` (``e1 ⊕ e2``): the sum of two cotangents."""

    left: Term
    right: Term
    span: Span | None = _span_field()


@node(children=("index",))
class Seed(Term):
    """``seed i``: the backpropagator of the i-th input real (``\\a -o a·e_i``); the index
    is a term (``seed 3``, or ``seed (k + i)`` numbering the reals of a list), a whole
    number >= 0 when evaluated."""

    index: Term
    span: Span | None = _span_field()


@node(children=("point", "cotangent"))
class ReadOff(Term):
    """``cotangent x e``: run the backward phase of ``e : d`` and return the adjoints of the
    seeded input ``x : ←D(A)`` in the shape of ``A`` (each ``(r, seed i)`` leaf becomes the
    i-th adjoint)."""

    point: Term
    cotangent: Term
    span: Span | None = _span_field()


def tuple_term(items: "Sequence[Term]", span: Span | None = None) -> Term:
    """``(e1, ..., en)``: the n-tuple of ``items`` (see :class:`Pair`); ``e1`` itself when
    n is 1."""
    result = items[-1]
    for k, item in enumerate(reversed(items[:-1]), start=2):
        result = Pair(item, result, k, span=span)
    return result


def tuple_items(term: Pair) -> "tuple[list[Term], Term | None]":
    """The components of the tuple ``term`` as written, and None; or, when the rest of a
    k-tuple is not written as a (k-1)-tuple (a variable bound to it, after a
    transformation), the components before it and that rest."""
    items: list[Term] = []
    current: Term = term
    while current.arity > 2:
        items.append(current.first)
        rest = current.second
        if not (isinstance(rest, Pair) and rest.arity == current.arity - 1):
            return items, rest
        current = rest
    items.extend((current.first, current.second))
    return items, None


TARGET_TERMS = (LinLam, Zero, Plus, Seed, ReadOff)
"""The target-only constructs: the transformations produce them and never accept them."""


@node(children=("value",))
class Decl(Node):
    """``def name = value`` at top level (parameters already turned into lambdas)."""

    name: str
    value: Term
    span: Span | None = _span_field()


@node(children=("decls",))
class Module(Node):
    """A whole program: declarations in order."""

    decls: tuple[Decl, ...]


# --------------------------------------------------------------------------- traversal
#
# Every pass walks the tree through these functions, which read the shape each class
# declares with @node: a new construct is described once, here, and a pass that forgets
# its arm fails tests/test_architecture.py.


def children(node: Node) -> tuple[Node, ...]:
    """The immediate sub-nodes of ``node`` (sub-terms of a term, components of a type),
    left to right (evaluation order); never fails."""
    return type(node)._shape.read_children(node)


def with_children(node: N, new_children: "list[Node] | tuple[Node, ...]") -> N:
    """``node`` with its immediate sub-nodes replaced, in :func:`children` order (span and
    every other field kept)."""
    shape = type(node)._shape
    if not shape.fields:
        return node
    changes: dict[str, Any] = {}
    position = 0
    for name in shape.fields:
        if name in shape.many:
            count = len(getattr(node, name))
            changes[name] = tuple(new_children[position:position + count])
            position += count
        else:
            changes[name] = new_children[position]
            position += 1
    return attrs.evolve(node, **changes)


rebuild = with_children


def binders(term: Term) -> tuple[tuple[str, ...], ...]:
    """For each child of ``term`` (as in :func:`children`), the names it binds there."""
    shape = type(term)._shape
    result: list[tuple[str, ...]] = []
    for name, fields in zip(shape.fields, shape.binder_fields):
        bound = tuple(getattr(term, field) for field in fields)
        if name in shape.many:
            result.extend(bound for _ in getattr(term, name))
        else:
            result.append(bound)
    return tuple(result)


def bound_names(term: Term) -> tuple[str, ...]:
    """Every name ``term`` itself binds (``x`` of ``\\x -> e``), in field order."""
    return tuple(getattr(term, field) for fields in type(term)._shape.binder_fields
                 for field in fields)


def rename_binders(term: T, renaming: "dict[str, str]") -> T:
    """``term`` with the names it binds renamed by ``renaming`` (its sub-terms untouched:
    renaming the bound occurrences is the caller's work)."""
    changes = {field: renaming[getattr(term, field)]
               for fields in type(term)._shape.binder_fields for field in fields
               if getattr(term, field) in renaming}
    return attrs.evolve(term, **changes) if changes else term


def rename_bound(term: T, choose: "Callable[[str], str]") -> T:
    """``term`` with each binder renamed to ``choose(name)``, its bound occurrences
    following: the one walk renaming binders.  ``choose`` is called once per node and name
    it binds, when the walk enters the node, in pre-order; returning the name keeps it
    (``_``, which binds nothing, is never offered).  Capture-avoiding when each new name is
    fresh (not occurring in ``term``).  Iterative."""

    def go(t: Term, current: dict[str, str]):
        if isinstance(t, Var):
            new = current.get(t.name)
            return t if new is None else attrs.evolve(t, name=new)
        scopes = binders(t)
        chosen = {name: choose(name) for bound in scopes for name in bound if name != "_"}
        kids = []
        for child, bound in zip(children(t), scopes):
            inner = current
            if bound:
                inner = dict(current)
                for name in bound:
                    new = chosen.get(name, name)
                    if new == name:
                        inner.pop(name, None)
                    else:
                        inner[name] = new
            kids.append((yield go(child, inner)))
        return rename_binders(with_children(t, kids),
                              {name: new for name, new in chosen.items() if new != name})

    return run(go(term, {}))


def annotations(term: Term) -> tuple[Type, ...]:
    """The types written in ``term`` itself (``A`` of ``\\(x : A) -> e`` and ``(e : A)``)."""
    found = (getattr(term, field) for field in type(term)._shape.type_fields)
    return tuple(t for t in found if t is not None)


def map_annotations(term: T, image: "Callable[[Type], Type]") -> T:
    """``term`` with each type written in it (not in its sub-terms) replaced by its image."""
    changes = {field: image(getattr(term, field)) for field in type(term)._shape.type_fields
               if getattr(term, field) is not None}
    return attrs.evolve(term, **changes) if changes else term


def map_type(t: Type, leaf: "Callable[[Type], Type]") -> Type:
    """``t`` with every leaf (``R``, ``Bool``, a variable, ``d``) replaced by ``leaf(it)``
    and every type former kept, without recursion.  Raises what ``leaf`` raises."""
    images: list[Type] = []
    stack: list[tuple[Type, bool]] = [(t, False)]
    while stack:
        current, expanded = stack.pop()
        kids = children(current)
        if not kids:
            images.append(leaf(current))
        elif expanded:
            count = len(kids)
            images[-count:] = [with_children(current, images[-count:])]
        else:
            stack.append((current, True))
            stack.extend((kid, False) for kid in reversed(kids))
    return images[0]


def walk(node: N) -> Iterator[N]:
    """Every sub-node of ``node``, itself included (pre-order), without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def names_in(*terms: Term) -> set[str]:
    """Every variable name occurring in ``terms``, bound or free (never fails)."""
    found: set[str] = set()
    for term in terms:
        for node in walk(term):
            if isinstance(node, Var):
                found.add(node.name)
            else:
                found.update(bound_names(node))
    return found


def numbered(base: str, taken: "Container[str]") -> str:
    """``base1``, ``base2``, ...: the first not in ``taken``; the one way fresh names are
    numbered (``v1`` in a transformed program, ``main'1`` for a hidden definition)."""
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


class NameSupply:
    """The one source of fresh variable names: ``v1``, ``v2``, ... for a base ``v``.

    A name it hands out differs from every name it was told to avoid (every name of the
    terms at hand, see :meth:`for_terms`), from the names of :attr:`reserved` (none here;
    :class:`lambdad.rules.NameSupply` adds the language's keywords and built-in names) and
    from every name it handed out before.
    """

    reserved: frozenset[str] = frozenset()

    def __init__(self, avoid: "Iterable[str]" = (), outside: "Container[str]" = frozenset()):
        """``avoid``: the names taken (or a function giving them, called when the first
        name is asked for: most programs need none); ``outside``: names taken too, read
        and never copied (the definitions of a long session)."""
        self._avoid = avoid
        self._outside = outside
        self._used: set[str] | None = None
        self._counters: dict[str, int] = {}

    def _taken(self) -> set[str]:
        used = self._used
        if used is None:
            avoid = self._avoid
            used = self._used = set(self.reserved)
            used.update(avoid() if callable(avoid) else avoid)
            self._avoid = ()
        return used

    @classmethod
    def for_terms(cls, *terms: Term):
        """A supply avoiding every name occurring in ``terms``."""
        return cls(names_in(*terms))

    def avoid(self, names: "Iterable[str]") -> None:
        """Never hand out any of ``names``."""
        self._taken().update(names)

    def is_taken(self, name: str) -> bool:
        """Whether ``name`` occurs in the input or was handed out."""
        return name in self._taken() or name in self._outside

    def name(self, base: str) -> str:
        """``base`` itself when it is not taken (then it is), else :meth:`fresh`."""
        if self.is_taken(base):
            return self.fresh(base)
        self._taken().add(base)
        return base

    def fresh(self, base: str, suffixes: Sequence[str] = ()) -> str:
        """A new name ``base<k>`` such that it and ``base<k><s>`` for every suffix ``s`` are
        unused; all of them are marked used."""
        used = self._used
        if used is None:
            used = self._taken()
        outside = self._outside
        k = self._counters.get(base, 0)
        while True:
            k += 1
            name = f"{base}{k}"
            if name in used or name in outside:
                continue
            if suffixes:  # (most calls have none: a name alone, tested and taken at once)
                family = [name + s for s in suffixes]
                if any(n in used or n in outside for n in family):
                    continue
                used.update(family)
            self._counters[base] = k
            used.add(name)
            return name

    def renamed(self, name: str) -> str:
        """A fresh name for a copy of the binder ``name``: its readable stem (``x`` of
        ``x1``, ``x'``) numbered, ``v1``, ... for a name of no letters."""
        return self.fresh(name.rstrip("0123456789'_") or "v")


def unused_name(name: str, decls: Sequence[Decl], taken: set[str] | None = None) -> str:
    """``name'1``, ``name'2``, ...: the first that no declaration of ``decls`` defines or
    mentions (as a variable or a binder), nor ``taken`` holds, so renaming to it captures
    nothing."""
    return numbered(f"{name}'", set(taken or ()) | names_used(decls))


def names_used(decls: Sequence[Decl]) -> set[str]:
    """Every name the declarations define, mention as a variable, or bind."""
    return {d.name for d in decls} | names_in(*(d.value for d in decls))


def renamed_free(term: Term, renaming: Mapping[str, str],
                 rewrite: "Callable[[Term], Term] | None" = None) -> Term:
    """``term`` with each free occurrence of a name of ``renaming`` renamed (the new names
    must not be bound in ``term``): the one walk renaming free variables.  ``rewrite``, if
    given, is applied to every other node before its children are renamed: a change that
    scopes do not affect (the printer's new names of declared primitives).  A sub-term in
    which nothing changes is returned as it is.  Iterative."""
    if not renaming and rewrite is None:
        return term

    def go(t: Term, hidden: frozenset[str]):
        if isinstance(t, Var):
            new = renaming.get(t.name)
            return t if new is None or t.name in hidden else attrs.evolve(t, name=new)
        node = t if rewrite is None else rewrite(t)
        kids = []
        changed = node is not t
        for child, bound in zip(children(node), binders(node)):
            kid = yield go(child, hidden | frozenset(bound) if bound else hidden)
            changed = changed or kid is not child
            kids.append(kid)
        return with_children(node, kids) if changed else t

    return run(go(term, frozenset()))


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
        for child, names in reversed(tuple(zip(children(item), binders(item)))):
            if names:
                stack.append((_LEAVE, names))
                stack.append(child)
                stack.append((_ENTER, names))
            else:
                stack.append(child)
    return frozenset(free)


def type_vars(t: Type) -> list[str]:
    """Names of the type variables of ``t``, in order of first occurrence."""
    seen: dict[str, None] = {}
    for current in walk(t):
        if isinstance(current, VarT):
            seen.setdefault(current.name)
    return list(seen)
