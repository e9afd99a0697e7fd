"""Batched folds, the plan: which ``fold`` of a fused program runs its steps' bodies as one
loop, and the step the code generator compiles for it.

The door is :func:`batched_fold_step`: given a fold's step it returns a
:class:`BatchedFold` or None.  Fusion asks it which folds to mark; the code generator asks
it for the plan of a marked fold and emits the loop (``foldgen.BatchedFolds.batched_fold``),
run by :func:`lambdad.tape.batched_fold`.  Nothing here transforms a program: the plan's step is
the given step, its binders renamed apart, returning its backpropagators as a list too.
"""

from __future__ import annotations

import attrs

from .primitives import PRIMITIVES, REAL_EXPRESSION_KINDS
from .spines import flat_spine, normal_form, rebuild
from .syntax import (App, Lam, Let, LetPair, LinLam, ListLit, NameSupply, Pair, Prim, Term, Var, Zero,
                     binders, children, rename_bound, walk)

__all__ = ["BatchedFold", "batched_fold_step"]


@attrs.frozen
class BatchedFold:
    """How a fused ``fold``'s step runs batched (:func:`batched_fold_step`).

    ``step`` is the step whose region also returns, as a list, its backpropagators (the
    ``\\a -o e`` nodes whose ``id`` is in ``slots``, each mapped to its slot number);
    ``paths`` gives each slot's place in the accumulator (``(0, 1)``: the backpropagator of
    the first component); ``previous`` maps each name of the accumulator the step is given
    that its backpropagators send to, and that is the previous step's slot, to that slot."""

    step: Lam
    slots: dict[int, int]
    paths: tuple[tuple[int, ...], ...]
    previous: dict[str, int]


def batched_fold_step(step: Term) -> BatchedFold | None:
    """How the step ``\\p -> ... \\x -> region`` of a fused ``fold`` runs batched; None
    unless it qualifies.

    It qualifies when the backpropagators of the region are exactly those of the
    accumulator it returns — each bound by ``let``, a sum of applications, occurring once,
    in the returned structure — and the accumulator ``p`` it is given is only taken apart,
    used by real operations, and sent to by those backpropagators.  Then what a step's
    backpropagators send to ``p`` reaches only the previous step's (or, for the first step,
    the start's), so the steps' bodies can run in one reverse loop, adjoints carried from
    step to step (the backward phase of factored evaluation, step by step).

    Its binders are renamed apart first when they are not (→D of a fused step, run by
    forward mode over reverse mode, shadows names as the paper's rules do); the plan's
    ``step`` is then the renamed one."""
    if not isinstance(step, Lam):
        return None
    if not _binders_apart(step):  # they must be, for the spine to be flattened
        step = _renamed_apart(step)
    outer, inner = flat_spine(step.body)
    if not isinstance(inner, Lam):
        return None
    spine, end = flat_spine(inner.body)
    # The place in the accumulator of each name bound from it, wherever it is bound (a
    # binder comes before its uses in pre-order), and the occurrences that bind them
    # (`let (a, b) = p`): every use of such a name is checked below, so none escapes.
    from_p: dict[str, tuple[int, ...]] = {step.param: ()}
    taking_apart: set[int] = set()
    for node in walk(step):
        if isinstance(node, (Let, LetPair)) and isinstance(node.value, Var) \
                and node.value.name in from_p:
            taking_apart.add(id(node.value))
            path = from_p[node.value.name]
            if isinstance(node, Let):
                from_p[node.name] = path
            else:
                from_p[node.first] = path + (0,)
                from_p[node.second] = path + (1,)
    marked: dict[str, LinLam] = {}
    pairs: dict[str, Term] = {}
    for in_region, binding in [(False, b) for b in outer] + [(True, b) for b in spine]:
        value = binding.value
        if isinstance(value, Var) and value.name in from_p:
            continue
        elif binding.second is None and isinstance(value, LinLam) \
                and not isinstance(value.body, Zero):
            if not in_region or normal_form(value) is None:
                return None
            marked[binding.name] = value
        elif binding.second is None and isinstance(value, (Pair, Var)):
            pairs[binding.name] = value
    if not marked:
        return None
    ids = {id(lam) for lam in marked.values()}
    occurrences: dict[str, int] = {}
    heads: set[str] = set()
    work: list[tuple[Term, Term | None, bool]] = [(step, None, False)]
    while work:
        node, parent, in_marked = work.pop()
        if isinstance(node, LinLam) and not isinstance(node.body, Zero) and id(node) not in ids:
            return None
        if isinstance(node, Var):
            name = node.name
            occurrences[name] = occurrences.get(name, 0) + 1
            if name in from_p:
                if in_marked and isinstance(parent, App) and parent.fn is node:
                    heads.add(name)
                elif not (id(node) in taking_apart
                          or (isinstance(parent, Prim)
                              and PRIMITIVES[parent.op].kind in REAL_EXPRESSION_KINDS)):
                    return None
            if name in marked and not isinstance(parent, Pair):
                return None
        inside = in_marked or id(node) in ids
        work.extend((child, node, inside) for child in children(node))
    # What the region returns: every marked backpropagator, reached through pairs used
    # nowhere else; its place there is its slot's.
    places: dict[str, tuple[int, ...]] = {}
    pending: list[tuple[Term, tuple[int, ...]]] = [(end, ())]
    while pending:
        node, path = pending.pop()
        if isinstance(node, Pair):
            pending.extend(((node.first, path + (0,)), (node.second, path + (1,))))
        elif isinstance(node, Var):
            if node.name in marked:
                places[node.name] = path
            elif node.name in pairs:
                if occurrences.get(node.name) != 1:
                    return None
                pending.append((pairs[node.name], path))
    if set(places) != set(marked) or any(occurrences.get(name) != 1 for name in marked):
        return None
    order = sorted(marked, key=places.__getitem__)
    paths = tuple(places[name] for name in order)
    slot_at = {path: slot for slot, path in enumerate(paths)}
    previous = {name: slot_at[from_p[name]] for name in heads if from_p[name] in slot_at}
    returned = Pair(end, ListLit(tuple(Var(name) for name in order)))
    batched = attrs.evolve(step, body=rebuild(outer, attrs.evolve(
        inner, body=rebuild(spine, returned))))
    return BatchedFold(batched, {id(marked[name]): slot for slot, name in enumerate(order)},
                       paths, previous)


def _binders_apart(term: Term) -> bool:
    """Whether no two binders of ``term`` bind the same name (``_`` aside)."""
    seen: set[str] = set()
    for node in walk(term):
        for bound in binders(node):
            for name in bound:
                if name in seen and name != "_":
                    return False
                seen.add(name)
    return True


def _renamed_apart(term: Term) -> Term:
    """``term`` with every binder renamed to a fresh name (one the term does not mention),
    with its bound occurrences: no two binders share a name, and no free name is captured."""
    return rename_bound(term, NameSupply.for_terms(term).renamed)
