"""Peephole decisions of the code generator: what one primitive application needs, read
from its operands' atoms while its statement is being generated.

* :func:`folded_atom`: an application that needs no operation at all: on literal operands
  the literal the table's own evaluation gives (:func:`folded_elementwise` for the
  elementwise array entries), and ``1 * x``, ``x * 1``, ``x / 1``, ``x ^ 1`` as ``x``
  (:func:`unit_operand`), bit for bit what the run would compute.
* :func:`spread_operand` and :func:`held_operands`: in a backpropagator's body, an array
  product whose operand is ``spread x c`` of its other operand (multiplied by ``c``
  instead), and the operands an operation may write into (arrays nothing else reads).

Pure functions of the primitive table, the atoms and the function being generated
(:class:`lambdad.generated._Function`); :meth:`lambdad.codegen._CodeGenerator.apply_primitive`
calls them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .generated import _Function, _folded_literals, _literal_real, _real_atom
from .primitives import MUL, PRIMITIVES, REAL_EXPRESSION_KINDS, DomainError, Primitive
from .syntax import Prim

__all__ = ["folded_atom", "folded_elementwise", "held_operands", "spread_operand",
           "unit_operand"]

_LITERAL_FIRST = frozenset("0123456789.(")
# The operations whose unit is 1 (`1 * x`, `x / 1`, `x ^ 1` are x bit for bit; an additive
# unit is not: `0 + -0.0` is 0.0).
_LEFT_UNIT_ONE = frozenset(p.name for p in PRIMITIVES.values()
                           if p.laws is not None and p.laws.left_unit == 1.0)
_RIGHT_UNIT_ONE = frozenset(p.name for p in PRIMITIVES.values()
                            if p.laws is not None and p.laws.right_unit == 1.0)

_ARRAY_MUL = PRIMITIVES[MUL.on_arrays]


def folded_atom(primitive: Primitive, atoms: list[str]) -> str | None:
    """The atom of ``primitive`` applied to ``atoms`` when no operation is needed, else
    None: on literals it is the literal the table's own evaluation gives (bit for bit
    what the run would compute; an application that fails or is not finite is left to
    fail at run time), and ``1 * x``, ``x * 1``, ``x / 1`` and ``x ^ 1`` are ``x``, bit
    for bit (its finiteness is the result's:
    :meth:`lambdad.codegen._CodeGenerator.apply_primitive` checks it unless it is known).
    The rules of the transformations write such applications (``2 - 1`` in the derivative
    of ``x ^ 2``, unit partials of ``+``)."""
    if primitive.kind not in REAL_EXPRESSION_KINDS:
        return folded_elementwise(primitive, atoms) \
            if primitive.kind == "elementwise" else None
    for atom in atoms:  # (most atoms are names: this loop is the common path)
        if atom[0] not in _LITERAL_FIRST:
            break
    else:
        return _folded_literals(primitive, atoms)
    if "1.0" not in atoms:  # (the common path: no unit operand)
        return None
    return unit_operand(primitive, atoms)


def folded_elementwise(primitive: Primitive, atoms: list[str]) -> str | None:
    """The literal an elementwise ``primitive`` gives on the real literals ``atoms``
    (the real operation's value, as a run computes it: ``-1`` of the derivative of
    ``x - y``), or None: for other atoms, and where the evaluation fails or is not
    finite (left to fail at run time)."""
    values = [_literal_real(atom) for atom in atoms]
    if None in values:
        return None
    try:
        result = primitive.evaluate(*values)
    except (DomainError, ArithmeticError, ValueError, TypeError):
        return None
    return _real_atom(result) if type(result) is float and math.isfinite(result) else None


def unit_operand(primitive: Primitive, atoms: list[str]) -> str | None:
    """``x`` for ``1 * x``, ``x * 1``, ``x / 1`` and ``x ^ 1``, else None."""
    if "1.0" in atoms and len(atoms) == 2:
        if atoms[0] == "1.0" and primitive.name in _LEFT_UNIT_ONE:
            return atoms[1]
        if atoms[1] == "1.0" and primitive.name in _RIGHT_UNIT_ONE:
            return atoms[0]
    return None


def spread_operand(primitive: Primitive, atoms: Sequence[str], fn: _Function
                   ) -> tuple[int, str] | None:
    """For a product of arrays in a backpropagator's body, one of whose operands was
    made by ``spread x c`` (an array of x's shape, every element c) where the other
    operand is x itself: that operand's number and the atom of c; else None."""
    if primitive is not _ARRAY_MUL or not fn.spreads:
        return None
    for k in (0, 1):
        made = fn.spreads.get(atoms[k])
        if made is not None and made[0] == atoms[1 - k]:
            return k, made[1]
    return None


def held_operands(term: Prim | None, atoms: Sequence[str], fn: _Function
                  ) -> tuple[int, ...]:
    """The numbers of the operands of ``term`` (an application in a backpropagator's
    body, its operands ``atoms``) held by it alone: each an array made right there as
    that operand (an application whose result is new, or a view or the operand itself
    of one held so: ``cotangent_memory`` in the table), or bound by ``let`` to a name
    used there only, which nothing else in the body can read.  The operation may write
    into one of them."""
    if term is None:
        return ()
    # (held by an operand, or by the application itself: every operand that is it, `z * z`)
    return tuple(k for k, atom in enumerate(atoms)
                 if (holder := fn.owned.get(atom)) is term.args[k] or holder is term)
