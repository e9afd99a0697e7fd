"""The images of function values under the transformations: what ``grad``, ``jvp`` and
``vjp`` apply in place of the function they differentiate.

A function value is a closure built by the interpreter: a λ-term plus its captured
environment (or a built-in applied to some arguments).  Its image under →D or ←D (AD.md
section 6), or under several of them one over the other, is its λ-term transformed (once per
term, cached, and compiled as a function of its free names) applied to the captured
environment embedded into the transformed world: reals and arrays become constants
``(r, 0)`` / ``(r, \\a -o zero)``, closures are imaged in turn.  A λ that differentiates is
written out as a target program first (:mod:`lambdad.nesting`, AD.md section 9), with the
closures it captured that differentiate defined in its body.  The next closure of code
already imaged, capturing only constants, is imaged from the compiled unit alone.

:class:`Images` holds the tables of this work; :class:`lambdad.differentiate.Differentiator`
is one, and runs the images it makes.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Callable
from typing import Any

from . import backward as backward_mode
from . import forward as forward_mode
from .errors import UNPLACED, DifferentiationError, LambdadError, TypeCheckError
from .interpreter import Interpreter
from . import nesting
from .typecheck import infer_term
from .primitives import PRIMITIVES
from .reals import is_real, value_type
from .rules import NestedDifferentiationError
from .syntax import Builtin, FunT, Lam, Prim, Term, Type, Var, VarT, free_vars, walk
from .fuse import fused_backward_term
from .memo import Memo
from .tape import ZERO, Backprop, Tape, strategy_named
from .values import SCALAR_TYPES, FunctionParts, map_value

FORWARD = "forward"
REVERSE = "reverse"
# ←D with the backpropagators of each straight-line region fused (strategies that fuse).
FUSED = "reverse, fused"


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

# The kinds of compiled unit (see Images._unit_key).
_IMAGE = "image"
_PROGRAM = "program"


# ---------------------------------------------------------------- typing runtime values


def _zero_tangent(r: Any) -> tuple[Any, Any]:
    """A captured constant under →D: its tangent is zero (of its shape, for an array)."""
    return (r, 0.0) if type(r) is float else (r, np.zeros(r.shape))


def _constant(r: Any, mode: str) -> tuple[Any, Any]:
    """The real or array ``r`` embedded as a constant at one level of ``mode`` (AD.md
    section 6): paired with a zero tangent under →D, with the zero backpropagator under ←D
    (on no tape: an embedding made for one run serves the next)."""
    return _zero_tangent(r) if mode == FORWARD else (r, ZERO)


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


# ---------------------------------------------------------------- the images


class Images:
    """Makes the images of function values on an interpreter, for the backpropagators'
    ``strategy`` (a name in :data:`lambdad.tape.STRATEGIES`), and keeps what it works out
    in bounded tables."""

    def __init__(self, interpreter: Interpreter, strategy: str):
        self.interpreter = interpreter
        self.strategy = strategy
        # What is worked out once, one bounded table per kind of entry (see lambdad.memo):
        # compiled units by _unit_key -> (λ-term kept alive, the image's function of the
        # captured values, or None when the term differentiates; the compiled written-out
        # program, or the refusal saying why there is none)
        self._units = Memo(_UNITS_KEPT)
        # facts about λ-terms (closure types, "differentiates", specialisations)
        self._analyses = Memo(_ANALYSES_KEPT)
        # the terms the differentiator writes itself, parsed and compiled
        self._pieces = Memo(_PIECES_KEPT)
        # _image_key -> (the function value kept alive, its image); see transform_function
        self._images = Memo(_IMAGES_KEPT)
        # (code of a closure, modes, strategy, variant) -> (the code kept alive, which of
        # its captured values are reals or arrays, the image's function of them): see
        # _plain_image
        self._plain = Memo(_UNITS_KEPT)

    # ---- transforming function values
    def _transformer(self, mode: str) -> Callable[..., Term]:
        if mode == FORWARD:
            return forward_mode.forward_term
        if mode == FUSED:
            return fused_backward_term
        return backward_mode.backward_term

    def _reverse(self, strategy: str | None) -> str:
        """The mode reverse-mode differentiation transforms functions in for ``strategy``:
        fused ←D for a strategy that fuses, ←D as the paper writes it otherwise."""
        return FUSED if strategy_named(strategy or self.strategy).fuses else REVERSE

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
        """Where the image of the function value ``f`` under ``modes`` is kept (or, for
        ``f`` the code closures share, what makes their images): by the strategy set (its
        ←D, its backward phase) and the variant compiled."""
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
                    if depth > 0 and mode == FUSED:
                        # fusion sums what a body sends to a backpropagator as reals (or
                        # arrays); after an inner transformation those are pairs
                        mode = REVERSE
                    elif mode == REVERSE and len(modes) > 1 and depth == 0:
                        mode = inner_reverse
                    transform = self._transformer(mode)
                    transformed = (transform(transformed, constants=constants) if constants
                                   else transform(transformed))
                    fused = fused or mode == FUSED
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
            transformed = self._transformer(REVERSE if mode == FUSED else mode)(transformed)
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
        if len(modes) == 1 and type(value) is list:
            made = _list_of_constants(value, modes[0])
            if made is not None:
                return made

        def leaf(v: Any) -> bool:
            return type(v) in SCALAR_TYPES or callable(v)

        def constant(r: Any) -> Any:
            r = _constant(r, modes[0])  # (a real or an array: then a pair of them)
            for mode in modes[1:]:
                r = map_value(r, is_real, lambda x: _constant(x, mode))
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
        kept = self._kept_image(image_key, f)
        if kept is not None:
            return kept
        code = interpreter.closure_code(f)
        if code is not None:
            plain_key = self._image_key(code[0], modes)  # (by the closures' code)
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
        that does.  Then so is this one if each function it captured has its image kept
        (:meth:`_remember_image` keeps only those of functions that do not
        differentiate): its image is the compiled unit of the λ applied to the captured
        values made constants and those images (AD.md section 6), without looking at the
        λ again.  None
        otherwise (the general path of :meth:`transform_function` then decides)."""
        found = self._plain.get(key)
        if found is None:
            return None
        function, captured = code
        # (the same code with its reals and arrays in the same places: the same unit)
        if found[0] is not function or found[1] != _constant_places(captured):
            return None
        env = []
        mode = modes[0] if len(modes) == 1 else None
        for value in captured:
            if mode is not None and type(value) in SCALAR_TYPES:  # (a constant, mostly)
                env.append(_constant(value, mode))
            elif callable(value):
                # a function kept with its image (a top-level definition, mostly): plain,
                # so the unit is the same whichever such function the closure captured
                kept = self._kept_image(self._image_key(value, modes), value)
                if kept is None:
                    return None
                env.append(kept)
            else:
                env.append(self._embedded(value, modes, tape))
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

    def _kept_image(self, key: tuple, f: Any) -> Any:
        """The image of the function value ``f`` kept under ``key`` (see
        :meth:`_remember_image`), None when none is: the table is by identity, and an
        entry is ``f``'s only while ``f`` is the one it holds."""
        found = self._images.get(key)
        return found[1] if found is not None and found[0] is f else None

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


