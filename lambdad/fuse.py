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
differently).  The walk that finds the regions renames every binder it meets to a fresh
name (one pass over the term), so moving a body or flattening ``let x = (let y = e1 in
e2) in e3`` into ``let y = e1 in let x = e2 in e3`` never captures a name.  No
recursion: everything runs on :func:`lambdad.iterate.run`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Set as AbstractSet
from types import GeneratorType

import attrs

from .backward import backward_term
from .errors import DerivativeSpan, Span
from .iterate import run
from .primitives import ADD, MUL, NEG, PRIMITIVES, REAL_EXPRESSION_KINDS, SUB
from .rules import NameSupply
from .spines import Binding as _Binding
from .spines import Linear as _Linear
from .spines import normal_form as _normal_form
from .spines import rebuild as _rebuild
from .spines import without_unit as _without_unit
from .syntax import (
    Annot,
    App,
    BoolLit,
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
    names_in,
    rename_binders,
    walk,
    with_children,
)

__all__ = ["fuse", "fused_backward_term"]


def fused_backward_term(term: Term, constants: AbstractSet[str] = frozenset()) -> Term:
    """The fused ←D of the source term ``term``: what the ``fused`` strategy runs and
    ``show --reverse --fused`` prints.  One name supply serves both passes: it knows every
    name of ←D's output (the source's and those ←D made), so fusion need not collect them
    again.  ←D's output is not kept: the walk lets go of each part once it is fused.
    ``constants`` are as for :func:`~lambdad.backward.backward_term`."""
    term_names = names_in(term)
    names = NameSupply(term_names)
    return run(_Fuser(names).term(backward_term(term, names, term_names, constants)))


def fuse(term: Term, names: NameSupply | None = None) -> Term:
    """``term`` (a target term, such as ←D of a λ-term) with the backpropagators of each
    straight-line region fused as the module docstring describes; the same meaning and
    type.  ``names`` supplies fresh names (by default one avoiding every name of
    ``term``).  Never fails on a well-typed target term."""
    if names is None:
        names = NameSupply.for_terms(term)
    return run(_Fuser(names).term(term))


class _Region:
    """What the walk of one region gathers: its bindings, in order (``out``); the names
    bound to pairs and the variables taken apart, each to the names of its parts; and the
    name of each variable occurrence in its bindings' values and its end (``names``; those
    walked but then left out of the region are also in ``dropped``), which fusion counts."""

    __slots__ = ("out", "pairs", "taken_apart", "names", "dropped")

    def __init__(self) -> None:
        self.out: list[_Binding] = []
        self.pairs: dict[str, tuple[str, str]] = {}
        self.taken_apart: dict[str, tuple[str, str]] = {}
        self.names: list[str] = []
        self.dropped: list[str] = []


_MISSING = object()


