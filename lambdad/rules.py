"""What the two differentiating transformations share (AD.md sections 2, 3 and 7).

Both →D and ←D are built from the same pieces, all read from the primitive table:

- the vocabulary of generated names: the tangent of ``x`` is ``x'``, the backpropagator of
  ``x`` is ``x_``, the parameter of every linear abstraction is ``a``, intermediate values
  are ``v1``, ``v2``, ...; fresh names come from a :class:`NameSupply` object;
- the partial derivatives of each real primitive, parsed once from the table's strings and
  instantiated by renaming its parameters (:func:`partials`);
- the naming of a primitive application's arguments (:func:`name_arguments`);
- the rule for primitives that are not real functions (:func:`primal_of`, :func:`lift`):
  real arguments are passed as primals, reals of the result get a zero derivative, read
  from the primitive's declared type — comparisons, ``length``, ``range``, the logic and
  structural primitives all follow from it;
- a primitive used as a value (``map sin xs``) is eta-expanded (:func:`eta_expand`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

import attrs

from .errors import DifferentiationError, Span
from .iterate import run
from .parser import parse_expr
from .primitives import LINEAR_NAMES, NAMED, OPERATORS, PRIMITIVES, Primitive
from .syntax import (
    Annot,
    App,
    BoolLit,
    BoolT,
    Builtin,
    Const,
    CotangentT,
    FunT,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    ListT,
    Pair,
    PairT,
    Plus,
    Prim,
    RealT,
    ReadOff,
    Seed,
    Term,
    Type,
    Var,
    VarT,
    Zero,
    walk,
)

# ---------------------------------------------------------------- the vocabulary

TANGENT = "'"
"""Suffix of a tangent: ``x'`` is the tangent of ``x`` (forward mode)."""

BACKPROPAGATOR = "_"
"""Suffix of a backpropagator: ``x_`` is the backpropagator of ``x`` (backward mode)."""

LINEAR_PARAM = "a"
"""The parameter of the linear abstractions the backward rules build (``\\a -o ...``)."""

INTERMEDIATE = "v"
"""Base of the fresh names given to intermediate values (``v1``, ``v2``, ...)."""

KEYWORDS = frozenset({"def", "let", "in", "if", "then", "else", "true", "false"})

# Names a generated binder must never take: keywords, and names the parser would read as
# built-ins (a binder named ``cos`` would capture a printed ``cos x``).
RESERVED = frozenset(KEYWORDS | set(NAMED) | set(LINEAR_NAMES) | {"_"})

# The arithmetic the rules are written with, found by spelling (AD.md writes the rules
# with ``*``, ``+``, ``-``).
PLUS = OPERATORS[("+", "infix")]
MINUS = OPERATORS[("-", "infix")]
TIMES = OPERATORS[("*", "infix")]
NEGATE = OPERATORS[("-", "prefix")]
FIRST = NAMED["fst"]
MAP = NAMED["map"]


def _projections() -> Mapping[str, int]:
    """The primitives that project a pair, by their type ``a * b -> a`` / ``a * b -> b``."""
    found: dict[str, int] = {}
    for prim in PRIMITIVES.values():
        t = prim.type
        if prim.arity == 1 and isinstance(t, FunT) and isinstance(t.arg, PairT):
            if t.result == t.arg.first:
                found[prim.name] = 0
            elif t.result == t.arg.second:
                found[prim.name] = 1
    return MappingProxyType(found)


PROJECTIONS: Mapping[str, int] = _projections()
"""Name of each pair projection primitive -> the component it selects (0 or 1)."""


# ---------------------------------------------------------------- fresh names


def names_in(*terms: Term) -> set[str]:
    """Every variable name occurring in ``terms``, bound or free (never fails)."""
    found: set[str] = set()
    for term in terms:
        for node in walk(term):
            if isinstance(node, Var):
                found.add(node.name)
            elif isinstance(node, (Lam, LinLam)):
                found.add(node.param)
            elif isinstance(node, Let):
                found.add(node.name)
            elif isinstance(node, LetPair):
                found.update((node.first, node.second))
    return found


