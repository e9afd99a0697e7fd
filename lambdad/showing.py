"""Showing transformed programs (``lambdad show``, :meth:`lambdad.pipeline.Program.show`).

The declarations a definition needs, its uses of ``grad``/``jvp``/``vjp`` written out as
target programs (:mod:`lambdad.nesting`), transformed by forward or reverse mode (simplified
for reading unless raw, or in the form the ``fused`` strategy runs), printed with their
transformed types; with a point, a ``main`` computing the value and gradient, whose local
names are fresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from . import backward as backward_mode
from . import forward as forward_mode
from . import nesting
from .calling import curried_call, curried_parts, point_term, real_term
from .differentiate import FORWARD, REVERSE
from .reals import count_reals
from .errors import UsageError
from .fuse import fused_backward_term
from .iterate import collector_paused_during
from .primitives import FST, SND, declared_by, declared_primitives
from .printer import builtin_uses, print_decl, print_type_comment, unshadowed
from .simplify import simplify
from .syntax import (
    App,
    Const,
    Decl,
    Let,
    LetPair,
    NameSupply,
    Pair,
    ReadOff,
    Seed,
    Term,
    Var,
    curried_params,
    free_vars,
    unused_name,
)


class Showing:
    """The programs :meth:`lambdad.pipeline.Program.show` prints: the declarations a
    definition depends on, with its uses of ``grad``/``jvp``/``vjp`` written out, transformed
    by →D or ←D, and with ``--at`` a hygienic ``main`` that computes the value and the
    gradient.  Made per call for ``program``; it evaluates nothing."""

    def __init__(self, program: Any):
        self.program = program

    def dependencies(self, name: str) -> list[Decl]:
        """The work of :meth:`Program.dependencies`."""
        self.program.require(name)
        needed = {name}
        defined = {decl.name for decl in self.program.module.decls}
        for decl in reversed(self.program.module.decls):
            if decl.name in needed:
                needed |= free_vars(decl.value) & defined
                # the declarations of the primitives it uses, so a printed program parses
                needed |= {str(p.name) for p in declared_primitives(decl.value)}
        return [d for d in self.program.module.decls if d.name in needed]

    def expanded_dependencies(self, name: str) -> list[Decl]:
        """The declarations ``name`` needs, in program order, each with its uses of
        ``grad``/``jvp``/``vjp`` written out as target programs (lambdad.nesting); a
        definition that differentiates is inlined where it is used, so it is needed only
        if used otherwise.  Raises DifferentiationError located at a use with no program."""
        self.program.require(name)
        module = self.program.module.decls  # as one module: a replaced definition has a hidden name
        by_name = {d.name: d for d in module}
        definitions = {d.name: d.value for d in module if declared_by(d.name, d.value) is None}
        values: dict[str, Term] = {}
        needed: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if current in needed:
                continue
            needed.add(current)
            value = by_name[current].value
            if current in definitions:
                value = nesting.expand(value, definitions, self.program.typing.env)
            values[current] = value
            pending.extend(free_vars(value) & by_name.keys())
            pending.extend(str(p.name) for p in declared_primitives(value))
        return [attrs.evolve(d, value=values[d.name]) for d in module if d.name in needed]

    @collector_paused_during
    def transformed_decls(self, name: str, mode: str, raw: bool = False,
                          fused: bool = False) -> list[Decl]:
        """The declarations ``name`` depends on, transformed by ``mode``: simplified for
        reading unless ``raw``; with ``fused`` (reverse mode), the form the ``fused``
        strategy runs (:func:`lambdad.fuse.fused_backward_term`, not simplified).  Raises
        UsageError for ``fused`` with forward mode."""
        if fused and mode == FORWARD:
            raise UsageError("--fused is a form of reverse mode; use it with --reverse")
        out = []
        for decl in self.expanded_dependencies(name):
            if declared_by(decl.name, decl.value) is not None:
                out.append(decl)  # a primitive is declared as it is; the rules use it
                continue
            out.append(Decl(decl.name, _transformed(decl.value, mode, raw, fused),
                            span=decl.span))
        return out

    @collector_paused_during
    def show(self, name: str, forward: bool = False, reverse: bool = False,
             at: Any = None, raw: bool = False, backward: bool = False,
             fused: bool = False) -> str:
        """The work of :meth:`Program.show`."""
        reverse = reverse or backward  # ``backward``: the earlier name of ``reverse``
        if forward == reverse:
            raise UsageError("choose one of --forward and --reverse")
        mode = FORWARD if forward else REVERSE
        transform_type = forward_mode.forward_type if forward else backward_mode.backward_type
        decls = self.transformed_decls(name, mode, raw, fused)
        source_names = [decl.name for decl in decls]
        wrapped = at is not None and declared_by(name, decls[-1].value) is not None
        if wrapped:
            # main calls a primitive through its transformed application, `f'1`
            wrapper = unused_name(name, decls)
            decls.append(Decl(wrapper, _transformed(decls[-1].value, mode, raw, fused)))
            source_names.append(name)
        used_after: set[str] = set()
        if at is not None:  # the built-ins main uses, whatever the entry is printed as
            used_after = builtin_uses(self._show_main(name, name, at, mode, set())[1])
        # A definition named `main`, or shadowing a built-in used after it, is printed
        # renamed (`main'1`, `cosh'1`), its uses with it.
        decls, renamed = unshadowed(decls, used_after, ("main",) if at is not None else ())
        entry = decls[-1].name if wrapped else renamed.get(name, name)
        main = None
        if at is not None:
            # main refers to the entry alone: its locals need only avoid the top-level names.
            main = self._show_main(name, entry, at, mode, {decl.name for decl in decls})
        header = "→D" if forward else "fused ←D" if fused else "←D"
        lines = []
        for source_name, decl in zip(source_names, decls):
            source_type = self.program.scheme(source_name).type
            if declared_by(decl.name, decl.value) is not None:
                lines.append(print_type_comment(
                    decl.name, source_type,
                    "a primitive: both transformations use its partials"))
            else:
                lines.append(print_type_comment(decl.name, transform_type(source_type),
                                                header, of=source_type))
            lines.append(print_decl(decl))
            lines.append("")
        if main is not None:
            comment, main_term = main
            lines.append(comment + "\n" + print_decl(Decl("main", main_term)))
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def _show_main(self, name: str, entry: str, at: Any, mode: str, taken: set[str]
                   ) -> tuple[str, Term]:
        """The comment and the value of ``def main = ...`` computing the value and gradient
        of ``name`` (printed as ``entry``) at the point ``at`` by ``mode``; its local names
        avoid ``taken``.  Evaluates nothing (but a point that is not written with literals
        only)."""
        x, k = self.program.points.fitted_point(name, at)
        parts = curried_parts(x, k)
        point_type = self.program.points.point_type(name, x)
        part_types = curried_params(self.program.scheme(name).type)[:k]
        fresh = NameSupply(set(taken) | {entry}).name

        def call(arguments: Sequence[Term]) -> Term:
            body: Term = Var(entry)
            for argument in arguments:
                body = App(body, argument)
            return body

        if mode == REVERSE:
            point, value, back = fresh("x"), fresh("v"), fresh("v_")
            counter = iter(range(10**9))
            # an array has one seed, for its whole cotangent (AD.md section 10)
            seeded = point_term(x, lambda r: Pair(real_term(r),
                                                  Seed(Const(float(next(counter))))),
                                lambda a: Pair(point_term(a, real_term),
                                               Seed(Const(float(next(counter))))), point_type)
            body = LetPair(value, back, curried_call(Var(entry), Var(point), k),
                           Pair(Var(value), ReadOff(Var(point), App(Var(back), Const(1.0)))))
            main: Term = Let(point, seeded, body)
            comment = "-- value and gradient by backpropagation"
        else:
            n = count_reals(x)
            results = [fresh(f"r{i}") for i in range(max(n, 1))]
            runs = []
            for i in range(len(results)):
                position = iter(range(10**9))

                def dual(r: float, i: int = i, position=position) -> Term:
                    return Pair(real_term(r), Const(1.0 if next(position) == i else 0.0))

                def dual_array(a: Any, i: int = i, position=position) -> Term:
                    # an array and its tangent, an array of the same shape
                    return Pair(point_term(a, real_term), point_term(
                        a, lambda _: Const(1.0 if next(position) == i else 0.0)))

                runs.append(call([point_term(part, dual, dual_array, part_type)
                                  for part, part_type in zip(parts, part_types)]))
            reads = iter(results)
            gradient = point_term(x, lambda r: SND.applied(Var(next(reads))), None, point_type)
            main = Pair(FST.applied(Var(results[0])), gradient)
            for result, run in reversed(list(zip(results, runs))):
                main = Let(result, run, main)
            comment = f"-- value and gradient by forward mode: one run per input real ({n})"
        return comment, main


def _transformed(term: Term, mode: str, raw: bool, fused: bool) -> Term:
    """``term`` transformed by ``mode`` (``fused``: reverse mode in the form the fused
    strategy runs, not simplified), simplified for reading unless ``raw``."""
    if fused:
        return fused_backward_term(term)
    term = (forward_mode.forward_term if mode == FORWARD else backward_mode.backward_term)(term)
    return term if raw else simplify(term)
