"""Fusion of backpropagators: linear factoring done at compile time (target → target).

←D gives every primitive application its own backpropagator ``\\a -o e``; evaluated, each
is a record on the tape, and the backward phase runs its body once (``factored``).  Inside
one straight-line region (the body of a function, a branch of an ``if``: a spine of
``let``s) most of them are used by exactly one later backpropagator of the same region.
:func:`fuse` moves each such body into its user, once, so the region keeps one
backpropagator per value that leaves it:

* a user ``\\b -o ... <+> g u1 <+> ... <+> g uk`` of ``g = \\a -o e`` becomes
  ``\\b -o let a = u1 + ... + uk in e <+> ...``: BMP's linear factoring
  ``g u <+> g v → g (u + v)`` followed by β-reduction, done statically;
* the adjoints of the fused backpropagators live in ``let``-bound reals of the user's body;
* a backpropagator is left alone when it escapes the region (it is returned, captured by
  a function, used by an ``if``, ...) or when two backpropagators use it: moving its body
  into both would run its work twice (the exponential hazard linear factoring exists to
  avoid), so it keeps its record and the backward phase adds what reaches it;
* what a fused body sends to a backpropagator outside the region is factored too: one
  application per backpropagator, with the sum of the reals sent to it.

The result is a target program like any other: it prints, parses back, type-checks and
runs to the same numbers (primal results are untouched: only the bodies of linear
abstractions change; adjoints may differ in the last bits, as sums are associated
differently).  Binders are first renamed apart (every bound name fresh), so moving a body
or flattening ``let x = (let y = e1 in e2) in e3`` into ``let y = e1 in let x = e2 in e3``
never captures a name.  No recursion: everything runs on :func:`lambdad.iterate.run`.
"""

from __future__ import annotations

import attrs

from .iterate import run
from .primitives import ADD, NEG, PRIMITIVES, SUB
from .rules import NameSupply
from .syntax import (
    Annot,
    App,
    Const,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    Pair,
    Plus,
    Prim,
    Term,
    Var,
    Zero,
    binders,
    children,
    rename_binders,
    walk,
    with_children,
)

__all__ = ["fuse"]


def fuse(term: Term, names: NameSupply | None = None) -> Term:
    """``term`` (a target term, such as ←D of a λ-term) with the backpropagators of each
    straight-line region fused as the module docstring describes; the same meaning and
    type.  ``names`` supplies fresh names (by default one avoiding every name of
    ``term``).  Never fails on a well-typed target term."""
    if names is None:
        names = NameSupply.for_terms(term)
    unique = run(_Renamer(names).term(term))
    return run(_Fuser(names).term(unique))


class _Renamer:
    """Renames every binder of a term to a fresh name (bound occurrences with it)."""

    _MISSING = object()

    def __init__(self, names: NameSupply):
        self.names = names
        self.current: dict[str, str] = {}

    def fresh(self, name: str) -> str:
        base = name.rstrip("0123456789") or "v"
        return self.names.fresh(base)

    def term(self, t: Term):
        if isinstance(t, Var):
            new = self.current.get(t.name)
            return t if new is None else attrs.evolve(t, name=new)
        kids = children(t)
        if not kids:
            return t
        fresh = {name: self.fresh(name) for bound in binders(t) for name in bound
                 if name != "_"}
        new_kids = []
        for child, bound in zip(kids, binders(t)):
            saved = [(name, self.current.get(name, self._MISSING)) for name in bound
                     if name != "_"]
            for name, _ in saved:
                self.current[name] = fresh[name]
            new_kids.append((yield self.term(child)))
            for name, previous in reversed(saved):
                if previous is self._MISSING:
                    del self.current[name]
                else:
                    self.current[name] = previous
        return rename_binders(with_children(t, new_kids), fresh)


@attrs.define
class _Binding:
    """``let name = value`` (``second`` is None) or ``let (name, second) = value`` of a
    spine, with the node it came from (for its span)."""

    name: str
    second: str | None
    value: Term
    node: Term


@attrs.define
class _Linear:
    """A backpropagator body ``\\param -o ...`` in normal form: ``let``s (bindings, in
    order), then a sum of applications ``head arg``, grouped by head in order of first
    appearance."""

    param: str
    lets: list[_Binding]
    sends: dict[str, list[Term]]
    span: object


