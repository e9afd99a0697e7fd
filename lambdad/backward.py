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

from collections.abc import Set as AbstractSet

from .errors import Span
from .homomorphism import Differentiation
from .iterate import run
from .rules import (
    ZeroOf,
    backpropagator_zero,
    BACKPROPAGATOR,
    LINEAR_PARAM,
    NameSupply,
    rename_target_binders,
    transform_module,
    local_name,
    map_reals,
    summed_to,
    times,
)
from .syntax import BACKPROPAGATOR as BACKPROPAGATOR_TYPE
from .syntax import (
    REAL,
    App,
    Const,
    LinLam,
    Module,
    PairT,
    Plus,
    Term,
    Type,
    Var,
    Zero,
    names_in,
    walk,
)

WITH_BACKPROPAGATOR = PairT(REAL, BACKPROPAGATOR_TYPE)


def backward_type(t: Type) -> Type:
    """←D(t): ``R`` becomes ``R * (R -o d)``; ``Bool``, pairs, functions and lists are
    mapped homomorphically, the cotangent space too: ``d<K>`` becomes ``d<D(K)>``."""
    return map_reals(t, WITH_BACKPROPAGATOR, "←D")


def backward_term(term: Term, names: NameSupply | None = None,
                  term_names: AbstractSet[str] | None = None,
                  constants: AbstractSet[str] = frozenset()) -> Term:
    """←D(term), the backpropagation program of the source term ``term``.

    ``names`` supplies fresh names (by default one avoiding every name of ``term``).  Raises
    DifferentiationError, located at the culprit, if ``term`` uses ``grad``/``jvp``/``vjp``
    (see :mod:`lambdad.nesting`, which expands them).  Target-language terms are transformed like
    any other (AD.md section 9): the ring of their cotangents becomes its image.
    ``term_names``, when known, are the names occurring in ``term`` (:func:`names_in`).
    ``constants`` are free variables of ``term`` that will be bound to constants (a
    closure's captured reals and arrays, AD.md section 6): their backpropagators are
    zero, so the backpropagators of operations on them send them nothing
    (:meth:`Differentiation.inactive`).
    """
    if names is None:
        term_names = names_in(term)
        names = NameSupply(term_names)
    return run(_Backward(names, constants).term(
        rename_target_binders(term, names, term_names)))


def backward_module(module: Module, names: NameSupply | None = None) -> Module:
    """The module whose declaration ``f`` is ←D of the source declaration ``f`` (names are
    unchanged).  Fails as :func:`backward_term`."""
    return transform_module(module, backward_term, names)


class _Backward(Differentiation):
    """←D (BMP): the shared homomorphism with backpropagators at the reals."""

    symbol = "←D"
    suffix = BACKPROPAGATOR

    def transform_type(self, t: Type) -> Type:
        return backward_type(t)

    def zero(self, span: Span | None) -> Term:
        """BMP ←D, constant: ←D(r) = (r, \\a -o zero)."""
        return _zero_backpropagator(span)

    def zero_of(self, span: Span | None) -> ZeroOf:
        """←D of a constant: the zero backpropagator."""
        return backpropagator_zero(span)

    def combine(self, contributions: list[tuple[Term, str]], taken: set[str],
                span: Span | None, elementwise: list[str] | None = None) -> Term:
        """The backpropagator of f(x1..xk), the chain rule transposed (AD.md §3):
        \\a -o x1_ (∂1f(x1..xk) * a) <+> ... <+> xk_ (∂kf(x1..xk) * a).  For an
        elementwise operation on arrays (``elementwise``: the primals x1..xk) each
        cotangent is summed back to its argument's shape, the transpose of broadcasting
        (AD.md §10): xi_ (sum_to xi (∂if(x1..xk) * a)); with a constant partial (the 1
        and -1 of + and -) the sum is scaled instead, xi_ (∂if * sum_to xi a): one operation
        on the array a, not two.  An array operand taken k times with the same partial
        (``z * z``) receives k times one cotangent, xi_ (k * sum_to xi (∂if * a)), not the
        sum of k equal ones."""
        a = local_name(LINEAR_PARAM, taken)
        cotangent: Term | None = None
        if elementwise is None:  # (reals, the commonest: a term per contribution)
            for derivative, x_ in contributions:
                term = App(Var(x_, span=span), times(derivative, Var(a, span=span), span, False),
                           span=span)
                cotangent = term if cotangent is None else Plus(cotangent, term, span=span)
            return LinLam(a, Zero(span=span) if cotangent is None else cotangent, span=span)
        times_taken = [1] * len(contributions)
        for i, (derivative, x_) in enumerate(contributions):
            for j in range(i):
                if times_taken[j] and contributions[j] == (derivative, x_) \
                        and elementwise[j] == elementwise[i]:
                    times_taken[j] += 1
                    times_taken[i] = 0
                    break
        for i, (derivative, x_) in enumerate(contributions):
            if not times_taken[i]:
                continue
            if _constant(derivative):
                sent = times(derivative, summed_to(elementwise[i], Var(a, span=span), span),
                             span, True)
            else:
                sent = summed_to(elementwise[i], times(derivative, Var(a, span=span), span, True),
                                 span)
            if times_taken[i] > 1:
                sent = times(Const(float(times_taken[i]), span=span), sent, span, True)
            term = App(Var(x_, span=span), sent, span=span)
            cotangent = term if cotangent is None else Plus(cotangent, term, span=span)
        return LinLam(a, Zero(span=span) if cotangent is None else cotangent, span=span)


def _constant(term: Term) -> bool:
    """Whether ``term`` has no variable (a literal, ``-1``, a partial's constant)."""
    return not any(isinstance(node, Var) for node in walk(term))


def _zero_backpropagator(span: Span | None) -> Term:
    """``\\a -o zero``: the backpropagator of a constant."""
    return LinLam(LINEAR_PARAM, Zero(span=span), span=span)
