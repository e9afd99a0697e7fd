"""Code generation: source and target terms compiled to Python modules.

Each term is compiled (by :func:`compile_term`) into Python source built only from the
checked syntax tree, with generated names (no user text ever reaches the code):

* A-normal form: every primitive evaluation is one statement on its own line, so a failing
  line maps back to the primitive's span (a line table per compiled unit, read by
  :func:`lambdad.guard.locate`), and source nesting never becomes nesting of Python
  expressions.  A real result is followed by a one-call check that it is finite.
* Lambda lifting: every ``\\x -> e`` (and ``\\a -o e``) becomes a module-level function whose
  first parameters are the variables it captures; the closure value is
  ``functools.partial(function, *captured)``.  Lifted functions carry ``__lambdad_lam__``
  and ``__lambdad_captured__`` so :func:`lambdad.values.function_parts` can take closures
  apart (the AD glue transforms them).
* ``if`` becomes Python ``if``/``else`` statements; a branch nested deeper than
  ``_MAX_IF_DEPTH`` is lifted into a function of its own (CPython limits indentation).
* ``let`` binds names to atoms without copying; ``let (x, y) =`` of a pair built in the same
  function uses its parts directly, and pure statements left unused (such tuples) are
  dropped, which matters for the ``let``-heavy output of the transformations.  Every
  statement records the atoms it uses, so finding the unused ones reads no generated text.

Generated code reaches the run time only through the functions of a :class:`RuntimeCalls`
(the interpreter supplies them: stamping backpropagators, seeds, the backward phase, the
``grad``/``jvp``/``vjp`` hooks, events and limits), and through :mod:`lambdad.guard`.

The code generator is a set of generator functions driven by :func:`lambdad.iterate.run`,
so terms nested 10^4 deep compile.  Its arms for the linear constructs (``\\a -o e``,
``zero``, ``<+>``, ``seed``, ``cotangent``) are the mixin :class:`lambdad.lineargen.LinearBodies`,
and batched folds the mixin :class:`lambdad.foldgen.BatchedFolds`; the peephole decisions
about one primitive application (literals folded, unit operands, operands a backpropagator's
array operation may reuse) are the functions of :mod:`lambdad.peephole`.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .errors import EvalError, ResourceError, Span
from .batching import BatchedFold
from .foldgen import BatchedFolds
from .generated import (_MAX_ARITY, _MAX_IF_DEPTH, MAKES, TESTS, UNPACKS, ZERO_IF, _Function,
                        dead_statements, _lifted_reals, _literal_real, _real_atom, _source_atoms)
from .guard import PrimSite, not_finite
from .iterate import collector_paused, run
from .lineargen import _PROPAGATING, LinearBodies, sent_atoms
from .peephole import _LITERAL_FIRST, folded_atom, held_operands, spread_operand, unit_operand
from .pieces import Line, cut_into_pieces, define_functions
from .primitives import (FOLD, FST, MAP, NEW_ARRAY, PRIMITIVES, SHAPE_STAND_IN, SND, SPREAD,
                         TWO_ARGUMENTS, Primitive)
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
    RealT,
    Seed,
    Term,
    Var,
    Zero,
    children,
    result_after,
)
from .tape import (ZERO, Sum, batched_fold, batched_slot_body,
                   batched_steps_body, batches, scalar_sum)
from .values import BuiltinFunction

__all__ = ["CompileOptions", "RuntimeCalls", "compile_term"]

# Longest function (in statements) also compiled as a function of two arguments (see
# _CodeGenerator.lam): the copy saves a closure per call, which only matters for short ones.
_MAX_TWO_ARGUMENT_LINES = 24

# The only Python built-ins generated code can reach (for `inline` templates of the
# primitive table): pure functions, nothing that touches the host.
_SAFE_BUILTINS = ("abs", "all", "any", "bool", "divmod", "float", "int", "isinstance", "len",
                  "list", "max", "min", "pow", "range", "reversed", "round", "sum", "tuple", "type",
                  "zip")


@functools.lru_cache(maxsize=4096)
def _positional(template: str, params: tuple[str, ...]) -> str:
    """A primitive's inline ``template`` (``({x} * {y})``) with its fields numbered in the
    order of ``params`` (``({0} * {1})``): filled from the atoms by position, without a
    dictionary of them at every application.  (A pure function of the table's templates,
    memoised with a bound.)"""
    return template.format(**{param: f"{{{index}}}" for index, param in enumerate(params)})


_BOOL_ATOMS = frozenset(("True", "False"))
# Indentation by depth, up to CPython's limit on it (a body nested deeper than
# _MAX_IF_DEPTH is lifted into a function of its own, far below it).
_INDENTS = tuple("    " * depth for depth in range(100))

_ARRAY_KINDS = frozenset(("elementwise", "array"))
"""The kinds of the array entries of the table."""

# The kinds of primitive a body may apply and still run straight through (no closure
# called, no derivative taken): see _CodeGenerator.untested_arrays.
_STRAIGHT_KINDS = frozenset(("real", "elementwise", "array", "constant", "test", "logic"))

# The array entries whose application to the same operands twice in one function is
# computed once (see _CodeGenerator.apply_primitive): those that make an array or a real
# from arrays and reals (not those reading or making lists, whose results are new lists).
_SHARED_ARRAY_RESULTS = frozenset(
    name for name, p in PRIMITIVES.items() if p.kind in _ARRAY_KINDS
    and (p.rule is None or not {"whole", "image"} & set(p.rule.modes)))


def _single_uses(term: Term) -> dict[str, Var | Prim | None]:
    """For each variable name occurring in ``term`` outside any λ (whose body may run many
    times): its one occurrence, or the one primitive application whose operands are all
    its occurrences (``z * z``: the application reads it, alone, elementwise, and may write
    into it), else None."""
    found: dict[str, Var | Prim | None] = {}
    stack: list[tuple[Term, bool, Term | None]] = [(term, False, None)]
    while stack:
        node, in_lambda, parent = stack.pop()
        if node.__class__ is Var:
            name = node.name
            if in_lambda or name not in found:
                found[name] = None if in_lambda else node
            else:
                # (a second occurrence: both operands of one application, or no use alone)
                seen = found[name]
                found[name] = parent if parent.__class__ is Prim and (
                    seen is parent or (seen.__class__ is Var and any(
                        arg is seen for arg in parent.args))) else None
            continue
        inner = in_lambda or node.__class__ is Lam or node.__class__ is LinLam
        stack.extend((child, inner, node) for child in children(node))
    return found


def _zero_if_zero(line: Line, role: tuple | None) -> Line:
    """``line``, making a backpropagator, with the test that makes it the zero one when
    all it sends to are (role ZERO_IF, lambdad.lineargen): written in units with array
    operations, whose cotangents are worth not computing; in the others the test would
    cost about what it saves."""
    if role is None or role[0] != ZERO_IF:
        return line
    _, atom, made = role
    sent = sent_atoms(*made)
    if sent is None:
        return line
    indent, text, site, pure, uses = line
    tests = " and ".join(f"{g} is _Z" for g in sent)
    return (indent, f"{atom} = _Z if {tests} else {text[len(atom) + 3:]}", site, pure, uses)


class _CodeGenerator(BatchedFolds, LinearBodies):
    """Compiles one term (a *unit*) to a Python module; see the module docstring."""

    def __init__(self, calls: RuntimeCalls, options: CompileOptions):
        self.calls = calls
        self.instrumented = instrumented = options.instrumented
        self.batch_folds = options.batch_folds and not instrumented
        self.counter = itertools.count()
        # The module source written so far, a line per item (see write_out).
        self.out: list[str] = []
        self.lifted: list[tuple[str, Lam, tuple[str, ...]]] = []
        # Closure atoms made by `close`: the lifted function and the captured atoms.
        self.closures: dict[str, tuple[str, list[str]]] = {}
        # (function of x returning a closure of y, the same taking x and y at once)
        self.two_arguments: list[tuple[str, str]] = []
        self.lines: dict[int, PrimSite] = {}
        # (function name, line of its `def` in the module, number of lines), in order
        self.placed: list[tuple[str, int, int]] = []
        # Names of the pieces long functions are cut into (see lambdad.pieces).
        self.pieces: set[str] = set()
        self.namespace: dict[str, Any] = {
            "__builtins__": {name: getattr(builtins, name) for name in _SAFE_BUILTINS},
            "__lambdad_lines__": self.lines,
            "_m": math,
            "_partial": functools.partial,
            "_getattr": getattr,
            "_Sum": Sum,
            "_inf": math.inf,
            "_nan": math.nan,
            "_newbp": calls.new_backprop,
            "_bfold": batched_fold,
            "_batches": batches,
            "_bsteps": batched_steps_body,
            "_ssum": scalar_sum,
            "_bslot": batched_slot_body,
            "_Z": ZERO,
            "_newzero": calls.own_zero,
            "_seed": calls.seed,
            "_readoff": calls.read_off,
            "_ad": calls.call_ad,
            "_ev": calls.prim_event,
            "_ahead": calls.count_ahead,
            "_nonfinite": not_finite,
            "_standin": SHAPE_STAND_IN,
            # Linear bodies whose finiteness checks are deferred (see deferred_checks).
            "__lambdad_deferred__": set(),
            # The pieces of such a body cut into pieces (see lambdad.pieces), to the body.
            "__lambdad_piece_of__": {},
            # Functions calling untested evaluations (see untested_arrays): by name, the
            # globals of those evaluations to the tested ones.
            "__lambdad_untested__": {},
        }
        self.evaluators: dict[int, str] = {}  # (by the evaluation function's id)
        # Functions bound by `let`, by their atoms (a fold's step may be one).
        self.lambda_terms: dict[str, Lam] = {}
        # While a batched fold's step is compiled: its plan, the loop's locals receiving
        # what is sent to the previous step's slots (by name), the bodies by slot.
        self.batching: tuple[BatchedFold, dict[str, str], list] | None = None
        self.sent_to: dict[str, str] = {}
        self.free_spans: dict[str, Span | None] = {}
        # Atoms of pairs built by `(e1, e2)`: temporaries are assigned once and only seen
        # where they are in scope, so a later `let (x, y) =` of one can use the parts.
        self.pairs: dict[str, tuple[str, str]] = {}
        # Atoms already unpacked: the function and blocks of the unpacking, and the parts.
        self.unpacked: dict[str, tuple[_Function, tuple[int, ...], tuple[str, str]]] = {}
        # Globals holding pairs of literals and the zero backpropagator, by their values.
        self.constant_pairs: dict[str, Any] = {}
        # Whether the unit has an array operation (its runs want NumPy's warnings off).
        self.arrays = False

    # ---- names
    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.counter)}"

    def constant(self, value: Any) -> str:
        """A global of the generated module holding ``value`` (user data stays out of code)."""
        name = self.fresh("_k")
        self.namespace[name] = value
        return name

    def lookup(self, name: str, fn: _Function, span: Span | None = None) -> str:
        """The atom for the source variable ``name`` in ``fn``, captured if ``fn`` does not
        bind it.  The entry function captures the term's free variables (``span`` is where
        each first occurs, for errors)."""
        found = fn.scope.get(name)
        if found is None:
            found = fn.captures.get(name)
        if found is None:
            found = fn.captures[name] = fn.fresh("v" if fn.parent is None else "c")
            self.free_spans.setdefault(name, span)
            if self.finite_outside(name, fn):
                fn.finite.add(found)
        return found

    @staticmethod
    def finite_outside(name: str, fn: _Function) -> bool:
        """Whether the value ``fn`` captures as ``name`` is known finite where it is
        captured: checked there (a primal value, mostly, captured by a backpropagator)."""
        outer = fn.parent
        while outer is not None:
            atom = outer.scope.get(name) or outer.captures.get(name)
            if atom is not None:
                return atom in outer.finite
            outer = outer.parent
        return False

    def bind(self, fn: _Function, name: str, atom: str) -> str | None:
        """Binds ``name`` to ``atom`` in ``fn``; returns what it shadowed (for :meth:`unbind`)."""
        if name == "_":
            return None
        previous = fn.scope.get(name)
        fn.scope[name] = atom
        return previous

    @staticmethod
    def unbind(fn: _Function, name: str, previous: str | None) -> None:
        if name == "_":
            return
        if previous is None:
            del fn.scope[name]
        else:
            fn.scope[name] = previous

    def close(self, child: _Function, params: list[str], fn: _Function,
              lam: Lam | None) -> str:
        """Lifts ``child`` to module level; returns the atom of its closure in ``fn``:
        the function itself, or ``functools.partial`` of it over the captured values."""
        name = self.fresh("_f")
        captured = list(child.captures.items())
        self.write_out(name, child, [param for _, param in captured] + params)
        if lam is not None:
            self.lifted.append((name, lam, tuple(source for source, _ in captured)))
        if not captured:
            self.closures[(fn, name)] = (name, [])
            return name
        values = [self.lookup(source, fn, self.free_spans.get(source)) for source, _ in captured]
        t = fn.fresh("t")
        fn.emit(f"{t} = _partial({name}, {', '.join(values)})", values, pure=(t,))
        self.closures[(fn, t)] = (name, values)
        return t

    # ---- driver
    def gen(self, term: Term, fn: _Function):
        """The generator compiling ``term`` into ``fn``; it returns the result's atom.  For
        a leaf (a variable, a literal, ``zero``, a built-in) it is the atom itself, which
        :func:`lambdad.iterate.run` takes as its own result: most subterms of transformed
        programs are leaves, and a generator each would cost more than their compilation."""
        arm = _ARMS.get(type(term))
        if arm is None:
            raise EvalError(f"cannot evaluate a {type(term).__name__} term",
                            getattr(term, "span", None))
        return arm(self, term, fn)

    def compile_unit(self, term: Term, names: Sequence[str] | None
                     ) -> tuple[str, tuple[str, ...], str]:
        """Generates the entry function computing ``term`` from the values of its free
        variables: parameters ``names`` if given (EvalError if ``term`` has another free
        variable), else the free variables in order of first occurrence.  Returns the
        entry's name, its parameters (source names) and the module source."""
        entry = _Function(None)
        result = run(self.gen(term, entry))
        entry.emit(f"return {result}", (result,))
        if names is None:
            names = tuple(entry.captures)
        else:
            names = tuple(names)
            for source in entry.captures:
                if source not in names:
                    raise EvalError(f"unbound variable `{source}`", self.free_spans[source])
        params = [entry.captures.get(source) or entry.fresh("v") for source in names]
        name = self.fresh("_f")
        self.write_out(name, entry, params)
        return name, names, self.assemble()

    def write_out(self, name: str, fn: _Function, params: list[str]) -> None:
        """Writes the finished function ``fn`` as ``def name(params)`` (without its dead
        pure statements, cut into pieces when long) to the module source, recording each
        piece's place (name, first line, number of lines) in ``placed``.  Its statements
        are dropped then: for a long program they take more memory than its text, and the
        statements of every function need not exist at once."""
        out = self.out
        if self.arrays and fn.roles:
            fn.lines = [_zero_if_zero(line, fn.roles.get(id(line))) for line in fn.lines]
        dead = dead_statements(fn.lines)
        kept = [line for index, line in enumerate(fn.lines) if index not in dead] \
            if dead else fn.lines
        if not kept:  # a linear body staging nothing (`\a -o zero <+> zero`)
            kept = [(1, "pass", None, (), ())]
        cut = cut_into_pieces(name, params, kept, self.fresh)
        if len(cut) == 1 and self.arrays and not self.instrumented and fn.deferred is None:
            cut = [(name, params, self.untested_arrays(name, kept, fn.roles))]  # (not cut)
        if len(cut) > 1:
            self.pieces.update(piece for piece, _, _ in cut[1:])
            if name in self.namespace["__lambdad_deferred__"]:
                # An error in a piece of a body whose checks were deferred is found by
                # running the body, pieces included, again with every check (lambdad.guard).
                self.namespace["__lambdad_piece_of__"].update(
                    (piece, name) for piece, _, _ in cut[1:])
        for piece, piece_params, piece_lines in cut:
            first = len(out)
            out.append(f"def {piece}({', '.join(piece_params)}):")
            append, sites = out.append, self.lines  # (once per statement generated)
            for indent, text, site, _, _ in piece_lines:
                append(_INDENTS[indent] + text)
                if site is not None:
                    sites[len(out)] = site
            self.placed.append((piece, first + 1, len(out) - first))
        fn.lines = []
        fn.roles = {}

    def untested_arrays(self, name: str, lines: list[Line], roles: dict[int, tuple]
                        ) -> list[Line]:
        """``lines``, the body of the function ``name``, with the finiteness test of an
        elementwise array result left out where a test later in the body sees a non-finite
        element of it: the result is an argument that propagates (Primitive.propagates) of
        an operation whose own result is tested, or is left out by the same rule (``exp (x
        - m)`` into ``sum``, a tested real).  Only in a body that runs straight through to
        its return (no branch, no call, nothing but primitive operations of arrays and
        reals; not cut into pieces), so that a later test always runs.  Which operation
        made the non-finite element (or failed on one) is found when the error is
        reported, by running the body again with every test (:func:`lambdad.guard.locate`;
        programs are pure).  ``roles`` tells what the statements are (_Function.roles)."""
        for line in lines:
            if line[0] != 1:
                return lines
            if line[2] is None:
                if not (line[1].startswith("return ") or roles.get(id(line)) == (UNPACKS,)):
                    return lines
            elif line[2].primitive.kind not in _STRAIGHT_KINDS:
                return lines
        covered: set[str] = set()  # atoms a later test sees through propagating uses
        tested: set[str] = set()  # atoms of arrays' reals tested by a line of their own
        out = list(lines)
        swapped: dict[str, str] = {}
        for index in range(len(lines) - 1, -1, -1):
            indent, _, site, pure, uses = line = lines[index]
            role = roles.get(id(line))
            if role is None or site is None:
                continue
            if role[0] == TESTS:
                tested.add(role[1])
                continue
            _, atom, primitive, args, into = role
            if primitive.kind == "elementwise":
                if atom in covered and primitive.untested_evaluate is not None and (
                        not into or primitive.untested_evaluate_into is not None):
                    # (an operation writing into an operand still does, untested)
                    writing = bool(into)
                    checked = self.evaluator(primitive, writing=writing)
                    untested = self.evaluator(primitive, untested=True, writing=writing)
                    arguments = f"{into!r}, {args}" if writing else args
                    out[index] = (indent, f"{atom} = {untested}({arguments})", site, pure, uses)
                    swapped[untested] = checked
                seen = True  # tested by its evaluation, or covered
            else:
                seen = atom in tested or atom in covered
            if seen:
                covered.update(site.atoms[position] for position in primitive.propagates)
        if swapped:
            self.namespace["__lambdad_untested__"][name] = swapped
        return out

    def assemble(self) -> str:
        """The module source: every function written out, in the order they were
        finished."""
        return "\n".join(self.out) + "\n"

    # ---- arms: one per construct of syntax.py
    def const(self, term: Const, fn: _Function):
        """A real literal ``2.5``."""
        return _real_atom(term.value)

    def bool_lit(self, term: BoolLit, fn: _Function):
        """``true`` / ``false``."""
        return "True" if term.value else "False"

    def var(self, term: Var, fn: _Function):
        """A variable ``x``: its Python atom (a local, a captured parameter or a literal)."""
        return self.lookup(term.name, fn, term.span)

    def builtin(self, term: Builtin, fn: _Function):
        """A built-in used as a value (``map sin``): a curried :class:`BuiltinFunction`."""
        primitive = self.primitive(term.name, term.span)
        if primitive.arity == 0:
            return self.apply_primitive(primitive, [], None, term.span, fn)
        return self.constant(BuiltinFunction(primitive, (), term.span,
                                             self.calls.apply_builtin))

    def primitive(self, name: str, span: Span | None) -> Primitive:
        primitive = PRIMITIVES.get(name)
        if primitive is None:
            raise EvalError(f"unknown primitive `{name}`", span)
        if primitive.kind in _ARRAY_KINDS:
            self.arrays = True
        return primitive

    def prim(self, term: Prim, fn: _Function):
        """``op e1 .. ek``: arguments left to right, then one statement for the primitive.
        Applied to leaves (most applications), it is compiled at once, without a step."""
        if self.batch_folds and term.op == FOLD.name:
            return self.batched_fold(term, fn)
        if term.op == MAP.name and not self.instrumented:
            lifted = _lifted_reals(term.args[0])
            if lifted is not None:
                return self.lifted_reals(term, lifted, fn)
        primitive = self.primitive(term.op, term.span)
        if len(term.args) != primitive.arity:
            raise EvalError(f"`{primitive.spelling.symbol}` takes {primitive.arity} arguments, "
                            f"given {len(term.args)}", term.span)
        atoms = []
        for index, arg in enumerate(term.args):
            if arg.__class__ not in _LEAVES:  # the rest in a step (no recursion here)
                return self.prim_steps(primitive, term, fn, atoms, index)
            atoms.append(self.gen(arg, fn))
        return self.apply_primitive(primitive, atoms, term, term.span, fn)

    def prim_steps(self, primitive: Primitive, term: Prim, fn: _Function, atoms: list[str],
                   index: int):
        """The rest of :meth:`prim` from the argument at ``index``, not a leaf: each
        argument in turn, then the primitive's statement."""
        for arg in term.args[index:]:
            atom = self.gen(arg, fn)
            if atom.__class__ is types.GeneratorType:
                atom = yield atom
            atoms.append(atom)
        return self.apply_primitive(primitive, atoms, term, term.span, fn)

    def lifted_reals(self, term: Prim, lifted: str, fn: _Function):
        """``map (\\i -> (i, \\a -o zero)) xs`` (or ``(i, 0)``), the reals of a list made
        constants of reverse (forward) mode, as ←D and →D lift the list a locally constant
        primitive returns (``range n``): one comprehension pairing every element with the
        one zero backpropagator, which every evaluation of ``\\a -o zero`` gives (instrumented
        code, whose zeros are each their own, maps the λ), or with ``0.0``."""
        xs = yield self.gen(term.args[1], fn)
        t = fn.fresh("t")
        if lifted == "zero":
            fn.emit(f"{t} = [(_i, _Z) for _i in {xs}]", (xs,), pure=(t,))
        else:
            fn.emit(f"{t} = [(_i, 0.0) for _i in {xs}]", (xs,), pure=(t,))
        return t

    def evaluator(self, primitive: Primitive, in_cotangent: bool = False,
                  accumulating: bool = False, untested: bool = False,
                  writing: bool = False) -> str:
        """The global of generated code holding ``primitive``'s evaluation function (in a
        backpropagator's body, its ``cotangent_evaluate`` when it has one; its
        ``accumulate`` when ``accumulating``; its ``untested_evaluate`` when ``untested``;
        when ``writing`` into an operand, its ``evaluate_into``, or its
        ``untested_evaluate_into`` when also ``untested``)."""
        evaluate = (primitive.accumulate if accumulating
                    else (primitive.untested_evaluate_into if untested
                          else primitive.evaluate_into) if writing
                    else primitive.untested_evaluate if untested
                    else primitive.cotangent_evaluate if in_cotangent else primitive.evaluate)
        found = self.evaluators.get(id(evaluate))
        if found is None:
            found = self.evaluators[id(evaluate)] = self.constant(evaluate)
        return found

    def site(self, primitive: Primitive, span: Span | None, term: Prim | None,
             atoms: Sequence[str], fn: _Function) -> PrimSite:
        """The site of ``primitive`` on ``atoms`` in ``fn``; its term only where events
        report it (so that other code's lines keep no term alive)."""
        return PrimSite(primitive, span, term if self.instrumented else None, tuple(atoms),
                        _source_atoms(span, fn))

    def apply_primitive(self, primitive: Primitive, atoms: list[str], term: Prim | None,
                        span: Span | None, fn: _Function) -> str:
        """Emits the statement evaluating ``primitive`` on ``atoms``: inline when the table
        gives a template, else a call of its ``evaluate`` (or of the ``grad``/``jvp``/``vjp``
        hook for kind ``ad``).  The line is recorded for error locations."""
        key = None
        kind = primitive.kind
        array = kind in _ARRAY_KINDS
        if not self.instrumented:
            if kind == "structural" and (primitive is FST or primitive is SND):
                # a part of a pair built in this function is the atom it was built from
                # (`fst p` of `p = (x, y)`, as `let (x', y') = p` takes it: see unpack),
                # so that what is computed from it is found computed (below)
                known = self.pairs.get((fn, atoms[0]))
                if known is not None:
                    return known[0 if primitive is FST else 1]
            folded = folded_atom(primitive, atoms)
            if folded is None and kind == "elementwise":
                # `1 * a` of an array is `a`, bit for bit: in a backpropagator's body, a
                # cotangent whose finiteness is checked in the gradient, as the product's
                # would be; elsewhere an array tested where it was made, or by a later
                # test that sees its elements (see untested_arrays), as the product's
                # would be (forward mode writes `1 * x'` for the tangent of `x - y`)
                unit = unit_operand(primitive, atoms)
                if unit is not None:
                    # (held by this application now, if it was by its operand)
                    held = fn.owned.get(unit)
                    if held is not None and term is not None and any(
                            held is arg for arg in term.args):
                        fn.owned[unit] = term
                    return unit
            if folded is not None:
                if folded[0] in _LITERAL_FIRST or folded in _BOOL_ATOMS or folded in fn.finite \
                        or (fn.deferred is not None and folded in fn.deferred):
                    return folded
                # x * 1 of an x not known finite: its check is the operation's (not marking
                # x finite here: this line may be in one branch of an `if` only)
                site = self.site(primitive, span, term, atoms, fn)
                fn.emit_with_role((TESTS, folded), f"if {folded} - {folded}: _nonfinite({folded})",
                                  (folded,), site)
                return folded
            if kind == "real" or (fn.deferred is None and primitive.name in _SHARED_ARRAY_RESULTS):
                # The same operation on the same operands, computed by a statement that ran
                # before this one, is its result (forward mode writes `x * dx` twice for
                # `x * x`; a rule's tangent and the backpropagator's primal part under →D
                # compute `maximum_share m r` both); operands are never reassigned where
                # that statement runs.  An array is shared so outside a backpropagator's
                # body only, where no operation writes into an operand.
                key = (primitive.name, *(atoms if not primitive.commutative or atoms[0] <= atoms[1]
                                         else atoms[::-1]))
                found = fn.computed.get(key)
                if found is not None and fn.blocks[:len(found[0])] == found[0]:
                    fn.owned.pop(found[1], None)  # (read twice now: written into by neither)
                    return found[1]
        # (the site as self.site makes it, written out: one per operation of a program)
        site = PrimSite(primitive, span, term if self.instrumented else None, tuple(atoms),
                        _source_atoms(span, fn))
        args = ", ".join(atoms)
        t = f"t{next(fn.names)}"  # (fn.fresh("t"), written out)
        # An array operation in a backpropagator's body computes a cotangent and nothing
        # else (a failure there would be the primal's, which ran): left out when nothing
        # uses it (←D writes the cotangents of constants too: `outer t (ones n) ^ k` sends
        # one to its exponents, which no seed receives).
        pure = (t,) if array and fn.deferred is not None and not self.instrumented else ()
        if self.instrumented and primitive.size is not None:
            fn.emit(f"_ahead({self.constant(site)}, ({args},))", atoms, site)
        if kind == "ad":
            fn.emit(f"{t} = _ad({self.constant(site)}, {args})", atoms, site)
        elif primitive.inline is not None:
            fn.emit(f"{t} = {_positional(primitive.inline, primitive.params).format(*atoms)}",
                    atoms, site)
        elif primitive.inline_at_literals is not None and \
                primitive.inline_at_literals[0](*map(_literal_real, atoms)):
            # (an overflow there is reported with the evaluation's message: guard.describe)
            template = _positional(primitive.inline_at_literals[1], primitive.params)
            fn.emit(f"{t} = {template.format(*atoms)}", atoms, site)
        elif primitive.cotangent_evaluate is not None and fn.deferred is not None:
            # in a backpropagator's body (its results are checked in the gradient); an
            # elementwise operation with an operand that is a new array made right there
            # for it (the partial sum of `u1 + u2 + u3`, the product `z * a` in
            # `2 * (z * a)`, say) writes into it
            spread = spread_operand(primitive, atoms, fn)
            if spread is not None:
                # `x * spread x c` is `x * c` bit for bit: the real broadcast by the
                # product, no array of copies of c made (sum's cotangent, multiplied by
                # exp's partial in `log (sum (exp v))`)
                atoms = [*atoms]
                atoms[spread[0]] = spread[1]
                args = ", ".join(atoms)
                into: tuple[int, ...] = ()
            else:
                into = (held_operands(term, atoms, fn)
                        if primitive.accumulate is not None and not self.instrumented else ())
            if not into:
                fn.emit(f"{t} = {self.evaluator(primitive, True)}({args})", atoms, site, pure)
            else:
                for k in into:
                    fn.owned.pop(atoms[k], None)
                fn.emit(f"{t} = {self.evaluator(primitive, True, True)}({into!r}, {args})",
                        atoms, site, pure)
        elif primitive.evaluate_into is not None and fn.deferred is None \
                and not self.instrumented and held_operands(term, atoms, fn):
            # outside a backpropagator's body, an elementwise operation with an operand
            # that is a new array made right there for it (the product in `p @ q - r`)
            # writes into it, tested as its evaluation would be: one array less to make
            into = held_operands(term, atoms, fn)
            for k in into:
                fn.owned.pop(atoms[k], None)
                # (its value is gone: no later operation finds it computed)
                for found_key in [key for key, found in fn.computed.items()
                                  if found[1] == atoms[k]]:
                    del fn.computed[found_key]
            # (where untested_arrays leaves its test out, it is the plain evaluation again)
            fn.emit_with_role((MAKES, t, primitive, args, into),
                              f"{t} = {self.evaluator(primitive, writing=True)}({into!r}, {args})",
                              atoms, site)
        elif primitive.evaluate is not None:
            if array:
                fn.emit_with_role((MAKES, t, primitive, args, ()),
                                  f"{t} = {self.evaluator(primitive)}({args})", atoms, site, pure)
            else:
                fn.emit(f"{t} = {self.evaluator(primitive)}({args})", atoms, site, pure)
            if primitive.propagates and kind == "array" and fn.deferred is None \
                    and isinstance(result_after(primitive.type, primitive.arity), RealT):
                # a real made from arrays (`sum`): tested as the reals of real operations
                # are, which a non-finite element reaching it fails (see untested_arrays)
                fn.emit_with_role((TESTS, t), f"if {t} - {t}: _nonfinite({t})", (t,), site)
                fn.finite.add(t)
        else:
            raise EvalError(f"`{primitive.spelling.symbol}` cannot be evaluated", span)
        if array:
            if pure:  # (in a linear body, not instrumented)
                if primitive is SPREAD:
                    fn.spreads[t] = (atoms[0], atoms[1])
                memory = primitive.cotangent_memory
                if term is not None and memory is not None and (
                        memory == NEW_ARRAY or fn.owned.get(atoms[memory]) is term.args[memory]):
                    # what a later operation of this body may write into (see held_operands)
                    fn.owned[t] = term
            elif (fn.deferred is None and term is not None and not self.instrumented
                  and primitive.cotangent_memory == NEW_ARRAY):
                # a new array outside a backpropagator's body: what the operation applied
                # to it (alone) may write into, as there (see held_operands)
                fn.owned[t] = term
        elif kind == "real" and fn.deferred is not None and primitive.name in _PROPAGATING:
            fn.deferred[t] = site  # checked where it is used (deferred_checks)
        elif kind == "real":
            # A real result is finite or the run stops here, naming the operation: for a
            # finite t, t - t is 0.0 (false); for inf or nan it is nan (true).
            # The check is short (compiling it costs as much as the operation's own line);
            # the site, the operands and the message come from the line table (_locate).
            # It is left out where it cannot fire: `sin x` of an x known finite.
            if not (primitive.finite_at_finite and all(
                    atom in fn.finite or _literal_real(atom) is not None for atom in atoms)):
                # (no role: untested_arrays reads the tests of arrays' results only)
                fn.emit(f"if {t} - {t}: _nonfinite({t})", (t,), site)
            fn.finite.add(t)
        if self.instrumented:
            fn.emit(f"_ev({self.constant(site)}, ({args}{',' if atoms else ''}), {t})",
                    (*atoms, t))
        elif key is not None:
            fn.computed[key] = (fn.blocks, t)
        return t

    def lam(self, term: Lam, fn: _Function):
        """``\\x -> e``: a lifted function of (captured..., x); its closure as the value.

        When ``e`` ends in a closure made here (``\\x -> let ... in \\y -> e'``) and the
        function is short, a second function of (captured..., x, y) is lifted too, ending
        in a call of the inner function instead of building its closure: ``fold`` calls it
        (see :data:`lambdad.primitives.TWO_ARGUMENTS`)."""
        child = _Function(fn)
        param = child.fresh("v")
        self.bind(child, term.param, param)
        body = yield self.gen(term.body, child)
        child.emit(f"return {body}", (body,))
        lines = child.lines  # (close writes the child out, dropping its statements)
        closure = self.close(child, [param], fn, term)
        inner = self.closures.get((child, body))
        if inner is not None and len(lines) <= _MAX_TWO_ARGUMENT_LINES:
            inner_name, inner_values = inner
            second = child.fresh("v")
            both = _Function(fn, child.names)
            call = f"{inner_name}({', '.join([*inner_values, second])})"
            # The same statements (the closure's, now dead, are dropped), then the call.
            both.lines = lines[:-1] + [(1, f"return {call}", None, (),
                                        (*inner_values, second))]
            outer_name, _ = self.closures[(fn, closure)]
            captured = [inner_param for _, inner_param in child.captures.items()]
            name = self.fresh("_f")
            self.write_out(name, both, [*captured, param, second])
            self.two_arguments.append((outer_name, name))
        return closure

    def app(self, term: App, fn: _Function):
        """``f a``: a call; ``p a1 .. ak`` with a built-in ``p`` of arity k is evaluated as
        the primitive application it is.  ``f a b`` calls the function of both arguments
        that ``f`` offers (see :meth:`lam`) when it has one, instead of building the
        closure ``f a``; ``b`` is then a variable or a literal, whose evaluation before the
        call ``f a`` cannot fail.  In ``f a b c`` that is ``f a b``, the pair nearest
        ``f``, whose ``f`` is the function most likely to offer it."""
        head: Term = term
        args: list[Term] = []
        while isinstance(head, App) and len(args) < _MAX_ARITY:
            args.append(head.arg)
            head = head.fn
        if isinstance(head, Builtin):
            primitive = self.primitive(head.name, head.span)
            if primitive.arity == len(args):
                atoms = []
                for arg in reversed(args):
                    atoms.append((yield self.gen(arg, fn)))
                return self.apply_primitive(primitive, atoms, None, term.span, fn)
        if (isinstance(term.fn, App) and not isinstance(term.fn.fn, App)
                and isinstance(term.arg, (Var, Const, BoolLit))):
            f = yield self.gen(term.fn.fn, fn)
            first = yield self.gen(term.fn.arg, fn)
            second = yield self.gen(term.arg, fn)
            both, t = fn.fresh("t"), fn.fresh("t")
            fn.emit(f"{both} = _getattr({f}, {TWO_ARGUMENTS!r}, None)", (f,), pure=(both,))
            fn.emit(f"{t} = {both}({first}, {second}) if {both} is not None "
                    f"else {f}({first})({second})", (both, f, first, second))
            return t
        f = yield self.gen(term.fn, fn)
        x = yield self.gen(term.arg, fn)
        t = fn.fresh("t")
        fn.emit(f"{t} = {f}({x})", (f, x))
        return t

    def let(self, term: Let | LetPair, fn: _Function,
            then: Callable[[Term, _Function], Any] | None = None):
        """``let x = e1 in e2``: ``x`` names the atom of ``e1`` (no copy); ``let (x, y) =
        e1 in e2``: one unpacking statement (see :meth:`unpack`).  ``e2`` is compiled by
        ``then`` (default :meth:`gen`; :meth:`staged` in a linear body).

        A spine of them is one step, a loop: ``then`` of a ``let`` is this arm again (every
        ``then`` passes a ``let`` back here), and a long straight-line program is mostly
        one spine."""
        undo: list[tuple[str, str | None]] = []  # (name, what it shadowed), in order
        uses: dict[str, Var | None] | None = None
        while True:
            kind = term.__class__
            if kind is not Let and kind is not LetPair:
                break
            value = self.gen(term.value, fn)
            if value.__class__ is types.GeneratorType:  # not a leaf
                value = yield value
            if kind is Let:
                if isinstance(term.value, Lam):
                    # a fold's step, maybe (batched_fold)
                    self.lambda_terms[(fn, value)] = term.value
                elif fn.owned.get(value) is term.value:
                    # a new array of a backpropagator's body, bound to a name used once
                    # (not in a λ): held by that use
                    if uses is None:
                        uses = _single_uses(term)
                    use = uses.get(term.name)
                    if use is not None:
                        fn.owned[value] = use
                undo.append((term.name, self.bind(fn, term.name, value)))
            else:
                first, second = self.unpack(value, fn)
                undo.append((term.first, self.bind(fn, term.first, first)))
                undo.append((term.second, self.bind(fn, term.second, second)))
            term = term.body
        body = yield (then or self.gen)(term, fn)
        # Unbind in reverse: `let (x, x) = ...` binds the second x last.
        for name, previous in reversed(undo):
            self.unbind(fn, name, previous)
        return body

    def unpack(self, value: str, fn: _Function) -> tuple[str, str]:
        """The atoms of the parts of the pair ``value`` in ``fn``: those it was built from
        here, or those a statement that runs before this one unpacked it to, else two new
        locals unpacked by a new statement."""
        known = self.pairs.get((fn, value))
        if known is not None:
            return known
        unpacked = self.unpacked.get((fn, value))
        if (unpacked is not None and unpacked[0] is fn
                and fn.blocks[:len(unpacked[1])] == unpacked[1]):
            return unpacked[2]
        first, second = fn.fresh("v"), fn.fresh("v")
        fn.emit_with_role((UNPACKS,), f"{first}, {second} = {value}", (value,),
                          pure=(first, second))
        self.unpacked[(fn, value)] = (fn, fn.blocks, (first, second))
        return first, second

    def pair(self, term: Pair, fn: _Function):
        """``(e1, e2)``."""
        first = self.gen(term.first, fn)
        if first.__class__ is types.GeneratorType:  # (parts are mostly leaves: no step)
            first = yield first
        second = self.gen(term.second, fn)
        if second.__class__ is types.GeneratorType:
            second = yield second
        value = self.constant_value(first), self.constant_value(second)
        if None not in value:
            # A literal lifted by ←D, `(0, \a -o zero)`, and pairs of such (a fold's
            # start, mostly): one tuple made when compiled, not at every evaluation.
            t = self.constant(value)
            self.constant_pairs[t] = value
        else:
            t = fn.fresh("t")
            fn.emit(f"{t} = ({first}, {second})", (first, second), pure=(t,))
        self.pairs[(fn, t)] = (first, second)
        return t

    def constant_value(self, atom: str) -> Any:
        """The value of ``atom`` when it is a real literal, the zero backpropagator or a
        pair of such made constant by :meth:`pair`, else None."""
        if atom == "_Z":
            return ZERO
        return self.constant_pairs.get(atom, _literal_real(atom))

    def if_(self, term: If, fn: _Function):
        """``if c then e1 else e2``: Python ``if``/``else``; only the branch taken runs."""
        cond = yield self.gen(term.cond, fn)
        result = fn.fresh("t")
        fn.emit(f"if {cond}:", (cond,))
        for branch, header in ((term.then, None), (term.orelse, "else:")):
            if header is not None:
                fn.emit(header)
            fn.indent += 1
            fn.if_depth += 1
            enclosing = fn.blocks
            fn.blocks = enclosing + (next(self.counter),)
            if fn.if_depth > _MAX_IF_DEPTH:
                child = _Function(fn)
                atom = yield self.gen(branch, child)
                child.emit(f"return {atom}", (atom,))
                closure = self.close(child, [], fn, None)
                call = fn.fresh("t")
                fn.emit(f"{call} = {closure}()", (closure,))
                atom = call
            else:
                atom = yield self.gen(branch, fn)
            fn.emit(f"{result} = {atom}", (atom,))
            fn.blocks = enclosing
            fn.indent -= 1
            fn.if_depth -= 1
        return result

    def list_lit(self, term: ListLit, fn: _Function):
        """``[e1, ..., en]``."""
        atoms = []
        for item in term.items:
            atoms.append((yield self.gen(item, fn)))
        t = fn.fresh("t")
        fn.emit(f"{t} = [{', '.join(atoms)}]", atoms, pure=(t,))
        return t

    def annot(self, term: Annot, fn: _Function):
        """``(e : A)``: the annotation was checked; evaluates ``e``."""
        return (yield self.gen(term.expr, fn))