class NameSupply:
    """A source of fresh, readable variable names: ``v1``, ``v2``, ... for a base ``v``.

    A name it hands out differs from every name it was told to avoid (every name of the
    terms being transformed, see :meth:`for_terms`), from the built-in names and keywords,
    and from every name it handed out before.
    """

    def __init__(self, avoid: Iterable[str] = ()):
        self._used: set[str] = set(RESERVED)
        self._used.update(avoid)
        self._counters: dict[str, int] = {}

    @classmethod
    def for_terms(cls, *terms: Term) -> "NameSupply":
        """A supply avoiding every name occurring in ``terms``."""
        return cls(names_in(*terms))

    def avoid(self, names: Iterable[str]) -> None:
        """Never hand out any of ``names``."""
        self._used.update(names)

    def is_taken(self, name: str) -> bool:
        """Whether ``name`` occurs in the input or was handed out."""
        return name in self._used

    def fresh(self, base: str, suffixes: Sequence[str] = ()) -> str:
        """A new name ``base<k>`` such that it and ``base<k><s>`` for every suffix ``s`` are
        unused; all of them are marked used."""
        k = self._counters.get(base, 0)
        while True:
            k += 1
            name = f"{base}{k}"
            family = [name] + [name + s for s in suffixes]
            if not any(n in self._used for n in family):
                self._counters[base] = k
                self._used.update(family)
                return name


def local_name(base: str, taken: Iterable[str]) -> str:
    """``base``, or ``base1``, ``base2``, ... : the first not in ``taken`` nor reserved.

    For binders whose scope only mentions names the rule itself chose (``r``, ``a``).
    """
    taken = set(taken)
    if base not in taken and base not in RESERVED:
        return base
    k = 1
    while f"{base}{k}" in taken or f"{base}{k}" in RESERVED:
        k += 1
    return f"{base}{k}"


# ---------------------------------------------------------------- types


def map_reals(t: Type, image: Type, what: str) -> Type:
    """``t`` with every ``R`` replaced by ``image`` (→D and ←D on types: homomorphic on every
    other type former).  Raises DifferentiationError on the target-only type ``d``."""

    def go(current: Type):
        if isinstance(current, RealT):
            return image
        if isinstance(current, (BoolT, VarT)):
            return current
        if isinstance(current, PairT):
            first = yield go(current.first)
            second = yield go(current.second)
            return PairT(first, second)
        if isinstance(current, FunT):
            arg = yield go(current.arg)
            result = yield go(current.result)
            return FunT(arg, result)
        if isinstance(current, ListT):
            item = yield go(current.item)
            return ListT(item)
        if isinstance(current, CotangentT):
            raise DifferentiationError(
                f"cannot take {what} of a type that mentions the cotangent space `d`: "
                "differentiating a transformed program is not supported")
        raise TypeError(f"unknown type {current!r}")

    return run(go(t))


def contains_real(t: Type) -> bool:
    """Whether ``R`` occurs in ``t``."""
    stack = [t]
    while stack:
        current = stack.pop()
        if isinstance(current, RealT):
            return True
        if isinstance(current, PairT):
            stack.extend((current.first, current.second))
        elif isinstance(current, FunT):
            stack.extend((current.arg, current.result))
        elif isinstance(current, ListT):
            stack.append(current.item)
    return False


def signature(prim: Primitive) -> tuple[tuple[Type, ...], Type]:
    """The parameter types and the result type of ``prim``, from its curried type."""
    params: list[Type] = []
    t = prim.type
    for _ in range(prim.arity):
        assert isinstance(t, FunT), f"{prim.name}: type has fewer arrows than parameters"
        params.append(t.arg)
        t = t.result
    return tuple(params), t


# ---------------------------------------------------------------- term helpers


def first(term: Term, span: Span | None) -> Term:
    """``fst term``."""
    return Prim(FIRST.name, (term,), span=span)


def times(left: Term, right: Term, span: Span | None) -> Term:
    """``left * right``."""
    return Prim(TIMES.name, (left, right), span=span)


def plus(left: Term, right: Term, span: Span | None) -> Term:
    """``left + right``."""
    return Prim(PLUS.name, (left, right), span=span)


def real(value: float, span: Span | None) -> Term:
    """The literal ``value`` in the parser's form: a negative number (or ``-0``) is the
    unary minus applied to its magnitude, so printing and parsing it back gives it again."""
    if math.copysign(1.0, value) < 0.0:
        return Prim(NEGATE.name, (Const(-value, span=span),), span=span)
    return Const(float(value), span=span)


def number(term: Term) -> float | None:
    """The real a literal denotes (``2``, ``-2`` as parsed), or None if ``term`` is not one."""
    if isinstance(term, Const):
        return term.value
    if (isinstance(term, Prim) and term.op == NEGATE.name and len(term.args) == 1
            and isinstance(term.args[0], Const)):
        return -term.args[0].value
    return None


def is_zero(term: Term) -> bool:
    """Whether ``term`` is the literal ``0`` (or ``-0``)."""
    value = number(term)
    return value is not None and value == 0.0


TARGET_TERMS = (LinLam, Zero, Plus, Seed, ReadOff)