def _list_of_constants(value: list, mode: str) -> list | None:
    """The list ``value`` of reals, or of pairs of reals, embedded as constants at one level
    of ``mode`` (what :meth:`Images._embedded` makes of it, by one comprehension: the data
    a closure made at each call captures, mostly); None for a list of anything else."""
    if not value:
        return None
    first = value[0]
    if type(first) is float:
        if not all(type(x) is float for x in value):
            return None
        return [(x, 0.0) for x in value] if mode == FORWARD else [(x, ZERO) for x in value]
    if type(first) is tuple and len(first) == 2:
        if not all(type(p) is tuple and len(p) == 2 and type(p[0]) is float
                   and type(p[1]) is float for p in value):
            return None
        if mode == FORWARD:
            return [((a, 0.0), (b, 0.0)) for a, b in value]
        return [((a, ZERO), (b, ZERO)) for a, b in value]
    return None


def _constant_places(captured: tuple) -> tuple[bool, ...]:
    """Which of the values ``captured`` by a closure are reals or arrays (constants whose
    derivative parts the transformations know are zero)."""
    return tuple(type(value) in SCALAR_TYPES for value in captured)


def _layout_key(lam: Lam, layout: tuple) -> tuple:
    """``layout`` (see Images._layout) of the closure of ``lam`` with each λ-term
    by its identity."""
    return (id(lam), tuple((name, None if inner is None else _layout_key(*inner))
                           for name, inner in layout))