class _Fuser:
    """Fuses the backpropagators of every straight-line region of a term, renaming every
    binder it meets to a fresh name on the way (one walk)."""

    def __init__(self, names: NameSupply):
        self.names = names
        # What each name in scope stands for now: its fresh name, or the name of the
        # part of a pair it was bound to (an alias); with an undo log for leaving scopes.
        self.current: dict[str, str] = {}
        self.log: list[tuple[str, object]] = []
        # The fresh names bound to literals (`r` or `-r`), which their uses are replaced by.
        self.constants: dict[str, Term] = {}

    # ---- scopes
    def fresh(self, name: str) -> str:
        return self.names.fresh(name.rstrip("0123456789") or "v")

    def bind(self, name: str, new: str) -> None:
        """``name`` stands for ``new`` until the scope entered last is left."""
        if name == "_":
            return
        self.log.append((name, self.current.get(name, _MISSING)))
        self.current[name] = new

    def leave(self, mark: int) -> None:
        """Undoes the bindings made since the log had ``mark`` entries."""
        log, current = self.log, self.current
        while len(log) > mark:
            name, previous = log.pop()
            if previous is _MISSING:
                del current[name]
            else:
                current[name] = previous

    # ---- the walk: regions are function bodies, branches and the whole term
    def var(self, t: Var) -> Term:
        """The variable ``t`` renamed (or the literal it is bound to)."""
        new = self.current.get(t.name)
        if new is None:
            return t
        constant = self.constants.get(new)
        if constant is not None:
            return constant
        return Var(new, span=t.span)

    def term(self, t: Term, names: list[str] | None = None):
        """``t`` renamed apart, with every region inside it fused (a spine of ``let``s is
        one wherever it occurs; so are function bodies and branches): the result itself
        for a leaf, else a step for :func:`run` giving it.  The name of each variable
        occurrence of the result is appended to ``names``, if given."""
        kind = type(t)
        if kind is Var:
            t = self.var(t)
            if names is not None and t.__class__ is Var:
                names.append(t.name)
            return t
        if kind is Const:
            return t
        return self.expression(t, names)

    def expression(self, t: Term, names: list[str] | None = None):
        """The walk of :meth:`term` for a compound ``t``.  The constructs ←D makes most of
        (applications of primitives and functions, pairs, sums, linear abstractions) are
        walked with an explicit stack, so that a whole expression of them is one step of
        :func:`run` rather than one generator per node; the others (regions, functions,
        branches, ...) are yielded, each a step of its own.  The variables counted into
        ``names`` are those it renames (:meth:`prim` keeps every variable of its operands:
        it folds literals only) and those of what a step it yields returns."""
        done: list[Term] = []  # the walked sub-terms, the last of them on top
        # Terms to walk, and tuples saying how to build a node from the top of `done`
        # once its children are walked: (Prim, op, arity, span), (App/Pair/Plus, span),
        # (LinLam, param, span, mark of the scope to leave).
        work: list = [t]
        del t  # (the walk lets go of each part once it is walked)
        renamed, constants = self.current.get, self.constants.get  # (what var() reads)
        # (Without names to count into, a list to drop.)
        note = (names if names is not None else []).append
        while work:
            item = work.pop()
            kind = type(item)
            if kind is Var:  # (var(), inline: most nodes are variables)
                new = renamed(item.name)
                if new is None:
                    done.append(item)
                    note(item.name)
                else:
                    constant = constants(new)
                    if constant is None:
                        done.append(Var(new, span=item.span))
                        note(new)
                    else:
                        done.append(constant)
            elif kind is tuple:
                built = item[0]
                if built is Prim:
                    cut = len(done) - item[2]
                    args = tuple(done[cut:])
                    del done[cut:]
                    done.append(self.prim(item[1], args, item[3]))
                elif built is LinLam:
                    body = done.pop()
                    self.leave(item[3])
                    done.append(LinLam(item[1], body, span=item[2]))
                elif built is Pair:
                    right = done.pop()
                    done[-1] = Pair(done[-1], right, item[2], span=item[1])
                else:
                    right = done.pop()
                    done[-1] = built(done[-1], right, span=item[1])
            elif kind is Prim:
                args = []
                for arg in item.args:  # (most arguments are leaves, walked at once)
                    arg_kind = type(arg)
                    if arg_kind is Var:  # (var(), inline)
                        new = renamed(arg.name)
                        if new is not None:
                            constant = constants(new)
                            arg = Var(new, span=arg.span) if constant is None else constant
                        args.append(arg)
                    elif arg_kind is Const:
                        args.append(arg)
                    else:
                        work.append((Prim, item.op, len(item.args), item.span))
                        work.extend(reversed(item.args))
                        break
                else:
                    for arg in args:
                        if arg.__class__ is Var:
                            note(arg.name)
                    done.append(self.prim(item.op, tuple(args), item.span))
            elif kind is Const:
                done.append(item)
            elif kind is App:
                work.append((App, item.span))
                work.append(item.arg)
                work.append(item.fn)
            elif kind is LinLam:
                mark = len(self.log)
                param = self.fresh(item.param) if item.param != "_" else "_"
                self.bind(item.param, param)
                work.append((LinLam, param, item.span, mark))
                work.append(item.body)
            elif kind is Pair:
                work.append((Pair, item.span, item.arity))
                work.append(item.second)
                work.append(item.first)
            elif kind is Plus:
                work.append((Plus, item.span))
                work.append(item.right)
                work.append(item.left)
            elif not children(item):  # a literal, `zero`, ...
                done.append(item)
            else:  # a step of its own, whose result's variables are then counted
                step = self.region(item) if kind is Let or kind is LetPair else self.other(item)
                item = None
                walked = yield step
                if names is not None:
                    _variables(walked, names)
                done.append(walked)
        return done[0]

    def prim(self, op: str, args: tuple[Term, ...], span: Span | None) -> Term:
        """The application of ``op`` to the walked ``args`` (of a node with ``span``)."""
        if isinstance(span, DerivativeSpan):
            span = self.derivative_span(span)
        for arg in args:
            if arg.__class__ is not Var:
                break
        else:
            if args:  # variables only: nothing to fold nor drop
                return Prim(op, args, span=span)
        return _folded(Prim(op, args, span=span))

    def other(self, t: Term):
        """The walk of :meth:`term` for the constructs :meth:`expression` does not take
        apart itself."""
        if isinstance(t, Lam):
            mark = len(self.log)
            param = self.fresh(t.param) if t.param != "_" else "_"
            self.bind(t.param, param)
            walk, t = self.region(t.body), _without_body(t)
            body = yield walk
            self.leave(mark)
            return attrs.evolve(t, param=param, body=body)
        if isinstance(t, If):
            cond = yield self.term(t.cond)
            if isinstance(cond, BoolLit):  # known when compiled: `if 2 == 0` of a partial
                return (yield self.region(t.then if cond.value else t.orelse))
            then = yield self.region(t.then)
            orelse = yield self.region(t.orelse)
            return attrs.evolve(t, cond=cond, then=then, orelse=orelse)
        kids = children(t)
        if not kids:
            return t
        bound_by_child = binders(t)
        fresh = {name: self.fresh(name) for bound in bound_by_child for name in bound
                 if name != "_"}
        new_kids = []
        for child, bound in zip(kids, bound_by_child):
            mark = len(self.log)
            for name in bound:
                if name != "_":
                    self.bind(name, fresh[name])
            new_kids.append((yield self.term(child)))
            self.leave(mark)
        return rename_binders(with_children(t, new_kids), fresh) if fresh \
            else with_children(t, new_kids)

    def derivative_span(self, span: DerivativeSpan) -> DerivativeSpan:
        """``span`` naming the variables of the source primitive's arguments and value by
        their fresh names (an error in the derivative says at which values it failed); an
        argument replaced by its literal is named by the literal's value (``0.5``)."""

        def renamed(name: str) -> str:
            new = self.current.get(name, name)
            constant = self.constants.get(new)
            return new if constant is None else repr(_constant(constant))

        return DerivativeSpan(span.file, span.line, span.col, span.end_line, span.end_col,
                              span.primitive, tuple(renamed(name) for name in span.arguments),
                              span.value and renamed(span.value))

    def region(self, t: Term):
        """The straight-line region ``t``: its spine flattened, the regions inside it
        fused, then its backpropagators fused."""
        if isinstance(t, Annot):  # `(e : A)` around a region: the annotation stays
            walk, t = self.region(t.expr), _without_body(t)
            expr = yield walk
            return attrs.evolve(t, expr=expr)
        mark = len(self.log)
        region = _Region()
        walk, t = self.spine(t, region), None  # (the spine lets go of what it walked)
        final = yield walk
        final = yield self.term(final, region.names)
        self.leave(mark)
        final = self.named_parts(final, region)
        used = Counter(region.names)
        used.subtract(region.dropped)
        return self.fused(region.out, used, final)

    def spine(self, t: Term, region: _Region):
        """Appends the bindings of ``t``'s spine to ``region``, renamed and with their values
        walked, and returns its end (not walked yet; its names are in scope).  A ``let`` in
        the value of a ``let`` comes first (its names are fresh, so nothing is captured
        when it moves out; they are in scope for that value only).  ``let (p, q) = (e1, e2)``
        and ``let (p, q) = x`` of a pair ``x`` bound or taken apart before bind ``p`` and
        ``q`` to the parts' names, so that fusion sees the backpropagators."""
        # The lets whose value's spine is being walked, innermost last, each with the
        # mark of the scope its value's names are bound in.
        outer: list[tuple[Let | LetPair, int]] = []
        while True:
            kind = type(t)
            if kind is Let or kind is LetPair:
                value = t.value
                if type(value) is Let or type(value) is LetPair:
                    outer.append((t, len(self.log)))
                    t = value
                    continue
                value = self.term(value, region.names)
            elif outer:  # t ends the spine of the value of the innermost of `outer`
                value = self.term(t, region.names)
                if value.__class__ is GeneratorType:
                    value = yield value
                t, mark = outer.pop()
                kind = type(t)
                self.leave(mark)
            else:
                return t
            if value.__class__ is GeneratorType:  # (a leaf is walked at once)
                value = yield value
            if kind is Let:
                self.let(t, value, region)
            else:
                self.let_pair(t, value, region)
            t = t.body

    def let(self, t: Let, value: Term, region: _Region) -> None:
        """Appends ``let x = value`` (of the node ``t``), ``x`` renamed."""
        name = self.fresh(t.name) if t.name != "_" else "_"
        out = region.out
        if isinstance(value, Pair):
            # let x = (e1, e2): the parts get names, so that a later `let (p, q) = x` can
            # use them (and see the backpropagator).
            parts = []
            for part in (value.first, value.second):
                if isinstance(part, Var):
                    parts.append(part.name)
                else:
                    part_name = self.fresh(t.name)
                    out.append(_Binding(part_name, None, part, t.span))
                    parts.append(part_name)
                    region.names.append(part_name)  # (the pair's part is now a variable)
                    if _constant(part) is not None:
                        self.constants[part_name] = part
            region.pairs[name] = (parts[0], parts[1])
            value = attrs.evolve(value, first=Var(parts[0], span=value.first.span),
                                 second=Var(parts[1], span=value.second.span))
        out.append(_Binding(name, None, value, t.span))
        self.bind(t.name, name)
        if _constant(value) is not None:
            self.constants[name] = value

    def let_pair(self, t: LetPair, value: Term, region: _Region) -> None:
        """Appends ``let (x, y) = value`` (of the node ``t``), or binds ``x`` and ``y`` to
        the parts of the pair ``value`` is known to be."""
        out = region.out
        if isinstance(value, Pair):
            for name, part in ((t.first, value.first), (t.second, value.second)):
                if isinstance(part, Var):
                    self.bind(name, part.name)
                    region.dropped.append(part.name)
                else:
                    new = self.fresh(name if name != "_" else "v")
                    out.append(_Binding(new, None, part, t.span))
                    self.bind(name, new)
                    if _constant(part) is not None:
                        self.constants[new] = part
            return
        known = None
        if isinstance(value, Var):
            known = region.pairs.get(value.name) or region.taken_apart.get(value.name)
        if known is not None:
            # Taken apart again (each use of a variable does it in ←D): the same parts.
            for name, part in zip((t.first, t.second), known):
                self.bind(name, part)
            region.dropped.append(value.name)
            return
        first = self.fresh(t.first) if t.first != "_" else "_"
        second = self.fresh(t.second) if t.second != "_" else "_"
        if isinstance(value, Var) and "_" not in (first, second):
            region.taken_apart[value.name] = (first, second)
        out.append(_Binding(first, second, value, t.span, t.arity))
        self.bind(t.first, first)
        self.bind(t.second, second)

    def named_parts(self, t: Term, region: _Region) -> Term:
        """``t``, a region's end, with the parts of the pairs it builds bound by ``let``s
        appended to ``region`` (in evaluation order), so that a backpropagator it returns
        is a binding of the region, into which the others can be fused."""
        if not isinstance(t, Pair):
            return t
        parts = []
        for part in (t.first, t.second):
            if isinstance(part, Pair):
                parts.append(self.named_parts(part, region))
            elif isinstance(part, Var):
                parts.append(part)
            else:
                name = self.names.fresh("v")
                region.out.append(_Binding(name, None, part, part.span))
                parts.append(Var(name, span=part.span))
                region.names.append(name)
        return attrs.evolve(t, first=parts[0], second=parts[1])

    # ---- fusing the backpropagators of one region
    def fused(self, spine: list[_Binding], used: Counter[str], final: Term) -> Term:
        """The ``let``s of ``spine`` around ``final`` (a region's end), with each
        backpropagator used only by one other backpropagator of the spine (and nowhere else)
        moved into it, latest first.  Left out: the bindings of pairs of variables that
        nothing uses (left by taking pairs apart), which would otherwise count as uses of
        backpropagators, and those of literals and of ``\\a -o zero`` that nothing uses
        (their uses were replaced, or fused away).  ``used`` counts the occurrences of each
        name in the values of ``spine`` and ``final``.

        One pass from the end of the spine decides all of it: whatever decides the fate of
        a binding (what uses it, what is moved into it) comes after it."""
        kept: list[tuple[_Binding, _Linear | None]] = []  # from the end, with normal forms
        bodies: dict[int, _Linear] = {}  # the kept backpropagators' normal forms, by index
        # For each name, the backpropagators (by index) sending to it, with how many terms.
        users: dict[str, dict[int, int]] = {}
        for index in range(len(spine) - 1, -1, -1):
            binding = spine[index]
            if binding.second is not None:
                kept.append((binding, None))
                continue
            name, value = binding.name, binding.value
            kind = value.__class__
            if not used.get(name):
                if kind is Pair and value.first.__class__ is Var \
                        and value.second.__class__ is Var:
                    used[value.first.name] -= 1
                    used[value.second.name] -= 1
                    continue
                if _constant(value) is not None \
                        or (kind is LinLam and value.body.__class__ is Zero):
                    continue
            normal = _normal_form(value) if kind is LinLam else None
            if normal is None:
                kept.append((binding, None))
                continue
            using = users.get(name)
            if using is not None and len(using) == 1:
                (user, count), = using.items()
                if used.get(name, 0) == count:  # (else also used elsewhere: it escapes)
                    self.move(normal, bodies[user], name)
                    for head, args in normal.sends.items():  # now sent by its user
                        sending = users.setdefault(head, {})
                        sending[user] = sending.get(user, 0) + len(args)
                    continue
            for head, args in normal.sends.items():
                users.setdefault(head, {})[index] = len(args)
            bodies[index] = normal
            kept.append((binding, normal))
        t = final
        for binding, normal in kept:
            value = binding.value if normal is None else _linear_term(normal)
            if binding.second is None:
                t = Let(binding.name, value, t, span=binding.span)
            else:
                t = LetPair(binding.name, binding.second, value, t, binding.arity,
                            span=binding.span)
        return t

    @staticmethod
    def move(body: _Linear, user: _Linear, name: str) -> None:
        """Puts ``body`` (the backpropagator ``name``) into ``user``, which sends to it: what
        it sends is summed into ``body``'s parameter, then ``body`` runs."""
        args = user.sends.pop(name)
        user.lets.append(_Binding(body.param, None, _sum(args), None))
        user.lets.extend(body.lets)
        for head, sent in body.sends.items():
            user.sends.setdefault(head, []).extend(sent)