def not_differentiable(term: Term) -> DifferentiationError:
    """The error for a term neither transformation accepts (nested AD, target terms)."""
    if isinstance(term, (Prim, Builtin)):
        name = term.op if isinstance(term, Prim) else term.name
        symbol = PRIMITIVES[name].spelling.symbol
        return DifferentiationError(
            f"differentiating a function that itself uses `{symbol}` (nested "
            "differentiation) is not supported", term.span)
    if isinstance(term, TARGET_TERMS):
        return DifferentiationError(
            "cannot differentiate a backpropagation term (`\\a -o`, `zero`, `<+>`, `seed`, "
            "`cotangent`): differentiating a transformed program is not supported",
            term.span)
    return DifferentiationError(f"cannot differentiate this term ({type(term).__name__})",
                                getattr(term, "span", None))


# ---------------------------------------------------------------- partial derivatives


def _parse_partials() -> Mapping[str, tuple[Term, ...]]:
    table: dict[str, tuple[Term, ...]] = {}
    for prim in PRIMITIVES.values():
        if prim.kind != "real":
            continue
        bound = prim.params + ((prim.result,) if prim.result else ())
        table[prim.name] = tuple(
            parse_expr(text, f"<partial {i} of {prim.name}>", bound=bound)
            for i, text in enumerate(prim.partials, 1))
    return MappingProxyType(table)


PARTIALS: Mapping[str, tuple[Term, ...]] = _parse_partials()
"""Each real primitive's partial derivatives, as terms over its parameters (and ``result``)."""


def rename(term: Term, renaming: Mapping[str, str], span: Span | None) -> Term:
    """``term`` with its free variables renamed by ``renaming`` (capture-avoiding: a binder
    of ``term`` that would capture a new name is renamed too) and every node located at
    ``span``.  Never fails."""
    targets = set(renaming.values())

    def binder(name: str, body: Term, current: dict[str, str]) -> tuple[str, dict[str, str]]:
        inner = dict(current)
        inner.pop(name, None)
        if name in targets:
            new = local_name(name, targets | names_in(body))
            inner[name] = new
            return new, inner
        return name, inner

    def go(t: Term, current: dict[str, str]):
        if isinstance(t, Var):
            return Var(current.get(t.name, t.name), span=span)
        if isinstance(t, (Const, BoolLit, Builtin, Zero, Seed)):
            return _relocate(t, span)
        if isinstance(t, Lam):
            param, inner = binder(t.param, t.body, current)
            body = yield go(t.body, inner)
            return Lam(param, body, t.param_type, span=span)
        if isinstance(t, LinLam):
            param, inner = binder(t.param, t.body, current)
            body = yield go(t.body, inner)
            return LinLam(param, body, span=span)
        if isinstance(t, Let):
            value = yield go(t.value, current)
            name, inner = binder(t.name, t.body, current)
            body = yield go(t.body, inner)
            return Let(name, value, body, span=span)
        if isinstance(t, LetPair):
            value = yield go(t.value, current)
            a, inner = binder(t.first, t.body, current)
            b, inner = binder(t.second, t.body, inner)
            body = yield go(t.body, inner)
            return LetPair(a, b, value, body, span=span)
        if isinstance(t, Prim):
            args = []
            for arg in t.args:
                args.append((yield go(arg, current)))
            return Prim(t.op, tuple(args), span=span)
        if isinstance(t, ListLit):
            items = []
            for item in t.items:
                items.append((yield go(item, current)))
            return ListLit(tuple(items), span=span)
        if isinstance(t, App):
            return App((yield go(t.fn, current)), (yield go(t.arg, current)), span=span)
        if isinstance(t, Pair):
            return Pair((yield go(t.first, current)), (yield go(t.second, current)), span=span)
        if isinstance(t, If):
            cond = yield go(t.cond, current)
            then = yield go(t.then, current)
            orelse = yield go(t.orelse, current)
            return If(cond, then, orelse, span=span)
        if isinstance(t, Annot):
            return Annot((yield go(t.expr, current)), t.type, span=span)
        if isinstance(t, Plus):
            return Plus((yield go(t.left, current)), (yield go(t.right, current)), span=span)
        if isinstance(t, ReadOff):
            return ReadOff((yield go(t.point, current)), (yield go(t.cotangent, current)),
                           span=span)
        raise TypeError(f"unknown term {t!r}")

    return run(go(term, dict(renaming)))


def _relocate(term: Term, span: Span | None) -> Term:
    return attrs.evolve(term, span=span)


def partials(prim: Primitive, primals: Sequence[str], result: str | None,
             span: Span | None) -> list[Term]:
    """``∂1 f, ..., ∂k f`` of the real primitive ``prim`` at the variables ``primals`` (the
    result bound to ``result``), every node located at ``span``.  Never fails."""
    renaming = dict(zip(prim.params, primals))
    if prim.result is not None:
        assert result is not None, f"{prim.name} needs its result bound to a name"
        renaming[prim.result] = result
    return [rename(term, renaming, span) for term in PARTIALS[prim.name]]


