"""Differentiating function *values*: what ``grad``, ``jvp`` and ``vjp`` do at run time.

A function value is a closure built by the interpreter: a λ-term plus its captured
environment (or a built-in applied to some arguments).  To differentiate it (AD.md section 6)
we transform its λ-term with →D or ←D (once per term, cached), embed the captured environment
into the transformed world — reals become constants ``(r, 0)`` / ``(r, \\a -o zero)``,
closures are transformed in turn — seed the argument, apply, and read off.

Nesting (AD.md section 9).  Every derivative takes this one route.  A closure that itself
differentiates is written out as a target program first (:mod:`lambdad.nesting`): each
``grad``/``jvp``/``vjp`` in it becomes the program of its read-off over the image of the
function it differentiates, specialised to the values and closures it captured (a closure
captured that differentiates is defined in its body, so that a function given to it is
known by its term), then transformed like any other term, compiled once per (term, types,
strategy) and run.  The linear constructs of the inner transformations have rules of their
own, so each level's backpropagators live in a ring of their own and levels never mix: a
real captured from an outer level is a constant of the inner one, which is why
``grad (\\x -> x * grad (\\y -> x + y) 1) 1`` is 1.  Each level's costs are those of the
backward phases run in its ring.  A pull-back is the closure of ``\\c -> snd (vjp f x) c``
and a function in the result of ``jvp`` the closure of a term that differentiates afresh
(:meth:`Differentiator._split`), so they are differentiated the same way.  What has no
program (a function made outside the language, a use of ``grad`` on a function given as an
argument under reverse mode) is refused with an error saying why.

This module is where the transformations meet the interpreter; neither imports the other.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Callable
from typing import Any

from . import backward as backward_mode
from . import forward as forward_mode
from .arraylib import ARRAY, array_adjoint
from .errors import UNPLACED, DifferentiationError, LambdadError, TypeCheckError
from .interpreter import Interpreter
from . import nesting
from .parser import parse_expr
from .typecheck import infer_term
from .primitives import PRIMITIVES
from .reals import (basis, count_reals, has_function, is_dual, is_flat_reals, is_real,
                    is_reverse_real, leaves, replace_leaves, split_flat_duals, value_type, zip_values)
from .rules import NestedDifferentiationError
from .syntax import Builtin, FunT, Lam, Prim, Term, Type, Var, VarT, free_vars, walk
from .fuse import fused_backward_term
from .memo import Memo
from .tape import (
    DEFAULT_STRATEGY,
    ZERO,
    Backprop,
    Call,
    LevelStats,
    Stats,
    Tape,
    add_cotangents,
    strategy_named,
)
from .values import (
    SCALAR_TYPES,
    FunctionParts,
    MadeFunction,
    map_value,
)

FORWARD = "forward"
REVERSE = "reverse"
# ←D with the backpropagators of each straight-line region fused (strategies that fuse).
_FUSED = "reverse, fused"


_IMAGES_KEPT = 256
"""How many images of closures a differentiator keeps for later differentiations."""
_UNITS_KEPT = 2048
"""How many compiled units (images of λ-terms, written-out programs or their refusals)."""
_ANALYSES_KEPT = 4096
"""How many facts about λ-terms (types of closures, whether they differentiate, the
specialisations of closures over closures that differentiate)."""
_PIECES_KEPT = 256
"""How many of the terms the differentiator writes itself (λs of primitives, parts of a
function's result, the closures of `grad f`), parsed and compiled."""

# The kinds of compiled unit (see Differentiator._unit_key).
_IMAGE = "image"
_PROGRAM = "program"


# ---------------------------------------------------------------- typing runtime values


def _zero_tangent(r: Any) -> tuple[Any, Any]:
    """A captured constant under →D: its tangent is zero (of its shape, for an array)."""
    return (r, 0.0) if type(r) is float else (r, np.zeros(r.shape))


_CLOSURE_TYPE_DEPTH = 20
"""How deep the closures captured by a closure are typed (deeper ones are left untyped)."""


def _closure_type(lam: Lam, captured: tuple[tuple[str, Type | None], ...]) -> Type | None:
    """The type of ``lam`` with its captured names of the given types, when it has no
    type variable (a polymorphic closure is typed by its uses instead)."""
    wrapped: Term = lam
    for name, type_ in reversed(captured):
        wrapped = Lam(name, wrapped, param_type=type_)
    try:
        t = infer_term(wrapped).type
    except TypeCheckError:
        return None
    for _ in captured:
        if not isinstance(t, FunT):
            return None
        t = t.result
    return t if not any(isinstance(inner, VarT) for inner in walk(t)) else None


def _argument_type(t: Type) -> Type | None:
    """The argument type of the function type ``t`` when it has no type variable."""
    if isinstance(t, FunT) and not any(isinstance(inner, VarT) for inner in walk(t.arg)):
        return t.arg
    return None


def _backward_image(modes: tuple[str, ...]) -> bool:
    """Whether the image under ``modes`` is taken by ←D at some level: ←D takes no use of
    ``grad``, ``jvp``, ... (→D keeps one it cannot write out), so its code makes closures
    that nothing differentiates or looks inside (see Interpreter.compile_open)."""
    return any(mode != FORWARD for mode in modes)


# ---------------------------------------------------------------- the differentiator


class Differentiator:
    """Runs →D / ←D versions of function values on an interpreter, and nests (see the
    module docstring).

    ``strategy`` (a name in :data:`lambdad.tape.STRATEGIES`) is how backpropagators are
    evaluated (and, for ``fused``, which form of ←D is run);
    ``last_stats`` is the cost of the most recent reverse-mode run, per nesting level.
    """

    def __init__(self, interpreter: Interpreter, strategy: str = DEFAULT_STRATEGY):
        self.interpreter = interpreter
        self.strategy = strategy
        # The costs of the most recent reverse-mode run, a log of records (see _costs),
        # made into Stats when asked for: most runs are not asked.
        self._last_costs: list[tuple[int, str, int, int]] | None = None
        interpreter.on_read_off = self._on_read_off
        # per tape of a run: the distinct bodies its inner levels' backward phases ran
        self._inner_reached: dict[int, int] = {}
        # What is worked out once, one bounded table per kind of entry (see lambdad.memo):
        # compiled units by _unit_key -> (λ-term kept alive, the image's function of the
        # captured values, or None when the term differentiates; the compiled written-out
        # program, or the refusal saying why there is none)
        self._units = Memo(_UNITS_KEPT)
        # facts about λ-terms (closure types, "differentiates", specialisations)
        self._analyses = Memo(_ANALYSES_KEPT)
        # the terms the differentiator writes itself, parsed and compiled
        self._pieces = Memo(_PIECES_KEPT)
        self._depth = 0  # differentiations in progress, one inside the other
        # the log of the differentiation running: (depth, mode, created, bodies run) per phase
        self._costs: list[tuple[int, str, int, int]] = []
        # _image_key -> (the function value kept alive, its image); see transform_function
        self._images = Memo(_IMAGES_KEPT)
        # (code of a closure, modes, strategy, variant) -> (the code kept alive, which of
        # its captured values are reals or arrays, the image's function of them): see
        # _plain_image
        self._plain = Memo(_UNITS_KEPT)

    # ---- hooks for the interpreter's `grad`, `jvp`, `vjp` primitives
    def hooks(self) -> dict[str, Callable[..., Any]]:
        return {
            "grad": lambda f, x: self.grad(f, x)[1],
            "jvp": lambda f, x, v: self.jvp(f, x, v),
            "vjp": lambda f, x: self.vjp(f, x),
            "jacfwd": lambda f, x: self.jacobian(f, x, FORWARD)[1],
            "jacrev": lambda f, x: self.jacobian(f, x, REVERSE)[1],
        }

    # ---- per-level costs
    # A differentiation's costs are a log of records (depth, mode, created, bodies run), one
    # per phase, appended as it runs (depth 1 is the outermost differentiation); they are
    # summed per depth only when ``last_stats`` is asked for, which most runs are not.
    @property
    def last_stats(self) -> Stats | None:
        """What the most recent reverse-mode run cost, per nesting level (None before
        the first)."""
        log = self._last_costs
        if log is None:
            return None
        deepest = max(record[0] for record in log)
        modes: list[set[str]] = [set() for _ in range(deepest)]
        created, run = [0] * deepest, [0] * deepest
        for depth, mode, made, ran in log:
            modes[depth - 1].add(mode)
            created[depth - 1] += made
            run[depth - 1] += ran
        levels = tuple(LevelStats(depth, tuple(sorted(modes[depth - 1])),
                                  created[depth - 1], run[depth - 1])
                       for depth in range(1, deepest + 1))
        return Stats(sum(created), sum(run), levels)

    def _begin_differentiation(self) -> bool:
        """Starts one differentiation, perhaps inside another; True for the outermost.
        :meth:`_end_differentiation` must follow (in a ``finally``)."""
        outermost = self._depth == 0
        if outermost:
            self._costs = []
            if self._inner_reached:
                self._inner_reached = {}
        self._depth += 1
        return outermost

    def _end_differentiation(self, outermost: bool) -> None:
        """Ends a differentiation: the outermost one publishes the costs of every depth as
        ``last_stats`` if it ran reverse mode."""
        self._depth -= 1
        if outermost:
            for record in self._costs:  # (a loop, not any(): this ends every HVP)
                if record[1] == REVERSE:
                    self._last_costs = self._costs
                    break

    def _on_read_off(self, tape: Tape, ring_depth: int, ran: int, reached: int) -> None:
        """A backward phase of a program run (``cotangent x e``) over a ring that is the image
        of ``ring_depth`` transformations: the phase of a differentiation that many levels
        inside the one running, whose backpropagators are those the phase reached."""
        if ring_depth == 0:
            return  # a printed program run as it is: its own first-order phase
        inner, key = self._inner_reached, id(tape)
        inner[key] = inner.get(key, 0) + reached
        if self._depth == 0:
            self._record(REVERSE, reached, ran, ring_depth)
        else:  # (_record written out: this ends the reverse phase of every HVP)
            self._costs.append((self._depth + ring_depth, REVERSE, reached, ran))

    def _record(self, mode: str, created: int, bodies_run: int, inner: int = 0) -> None:
        """Adds costs to the level of the differentiation running (``inner`` levels
        inside it)."""
        if self._depth == 0:  # a pull-back called after its vjp: a run of its own
            self._costs = [(1 + inner, mode, created, bodies_run)]
            self._last_costs = self._costs
            return
        self._costs.append((self._depth + inner, mode, created, bodies_run))

    # ---- transforming function values
    def _transformer(self, mode: str) -> Callable[..., Term]:
        if mode == FORWARD:
            return forward_mode.forward_term
        if mode == _FUSED:
            return fused_backward_term
        return backward_mode.backward_term

    def _reverse(self, strategy: str | None) -> str:
        """The mode reverse-mode differentiation transforms functions in for ``strategy``:
        fused ←D for a strategy that fuses, ←D as the paper writes it otherwise."""
        return _FUSED if strategy_named(strategy or self.strategy).fuses else REVERSE

    def _unit_key(self, kind: str, lam: Lam, identity: tuple, modes: tuple[str, ...]) -> tuple:
        """Where a compiled unit of ``lam`` under ``modes`` is kept: its ``kind`` (the
        image, or the written-out program of a λ that differentiates), ``identity`` (the
        captured names, or the types of the captured values and the point), and the
        settings that change what is compiled: the variant the interpreter compiles
        (instrumented code counts steps and reports events) and, under a further mode or
        in a written-out program, the form of ←D the strategy runs (the key's last item).
        The one place these keys are made."""
        inner_reverse = self._reverse(None) if len(modes) > 1 or kind == _PROGRAM else None
        return (kind, modes, id(lam), identity, self.interpreter.instrumented, inner_reverse)

    def _image_key(self, f: Any, modes: tuple[str, ...]) -> tuple:
        """Where the image of the function value ``f`` under ``modes`` is kept: by the
        strategy set (its ←D, its backward phase) and the variant compiled."""
        return (id(f), modes, self.strategy, self.interpreter.instrumented)

    def _compiled_lambda(self, lam: Lam, names: tuple[str, ...], modes: tuple[str, ...],
                         captured: dict[str, Any], point: Any,
                         param_type: Type | None = None
                         ) -> tuple[Callable[..., Any], tuple, bool]:
        """The image of ``lam`` under ``modes`` (innermost first) compiled as a function of
        the values of its free names, and those names: each ``(name, None)`` for a
        captured value, ``(name, (captured name, inner modes, type))`` for the image of a
        captured function under further modes.  A λ that differentiates is written out as
        a target program first (:func:`lambdad.nesting.expand_closure`), for the types of
        the captured values and of ``point`` (the argument it is differentiated at, or
        ``None``); and whether it is the image of ``lam`` itself (not of a written-out
        program).  Raises a located DifferentiationError (or TypeCheckError) when it has
        no target program."""
        # the captured reals and arrays, embedded as constants at every level (AD.md
        # section 6): each transformation knows their derivative parts are zero
        constants = frozenset(name for name in names if type(captured[name]) in SCALAR_TYPES)
        key = self._unit_key(_IMAGE, lam, (names, constants), modes)
        inner_reverse = key[-1]
        entry = self._units.get(key)
        if entry is None:
            try:
                transformed = lam
                fused = False
                for depth, mode in enumerate(modes):
                    if depth > 0 and mode == _FUSED:
                        # fusion sums what a body sends to a backpropagator as reals (or
                        # arrays); after an inner transformation those are pairs
                        mode = REVERSE
                    elif mode == REVERSE and len(modes) > 1 and depth == 0:
                        mode = inner_reverse
                    transform = self._transformer(mode)
                    transformed = (transform(transformed, constants=constants) if constants
                                   else transform(transformed))
                    fused = fused or mode == _FUSED
            except NestedDifferentiationError:
                entry = (lam, None)
            else:
                # a fused ←D program (or its →D) runs a qualifying fold's steps batched
                entry = (lam, (self.interpreter.compile_open(
                    transformed, names, batch_folds=fused, image=_backward_image(modes)),
                               tuple((name, None) for name in names)))
            self._units.put(key, entry)
        if entry[1] is not None:
            return (*entry[1], True)
        types = tuple((name, self._value_type(captured[name])) for name in names)
        point_type = param_type if point is None else value_type(point)
        nested_key = self._unit_key(_PROGRAM, lam, (types, point_type), modes)
        found = self._units.get(nested_key)
        if found is None:
            try:
                found = (lam, self._compiled_program(lam, types, point_type, modes))
            except (DifferentiationError, TypeCheckError) as refusal:
                found = (lam, refusal)
            self._units.put(nested_key, found)
        if isinstance(found[1], LambdadError):
            raise found[1].with_traceback(None)  # the refusal, kept (as a program would be)
        return (*found[1], False)

    def _value_type(self, value: Any, depth: int = 0) -> Type | None:
        """The type of a runtime value when its values tell it (:func:`value_type`); for a
        closure, the type of its λ given the types of what it captured, when that type has
        no variable (inferred once per λ and captured types).  None otherwise."""
        if not callable(value) or isinstance(value, Backprop):
            return value_type(value)
        parts = self.interpreter.function_parts(value)
        if parts is None or parts.lam is None or depth > _CLOSURE_TYPE_DEPTH:
            return None
        captured = tuple((name, self._value_type(v, depth + 1))
                         for name, v in parts.captured.items())
        key = ("type", id(parts.lam), captured)
        found = self._analyses.get(key)
        if found is None:
            found = self._analyses.put(key, (parts.lam, _closure_type(parts.lam, captured)))
        return found[1]

    def _compiled_program(self, lam: Lam, types: tuple, point_type: Type | None,
                          modes: tuple[str, ...]) -> tuple[Callable[..., Any], tuple]:
        """:meth:`_compiled_lambda` of a λ that differentiates.  Raises the located
        DifferentiationError (or TypeCheckError) saying why it has no program."""
        program = nesting.expand_closure(lam, types, point_type)
        # a term already written out is transformed as ←D is written (fusion takes
        # first-order terms)
        transformed = program.term
        for mode in modes:
            transformed = self._transformer(REVERSE if mode == _FUSED else mode)(transformed)
        # a captured function used only under transformations is not needed itself
        used = free_vars(program.term)
        names = [(name, None) for name, _ in types if name in used]
        names += [(name, image) for name, image in sorted(program.images.items())]
        return (self.interpreter.compile_open(transformed, [name for name, _ in names],
                                              image=_backward_image(modes)),
                tuple(names))

    def _embedded(self, value: Any, modes: tuple[str, ...], tape: Tape | None) -> Any:
        """``value`` embedded into the world of ``modes`` (innermost first) as a constant:
        at each level its reals get a zero tangent / a zero backpropagator (a constant
        backpropagator sends zero in any ring); functions are transformed."""

        def leaf(v: Any) -> bool:
            return type(v) in SCALAR_TYPES or callable(v)

        def constant(r: Any) -> Any:
            for mode in modes:
                if mode == FORWARD:
                    r = map_value(r, is_real, _zero_tangent)
                else:
                    zero = ZERO  # on no tape: an embedding made for one run serves the next
                    r = map_value(r, is_real, lambda x: (x, zero))
            return r

        def embed(v: Any) -> Any:
            if type(v) in SCALAR_TYPES:
                return constant(v)
            if isinstance(v, Backprop):
                raise DifferentiationError(
                    "cannot differentiate a function that holds a backpropagator of another "
                    "differentiation: it has no program to transform")
            return self.transform_function(v, modes, tape)

        return map_value(value, leaf, embed)

    def transform_value(self, value: Any, mode: str, tape: Tape | None) -> Any:
        """``value`` embedded into the →D / ←D world as a constant: reals get a zero
        tangent / a zero backpropagator, functions are transformed."""
        return self._embedded(value, (mode,), tape)

    def transform_function(self, f: Any, modes: str | tuple[str, ...], tape: Tape | None,
                           point: Any = None, param_type: Type | None = None) -> Any:
        """The image of the function value ``f`` under ``modes`` (one mode, or several,
        innermost first) (AD.md section 6; section 9 for a function that differentiates,
        ``point`` being where it is differentiated when known, else ``param_type`` the
        type of its argument when known).  Raises a located DifferentiationError (or
        TypeCheckError) when ``f`` has no target program, saying why."""
        if isinstance(modes, str):
            modes = (modes,)
        interpreter = self.interpreter
        image_key = self._image_key(f, modes)
        found = self._images.get(image_key)
        if found is not None and found[0] is f:
            return found[1]
        code = interpreter.closure_code(f)
        if code is not None:
            plain_key = (id(code[0]), modes, self.strategy, interpreter.instrumented)
            # (not remembered: another closure of code seen before is made afresh, mostly,
            # such as a closure over the values of one call, which a table would keep alive)
            image = self._plain_image(plain_key, code, modes, tape)
            if image is not None:
                return image
        parts = interpreter.function_parts(f)
        if parts is None:
            raise DifferentiationError(
                "cannot differentiate a function that is neither a closure of the program nor "
                "a built-in: it has no program to transform")
        if parts.lam is None and PRIMITIVES[parts.builtin].kind == "ad":
            # `grad g`, `jvp g x`: the closure of the primitive's λ over its arguments
            lam = self._primitive_lambda(parts.builtin, len(parts.args))
            captured = dict(zip(PRIMITIVES[parts.builtin].params, parts.args))
            parts = FunctionParts(lam=lam, captured=captured)
        if parts.lam is not None:
            specialised = self._specialised(parts)
            names = tuple(specialised.captured)
            make, free, plain = self._compiled_lambda(specialised.lam, names, modes,
                                                      specialised.captured, point, param_type)
            if code is not None and plain and specialised is parts:
                # its λ does not differentiate, nor does a closure it captured: the next
                # closure of its code is made into an image by make alone (_plain_image)
                self._plain.put(plain_key, (code[0], _constant_places(code[1]), make))
            stamps = (tape or interpreter.tape).stamps
            env = [self._embedded(specialised.captured[name], modes, tape) if image is None
                   else self.transform_function(specialised.captured[image[0]],
                                                image[1] + modes, tape,
                                                param_type=_argument_type(image[2]))
                   for name, image in free]
            image = make(*env)
            if (tape or interpreter.tape).stamps == stamps and plain:
                self._remember_image(image_key, f, image)
            return image
        # (UNPLACED: an error in its derivative is one of the built-in's derivative)
        transformed = Builtin(parts.builtin, span=UNPLACED)
        for mode in modes:
            transformed = self._transformer(mode)(transformed)
        g = self.interpreter.evaluate(transformed, {})
        for arg in parts.args:
            g = self.interpreter.apply(g, self._embedded(arg, modes, tape))
        return g

    def _plain_image(self, key: tuple, code: tuple[Any, tuple], modes: tuple[str, ...],
                     tape: Tape | None) -> Any:
        """The image under ``modes`` of the closure of ``code`` (its code and captured
        values, see :meth:`Interpreter.closure_code`) when an earlier closure of that code
        (``key``) was found plain: its λ does not differentiate and it captured no closure
        that does.  Then so is this one if it captured no function: its image is the
        compiled unit of the λ applied to the captured values made constants (AD.md
        section 6), without looking at the λ again.  None otherwise (the general path of
        :meth:`transform_function` then decides)."""
        found = self._plain.get(key)
        if found is None:
            return None
        function, captured = code
        # (the same code with its reals and arrays in the same places: the same unit)
        if found[0] is not function or found[1] != _constant_places(captured):
            return None
        if len(modes) == 1:
            mode = modes[0]
            env = []
            for value in captured:
                kind = type(value)
                if kind is float or kind is ARRAY:  # (a constant real or array, mostly)
                    env.append(_zero_tangent(value) if mode == FORWARD else (value, ZERO))
                elif callable(value):
                    return None
                else:
                    env.append(self._embedded(value, modes, tape))
        else:
            if any(callable(value) for value in captured):
                return None
            env = [self._embedded(value, modes, tape) for value in captured]
        return found[2](*env)

    def _specialised(self, parts: FunctionParts) -> FunctionParts:
        """The closure ``parts`` with each closure it captured that differentiates defined
        in its body (:func:`lambdad.nesting.inline_closures`): the λ made once per λ-terms
        of the closures, the values the closures kept captured by it.  ``parts`` itself
        when it captured none."""
        if all(self._differentiating(v, 1) is None for v in parts.captured.values()):
            return parts
        kept: list[Any] = []
        layout = self._layout(parts, kept, 0)
        key = ("specialised", _layout_key(parts.lam, layout))
        found = self._analyses.get(key)
        if found is None:
            found = self._analyses.put(key, (layout, nesting.inline_closures(parts.lam, layout)))
        lam, names = found[1]
        return FunctionParts(lam=lam, captured=dict(zip(names, kept)))

    def _layout(self, parts: FunctionParts, kept: list[Any], depth: int) -> tuple:
        """What :func:`lambdad.nesting.inline_closures` defines in the closure ``parts``;
        the values kept are added to ``kept`` in their order there."""
        entries = []
        for name, value in parts.captured.items():
            inner = self._differentiating(value, depth + 1)
            if inner is None:
                kept.append(value)
                entries.append((name, None))
            else:
                entries.append((name, (inner.lam, self._layout(inner, kept, depth + 1))))
        return tuple(entries)

    def _differentiating(self, value: Any, depth: int) -> FunctionParts | None:
        """The λ-term and captured values of ``value`` when it is a closure that
        differentiates (its λ does, or a closure it captured does) or a partial
        application of ``grad``, ``jvp``, ...; None otherwise."""
        if not callable(value) or isinstance(value, Backprop) or depth > _CLOSURE_TYPE_DEPTH:
            return None
        parts = self.interpreter.function_parts(value)
        if parts is None:
            return None
        if parts.lam is None:
            if PRIMITIVES[parts.builtin].kind != "ad":
                return None
            lam = self._primitive_lambda(parts.builtin, len(parts.args))
            return FunctionParts(lam=lam, captured=dict(zip(PRIMITIVES[parts.builtin].params,
                                                            parts.args)))
        key = ("differentiates", id(parts.lam))
        found = self._analyses.get(key)
        if found is None:
            found = self._analyses.put(key, (parts.lam, nesting.differentiates(parts.lam)))
        if found[1] or any(self._differentiating(v, depth + 1) is not None
                           for v in parts.captured.values()):
            return parts
        return None

    def _remember_image(self, key: tuple, f: Any, image: Any) -> None:
        """Keeps the image of the closure ``f`` for the next differentiation of it.

        The image depends only on ``f`` (its λ and the values it captured, which never
        change) and on what ``key`` says: its constants pair their reals with the zero of
        no tape, and it is kept only when making it stamped nothing on the run's tape and
        its λ does not differentiate (whose image depends on the point too).  So the
        embedding of a captured data set or closure is done once, not on every gradient.
        At most _IMAGES_KEPT are kept, the least recently used forgotten first."""
        self._images.put(key, (f, image))

    def _primitive_lambda(self, name: str, given: int) -> Lam:
        """``\\p_{k+1} -> ... -> name p_1 ... p_n`` over the primitive's parameters (its
        first ``given`` ones free), made once per primitive and count."""
        key = ("primitive", name, given)
        found = self._pieces.get(key)
        if found is None:
            params = PRIMITIVES[name].params
            body: Term = Prim(name, tuple(Var(p) for p in params))
            for param in reversed(params[given:]):
                body = Lam(param, body)
            found = self._pieces.put(key, (body, None))
        return found[0]

    # ---- reverse mode
    def grad(self, f: Any, x: Any, strategy: str | None = None) -> tuple[Any, Any]:
        """``(f x, ∇f(x))`` by backpropagation; the gradient has the shape of ``x``.
        Raises DifferentiationError if ``f x`` is not a real or ``x`` is a function."""
        # One guarded run for seeding, both phases and the read-off: the tape's objects are
        # never rescanned by the cyclic collector between them.
        _require_differentiable_input(x)
        return self.interpreter.guarded(self._grad_any, f, x, strategy)

    def _grad_any(self, f: Any, x: Any, strategy: str | None) -> tuple[Any, Any]:
        outermost = self._begin_differentiation()
        try:
            return self._grad(f, x, strategy)
        finally:
            self._end_differentiation(outermost)

    def _grad(self, f: Any, x: Any, strategy: str | None) -> tuple[float, Any]:
        tape = Tape()
        interpreter = self.interpreter
        chosen = strategy_named(strategy or self.strategy)
        saved = interpreter.pin_tape(tape)
        try:
            if type(x) in SCALAR_TYPES:  # one real or one array: seed 0
                seeded: Any = (x, tape.seed(0))
            else:
                seeded = self._seed(x, tape)
            # whether every stamp so far is a seed (0 .. count - 1, made in that order)
            count = tape.stamps if tape.bodiless == tape.stamps else None
            g = self.transform_function(f, _FUSED if chosen.fuses else REVERSE, tape, x)
            out = interpreter.apply(g, seeded)
        finally:
            interpreter.unpin_tape(saved)
        if not is_reverse_real(out):
            raise DifferentiationError("grad needs a function whose result is a real")
        value, back = out
        if count is not None and chosen.run_first_seeds is not None \
                and not interpreter.instrumented:
            # the adjoints of the seeds as a list, not looked up one by one in a table
            # (what the backward phase gives, without events in the reals)
            flat = self._backward_first_seeds(tape, back, count, chosen.run_first_seeds)
            tape.release()
            if type(x) is float:
                return value, flat[0]
            if type(x) is ARRAY:
                return value, array_adjoint(x, flat[0])
            if is_flat_reals(x):
                return value, flat
            return value, self._read_off(x, dict(enumerate(flat)))
        adjoints = self._backward(tape, back(1.0), strategy)
        tape.release()  # the run is over: its seeds need not wait for the cyclic collector
        return value, self._read_off(x, adjoints)

    def kept_image(self, f: Any) -> Any:
        """The image of the closure ``f`` under the reverse mode of the strategy set, kept
        by a :meth:`grad` of ``f`` by that strategy (see :meth:`transform_function`); None
        when none was kept: ``f`` differentiates, or embedding what it captures stamped the
        tape, or runs are instrumented (their images report events)."""
        if self.interpreter.instrumented:
            return None
        found = self._images.get(self._image_key(f, (self._reverse(None),)))
        return found[1] if found is not None and found[0] is f else None

    def record_reverse_run(self, tape: Tape) -> None:
        """Publishes as ``last_stats`` the costs of one first-order reverse-mode run made
        outside :meth:`grad` (by :mod:`lambdad.prepared`) on ``tape``."""
        self._last_costs = [(1, REVERSE, tape.stamps - tape.bodiless, tape.bodies_run)]

    def vjp(self, f: Any, x: Any) -> tuple[Any, Callable[[Any], Any]]:
        """``(f x, pull-back)``: the pull-back maps a cotangent of the result's shape to one
        of ``x``'s shape, and may be called any number of times (and differentiated)."""
        _require_differentiable_input(x)
        outermost = self._begin_differentiation()
        try:
            return self._vjp(f, x)
        finally:
            self._end_differentiation(outermost)

    def _vjp(self, f: Any, x: Any) -> tuple[Any, Callable[[Any], Any]]:
        tape = Tape()
        saved = self.interpreter.pin_tape(tape)
        try:
            seeded = self._seed(x, tape)
            g = self.transform_function(f, self._reverse(None), tape, x)
            out = self.interpreter.apply(g, seeded)
        finally:
            self.interpreter.unpin_tape(saved)
        # The pull-back keeps the seeds, not the tape: a seed refers back to its tape, so
        # a tape holding its seeds would be a cycle left for the cyclic collector by every
        # vjp (each reverse-over-reverse Hessian).
        seeds = tape.release()
        if has_function(out):
            raise DifferentiationError("vjp needs a function whose result has no functions")
        value = map_value(out, is_reverse_real, lambda pair: pair[0])
        strategy = self.strategy

        def pullback(cotangent: Any) -> Any:
            total = None
            try:
                for (_, back), c in zip_values(out, cotangent, is_reverse_real):
                    total = add_cotangents(
                        total, Call(back, c if type(c) in SCALAR_TYPES else float(c)))
            except (ValueError, TypeError, IndexError):
                raise DifferentiationError(
                    "the cotangent given to a pull-back must have the shape of the function's "
                    "result") from None
            tape.resume(seeds)
            try:
                return self._read_off(x, self._backward(tape, total, strategy))
            finally:
                tape.release()

        # the pull-back is the closure of `\c -> snd (vjp f x) c`: differentiating it
        # differentiates that program
        return value, MadeFunction(pullback, self._term("pull-back", PULLBACK_TERM),
                                   {"f": f, "x": x})

    def _seed(self, x: Any, tape: Tape) -> Any:
        """``x`` with its i-th real ``r`` (left to right) replaced by ``(r, seed i)`` and its
        functions transformed."""
        if is_flat_reals(x):
            return list(zip(x, tape.seeds(0, len(x))))
        index = 0

        def seed(r: Any):
            nonlocal index
            pair = (r, tape.seed(index))
            index += 1
            return pair

        def leaf(v: Any) -> bool:
            return type(v) in SCALAR_TYPES or callable(v)

        def embed(v: Any):
            return seed(v) if type(v) in SCALAR_TYPES else self.transform_function(
                v, REVERSE, tape)

        return map_value(x, leaf, embed)

    def _backward(self, tape: Tape, cotangent: Any, strategy: str | None) -> dict[int, Any]:
        interpreter = self.interpreter
        saved = interpreter.pin_tape(tape)
        ran = tape.bodies_run
        try:
            adjoints = interpreter.backward(cotangent, strategy or self.strategy)
        finally:
            interpreter.unpin_tape(saved)
        # the backpropagators of the inner levels' phases (on this tape) are theirs
        self._record(REVERSE, tape.created - self._inner_reached.get(id(tape), 0),
                     tape.bodies_run - ran)
        return adjoints

    def _backward_first_seeds(self, tape: Tape, back: Backprop, count: int,
                              run: Callable[[Tape, Any, int], list[Any]]) -> list[Any]:
        """:meth:`_backward` of ``back 1`` on ``tape`` by ``run``, a strategy's backward
        phase for the seeds ``0 .. count - 1`` made first (see :class:`Strategy`): their
        adjoints as a list, 0 for one not reached; the costs recorded as there."""
        interpreter = self.interpreter
        saved = interpreter.pin_tape(tape)
        ran = tape.bodies_run
        try:
            flat = interpreter.run_as_code(run, tape, back, count)
        finally:
            interpreter.unpin_tape(saved)
        inner = self._inner_reached
        self._record(REVERSE, tape.created - (inner.get(id(tape), 0) if inner else 0),
                     tape.bodies_run - ran)
        return flat

    @staticmethod
    def _read_off(x: Any, adjoints: dict[int, Any]) -> Any:
        """The gradient in the shape of ``x``: its i-th real replaced by the i-th adjoint
        (0 if the seed was never reached)."""
        if is_flat_reals(x):
            get = adjoints.get
            return [get(i, 0.0) for i in range(len(x))]
        index = 0

        def adjoint(r: Any) -> Any:
            nonlocal index
            value = adjoints.get(index, 0.0)
            index += 1
            return value if type(r) is float else array_adjoint(r, value)

        return map_value(x, is_real, adjoint)

    # ---- forward mode
    def jvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        """``(f x, ∂f(x)·v)`` by dual numbers; ``v`` has the shape of ``x``."""
        _require_differentiable_input(x)
        # one guarded run for the transformation and the run (see grad)
        return self.interpreter.guarded(self._jvp_any, f, x, v)

    def _jvp_any(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        outermost = self._begin_differentiation()
        try:
            return self._jvp(f, x, v)
        finally:
            self._end_differentiation(outermost)

    def _jvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any]:
        if is_flat_reals(x) and is_flat_reals(v) and len(v) == len(x):
            seeded: Any = list(zip(x, v))  # the usual point, paired by one loop
        else:
            tangents = iter(self._tangent_list(x, v))
            seeded = map_value(x, lambda leaf: type(leaf) in SCALAR_TYPES or callable(leaf),
                               lambda leaf: (leaf, next(tangents)) if type(leaf) in SCALAR_TYPES
                               else self.transform_function(leaf, FORWARD, None))
        # a function that differentiates runs reverse mode inside: on a tape of this run
        tape = Tape()
        saved = self.interpreter.pin_tape(tape)
        try:
            g = self.transform_function(f, FORWARD, None, x)
            out = self.interpreter.apply(g, seeded)
        finally:
            self.interpreter.unpin_tape(saved)
        tape.release()
        self._record(FORWARD, 0, 0)
        split = split_flat_duals(out)
        if split is not None:
            return split
        if has_function(out):
            return self._split(out, f, x, v, True), self._split(out, f, x, v, False)
        return self._split_duals(out)

    @staticmethod
    def _split_duals(out: Any) -> tuple[Any, Any]:
        """The primal and the tangent of the forward-mode result ``out`` (without
        functions)."""
        split = split_flat_duals(out)
        if split is not None:
            return split
        return (map_value(out, is_dual, lambda pair: pair[0]),
                map_value(out, is_dual, lambda pair: pair[1]))

    def _split(self, out: Any, f: Any, x: Any, v: Any, primal: bool) -> Any:
        """The value (``primal``) or the tangent part of the forward-mode result ``out`` of
        ``f`` at ``x`` along ``v`` that holds functions (Manzyuk et al., JFP 2019).  A
        function at ``path`` in ``f x`` gives the closure of ``\\a -> (f x)@path a``, its
        tangent the closure of ``\\a -> snd (jvp (\\y -> (f y)@path a) x v)``: applied, the
        tangent differentiates afresh, so it may be applied inside other differentiations
        (and differentiated: it is a closure of a term)."""
        # post-order over (value, path, done): each finished value pushes its part
        work: list[tuple[Any, tuple[tuple[bool, int], ...], bool]] = [(out, (), False)]
        built: list[Any] = []
        while work:
            value, path, done = work.pop()
            if is_dual(value):
                built.append(value[0] if primal else value[1])
            elif type(value) is tuple or type(value) is list:
                if done:
                    items = built[len(built) - len(value):]
                    del built[len(built) - len(value):]
                    built.append(tuple(items) if type(value) is tuple else items)
                else:
                    work.append((value, path, True))
                    in_list = type(value) is list
                    work.extend((item, path + ((in_list, i),), False)
                                for i, item in reversed(list(enumerate(value))))
            elif callable(value) and not isinstance(value, Backprop):
                built.append(self._part_function(path, primal)(f, x, v))
            else:
                built.append(value)
        return built[0]

    def _part_function(self, path: tuple[tuple[bool, int], ...], primal: bool) -> Callable[..., Any]:
        """The closure over ``f``, ``x``, ``v`` of the function at ``path`` in ``f x``
        (``primal``) or of its tangent along ``v`` (see :meth:`_split`), compiled once per
        path."""
        key = ("part", path, primal)
        found = self._pieces.get(key)
        if found is None:
            term = _part_term(path, primal)
            found = self._pieces.put(key, (term, self.interpreter.compile_open(
                term, ("f", "x", "v"))))
        return found[1]

    def _term(self, name: str, source: str) -> Term:
        """The term ``source``, parsed once."""
        key = ("term", name)
        found = self._pieces.get(key)
        if found is None:
            found = self._pieces.put(key, (parse_expr(source, "<differentiation>"), None))
        return found[0]

    @staticmethod
    def _tangent_list(x: Any, v: Any) -> list[Any]:
        if callable(v) and not callable(x):
            raise DifferentiationError("a direction cannot be a function")
        try:
            pairs = list(zip_values(x, v, is_real))
        except (ValueError, TypeError, IndexError):
            pairs = None
        if pairs is None or not all(type(t) in SCALAR_TYPES for _, t in pairs):
            raise DifferentiationError("the direction given to jvp must have the shape of the point")
        return [t for _, t in pairs]

    def _one_guard(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)``, whose many differentiations share one guard of the
        interpreter (the limits raised once, not per run) unless runs are instrumented:
        a step or time limit then applies to each run, as when called one by one."""
        if self.interpreter.instrumented:
            return function(*args)
        return self.interpreter.guarded(function, *args)

    def forward_grad(self, f: Any, x: Any) -> tuple[Any, Any]:
        """``(f x, ∇f(x))`` by forward mode: one run per input real, seeding it with 1."""
        return self._one_guard(self._forward_grad, f, x)

    def _forward_grad(self, f: Any, x: Any) -> tuple[Any, Any]:
        n = count_reals(x)
        value = None
        columns: list[Any] = []
        for i in range(n):
            value, tangent = self.jvp(f, x, basis(x, i))
            if type(tangent) not in SCALAR_TYPES:
                raise DifferentiationError("grad needs a function whose result is a real")
            columns.append(tangent)
        if n == 0:
            value, _ = self.jvp(f, x, x)
        it = iter(columns)

        def column(r: Any) -> Any:
            if type(r) is ARRAY:  # the gradient of an array, from its reals' columns
                return np.array([next(it) for _ in range(r.size)]).reshape(r.shape)
            return next(it)

        return value, map_value(x, is_real, column)

    # ---- Jacobians
    def jacobian(self, f: Any, x: Any, mode: str) -> tuple[Any, Any]:
        """``(f x, J)``: ``J`` has the shape of ``f x`` with each real replaced by the
        gradient of that output real, in the shape of ``x`` (for ``f : a -> [R]``, a list of
        rows ``[a]``).  Forward mode (``mode == FORWARD``) takes one dual-number run per real
        of ``x``; reverse mode one run and one backward pass per real of ``f x``."""
        return self._one_guard(self._jacobian, f, x, mode)

    def _jacobian(self, f: Any, x: Any, mode: str) -> tuple[Any, Any]:
        if mode == FORWARD:
            n = count_reals(x)
            value = None
            tangents: list[list[Any]] = []
            for j in range(n):  # a run per real of x (per element of an array)
                value, tangent = self.jvp(f, x, basis(x, j))
                tangents.append(leaves(tangent))
            if n == 0:
                value, _ = self.jvp(f, x, x)
            rows = [replace_leaves(x, [tangent[i] for tangent in tangents])
                    for i in range(count_reals(value))]
        else:
            value, pullback = self.vjp(f, x)
            rows = [pullback(basis(value, i)) for i in range(count_reals(value))]
        it = iter(rows)
        return value, map_value(value, is_real, lambda r: next(it) if type(r) is not ARRAY
                                else _rows_of(r, it))

    # ---- second derivatives
    def hvp(self, f: Any, x: Any, v: Any) -> tuple[Any, Any, Any]:
        """``(f x, ∇f(x), H(x)·v)`` by forward-over-reverse (Pearlmutter 1994): one gradient
        computed in dual numbers."""
        (value, gradient), (_, product) = self.jvp(self._value_and_gradient(f), x, v)
        return value, gradient, product

    def value_and_gradient_image(self, f: Any, x: Any) -> Any:
        """The image under →D of ``\\y -> (f y, grad f y)`` (what :meth:`hvp` runs) for
        points like ``x``, by the strategy set, to be run by :meth:`run_forward_image`;
        None when it has none to keep: runs are instrumented, ``f`` has no target program,
        or making the image stamps a tape (it would embed a backpropagator of one run)."""
        interpreter = self.interpreter
        if interpreter.instrumented:
            return None
        tape = Tape()
        saved = interpreter.pin_tape(tape)
        try:
            image = interpreter.guarded(
                lambda: self.transform_function(self._value_and_gradient(f), FORWARD, None, x))
        except LambdadError:
            return None
        finally:
            interpreter.unpin_tape(saved)
        return image if tape.stamps == 0 else None

    def run_forward_image(self, image: Any, seeded: Any) -> tuple[Any, Any]:
        """The primal and the tangent of ``image`` (an image under →D without functions in
        its result) applied to the dual point ``seeded``: one differentiation, its reverse
        mode inside on a tape of its own, its costs recorded as :meth:`jvp` records them."""
        interpreter = self.interpreter
        outermost = self._begin_differentiation()
        try:
            tape = Tape()  # where the reverse mode inside runs
            saved = interpreter.pin_tape(tape)
            try:
                out = image(seeded)
            finally:
                interpreter.unpin_tape(saved)
            tape.release()
            self._costs.append((self._depth, FORWARD, 0, 0))  # (_record written out)
            return self._split_duals(out)
        finally:
            self._end_differentiation(outermost)

    def _value_and_gradient(self, f: Any) -> Any:
        """The function value ``\\y -> (f y, grad f y)``, written with ``vjp`` so that one
        run gives both: a closure of the interpreter, so differentiating it transforms its
        written-out program (AD.md section 9)."""
        return self._closure("value_and_gradient",
                             r"\y -> let (v, back) = vjp f y in (v, back 1)", f)

    def _gradient(self, f: Any) -> Any:
        """The function value ``\\y -> grad f y``."""
        return self._closure("gradient", r"\y -> grad f y", f)

    def _closure(self, name: str, source: str, *captured: Any) -> Any:
        """The closure of the λ ``source`` (parsed once) over ``f`` (and ``es``): a closure
        of the interpreter, so differentiating it transforms its written-out program."""
        key = ("closure", name)
        found = self._pieces.get(key)
        if found is None:
            term = parse_expr(source, "<differentiation>")
            names = ("f", "es")[:len(captured)]
            found = self._pieces.put(key, (term, self.interpreter.compile_open(term, names)))
        return found[1](*captured)

    def _directional_derivative(self, f: Any, direction: Any) -> Any:
        """The function value ``\\y -> snd (jvp f y es)`` for a scalar ``f`` and the
        direction ``es``."""
        return self._closure("directional derivative", r"\y -> (snd (jvp f y es) : R)", f,
                             direction)

    def _directional_derivatives(self, f: Any, directions: list[Any]) -> Any:
        """The function value ``\\y -> map (\\e -> snd (jvp f y e)) directions`` for a
        scalar ``f``."""
        return self._closure("directional", r"\y -> map (\e -> (snd (jvp f y e) : R)) es", f,
                             directions)

    def hessian_rows(self, f: Any, x: Any, mode: str = "forward-over-reverse") -> list[Any]:
        """The Hessian of ``f`` at ``x``: for each input real ``i`` (left to right) the
        gradient of ``∂f/∂x_i``, in the shape of ``x``.  ``mode`` is the composition:
        ``forward-over-reverse`` (n Hessian-vector products), ``reverse-over-reverse``,
        ``reverse-over-forward`` or ``forward-over-forward`` (n² directional runs)."""
        return self._one_guard(self._hessian_rows, f, x, mode)

    def _hessian_rows(self, f: Any, x: Any, mode: str) -> list[Any]:
        n = count_reals(x)
        rows = []
        pullback = None
        for i in range(n):
            e_i = basis(x, i)
            if mode == "forward-over-reverse":
                rows.append(self.jvp(self._gradient(f), x, e_i)[1])
            elif mode == "reverse-over-reverse":
                # e_i H is the pull-back of the gradient's map along e_i
                if pullback is None:
                    pullback = self.vjp(self._gradient(f), x)[1]
                rows.append(pullback(e_i))
            elif mode == "reverse-over-forward":
                rows.append(self.grad(self._directional_derivative(f, e_i), x)[1])
            elif mode == "forward-over-forward":
                # the derivative along e_i of the n directional derivatives ∂f/∂x_j
                derivatives = self._directional_derivatives(f, [basis(x, j) for j in range(n)])
                rows.append(replace_leaves(x, self.jvp(derivatives, x, e_i)[1]))
            else:
                raise DifferentiationError(f"unknown composition `{mode}`; use one of "
                                           + ", ".join(COMPOSITIONS))
        return rows


def _constant_places(captured: tuple) -> tuple[bool, ...]:
    """Which of the values ``captured`` by a closure are reals or arrays (constants whose
    derivative parts the transformations know are zero)."""
    return tuple(type(value) in SCALAR_TYPES for value in captured)


def _rows_of(output: Any, rows: Any) -> list[Any]:
    """The next ``output.size`` of ``rows`` (one per element of the array ``output``) as a
    list in its shape (a list of lists for a Mat)."""
    if output.ndim == 1:
        return [next(rows) for _ in range(output.shape[0])]
    return [[next(rows) for _ in range(output.shape[1])] for _ in range(output.shape[0])]


COMPOSITIONS = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward",
                "forward-over-forward")
"""The ways to compute second derivatives: outer mode over inner mode."""


PULLBACK_TERM = r"\c -> snd (vjp f x) c"
"""The program a pull-back of ``f`` at ``x`` computes (what differentiating it transforms)."""


def _part_term(path: tuple[tuple[bool, int], ...], primal: bool) -> Term:
    """``\\a -> (f x)@path a`` (``primal``) or ``\\a -> snd (jvp (\\y -> (f y)@path a) x
    v)``, ``@path`` selecting by ``fst``/``snd`` in pairs and ``!!`` in lists (each step of
    ``path`` is whether it is in a list, and the position)."""

    def at(point: str) -> str:
        selected = f"f {point}"
        for in_list, index in path:
            selected = (f"({selected}) !! {index}" if in_list
                        else f"{'fst' if index == 0 else 'snd'} ({selected})")
        return f"({selected}) a"

    if primal:
        return parse_expr(f"\\a -> {at('x')}", "<differentiation>")
    return parse_expr(f"\\a -> snd (jvp (\\y -> {at('y')}) x v)", "<differentiation>")


def _layout_key(lam: Lam, layout: tuple) -> tuple:
    """``layout`` (see Differentiator._layout) of the closure of ``lam`` with each λ-term
    by its identity."""
    return (id(lam), tuple((name, None if inner is None else _layout_key(*inner))
                           for name, inner in layout))


def _require_differentiable_input(x: Any) -> None:
    if callable(x) and not isinstance(x, Backprop):
        raise DifferentiationError(
            "cannot differentiate with respect to a function-typed input: the point must be "
            "built from reals, pairs and lists")