def _without_body(t: Lam | Annot) -> Lam | Annot:
    """``t`` without its sub-term (a placeholder instead), to be rebuilt around the fused
    one: the walk holds no node whose sub-term it is walking, so what it has fused is
    freed as it goes (on a long program, ←D's output and its fused form need not exist
    whole at once)."""
    if isinstance(t, Lam):
        return attrs.evolve(t, body=_PLACEHOLDER)
    return attrs.evolve(t, expr=_PLACEHOLDER)


_PLACEHOLDER = Zero()


def _folded(t: Prim) -> Term:
    """``t`` evaluated when its arguments are literals and its value is a finite real or
    a truth value (the same operation on the same reals gives the same value when the
    program is compiled as when it runs), else without a unit operand (``x ^ 1`` is
    ``x``, by the table's laws); else ``t``.  ←D instantiates partials such as
    ``if y == 0 then 0 else y * x ^ (y - 1)`` at a literal exponent ``y``: this makes
    them ``2 * x``."""
    entry = PRIMITIVES.get(t.op)
    if entry is None or entry.kind not in REAL_EXPRESSION_KINDS or entry.evaluate is None:
        return t
    for arg in t.args:
        if arg.__class__ is Var:  # (most applications: not every argument is a literal)
            return _without_unit(t)
    values = [arg.value if isinstance(arg, BoolLit) else _constant(arg) for arg in t.args]
    if None not in values:
        value = entry.value_at(*values)
        if value is None:
            return t
        if type(value) is bool:
            return BoolLit(value, span=t.span)
        if math.copysign(1.0, value) < 0:  # written `-r`, as the parser reads it back
            return NEG.applied(Const(-value, span=t.span), span=t.span)
        return Const(value, span=t.span)
    return _without_unit(t)


