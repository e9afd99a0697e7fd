"""Forward mode as a program transformation: →D, dual numbers (AD.md section 2).

Every real ``r`` of the source program becomes a pair ``(r, r')`` of the real and its
tangent; every other construct is mapped to itself.  The transformation is compositional
(the image of a term is built from the images of its sub-terms), never evaluates anything,
and preserves types: ``Γ ⊢ t : A`` implies ``→D(Γ) ⊢ →D(t) : →D(A)``.  Every node it builds
carries the span of the source node it comes from, so a runtime error in the transformed
program points at the source.
"""

from __future__ import annotations


from .errors import Span
from .iterate import run
from .rules import (
    Differentiation,
    TANGENT,
    NameSupply,
    rename_target_binders,
    transform_module,
    map_reals,
    plus,
    times,
)
from .syntax import (
    REAL,
    Const,
    Module,
    PairT,
    Term,
    Type,
    Var,
)

DUAL = PairT(REAL, REAL)


def forward_type(t: Type) -> Type:
    """→D(t): ``R`` becomes ``R * R``; ``Bool``, pairs, functions and lists are mapped
    homomorphically, the cotangent space too: ``d<K>`` becomes ``d<D(K)>``."""
    return map_reals(t, DUAL, "→D")


def forward_term(term: Term, names: NameSupply | None = None) -> Term:
    """→D(term), the dual-numbers program of the source term ``term``.

    ``names`` supplies fresh names (by default one avoiding every name of ``term``).  Raises
    DifferentiationError, located at the culprit, if ``term`` uses ``grad``/``jvp``/``vjp``
    (see :mod:`lambdad.nesting`, which expands them).  Target-language terms are transformed like
    any other (AD.md section 9): the ring of their cotangents becomes its image.
    """
    if names is None:
        names = NameSupply.for_terms(term)
    return run(_Forward(names).term(rename_target_binders(term, names)))


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

    def combine(self, contributions: list[tuple[Term, str]], taken: set[str],
                span: Span | None) -> Term:
        """The tangent of f(x1..xk): ∂1f(x1..xk) * x1' + ... + ∂kf(x1..xk) * xk' (AD.md §2)."""
        tangent: Term | None = None
        for derivative, dx in contributions:
            term = times(derivative, Var(dx, span=span), span)
            tangent = term if tangent is None else plus(tangent, term, span)
        return Const(0.0, span=span) if tangent is None else tangent
