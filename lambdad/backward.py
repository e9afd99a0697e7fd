"""Backpropagation as a program transformation: ←D, with linear negation (AD.md section 3;
Brunel, Mazza, Pagani, POPL 2020, "BMP" below).

Every real ``r`` of the source program becomes a pair ``(r, r_)`` of the real and its
backpropagator ``r_ : R -o d``, the linear map sending a cotangent of ``r`` to the
cotangent of the inputs; every other construct is mapped to itself.  ``let`` keeps its
sharing: every use of a ``let``-bound real sees the same backpropagator, which is what
linear factoring exploits when the program runs.  The transformation is compositional,
never evaluates anything, and preserves types: ``Γ ⊢ t : A`` implies
``←D(Γ) ⊢ ←D(t) : ←D(A)``.  Every node it builds carries the span of the source node it
comes from, so a runtime error in the transformed program points at the source.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import DifferentiationError, Span
from .iterate import run
from .primitives import PRIMITIVES, Primitive
from .rules import (
    BACKPROPAGATOR,
    LINEAR_PARAM,
    TARGET_TERMS,
    NameSupply,
    eta_expand,
    lift,
    local_name,
    map_reals,
    name_arguments,
    not_differentiable,
    partials,
    primal_of,
    result_name,
    signature,
    times,
)
from .syntax import BACKPROPAGATOR as BACKPROPAGATOR_TYPE
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
    LinLam,
    ListLit,
    Module,
    Pair,
    PairT,
    Plus,
    Prim,
    Term,
    Type,
    Var,
    Zero,
)

WITH_BACKPROPAGATOR = PairT(REAL, BACKPROPAGATOR_TYPE)


def backward_type(t: Type) -> Type:
    """←D(t): ``R`` becomes ``R * (R -o d)``; ``Bool``, pairs, functions and lists are
    mapped homomorphically.  Raises DifferentiationError on the target-only type ``d``."""
    return map_reals(t, WITH_BACKPROPAGATOR, "←D")


def backward_term(term: Term, names: NameSupply | None = None) -> Term:
    """←D(term), the backpropagation program of the source term ``term``.

    ``names`` supplies fresh names (by default one avoiding every name of ``term``).  Raises
    DifferentiationError, located at the culprit, if ``term`` uses ``grad``/``jvp``/``vjp``
    (nested differentiation) or contains target-language terms.
    """
    if names is None:
        names = NameSupply.for_terms(term)
    return run(_Backward(names).term(term))


def backward_module(module: Module, names: NameSupply | None = None) -> Module:
    """The module whose declaration ``f`` is ←D of the source declaration ``f`` (names are
    unchanged).  Fails as :func:`backward_term`."""
    if names is None:
        names = NameSupply.for_terms(*(decl.value for decl in module.decls))
        names.avoid(decl.name for decl in module.decls)
    return Module(tuple(Decl(decl.name, backward_term(decl.value, names), span=decl.span)
                        for decl in module.decls))


class _Backward:
    """The arms of ←D (BMP), one per construct of the core syntax."""

    def __init__(self, names: NameSupply):
        self.names = names

    def term(self, t: Term):
        """←D(t) (a generator driven by :func:`lambdad.iterate.run`)."""
        s = t.span
        if isinstance(t, Const):
            # BMP ←D, constant: ←D(r) = (r, \\a -o zero)
            return Pair(t, _zero_backpropagator(s), span=s)
        if isinstance(t, (Var, BoolLit)):
            # variables and booleans are their own images
            return t
        if isinstance(t, Builtin):
            # a primitive used as a value: ←D of its eta-expansion
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
            # ←D(\x -> e) = \x -> ←D(e), annotation transformed
            body = yield self.term(t.body)
            param_type = None if t.param_type is None else _located(backward_type, t.param_type, s)
            return Lam(t.param, body, param_type, span=s)
        if isinstance(t, App):
            # ←D(f a) = ←D(f) ←D(a)
            fn = yield self.term(t.fn)
            arg = yield self.term(t.arg)
            return App(fn, arg, span=s)
        if isinstance(t, Let):
            # ←D(let x = e1 in e2) = let x = ←D(e1) in ←D(e2): the sharing is kept
            value = yield self.term(t.value)
            body = yield self.term(t.body)
            return Let(t.name, value, body, span=s)
        if isinstance(t, LetPair):
            # ←D(let (x, y) = e1 in e2) = let (x, y) = ←D(e1) in ←D(e2)
            value = yield self.term(t.value)
            body = yield self.term(t.body)
            return LetPair(t.first, t.second, value, body, span=s)
        if isinstance(t, Pair):
            # ←D((e1, e2)) = (←D(e1), ←D(e2))
            first = yield self.term(t.first)
            second = yield self.term(t.second)
            return Pair(first, second, span=s)
        if isinstance(t, If):
            # ←D(if c then e1 else e2) = if ←D(c) then ←D(e1) else ←D(e2): the derivative
            # of the branch taken
            cond = yield self.term(t.cond)
            then = yield self.term(t.then)
            orelse = yield self.term(t.orelse)
            return If(cond, then, orelse, span=s)
        if isinstance(t, ListLit):
            # ←D([e1, ..., en]) = [←D(e1), ..., ←D(en)]
            items = []
            for item in t.items:
                items.append((yield self.term(item)))
            return ListLit(tuple(items), span=s)
        if isinstance(t, Annot):
            # ←D((e : A)) = (←D(e) : ←D(A))
            expr = yield self.term(t.expr)
            return Annot(expr, _located(backward_type, t.type, s), span=s)
        if isinstance(t, TARGET_TERMS):
            # a transformed program is not differentiated again
            raise not_differentiable(t)
        raise not_differentiable(t)

    def chain_rule(self, t: Prim, prim: Primitive):
        """BMP ←D, primitive application: ←D(f(t1..tk)) = let (x1, x1_) = ←D(t1) in ...
        let (xk, xk_) = ←D(tk) in (f(x1..xk), \\a -o x1_ (∂1f(x1..xk) * a) <+> ... <+>
        xk_ (∂kf(x1..xk) * a))  (AD.md §3; with ``let r = f(x1..xk) in (r, ...)`` when the
        partials mention the result)."""
        s = t.span
        images: dict[int, Term] = {}
        for i, arg in enumerate(t.args):
            if not isinstance(arg, Var):
                images[i] = yield self.term(arg)
        order, params = name_arguments(t.args, BACKPROPAGATOR, self.names)
        primals = [primal for primal, _ in params]
        taken = {n for pair in params for n in pair}
        result = result_name(prim, taken)
        a = local_name(LINEAR_PARAM, taken | {result})
        application = Prim(t.op, tuple(Var(x, span=s) for x in primals), span=s)
        cotangent: Term | None = None
        for index, (derivative, (_, x_)) in enumerate(zip(partials(prim, primals, result, s),
                                                          params)):
            if isinstance(t.args[index], Const):
                continue  # a literal's backpropagator is zero: its partial is never needed
            term = App(Var(x_, span=s), times(derivative, Var(a, span=s), s), span=s)
            cotangent = term if cotangent is None else Plus(cotangent, term, span=s)
        backpropagator = LinLam(a, Zero(span=s) if cotangent is None else cotangent, span=s)
        body: Term = Pair(application if result is None else Var(result, span=s),
                          backpropagator, span=s)
        if result is not None:
            body = Let(result, application, body, span=s)
        for i in reversed(order):
            primal, x_ = params[i]
            body = LetPair(primal, x_, images.get(i, t.args[i]), body, span=s)
        return body

    def locally_constant(self, t: Prim, prim: Primitive):
        """Comparisons, logic, ``length``/``range``, structural primitives:
        ←D(f(t1..tk)) = f(a1..ak) with ``ai = fst ←D(ti)`` where f takes a real and
        ``ai = ←D(ti)`` otherwise, each real of the result paired with the zero
        backpropagator (``←D(t1 < t2) = fst ←D(t1) < fst ←D(t2)``,
        ``←D(length xs) = (length xs, \\a -o zero)``, ``←D(map f xs) = map ←D(f) ←D(xs)``),
        all read from the primitive's type."""
        s = t.span
        param_types, result_type = signature(prim)
        args = []
        for arg, param_type in zip(t.args, param_types):
            image = yield self.term(arg)
            args.append(primal_of(param_type, image, s))
        application = Prim(t.op, tuple(args), span=s)
        return lift(result_type, application, lambda: _zero_backpropagator(s), s)


def _zero_backpropagator(span: Span | None) -> Term:
    """``\\a -o zero``: the backpropagator of a constant."""
    return LinLam(LINEAR_PARAM, Zero(span=span), span=span)


def _located(transform: Callable[[Type], Type], t: Type, span: Span | None) -> Type:
    """``transform(t)``; a DifferentiationError it raises is located at ``span``."""
    try:
        return transform(t)
    except DifferentiationError as error:
        raise error.with_span(span) from None
