"""Forward mode as a program transformation: →D, dual numbers (AD.md section 2).

Every real ``r`` of the source program becomes a pair ``(r, r')`` of the real and its
tangent; every other construct is mapped to itself.  The transformation is compositional
(the image of a term is built from the images of its sub-terms), never evaluates anything,
and preserves types: ``Γ ⊢ t : A`` implies ``→D(Γ) ⊢ →D(t) : →D(A)``.  Every node it builds
carries the span of the source node it comes from, so a runtime error in the transformed
program points at the source.
"""

from __future__ import annotations


from collections.abc import Callable, Set as AbstractSet

from .errors import DifferentiationError, Span
from .homomorphism import Differentiation
from .iterate import run
from .primitives import MAP, PRIMITIVES, SND, ZIP
from .printer import print_type
from .rules import (
    ZeroOf,
    tangent_zero,
    TANGENT,
    contains_real,
    NameSupply,
    lift,
    marked_function,
    marked_function_type,
    not_differentiable,
    primal_of,
    rename_target_binders,
    transform_module,
    map_reals,
    plus,
    times,
)
from .syntax import (
    REAL,
    App,
    ArrayT,
    Const,
    FunT,
    Lam,
    Let,
    LetPair,
    ListT,
    Module,
    Pair,
    PairT,
    Prim,
    RealT,
    Term,
    Type,
    Var,
    VarT,
    walk,
)

DUAL = PairT(REAL, REAL)


def forward_type(t: Type) -> Type:
    """→D(t): ``R`` becomes ``R * R``; ``Bool``, pairs, functions and lists are mapped
    homomorphically, the cotangent space too: ``d<K>`` becomes ``d<D(K)>``."""
    return map_reals(t, DUAL, "→D")


def forward_term(term: Term, names: NameSupply | None = None,
                 constants: AbstractSet[str] = frozenset()) -> Term:
    """→D(term), the dual-numbers program of the source term ``term``.

    ``names`` supplies fresh names (by default one avoiding every name of ``term``).  Raises
    DifferentiationError, located at the culprit, if ``term`` uses ``grad``/``jvp``/``vjp``
    (see :mod:`lambdad.nesting`, which expands them), unless the function of that use carries
    its type (a use whose function has no image, which the expansion leaves in place:
    :meth:`_Forward.differentiation`).  Target-language terms are transformed like any
    other (AD.md section 9): the ring of their cotangents becomes its image.
    ``constants`` are free variables of ``term`` that will be bound to constants (a
    closure's captured reals and arrays, AD.md section 6): their tangents are zero, so the
    tangents of operations on them leave those terms out (:meth:`Differentiation.inactive`).
    """
    if names is None:
        names = NameSupply.for_terms(term)
    return run(_Forward(names, constants).term(rename_target_binders(term, names)))


def forward_module(module: Module, names: NameSupply | None = None) -> Module:
    """The module whose declaration ``f`` is →D of the source declaration ``f`` (names are
    unchanged).  Fails as :func:`forward_term`."""
    return transform_module(module, forward_term, names)


