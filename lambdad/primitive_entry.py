"""What a row of the primitive table holds (:mod:`lambdad.primitives` is the table).

A :class:`Primitive` gives a built-in's name, kind, type, spelling, evaluation, partial
derivatives and the facts other stages read (domain, kinks, laws, the entry applied to
arrays); :class:`Spelling` how it is written, with the binding powers of LANGUAGE.md
section 4; :class:`Laws` the algebra the simplifier may use; :class:`ArrayRule` an array
primitive's derivative rules as terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from .errors import DomainError
from .syntax import FunT, Prim, Term, Type


@attrs.frozen
class Spelling:
    """How a primitive is written.

    ``fixity`` is ``"infix"`` (``x + y``), ``"prefix"`` (``-x``) or ``"function"`` (``sin x``).
    ``level`` is the binding power of the operator (higher binds tighter), ``assoc`` its
    associativity (``"left"``, ``"right"`` or ``"none"``).
    """

    symbol: str
    fixity: str = "function"
    level: int = 0
    assoc: str = "none"


# Binding powers of LANGUAGE.md section 4, loosest first; the printer and grammar agree.
LEVEL_OR = 1
LEVEL_AND = 2
LEVEL_COMPARE = 3
LEVEL_ADD = 4
LEVEL_MUL = 5
LEVEL_NEG = 6
LEVEL_POW = 7
LEVEL_INDEX = 8
LEVEL_APP = 9


@attrs.frozen
class Laws:
    """The exact algebraic laws of a real operation, which the simplifier applies (each
    holds for every real, so simplifying never changes a value; a side dropped by
    ``absorbing`` is dropped only when it cannot fail).  ``None``: no such law."""

    left_unit: float | None = None       # u . y = y
    right_unit: float | None = None      # x . u = x
    absorbing: float | None = None       # z . y = z = x . z
    negating: float | None = None        # n . y = -y, x . n = -x
    left_negating: float | None = None   # n . y = -y (on the left only)
    of_negation: str | None = None       # x . (-y) = x <of_negation> y
    involution: bool = False             # f (f x) = x (a unary operation)


@attrs.frozen
class ArrayRule:
    """The derivative of an array primitive as terms of the language (AD.md section 10),
    JAX-style as a linear map and its transpose.

    Each parameter is ``"split"`` (a differentiable argument: ``x`` its primal, ``x'`` its
    tangent in →D, ``x_`` its backpropagator in ←D) or ``"primal"`` (an index, a size:
    only its primal is used).  ``tangent`` is the tangent of the result in terms of the
    primals, their tangents and ``result``; ``cotangent`` the body of the result's
    backpropagator ``\a -o ...``: what each ``x_`` is sent, in terms of the primals,
    ``result`` and the cotangent ``a``.  ``shared`` names values of the primals and
    ``result`` that both use, ``(name, term)`` in order: each is bound once by a ``let``
    after the result, ahead of the derivative part (in ←D outside the backpropagator, with
    the primal's work), so that a transformation applied to ←D's program again (→D, for a
    Hessian-vector product) computes it once for the tangent and the backpropagator both."""

    modes: tuple[str, ...]
    tangent: str
    cotangent: str
    shared: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Primitive:
    """One row of the table; see the module docstring for ``kind``."""

    name: str
    kind: str
    params: tuple[str, ...]
    type: Type
    spelling: Spelling
    doc: str
    evaluate: Callable[..., Any] | None
    # A Python expression over the parameter names that computes the primal without a call,
    # used by code generation for speed; ``None`` means call ``evaluate``.  Only for
    # primitives that cannot fail.
    inline: str | None = None
    # An inline expression (as ``inline``) for the applications whose literal operands make
    # every failure but an overflow impossible, with that condition: it is given each
    # operand's literal value, None for an operand that is not a literal (``x ^ 2``: a
    # whole exponent >= 0 is defined at every base).  An overflow raised there is reported
    # with the message of ``evaluate``.
    inline_at_literals: "tuple[Callable[..., bool], str] | None" = None
    partials: tuple[str, ...] = ()
    result: str | None = None
    # Where the primitive is defined, as a predicate on its real arguments (sampling).
    domain: Callable[..., bool] | None = None
    # Distance from the arguments to the nearest point where the primitive is not smooth
    # (gradient checks sample away from those).
    kink: Callable[..., float] | None = None
    # ``f x y == f y x``: pictures mark the argument order of the other binary operations.
    commutative: bool = False
    # Finite wherever its arguments are finite, and never failing (``sin``, ``max``; not
    # ``+``, which overflows): generated code need not check such a result of operands
    # already known finite.
    finite_at_finite: bool = False
    # For a primitive a program declares (``primitive f x = e partial x = ...``), its
    # definition (a :class:`lambdad.primitives.Declaration`): the body its evaluation runs
    # and the partials as terms.  None for built-ins.
    declaration: Any = None
    # The algebra the simplifier may use on an application of it.
    laws: Laws | None = None
    # For a primitive making a list whose length its arguments give (``range n``): that
    # length, from the arguments, so that a run's step limit stops it before the list is
    # made (a list counts a step per element).
    size: Callable[..., float] | None = None
    # For a primitive that also applies to arrays (``x * y``, ``sin x``, ``xs !! i``): the
    # name of the entry an application with an argument of array type is (LANGUAGE.md
    # section 9); the type checker chooses it.
    on_arrays: str | None = None
    # For an entry of arrays: its result type from its arguments' types (a rank rule: NumPy
    # broadcasting, ``Mat @ Vec : Vec``), or a message saying why they do not fit.
    result_type: "Callable[[tuple[Type, ...]], Type | str] | None" = None
    # For kind ``array``: the derivative rules as terms (AD.md section 10).
    rule: "ArrayRule | None" = None
    # For an array entry: its evaluation inside a backpropagator's body, without the test
    # that every element is finite (the gradient is tested once, when it is read off).
    cotangent_evaluate: Callable[..., Any] | None = None
    # For an elementwise entry that a NumPy ufunc computes: ``cotangent_evaluate`` writing
    # its result into its argument number ``into`` (the first argument of the call) when
    # that is an array nothing else holds, of the result's shape (arraylib.in_place; the
    # code generator knows when: a new array made right there as that argument, the
    # product of a cotangent, the partial sum of a longer sum).
    accumulate: Callable[..., Any] | None = None
    # For an elementwise entry that a NumPy ufunc computes: ``evaluate`` writing its result
    # into its argument number ``into`` (the first argument of the call) when that is an
    # array nothing else holds, of the result's shape, and checking the domain and the
    # result as ``evaluate`` does (arraylib.in_place): outside a backpropagator's body, a
    # new array made right there as that argument (the product in `p @ q - r`).
    evaluate_into: Callable[..., Any] | None = None
    # For an array entry: what its result is, in a backpropagator's body, for writing into
    # it later (see ``accumulate``): NEW_ARRAY (a new array, or a read-only view of
    # another, never written), or the number of the argument whose memory it may share
    # (that argument, a view of it, or a new array); None when it may be anything else.
    cotangent_memory: "str | int | None" = None
    # For an elementwise entry: its evaluation with the domain check but without the test
    # that every element of the result is finite, which generated code calls where a test
    # later in the same function would see a non-finite element (codegen's
    # untested_arrays; an error there runs the function again with every test).
    untested_evaluate: Callable[..., Any] | None = None
    # For an elementwise entry with ``evaluate_into``: that evaluation without the test of
    # the result, as ``untested_evaluate`` is ``evaluate``'s.
    untested_evaluate_into: Callable[..., Any] | None = None
    # For an array entry: the arguments a non-finite element of which leaves an element of
    # the result not finite, or makes the evaluation fail (IEEE: inf * 0 and inf - inf
    # are NaN).  Not `exp` (exp (-inf) is 0), `tanh`, a maximum, a comparison or a select.
    propagates: tuple[int, ...] = ()
    # For an array entry: the arguments it reads only the shape of (and whether they are
    # arrays or reals), never their elements.  A backpropagator that captures an array for
    # such arguments alone keeps a stand-in of its shape instead (arraylib.shape_stand_in),
    # so that the forward phase does not hold the array until the backward phase ends.
    shape_only: tuple[int, ...] = ()

    @property
    def arity(self) -> int:
        return len(self.params)

    def applied(self, *args: Term, span: Any = None) -> Prim:
        """The term applying this primitive to ``args`` (its arity of them)."""
        assert len(args) == self.arity, f"{self.name} takes {self.arity} arguments"
        return Prim(self.name, args, span=span)

    def value_at(self, *values: Any) -> float | bool | None:
        """This primitive's value at literal arguments, when a literal can stand for its
        application: the value a run computes (the same evaluation), a finite real or a
        truth value.  None when the evaluation fails (left to fail where it runs) or is not
        finite.  The simplifier, fusion and code generation fold literals by it."""
        if self.kind not in REAL_EXPRESSION_KINDS or self.evaluate is None:
            return None
        try:
            result = self.evaluate(*values)
        except (DomainError, ArithmeticError, ValueError, TypeError):
            return None
        if type(result) is bool or (type(result) is float and math.isfinite(result)):
            return result
        return None


NEW_ARRAY = "new"
"""An entry's ``cotangent_memory`` when its result is a new array (or a read-only view)."""

REAL_EXPRESSION_KINDS = ("real", "test", "logic")
"""The kinds of primitive a declared primitive's body and partials may apply."""


def function_type(*types: Type) -> Type:
    """The curried function type ``t1 -> t2 -> ... -> tn``."""
    result = types[-1]
    for t in reversed(types[:-1]):
        result = FunT(t, result)
    return result
