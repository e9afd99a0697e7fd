"""``Program``: the one place where the stages meet (parse → check → transform → evaluate).

The CLI, the REPL and the Python API are thin layers over this module.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from . import rich
from .derivatives import Derivatives
from .differentiate import COMPOSITIONS, Stats  # noqa: F401 (read by the front ends)
from .edge import checked, checked_class
from .errors import (
    ShadowWarning,
    Span,
    TypeCheckError,
    UsageError,
    source_line,
)
from .iterate import collector_paused, collector_paused_during
from .modules import gather, link
from .parser import parse_expr
from .persistent import PersistentMap
from .points import Points
from .primitives import LINEAR_NAMES, NAMED, PRIMITIVES, Primitive, declared_by
from .printer import builtin_uses, print_decl, print_type
from .results import Jacobian
from .runtime import NOT_FINITE, Runtime
from .showing import Showing
from .sources import (
    PRELUDE_FILE,
    _prelude,
    ProgramTyping,
    prelude_text,
    read_source,
)
from .syntax import (
    renamed_free,
    Decl,
    Module,
    Term,
    Type,
    Var,
    binders,
    children,
    free_vars,
    names_used,
    numbered,
)
from .tape import DEFAULT_STRATEGY, STRATEGIES, strategy_named  # noqa: F401 (the front ends read the registry here)
from .typecheck import ModuleTyping, Scheme, infer_module, infer_term
from .values import to_python, written


# A name as the lexer reads it (an identifier, possibly primed: ``f'1``).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
MODES = ("reverse", "forward", "both")


@checked
def load(path: str | Path) -> "Program":
    """The program in the file ``path``, with the files it imports (each relative to the
    file importing it); raises UsageError if it cannot be read, ModuleError for an import
    that cannot be followed, and ParseError / TypeCheckError if it is not a well-typed
    program."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"load needs a file name, not {type(path).__name__}")
    return loads(read_source(path), str(path))


@checked
@collector_paused_during
def loads(text: str, file: str = "<string>") -> "Program":
    """The program whose source is ``text`` (``file`` names it in error messages; its
    imports are relative to ``file``'s directory, the current one for a name like
    ``<string>``); raises UsageError if ``text`` is not a str, ModuleError for an import
    that cannot be followed, ParseError / TypeCheckError if it is not a well-typed
    program."""
    return Program(text, file)