# The arm compiling each construct of syntax.py, called as ``arm(generator, term, fn)``: a
# table of the class, not of each generator, whose bound methods would make a reference
# cycle that keeps everything it generated alive until the cyclic collector runs.
# The constructs whose arms return an atom at once (no step, no recursion).
_LEAVES = frozenset((Const, BoolLit, Var, Builtin, Zero))

_ARMS: dict[type, Callable[[_CodeGenerator, Any, _Function], Any]] = {
    Const: _CodeGenerator.const,
    BoolLit: _CodeGenerator.bool_lit,
    Var: _CodeGenerator.var,
    Builtin: _CodeGenerator.builtin,
    Prim: _CodeGenerator.prim,
    Lam: _CodeGenerator.lam,
    App: _CodeGenerator.app,
    Let: _CodeGenerator.let,
    LetPair: _CodeGenerator.let,
    Pair: _CodeGenerator.pair,
    If: _CodeGenerator.if_,
    ListLit: _CodeGenerator.list_lit,
    Annot: _CodeGenerator.annot,
    LinLam: _CodeGenerator.lin_lam,
    Zero: _CodeGenerator.zero,
    Plus: _CodeGenerator.plus,
    Seed: _CodeGenerator.seed,
    ReadOff: _CodeGenerator.read_off,
}


