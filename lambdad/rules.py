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

The homomorphism built from them, one arm per construct, is
:class:`lambdad.homomorphism.Differentiation`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Set as AbstractSet
from types import MappingProxyType
from typing import Any

import attrs

from .errors import DerivativeSpan, DifferentiationError, Span
from .iterate import run
from .parser import parse_expr
from .primitives import (ADD, ELEMENTWISE, FST, LINEAR_NAMES, MAP, MUL, NAMED, NEG, PRIMITIVES, SPREAD, SUM_TO,
                         Primitive)
from . import syntax
from .syntax import (
    Annot,
    App,
    ArrayT,
    BoolT,
    Builtin,
    Const,
    CotangentT,
    Decl,
    FunT,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListT,
    Module,
    Pair,
    PairT,
    Plus,
    Prim,
    RealT,
    Term,
    Type,
    Var,
    VarT,
    Zero,
    binders,
    children,
    map_type,
    names_in,
    numbered,
    rename_bound,
    renamed_free,
    walk,
    with_children,
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

KEYWORDS = frozenset({"def", "let", "in", "if", "then", "else", "true", "false", "primitive",
                      "partial"})

# Names a generated binder must never take: keywords, and names the parser would read as
# built-ins (a binder named ``cos`` would capture a printed ``cos x``).
RESERVED = frozenset(KEYWORDS | set(NAMED) | set(LINEAR_NAMES) | {"_"})



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


class NameSupply(syntax.NameSupply):
    """The fresh-name supply of :mod:`lambdad.syntax` for programs of the language: a name
    it hands out is not a keyword or a built-in name either."""

    reserved = RESERVED


def transform_module(module: Module, transform: Callable[[Term, NameSupply], Term],
                     names: NameSupply | None = None) -> Module:
    """The module whose declaration ``f`` is ``transform`` of the declaration ``f`` (names
    unchanged), every declaration drawing on one supply of fresh names (by default one
    avoiding every name of the module).  Fails as ``transform``."""
    if names is None:
        names = NameSupply.for_terms(*(decl.value for decl in module.decls))
        names.avoid(decl.name for decl in module.decls)
    return Module(tuple(Decl(decl.name, transform(decl.value, names), span=decl.span)
                        for decl in module.decls))


def local_name(base: str, taken: Iterable[str]) -> str:
    """``base``, or ``base1``, ``base2``, ... : the first not in ``taken`` nor reserved.

    For binders whose scope only mentions names the rule itself chose (``r``, ``a``).
    """
    if isinstance(taken, AbstractSet) and base not in taken and base not in RESERVED:
        return base  # (most calls: the set of what the rule chose lacks it)
    taken = set(taken) | RESERVED
    return base if base not in taken else numbered(base, taken)


# ---------------------------------------------------------------- types


def map_reals(t: Type, image: Type, what: str) -> Type:
    """``t`` with every ``R`` replaced by ``image`` (→D and ←D on types: homomorphic on every
    other type former, the cotangent space included: D(d<K>) = d<D(K)>, so that
    D(K -o d<K>) = D(K) -o d<D(K)>).  Never fails; ``what`` names the transformation in the
    message of an unknown type class."""

    def leaf(current: Type) -> Type:
        if isinstance(current, RealT):
            return image
        if isinstance(current, ArrayT):
            return _array_image(image, current)
        if isinstance(current, (BoolT, VarT)):
            return current
        raise TypeError(f"{what}: unknown type {current!r}")

    return map_type(t, leaf)


def _array_image(image: Type, array: ArrayT) -> Type:
    """D(Vec) from D(R) (AD.md section 10): ``R * R`` gives ``Vec * Vec`` (a value and its
    tangent), ``R * (R -o d)`` gives ``Vec * (Vec -o d)`` (a value and one backpropagator
    taking a whole cotangent array).  The cotangent space ``d`` is kept."""
    assert isinstance(image, PairT) and isinstance(image.first, RealT), image
    second = image.second
    if isinstance(second, FunT):
        return PairT(array, FunT(array, second.result))
    return PairT(array, array)


def contains_real(t: Type) -> bool:
    """Whether ``R`` (or an array of reals) occurs in ``t``."""
    return any(isinstance(current, (RealT, ArrayT)) for current in walk(t))


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
    return FST.applied(term, span=span)


def times(left: Term, right: Term, span: Span | None, elementwise: bool = False) -> Term:
    """``left * right`` (of arrays too, ``elementwise``)."""
    if elementwise:
        return Prim(MUL.on_arrays, (left, right), span=span)
    return MUL.applied(left, right, span=span)


def plus(left: Term, right: Term, span: Span | None, elementwise: bool = False) -> Term:
    """``left + right`` (of arrays too, ``elementwise``)."""
    if elementwise:
        return Prim(ADD.on_arrays, (left, right), span=span)
    return ADD.applied(left, right, span=span)


def summed_to(primal: str, cotangent: Term, span: Span | None) -> Term:
    """``sum_to x c``: the cotangent ``c`` of a broadcast of ``x`` summed back to its
    shape (a real's cotangent from an array's: the sum)."""
    return SUM_TO.applied(Var(primal, span=span), cotangent, span=span)


def real(value: float, span: Span | None) -> Term:
    """The literal ``value`` in the parser's form: a negative number (or ``-0``) is the
    unary minus applied to its magnitude, so printing and parsing it back gives it again."""
    if math.copysign(1.0, value) < 0.0:
        return NEG.applied(Const(-value, span=span), span=span)
    return Const(float(value), span=span)


def number(term: Term) -> float | None:
    """The real a literal denotes (``2``, ``-2`` as parsed), or None if ``term`` is not one."""
    if isinstance(term, Const):
        return term.value
    if (isinstance(term, Prim) and term.op == NEG.name and len(term.args) == 1
            and isinstance(term.args[0], Const)):
        return -term.args[0].value
    return None


def is_zero(term: Term) -> bool:
    """Whether ``term`` is the literal ``0`` (or ``-0``)."""
    value = number(term)
    return value is not None and value == 0.0


class NestedDifferentiationError(DifferentiationError):
    """The term differentiates (uses ``grad``, ``jvp`` or ``vjp``): a transformation takes
    it once each use is written out as a target program (:mod:`lambdad.nesting`), as the
    differentiator does at run time (AD.md section 9)."""


def not_differentiable(term: Term) -> DifferentiationError:
    """The error for a term the transformations do not take (nested AD not yet expanded)."""
    if isinstance(term, (Prim, Builtin)):
        name = term.op if isinstance(term, Prim) else term.name
        symbol = PRIMITIVES[name].spelling.symbol
        return NestedDifferentiationError(
            f"this term uses `{symbol}` (nested differentiation): a transformation takes it "
            "once it is written out as a target program (lambdad.nesting.expand)",
            term.span)
    return DifferentiationError(f"cannot differentiate this term ({type(term).__name__})",
                                getattr(term, "span", None))


class NoReverseImageError(NestedDifferentiationError):
    """←D of a use of ``grad``/``jvp``/``vjp``/... whose function is given as an argument:
    no target program (the message says why)."""


def marked_function(t: Prim) -> Term:
    """The function a use of ``grad``/``jvp``/... differentiates, without its annotation."""
    fn = t.args[0]
    return fn.expr if isinstance(fn, Annot) else fn


def marked_function_type(t: Prim) -> FunT | None:
    """The type ``A -> B`` of the function of the use ``t`` of ``grad``/``jvp``/... when the
    use carries it (an annotation on the function, as :mod:`lambdad.nesting` leaves a use
    whose function has no image); None otherwise."""
    fn = t.args[0] if t.args else None
    if isinstance(fn, Annot) and isinstance(fn.type, FunT):
        return fn.type
    return None


def no_reverse_image(t: Prim) -> NoReverseImageError:
    """Why ←D has no program for the marked use ``t`` (see :func:`marked_function_type`),
    located at the use."""
    symbol = PRIMITIVES[t.op].spelling.symbol
    return NoReverseImageError(
        f"reverse mode has no program for this `{symbol}`, which differentiates a function "
        "given as an argument (or built from one): the transformed definition receives that "
        "function's image under ←D, whose backpropagators send into the program's one "
        "cotangent type `d`; differentiating it here needs it at this level's cotangent type "
        "too (a function polymorphic in its cotangent type, which simple types cannot "
        "express), and the second-order part would send into what the function captured, "
        "inside its image. Use --forward, or show a definition that applies this one to a "
        "known function; the program computes it either way", t.span)


# ---------------------------------------------------------------- partial derivatives


def _parse_partials() -> Mapping[str, tuple[Term, ...]]:
    table: dict[str, tuple[Term, ...]] = {}
    for prim in PRIMITIVES.values():
        if prim.kind not in ("real", "elementwise"):
            continue
        bound = prim.params + ((prim.result,) if prim.result else ())
        table[prim.name] = tuple(
            parse_expr(text, f"<partial {i} of {prim.name}>", bound=bound)
            for i, text in enumerate(prim.partials, 1))
        if prim.kind == "elementwise":  # the partials of an array entry, elementwise too
            table[prim.name] = tuple(map(on_arrays, table[prim.name]))
    return MappingProxyType(table)


def on_arrays(term: Term) -> Term:
    """``term`` with every application of a primitive that also applies to arrays made
    its array entry's (``x * y`` elementwise): a term computing on arrays and reals alike."""

    def go(t: Term):
        kids = []
        for child in children(t):
            kids.append((yield go(child)))
        if isinstance(t, Prim):
            entry = PRIMITIVES[t.op]
            if entry.on_arrays is not None and entry.on_arrays.startswith(ELEMENTWISE):
                return Prim(entry.on_arrays, tuple(kids), span=t.span)
        return with_children(t, kids) if kids else t

    return run(go(term))


PARTIALS: Mapping[str, tuple[Term, ...]] = _parse_partials()
"""Each real primitive's partial derivatives, as terms over its parameters (and ``result``)."""

# A term that binds no name, renamed by a mapping and with every node located at a span
# (see _builder).
_Builder = Callable[[Mapping[str, str], "Span | None"], Term]


def _builder(term: Term) -> _Builder:
    """The function giving ``term`` with its variables renamed by a mapping (no capture to
    avoid: ``term`` binds nothing) and every node located at a span: a nest of closures
    calling the constructors directly, one a node, made once per term of the table.  Most
    of the table's partials are variables, literals, primitive applications and
    conditionals (``cos x``, ``y * x ^ (y - 1)``); any other node is rebuilt with its fields."""
    kind = type(term)
    if kind is Var:
        name = term.name
        return lambda renaming, span: Var(renaming.get(name, name), span=span)
    if kind is Const:
        value = term.value
        return lambda renaming, span: Const(value, span=span)
    parts = [_builder(child) for child in children(term)]
    if kind is Prim:
        op = term.op
        if len(parts) == 1:
            only = parts[0]
            return lambda renaming, span: Prim(op, (only(renaming, span),), span=span)
        if len(parts) == 2:
            left, right = parts
            return lambda renaming, span: Prim(op, (left(renaming, span), right(renaming, span)),
                                               span=span)
        return lambda renaming, span: Prim(op, tuple([part(renaming, span) for part in parts]),
                                           span=span)
    if kind is If:
        cond, then, orelse = parts
        return lambda renaming, span: If(cond(renaming, span), then(renaming, span),
                                         orelse(renaming, span), span=span)
    if not parts:
        return lambda renaming, span: _relocate(term, span)
    return lambda renaming, span: _relocate(
        with_children(term, [part(renaming, span) for part in parts]), span)


# The partials of PARTIALS that bind no name (most: `cos x`, `y * x ^ (y - 1)`), by id (they
# live as long as the table), each with the function building it renamed (no scopes).
_BINDER_FREE_PARTIALS: Mapping[int, _Builder] = MappingProxyType({
    id(term): _builder(term) for terms in PARTIALS.values() for term in terms
    if not any(bound for node in walk(term) for bound in binders(node))})


def rename(term: Term, renaming: Mapping[str, str], span: Span | None) -> Term:
    """``term`` with its free variables renamed by ``renaming`` (capture-avoiding: a binder
    of ``term`` that would capture a new name is renamed first, by the one renaming walk)
    and every node located at ``span``.  Never fails."""
    targets = set(renaming.values())
    taken = targets | names_in(term)
    apart = rename_bound(term, lambda name: local_name(name, taken) if name in targets else name)
    return _located(renamed_free(apart, renaming), span)


def _located(term: Term, span: Span | None) -> Term:
    """``term`` with every node located at ``span``.  Iterative."""

    def go(t: Term):
        kids = []
        for child in children(t):
            kids.append((yield go(child)))
        return _relocate(with_children(t, kids) if kids else t, span)

    return run(go(term))


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
    if span is not None:  # errors in the partials speak of the derivative of `prim`
        span = DerivativeSpan.of(span, prim.spelling.symbol, tuple(primals), result)
    # a primitive the program declares holds its partials as terms already
    terms = PARTIALS[prim.name] if prim.declaration is None else prim.declaration.partials
    builders = _BINDER_FREE_PARTIALS
    return [build(renaming, span) if (build := builders.get(id(term))) is not None
            else rename(term, renaming, span) for term in terms]


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


# ---------------------------------------------------------------- array rules

_ARRAY_RULES: dict[tuple[str, str], Any] = {}  # (a cache of terms made from the table)
_DUAL = PairT(RealT(), RealT())
_WITH_BACK = PairT(RealT(), FunT(RealT(), CotangentT()))


def array_rule_term(prim: Primitive, suffix: str) -> Term:
    """The derivative part of the array primitive ``prim``'s rule for the transformation
    whose derivative names end in ``suffix`` (``'``: the tangent; ``_``: the body of the
    backpropagator), as a term over the parameters, their derivative parts, ``result``
    and ``a``: parsed once and type-checked at the parameters' types, which makes each of
    its operations the array entry it is (``a @ transpose y`` of matrices)."""
    key = (prim.name, suffix)
    found = _ARRAY_RULES.get(key)
    if found is not None:
        return found
    from .typecheck import Scheme, TypeEnv, check_term, infer_term  # (typed at first use)
    rule = prim.rule
    param_types, result_type = signature(prim)
    env: dict[str, Type] = {}
    for param, param_type, mode in zip(prim.params, param_types, rule.modes):
        image = map_reals(param_type, _DUAL if suffix == TANGENT else _WITH_BACK, suffix)
        if mode == "whole":
            env[param] = image
        else:
            env[param] = param_type
            if mode != "primal":
                env[param + suffix] = image.second
    if prim.result is not None:
        env[prim.result] = result_type
    for name, _, shared_type in array_rule_shared(prim):
        env[name] = shared_type
    if suffix == BACKPROPAGATOR:
        env[LINEAR_PARAM] = result_type
    text = rule.tangent if suffix == TANGENT else rule.cotangent
    term = parse_expr(text, f"<{'tangent' if suffix == TANGENT else 'cotangent'} of "
                            f"{prim.name}>", bound=tuple(env))
    typing = TypeEnv.builtins().extend_all({n: Scheme((), t) for n, t in env.items()})
    if rule.modes == ("image",):  # the whole image: D of the result type
        check_term(term, map_reals(result_type, _DUAL if suffix == TANGENT else _WITH_BACK,
                                   suffix), typing)
    else:
        infer_term(term, typing)  # elaborates the template's operations in place
    _ARRAY_RULES[key] = term
    return term


def array_rule_shared(prim: Primitive) -> tuple[tuple[str, Term, Type], ...]:
    """The values the array primitive ``prim``'s rule shares between its tangent and its
    cotangent (``ArrayRule.shared``): each its name, its term over the primals and
    ``result``, and its type, in order (parsed and type-checked once, as
    :func:`array_rule_term` does the rule's parts)."""
    key = (prim.name, "shared")
    found = _ARRAY_RULES.get(key)
    if found is not None:
        return found
    from .typecheck import Scheme, TypeEnv, infer_term  # (typed at first use)
    param_types, result_type = signature(prim)
    env: dict[str, Type] = {param: param_type for param, param_type, mode
                            in zip(prim.params, param_types, prim.rule.modes)
                            if mode != "whole"}
    if prim.result is not None:
        env[prim.result] = result_type
    shared = []
    for name, text in prim.rule.shared:
        term = parse_expr(text, f"<{name} of {prim.name}>", bound=tuple(env))
        env[name] = infer_term(term, TypeEnv.builtins().extend_all(
            {n: Scheme((), t) for n, t in env.items()})).type  # (elaborates it in place)
        shared.append((name, term, env[name]))
    _ARRAY_RULES[key] = found = tuple(shared)
    return found


def zero_derivative(prim: Primitive) -> bool:
    """Whether the derivative part of every application of ``prim`` is zero, whatever
    its arguments: a primitive whose result's reals the rules pair with a zero (a test,
    ``length``, ``size``: :meth:`lambdad.homomorphism.Differentiation.locally_constant`,
    at a result type without variables), or an array primitive whose rule's tangent
    mentions no tangent (``maximum_share``: its tangent, linear in the tangents, is then
    zero)."""
    if prim.kind in ("real", "elementwise", "ad"):
        return False
    if prim.kind != "array":
        return not any(isinstance(t, VarT) for t in walk(signature(prim)[1]))
    modes = prim.rule.modes
    if modes == ("image",) or any(mode == "whole" for mode in modes):
        return False
    tangents = {param + TANGENT for param, mode in zip(prim.params, modes) if mode == "split"}
    return not (syntax.free_vars(array_rule_term(prim, TANGENT)) & tangents)


def without_zero_parts(template: Term, zeros: AbstractSet[str],
                       derivative_names: AbstractSet[str]) -> Term | None:
    """An array rule's derivative part ``template`` (see :func:`array_rule_term`) when the
    derivative parts named ``zeros`` (of ``derivative_names``, all the rule's) are zero:
    every summand whose derivative parts are all zero is left out.  The rule's tangent is
    linear in the tangents, so such a summand of it is 0, and ``e + 0 = e`` (the unit
    laws of the addition's table entry); in the backpropagator's body, the summand
    ``x_ e`` sends ``e`` to the zero backpropagator ``\a -o zero`` of a constant (BMP ←D:
    ``(\a -o zero) e = zero``, and ``zero <+> e = e``).  None when nothing is left."""

    def pruned(term: Term) -> Term | None:
        if isinstance(term, Plus):
            left, right = pruned(term.left), pruned(term.right)
            if left is None or right is None:
                return right if left is None else left
            return term if (left, right) == (term.left, term.right) else Plus(
                left, right, span=term.span)
        laws = PRIMITIVES[term.op].laws if isinstance(term, Prim) else None
        if laws is not None and len(term.args) == 2 and laws.right_unit == 0.0:
            left, right = term.args
            kept_right = pruned(right)
            if laws.left_unit == 0.0:
                kept_left = pruned(left)
                if kept_left is None or kept_right is None:
                    return kept_right if kept_left is None else kept_left
            else:
                kept_left = left  # (`0 - e` is not `e`: the left side stays)
                if kept_right is None:
                    return left
            if (kept_left, kept_right) == (left, right):
                return term
            return Prim(term.op, (kept_left, kept_right), span=term.span)
        mentioned = syntax.free_vars(term) & derivative_names
        return None if mentioned and mentioned <= zeros else term

    return pruned(template)


# ---------------------------------------------------------------- non-real primitives


def primal_of(t: Type, term: Term, span: Span | None) -> Term:
    """The primal of ``term : D(t)``: ``fst term`` for ``t = R``, componentwise for pairs
    and lists, ``term`` itself when ``t`` has no reals.  Raises DifferentiationError for a
    function type mentioning ``R`` (no primitive of the table takes one)."""
    if not contains_real(t):
        return term
    if isinstance(t, (RealT, ArrayT)):
        return first(term, span)
    if isinstance(t, ListT):
        body = primal_of(t.item, Var("i", span=span), span)
        return MAP.applied(Lam("i", body, span=span), term, span=span)
    if isinstance(t, PairT):
        return LetPair("p", "q", term,
                       Pair(primal_of(t.first, Var("p", span=span), span),
                            primal_of(t.second, Var("q", span=span), span), t.arity,
                            span=span),
                       t.arity, span=span)
    raise DifferentiationError("cannot take the primal of a function argument", span)


# The derivative part of a constant ``v`` of a ground type (``R``, ``Vec``, ``Mat``), as a
# function of ``v`` and its type: what :func:`lift` pairs each constant with.
ZeroOf = Callable[[Term, Type], Term]


def tangent_zero(span: Span | None) -> ZeroOf:
    """→D's zero: ``0`` for a real, ``spread v 0`` (zeros of its shape) for an array."""
    def zero(value: Term, t: Type) -> Term:
        if isinstance(t, ArrayT):
            return SPREAD.applied(value, Const(0.0, span=span), span=span)
        return Const(0.0, span=span)
    return zero


def backpropagator_zero(span: Span | None) -> ZeroOf:
    """←D's zero: ``\\a -o zero``, whatever the constant."""
    return lambda value, t: LinLam(LINEAR_PARAM, Zero(span=span), span=span)


def lift(t: Type, term: Term, zero: ZeroOf, span: Span | None) -> Term:
    """``term : t`` as a constant of ``D(t)``: each real ``r`` becomes ``(r, zero(r, R))``
    (``map (\\i -> (i, 0)) term`` for a list of reals), each array ``v``
    ``(v, zero(v, Vec))``.  Raises DifferentiationError for a function type mentioning
    ``R``."""
    if not contains_real(t):
        return term
    if isinstance(t, RealT):
        return Pair(term, zero(term, t), span=span)
    if isinstance(t, ArrayT):
        value = Var("z", span=span)
        return Let("z", term, Pair(value, zero(value, t), span=span), span=span)
    if isinstance(t, ListT):
        body = lift(t.item, Var("i", span=span), zero, span)
        return MAP.applied(Lam("i", body, span=span), term, span=span)
    if isinstance(t, PairT):
        return LetPair("p", "q", term,
                       Pair(lift(t.first, Var("p", span=span), zero, span),
                            lift(t.second, Var("q", span=span), zero, span), t.arity,
                            span=span),
                       t.arity, span=span)
    raise DifferentiationError("cannot differentiate a primitive returning a function", span)


def applied_primitive(t: App) -> Prim | None:
    """``f a1 .. ak`` of a built-in ``f`` of an array (kind ``array``) taking k arguments,
    as the primitive application it is; None for any other application."""
    args: list[Term] = []
    head: Term = t
    while isinstance(head, App):
        args.append(head.arg)
        head = head.fn
    if not isinstance(head, Builtin):
        return None
    entry = PRIMITIVES.get(head.name)
    if entry is None or entry.kind != "array" or entry.arity != len(args):
        return None
    return Prim(head.name, tuple(reversed(args)), span=t.span)


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


# ---------------------------------------------------------------- target-language names


def rename_target_binders(term: Term, names: NameSupply,
                          term_names: AbstractSet[str] | None = None) -> Term:
    """``term`` with every binder named like a target-language construct (``zero``,
    ``seed``, ``cotangent``) renamed to a fresh name, with its bound occurrences.
    ``term_names``, when given, are the names occurring in ``term`` (:func:`names_in`):
    without such a name there is nothing to rename, and no walk to find that out.

    ←D puts ``zero`` (and a printed program ``seed``/``cotangent``) inside the scope of
    the source's binders; a binder of that name would capture them when the program is
    printed and parsed again.  Renaming it first keeps ``parse(print(D(t))) == D(t)``."""
    reserved = frozenset(LINEAR_NAMES)
    if term_names is not None and reserved.isdisjoint(term_names):
        return term
    if not any(name in reserved for node in walk(term) for bound in binders(node)
               for name in bound):
        return term
    return rename_bound(term, lambda name: names.fresh(name) if name in reserved else name)