@checked_class
class Program:
    """A parsed, type-checked program with its prelude, ready to run and differentiate.

    Points and results are Python data: ``R`` ↔ float, pairs ↔ tuples, lists ↔ lists,
    ``Bool`` ↔ bool.  A function of several curried arguments takes a tuple point.
    """

    def __init__(self, text: str, file: str = "<string>",
                 sources: dict[str, str] | None = None):
        if not isinstance(text, str):
            raise UsageError(f"a program's source must be a str, not {type(text).__name__}")
        if not isinstance(file, str):
            raise UsageError(f"a program's file name must be a str, not {type(file).__name__}")
        prelude_source = prelude_text()
        self.file = file
        # Every source text by file name: the caller's dictionary if given, which then gets
        # the text of each imported file as it is read (an error in one can be shown).
        self.sources: dict[str, str] = sources if sources is not None else {}
        self.sources.update({PRELUDE_FILE: prelude_source, file: text})
        prelude = _prelude()
        self.prelude_names = tuple(d.name for d in prelude.decls)
        with collector_paused():
            units = gather(text, file, read_source, self.sources)
            # the files read: those imported, directly or not, each after its imports, then
            # this one
            self.files = tuple(unit.file for unit in units)
            linked = link(prelude.decls, PRELUDE_FILE, units)
            kept, own = linked.prelude, linked.decls
            self.user_names = tuple(d.name for d in own if d.name not in linked.hidden)
            self.module = Module(kept + own)
            # the definitions the program shadows (the prelude's, an imported file's), by
            # their hidden names: their names as written and their files
            self._hidden = dict(linked.hidden)
            if all(a is b for a, b in zip(kept, prelude.decls)):
                # Only the program's own declarations are inferred here, in the environment
                # of the prelude definitions they reach; the rest of the prelude is typed
                # when a name of it is asked for (see ProgramTyping).
                # Every name the program uses is a word of its texts: the words name the
                # prelude definitions it may use (a few mentioned in comments are typed in
                # vain) at a fraction of the cost of walking its terms.  A name the texts
                # do not contain is none of their words: a long program mentioning none is
                # not split into words at all.
                texts = [unit.read.text for unit in units]
                spelled = frozenset(name for name in self.prelude_names
                                    if any(name in part for part in texts))
                words = frozenset(word for part in texts for word in _WORD.findall(part)) \
                    & spelled if spelled else spelled
                self._typings = ProgramTyping.of_own(Module(own), words)
            else:
                self.typing = infer_module(self.module)
        self.decls: Mapping[str, Decl] = {d.name: d for d in self.module.decls}
        self._declared = tuple(entry for entry in map(declared_by, self.decls, (
            d.value for d in self.decls.values())) if entry is not None)
        # For extended(): the names the declarations use (hidden names avoid them), and
        # the declarations added since this module, newest first (see _module_of).
        self._used: PersistentMap[None] | None = None
        self._added: tuple[Any, ...] | None = None
        self._serial = len(self.user_names)
        self.runtime = Runtime()
        self._derivatives = Derivatives()
        self._values: dict[str, Any] | None = None
        # The module _unevaluated() last read, with each declaration's position in it.
        self._positions: tuple[Module, dict[str, int]] | None = None
        # Points read and fitted to the program's functions (the calling convention).
        self.points = Points(self)

    @property
    def typing(self) -> ModuleTyping:
        """The typing of the whole module, the prelude included."""
        return self._typings.whole

    @typing.setter
    def typing(self, typing: ModuleTyping) -> None:
        self._typings = ProgramTyping(typing)

    # ------------------------------------------------------------ inspection
    def names(self) -> tuple[str, ...]:
        """The program's own top-level names, in order (not the prelude's)."""
        return self.user_names

    @property
    def user_names(self) -> tuple[str, ...]:
        """The program's own top-level names, in the order they were (last) defined."""
        if self._user_names is None:
            self._user_names = tuple(sorted(self._order, key=self._order.__getitem__))
        return self._user_names

    @user_names.setter
    def user_names(self, names: tuple[str, ...]) -> None:
        self._user_names = names
        self._order: PersistentMap[int] | None = None

    @property
    def module(self) -> Module:
        """The program's declarations in order, every name defined once: a definition
        replaced at the REPL stays under a hidden name (``f'1``) that the definitions
        made before the replacement refer to."""
        if self._added is not None:
            self._module = _module_of(self._module, self._added)
            self._added = None
        return self._module

    @module.setter
    def module(self, module: Module) -> None:
        self._module = module
        self._added = None

    def declared_primitives(self) -> list[Primitive]:
        """The primitives the program declares (``primitive f x = ...``), in order."""
        return list(self._declared)

    def scheme(self, name: str) -> Scheme:
        self.require(name)
        return self._typings.scheme(name)

    def prelude_types(self) -> list[tuple[str, str]]:
        """Each definition of the prelude with its type, in order (those the program
        redefines under their hidden names are left out)."""
        return [(name, str(self.typing.schemes[name])) for name in self.prelude_names
                if name in self.typing.schemes]

    @staticmethod
    def builtin_types() -> list[tuple[str, str]]:
        """Each built-in with its type: by name (``sin``), an operator in parentheses
        (``(!!)``), in the order of the primitive table."""
        return [(p.spelling.symbol if p.spelling.fixity == "function"
                 else f"({p.spelling.symbol})", print_type(p.type))
                for p in PRIMITIVES.values()]

    def types(self) -> list[tuple[str, str]]:
        """Each of the program's top-level names with its inferred type, in order."""
        return [(name, str(self._typings.scheme(name))) for name in self.user_names]

    def warnings(self) -> list[ShadowWarning]:
        """Remarks on the program, which loads: each definition of a built-in's, the
        prelude's or an imported file's name (which shadows it from there on) in a file whose
        definitions above it use the name's other meaning, so that in one file the name
        means both.  A definition of such a name that nothing above it uses is not remarked
        on: adding a built-in never breaks a program, nor makes it noisy."""
        hidden = self._hidden
        origins: dict[str, list[str]] = {}  # a name: the files of its definitions shadowed
        for spelled, origin in hidden.values():
            origins.setdefault(spelled, []).append(origin)
        builtin_names = NAMED.keys() | set(LINEAR_NAMES)
        # (meaning, name, file): the first user in that file; a meaning is "built-in" or
        # the file of a definition shadowed
        first_use: dict[tuple[str, str, str], Decl] = {}
        found = []
        for name in self.user_names:
            decl = self.decls.get(name)
            if decl is None or decl.span is None:
                continue
            meanings = (["built-in"] if name in builtin_names else []) + origins.get(name, [])
            for meaning in meanings:
                user = first_use.get((meaning, name, decl.span.file))
                if user is not None:
                    what = (f"the built-in `{name}`" if meaning == "built-in" else
                            f"the prelude's `{name}`" if meaning == PRELUDE_FILE else
                            f"the definition of `{name}` in {meaning}")
                    found.append(ShadowWarning(
                        f"this definition of `{name}` shadows {what}, which a definition "
                        f"above uses (`{user.name}`, line {user.span.line}): from here on "
                        f"`{name}` means this definition", _name_span(decl, self.sources)))
            entry = declared_by(name, decl.value)
            terms = [decl.value] if entry is None else [entry.declaration.body,
                                                       *entry.declaration.partials]
            for used in builtin_uses(*terms):
                first_use.setdefault(("built-in", used, decl.span.file), decl)
            for variable in free_vars(decl.value):
                if variable in hidden:
                    written, origin = hidden[variable]
                    first_use.setdefault((origin, written, decl.span.file), decl)
        return found

    def source(self) -> str:
        """The program's own definitions as written (a definition whose source text is not
        at hand, printed), each under a comment giving its type."""
        parts = []
        for name, scheme in self.types():
            decl = self.decls[name]
            text = _span_text(decl.span, self.sources) if decl.span is not None else None
            parts.append(f"-- {name} : {scheme}\n{text or print_decl(decl)}")
        return "\n\n".join(parts) + "\n" if parts else ""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.source() or "-- no definitions")

    def _repr_html_(self) -> str:
        return rich.Source(self.source() or "-- no definitions")._repr_html_()

    def require(self, name: str) -> Decl:
        """The top-level declaration ``name``; UsageError naming the program's definitions
        if there is none."""
        decl = self.decls.get(name)
        if decl is None:
            known = ", ".join(self.user_names) or "none"
            raise UsageError(f"no top-level definition named `{name}` (defined: {known})")
        return decl

    # ------------------------------------------------------------ evaluation
    def set_max_steps(self, steps: int | None) -> None:
        """Stop runs with a ResourceError after ``steps`` primitive operations (None: no
        limit).  Counting steps runs the instrumented, slower variant of the code."""
        if steps is not None and (type(steps) is not int or steps < 1):
            raise UsageError("--max-steps needs a positive number")
        self.runtime.max_steps = steps

    @property
    def max_steps(self) -> int | None:
        """The step limit set by :meth:`set_max_steps` (None: no limit)."""
        return self.runtime.max_steps

    @property
    def strategy(self) -> str:
        """How backpropagators are evaluated (a name of :data:`STRATEGIES`)."""
        return self.runtime.strategy

    def set_strategy(self, strategy: str | None) -> None:
        """Evaluate backpropagators by ``strategy`` from now on (None: the default,
        :data:`DEFAULT_STRATEGY`, ``fused``); UsageError for an unknown one."""
        self.runtime.set_strategy(strategy)

    @collector_paused_during
    def value_of(self, name: str) -> Any:
        """The runtime value of the top-level ``name`` (evaluating what it needs)."""
        self.require(name)
        if self._values is None or name not in self._values:
            values = self._values if self._values is not None else {}
            missing, ready = self._unevaluated(name, values)
            computed = self.runtime.evaluate_module(Module(tuple(missing)),
                                                    env={n: values[n] for n in ready})
            computed = {d.name: computed[d.name] for d in missing}
            if isinstance(self._values, PersistentMap):  # extended(): keep what it ran
                self._values = self._values.update(computed)
            elif self._values is None:
                self._values = computed
            else:
                self._values.update(computed)
        return self._values[name]

    def _unevaluated(self, name: str,
                     values: Mapping[str, Any]) -> tuple[list[Decl], set[str]]:
        """The declarations ``name`` needs (transitively, itself included) that have no
        value in ``values`` yet, in program order, and the names with a value they use: a
        call runs only what it uses (of the prelude, usually little)."""
        module = self.module
        if self._positions is None or self._positions[0] is not module:
            self._positions = (module, {d.name: i for i, d in enumerate(module.decls)})
        positions = self._positions[1]
        needed = {name}
        ready: set[str] = set()
        pending = [name]
        while pending:
            decl = module.decls[positions[pending.pop()]]
            for used in free_vars(decl.value):
                if used in values:
                    ready.add(used)
                elif used in positions and used not in needed:
                    needed.add(used)
                    pending.append(used)
        return [module.decls[i] for i in sorted(positions[n] for n in needed)], ready

    @collector_paused_during
    def run(self, entry: str = "main") -> Any:
        """The value of ``entry`` (default ``main``) as Python data, each tuple as written
        (a triple a Python 3-tuple, ``(1, (2, 3))`` a pair holding a pair)."""
        return to_python(self.run_written(entry))

    def run_written(self, entry: str = "main") -> Any:
        """The runtime value of ``entry`` with its tuples as written (see
        :func:`~lambdad.values.written`): what the CLI prints and writes as JSON."""
        value = self.run_raw(entry)
        return written(value, self.scheme(entry).type)

    @collector_paused_during
    def run_raw(self, entry: str = "main") -> Any:
        """The runtime value of ``entry`` (for printing in the language's syntax)."""
        if entry == "main" and entry not in self.decls:
            raise UsageError("this program has no `main`; name a definition with --entry")
        self.require(entry)
        return self.value_of(entry)

    @collector_paused_during
    def evaluate_text(self, text: str) -> tuple[Any, Type]:
        """Value and type of an expression over the program's names."""
        if not isinstance(text, str):
            raise UsageError(f"an expression must be a str, not {type(text).__name__}")
        term = parse_expr(text, "<expr>", bound=self.decls,
                          declared=self.declared_primitives())
        typing = infer_term(term, self._typings.env_for(term))
        needed = {name for name in free_vars(term) if name in self.decls}
        env = {name: self.value_of(name) for name in needed}
        return self.runtime.evaluate(term, env), typing.type

    # ------------------------------------------------------------ the REPL's toplevel
    def type_of_term(self, term: Term) -> Type:
        """The type of the expression ``term`` over the program's names (its type variables
        named ``a, b, ...``); raises TypeCheckError."""
        return infer_term(term, self._typings.env_for(term)).type

    @collector_paused_during
    def evaluate_term(self, term: Term) -> tuple[Any, Type]:
        """Value and type of the expression ``term`` over the program's names; raises
        TypeCheckError or EvalError."""
        type_ = self.type_of_term(term)
        needed = {name for name in free_vars(term) if name in self.decls}
        env = {name: self.value_of(name) for name in needed}
        return self.runtime.evaluate(term, env), type_

    @collector_paused_during
    def extended(self, decls: Sequence[Decl]) -> "Program":
        """A new program: this one's declarations followed by ``decls``, each type-checked
        and evaluated at once against the names defined before it, as at an ML toplevel
        (this program is left unchanged).  A declaration of a name already defined replaces
        it for what follows; the definitions made before keep the old one (as in ghci and
        OCaml), which stays under a hidden name (``name'1``, see :meth:`hidden_name`), out
        of :meth:`names`.  Raises TypeCheckError or EvalError for a new declaration that is
        ill-typed (or uses its own name: there is no recursion) or fails.

        Each declaration costs time for its own size and O(log n) for the n definitions
        already made: the environments are persistent maps, and the module as one sequence
        of declarations is made only when asked for (:attr:`module`)."""
        new = copy.copy(self)
        # (the runtime is shared)
        new.points = Points(new)
        new._derivatives = Derivatives()
        # The module and what was added to it, read before anything below (value_of) may
        # make this program's module, which would fold ``added`` into it.
        base, added = self._module, self._added if self._added is not None else ()
        decls_map = _persistent(self.decls)
        values = _persistent(self._values if self._values is not None else {})
        typing = self.typing
        schemes, types = _persistent(typing.schemes), _persistent(typing.types)
        env = typing.env
        used = self._used if self._used is not None else PersistentMap(
            dict.fromkeys(names_used(self.module.decls)))
        order = self._order if self._order is not None else PersistentMap(
            {name: serial for serial, name in enumerate(self.user_names)})
        serial = self._serial
        declared = self._declared
        for decl in decls:
            own = _free_occurrence(decl.value, decl.name)
            if own is not None:
                raise TypeCheckError(
                    f"no recursion: `{decl.name}` cannot use itself (every program "
                    "terminates); iterate with `fold` over a list, e.g. "
                    "`fold step start (range n)`", own.span or decl.span)
            # The definition replaced stays under a hidden name, visible to the new one
            # (restricted() calls the old definition by that name).
            old = decls_map.get(decl.name)
            original: dict[str, str] = {}  # a hidden name: the name it had in this program
            if old is not None:
                hidden = _hidden_name(decl.name, used)
                replaced = {hidden: attrs.evolve(old, name=hidden)}
                decls_map = decls_map.update(replaced)
                schemes = schemes.set(hidden, schemes[decl.name])
                env = env.extend(hidden, env[decl.name])
                if decl.name in values:
                    values = values.set(hidden, values[decl.name])
                used = used.set(hidden, None)
                original[hidden] = decl.name
                added = ((decl.name, hidden), added)
                entry = declared_by(hidden, old.value)
                if entry is not None:
                    declared = tuple(entry if str(d.name) == decl.name else d for d in declared)
            typed = infer_module(Module((decl,)), env)
            needed = [name for name in free_vars(decl.value) if name in decls_map]
            for name in needed:
                if name not in values:  # a definition of a loaded file, not run yet
                    values = values.set(name, self.value_of(original.get(name, name)))
            value = new.runtime.evaluate(decl.value, {n: values[n] for n in needed})
            decls_map = decls_map.set(decl.name, decl)
            schemes = schemes.update(typed.schemes)
            types = types.update(typed.types)
            env = env.extend_all(typed.schemes)
            values = values.set(decl.name, value)
            used = used.update(dict.fromkeys(names_used((decl,))))
            added = (decl, added)
            serial += 1
            order = order.set(decl.name, serial)
            entry = declared_by(decl.name, decl.value)
            declared = tuple(d for d in declared if str(d.name) != decl.name) + (
                (entry,) if entry is not None else ())
        new.decls = decls_map
        new.typing = ModuleTyping(schemes, types, env)
        new._values = values
        new._used = used
        new._module, new._added = base, added
        new._order, new._serial, new._user_names = order, serial, None
        new._declared = declared
        return new

    def hidden_name(self, name: str) -> str:
        """The name a definition of ``name`` gets when :meth:`extended` replaces it:
        ``name'1``, ``name'2``, ..., the first that no declaration defines, uses or binds."""
        used = self._used if self._used is not None else PersistentMap(
            dict.fromkeys(names_used(self.module.decls)))
        return _hidden_name(name, used)

    # ------------------------------------------------------------ points and calls
    def input_names(self, name: str, point: Any) -> list[str]:
        """A name for each real of the point, left to right, as the user wrote it: the
        parameter's name, with ``.0``/``.1`` for pair components and ``[i]`` for list
        elements (``w.1[2]``); a component that a pattern parameter names (``\\(a, b) ->``)
        has that name (:meth:`lambdad.points.Points.input_names`)."""
        return self.points.input_names(name, point)

    def call(self, name: str, point: Any) -> Any:
        """The value of ``name`` at ``point`` (primal only), as Python data."""
        planned = self.points._planned(name, point)
        if planned is not None:
            # A point of reals holds no Python function of the caller: the run computes a
            # value and nothing else, so it may run again under raised limits if it must.
            # (The run pauses the collector: little is made outside it.)  The point's
            # arrays are tested finite in the run, quicker there; for one that is not, the
            # general path says so.
            f, x, result, arrays = planned
            value = self.runtime.apply_restartable(f, x, arrays)
            if value is NOT_FINITE:
                return self._general_call(name, point)
            return to_python(value if result is None else written(value, result))
        return self._general_call(name, point)

    @collector_paused_during
    def _general_call(self, name: str, point: Any) -> Any:
        """:meth:`call` by the general path (the point fitted, the function found)."""
        f, x, result = self.points.function_and_point(name, point)
        return to_python(written(self.runtime.apply(f, x), result))

    def value_and_grad(self, name: str, point: Any, mode: str = "reverse",
                       strategy: str | None = None, stats: bool = False,
                       wrt: Sequence[str] | None = None):
        """``(value, gradient)`` of ``name`` at ``point``; the gradient has the point's shape.

        ``mode`` is ``"reverse"`` (backpropagation, default) or ``"forward"`` (one dual-number
        run per input real); ``strategy`` is ``"fused"``, ``"factored"`` or ``"naive"``
        (:data:`STRATEGIES`) for this call (None, the default: the strategy
        :meth:`set_strategy` set, ``fused`` unless changed).  With
        ``stats=True`` a third element reports backpropagators created and bodies run.
        With ``wrt`` (parameter names), the gradient is with respect to those parameters
        only, the others held at their values in ``point`` (see :meth:`restricted`): the
        gradient has the shape of those parameters (a tuple for several).
        """
        return self._derivatives.value_and_grad(self, name, point, mode, strategy, stats, wrt)

    def grad(self, name: str, point: Any, mode: str = "reverse",
             strategy: str | None = None, stats: bool = False,
             wrt: Sequence[str] | None = None):
        """The gradient of ``name`` at ``point`` (``(gradient, stats)`` with ``stats=True``)."""
        return self._derivatives.grad(self, name, point, mode, strategy, stats, wrt)

    def jvp(self, name: str, point: Any, direction: Any) -> tuple[Any, Any]:
        """``(value, directional derivative)`` of ``name`` at ``point`` along ``direction``."""
        return self._derivatives.jvp(self, name, point, direction)

    def vjp(self, name: str, point: Any) -> tuple[Any, Callable[[Any], Any]]:
        """``(value, pull-back)``; the pull-back takes and returns Python data."""
        return self._derivatives.vjp(self, name, point)

    def hessian(self, name: str, point: Any, mode: str = "forward-over-reverse",
                strategy: str | None = None,
                wrt: Sequence[str] | None = None) -> tuple[Any, Any, list[Any]]:
        """``(value, gradient, rows)`` of ``name`` at ``point``: ``rows[i]`` is the gradient
        of the derivative along the i-th input real (named by :meth:`input_names`), in the
        point's shape.  ``mode`` is the composition (:data:`COMPOSITIONS`): forward mode
        over reverse mode by default (n Hessian-vector products).  ``strategy`` and ``wrt``
        as for :meth:`value_and_grad`."""
        return self._derivatives.hessian(self, name, point, mode, strategy, wrt)

    def hvp(self, name: str, point: Any, direction: Any) -> tuple[Any, Any, Any]:
        """``(value, gradient, H·v)`` of ``name`` at ``point`` along ``direction``, by
        forward mode over reverse mode."""
        return self._derivatives.hvp(self, name, point, direction)

    def restricted(self, name: str, point: Any, wrt: Sequence[str]) -> tuple["Program", Any]:
        """A program in which ``name`` is a function of its parameters named ``wrt`` only
        (curried, in that order), every other parameter fixed at its value in ``point``;
        and the point of those parameters (a tuple for several).  Differentiating the new
        ``name`` differentiates the old one with respect to ``wrt`` alone.  The old
        definition stays, renamed as :meth:`extended` renames a redefined name, for the new
        one to call.  Raises UsageError for a name that is not one of the parameters the
        point gives."""
        return self._derivatives.restricted(self, name, point, wrt)

    def jacobian(self, name: str, point: Any, mode: str | None = None,
                 wrt: Sequence[str] | None = None) -> "Jacobian":
        """The Jacobian of ``name`` at ``point``, for any result built from reals, pairs and
        lists.  ``mode`` is ``"forward"`` (one dual-number run per input real),
        ``"reverse"`` (one run, then one backward pass per output real) or None: the
        cheaper of the two from the numbers of inputs and outputs (forward when there are
        no more inputs than outputs).  ``wrt`` as for :meth:`value_and_grad`.  Raises
        UsageError for a bad mode or a result that is not differentiable."""
        return self._derivatives.jacobian(self, name, point, mode, wrt)

    def stats(self) -> Stats | None:
        return self.runtime.differentiator.last_stats

    # ------------------------------------------------------------ showing programs
    def dependencies(self, name: str) -> list[Decl]:
        """The declarations ``name`` needs (transitively), in program order, ending with it."""
        return Showing(self).dependencies(name)

    def show(self, name: str, forward: bool = False, reverse: bool = False,
             at: Any = None, raw: bool = False, backward: bool = False,
             fused: bool = False) -> str:
        """The transformed program of ``name`` as source text (with its transformed type as
        a comment); with ``at``, a complete program whose ``main`` computes the value and the
        gradient at that point.  The generated ``main`` is hygienic: its local names are
        fresh, and a definition of the program named ``main`` is printed renamed
        (``main'1``).  With ``fused``, reverse mode is printed in the form the ``fused``
        strategy runs.  Raises UsageError for a point that does not fit."""
        return Showing(self).show(name, forward, reverse, at, raw, backward, fused)



