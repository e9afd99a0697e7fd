"""What code generation and the batched-fold emission (:mod:`lambdad.foldgen`) share: the
Python function being generated (:class:`_Function`, its statements and locals, which of
them are dead: :func:`dead_statements`), the atoms
of reals written into it and read back, the atoms of a site's source arguments for error
messages, and the one term shape both recognise (a list's reals made constants).
"""

from __future__ import annotations

import collections
import itertools
import math
import operator
from collections.abc import Sequence

from .errors import DerivativeSpan, Span
from .guard import PrimSite
from .primitives import PRIMITIVES, Primitive
from .syntax import Const, Lam, Let, LinLam, Pair, Term, Var, Zero


# Deepest `if` nesting kept inline in one Python function (CPython allows 100 indents).
_MAX_IF_DEPTH = 48
# Built-ins applied to this many arguments at most (peeling `f a b c` for a built-in head).
_MAX_ARITY = max(p.arity for p in PRIMITIVES.values())


def _source_atoms(span: Span | None, fn: "_Function") -> tuple[str, ...]:
    """For a site computing part of a source primitive's derivative, the atoms of ``fn``
    holding that primitive's arguments (see :class:`PrimSite`), else ``("=", atom)`` for
    its value, else () when they are not bound or captured in ``fn`` already (nothing is
    captured for an error message)."""
    if not isinstance(span, DerivativeSpan) or not span.arguments:
        return ()
    # A partial written with the primitive's value (0.5 / r for sqrt) fails where the value
    # is what it is: the error says so, in both modes alike (in the backpropagator the
    # value may be the only one at hand).
    value = span.value and (fn.scope.get(span.value) or fn.captures.get(span.value))
    if value:
        return ("=", value)
    # (an argument may be named by its value, `0.5`, where the fused form put the literal)
    atoms = [fn.scope.get(name) or fn.captures.get(name) or _literal_atom(name)
             for name in span.arguments]
    return tuple(atoms) if all(atoms) else ()


class _Function:
    """A Python function being generated: a lifted ``\\x -> e`` or ``\\a -o e``, a lifted
    ``if`` branch, or the entry point of a compiled term.

    ``scope`` maps source names bound inside it to Python atoms (names or literals);
    ``captures`` maps captured source names to the parameters receiving them, in order.

    Its locals are numbered by ``names`` (``t0``, ``c1``, ...), its own counter unless it
    shares its Python function with others (a batched fold's loop and bodies): functions
    generated alike are then the same text (up to their own name), compiled once (see
    :func:`_compiled_functions`).
    """

    __slots__ = ("parent", "names", "scope", "captures", "lines", "indent", "if_depth",
                 "blocks", "deferred", "finite", "computed", "owned", "roles", "spreads")

    def __init__(self, parent: "_Function | None",
                 names: "itertools.count[int] | None" = None):
        self.parent = parent
        self.names = itertools.count() if names is None else names
        self.scope: dict[str, str] = {}
        self.captures: dict[str, str] = {}
        # (indent, text, primitive site, names defined if the statement is pure, atoms used)
        self.lines: list[tuple[int, str, PrimSite | None, tuple[str, ...],
                               tuple[str, ...]]] = []
        self.indent = 1
        self.if_depth = 0
        # Ids of the blocks (if/else branches) enclosing the statement being generated.
        self.blocks: tuple[int, ...] = ()
        # In a linear body: the atoms of real results whose finiteness check is deferred to
        # their uses (see LinearBodies.deferred_checks), with their sites; else None.
        self.deferred: dict[str, PrimSite] | None = None
        # Atoms of real results checked finite by the statement after their own.
        self.finite: set[str] = set()
        # (primitive, operands) -> (blocks, atom): the real operations computed so far, each
        # with the blocks around its statement (see _CodeGenerator.apply_primitive).
        self.computed: dict[tuple, tuple[tuple[int, ...], str]] = {}
        # In a linear body: the atoms of the new arrays its elementwise operations made,
        # each with the application that made it; one nested in a sum is held by that sum
        # only, which may add into it.
        self.owned: dict[str, object] = {}
        # What the finiteness pass of array code (_CodeGenerator.untested_arrays) reads of
        # some statements, by the id of their line: the test of a real an array operation
        # made (or an application folded to) ``(TESTS, atom)``, an array operation's result
        # ``(MAKES, atom, primitive, arguments, into)`` (``into``: the operands it may write
        # into, see lambdad.peephole.held_operands), a pair taken apart ``(UNPACKS,)``.
        self.roles: dict[int, tuple] = {}
        # In a linear body: the atoms of arrays made by `spread x c`, each with the atoms of
        # x and c (see lambdad.peephole.spread_operand).
        self.spreads: dict[str, tuple[str, str]] = {}

    def emit(self, text: str, uses: Sequence[str] = (), site: PrimSite | None = None,
             pure: tuple[str, ...] = ()) -> None:
        """Appends a statement using the atoms ``uses``; ``pure`` names what it defines
        when it has no effect and cannot fail, so it may be dropped if they are never
        used."""
        self.lines.append((self.indent, text, site, pure, tuple(uses)))

    def emit_with_role(self, role: tuple, text: str, uses: Sequence[str] = (),
                       site: PrimSite | None = None, pure: tuple[str, ...] = ()) -> None:
        """:meth:`emit`, recording what the statement is (``role``, :attr:`roles`) for
        the passes over the finished lines."""
        line = (self.indent, text, site, pure, tuple(uses))
        self.lines.append(line)
        self.roles[id(line)] = role

    def fresh(self, prefix: str) -> str:
        """A new local: ``prefix`` (``t`` temporary, ``v`` parameter or unpacked part,
        ``c`` captured) and a number."""
        return f"{prefix}{next(self.names)}"