class _Forward(Differentiation):
    """→D: the shared homomorphism with dual numbers at the reals."""

    symbol = "→D"
    suffix = TANGENT

    def transform_type(self, t: Type) -> Type:
        return forward_type(t)

    def zero(self, span: Span | None) -> Term:
        """→D(r) = (r, 0): a literal's tangent is zero."""
        return Const(0.0, span=span)

    def zero_of(self, span: Span | None) -> ZeroOf:
        """→D of a constant: zero tangents, of an array's shape for an array."""
        return tangent_zero(span)

    def combine(self, contributions: list[tuple[Term, str]], taken: set[str],
                span: Span | None, elementwise: list[str] | None = None) -> Term:
        """The tangent of f(x1..xk): ∂1f(x1..xk) * x1' + ... + ∂kf(x1..xk) * xk' (AD.md §2),
        elementwise on arrays (``elementwise`` given: AD.md §10)."""
        tangent: Term | None = None
        on_arrays = elementwise is not None
        for derivative, dx in contributions:
            term = times(derivative, Var(dx, span=span), span, on_arrays)
            tangent = term if tangent is None else plus(tangent, term, span, on_arrays)
        return Const(0.0, span=span) if tangent is None else tangent

    def differentiation(self, t: Prim):
        """→D of a use of ``grad``/``jvp``/``vjp``/``jacrev``/``jacfwd`` whose function ``f``
        has no image the expansion could build (a function given as an argument; the use
        carries ``f``'s type ``A -> B``, see :func:`lambdad.rules.marked_function_type`).

        →D(f) needs no code of ``f``: it is itself a function on reals, which the target
        language's own ``grad``/``jvp``/``vjp`` differentiate.  With ``f^ = →D(f)``,
        ``x^ = →D(x) = Z(x, dx)`` and ``chi = \\y -> f^ (Z(y, dx))`` (the point moved, its
        outer direction kept): ``chi y = (f(y, c), J_y f·dx + J_c f·dc)`` where ``c`` are
        the values ``f`` captured, ``dc`` their outer tangents.  The primal of ``chi`` is
        ``f`` itself, and its tangent ``phi`` has ``J_y phi = ∂_y(J_y f)[dx] + ∂_c(J_y f)[dc]``
        (second derivatives are symmetric): the outer derivative of ``J_y f`` along
        ``(dx, dc)``.  Each rule reads that off (docs/transformations.md, section 11); ``dc``
        never meets the inner differentiation's own perturbation, so the levels cannot be
        confused.  Raises DifferentiationError at the use when a type is not known or the
        result holds functions."""
        fn_type = marked_function_type(t)
        if fn_type is None:
            raise not_differentiable(t)
        prim = PRIMITIVES[t.op]
        s = t.span
        point_type, out_type = fn_type.arg, fn_type.result
        if any(isinstance(inner, VarT) for inner in walk(fn_type)):
            raise DifferentiationError(
                f"this `{prim.spelling.symbol}` differentiates a function given as an "
                f"argument, of type `{print_type(fn_type)}`: forward mode writes it out only "
                "at a type without variables (annotate the definition's parameters, or show a "
                "definition that applies this one to a known function)", s)
        if _holds_function(out_type):
            raise DifferentiationError(
                f"this `{prim.spelling.symbol}` differentiates a function given as an argument "
                "whose result holds functions: forward mode writes it out only for results of "
                "reals, pairs and lists", s)
        images = []
        for arg in (marked_function(t), *t.args[1:]):
            images.append((yield self.term(arg)))
        rule = _FORWARD_OF_DIFFERENTIATION[prim.name]
        return _Uses(self.names, s).build(rule, point_type, out_type, images)


# ---------------------------------------------------------------- values of →D(A)


def tangent_of(t: Type, term: Term, span: Span | None) -> Term:
    """The tangent of ``term : →D(t)`` (a value of ``t`` again): ``snd`` at each real,
    componentwise elsewhere, ``term`` itself when ``t`` has no reals.  Never fails on a
    type without functions."""
    if not contains_real(t):
        return term
    if isinstance(t, (RealT, ArrayT)):  # an array's tangent is one array, like a real's
        return SND.applied(term, span=span)
    if isinstance(t, ListT):
        return MAP.applied(Lam("i", tangent_of(t.item, Var("i", span=span), span), span=span),
                           term, span=span)
    assert isinstance(t, PairT)
    return LetPair("p", "q", term, Pair(tangent_of(t.first, Var("p", span=span), span),
                                        tangent_of(t.second, Var("q", span=span), span),
                                        t.arity, span=span), t.arity, span=span)


def zipped(t: Type, point: Term, direction: Term, names: NameSupply,
           span: Span | None) -> Term:
    """The value of →D(t) with primal ``point`` and tangent ``direction`` (both of type
    ``t``): each real paired with its direction, lists zipped item by item."""
    return _componentwise(t, point, direction, lambda p, d: Pair(p, d, span=span), names, span)


def added(t: Type, left: Term, right: Term, names: NameSupply, span: Span | None) -> Term:
    """``left + right`` for two tangents of type ``t`` (reals added, pairs componentwise,
    lists item by item); ``left`` when ``t`` has no reals."""
    return _componentwise(t, left, right, lambda a, b: plus(a, b, span), names, span)


