"""Code generation of the linear constructs of target programs: ``\\a -o e`` (a
backpropagator, stamped when evaluated), ``zero``, ``e1 <+> e2``, ``seed i`` and
``cotangent x e``.

A linear body that is a tree of ``<+>``, ``zero``, ``let`` and applications ``g e`` (what ←D
builds) is compiled into staging statements ``stage(g, e)`` (:meth:`LinearBodies.staged`),
with the finiteness checks of its adjoint arithmetic deferred to where the values leave the
body (:meth:`LinearBodies.deferred_checks`); any other body returns its cotangent as data.

These are arms of the code generator (:class:`lambdad.codegen._CodeGenerator`), a mixin as
:class:`lambdad.foldgen.BatchedFolds` is: the rest is the generator's own machinery
(``gen``, ``let``, ``write_out``, ``lookup``, ``constant``...), reached through ``self``.
"""

from __future__ import annotations

import re
import types

from .errors import EvalError
from .generated import _MAX_ARITY, _MAX_IF_DEPTH, ZERO_IF, _Function, dead_statements
from .primitives import ADD, MUL, NEG, PRIMITIVES, SUB
from .syntax import App, Builtin, Const, Let, LetPair, LinLam, Plus, ReadOff, Seed, Term, Var, Zero

__all__ = ["LinearBodies", "sent_atoms"]

# Operations whose result is not finite when an operand is not (IEEE: inf * 0 and inf - inf
# are nan): inside a linear body their checks are deferred to where the value is used
# otherwise (a staging, mostly), since a non-finite operand would reach it anyway.
_PROPAGATING = frozenset(p.name for p in (ADD, SUB, MUL, NEG))


def _stageable(body: Term) -> bool:
    """Whether the linear body ``body`` is a tree of ``<+>``, ``zero``, ``let`` and
    applications ``g e`` other than saturated built-ins (what :meth:`LinearBodies.staged`
    compiles)."""
    work = [body]
    while work:
        t = work.pop()
        if isinstance(t, Zero):
            continue
        if isinstance(t, Plus):
            work.extend((t.right, t.left))
        elif isinstance(t, (Let, LetPair)):
            work.append(t.body)
        elif isinstance(t, App):
            head, arity = t.fn, 1
            while isinstance(head, App) and arity < _MAX_ARITY:
                head, arity = head.fn, arity + 1
            if isinstance(head, Builtin) and PRIMITIVES.get(head.name) is not None \
                    and PRIMITIVES[head.name].arity == arity:
                return False
        else:
            return False
    return True


_SHAPE = "shape"  # (an operand read for its shape alone, in _reads)


def _reads(lines: list) -> dict[str, set[str | None]]:
    """How the statements ``lines`` of a linear body read each atom: for its shape alone
    (an argument of a primitive's ``shape_only``), under the staging guard of a
    backpropagator at the body's outer level (``if g is not _Z:``, by g's atom), or
    otherwise (None)."""
    reads: dict[str, set[str | None]] = {}
    if not lines:
        return reads
    base = min(line[0] for line in lines)
    guard = None
    for indent, text, site, _, uses in lines:
        if indent == base:
            match = _GUARD.match(text)
            guard = match.group(1) if match else None
            where = None
        else:
            where = guard
        shape_only = site.primitive.shape_only if site is not None else ()
        applied = bool(shape_only) and len(uses) == site.primitive.arity \
            and _ASSIGNED.match(text) is not None
        for position, atom in enumerate(uses):
            found = reads.get(atom)
            if found is None:
                found = reads[atom] = set()
            found.add(_SHAPE if applied and position in shape_only else where)
    return reads


