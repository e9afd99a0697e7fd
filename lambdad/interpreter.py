"""The interpreter: source and target terms compiled to Python, then run.

Each term is compiled once (cached per term object) into Python source built only from the
checked syntax tree, with generated names (no user text ever reaches the code):

* A-normal form: every primitive evaluation is one statement on its own line, so a failing
  line maps back to the primitive's span (a line table per compiled unit), and source
  nesting never becomes nesting of Python expressions.
* Lambda lifting: every ``\\x -> e`` (and ``\\a -o e``) becomes a module-level function whose
  first parameters are the variables it captures; the closure value is
  ``functools.partial(function, *captured)``.  Lifted functions carry ``__lambdad_lam__``
  and ``__lambdad_captured__`` so :func:`lambdad.values.function_parts` can take closures
  apart (the AD glue transforms them).
* ``if`` becomes Python ``if``/``else`` statements; a branch nested deeper than
  ``_MAX_IF_DEPTH`` is lifted into a function of its own (CPython limits indentation).
* ``let`` binds names to atoms without copying; ``let (x, y) =`` of a pair built in the same
  function uses its parts directly, and pure statements left unused (such tuples) are
  dropped, which matters for the ``let``-heavy output of the transformations.

The code generator is a set of generator functions driven by :func:`lambdad.iterate.run`,
so terms nested 10^4 deep compile.  Generated code runs under :meth:`Interpreter._run`,
which raises Python's recursion limit for deep call chains at run time and turns Python
exceptions into located :class:`~lambdad.errors.EvalError` / ``ResourceError``.

The runtime state (the current :class:`~lambdad.values.Tape`, the strategy, the hooks for
``grad``/``jvp``/``vjp``, the event callback) lives on the :class:`Interpreter` object whose
generated code runs; there is no module-level mutable state.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import itertools
import math
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from .errors import DerivativeSpan, EvalError, LambdadError, ResourceError, Span, UsageError
from .iterate import run
from .primitives import OPERATORS, PRIMITIVES, TWO_ARGUMENTS, DomainError, Primitive
from .syntax import (
    Annot,
    App,
    BoolLit,
    Builtin,
    Const,
    Decl,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    Module,
    Pair,
    Plus,
    Prim,
    ReadOff,
    Seed,
    Term,
    Var,
    Zero,
    walk,
)
from .values import (
    FORWARD_LEVEL,
    STRATEGIES,
    Arithmetic,
    Dual,
    Reverse,
    Tagged,
    plain_real,
    Backprop,
    BackpropCreated,
    BuiltinFunction,
    PrimEvent,
    Sum,
    Tape,
    backward,
    format_value,
    read_off_point,
)

try:  # POSIX only; without it the default stack budget is assumed
    import resource
except ImportError:  # pragma: no cover - non-POSIX platforms
    resource = None  # type: ignore[assignment]

# Deepest `if` nesting kept inline in one Python function (CPython allows 100 indents).
_MAX_IF_DEPTH = 48
# Longest function (in statements) also compiled as a function of two arguments (see
# _CodeGenerator.lam): the copy saves a closure per call, which only matters for short ones.
_MAX_TWO_ARGUMENT_LINES = 24
# Compiled units kept per interpreter; the least recently used goes first.  Each entry keeps
# its term alive, so the term's id cannot be reused while it is cached.
_CACHE_SIZE = 8192
# Built-ins applied to this many arguments at most (peeling `f a b c` for a built-in head).
_MAX_ARITY = max(p.arity for p in PRIMITIVES.values())

# The arithmetic of tagged reals, found by spelling like the rules' (AD.md writes them so).
_ARITHMETIC = {"+": OPERATORS[("+", "infix")], "*": OPERATORS[("*", "infix")],
               "-": OPERATORS[("-", "infix")], "/": OPERATORS[("/", "infix")],
               "neg": OPERATORS[("-", "prefix")]}

# The runtime types of the reals of a nesting level.
_TAGGED = frozenset((Dual, Reverse))

# Kinds of primitive that take reals: inside a nesting level they go through
# Interpreter.generic_apply, which accepts the tagged reals of every level.
_GENERIC_KINDS = frozenset(("real", "test", "constant"))

# Python exceptions a primitive's evaluation may raise on bad input; they become EvalErrors.
_RUNTIME_ERRORS = (DomainError, ArithmeticError, ValueError)

# Call depth at run time: the C stack each Python-level call of generated code costs is
# about 0.5 KB on CPython 3.11; the recursion limit is set from the stack available, with a
# factor of two to spare, so deep programs hit RecursionError (reported) before a segfault.
_BYTES_PER_CALL = 1024
_DEFAULT_STACK = 8 * 1024 * 1024
# On Linux the main thread's stack grows on demand up to RLIMIT_STACK, read at fault time,
# so raising the soft limit while generated code runs gives deep programs room.  Kept well
# under the 128 MB the kernel leaves between the stack and the mappings below it.
_GROWN_STACK = 64 * 1024 * 1024
_CAN_GROW_STACK = resource is not None and sys.platform.startswith("linux")

# The only Python built-ins generated code can reach (for `inline` templates of the
# primitive table): pure functions, nothing that touches the host.
_SAFE_BUILTINS = ("abs", "all", "any", "bool", "divmod", "float", "int", "isinstance", "len",
                  "list", "max", "min", "pow", "range", "round", "sum", "tuple", "zip")


@attrs.frozen
class TapeStats:
    """What the backpropagators of one run cost."""

    created: int
    bodies_run: int

    def __str__(self) -> str:
        return (f"backpropagators created: {self.created}\n"
                f"backpropagator bodies run: {self.bodies_run}")


@attrs.frozen
class _PrimSite:
    """A primitive evaluation site of generated code: what events and errors report."""

    primitive: Primitive
    span: Span | None
    term: Prim | None
    atoms: tuple[str, ...] = ()


# --------------------------------------------------------------------------- code generation


class _Function:
    """A Python function being generated: a lifted ``\\x -> e`` or ``\\a -o e``, a lifted
    ``if`` branch, or the entry point of a compiled term.

    ``scope`` maps source names bound inside it to Python atoms (names or literals);
    ``captures`` maps captured source names to the parameters receiving them, in order.
    """

    __slots__ = ("parent", "scope", "captures", "lines", "indent", "if_depth", "blocks")

    def __init__(self, parent: "_Function | None"):
        self.parent = parent
        self.scope: dict[str, str] = {}
        self.captures: dict[str, str] = {}
        # (indent, text, primitive site, names defined if the statement is pure)
        self.lines: list[tuple[int, str, _PrimSite | None, tuple[str, ...]]] = []
        self.indent = 1
        self.if_depth = 0
        # Ids of the blocks (if/else branches) enclosing the statement being generated.
        self.blocks: tuple[int, ...] = ()

    def emit(self, text: str, site: _PrimSite | None = None,
             pure: tuple[str, ...] = ()) -> None:
        """Appends a statement; ``pure`` names what it defines when it has no effect and
        cannot fail, so it may be dropped if they are never used."""
        self.lines.append((self.indent, text, site, pure))


# Generated names in a statement (temporaries, parameters, lifted functions).
_NAME = re.compile(r"\b(?:[tvc]|_f)\d+\b")


def _real_atom(value: float) -> str:
    """A Python expression for the real ``value`` (parenthesised when negative)."""
    value = float(value)
    if value != value:
        return "_nan"
    if math.isinf(value):
        return "_inf" if value > 0 else "(-_inf)"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def _stageable(body: Term) -> bool:
    """Whether the linear body ``body`` is a tree of ``<+>``, ``zero``, ``let`` and
    applications ``g e`` other than saturated built-ins (what :meth:`_CodeGenerator.staged`
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


class _CodeGenerator:
    """Compiles one term (a *unit*) to a Python module; see the module docstring."""

    def __init__(self, runtime: "Interpreter", instrumented: bool, generic: bool = False):
        self.runtime = runtime
        self.instrumented = instrumented
        # The variant run inside a nesting level: real primitives accept tagged reals.
        self.generic = generic
        self.counter = itertools.count()
        self.functions: list[tuple[str, _Function, list[str]]] = []
        self.lifted: list[tuple[str, Lam, tuple[str, ...]]] = []
        # Closure atoms made by `close`: the lifted function and the captured atoms.
        self.closures: dict[str, tuple[str, list[str]]] = {}
        # (function of x returning a closure of y, the same taking x and y at once)
        self.two_arguments: list[tuple[str, str]] = []
        self.lines: dict[int, _PrimSite] = {}
        self.namespace: dict[str, Any] = {
            "__builtins__": {name: getattr(builtins, name) for name in _SAFE_BUILTINS},
            "__lambdad_lines__": self.lines,
            "_m": math,
            "_partial": functools.partial,
            "_Sum": Sum,
            "_inf": math.inf,
            "_nan": math.nan,
            "_rt": runtime,
            "_newbp": (runtime._new_backprop_traced if instrumented
                       else runtime._new_backprop),
            "_newzero": runtime._new_constant_traced,
            "_seed": runtime._seed,
            "_readoff": runtime._read_off,
            "_ad": runtime._call_ad,
            "_ev": runtime._prim_event,
            "_gp": runtime.generic_apply,
            "_nonfinite": _not_finite,
        }
        self.evaluators: dict[str, str] = {}
        self.free_spans: dict[str, Span | None] = {}
        # Atoms of pairs built by `(e1, e2)`: temporaries are assigned once and only seen
        # where they are in scope, so a later `let (x, y) =` of one can use the parts.
        self.pairs: dict[str, tuple[str, str]] = {}
        # Atoms already unpacked: the function and blocks of the unpacking, and the parts.
        self.unpacked: dict[str, tuple[_Function, tuple[int, ...], tuple[str, str]]] = {}
        self.arms: dict[type, Callable[[Any, _Function], Any]] = {
            Const: self.const,
            BoolLit: self.bool_lit,
            Var: self.var,
            Builtin: self.builtin,
            Prim: self.prim,
            Lam: self.lam,
            App: self.app,
            Let: self.let,
            LetPair: self.let_pair,
            Pair: self.pair,
            If: self.if_,
            ListLit: self.list_lit,
            Annot: self.annot,
            LinLam: self.lin_lam,
            Zero: self.zero,
            Plus: self.plus,
            Seed: self.seed,
            ReadOff: self.read_off,
        }

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
            found = fn.captures[name] = self.fresh("v" if fn.parent is None else "c")
            self.free_spans.setdefault(name, span)
        return found

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
        self.functions.append((name, child, [param for _, param in captured] + params))
        if lam is not None:
            self.lifted.append((name, lam, tuple(source for source, _ in captured)))
        if not captured:
            self.closures[name] = (name, [])
            return name
        values = [self.lookup(source, fn, self.free_spans.get(source)) for source, _ in captured]
        t = self.fresh("t")
        fn.emit(f"{t} = _partial({name}, {', '.join(values)})", pure=(t,))
        self.closures[t] = (name, values)
        return t

    # ---- driver
    def gen(self, term: Term, fn: _Function):
        """The generator compiling ``term`` into ``fn``; it returns the result's atom."""
        arm = self.arms.get(type(term))
        if arm is None:
            raise EvalError(f"cannot evaluate a {type(term).__name__} term",
                            getattr(term, "span", None))
        return arm(term, fn)

    def compile_unit(self, term: Term, names: Sequence[str] | None
                     ) -> tuple[str, tuple[str, ...], str]:
        """Generates the entry function computing ``term`` from the values of its free
        variables: parameters ``names`` if given (EvalError if ``term`` has another free
        variable), else the free variables in order of first occurrence.  Returns the
        entry's name, its parameters (source names) and the module source."""
        entry = _Function(None)
        result = run(self.gen(term, entry))
        entry.emit(f"return {result}")
        if names is None:
            names = tuple(entry.captures)
        else:
            names = tuple(names)
            for source in entry.captures:
                if source not in names:
                    raise EvalError(f"unbound variable `{source}`", self.free_spans[source])
        params = [entry.captures.get(source) or self.fresh("v") for source in names]
        name = self.fresh("_f")
        self.functions.append((name, entry, params))
        return name, names, self.assemble()

    def assemble(self) -> str:
        """The module source: every function, without its dead pure statements."""
        dead = self.dead_statements()
        out: list[str] = []
        for name, fn, params in self.functions:
            out.append(f"def {name}({', '.join(params)}):")
            for index, (indent, text, site, _) in enumerate(fn.lines):
                if (name, index) in dead:
                    continue
                out.append("    " * indent + text)
                if site is not None:
                    self.lines[len(out)] = site
        return "\n".join(out) + "\n"

    def dead_statements(self) -> set[tuple[str, int]]:
        """The pure statements whose names are never used, directly or through other dead
        statements (``let``-bound pairs taken apart at once leave their tuple unused).
        Generated names are local to their function (values reach other functions as
        parameters), so uses are counted per function."""
        functions = {name: fn for name, fn, _ in self.functions}

        def unused(key: tuple[str, int]) -> bool:
            defined = functions[key[0]].lines[key[1]][3]
            return all(uses.get((key[0], d), 0) == 0 for d in defined)

        uses: dict[tuple[str, str], int] = {}
        definer: dict[tuple[str, str], tuple[str, int]] = {}
        used_by: dict[tuple[str, int], list[str]] = {}
        for name, fn, _ in self.functions:
            for index, (_, text, _, pure) in enumerate(fn.lines):
                if pure:
                    text = text.split("=", 1)[1]
                    for defined in pure:
                        definer[(name, defined)] = (name, index)
                    used_by[(name, index)] = _NAME.findall(text)
                for used in _NAME.findall(text):
                    uses[(name, used)] = uses.get((name, used), 0) + 1
        dead: set[tuple[str, int]] = set()
        work = [key for key in used_by if unused(key)]
        while work:
            key = work.pop()
            if key in dead:
                continue
            dead.add(key)
            function = key[0]
            for used in used_by[key]:
                uses[(function, used)] -= 1
                if uses[(function, used)] == 0:
                    other = definer.get((function, used))
                    if other is not None and other not in dead and unused(other):
                        work.append(other)
        return dead

    # ---- arms: one per construct of syntax.py
    def const(self, term: Const, fn: _Function):
        """A real literal ``2.5``."""
        return _real_atom(term.value)
        yield  # pragma: no cover - makes the arm a generator

    def bool_lit(self, term: BoolLit, fn: _Function):
        """``true`` / ``false``."""
        return "True" if term.value else "False"
        yield  # pragma: no cover

    def var(self, term: Var, fn: _Function):
        """A variable ``x``: its Python atom (a local, a captured parameter or a literal)."""
        return self.lookup(term.name, fn, term.span)
        yield  # pragma: no cover

    def builtin(self, term: Builtin, fn: _Function):
        """A built-in used as a value (``map sin``): a curried :class:`BuiltinFunction`."""
        primitive = self.primitive(term.name, term.span)
        if primitive.arity == 0:
            return self.apply_primitive(primitive, [], None, term.span, fn)
        runtime = self.runtime
        apply = runtime._apply_builtin_traced if self.instrumented else runtime._apply_builtin
        if self.generic:
            apply = runtime._apply_builtin_generic
        return self.constant(BuiltinFunction(primitive, (), term.span, apply))
        yield  # pragma: no cover

    def primitive(self, name: str, span: Span | None) -> Primitive:
        primitive = PRIMITIVES.get(name)
        if primitive is None:
            raise EvalError(f"unknown primitive `{name}`", span)
        return primitive

    def prim(self, term: Prim, fn: _Function):
        """``op e1 .. ek``: arguments left to right, then one statement for the primitive."""
        primitive = self.primitive(term.op, term.span)
        if len(term.args) != primitive.arity:
            raise EvalError(f"`{primitive.spelling.symbol}` takes {primitive.arity} arguments, "
                            f"given {len(term.args)}", term.span)
        atoms = []
        for arg in term.args:
            atoms.append((yield self.gen(arg, fn)))
        return self.apply_primitive(primitive, atoms, term, term.span, fn)

    def apply_primitive(self, primitive: Primitive, atoms: list[str], term: Prim | None,
                        span: Span | None, fn: _Function) -> str:
        """Emits the statement evaluating ``primitive`` on ``atoms``: inline when the table
        gives a template, else a call of its ``evaluate`` (or of the ``grad``/``jvp``/``vjp``
        hook for kind ``ad``).  The line is recorded for error locations."""
        site = _PrimSite(primitive, span, term, tuple(atoms))
        args = ", ".join(atoms)
        t = self.fresh("t")
        if primitive.kind == "ad":
            fn.emit(f"{t} = _ad({self.constant(site)}, {args})", site)
        elif self.generic and primitive.kind in _GENERIC_KINDS:
            fn.emit(f"{t} = _gp({self.constant(primitive)}, {args})", site)
        elif primitive.inline is not None:
            fn.emit(f"{t} = {primitive.inline.format(**dict(zip(primitive.params, atoms)))}", site)
        elif primitive.evaluate is not None:
            evaluator = self.evaluators.get(primitive.name)
            if evaluator is None:
                evaluator = self.evaluators[primitive.name] = self.constant(primitive.evaluate)
            fn.emit(f"{t} = {evaluator}({args})", site)
        else:
            raise EvalError(f"`{primitive.spelling.symbol}` cannot be evaluated", span)
        if primitive.kind == "real" and not (self.generic and primitive.kind in _GENERIC_KINDS):
            # A real result is finite or the run stops here, naming the operation: for a
            # finite t, t - t is 0.0 (false); for inf or nan it is nan (true).  (Tagged
            # reals of nested differentiation are left to the generic path.)
            # The check is short (compiling it costs as much as the operation's own line);
            # the site, the operands and the message come from the line table (_locate).
            fn.emit(f"if {t} - {t}: _nonfinite({t})", site)
        if self.instrumented:
            fn.emit(f"_ev({self.constant(site)}, ({args}{',' if atoms else ''}), {t})")
        return t

    def lam(self, term: Lam, fn: _Function):
        """``\\x -> e``: a lifted function of (captured..., x); its closure as the value.

        When ``e`` ends in a closure made here (``\\x -> let ... in \\y -> e'``) and the
        function is short, a second function of (captured..., x, y) is lifted too, ending
        in a call of the inner function instead of building its closure: ``fold`` calls it
        (see :data:`lambdad.primitives.TWO_ARGUMENTS`)."""
        child = _Function(fn)
        param = self.fresh("v")
        self.bind(child, term.param, param)
        body = yield self.gen(term.body, child)
        child.emit(f"return {body}")
        closure = self.close(child, [param], fn, term)
        inner = self.closures.get(body)
        if inner is not None and len(child.lines) <= _MAX_TWO_ARGUMENT_LINES:
            inner_name, inner_values = inner
            second = self.fresh("v")
            both = _Function(fn)
            call = f"{inner_name}({', '.join([*inner_values, second])})"
            # The same statements (the closure's, now dead, are dropped), then the call.
            both.lines = child.lines[:-1] + [(1, f"return {call}", None, ())]
            outer_name, _ = self.closures[closure]
            captured = [inner_param for _, inner_param in child.captures.items()]
            name = self.fresh("_f")
            self.functions.append((name, both, [*captured, param, second]))
            self.two_arguments.append((outer_name, name))
        return closure

    def app(self, term: App, fn: _Function):
        """``f a``: a call; ``p a1 .. ak`` with a built-in ``p`` of arity k is evaluated as
        the primitive application it is."""
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
        f = yield self.gen(term.fn, fn)
        x = yield self.gen(term.arg, fn)
        t = self.fresh("t")
        fn.emit(f"{t} = {f}({x})")
        return t

    def let(self, term: Let, fn: _Function, then: Callable[[Term, _Function], Any] | None = None):
        """``let x = e1 in e2``: ``x`` names the atom of ``e1`` (no copy).  ``e2`` is
        compiled by ``then`` (default :meth:`gen`; :meth:`staged` in a linear body)."""
        value = yield self.gen(term.value, fn)
        previous = self.bind(fn, term.name, value)
        body = yield (then or self.gen)(term.body, fn)
        self.unbind(fn, term.name, previous)
        return body

    def let_pair(self, term: LetPair, fn: _Function,
                 then: Callable[[Term, _Function], Any] | None = None):
        """``let (x, y) = e1 in e2``: one unpacking statement; ``e2`` as in :meth:`let`."""
        value = yield self.gen(term.value, fn)
        known = self.pairs.get(value)
        unpacked = self.unpacked.get(value)
        if known is not None:
            # The pair was built here from two atoms: bind to them, no unpacking.
            first, second = known
        elif (unpacked is not None and unpacked[0] is fn
              and fn.blocks[:len(unpacked[1])] == unpacked[1]):
            # Already taken apart by a statement that runs before this one.
            first, second = unpacked[2]
        else:
            first, second = self.fresh("v"), self.fresh("v")
            fn.emit(f"{first}, {second} = {value}", pure=(first, second))
            self.unpacked[value] = (fn, fn.blocks, (first, second))
        previous_first = self.bind(fn, term.first, first)
        previous_second = self.bind(fn, term.second, second)
        body = yield (then or self.gen)(term.body, fn)
        # Unbind in reverse: `let (x, x) = ...` binds the second x last.
        self.unbind(fn, term.second, previous_second)
        self.unbind(fn, term.first, previous_first)
        return body

    def pair(self, term: Pair, fn: _Function):
        """``(e1, e2)``."""
        first = yield self.gen(term.first, fn)
        second = yield self.gen(term.second, fn)
        t = self.fresh("t")
        fn.emit(f"{t} = ({first}, {second})", pure=(t,))
        self.pairs[t] = (first, second)
        return t

    def if_(self, term: If, fn: _Function):
        """``if c then e1 else e2``: Python ``if``/``else``; only the branch taken runs."""
        cond = yield self.gen(term.cond, fn)
        result = self.fresh("t")
        fn.emit(f"if {cond}:")
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
                child.emit(f"return {atom}")
                closure = self.close(child, [], fn, None)
                call = self.fresh("t")
                fn.emit(f"{call} = {closure}()")
                atom = call
            else:
                atom = yield self.gen(branch, fn)
            fn.emit(f"{result} = {atom}")
            fn.blocks = enclosing
            fn.indent -= 1
            fn.if_depth -= 1
        return result

    def list_lit(self, term: ListLit, fn: _Function):
        """``[e1, ..., en]``."""
        atoms = []
        for item in term.items:
            atoms.append((yield self.gen(item, fn)))
        t = self.fresh("t")
        fn.emit(f"{t} = [{', '.join(atoms)}]", pure=(t,))
        return t

    def annot(self, term: Annot, fn: _Function):
        """``(e : A)``: the annotation was checked; evaluates ``e``."""
        return (yield self.gen(term.expr, fn))

    def lin_lam(self, term: LinLam, fn: _Function):
        """``\\a -o e``: a :class:`Backprop` that gets the next creation stamp of the current
        tape each time this is evaluated, over a lifted body ``(captured, a, stage)``.

        A body that is a tree of ``<+>``, ``zero``, ``let`` and applications ``g e'`` (what
        ←D builds) is compiled into staging statements ``stage(g, e')``: the backward phase
        accumulates instead of walking cotangent data (:meth:`staged`).  Any other body
        returns its cotangent as data.  ``\\a -o zero`` is the tape's shared zero
        backpropagator (AD.md section 3), which has no body and is not counted as created;
        the instrumented variant gives each evaluation its own, reported in events
        (:class:`~lambdad.values.ConstantBackprop`), so traces show what reaches constants.
        """
        if isinstance(term.body, Zero):
            t = self.fresh("t")
            if self.instrumented:  # one per evaluation, reported (see ConstantBackprop)
                fn.emit(f"{t} = _newzero({self.constant(term.span)})")
            else:
                fn.emit(f"{t} = _rt.tape.constant()", pure=(t,))
            return t
        child = _Function(fn)
        param = self.fresh("v")
        self.bind(child, term.param, param)
        if _stageable(term.body):
            yield self.staged(term.body, child)
        else:
            body = yield self.gen(term.body, child)
            child.emit(f"return {body}")
        name = self.fresh("_f")
        captured = list(child.captures.items())
        names = [inner for _, inner in captured]
        if names:
            # The captured values arrive as one tuple: cheaper to build and to call with
            # than a partial application over them.
            child.lines.insert(0, (1, f"{', '.join(names)}, = _c", None, ()))
        self.functions.append((name, child, ["_c", param, "_st"]))
        values = [self.lookup(source, fn, self.free_spans.get(source)) for source, _ in captured]
        closed = f"({', '.join(values)},)" if values else "()"
        span = self.constant(term.span)
        t = self.fresh("t")
        # One call (stamping and the record, see Tape.backprop_maker): shorter to compile
        # and no slower to run than the same statements inline.
        fn.emit(f"{t} = _newbp({name}, {closed}, {span})")
        return t

    def staged(self, term: Term, fn: _Function):
        """The cotangent ``term`` (of type ``d``, :func:`_stageable`) of a linear body as
        staging statements: ``zero`` stages nothing, ``e1 <+> e2`` stages both sides left to
        right, ``g e`` is ``stage(g, e)``, and ``let`` binds, then stages its body."""
        if isinstance(term, Zero):
            return None
        if isinstance(term, Plus):
            yield self.staged(term.left, fn)
            yield self.staged(term.right, fn)
            return None
        if isinstance(term, Let):
            return (yield from self.let(term, fn, self.staged))
        if isinstance(term, LetPair):
            return (yield from self.let_pair(term, fn, self.staged))
        if isinstance(term, App):
            f = yield self.gen(term.fn, fn)
            x = yield self.gen(term.arg, fn)
            fn.emit(f"_st({f}, {x})")
            return None
        raise EvalError(f"cannot stage a {type(term).__name__} term", term.span)

    def zero(self, term: Zero, fn: _Function):
        """``zero``: the zero cotangent, ``None``."""
        return "None"
        yield  # pragma: no cover

    def plus(self, term: Plus, fn: _Function):
        """``e1 <+> e2``: :func:`~lambdad.values.add_cotangents`, inline."""
        left = yield self.gen(term.left, fn)
        right = yield self.gen(term.right, fn)
        if left == "None":
            return right
        if right == "None":
            return left
        t = self.fresh("t")
        fn.emit(f"{t} = ({right} if {left} is None else {left} if {right} is None "
                f"else _Sum({left}, {right}))", pure=(t,))
        return t

    def seed(self, term: Seed, fn: _Function):
        """``seed i``: the i-th seed backpropagator of the current tape."""
        t = self.fresh("t")
        fn.emit(f"{t} = _seed({int(term.index)}, {self.constant(term.span)})")
        return t
        yield  # pragma: no cover

    def read_off(self, term: ReadOff, fn: _Function):
        """``cotangent x e``: the backward phase of ``e``, read off in the shape of ``x``."""
        point = yield self.gen(term.point, fn)
        cotangent = yield self.gen(term.cotangent, fn)
        t = self.fresh("t")
        fn.emit(f"{t} = _readoff({point}, {cotangent})")
        return t


# --------------------------------------------------------------------------- errors


def _short(value: Any) -> str:
    text = format_value(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(primitive: Primitive, args: Sequence[Any], exc: BaseException) -> str:
    """The message of a failed primitive evaluation, naming the operation."""
    if isinstance(exc, DomainError):
        return str(exc)
    shown = ", ".join(_short(a) for a in args)
    return f"`{primitive.spelling.symbol}` failed on {shown}: {exc}"


class _NotFinite(ArithmeticError):
    """Raised by generated code when a real primitive's result is not finite; :func:`_locate`
    turns it into the located EvalError naming the operation (the line table gives the
    site, the frame the operands)."""

    def __init__(self, result: float):
        super().__init__(result)
        self.result = result


def _not_finite(result: Any) -> None:
    """Raises :class:`_NotFinite` for a real primitive's result that is not finite
    (overflow, or an undefined operation on an infinite operand).  A result that is not a
    plain real (a tagged real of nested differentiation, whose ``t - t`` is tagged too)
    passes."""
    if type(result) is float:
        raise _NotFinite(result)


def _not_finite_message(site: _PrimSite, args: Sequence[Any], result: float) -> str:
    """The message of a real primitive whose result ``result`` is not finite, naming the
    operation (or the source operation whose derivative it computes)."""
    message = (f"{_operation(site.primitive, args)} is {format_value(result)}: "
               f"{'an overflow' if result == result else 'undefined'} (lambdad computes "
               "with finite reals only)")
    return _of_derivative(site.span, message, "not finite")


def _checked_ad_result(site: _PrimSite, result: Any) -> Any:
    """``result`` of ``grad``/``jvp``/``vjp`` at ``site``: an EvalError there if one of its
    reals is not finite (adjoints are summed outside generated code), and a pull-back in it
    that fails without a location (a cotangent of the wrong shape) reports ``site``."""
    stack = [result]
    while stack:
        value = stack.pop()
        if type(value) is float:
            if value - value:
                raise EvalError(f"`{site.primitive.spelling.symbol}` computed "
                                f"{format_value(value)}: adjoints summed to an overflow",
                                site.span)
        elif isinstance(value, (tuple, list)):
            stack.extend(value)
    if (type(result) is tuple and len(result) == 2 and callable(result[1])
            and type(result[1]) is not functools.partial
            and not hasattr(result[1], "__lambdad_lam__")):
        pullback = result[1]

        def located(cotangent: Any) -> Any:
            try:
                return pullback(cotangent)
            except LambdadError as exc:
                raise exc.with_span(site.span)

        return (result[0], located)
    return result


def _of_derivative(span: Span | None, message: str, what: str) -> str:
    """``message`` about an operation; about the derivative of the source primitive when
    the operation is part of it (its span is a :class:`DerivativeSpan`)."""
    if isinstance(span, DerivativeSpan):
        return f"the derivative of `{span.primitive}` is {what} here: {message}"
    return message


def _operation(primitive: Primitive, args: Sequence[Any]) -> str:
    """The application of ``primitive`` to ``args`` in lambdad syntax (``1e+300 * 10``)."""
    shown = [_short(a) for a in args]
    spelling = primitive.spelling
    if spelling.fixity == "infix" and len(shown) == 2:
        return f"`{shown[0]} {spelling.symbol} {shown[1]}`"
    if spelling.fixity == "prefix" and len(shown) == 1:
        return f"`{spelling.symbol}{shown[0]}`"
    return f"`{' '.join([spelling.symbol, *shown])}`"


def _locate(exc: BaseException) -> EvalError:
    """``exc``, raised while generated code ran, as an EvalError at the primitive whose line
    raised it (the innermost line of generated code with a recorded primitive)."""
    found: tuple[_PrimSite, Any] | None = None
    tb = exc.__traceback__
    while tb is not None:
        table = tb.tb_frame.f_globals.get("__lambdad_lines__")
        if table is not None:
            site = table.get(tb.tb_lineno)
            if site is not None:
                found = (site, tb.tb_frame)
        tb = tb.tb_next
    if found is None:
        message = str(exc) if isinstance(exc, DomainError) else f"{type(exc).__name__}: {exc}"
        return EvalError(message)
    site, frame = found
    if isinstance(site.span, DerivativeSpan) and isinstance(exc, DomainError):
        return EvalError(_of_derivative(site.span, str(exc), "undefined"), site.span)
    local_values = frame.f_locals
    args = []
    for atom in site.atoms:
        if atom in local_values:
            args.append(local_values[atom])
        elif atom in frame.f_globals:
            args.append(frame.f_globals[atom])
        else:
            args.append(_literal(atom))
    if isinstance(exc, _NotFinite):
        return EvalError(_not_finite_message(site, args, exc.result), site.span)
    return EvalError(_describe(site.primitive, args, exc), site.span)


def _literal(atom: str) -> Any:
    """The value of a literal atom of generated code (a real, ``True``, ``False``), or the
    atom itself shown as written."""
    text = atom.strip("()")
    try:
        return float(text)
    except ValueError:
        return {"True": True, "False": False}.get(text, _Atom(text))


class _Atom:
    """A literal atom of generated code, shown as written when describing an error."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text.strip("()")


# --------------------------------------------------------------------------- the interpreter


class _OpenTerm:
    """A compiled open term: calling it with the values of its free names (in the order
    given to :meth:`Interpreter.compile_open`) evaluates it under the runtime guard."""

    __slots__ = ("interpreter", "function", "names")

    def __init__(self, interpreter: "Interpreter", function: Callable[..., Any],
                 names: tuple[str, ...]):
        self.interpreter = interpreter
        self.function = function
        self.names = names

    def __call__(self, *values: Any) -> Any:
        return self.interpreter._run(self.function, values)


class Interpreter:
    """Evaluates source and target terms (call-by-value, left to right).

    ``strategy`` (``"factored"`` or ``"naive"``) is how ``cotangent x e`` runs
    backpropagators; ``ad_hooks`` maps ``"grad"``, ``"jvp"``, ``"vjp"`` to the functions
    that evaluate them (supplied by the AD glue).  With ``on_event`` (a callable receiving
    :class:`~lambdad.values.PrimEvent`, ``BackpropCreated`` and ``BackpropRun``), a
    ``max_steps`` budget of primitive evaluations or a ``timeout`` in seconds, terms are
    compiled in an instrumented variant (cached separately; the plain one stays fast).
    """

    def __init__(self, *, strategy: str = "factored",
                 ad_hooks: Mapping[str, Callable[..., Any]] | None = None,
                 on_event: Callable[[Any], None] | None = None,
                 max_steps: int | None = None, timeout: float | None = None):
        if strategy not in STRATEGIES:
            raise UsageError(f"unknown strategy `{strategy}`; use factored or naive")
        self.strategy = strategy
        self.ad_hooks: dict[str, Callable[..., Any]] = dict(ad_hooks or {})
        self.on_event = on_event
        self.max_steps = max_steps
        self.timeout = timeout
        self.tape = Tape()
        self.steps = 0
        self._run_tapes: dict[int, Tape] = {id(self.tape): self.tape}
        self._deadline: float | None = None
        self._depth = 0  # nesting of _run (generated code calling the AD hooks, ...)
        self._guarded = False  # inside the outermost guard (of _run or guarded)
        self._pinned = 0  # nesting of using_tape
        self._units = itertools.count()
        # Nesting levels (AD.md section 9) open around this code: while there is one, terms
        # compile in the generic variant, whose real primitives accept tagged reals.
        self.tagged_levels = 0
        # Each real primitive's partial derivatives as terms over its parameters (and its
        # result), given by the differentiator; compiled on first use by generic_apply.
        self.partial_terms: Mapping[str, tuple[Term, ...]] = {}
        self._partials: dict[tuple[str, bool], tuple[Callable[..., Any], ...]] = {}
        self._new_backprop = self._backprop_maker()
        self.arithmetic = Arithmetic(self.apply_real, *(_ARITHMETIC[name]
                                                         for name in ("+", "*", "-", "/", "neg")))
        # (id(term), names, instrumented, generic) -> (term kept alive, function, names)
        self._compiled: dict[tuple[int, tuple[str, ...] | None, bool, bool],
                             tuple[Term, Callable[..., Any], tuple[str, ...]]] = {}

    # ---- public API
    @property
    def generic(self) -> bool:
        """Whether terms compile in the variant whose primitives accept tagged reals."""
        return self.tagged_levels > 0

    @contextlib.contextmanager
    def in_level(self) -> Iterator[None]:
        """Inside the ``with`` block a nesting level is open: terms compiled there (and the
        closures they make) accept the tagged reals of every level."""
        self.tagged_levels += 1
        try:
            yield
        finally:
            self.tagged_levels -= 1

    def generic_apply(self, primitive: Primitive, *args: Any) -> Any:
        """``primitive`` applied to ``args`` whose reals may be tagged: a real primitive by
        :meth:`apply_real`, any other kind on the plain values of its real arguments
        (comparisons and ``range`` look at primals only)."""
        if primitive.kind == "real":
            return self.apply_real(primitive, args)
        return primitive.evaluate(*[plain_real(a) if isinstance(a, Tagged) else a
                                    for a in args])

    def apply_real(self, primitive: Primitive, args: Sequence[Any]) -> Any:
        """The real primitive on reals of any levels, by the chain rule at the innermost
        level among the arguments: its value on their values at that level, and its
        tangent ``Σ ∂i f · xi'`` (forward) or a tape node with edges ``∂i f`` (reverse),
        the partials read from the primitive table and evaluated at the same levels
        (so derivatives of derivatives are exact).  A plain argument contributes nothing:
        ``x ^ 2`` is a power with a constant exponent.  Raises DomainError as the
        primitive does."""
        level = None
        for a in args:
            if type(a) in _TAGGED and (level is None or a.level.order > level.order):
                level = a.level
        if level is None:
            return primitive.evaluate(*args)
        # The arguments at this level: their primals, and which of them are perturbed.
        primals = []
        perturbed = []
        plain = True  # the innermost level over floats, the common case
        for a in args:
            if type(a) in _TAGGED and a.level is level:
                primals.append(a.primal)
                perturbed.append(a)
            else:
                primals.append(a)
                perturbed.append(None)
            if type(primals[-1]) is not float:
                plain = False
        # Plain primals take the plain evaluation and partials compiled without the
        # generic dispatch.
        value = primitive.evaluate(*primals) if plain else self.apply_real(primitive, primals)
        partials = self._partials.get((primitive.name, not plain))
        if partials is None:
            partials = self._partial_functions(primitive, not plain)
        if primitive.result is not None:
            primals.append(value)
        if level.mode == FORWARD_LEVEL:
            arithmetic = self.arithmetic
            tangent: Any = 0.0
            for a, partial in zip(perturbed, partials):
                if a is not None:
                    d, t = partial(*primals), a.tangent
                    if type(d) is float and type(t) is float and type(tangent) is float:
                        tangent += d * t
                    else:
                        tangent = arithmetic.add(tangent, arithmetic.multiply(d, t))
            return Dual(level, value, tangent)
        edges = tuple((a.index, partial(*primals)) for a, partial in zip(perturbed, partials)
                      if a is not None)
        return level.record(value, edges)

    def _partial_functions(self, primitive: Primitive, generic: bool
                           ) -> tuple[Callable[..., Any], ...]:
        """The primitive's partials compiled as functions of its parameters (and result):
        the generic variant for tagged inputs, the plain one for floats."""
        key = (primitive.name, generic)
        found = self._partials.get(key)
        if found is None:
            names = primitive.params + ((primitive.result,) if primitive.result else ())
            found = tuple(self._function(term, names, generic=generic)[0]
                          for term in self.partial_terms[primitive.name])
            self._partials[key] = found
        return found

    def builtin_function(self, primitive: Primitive, args: tuple,
                         span: Span | None = None) -> BuiltinFunction:
        """The built-in ``primitive`` as a value, applied to ``args`` so far; it accepts
        tagged reals when made inside a nesting level."""
        apply = self._apply_builtin_generic if self.generic else self._apply_builtin
        return BuiltinFunction(primitive, args, span, apply)

    @property
    def instrumented(self) -> bool:
        """Whether terms compile with event, step and time checks."""
        return self.on_event is not None or self.max_steps is not None or self.timeout is not None

    @property
    def stats(self) -> TapeStats:
        """Backpropagators created and bodies run by the current program run (started by
        :meth:`evaluate` or :meth:`evaluate_module`): its own tape and those of the
        differentiations it ran."""
        tapes = self._run_tapes.values()
        return TapeStats(sum(t.created for t in tapes), sum(t.bodies_run for t in tapes))

    @contextlib.contextmanager
    def using_tape(self, tape: Tape) -> Iterator[Tape]:
        """Makes ``tape`` the current tape (stamps, seeds) inside the ``with`` block."""
        saved = self.tape
        self.tape = tape
        self._pinned += 1
        if self._depth:  # differentiation inside a running program: part of its stats
            self._run_tapes.setdefault(id(tape), tape)
        try:
            yield tape
        finally:
            self.tape = saved
            self._pinned -= 1

    def evaluate(self, term: Term, env: Mapping[str, Any] | None = None) -> Any:
        """The value of ``term`` with its free variables taken from ``env``.

        Raises EvalError for a runtime error (located at the primitive) or a free variable
        missing from ``env``, ResourceError when a limit is exceeded.
        """
        function, names = self._function(term, None)
        values = self._values_of(names, env or {}, term)
        self._begin_run()
        return self._run(function, values)

    def evaluate_module(self, module: Module, upto: str | None = None,
                        env: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The values of ``module``'s declarations, evaluated in order (stopping after the
        one named ``upto``), added to a copy of ``env`` (values of names defined earlier).

        Each declaration is compiled as a function of the earlier names it uses.  Raises as
        :meth:`evaluate`.
        """
        values = dict(env or {})
        self._begin_run()
        for decl in module.decls:
            values[decl.name] = self._evaluate_decl(decl, values)
            if upto is not None and decl.name == upto:
                break
        return values

    def compile_open(self, term: Term, free_names: Sequence[str]) -> Callable[..., Any]:
        """``term`` compiled as a function of ``free_names`` (in that order): calling it with
        their values evaluates ``term`` (under the runtime guard, see :meth:`apply`).

        Raises EvalError if ``term`` has a free variable not in ``free_names``.
        """
        function, names = self._function(term, tuple(free_names))
        return _OpenTerm(self, function, names)

    def apply(self, f: Any, *args: Any) -> Any:
        """``f a1 .. an`` for a function value ``f`` (curried), run like generated code is:
        deep calls allowed, runtime errors located, limits reported as ResourceError."""

        def call() -> Any:
            result = f
            for arg in args:
                result = result(arg)
            return result

        return self._run(call, ())

    def guarded(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` under the runtime guard of generated code (see :meth:`apply`),
        so the runs it makes through this interpreter share one guard: deep calls allowed,
        the cyclic collector paused, runtime errors located, limits as ResourceError."""
        if self._guarded:
            return function(*args)
        return self._outermost(function, args, 0)

    def backward(self, cotangent: Any, strategy: str | None = None) -> dict[int, float]:
        """:func:`~lambdad.values.backward` on the current tape with this interpreter's
        strategy (or ``strategy``) and event callback."""
        return self._run(backward, (self.tape, cotangent, strategy or self.strategy,
                                    self.on_event))

    # ---- compilation
    def _function(self, term: Term, names: tuple[str, ...] | None,
                  generic: bool | None = None) -> tuple[Callable[..., Any], tuple[str, ...]]:
        """The compiled entry function of ``term`` and its parameters (see
        :meth:`_CodeGenerator.compile_unit`), compiled once per term, names and variant."""
        instrumented = self.instrumented
        generic = self.generic if generic is None else generic
        key = (id(term), names, instrumented, generic)
        compiled = self._compiled
        entry = compiled.get(key)
        if entry is None:
            entry = (term, *self._compile(term, names, instrumented, generic))
            if len(compiled) >= _CACHE_SIZE:
                # Forget the least recently used unit (its closures keep their own code).
                del compiled[next(iter(compiled))]
        else:
            del compiled[key]  # re-inserted below: most recently used last
        compiled[key] = entry
        return entry[1], entry[2]

    @staticmethod
    def _values_of(names: Sequence[str], env: Mapping[str, Any], term: Term) -> list[Any]:
        try:
            return [env[name] for name in names]
        except KeyError as missing:
            name = missing.args[0]
            span = next((t.span for t in walk(term) if isinstance(t, Var) and t.name == name),
                        None)
            raise EvalError(f"unbound variable `{name}`", span) from None

    def _compile(self, term: Term, names: tuple[str, ...] | None, instrumented: bool,
                 generic: bool = False) -> tuple[Callable[..., Any], tuple[str, ...]]:
        generator = _CodeGenerator(self, instrumented, generic)
        filename = f"<lambdad unit {next(self._units)}>"
        # The cyclic collector would rescan the large, acyclic syntax and code structures
        # many times over while they are built; nothing cyclic is made here.
        collecting = gc.isenabled()
        gc.disable()
        try:
            entry, names, source = generator.compile_unit(term, names)
            code = compile(source, filename, "exec")
        except (RecursionError, MemoryError):
            raise ResourceError("the program is too large to compile",
                                getattr(term, "span", None)) from None
        finally:
            if collecting:
                gc.enable()
        namespace = generator.namespace
        namespace["__lambdad_source__"] = source
        exec(code, namespace)
        for name, lam, captured in generator.lifted:
            function = namespace[name]
            function.__lambdad_lam__ = lam
            function.__lambdad_captured__ = captured
        for name, both in generator.two_arguments:
            setattr(namespace[name], TWO_ARGUMENTS, namespace[both])
        return namespace[entry], names

    def _evaluate_decl(self, decl: Decl, values: Mapping[str, Any]) -> Any:
        function, names = self._function(decl.value, None)
        return self._run(function, self._values_of(names, values, decl.value))

    # ---- running generated code
    def _begin_run(self) -> None:
        """A top-level run starts with a fresh tape (unless the AD glue installed one)."""
        if self._depth == 0 and self._pinned == 0:
            self.tape = Tape()
            self._run_tapes = {id(self.tape): self.tape}

    def _run(self, function: Callable[..., Any], args: Sequence[Any]) -> Any:
        """``function(*args)`` for generated code: the outermost call raises the recursion
        limit (restored after); Python errors become located EvalErrors, RecursionError
        and MemoryError become ResourceErrors."""
        if self._guarded:
            self._depth += 1
            try:
                return function(*args)
            except LambdadError:
                raise
            except _RUNTIME_ERRORS as exc:
                raise _locate(exc) from None
            finally:
                self._depth -= 1
        return self._outermost(function, args, 1)

    def _outermost(self, function: Callable[..., Any], args: Sequence[Any], depth: int) -> Any:
        """``function(*args)`` as the outermost guarded call, at run depth ``depth`` (0 for
        :meth:`guarded`: work around program runs, not one of them)."""
        self.steps = 0
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout
        saved = self._raise_limits()
        self._depth = depth
        self._guarded = True
        # Generated code makes no reference cycles (values are immutable trees and DAGs), so
        # reference counting frees everything; the cyclic collector would only rescan the
        # ever-growing graph of backpropagators, which can double the cost of a run.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return function(*args)
        except LambdadError:
            raise
        except _RUNTIME_ERRORS as exc:
            raise _locate(exc) from None
        except RecursionError:
            raise ResourceError(
                "the program nests calls too deeply at run time (Python's stack is exhausted)"
            ) from None
        except MemoryError:
            raise ResourceError("the program ran out of memory") from None
        finally:
            if collecting:
                gc.enable()
            self._depth = 0
            self._guarded = False
            self._restore_limits(saved)

    @staticmethod
    def _raise_limits() -> tuple[int, Any]:
        stack = _DEFAULT_STACK
        saved_rlimit = None
        if _CAN_GROW_STACK and threading.current_thread() is threading.main_thread():
            try:
                soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
                if soft == resource.RLIM_INFINITY or soft >= _GROWN_STACK:
                    stack = _GROWN_STACK
                elif hard == resource.RLIM_INFINITY or hard >= _GROWN_STACK:
                    resource.setrlimit(resource.RLIMIT_STACK, (_GROWN_STACK, hard))
                    saved_rlimit = (soft, hard)
                    stack = _GROWN_STACK
                else:
                    stack = soft
            except (ValueError, OSError):
                pass
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, stack // _BYTES_PER_CALL))
        return old, saved_rlimit

    @staticmethod
    def _restore_limits(saved: tuple[int, Any]) -> None:
        old, saved_rlimit = saved
        sys.setrecursionlimit(old)
        if saved_rlimit is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_STACK, saved_rlimit)

    # ---- called by generated code
    def _backprop_maker(self) -> Callable[[Callable[..., Any], tuple, Span | None], Backprop]:
        """The function generated code calls for ``\\a -o e``: a :class:`Backprop` with the
        next stamp of the current tape (made without ``__init__``: this runs once per
        primitive of a reverse-mode program)."""
        new = object.__new__

        def new_backprop(function: Callable[..., Any], captured: tuple,
                         span: Span | None) -> Backprop:
            tape = self.tape
            stamp = tape.stamps
            tape.stamps = stamp + 1
            backprop = new(Backprop)
            backprop.stamp = stamp
            backprop.function = function
            backprop.captured = captured
            backprop.span = span
            backprop.tape = tape
            return backprop

        return new_backprop

    def _new_backprop_traced(self, function: Callable[..., Any], captured: tuple,
                             span: Span | None) -> Backprop:
        tape = self.tape
        backprop = Backprop(tape.next_stamp(), function, captured, span, tape)
        if self.on_event is not None:
            self.on_event(BackpropCreated(backprop.stamp, span))
        return backprop

    def _new_constant_traced(self, span: Span | None) -> Backprop:
        backprop = self.tape.own_constant(span)
        if self.on_event is not None:
            self.on_event(BackpropCreated(backprop.stamp, span))
        return backprop

    def _seed(self, index: int, span: Span | None) -> Backprop:
        return self.tape.seed(index, span)

    def _read_off(self, point: Any, cotangent: Any) -> Any:
        adjoints = backward(self.tape, cotangent, self.strategy, self.on_event)
        return read_off_point(point, adjoints)

    def _call_ad(self, site: _PrimSite, *args: Any) -> Any:
        hook = self.ad_hooks.get(site.primitive.name)
        if hook is None:
            raise EvalError(f"`{site.primitive.spelling.symbol}` is not available here",
                            site.span)
        try:
            result = hook(*args)
        except LambdadError as exc:
            raise exc.with_span(site.span)
        return _checked_ad_result(site, result)

    def _prim_event(self, site: _PrimSite, args: tuple, result: Any) -> None:
        self.steps += 1
        if self.max_steps is not None and self.steps > self.max_steps:
            raise ResourceError(f"stopped after {self.max_steps} steps", site.span)
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise ResourceError(f"stopped after {self.timeout:g} seconds", site.span)
        if self.on_event is not None:
            self.on_event(PrimEvent(site.primitive, site.span, args, result, site.term))

    def _apply_builtin(self, function: BuiltinFunction, args: tuple) -> Any:
        primitive = function.primitive
        if primitive.kind == "ad":
            return self._call_ad(_PrimSite(primitive, function.span, None), *args)
        try:
            return primitive.evaluate(*args)
        except _RUNTIME_ERRORS as exc:
            # A closure given to `map` or `fold` may have failed inside: locate it there.
            located = _locate(exc)
            if located.span is None:
                located = EvalError(_describe(primitive, args, exc), function.span)
            raise located from None

    def _apply_builtin_generic(self, function: BuiltinFunction, args: tuple) -> Any:
        primitive = function.primitive
        if primitive.kind not in _GENERIC_KINDS:
            return self._apply_builtin(function, args)
        try:
            return self.generic_apply(primitive, *args)
        except _RUNTIME_ERRORS as exc:
            located = _locate(exc)
            if located.span is None:
                located = EvalError(_describe(primitive, args, exc), function.span)
            raise located from None

    def _apply_builtin_traced(self, function: BuiltinFunction, args: tuple) -> Any:
        result = self._apply_builtin(function, args)
        self._prim_event(_PrimSite(function.primitive, function.span, None), args, result)
        return result


# --------------------------------------------------------------------------- conveniences


def evaluate(term: Term, env: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """The value of ``term`` in ``env`` on a fresh :class:`Interpreter` (``options`` are its
    keyword arguments); raises as :meth:`Interpreter.evaluate`."""
    return Interpreter(**options).evaluate(term, env)


def evaluate_module(module: Module, upto: str | None = None,
                    env: Mapping[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """The values of ``module``'s declarations on a fresh :class:`Interpreter`; raises as
    :meth:`Interpreter.evaluate_module`."""
    return Interpreter(**options).evaluate_module(module, upto, env)


def compile_open(term: Term, free_names: Sequence[str], **options: Any) -> Callable[..., Any]:
    """``term`` as a function of ``free_names`` on a fresh :class:`Interpreter`; raises as
    :meth:`Interpreter.compile_open`."""
    return Interpreter(**options).compile_open(term, free_names)