class _Fuser:
    """Fuses the backpropagators of every straight-line region of a renamed-apart term."""

    def __init__(self, names: NameSupply):
        self.names = names

    # ---- the walk: regions are function bodies, branches and the whole term
    def term(self, t: Term):
        """``t`` with every region inside it fused (a spine of ``let``s is one wherever it
        occurs; so are function bodies and branches)."""
        if isinstance(t, (Let, LetPair)):
            return (yield self.region(t))
        if isinstance(t, Lam):
            body = yield self.region(t.body)
            return attrs.evolve(t, body=body)
        if isinstance(t, If):
            cond = yield self.term(t.cond)
            then = yield self.region(t.then)
            orelse = yield self.region(t.orelse)
            return attrs.evolve(t, cond=cond, then=then, orelse=orelse)
        kids = children(t)
        if not kids:
            return t
        new_kids = []
        for child in kids:
            new_kids.append((yield self.term(child)))
        return with_children(t, new_kids)

    def region(self, t: Term):
        """The straight-line region ``t``: its spine flattened, the regions inside it
        fused, then its backpropagators fused."""
        if isinstance(t, Annot):  # `(e : A)` around a region: the annotation stays
            expr = yield self.region(t.expr)
            return attrs.evolve(t, expr=expr)
        spine: list[_Binding] = []
        final = yield self.flatten(t, spine)
        aliases: dict[str, str] = {}
        pairs: dict[str, tuple[str, str]] = {}
        taken_apart: dict[str, tuple[str, str]] = {}  # `let (p, q) = x` of a variable x
        out: list[_Binding] = []
        for binding in spine:
            value = yield self.term(_renamed(binding.value, aliases))
            if binding.second is None:
                if isinstance(value, Pair):
                    # let x = (e1, e2): the parts get names, so that a later
                    # `let (p, q) = x` can use them (and see the backpropagator).
                    parts = []
                    for part in (value.first, value.second):
                        if isinstance(part, Var):
                            parts.append(part.name)
                        else:
                            name = self.names.fresh(binding.name.rstrip("0123456789") or "v")
                            out.append(_Binding(name, None, part, binding.node))
                            parts.append(name)
                    pairs[binding.name] = (parts[0], parts[1])
                    value = attrs.evolve(value, first=Var(parts[0], span=value.first.span),
                                         second=Var(parts[1], span=value.second.span))
                out.append(_Binding(binding.name, None, value, binding.node))
                continue
            if isinstance(value, Pair):
                for name, part in ((binding.name, value.first), (binding.second, value.second)):
                    if name == "_":
                        name = self.names.fresh("v")
                    if isinstance(part, Var):
                        aliases[name] = part.name
                    else:
                        out.append(_Binding(name, None, part, binding.node))
                continue
            if isinstance(value, Var) and value.name in pairs:
                for name, part in zip((binding.name, binding.second), pairs[value.name]):
                    if name != "_":
                        aliases[name] = part
                continue
            if isinstance(value, Var) and value.name in taken_apart:
                # Taken apart again (each use of a variable does it in ←D): the same parts.
                for name, part in zip((binding.name, binding.second), taken_apart[value.name]):
                    if name != "_":
                        aliases[name] = part
                continue
            if isinstance(value, Var) and "_" not in (binding.name, binding.second):
                taken_apart[value.name] = (binding.name, binding.second)
            out.append(_Binding(binding.name, binding.second, value, binding.node))
        final = yield self.term(_renamed(final, aliases))
        final = self.named_parts(final, out)
        return _rebuild(self.fused(_without_dead_pairs(out, final), final), final)

    def named_parts(self, t: Term, spine: list[_Binding]) -> Term:
        """``t``, a region's end, with the parts of the pairs it builds bound by ``let``s
        appended to ``spine`` (in evaluation order), so that a backpropagator it returns is
        a binding of the region, into which the others can be fused."""
        if not isinstance(t, Pair):
            return t
        parts = []
        for part in (t.first, t.second):
            if isinstance(part, Pair):
                parts.append(self.named_parts(part, spine))
            elif isinstance(part, Var):
                parts.append(part)
            else:
                name = self.names.fresh("v")
                spine.append(_Binding(name, None, part, part))
                parts.append(Var(name, span=part.span))
        return attrs.evolve(t, first=parts[0], second=parts[1])

    def flatten(self, t: Term, spine: list[_Binding]):
        """Appends the bindings of ``t``'s spine to ``spine`` (a ``let`` in the value of a
        ``let`` comes first: names are apart, so nothing is captured); returns its end."""
        while isinstance(t, (Let, LetPair)):
            value = yield self.flatten(t.value, spine)
            if isinstance(t, Let):
                spine.append(_Binding(t.name, None, value, t))
            else:
                spine.append(_Binding(t.first, t.second, value, t))
            t = t.body
        return t

    # ---- fusing the backpropagators of one region
    def fused(self, spine: list[_Binding], final: Term) -> list[_Binding]:
        """``spine`` with each backpropagator used only by one other backpropagator of the
        spine (and nowhere else) moved into it, latest first."""
        bodies: dict[int, _Linear] = {}
        defined_at: dict[str, int] = {}
        for index, binding in enumerate(spine):
            if binding.second is None and isinstance(binding.value, LinLam):
                normal = _normal_form(binding.value)
                if normal is not None:
                    bodies[index] = normal
                    defined_at[binding.name] = index
        if not bodies:
            return spine
        # Every occurrence of a fusable name, then those that are heads of sends.
        occurrences: dict[str, int] = {}
        for value in [*(binding.value for binding in spine), final]:
            for node in walk(value):
                if isinstance(node, Var) and node.name in defined_at:
                    occurrences[node.name] = occurrences.get(node.name, 0) + 1
        users: dict[str, dict[int, int]] = {}
        for index, normal in bodies.items():
            for head, args in normal.sends.items():
                if head in defined_at:
                    users.setdefault(head, {})[index] = len(args)
        removed: set[int] = set()
        for index in sorted(bodies, reverse=True):
            name = spine[index].name
            using = users.get(name, {})
            if len(using) != 1:
                continue
            (user, count), = using.items()
            if occurrences.get(name, 0) != count:
                continue  # also used outside the sends of its one user: it escapes
            self.move(bodies[index], bodies[user], name)
            for head in bodies[index].sends:
                if head in defined_at:
                    sent = users[head].pop(index)
                    users[head][user] = users[head].get(user, 0) + sent
            removed.add(index)
        result = []
        for index, binding in enumerate(spine):
            if index in removed:
                continue
            if index in bodies:
                binding = attrs.evolve(binding, value=_linear_term(bodies[index]))
            result.append(binding)
        return result

    @staticmethod
    def move(body: _Linear, user: _Linear, name: str) -> None:
        """Puts ``body`` (the backpropagator ``name``) into ``user``, which sends to it: what
        it sends is summed into ``body``'s parameter, then ``body`` runs."""
        args = user.sends.pop(name)
        user.lets.append(_Binding(body.param, None, _sum(args), None))
        user.lets.extend(body.lets)
        for head, sent in body.sends.items():
            user.sends.setdefault(head, []).extend(sent)