def _kept(captured: list[tuple[str, str]], values: list[str],
          reads: dict[str, set[str | None]]) -> list[str]:
    """What a backpropagator over a body with array operations keeps of each value it
    captures (``values``, received as the body's ``captured`` parameters), by how its
    statements read it (``reads``, :func:`_reads`): an operand read for its shape alone,
    a stand-in of its shape (:data:`~lambdad.primitives.SHAPE_STAND_IN`); one read only
    under the staging guards of captured backpropagators (what only the derivative with
    respect to a constant needs: a step size's, of ``h * k``), itself when one of those
    is not the zero backpropagator, else nothing (or the stand-in).  Without this the
    forward phase would hold every such operand until the backward phase ends."""
    outer = {inner: value for (_, inner), value in zip(captured, values)}
    kept = []
    for (_, inner), value in zip(captured, values):
        found = reads.get(inner)
        if not found or None in found or not value.isidentifier():
            kept.append(value)
            continue
        if found == {_SHAPE}:
            kept.append(f"_standin({value})")
            continue
        tested = [outer.get(g) for g in sorted(found - {_SHAPE})]
        if None in tested:  # (a guard on a backpropagator the body makes itself)
            kept.append(value)
            continue
        otherwise = f"_standin({value})" if _SHAPE in found else "None"
        needed = " or ".join(f"{g} is not _Z" for g in tested)
        kept.append(f"({value} if {needed} else {otherwise})")
    return kept


_SMALL_BODY = 64


def _sent_to(body: Term) -> frozenset[str] | None:
    """The variables a stageable linear body (:func:`_stageable`) sends cotangents to, when
    every one of its applications sends to a variable bound outside it; else None.  Also
    None for a body of more than ``_SMALL_BODY`` nodes along its staging spine (a fused
    region's body, which is seldom all sent to zero, and whose walk would cost the first
    gradient of a long program)."""
    targets: set[str] = set()
    bound: set[str] = set()
    work = [body]
    budget = _SMALL_BODY
    while work:
        budget -= 1
        if budget < 0:
            return None
        t = work.pop()
        if isinstance(t, Plus):
            work.extend((t.right, t.left))
        elif isinstance(t, Let):
            bound.add(t.name)
            work.append(t.body)
        elif isinstance(t, LetPair):
            bound.update((t.first, t.second))
            work.append(t.body)
        elif isinstance(t, App):
            if not isinstance(t.fn, Var):
                return None
            targets.add(t.fn.name)
    if not targets or targets & bound:
        return None
    return frozenset(targets)


def sent_atoms(body: Term, captured: list[tuple[str, str]], values: list[str]
               ) -> tuple[str, ...] | None:
    """The atoms of the backpropagators the stageable linear body ``body`` sends to
    (:func:`_sent_to`), when each is one it captures (``values``, by ``captured``);
    else None."""
    targets = _sent_to(body)
    if not targets:
        return None
    by_source = dict(zip((source for source, _ in captured), values))
    sent = tuple(by_source.get(v) for v in sorted(targets))
    return None if None in sent else sent


_ASSIGNED = re.compile(r"(t\d+) = ")
_GUARD = re.compile(r"if (\w+) is not _Z:$")
# Calls with an effect beyond their value, which stay where the rules put them.
_EFFECTS = ("_st(", "_newbp(", "_seed(", "_readoff(", "_ad(", "_ev(", "_ahead(")


def _sunk_into_guards(lines: list) -> list:
    """The statements of a linear body's ``lines`` rearranged so that a value computed
    only for what one backpropagator is sent is computed under that backpropagator's test
    (``if g is not _Z:``, :meth:`LinearBodies.staged`): a fused body computes its shared
    values first, and a constant's share of them would otherwise be computed for nothing.
    Only assignments of one temporary at the body's outer level move, and they keep their
    order."""
    if not lines:
        return lines
    base = min(line[0] for line in lines)
    # The outer-level guards: the index of each `if` and of the lines under it.
    block_of: dict[int, int] = {}
    guard = None
    for index, line in enumerate(lines):
        if line[0] == base:
            guard = index if _GUARD.match(line[1]) else None
        elif guard is not None:
            block_of[index] = guard
    if not block_of:
        return lines
    users: dict[str, set[int]] = {}
    for index, line in enumerate(lines):
        for used in line[4]:
            users.setdefault(used, set()).add(block_of.get(index, -1 - index))
    moved: dict[int, list] = {}  # guard index -> the statements moved under it, in order
    gone: set[int] = set()
    for index in range(len(lines) - 1, -1, -1):
        indent, text, site, pure, uses = lines[index]
        match = _ASSIGNED.match(text)
        if indent != base or match is None or any(call in text for call in _EFFECTS):
            continue
        where = users.get(match.group(1))
        if where is None or len(where) != 1:
            continue
        target = next(iter(where))
        if target < 0:
            continue
        moved.setdefault(target, []).insert(0, (indent + 1, text, site, pure, uses))
        gone.add(index)
        for used in uses:  # its operands are now used under that guard
            places = users[used]
            places.discard(-1 - index)
            places.add(target)
    if not gone:
        return lines
    out = []
    for index, line in enumerate(lines):
        if index in gone:
            continue
        out.append(line)
        out.extend(moved.get(index, ()))
    return out


