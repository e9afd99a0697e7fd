"""Forward mode as a program transformation: →D, dual numbers (AD.md section 2).

Every real ``r`` of the source program becomes a pair ``(r, r')`` of the real and its
tangent; every other construct is mapped to itself.  The transformation is compositional
(the image of a term is built from the images of its sub-terms), never evaluates anything,
and preserves types: ``Γ ⊢ t : A`` implies ``→D(Γ) ⊢ →D(t) : →D(A)``.  Every node it builds
carries the span of the source node it comes from, so a runtime error in the transformed
program points at the source.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import DifferentiationError, Span
from .iterate import run
from .primitives import PRIMITIVES, Primitive
from .rules import (
    TANGENT,
    TARGET_TERMS,
    NameSupply,
    eta_expand,
    lift,
    map_reals,
    name_arguments,
    not_differentiable,
    partials,
    plus,
    primal_of,
    result_name,
    signature,
    times,
)
from .syntax import (
    REAL,
    Annot,
    App,
    BoolLit,
    Builtin,
    Const,
    Decl,
    If,
    Lam,
    Let,
    LetPair,
    ListLit,
    Module,
    Pair,
    PairT,
    Prim,
    Term,
    Type,
    Var,
)

DUAL = PairT(REAL, REAL)


def forward_type(t: Type) -> Type:
    """→D(t): ``R`` becomes ``R * R``; ``Bool``, pairs, functions and lists are mapped
    homomorphically.  Raises DifferentiationError on the target-only type ``d``."""
    return map_reals(t, DUAL, "→D")


def forward_term(term: Term, names: NameSupply | None = None) -> Term:
    """→D(term), the dual-numbers program of the source term ``term``.

    ``names`` supplies fresh names (by default one avoiding every name of ``term``).  Raises
    DifferentiationError, located at the culprit, if ``term`` uses ``grad``/``jvp``/``vjp``
    (nested differentiation) or contains target-language terms.
    """
    if names is None:
        names = NameSupply.for_terms(term)
    return run(_Forward(names).term(term))


def forward_module(module: Module, names: NameSupply | None = None) -> Module:
    """The module whose declaration ``f`` is →D of the source declaration ``f`` (names are
    unchanged).  Fails as :func:`forward_term`."""
    if names is None:
        names = NameSupply.for_terms(*(decl.value for decl in module.decls))
        names.avoid(decl.name for decl in module.decls)
    return Module(tuple(Decl(decl.name, forward_term(decl.value, names), span=decl.span)
                        for decl in module.decls))


class _Forward:
    """The arms of →D, one per construct of the core syntax."""

    def __init__(self, names: NameSupply):
        self.names = names

    def term(self, t: Term):
        """→D(t) (a generator driven by :func:`lambdad.iterate.run`)."""
        s = t.span
        if isinstance(t, Const):
            # →D(r) = (r, 0)
            return Pair(t, Const(0.0, span=s), span=s)
        if isinstance(t, (Var, BoolLit)):
            # variables and booleans are their own images
            return t
        if isinstance(t, Builtin):
            # a primitive used as a value: →D of its eta-expansion
            return (yield self.term(eta_expand(t.name, self.names, s)))
        if isinstance(t, Prim):
            prim = PRIMITIVES[t.op]
            if prim.kind == "real":
                return (yield from self.chain_rule(t, prim))
            if prim.kind == "ad":
                # nested differentiation is rejected (LANGUAGE.md section 6)
                raise not_differentiable(t)
            return (yield from self.locally_constant(t, prim))
        if isinstance(t, Lam):
            # →D(\x -> e) = \x -> →D(e), annotation transformed
            body = yield self.term(t.body)
            param_type = None if t.param_type is None else _located(forward_type, t.param_type, s)
            return Lam(t.param, body, param_type, span=s)
        if isinstance(t, App):
            # →D(f a) = →D(f) →D(a)
            fn = yield self.term(t.fn)
            arg = yield self.term(t.arg)
            return App(fn, arg, span=s)
        if isinstance(t, Let):
            # →D(let x = e1 in e2) = let x = →D(e1) in →D(e2): the sharing is kept
            value = yield self.term(t.value)
            body = yield self.term(t.body)
            return Let(t.name, value, body, span=s)
        if isinstance(t, LetPair):
            # →D(let (x, y) = e1 in e2) = let (x, y) = →D(e1) in →D(e2)
            value = yield self.term(t.value)
            body = yield self.term(t.body)
            return LetPair(t.first, t.second, value, body, span=s)
        if isinstance(t, Pair):
            # →D((e1, e2)) = (→D(e1), →D(e2))
            first = yield self.term(t.first)
            second = yield self.term(t.second)
            return Pair(first, second, span=s)
        if isinstance(t, If):
            # →D(if c then e1 else e2) = if →D(c) then →D(e1) else →D(e2): the derivative
            # of the branch taken
            cond = yield self.term(t.cond)
            then = yield self.term(t.then)
            orelse = yield self.term(t.orelse)
            return If(cond, then, orelse, span=s)
        if isinstance(t, ListLit):
            # →D([e1, ..., en]) = [→D(e1), ..., →D(en)]
            items = []
            for item in t.items:
                items.append((yield self.term(item)))
            return ListLit(tuple(items), span=s)
        if isinstance(t, Annot):
            # →D((e : A)) = (→D(e) : →D(A))
            expr = yield self.term(t.expr)
            return Annot(expr, _located(forward_type, t.type, s), span=s)
        if isinstance(t, TARGET_TERMS):
            # a transformed program is not differentiated again
            raise not_differentiable(t)
        raise not_differentiable(t)

    def chain_rule(self, t: Prim, prim: Primitive):
        """→D(f(t1..tk)) = let (x1, x1') = →D(t1) in ... let (xk, xk') = →D(tk) in
        (f(x1..xk), ∂1f(x1..xk) * x1' + ... + ∂kf(x1..xk) * xk')  (AD.md §2; with
        ``let r = f(x1..xk) in (r, ...)`` when the partials mention the result)."""
        s = t.span
        images: dict[int, Term] = {}
        for i, arg in enumerate(t.args):
            if not isinstance(arg, Var):
                images[i] = yield self.term(arg)
        order, params = name_arguments(t.args, TANGENT, self.names)
        primals = [primal for primal, _ in params]
        result = result_name(prim, {n for pair in params for n in pair})
        application = Prim(t.op, tuple(Var(x, span=s) for x in primals), span=s)
        tangent: Term | None = None
        for index, (derivative, (_, dx)) in enumerate(zip(partials(prim, primals, result, s),
                                                          params)):
            if isinstance(t.args[index], Const):
                continue  # a literal's tangent is 0: its partial is never needed (x ^ 2)
            term = times(derivative, Var(dx, span=s), s)
            tangent = term if tangent is None else plus(tangent, term, s)
        body: Term = Pair(application if result is None else Var(result, span=s),
                          Const(0.0, span=s) if tangent is None else tangent, span=s)
        if result is not None:
            body = Let(result, application, body, span=s)
        for i in reversed(order):
            primal, derivative = params[i]
            body = LetPair(primal, derivative, images.get(i, t.args[i]), body, span=s)
        return body

    def locally_constant(self, t: Prim, prim: Primitive):
        """Comparisons, logic, ``length``/``range``, structural primitives:
        →D(f(t1..tk)) = f(a1..ak) with ``ai = fst →D(ti)`` where f takes a real and
        ``ai = →D(ti)`` otherwise, each real of the result paired with a zero tangent
        (``→D(t1 < t2) = fst →D(t1) < fst →D(t2)``, ``→D(length xs) = (length xs, 0)``,
        ``→D(map f xs) = map →D(f) →D(xs)``), all read from the primitive's type."""
        s = t.span
        param_types, result_type = signature(prim)
        args = []
        for arg, param_type in zip(t.args, param_types):
            image = yield self.term(arg)
            args.append(primal_of(param_type, image, s))
        application = Prim(t.op, tuple(args), span=s)
        return lift(result_type, application, lambda: Const(0.0, span=s), s)


def _located(transform: Callable[[Type], Type], t: Type, span: Span | None) -> Type:
    """``transform(t)``; a DifferentiationError it raises is located at ``span``."""
    try:
        return transform(t)
    except DifferentiationError as error:
        raise error.with_span(span) from None