# ---------------------------------------------------------------- helpers


def _name_span(decl: Decl, sources: Mapping[str, str]) -> Span:
    """The span of the name in ``decl``'s ``def NAME`` or ``primitive NAME`` (the whole
    declaration's if its text is not at hand)."""
    span = decl.span
    text = sources.get(span.file)
    line = source_line(text, span.line) if text is not None else None
    found = re.compile(rf"\w+\s+({re.escape(decl.name)})(?![\w'])").match(
        line or "", span.col - 1)
    if found is None:
        return span
    return Span(span.file, span.line, found.start(1) + 1, span.line, found.end(1) + 1)


def _hidden_name(name: str, used: Mapping[str, Any]) -> str:
    """``name'1``, ``name'2``, ...: the first not in ``used``."""
    return numbered(f"{name}'", used)


def _free_occurrence(term: Term, name: str) -> Var | None:
    """The first free occurrence of the variable ``name`` in ``term``, or None."""
    stack = [term]
    while stack:
        current = stack.pop()
        if isinstance(current, Var) and current.name == name:
            return current
        kids = [kid for kid, names in zip(children(current), binders(current))
                if name not in names]
        stack.extend(reversed(kids))
    return None


def _persistent(mapping: Mapping[str, Any]) -> PersistentMap[Any]:
    """``mapping`` as a persistent map (itself if it is one)."""
    return mapping if isinstance(mapping, PersistentMap) else PersistentMap(mapping)