def _componentwise(t: Type, left: Term, right: Term, real: Callable[[Term, Term], Term],
                   names: NameSupply, span: Span | None) -> Term:
    """``real(l, r)`` for each two reals of ``left`` and ``right`` (both of type ``t``) at
    the same place, in the shape of ``t``: pairs taken apart, lists zipped item by item;
    ``left`` where ``t`` holds no real (an array is one leaf, as a real is)."""
    if isinstance(t, (RealT, ArrayT)):
        return real(left, right)
    if isinstance(t, PairT):
        a, b = names.fresh("p"), names.fresh("q")
        c, e = names.fresh("p"), names.fresh("q")
        return LetPair(a, b, left, LetPair(c, e, right, Pair(
            _componentwise(t.first, Var(a, span=span), Var(c, span=span), real, names, span),
            _componentwise(t.second, Var(b, span=span), Var(e, span=span), real, names, span),
            t.arity, span=span), t.arity, span=span), t.arity, span=span)
    if isinstance(t, ListT) and contains_real(t):
        q, a, b = names.fresh("q"), names.fresh("p"), names.fresh("t")
        item = LetPair(a, b, Var(q, span=span),
                       _componentwise(t.item, Var(a, span=span), Var(b, span=span), real,
                                      names, span), span=span)
        return MAP.applied(Lam(q, item, span=span), ZIP.applied(left, right, span=span),
                           span=span)
    return left


def holds(t: Type | None, kind: type) -> bool:
    """Whether a value of ``t`` holds a ``kind`` (RealT, FunT) in its pairs and lists; a
    function's own argument and result types are not looked into."""
    stack = [t]
    while stack:
        current = stack.pop()
        if isinstance(current, kind):
            return True
        if isinstance(current, PairT):
            stack.extend((current.first, current.second))
        elif isinstance(current, ListT):
            stack.append(current.item)
    return False


def _holds_function(t: Type) -> bool:
    return holds(t, FunT)


# ---------------------------------------------------------------- →D of a differentiation