class LinearBodies:
    """The arms of the code generator for the linear constructs (see the module
    docstring)."""

    def lin_lam(self, term: LinLam, fn: _Function):
        """``\\a -o e``: a :class:`Backprop` that gets the next creation stamp of the current
        tape each time this is evaluated, over a lifted body ``(captured, a, stage)``.

        A body that is a tree of ``<+>``, ``zero``, ``let`` and applications ``g e'`` (what
        ←D builds) is compiled into staging statements ``stage(g, e')``: the backward phase
        accumulates instead of walking cotangent data (:meth:`staged`).  Any other body
        returns its cotangent as data.  ``\\a -o zero`` is the one zero backpropagator
        :data:`~lambdad.tape.ZERO` (AD.md section 3), which has no body and is not counted
        as created, and to which a staging sends nothing; the instrumented variant gives
        each evaluation its own, reported in events
        (:class:`~lambdad.tape.ConstantBackprop`), so traces show what reaches constants.
        """
        if isinstance(term.body, Zero):
            if not self.instrumented:
                return "_Z"
            t = fn.fresh("t")  # one per evaluation, reported (see ConstantBackprop)
            fn.emit(f"{t} = _newzero({self.constant(term.span)})")
            return t
        if self.batching is not None and id(term) in self.batching[0].slots:
            return (yield from self.batched_slot(term, fn))
        child = _Function(fn)
        param = child.fresh("v")
        name = self.fresh("_f")
        self.bind(child, term.param, param)
        stageable = _stageable(term.body)
        if stageable:
            if not self.instrumented:
                child.deferred = {}
            yield self.staged(term.body, child)
            if child.deferred:
                self.deferred_checks(child)
                self.namespace["__lambdad_deferred__"].add(name)
            if self.arrays and not self.instrumented:
                child.lines = _sunk_into_guards(child.lines)
        else:
            body = yield self.gen(term.body, child)
            child.emit(f"return {body}", (body,))
        captured = list(child.captures.items())
        reads = _reads(child.lines) if self.arrays else None
        names = [inner for _, inner in captured]
        if names:
            # The captured values arrive as one tuple: cheaper to build and to call with
            # than a partial application over them.
            child.lines.insert(0, (1, f"{', '.join(names)}, = _c", None, (), ()))
        self.write_out(name, child, ["_c", param, "_st"])
        values = [self.lookup(source, fn, self.free_spans.get(source)) for source, _ in captured]
        kept = _kept(captured, values, reads) if reads is not None else values
        closed = f"({', '.join(kept)},)" if kept else "()"
        t = fn.fresh("t")
        span = self.constant(term.span)
        # One call (stamping and the record, see Tape.backprop_maker): shorter to compile
        # and no slower to run than the same statements inline.
        make = f"_newbp({name}, {closed}, {span})"
        # A body sending only to zero backpropagators (a constant's, an argument's that is
        # not differentiated) is the zero map: the backpropagator is `zero`, so that what
        # would be sent to it is not computed either (AD.md section 3).  The test is
        # written in where the cotangents are arrays (codegen.write_out, sent_atoms), which
        # is known when the enclosing function is written out.
        if stageable and not self.instrumented:
            fn.emit_with_role((ZERO_IF, t, (term.body, captured, values)), f"{t} = {make}",
                              values)
        else:
            fn.emit(f"{t} = {make}", values)
        return t

    def deferred_checks(self, fn: _Function) -> None:
        """Puts the finiteness checks deferred in the linear body ``fn`` where their atoms
        are used other than by a propagating operation (before a staging, mostly): a chain
        of adjoint arithmetic is checked once, where it leaves the body.  Which operation
        failed is found when the error is reported, by running the body again with every
        check in place (:func:`lambdad.guard.locate`)."""
        deferred = fn.deferred
        # A pure statement that is dropped (a pair taken apart at once, in forward mode
        # over a linear body) is no use: its parts are checked where they are used.
        dead = dead_statements(fn.lines)
        lines = []
        for index, line in enumerate(fn.lines):
            if index in dead:
                continue
            site = line[2]
            if site is None or site.primitive.name not in _PROPAGATING:
                for atom in line[4]:
                    found = deferred.get(atom)
                    if found is not None:
                        lines.append((line[0], f"if {atom} - {atom}: _nonfinite({atom})",
                                      found, (), (atom,)))
            lines.append(line)
        fn.lines = lines

    def staged(self, term: Term, fn: _Function):
        """The cotangent ``term`` (of type ``d``, :func:`_stageable`) of a linear body as
        staging statements: ``zero`` stages nothing, ``e1 <+> e2`` stages both sides left to
        right, ``g e`` is ``if g is not ZERO: stage(g, e)`` (``e`` computed under the test: a
        constant receives nothing), and ``let`` binds, then stages its body."""
        if isinstance(term, Zero):
            return None
        if isinstance(term, Plus):
            yield self.staged(term.left, fn)
            yield self.staged(term.right, fn)
            return None
        if isinstance(term, (Let, LetPair)):
            return (yield from self.let(term, fn, self.staged))
        if isinstance(term, App):
            target = self.sent_to.get(term.fn.name) if isinstance(term.fn, Var) else None
            if target is not None:  # to the previous step's slot (batched_slot)
                x = yield self.gen(term.arg, fn)
                # (scalars: reals, or the pairs of reals of forward over reverse mode)
                fn.emit(f"{target} = {x} if {target} is None else {target} + {x} "
                        f"if type({x}) is float else _ssum({target}, {x})", (x,))
                return None
            f = self.gen(term.fn, fn)
            if f.__class__ is types.GeneratorType:  # (mostly a variable: a leaf, no step)
                f = yield f
            if f == "_Z":
                return None
            guarded = fn.if_depth < _MAX_IF_DEPTH
            if guarded:
                # What is sent to the zero backpropagator (a constant's) is dropped: neither
                # computed nor staged.
                fn.emit(f"if {f} is not _Z:", (f,))
                enclosing = fn.blocks
                fn.blocks = enclosing + (next(self.counter),)
                fn.indent += 1
                fn.if_depth += 1
            x = self.gen(term.arg, fn)
            if x.__class__ is types.GeneratorType:
                x = yield x
            fn.emit(f"_st({f}, {x})", (f, x))
            if guarded:
                fn.blocks = enclosing
                fn.indent -= 1
                fn.if_depth -= 1
            return None
        raise EvalError(f"cannot stage a {type(term).__name__} term", term.span)

    def zero(self, term: Zero, fn: _Function):
        """``zero``: the zero cotangent, ``None``."""
        return "None"

    def plus(self, term: Plus, fn: _Function):
        """``e1 <+> e2``: :func:`~lambdad.tape.add_cotangents`, inline."""
        left = yield self.gen(term.left, fn)
        right = yield self.gen(term.right, fn)
        if left == "None":
            return right
        if right == "None":
            return left
        t = fn.fresh("t")
        fn.emit(f"{t} = ({right} if {left} is None else {left} if {right} is None "
                f"else _Sum({left}, {right}))", (left, right), pure=(t,))
        return t

    def seed(self, term: Seed, fn: _Function):
        """``seed i``: the i-th seed backpropagator of the current tape (a literal index is
        checked by the parser; any other is checked when it is evaluated)."""
        t = fn.fresh("t")
        if isinstance(term.index, Const):
            fn.emit(f"{t} = _seed({int(term.index.value)}, {self.constant(term.span)})")
            return t
        index = yield self.gen(term.index, fn)
        fn.emit(f"{t} = _seed({index}, {self.constant(term.span)})", (index,))
        return t

    def read_off(self, term: ReadOff, fn: _Function):
        """``cotangent x e``: the backward phase of ``e``, read off in the shape of ``x``."""
        point = yield self.gen(term.point, fn)
        cotangent = yield self.gen(term.cotangent, fn)
        t = fn.fresh("t")
        fn.emit(f"{t} = _readoff({point}, {cotangent})", (point, cotangent))
        return t