# The parts of a statement read by dead_statements: what it defines if pure, what it uses.
_DEFINED, _USED = operator.itemgetter(3), operator.itemgetter(4)


def dead_statements(lines: list[tuple]) -> set[int]:
    """The indices of the pure statements of one function's ``lines`` whose names are
    never used, directly or through other dead statements (``let``-bound pairs taken
    apart at once leave their tuple unused).  Generated names are local to their
    function (values reach other functions as parameters), so uses are counted per
    function."""
    # (the scans over every statement run in C: this runs once per generated function)
    pure = itertools.compress(range(len(lines)), map(_DEFINED, lines))
    definer = {defined: index for index in pure for defined in lines[index][3]}
    if not definer:
        return set()
    uses = collections.Counter(itertools.chain.from_iterable(map(_USED, lines)))

    def unused(index: int) -> bool:
        return all(uses[defined] == 0 for defined in lines[index][3])

    dead: set[int] = set()
    work = [index for index in set(definer.values()) if unused(index)]
    while work:
        index = work.pop()
        if index in dead:
            continue
        dead.add(index)
        for used in lines[index][4]:
            uses[used] -= 1
            if uses[used] == 0:
                other = definer.get(used)
                if other is not None and other not in dead and unused(other):
                    work.append(other)
    return dead


# The roles of statements (_Function.roles).
TESTS, MAKES, UNPACKS = "tests", "makes", "unpacks"
# A backpropagator made over a body sending only to captured ones, which is the zero one
# when they all are (lambdad.lineargen): (ZERO_IF, its atom, (its body, the body's
# captured names and the values they capture), read by lineargen.sent_atoms).
ZERO_IF = "zero if"


def _literal_atom(text: str) -> str | None:
    """The atom of the real ``text`` names when it is a number (no variable is), else None."""
    if not text[:1] or text[0] not in "-.0123456789":
        return None
    try:
        return _real_atom(float(text))
    except ValueError:
        return None


def _real_atom(value: float) -> str:
    """A Python expression for the real ``value`` (parenthesised when negative)."""
    value = float(value)
    if value != value:
        return "_nan"
    if math.isinf(value):
        return "_inf" if value > 0 else "(-_inf)"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def _literal_real(atom: str) -> float | None:
    """The finite real an atom made by :func:`_real_atom` stands for, else None."""
    text = atom[2:-1] if atom.startswith("(-") else atom
    if not text or not (text[0].isdigit() or text[0] == "."):
        return None
    value = float(text)
    return -value if atom.startswith("(-") else value


def _folded_literals(primitive: Primitive, atoms: list[str]) -> str | None:
    """The literal ``primitive`` gives on the literals ``atoms`` (see
    :func:`lambdad.peephole.folded_atom`), or None."""
    values = [_literal_real(atom) for atom in atoms]
    result = None if None in values else primitive.value_at(*values)
    if result is None:
        return None
    if type(result) is bool:
        return "True" if result else "False"
    return _real_atom(result)


def _lifted_reals(f: Term) -> str | None:
    """What ``f`` pairs each real with when it makes reals constants: ``"zero"`` for
    ``\\i -> (i, \\a -o zero)`` (reverse mode; fusion writes it ``\\i -> let g = \\a -o zero
    in (i, g)``), ``"0.0"`` for ``\\i -> (i, 0)`` (forward mode); else None."""
    if not isinstance(f, Lam):
        return None
    body, zero_name = f.body, None
    if (isinstance(body, Let) and isinstance(body.value, LinLam)
            and isinstance(body.value.body, Zero)):
        body, zero_name = body.body, body.name
    if not (isinstance(body, Pair) and isinstance(body.first, Var)
            and body.first.name == f.param and body.first.name != zero_name):
        return None
    second = body.second
    if zero_name is not None:
        return "zero" if isinstance(second, Var) and second.name == zero_name else None
    if isinstance(second, LinLam) and isinstance(second.body, Zero):
        return "zero"
    if isinstance(second, Const) and second.value == 0.0 and math.copysign(1.0, second.value) > 0:
        return "0.0"
    return None