def _normal_form(lam: LinLam) -> _Linear | None:
    """The body of ``lam`` as ``let``s then sends, or None if it is not a tree of ``<+>``,
    ``zero``, ``let`` and applications of variables (names are apart, so ``let``s hoist)."""
    lets: list[_Binding] = []
    sends: dict[str, list[Term]] = {}
    work = [lam.body]
    while work:
        t = work.pop()
        if isinstance(t, Zero):
            continue
        if isinstance(t, Plus):
            work.append(t.right)
            work.append(t.left)
        elif isinstance(t, Let):
            lets.append(_Binding(t.name, None, t.value, t))
            work.append(t.body)
        elif isinstance(t, LetPair):
            lets.append(_Binding(t.first, t.second, t.value, t))
            work.append(t.body)
        elif isinstance(t, App) and isinstance(t.fn, Var):
            sends.setdefault(t.fn.name, []).append(_without_unit(t.arg))
        else:
            return None
    return _Linear(lam.param, lets, sends, lam.span)


def _without_unit(t: Term) -> Term:
    """``t`` without the unit operand of its operation, by the laws of the primitive table
    (``1 * e`` is ``e``, exactly): ←D scales every send by a partial, often the constant 1,
    and a fused body then binds the adjoint itself, which costs nothing."""
    while isinstance(t, Prim) and len(t.args) == 2:
        entry = PRIMITIVES.get(t.op)
        laws = entry.laws if entry is not None else None
        if laws is None:
            break
        x, y = t.args
        if laws.left_unit is not None and isinstance(x, Const) and x.value == laws.left_unit:
            t = y
        elif laws.right_unit is not None and isinstance(y, Const) and y.value == laws.right_unit:
            t = x
        else:
            break
    return t


