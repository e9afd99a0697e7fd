"""Spines: a straight-line region of a target term read as a list of bindings.

A *spine* is the ``let``s of a term in evaluation order and the term they end in; a
backpropagator body in *normal form* is ``let``s then a sum of applications of variables.
Fusion (:mod:`lambdad.fuse`) rewrites regions read this way, and the batched-fold plan
(:mod:`lambdad.batching`) checks a fold's step read this way.  Reading only: nothing here
transforms a program.
"""

from __future__ import annotations

import attrs

from .errors import Span
from .primitives import PRIMITIVES
from .syntax import App, Const, Let, LetPair, LinLam, Plus, Prim, Term, Var, Zero

__all__ = ["Binding", "Linear", "flat_spine", "normal_form", "rebuild", "without_unit"]


@attrs.define
class Binding:
    """``let name = value`` (``second`` is None) or ``let (name, second) = value`` of a
    spine, with the span of the node it came from.  (Not the node: a binding would keep
    the rest of the spine alive, and the term being fused is let go as it is walked.)"""

    name: str
    second: str | None
    value: Term
    span: Span | None
    arity: int = 2  # of the tuple a ``let (name, second)`` takes apart (see LetPair)


@attrs.define
class Linear:
    """A backpropagator body ``\\param -o ...`` in normal form: ``let``s (bindings, in
    order), then a sum of applications ``head arg``, grouped by head in order of first
    appearance."""

    param: str
    lets: list[Binding]
    sends: dict[str, list[Term]]
    span: object


def flat_spine(t: Term) -> tuple[list[Binding], Term]:
    """The ``let``s of ``t``'s spine in evaluation order, a ``let`` whose value is itself a
    spine coming after that spine's own (names must be apart), and the spine's end."""
    out: list[Binding] = []
    stack: list[tuple[Term, Binding | None]] = []
    while True:
        if isinstance(t, (Let, LetPair)) and isinstance(t.value, (Let, LetPair)):
            stack.append((t, None))
            t = t.value
            continue
        if isinstance(t, Let):
            out.append(Binding(t.name, None, t.value, t.span))
            t = t.body
            continue
        if isinstance(t, LetPair):
            out.append(Binding(t.first, t.second, t.value, t.span, t.arity))
            t = t.body
            continue
        if not stack:
            return out, t
        # t ends the spine of a let's value: that let binds it, then goes on
        node, _ = stack.pop()
        second = node.second if isinstance(node, LetPair) else None
        first = node.first if isinstance(node, LetPair) else node.name
        arity = node.arity if isinstance(node, LetPair) else 2
        out.append(Binding(first, second, t, node.span, arity))
        t = node.body


def rebuild(spine: list[Binding], final: Term) -> Term:
    """``let``s of ``spine`` around ``final``, innermost last, without recursion."""
    t = final
    for binding in reversed(spine):
        if binding.second is None:
            t = Let(binding.name, binding.value, t, span=binding.span)
        else:
            t = LetPair(binding.name, binding.second, binding.value, t, binding.arity,
                        span=binding.span)
    return t


def normal_form(lam: LinLam) -> Linear | None:
    """The body of ``lam`` as ``let``s then sends, or None if it is not a tree of ``<+>``,
    ``zero``, ``let`` and applications of variables (names are apart, so ``let``s hoist)."""
    lets: list[Binding] = []
    sends: dict[str, list[Term]] = {}
    work = [lam.body]
    while work:
        t = work.pop()
        kind = t.__class__
        if kind is App and t.fn.__class__ is Var:
            sends.setdefault(t.fn.name, []).append(without_unit(t.arg))
        elif kind is Plus:
            work.append(t.right)
            work.append(t.left)
        elif kind is Zero:
            continue
        elif kind is Let:
            lets.append(Binding(t.name, None, t.value, t.span))
            work.append(t.body)
        elif kind is LetPair:
            lets.append(Binding(t.first, t.second, t.value, t.span, t.arity))
            work.append(t.body)
        else:
            return None
    return Linear(lam.param, lets, sends, lam.span)


def without_unit(t: Term) -> Term:
    """``t`` without the unit operand of its operation, by the laws of the primitive table
    (``1 * e`` is ``e``, exactly): ←D scales every send by a partial, often the constant 1,
    and a fused body then binds the adjoint itself, which costs nothing."""
    while t.__class__ is Prim and len(t.args) == 2:
        x, y = t.args
        if x.__class__ is not Const and y.__class__ is not Const:
            break  # (most operands: no literal, no law to look up)
        entry = PRIMITIVES.get(t.op)
        laws = entry.laws if entry is not None else None
        if laws is None:
            break
        if laws.left_unit is not None and isinstance(x, Const) and x.value == laws.left_unit:
            t = y
        elif laws.right_unit is not None and isinstance(y, Const) and y.value == laws.right_unit:
            t = x
        else:
            break
    return t