def _sum(args: list[Term]) -> Term:
    """``u1 + ... + uk``, left to right as the backward phase adds them, except that a term
    sent twice is doubled (``x_ (x * a) <+> x_ (x * a)`` of ``x * x`` sends ``2 * (x * a)``:
    ``u + u`` is ``2 * u`` exactly, and ``u`` is computed once), and the negated terms
    (``-1 * e``, which ←D sends for the right operand of ``-``) come last, as subtractions:
    ``u + -1 * e`` is ``u - e`` exactly, one operation fewer."""
    if len(args) == 1:  # (most sums: the one term, whatever it is)
        return args[0]
    if any(map(_on_arrays, args)):
        # cotangents of arrays: added by the array entries (which add reals too), a term
        # sent twice doubled by the array product (`x_ (a * y) <+> y_ (a * x)` of `dot r r`)
        args = _doubled(args, MUL.on_arrays)
        total = args[0]
        for arg in args[1:]:
            total = Prim(ADD.on_arrays, (total, arg), span=arg.span)
        return total
    args = _doubled(args)
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


def _on_arrays(term: Term) -> bool:
    """Whether ``term`` applies an array primitive (so its value may be an array)."""
    return any(isinstance(node, Prim) and PRIMITIVES[node.op].kind in ("elementwise", "array")
               for node in walk(term))