def _sum(args: list[Term]) -> Term:
    """``u1 + ... + uk``, left to right as the backward phase adds them, except that the
    negated terms (``-1 * e``, which ←D sends for the right operand of ``-``) come last, as
    subtractions: ``u + -1 * e`` is ``u - e`` exactly, one operation fewer."""
    positive: list[Term] = []
    negated: list[Term] = []
    for arg in args:
        inner = _negated(arg)
        if inner is None:
            positive.append(arg)
        else:
            negated.append(inner)
    if not positive:
        positive, negated = [args[0]], negated[1:]
    total = positive[0]
    for arg in positive[1:]:
        total = ADD.applied(total, arg)
    for arg in negated:
        total = SUB.applied(total, arg)
    return total


def _negated(t: Term) -> Term | None:
    """``e`` when ``t`` is ``n * e`` or ``e * n`` for the negating constant ``n`` of the
    primitive table's laws (``-1 * e``; ``-1`` may be the literal or ``-`` applied to
    ``1``, as the table's partials parse), else None."""
    if not (isinstance(t, Prim) and len(t.args) == 2):
        return None
    entry = PRIMITIVES.get(t.op)
    laws = entry.laws if entry is not None else None
    if laws is None or laws.negating is None:
        return None
    x, y = t.args
    if _constant(x) == laws.negating:
        return y
    if _constant(y) == laws.negating:
        return x
    return None


def _constant(t: Term) -> float | None:
    """The value of a literal, or of ``-`` applied to one."""
    if isinstance(t, Const):
        return t.value
    if isinstance(t, Prim) and t.op == NEG.name and isinstance(t.args[0], Const):
        return -t.args[0].value
    return None


def _linear_term(normal: _Linear) -> LinLam:
    """The ``\\a -o e`` of a normal form: its ``let``s around one send per head."""
    body: Term | None = None
    for head, args in reversed(list(normal.sends.items())):
        send = App(Var(head), _sum(args))
        body = send if body is None else Plus(send, body)
    return LinLam(normal.param, _rebuild(normal.lets, body or Zero()), span=normal.span)


def _rebuild(spine: list[_Binding], final: Term) -> Term:
    """``let``s of ``spine`` around ``final``, innermost last, without recursion."""
    t = final
    for binding in reversed(spine):
        span = getattr(binding.node, "span", None)
        if binding.second is None:
            t = Let(binding.name, binding.value, t, span=span)
        else:
            t = LetPair(binding.name, binding.second, binding.value, t, span=span)
    return t


def _without_dead_pairs(spine: list[_Binding], final: Term) -> list[_Binding]:
    """``spine`` without the bindings of pairs of variables that nothing uses (left by
    taking pairs apart), which would otherwise count as uses of backpropagators."""
    used: dict[str, int] = {}
    for t in [*(b.value for b in spine), final]:
        for node in walk(t):
            if isinstance(node, Var):
                used[node.name] = used.get(node.name, 0) + 1
    kept: list[_Binding] = []
    for binding in reversed(spine):
        value = binding.value
        if (binding.second is None and isinstance(value, Pair) and isinstance(value.first, Var)
                and isinstance(value.second, Var) and not used.get(binding.name)):
            for part in (value.first, value.second):
                used[part.name] -= 1
            continue
        kept.append(binding)
    kept.reverse()
    return kept


def _renamed(t: Term, aliases: dict[str, str]) -> Term:
    """``t`` with each variable named in ``aliases`` replaced (names are apart, so no
    binder can capture the replacement)."""
    if not aliases:
        return t
    return run(_rename(t, aliases))


def _rename(t: Term, aliases: dict[str, str]):
    if isinstance(t, Var):
        new = aliases.get(t.name)
        return t if new is None else attrs.evolve(t, name=new)
    kids = children(t)
    if not kids:
        return t
    new_kids = []
    for child in kids:
        new_kids.append((yield _rename(child, aliases)))
    return with_children(t, new_kids)