def _module_of(module: Module, added: tuple[Any, ...] | None) -> Module:
    """``module`` followed by what :meth:`Program.extended` added, newest first as nested
    pairs ``(item, rest)``: a declaration, or ``(name, hidden)`` where a definition of
    ``name`` was replaced.  The replaced definition is renamed ``hidden``, and so are the
    uses of ``name`` in the declarations after it (made before the replacement), so every
    name is defined once and means what it meant when each declaration was made."""
    items = []
    while added:
        item, added = added
        items.append(item)
    decls = list(module.decls)
    position = {decl.name: index for index, decl in enumerate(decls)}
    for item in reversed(items):
        if isinstance(item, Decl):
            position[item.name] = len(decls)
            decls.append(item)
            continue
        name, hidden = item
        index = position.pop(name)
        decls[index] = attrs.evolve(decls[index], name=hidden)
        position[hidden] = index
        for later in range(index + 1, len(decls)):
            if name in free_vars(decls[later].value):
                decls[later] = attrs.evolve(
                    decls[later], value=renamed_free(decls[later].value, {name: hidden}))
    return Module(tuple(decls))


def _span_text(span: Span, sources: dict[str, str]) -> str | None:
    """The text ``span`` covers in its source, or None if that source is not known."""
    text = sources.get(span.file)
    if text is None:
        return None
    lines = text.split("\n")[span.line - 1:span.end_line]
    if not lines:
        return None
    lines[-1] = lines[-1][:span.end_col - 1]  # first the end: columns count from line start
    lines[0] = lines[0][span.col - 1:]
    return "\n".join(lines)