# Up to this many terms sent to one backpropagator are compared pairwise (see _doubled).
_PAIRWISE_MAX = 8


def _doubled(args: list[Term], product: str = MUL.name) -> list[Term]:
    """``args`` with each pair of equal terms ``u``, ``u`` made one ``2 * u`` (in the place
    of the first), the product by the primitive ``product`` (the array entry's, for
    cotangents of arrays); terms that are variables are left as they are (``a + a`` costs
    what ``2 * a`` does)."""
    out: list[Term | None] = []
    if len(args) > _PAIRWISE_MAX:
        unpaired: dict[Term, int] = {}  # a term seen an odd number of times -> its place
        for arg in args:
            if isinstance(arg, Var):
                out.append(arg)
                continue
            place = unpaired.pop(arg, None)
            if place is None:
                unpaired[arg] = len(out)
                out.append(arg)
            else:
                out[place] = Prim(product, (Const(2.0, span=arg.span), arg), span=arg.span)
        return out
    # A few terms are compared pairwise: equality stops at the first difference, where
    # hashing walks a whole term.
    places: list[int] = []  # the places in out of the terms seen an odd number of times
    for arg in args:
        if isinstance(arg, Var):
            out.append(arg)
            continue
        for index, place in enumerate(places):
            if _equal(out[place], arg):
                del places[index]
                out[place] = Prim(product, (Const(2.0, span=arg.span), arg), span=arg.span)
                break
        else:
            places.append(len(out))
            out.append(arg)
    return out


def _equal(a: Term, b: Term) -> bool:
    """``a == b`` (equal terms, spans aside), reading variables and primitive applications
    (most of what ←D sends) directly."""
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        kind = x.__class__
        if kind is not y.__class__:
            return False
        if kind is Var:
            if x.name != y.name or x.name.__class__ is not y.name.__class__:
                return False
        elif kind is Prim:
            # (an operator's name may be a str of a subclass: equal only to its own kind)
            if x.op != y.op or x.op.__class__ is not y.op.__class__ \
                    or len(x.args) != len(y.args):
                return False
            pending.extend(zip(x.args, y.args))
        elif x != y:
            return False
    return True


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


def _variables(t: Term, into: list[str]) -> None:
    """Appends the name of each variable occurrence of ``t`` to ``into`` (in no particular
    order), without recursion."""
    pending = [t]
    pop, push, extend, note = pending.pop, pending.append, pending.extend, into.append
    while pending:
        node = pop()
        kind = type(node)
        if kind is Var:
            note(node.name)
        elif kind is Prim:
            extend(node.args)
        elif kind is Const:
            continue
        elif kind is App:
            push(node.fn)
            push(node.arg)
        elif kind is LinLam:
            push(node.body)
        else:
            extend(children(node))
