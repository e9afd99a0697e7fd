"""The readable form of a transformed program (what ``lambdad show`` prints by default).

The rules of →D and ←D are literal: they multiply by zero tangents, call the backpropagator
of a constant, and nest ``let``s inside ``let`` values.  :func:`simplify` rewrites such a
term into one that computes the same values, the same derivatives and the same runtime
errors, and reads like the paper's examples::

    let (v1, v1_) = (x1 - x2, \\a -o x1_ a <+> x2_ (-a)) in
    let (v2, v2_) = (v1 ^ 2, \\a -o v1_ (2 * v1 * a)) in
    (sin v2, \\a -o v2_ (cos v2 * a))

It works in two passes, each iterative (deep terms are fine):

1. one simplifying pass, which gives every binder a unique internal name as it enters it
   (so no rewrite can capture a variable), and
   - floats ``let``s out of ``let`` values, pair components, arguments and conditions
     (``let x = (let y = e1 in e2) in e3`` becomes ``let y = e1 in let x = e2 in e3``), only
     past expressions that cannot fail, so the order of evaluation is kept;
   - propagates variables and literals bound by ``let`` (copy and constant propagation) and
     splits ``let (x, y) = (e1, e2)`` when one component is such an atom;
   - reuses the components of a pair destructured earlier (``let (x, x') = x`` once, not at
     every use of ``x``);
   - folds primitives applied to literals (with the table's own evaluation, so the result
     is bit for bit what the program would compute; a failing fold is left to fail at run
     time) and applies the exact laws of the arithmetic the rules emit: ``1 * e = e``,
     ``e + 0 = e``, ``-1 * e = -e``, ``e + (-f) = e - f``, ``e ^ 1 = e``, ...;
   - treats a product with a literal zero as zero when the other factor is built from
     primitives only — in a transformed program such a factor is a partial derivative
     multiplied by the zero tangent of a constant — and ``g 0`` in a cotangent position as
     ``zero``, ``(\\a -o zero) e`` as ``zero``, ``zero <+> e`` as ``e``;
   - reads ``\a -o g a`` as ``g`` and ``let (x, y) = p in (x, y)`` as ``p``;
   - removes a ``let`` whose variables are unused only when its value cannot fail
     (variables, literals, pairs and lambdas, primitives with an ``inline`` form); one
     that may fail stays, as ``let _ = e``;
2. binders get back readable names: the original ones wherever that captures nothing.

Nothing is duplicated: only variables and literals are ever substituted, so every shared
computation stays one ``let``.  Two things differ from IEEE arithmetic, by design: a zero
product is ``0`` even when its other factor is infinite, NaN or would leave its domain (the
derivative with respect to a constant is 0), and the sign of a zero may differ.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable

import attrs

from .iterate import run
from .primitives import NEG, PRIMITIVES
from .rules import (
    BACKPROPAGATOR,
    PROJECTIONS,
    RESERVED,
    TANGENT,
    is_zero,
    number,
    real,
)
from .syntax import (
    Annot,
    App,
    BoolLit,
    Builtin,
    Const,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    Pair,
    Plus,
    Prim,
    ReadOff,
    Seed,
    Term,
    Var,
    Zero,
    children,
    rename_binders,
    walk,
    with_children,
)

def _binder(t: Lam | LinLam, param: str, body: Term) -> Term:
    """``t`` with its parameter renamed to ``param`` and body ``body``."""
    return with_children(rename_binders(t, {t.param: param}), (body,))


_LEAVES = frozenset({Var, Const, BoolLit, Builtin, Zero})

_SEPARATOR = "%"  # internal names are `x%3`: never a source identifier


def simplify(term: Term) -> Term:
    """The readable form of ``term`` (see the module docstring): same values, derivatives
    and runtime errors.  Never fails on a well-formed term."""
    simplifier = _Simplifier()
    result = simplifier.run(term)
    return _Namer(simplifier.names.origin, simplifier.prefer).run(result)


# ---------------------------------------------------------------- unique binders


class _Renaming:
    """Gives every binder of the input a unique internal name ``x%k`` as the simplifier
    enters it (free variables keep their names), so no rewrite can capture a variable."""

    def __init__(self):
        self.origin: dict[str, str] = {}        # internal name -> name it is shown as
        self.scope: dict[str, str] = {}         # input name -> internal name in scope
        self.count = 0

    def fresh(self, shown: str) -> str:
        """A new internal name, shown as ``shown`` where possible."""
        self.count += 1
        unique = f"{shown}{_SEPARATOR}{self.count}"
        self.origin[unique] = shown
        return unique

    def enter(self, names: Iterable[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
        """Internal names for the binders ``names``, now in scope; and what to restore."""
        renamed, saved = [], []
        for name in names:
            if name == "_":
                renamed.append(name)
                continue
            saved.append((name, self.scope.get(name)))
            unique = self.fresh(name)
            self.scope[name] = unique
            renamed.append(unique)
        return renamed, saved

    def leave(self, saved: list[tuple[str, str | None]]) -> None:
        """End the scope opened by :meth:`enter`."""
        for name, previous in reversed(saved):
            if previous is None:
                del self.scope[name]
            else:
                self.scope[name] = previous


# ---------------------------------------------------------------- pass 1: simplification


@attrs.define
class _Bind:
    """One binding of a chain: ``let x = value`` (one name) or ``let (x, y) = value``."""

    names: tuple[str, ...]
    value: Term
    span: object
    arity: int = 2  # of the tuple ``let (x, y) = value`` takes apart (see LetPair)


@attrs.define
class _Chain:
    """A simplified term ``let b1 in ... let bn in tail``, kept open so that an enclosing
    term can float the bindings out of it."""

    binds: list[_Bind]
    tail: Term


def _is_atom(t: Term) -> bool:
    """Variables, literals and the zero backpropagator: what ``let`` may substitute."""
    if isinstance(t, (Var, Const, BoolLit, Builtin)):
        return True
    if isinstance(t, Seed):
        return isinstance(t.index, Const)
    if isinstance(t, LinLam):
        return isinstance(t.body, Zero)
    return number(t) is not None


def _dual(t: Pair) -> bool:
    """Whether the pair literal ``t`` has the shape of a real and its derivative: a
    backpropagator second, or both components computed by primitives (a tangent)."""
    if t.arity != 2:
        return False
    if isinstance(t.second, LinLam):
        return True
    return _primitive_only(t.first) and _primitive_only(t.second)


def _primitive_only(t: Term) -> bool:
    """Whether ``t`` is built from variables, literals, real/test/logic primitives,
    projections and conditionals only (the shape of a partial derivative)."""
    for node in walk(t):
        if isinstance(node, (Var, Const, BoolLit, If)):
            continue
        if isinstance(node, Prim):
            prim = PRIMITIVES[node.op]
            if prim.kind in ("real", "test", "logic", "elementwise", "array") \
                    or node.op in PROJECTIONS:
                continue
        return False
    return True


def _discardable(t: Term) -> bool:
    """Whether ``t`` may be dropped unevaluated: :func:`_primitive_only`, or a cotangent of
    a program transformed again (pairs and ``let``s of such terms, and backpropagators,
    whose bodies do not run when they are built)."""
    work = [t]
    while work:
        node = work.pop()
        if isinstance(node, LinLam) or isinstance(node, (Zero, Seed)):
            continue
        if isinstance(node, (Pair, Let, LetPair)):
            work.extend(children(node))
        elif not _primitive_only(node):
            return False
    return True


def _mentions(t: Term, name: str) -> bool:
    """Whether the variable ``name`` occurs in ``t``."""
    return any(isinstance(node, Var) and node.name == name for node in walk(t))


class _Simplifier:
    """The simplifying pass (see the module docstring); binders get internal names."""

    def __init__(self):
        self.names = _Renaming()
        self.origin = self.names.origin
        self.env: dict[str, Term] = {}                   # variable -> the atom it stands for
        self.uses: defaultdict[str, int] = defaultdict(int)  # occurrences in the output
        self.prefer: dict[str, str] = {}                 # variable -> preferred name
        # variables bound by a plain `let` (their names may follow the names of their uses)
        self.let_bound: set[str] = set()
        # variable -> the atoms its two components are known to be (None: unknown); entries
        # live until the enclosing closed context ends (see `closed`)
        self.pairs: dict[str, tuple[Term | None, Term | None]] = {}
        self.undo: list[list[tuple[str, tuple | None]]] = [[]]
        self.pure: dict[int, bool] = {}
        self.keep: list[Term] = []                       # keeps `pure`'s keys alive

    def run(self, term: Term) -> Term:
        """The simplified ``term``, its binders still internal names."""
        return run(self.closed(term, False))

    # ---- bookkeeping

    def base(self, name: str) -> str:
        """The name ``name`` is shown as, if nothing prevents it."""
        return self.prefer.get(name) or self.origin.get(name, name)

    def know_pair(self, name: str, components: tuple[Term | None, Term | None]) -> None:
        """Record that the pair ``name`` has these components, until the context closes."""
        self.undo[-1].append((name, self.pairs.get(name)))
        self.pairs[name] = components

    def emit(self, atom: Term, span) -> Term:
        """A fresh copy of ``atom`` for one more place in the output."""
        if isinstance(atom, Var):
            self.uses[atom.name] += 1
            return Var(atom.name, span=span)
        if isinstance(atom, Builtin):
            return Builtin(atom.name, span=span)
        return atom

    def discard(self, t: Term) -> None:
        """Forget the variable occurrences of ``t``, which leaves the output."""
        for node in walk(t):
            if isinstance(node, Var):
                self.uses[node.name] -= 1

    def cannot_fail(self, t: Term) -> bool:
        """Whether evaluating ``t`` can raise no runtime error: variables, literals, lambdas,
        pairs, lists, ``let``s and conditionals of such, primitives with an ``inline`` form."""
        known = self.pure.get(id(t))
        if known is not None:
            return known
        # post-order over the part of t not yet known
        stack: list[tuple[Term, bool]] = [(t, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in self.pure:
                continue
            if isinstance(node, (Var, Const, BoolLit, Builtin, Zero, Lam, LinLam)):
                self.remember(node, True)
                continue
            if isinstance(node, (App, ReadOff)):
                self.remember(node, False)
                continue
            kids = children(node)
            if not expanded:
                stack.append((node, True))
                stack.extend((kid, False) for kid in kids)
                continue
            ok = all(self.pure[id(kid)] for kid in kids)
            if isinstance(node, Prim) and PRIMITIVES[node.op].inline is None:
                ok = False
            self.remember(node, ok)
        return self.pure[id(t)]

    def remember(self, node: Term, value: bool) -> None:
        self.pure[id(node)] = value
        self.keep.append(node)

    # ---- contexts

    def closed(self, t: Term, cotangent: bool):
        """``t`` simplified as a whole: its bindings stay inside (a function body, a branch,
        an operand that cannot be moved).  Pairs destructured inside are forgotten after."""
        self.undo.append([])
        chain = yield self.chain(t, cotangent)
        result = self.finalize(chain)
        for name, previous in reversed(self.undo.pop()):
            if previous is None:
                del self.pairs[name]
            else:
                self.pairs[name] = previous
        return result

    def operands(self, terms: Iterable[Term], cotangent: bool, binds: list[_Bind]):
        """The simplified ``terms``, evaluated left to right: the bindings of each float
        into ``binds`` as long as every operand before it cannot fail."""
        results = []
        floating = True
        for t in terms:
            if floating:
                chain = self.leaf(t) if type(t) in _LEAVES else (yield self.chain(t, cotangent))
                binds.extend(chain.binds)
                result = chain.tail
            else:
                result = yield self.closed(t, cotangent)
            results.append(result)
            floating = floating and self.cannot_fail(result)
        return results

    # ---- the pass

    def chain(self, t: Term, cotangent: bool):
        """The simplified ``t`` as a chain of bindings and a tail; ``cotangent`` tells
        whether ``t`` has type ``d``."""
        s = t.span
        if type(t) in _LEAVES:
            return self.leaf(t)
        if isinstance(t, (Lam, LinLam)):
            (param,), saved = self.names.enter((t.param,))
            body = yield self.closed(t.body, isinstance(t, LinLam))
            self.names.leave(saved)
            if (isinstance(t, LinLam) and isinstance(body, App) and isinstance(body.fn, Var)
                    and isinstance(body.arg, Var) and body.arg.name == param
                    and body.fn.name != param):
                # \a -o g a is g: a backpropagator that only passes its cotangent on
                return _Chain([], body.fn)
            return _Chain([], _binder(t, param, body))
        if isinstance(t, Let):
            value = yield from self.operand(t.value, False)
            binds = value.binds
            (name,), saved = self.names.enter((t.name,))
            self.bind(name, value.tail, binds, s)
            body = yield from self.operand(t.body, cotangent)
            self.names.leave(saved)
            binds.extend(body.binds)
            return _Chain(binds, body.tail)
        if isinstance(t, LetPair):
            value = yield from self.operand(t.value, False)
            binds = value.binds
            (first, second), saved = self.names.enter((t.first, t.second))
            self.bind_pair(first, second, value.tail, binds, s, t.arity)
            body = yield from self.operand(t.body, cotangent)
            self.names.leave(saved)
            binds.extend(body.binds)
            return _Chain(binds, body.tail)
        if isinstance(t, If):
            binds: list[_Bind] = []
            (cond,) = yield from self.operands((t.cond,), False, binds)
            if isinstance(cond, BoolLit):
                # a literal condition: only the branch taken remains
                taken = yield self.chain(t.then if cond.value else t.orelse, cotangent)
                binds.extend(taken.binds)
                return _Chain(binds, taken.tail)
            then = yield self.closed(t.then, cotangent)
            orelse = yield self.closed(t.orelse, cotangent)
            return _Chain(binds, If(cond, then, orelse, span=s))
        if isinstance(t, Plus):
            binds = []
            left, right = yield from self.operands((t.left, t.right), True, binds)
            if isinstance(left, Zero):
                return _Chain(binds, right)
            if isinstance(right, Zero):
                return _Chain(binds, left)
            return _Chain(binds, Plus(left, right, span=s))
        if isinstance(t, App):
            binds = []
            fn, arg = yield from self.operands((t.fn, t.arg), False, binds)
            return _Chain(binds, self.application(fn, arg, cotangent, s))
        if isinstance(t, ReadOff):
            binds = []
            point = (yield from self.operands((t.point,), False, binds))[0]
            if self.cannot_fail(point):
                chain = yield self.chain(t.cotangent, True)
                binds.extend(chain.binds)
                cot = chain.tail
            else:
                cot = yield self.closed(t.cotangent, True)
            return _Chain(binds, ReadOff(point, cot, span=s))
        if isinstance(t, Annot):
            expr = yield self.chain(t.expr, cotangent)
            return _Chain(expr.binds, Annot(expr.tail, t.type, span=s))
        if isinstance(t, Pair) and t.arity > 2:
            # (e1, e2, ..., ek) keeps its rest a written (k-1)-tuple, so that it prints as
            # the k-tuple: e1 is named when the rest's bindings float out past it
            binds = []
            first = yield from self.operand(t.first, False)
            binds.extend(first.binds)
            head = first.tail
            if not self.cannot_fail(head):
                name = self.fresh("v")
                self.uses[name] += 1
                binds.append(_Bind((name,), head, s))
                self.let_bound.add(name)
                head = Var(name, span=head.span)
            rest = yield from self.operand(t.second, False)
            binds.extend(rest.binds)
            return _Chain(binds, Pair(head, rest.tail, t.arity, span=s))
        if isinstance(t, (Pair, ListLit, Prim, Seed)):
            binds = []
            kids = yield from self.operands(list(children(t)), False, binds)
            if isinstance(t, Prim):
                return _Chain(binds, self.primitive(t, kids))
            return _Chain(binds, with_children(t, kids))
        raise TypeError(f"simplify: unknown term {t!r}")

    def leaf(self, t: Term) -> _Chain:
        """A variable (substituted if it names an atom) or a literal."""
        if isinstance(t, Var):
            name = self.names.scope.get(t.name, t.name)
            atom = self.env.get(name)
            if atom is None:
                self.uses[name] += 1
                return _Chain([], Var(name, span=t.span))
            return _Chain([], self.emit(atom, t.span))
        return _Chain([], t)

    def operand(self, t: Term, cotangent: bool):
        """The chain of ``t`` (leaves without a nested generator: they are most nodes)."""
        if type(t) in _LEAVES:
            return self.leaf(t)
        return (yield self.chain(t, cotangent))

    # ---- bindings

    def bind(self, name: str, value: Term, binds: list[_Bind], span) -> None:
        """``let name = value``: substituted if ``value`` is an atom, else a binding."""
        if name == "_":
            if self.cannot_fail(value):
                self.discard(value)
            else:
                binds.append(_Bind((name,), value, span))
            return
        if _is_atom(value):
            # copy / constant propagation
            self.env[name] = value
            self.discard(value)
            if (isinstance(value, Var) and value.name in self.let_bound
                    and value.name not in self.prefer):
                # the value was named by the rules of a sub-term (`let r = ...`): show it
                # under the name the enclosing term gives it
                self.prefer[value.name] = self.base(name)
            return
        if isinstance(value, Pair) and _dual(value):
            value = self.name_components(name, value, binds, span)
        if isinstance(value, Pair) and _is_atom(value.first) and _is_atom(value.second):
            self.know_pair(name, (value.first, value.second))
        binds.append(_Bind((name,), value, span))
        self.let_bound.add(name)

    def name_components(self, name: str, value: Pair, binds: list[_Bind], span) -> Pair:
        """``let y = (e1, e2)``, a real and its derivative, as ``let (y, y') = (e1, e2) in
        let y = (y, y')``: a pair of atoms, so that destructuring ``y`` later reuses the
        components (and the pair itself disappears when nothing else uses it)."""
        suffix = BACKPROPAGATOR if isinstance(value.second, LinLam) else TANGENT
        base = self.base(name)
        atoms: list[Term] = []
        pending: list[tuple[str, Term]] = []
        for component, shown in ((value.first, base), (value.second, base + suffix)):
            if _is_atom(component):
                atoms.append(component)
                if (isinstance(component, Var) and component.name in self.let_bound
                        and component.name not in self.prefer):
                    self.prefer[component.name] = shown
                continue
            fresh = self.fresh(shown)
            self.uses[fresh] += 1
            atoms.append(Var(fresh, span=component.span))
            pending.append((fresh, component))
        if len(pending) == 2:
            names = (pending[0][0], pending[1][0])
            binds.append(_Bind(names, Pair(pending[0][1], pending[1][1], span=value.span),
                               span))
        elif pending:
            names = (pending[0][0],)
            binds.append(_Bind(names, pending[0][1], span))
        else:
            names = ()
        if len(names) == 1:
            self.let_bound.update(names)
        return Pair(atoms[0], atoms[1], span=value.span)

    def fresh(self, shown: str) -> str:
        """A new internal variable, shown as ``shown`` where possible."""
        return self.names.fresh(shown)

    def bind_pair(self, first: str, second: str, value: Term, binds: list[_Bind],
                  span, arity: int = 2) -> None:
        """``let (first, second) = value``, split when the value is a pair literal,
        reusing components already known when the value is a variable."""
        if isinstance(value, Pair):
            keep = []
            for name, component in ((first, value.first), (second, value.second)):
                if _is_atom(component) or (name == "_" and self.cannot_fail(component)):
                    self.bind(name, component, binds, span)
                else:
                    keep.append((name, component))
            if len(keep) == 2:
                binds.append(_Bind((first, second), value, span, arity))
            elif keep:
                self.bind(keep[0][0], keep[0][1], binds, span)
            return
        if isinstance(value, Var):
            known = self.pairs.get(value.name)
            wanted = [(n, c) for n, c in zip((first, second), known or (None, None))
                      if n != "_"]
            if known is not None and all(c is not None for _, c in wanted):
                # common subexpression: this pair was destructured before
                self.discard(value)
                for name, component in wanted:
                    self.env[name] = component
                return
            self.know_pair(value.name, (None if first == "_" else Var(first),
                                        None if second == "_" else Var(second)))
        binds.append(_Bind((first, second), value, span, arity))

    def finalize(self, chain: _Chain) -> Term:
        """The chain as nested ``let``s: dead bindings whose value cannot fail are dropped,
        ``let x = e in x`` is ``e``, ``let (x, y) = p in (x, y)`` is ``p``, and
        ``let x = e1 in let x' = e2`` reads as ``let (x, x') = (e1, e2)``."""
        body = chain.tail
        for bind in reversed(chain.binds):
            names = tuple(n if n == "_" or self.uses[n] > 0 else "_" for n in bind.names)
            value = bind.value
            if all(n == "_" for n in names) and self.cannot_fail(value):
                self.discard(value)
                continue
            if (len(names) == 2 and isinstance(value, Var) and isinstance(body, Pair)
                    and isinstance(body.first, Var) and isinstance(body.second, Var)
                    and (body.first.name, body.second.name) == names
                    and body.arity == bind.arity
                    and self.uses[names[0]] == self.uses[names[1]] == 1):
                # let (x, y) = p in (x, y) is p
                self.uses[names[0]] = self.uses[names[1]] = 0
                body = Var(value.name, span=value.span)
                continue
            if len(names) == 2 and isinstance(value, Pair):
                # one dead component that cannot fail: a plain let of the other
                first, second = names
                if first == "_" and self.cannot_fail(value.first):
                    self.discard(value.first)
                    names, value = (second,), value.second
                elif second == "_" and self.cannot_fail(value.second):
                    self.discard(value.second)
                    names, value = (first,), value.first
            if all(n == "_" for n in names):
                # evaluated only for the runtime errors it may raise
                body = Let("_", value, body, span=bind.span)
                continue
            if len(names) == 1:
                (name,) = names
                if isinstance(body, Var) and body.name == name and self.uses[name] == 1:
                    self.uses[name] = 0
                    body = value
                    continue
                if (isinstance(body, Let) and self.derivative_of(name, body.name)
                        and not _mentions(body.value, name)):
                    body = LetPair(name, body.name, Pair(value, body.value, span=bind.span),
                                   body.body, span=bind.span)
                    continue
                body = Let(name, value, body, span=bind.span)
            else:
                body = LetPair(names[0], names[1], value, body, bind.arity, span=bind.span)
        return body

    def derivative_of(self, primal: str, other: str) -> bool:
        """Whether ``other`` is named as the tangent or backpropagator of ``primal``."""
        return any(self.base(other) == self.base(primal) + suffix
                   for suffix in (TANGENT, BACKPROPAGATOR))

    # ---- applications and primitives

    def application(self, fn: Term, arg: Term, cotangent: bool, span) -> Term:
        """``fn arg``: ``(\\a -o zero) e`` and, in a cotangent position (where only
        backpropagators, which are linear, are applied), ``g 0`` are ``zero``."""
        if isinstance(fn, LinLam) and isinstance(fn.body, Zero) and _discardable(arg):
            self.discard(arg)
            return Zero(span=span)
        if cotangent and is_zero(arg) and isinstance(fn, (Var, LinLam)):
            self.discard(fn)
            return Zero(span=span)
        return App(fn, arg, span=span)

    def primitive(self, t: Prim, args: list[Term]) -> Term:
        """``t`` applied to the simplified ``args``: projections of known pairs, folding of
        literals, the laws of the arithmetic."""
        s = t.span
        index = PROJECTIONS.get(t.op)
        if index is not None:
            (pair,) = args
            if isinstance(pair, Pair):
                other = pair.second if index == 0 else pair.first
                if self.cannot_fail(other):
                    self.discard(other)
                    return pair.first if index == 0 else pair.second
            elif isinstance(pair, Var) and pair.name in self.pairs:
                component = self.pairs[pair.name][index]
                if component is not None:
                    self.discard(pair)
                    return self.emit(component, s)
            return Prim(t.op, tuple(args), span=s)
        folded = self.fold(t, args)
        if folded is not None:
            return folded
        return self.arithmetic(t, args)

    def fold(self, t: Prim, args: list[Term]) -> Term | None:
        """The literal ``t`` evaluates to when its arguments are literals (computed by the
        table's own evaluation), or None."""
        prim = PRIMITIVES[t.op]
        if prim is NEG and isinstance(args[0], Const):
            return Prim(t.op, tuple(args), span=t.span)   # already the literal -c
        values = []
        for arg in args:
            value = arg.value if isinstance(arg, BoolLit) else number(arg)
            if value is None:
                return None
            values.append(value)
        result = prim.value_at(*values)  # None: a failing fold is left to fail at run time
        if result is None:
            return None
        if type(result) is bool:
            return BoolLit(result, span=t.span)
        return real(result, t.span)

    def arithmetic(self, t: Prim, args: list[Term]) -> Term:
        """``t`` on the simplified ``args``, rewritten by the laws its table entry declares
        (units, zeros, signs: :class:`primitives.Laws`)."""
        laws, s = PRIMITIVES[t.op].laws, t.span
        if laws is None:
            return Prim(t.op, tuple(args), span=s)
        if laws.involution:
            (x,) = args
            inner = _application_of(t.op, x)
            return inner if inner is not None else Prim(t.op, (x,), span=s)
        x, y = args
        nx, ny = number(x), number(y)
        if _is(laws.absorbing, nx) and _primitive_only(y):
            self.discard(y)
            return Const(laws.absorbing, span=s)
        if _is(laws.absorbing, ny) and _primitive_only(x):
            self.discard(x)
            return Const(laws.absorbing, span=s)
        if _is(laws.left_unit, nx):
            return y
        if _is(laws.right_unit, ny):
            return x
        if _is(laws.negating, nx) or _is(laws.left_negating, nx):
            return self.negate(y, s)
        if _is(laws.negating, ny):
            return self.negate(x, s)
        if laws.of_negation is not None and _negation(y) is not None and ny is None:
            return Prim(laws.of_negation, (x, _negation(y)), span=s)
        return Prim(t.op, (x, y), span=s)

    def negate(self, x: Term, span) -> Term:
        """``-x``, without a double negation."""
        inner = _negation(x)
        if inner is not None:
            return inner
        value = number(x)
        if value is not None:
            return real(-value, span)
        return NEG.applied(x, span=span)


def _is(law: float | None, value: float | None) -> bool:
    """Whether the literal ``value`` is the constant of ``law`` (both present)."""
    return law is not None and value is not None and value == law


def _application_of(op: str, t: Term) -> Term | None:
    """``e`` when ``t`` is ``op e``, else None."""
    if isinstance(t, Prim) and t.op == op and len(t.args) == 1:
        return t.args[0]
    return None


def _negation(t: Term) -> Term | None:
    """``e`` when ``t`` is ``-e``, else None."""
    return _application_of(NEG.name, t)


# ---------------------------------------------------------------- pass 2: readable names


class _Namer:
    """Gives every binder a readable name: its preferred or original one, unless that would
    capture a variable its scope mentions (then ``x1``, ``x2``, ...)."""

    def __init__(self, origin: dict[str, str], prefer: dict[str, str]):
        self.origin = origin
        self.prefer = prefer
        self.shown: dict[str, str] = {}
        self.visible: dict[str, str] = {}        # shown name -> variable it denotes
        self.sizes: list[int] = []
        self.occurrences: defaultdict[str, list[int]] = defaultdict(list)
        self.index = 0

    def run(self, term: Term) -> Term:
        """``term`` with every internal name replaced by a readable one."""
        self.survey(term)
        for name in self.occurrences:
            if name not in self.origin:
                self.visible[name] = name       # free variables keep their names
        return run(self.go(term))

    def survey(self, term: Term) -> None:
        """Pre-order positions: the size of each subtree, and where each variable occurs."""
        order: list[Term] = []
        stack = [term]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(reversed(children(node)))
        self.sizes = [0] * len(order)
        done: list[int] = []
        for i in range(len(order) - 1, -1, -1):
            size = 1
            for _ in children(order[i]):
                size += done.pop()
            done.append(size)
            self.sizes[i] = size
        for i, node in enumerate(order):
            if isinstance(node, Var):
                self.occurrences[node.name].append(i)

    def mentioned(self, name: str, start: int) -> bool:
        """Whether ``name`` occurs in the subtree at pre-order position ``start``."""
        positions = self.occurrences.get(name, ())
        k = bisect_left(positions, start)
        return k < len(positions) and positions[k] < start + self.sizes[start]

    def choose(self, name: str, scope: int, taken: tuple[str, ...] = (),
               first: str | None = None) -> str:
        """The shown name of the binder ``name`` whose scope is the subtree at ``scope``:
        ``first`` or its own name, else a numbered variant, never in ``taken``."""
        if name == "_":
            return name
        base = self.prefer.get(name) or self.origin.get(name, name)
        candidates = [base] if first is None else [first, base]
        for candidate in _candidates(candidates):
            if candidate in RESERVED or candidate in taken:
                continue
            holder = self.visible.get(candidate)
            if holder is None or not self.mentioned(holder, scope):
                self.shown[name] = candidate
                return candidate
        raise AssertionError("unreachable")

    def enter(self, names: tuple[str, ...], shown: tuple[str, ...]):
        """Make the binders ``names`` visible as ``shown``; returns what to restore."""
        saved = []
        for name, display in zip(names, shown):
            if name == "_":
                continue
            saved.append((display, self.visible.get(display)))
            self.visible[display] = name
        return saved

    def leave(self, saved) -> None:
        for display, previous in reversed(saved):
            if previous is None:
                del self.visible[display]
            else:
                self.visible[display] = previous

    def go(self, t: Term):
        """``t`` with readable names; ``self.index`` is its pre-order position."""
        i = self.index
        self.index += 1
        if isinstance(t, Var):
            return Var(self.shown.get(t.name, t.name), span=t.span)
        if isinstance(t, (Lam, LinLam)):
            param = self.choose(t.param, i + 1)
            saved = self.enter((t.param,), (param,))
            body = yield self.go(t.body)
            self.leave(saved)
            return _binder(t, param, body)
        if isinstance(t, (Let, LetPair)):
            value = yield self.go(t.value)
            scope = i + 1 + self.sizes[i + 1]
            if isinstance(t, Let):
                name = self.choose(t.name, scope)
                saved = self.enter((t.name,), (name,))
                body = yield self.go(t.body)
                self.leave(saved)
                return Let(name, value, body, span=t.span)
            first = self.choose(t.first, scope)
            derived = None
            for suffix in (TANGENT, BACKPROPAGATOR):
                if self.base(t.second) == self.base(t.first) + suffix:
                    derived = first + suffix
            second = self.choose(t.second, scope, (first,), derived)
            saved = self.enter((t.first, t.second), (first, second))
            body = yield self.go(t.body)
            self.leave(saved)
            return LetPair(first, second, value, body, t.arity, span=t.span)
        kids = []
        for child in children(t):
            if isinstance(child, Var):
                self.index += 1
                kids.append(Var(self.shown.get(child.name, child.name), span=child.span))
            elif type(child) in _LEAVES:
                self.index += 1
                kids.append(child)
            else:
                kids.append((yield self.go(child)))
        return with_children(t, kids)

    def base(self, name: str) -> str:
        """The name ``name`` is shown as, if nothing prevents it."""
        return self.prefer.get(name) or self.origin.get(name, name)


def _candidates(bases: list[str]):
    """``bases``, then numbered variants of the last one (``x1``, ``x2``; ``v1_1``...)."""
    yield from bases
    base = bases[-1]
    joiner = "_" if base[-1:].isdigit() else ""
    k = 1
    while True:
        yield f"{base}{joiner}{k}"
        k += 1