def result_name(prim: Primitive, taken: Iterable[str]) -> str | None:
    """The name binding ``prim``'s result in its rule (the table's ``result``, made distinct
    from ``taken``), or None when no partial mentions the result."""
    if prim.result is None:
        return None
    return local_name(prim.result, taken)


def name_arguments(args: Sequence[Term], suffix: str, names: NameSupply
                   ) -> tuple[list[int], list[tuple[str, str]]]:
    """How the rule ``let (x1, x1') = D(t1) in ... in (f(x1..xk), ...)`` names its arguments.

    Returns ``(order, params)``: ``params[i]`` is the (primal, derivative) pair of names of
    argument ``i``; ``order`` lists the arguments to bind, in binding order.  An argument
    that is a variable ``x`` binds ``(x, x<suffix>)`` (the pair is shadowed by its primal,
    as in the paper), once even if it occurs several times; any other argument gets fresh
    names ``(v1, v1<suffix>)``.  Compound arguments are bound first, in evaluation order,
    and variables after them: destructuring a variable cannot fail, and binding it last
    keeps its pair visible to the compound arguments that mention it.
    """
    params: list[tuple[str, str] | None] = [None] * len(args)
    compound = [i for i, arg in enumerate(args) if not isinstance(arg, Var)]
    variables: dict[str, list[int]] = {}
    for i, arg in enumerate(args):
        if isinstance(arg, Var):
            variables.setdefault(arg.name, []).append(i)
    for i in compound:
        name = names.fresh(INTERMEDIATE, (suffix,))
        params[i] = (name, name + suffix)
    chosen: set[str] = {n for p in params if p is not None for n in p}
    primal_names = set(variables)
    order = list(compound)
    for var, positions in variables.items():
        primal = var
        if primal in RESERVED or primal in chosen:
            primal = names.fresh(INTERMEDIATE, (suffix,))
        derivative = primal + suffix
        if derivative in primal_names or derivative in chosen or derivative in RESERVED:
            derivative = names.fresh(primal + suffix)
        chosen.update((primal, derivative))
        for i in positions:
            params[i] = (primal, derivative)
        order.append(positions[0])
    return order, [p for p in params if p is not None]


# ---------------------------------------------------------------- non-real primitives


def primal_of(t: Type, term: Term, span: Span | None) -> Term:
    """The primal of ``term : D(t)``: ``fst term`` for ``t = R``, componentwise for pairs
    and lists, ``term`` itself when ``t`` has no reals.  Raises DifferentiationError for a
    function type mentioning ``R`` (no primitive of the table takes one)."""
    if not contains_real(t):
        return term
    if isinstance(t, RealT):
        return first(term, span)
    if isinstance(t, ListT):
        body = primal_of(t.item, Var("i", span=span), span)
        return Prim(MAP.name, (Lam("i", body, span=span), term), span=span)
    if isinstance(t, PairT):
        return LetPair("p", "q", term,
                       Pair(primal_of(t.first, Var("p", span=span), span),
                            primal_of(t.second, Var("q", span=span), span), span=span),
                       span=span)
    raise DifferentiationError("cannot take the primal of a function argument", span)


def lift(t: Type, term: Term, zero: Callable[[], Term], span: Span | None) -> Term:
    """``term : t`` as a constant of ``D(t)``: each real ``r`` becomes ``(r, zero())``
    (``map (\\i -> (i, 0)) term`` for a list of reals).  Raises DifferentiationError for a
    function type mentioning ``R``."""
    if not contains_real(t):
        return term
    if isinstance(t, RealT):
        return Pair(term, zero(), span=span)
    if isinstance(t, ListT):
        body = lift(t.item, Var("i", span=span), zero, span)
        return Prim(MAP.name, (Lam("i", body, span=span), term), span=span)
    if isinstance(t, PairT):
        return LetPair("p", "q", term,
                       Pair(lift(t.first, Var("p", span=span), zero, span),
                            lift(t.second, Var("q", span=span), zero, span), span=span),
                       span=span)
    raise DifferentiationError("cannot differentiate a primitive returning a function", span)


def eta_expand(name: str, names: NameSupply, span: Span | None) -> Term:
    """``\\x1 -> ... -> \\xk -> f x1 .. xk`` for the primitive ``name`` used as a value, with
    the table's parameter names.  Raises DifferentiationError for ``grad``/``jvp``/``vjp``."""
    prim = PRIMITIVES[name]
    if prim.kind == "ad":
        raise not_differentiable(Builtin(name, span=span))
    names.avoid(prim.params)
    body: Term = Prim(name, tuple(Var(p, span=span) for p in prim.params), span=span)
    for param in reversed(prim.params):
        body = Lam(param, body, span=span)
    return body