@attrs.frozen
class CompileOptions:
    """The settings a unit is compiled under: with the term and its parameters, all that
    makes two compilations differ (the interpreter keys its compiled units by them).

    ``instrumented`` code reports every primitive to ``RuntimeCalls.prim_event`` (events,
    step and time limits).  ``batch_folds`` is for a fused ←D program (the caller knows it
    made one): a ``fold`` whose step qualifies (:func:`lambdad.batching.batched_fold_step`)
    runs its steps' backpropagator bodies as one loop, the backward phase of those steps
    (never in instrumented code, whose backpropagators are each counted)."""

    instrumented: bool = False
    batch_folds: bool = False
    # Closures the unit makes carry their λ-terms (see values.function_parts).  Not those
    # of an image of a transformation, which nothing looks inside (what a differentiation
    # returns is made again from terms): its code then keeps no term alive.
    closure_terms: bool = True


@attrs.frozen
class RuntimeCalls:
    """What generated code calls at run time, supplied by the interpreter running it.

    ``new_backprop(body, captured, span)`` stamps a backpropagator on the current tape;
    ``own_zero(span)`` is a zero backpropagator of its own (instrumented runs; the others
    share :data:`~lambdad.tape.ZERO`); ``seed(i, span)`` and ``read_off(point, cotangent)`` are
    ``seed i`` and ``cotangent x e``; ``call_ad(site, *args)`` runs ``grad``/``jvp``/``vjp``;
    ``prim_event(site, args, result)`` counts steps and reports events (instrumented
    runs), ``count_ahead(site, args)`` checks the steps of the list a primitive is about
    to make (its ``size``) against the step limit; ``apply_builtin`` is what a built-in used
    as a value runs.
    """

    new_backprop: Callable[..., Any]
    own_zero: Callable[[Span | None], Any]
    seed: Callable[[int, Span | None], Any]
    read_off: Callable[[Any, Any], Any]
    call_ad: Callable[..., Any]
    prim_event: Callable[[PrimSite, tuple, Any], None]
    count_ahead: Callable[[PrimSite, tuple], None]
    apply_builtin: Callable[[BuiltinFunction, tuple], Any]