class _Uses:
    """The target programs of :meth:`_Forward.differentiation`, one method per primitive,
    over the images of its arguments; every node located at the use."""

    def __init__(self, names: NameSupply, span: Span | None):
        self.names = names
        self.span = span

    def var(self, name: str) -> Term:
        return Var(name, span=self.span)

    def build(self, rule: "Callable[[_Uses, Type, Type, list[Term]], Term]", point_type: Type,
              out_type: Type, images: list[Term]) -> Term:
        """``rule``'s program with ``f^``, ``x^`` (and the direction's image) bound to
        names, the point split into ``x`` and ``dx``, and ``chi = \\y -> f^ (Z(y, dx))``."""
        s = self.span
        bound: list[tuple[str, Term]] = []
        names = []
        for base, image in zip(("g", "x", "v"), images):
            if isinstance(image, Var):
                names.append(image.name)
            else:
                name = self.names.fresh(base)
                bound.append((name, image))
                names.append(name)
        f_image, x_image = names[0], names[1]
        point, direction = self.names.fresh("x"), self.names.fresh("dx")
        y, chi = self.names.fresh("y"), self.names.fresh("chi")
        bound.append((point, primal_of(point_type, self.var(x_image), s)))
        bound.append((direction, tangent_of(point_type, self.var(x_image), s)))
        moved = Lam(y, App(self.var(f_image), zipped(point_type, self.var(y),
                                                     self.var(direction), self.names, s),
                           span=s), span=s)
        bound.append((chi, moved))
        body = rule(self, point_type, out_type,
                    [self.var(chi), self.var(point), *map(self.var, names[2:])])
        for name, value in reversed(bound):
            body = Let(name, value, body, span=s)
        return body

    def grad(self, point_type: Type, out_type: Type, args: list[Term]) -> Term:
        """→D(grad f x) = Z(∇_y f, ∂(∇_y f)[dx, dc]): one ``vjp`` of ``chi : A -> R * R``,
        its pull-back applied to ``(1, 0)`` (the gradient of the primal, ∇f) and to
        ``(0, 1)`` (the gradient of the tangent ``phi``)."""
        s = self.span
        chi, point = args
        pullback = self.names.fresh("back")
        units = [Pair(Const(1.0, span=s), Const(0.0, span=s), span=s),
                 Pair(Const(0.0, span=s), Const(1.0, span=s), span=s)]
        gradient, tangent = (App(self.var(pullback), unit, span=s) for unit in units)
        return LetPair(self.names.fresh("w"), pullback, _ad("vjp", chi, point, span=s),
                       zipped(point_type, gradient, tangent, self.names, s), span=s)

    def jvp(self, point_type: Type, out_type: Type, args: list[Term]) -> Term:
        """→D(jvp f x v) = (f^ x^, Z(J_y f v, ∂(J_y f v)[dx, dc] + J_y f dv)): ``jvp chi x v``
        gives ``f^ x^`` and ``(J_y f v, J_y phi v)``, the second-order part;
        ``jvp chi x dv`` gives ``J_y f dv`` as its primal's derivative."""
        s = self.span
        chi, point, direction = args
        v, dv = self.names.fresh("v"), self.names.fresh("dv")
        value, along = self.names.fresh("w"), self.names.fresh("s")
        moved = self.names.fresh("u")
        first = _ad("jvp", chi, point, self.var(v), span=s)
        second = SND.applied(_ad("jvp", chi, point, self.var(dv), span=s),
                                           span=s)
        tangent = zipped(out_type, primal_of(out_type, self.var(along), s),
                         added(out_type, tangent_of(out_type, self.var(along), s),
                               primal_of(out_type, self.var(moved), s), self.names, s),
                         self.names, s)
        body: Term = LetPair(value, along, first,
                             Let(moved, second, Pair(self.var(value), tangent, span=s),
                                 span=s), span=s)
        body = Let(dv, tangent_of(point_type, direction, s), body, span=s)
        return Let(v, primal_of(point_type, direction, s), body, span=s)

    def vjp(self, point_type: Type, out_type: Type, args: list[Term]) -> Term:
        """→D(vjp f x) = (f^ x^, \\c^ -> Z(J_y f^T w, ∂(J_y f^T w)[dx, dc] + J_y f^T dw))
        with ``c^ = Z(w, dw)``: the pull-back of ``chi`` sends ``Z(c1, c2)`` to
        ``J_y f^T c1 + J_y phi^T c2``, so ``Z(w, 0)`` gives the first and ``Z(dw, w)`` the
        second."""
        s = self.span
        chi, point = args
        value, pullback = self.names.fresh("w"), self.names.fresh("back")
        c, w = self.names.fresh("c"), self.names.fresh("w")
        first = App(self.var(pullback), lift(out_type, self.var(w), tangent_zero(s), s), span=s)
        second = App(self.var(pullback), zipped(out_type, tangent_of(out_type, self.var(c), s),
                                                self.var(w), self.names, s), span=s)
        image = Lam(c, Let(w, primal_of(out_type, self.var(c), s),
                           zipped(point_type, first, second, self.names, s), span=s), span=s)
        return LetPair(value, pullback, _ad("vjp", chi, point, span=s),
                       Pair(self.var(value), image, span=s), span=s)

    def jacobian(self, which: str, point_type: Type, args: list[Term]) -> Term:
        """→D(jac f x) for ``f : A -> [R]``: the rows of the primals' Jacobian (∇ f_k) zipped
        with those of the tangents' (the outer derivative of ∇ f_k, as for ``grad``)."""
        s = self.span
        chi, point = args
        rows = []
        for part in (primal_of, tangent_of):
            y = self.names.fresh("y")
            outputs = part(ListT(RealT()), App(chi, self.var(y), span=s), s)
            rows.append(_ad(which, Lam(y, outputs, span=s), point, span=s))
        r, a, b = self.names.fresh("r"), self.names.fresh("p"), self.names.fresh("t")
        row = Lam(r, LetPair(a, b, self.var(r), zipped(point_type, self.var(a), self.var(b),
                                                        self.names, s), span=s), span=s)
        return MAP.applied(row, ZIP.applied(*rows, span=s), span=s)

    def jacrev(self, point_type: Type, out_type: Type, args: list[Term]) -> Term:
        return self.jacobian("jacrev", point_type, args)

    def jacfwd(self, point_type: Type, out_type: Type, args: list[Term]) -> Term:
        return self.jacobian("jacfwd", point_type, args)


def _ad(name: str, *args: Term, span: Span | None) -> Term:
    """``name args`` for the differentiating primitive ``name``."""
    return PRIMITIVES[name].applied(*args, span=span)


_FORWARD_OF_DIFFERENTIATION = {"grad": _Uses.grad, "jvp": _Uses.jvp, "vjp": _Uses.vjp,
                               "jacrev": _Uses.jacrev, "jacfwd": _Uses.jacfwd}
"""→D of each differentiating primitive whose function has no image, by name."""