def compile_term(term: Term, names: Sequence[str] | None, calls: RuntimeCalls, *,
                 options: CompileOptions, filename: str
                 ) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """The entry function computing ``term`` from the values of its free variables, and
    its parameters (source names): ``names`` if given, else the free variables in order of
    first occurrence; compiled under ``options`` (see :class:`CompileOptions`).  The entry
    function's ``__lambdad_arrays__`` says whether the unit has array operations.

    Raises EvalError for a free variable not in ``names`` or a term that cannot be
    evaluated, ResourceError when the program is too large for Python to compile.
    """
    generator = _CodeGenerator(calls, options)
    namespace = generator.namespace
    # Nothing cyclic is made while the syntax and code structures are built.
    with collector_paused():
        try:
            entry, names, source = generator.compile_unit(term, names)
            define_functions(source, generator.out, generator.placed, namespace, filename,
                             generator.pieces)
        except (RecursionError, MemoryError):
            raise ResourceError("the program is too large to compile",
                                getattr(term, "span", None)) from None
    namespace["__lambdad_source__"] = source
    namespace[entry].__lambdad_arrays__ = generator.arrays
    if options.closure_terms:
        for name, lam, captured in generator.lifted:
            function = namespace[name]
            function.__lambdad_lam__ = lam
            function.__lambdad_captured__ = captured
    for name, both in generator.two_arguments:
        setattr(namespace[name], TWO_ARGUMENTS, namespace[both])
    return namespace[entry], names

