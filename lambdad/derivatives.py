"""The derivatives :class:`lambdad.pipeline.Program` offers, at points of Python data.

:class:`Derivatives` is one program's: gradients in either mode (a prepared path kept per
point shape and strategy after the first general run, see
:mod:`lambdad.prepared`), directional derivatives and
pull-backs, Hessian-vector products (prepared likewise), Hessians, Jacobians, and gradients
with respect to chosen parameters through a restricted program.  A result that is not finite
is an error located at the definition.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from .arraylib import ARRAY, all_finite
from .calling import (
    argument_names,
    argument_type,
    arguments_covered,
    curried_parts,
    finite_reals,
    first_non_finite,
    output_names,
    packed,
    point_arrays,
    point_from_python,
    point_term,
    Shape,
    real_inputs,
    real_point,
    real_term,
    with_arrays,
)
from .differentiate import COMPOSITIONS, FORWARD, REVERSE, Stats
from .reals import count_reals, is_real
from .errors import DifferentiationError, EvalError, UsageError
from .interpreter import NOT_FINITE
from .iterate import collector_paused_during
from .prepared import prepared_gradient, prepared_product
from .printer import print_type
from .results import Jacobian, _reals_of
from .syntax import is_differentiable, map_type, tuple_components, App, Decl, Lam, RealT, Term, Type, Var, VarT
from .values import all_reals, format_real, has_tuples, map_value, to_python, written


# How many programs restricted() keeps for later calls, per program.
_RESTRICTIONS_KEPT = 8


_PREPARED_SHAPES = 256


def remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """``cache[key] = value``, the cache emptied first when it is full (see
    Points._plans)."""
    if len(cache) >= _PREPARED_SHAPES:
        cache.clear()
    cache[key] = value


def _fixed_key(values: Sequence[Any]) -> str | None:
    """A key telling apart the runtime values ``values`` (reals, booleans, pairs, lists,
    arrays): their text, exact for reals, an array by its shape and a digest of its
    elements; None when one holds a function (no key)."""
    parts: list[str] = []
    stack = list(reversed(values))
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is tuple or kind is list:
            parts.append("(" if kind is tuple else "[")
            stack.append(")" if kind is tuple else "]")
            stack.extend(reversed(value))
        elif kind is str:  # (a closing bracket pushed above)
            parts.append(value)
        elif kind is ARRAY:
            parts.append(f"<{value.shape} {hashlib.sha256(value.tobytes()).hexdigest()}>")
        elif kind is float or kind is bool:
            parts.append(repr(value))
        else:
            return None
        parts.append(",")
    return "".join(parts)


def _holds_array(point: Any) -> bool:
    """Whether the point (Python data) holds a NumPy array."""
    stack = [point]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is ARRAY:
            return True
        # (a list of reals, the commonest, is passed over in one C-level pass)
        if (kind is tuple or kind is list and not all_reals(value)) and len(stack) < 10_000:
            stack.extend(value)
    return False


def _writer(taken: Type, reals: Shape) -> Callable[[Any], Any] | None:
    """How a prepared path's gradient at a point of type ``taken`` (of reals, of shape
    ``reals``) is made the Python data it is written as: None when nothing is to be done
    (no tuple of more than two components), one loop for a k-tuple of reals, else
    :func:`~lambdad.values.written`."""
    if not has_tuples(taken):
        return None
    components = tuple_components(taken)
    if type(reals) is int and len(components) == reals and all(
            isinstance(part, RealT) for part in components):
        return _flat
    return lambda value: written(value, taken)


def _flat(value: Any) -> tuple:
    """The right-nested pairs ``value`` as one flat tuple (a k-tuple of reals as written)."""
    items = []
    while type(value) is tuple:
        items.append(value[0])
        value = value[1]
    items.append(value)
    return tuple(items)


def _python_reals(point: Any, t: Type) -> Any:
    """The runtime point ``point`` of type ``t`` as the Python data it is written as (a
    k-tuple of reals one flat tuple, which repeated calls convert fastest, see
    calling.real_point; a pair holding a pair kept so)."""
    return written(point, t)


class Derivatives:
    """The derivatives of a :class:`lambdad.pipeline.Program`'s definitions at points of
    Python data: gradients (the prepared paths kept per point shape), Jacobian- and
    Hessian-vector products, Hessians, Jacobians, and gradients with respect to chosen
    parameters (:meth:`restricted`).  It holds the program's caches only: the program
    (``owner``) is passed to each method, so no reference cycle keeps a dropped program."""

    def __init__(self) -> None:
        # Reverse-mode gradients at points of Python reals, by (name, shape of the point,
        # strategy asked for): the prepared path, found after the first general run (see
        # prepared.prepared_gradient; its gradient written as _writer says), or None when
        # there is none.
        self._gradients: dict[tuple[str, Shape, str | None], Any] = {}
        # Hessian-vector products at points and directions of Python reals, by (name, shape
        # of the point, strategy): the prepared path, found after the first general run
        # (see prepared.prepared_product; written as _writer says), or None when there is
        # none.
        self._products: dict[tuple[str, Shape, str], Any] = {}
        # Programs made by restricted(), by name, chosen parameters and the fixed values.
        self._restrictions: dict[tuple[Any, ...], Any] = {}

    def value_and_grad(self, owner: Any, name: str, point: Any, mode: str = "reverse",
                       strategy: str | None = None, stats: bool = False,
                       wrt: Sequence[str] | None = None):
        """The work of :meth:`Program.value_and_grad`."""
        runtime = owner.runtime
        current = runtime.interpreter.strategy
        # (a repeated gradient costs microseconds: its prepared path is taken here, in one
        # frame.  A prepared path runs by the strategy it was made for, whatever strategy
        # is set (its run differentiates nothing inside, so nothing else reads the
        # strategy): a call naming another strategy takes it without switching.)
        if mode == "reverse" and wrt is None:
            # (a finite real, the commonest point, read here without a call; the arrays of
            # an array point are tested finite in the prepared run, quicker there, and one
            # that is not takes the general path, which says so)
            inputs = ((0, point) if type(point) is float and point - point == 0.0
                      else real_inputs(point, False))
            if inputs is not None:
                prepared = self._gradients.get(
                    (name, inputs[0], current if strategy is None else strategy))
                # (instrumented runs, under a step or time limit, report events: general
                # path; the prepared run pauses the collector: little is made outside it)
                arrays = None if type(inputs[0]) is int else point_arrays(point, inputs[0])
                out = (None if prepared is None or runtime.interpreter.instrumented
                       else prepared(inputs[1]) if arrays is None
                       else prepared(inputs[1], arrays))
                if out is not None and out is not NOT_FINITE:
                    value, gradient = out
                    # The gradient is made afresh (floats, right-nested pairs of them,
                    # new lists of them, nested in the point's shape): once found
                    # finite, it is the Python data already.
                    shape = prepared.shape
                    if type(value) is float and value - value == 0.0 and (
                            first_non_finite(gradient) is None if type(shape) is not int
                            else all(map(math.isfinite, gradient)) if shape < 0
                            else gradient - gradient == 0.0 if type(gradient) is float
                            else finite_reals(gradient)):
                        out = (value, gradient)
                    else:
                        self._require_finite(owner, name, real_point(point)[1], value,
                                             gradient)
                        out = (to_python(value), to_python(gradient))
                    if prepared.written_as is not None:
                        out = (out[0], prepared.written_as(out[1]))
                    return out + (runtime.differentiator.last_stats,) if stats else out
        if wrt is None and (strategy is None or strategy == current):
            return self._general_value_and_grad(owner, name, point, mode, current, stats)
        if wrt is not None:
            program, point = self.restricted(owner, name, point, wrt)
            return program.value_and_grad(name, _python_reals(point, program.points.point_type(
                name, point)), mode, strategy, stats)
        return self._by_strategy(owner, name, point, mode, strategy, stats)

    @collector_paused_during
    def _by_strategy(self, owner: Any, name: str, point: Any, mode: str, strategy: str,
                     stats: bool):
        """:meth:`value_and_grad` by ``strategy``, set for the call and put back after it,
        in one pause of the collector: the collection the pause defers to after the call
        would otherwise run inside it, where the strategy is put back (a quarter of a
        second after a first gradient of 10^4 bindings)."""
        runtime = owner.runtime
        current = runtime.interpreter.strategy
        runtime.set_strategy(strategy)  # (UsageError for an unknown one, changing nothing)
        try:
            return self.value_and_grad(owner, name, point, mode, None, stats)
        finally:
            runtime.set_strategy(current)

    @collector_paused_during
    def _general_value_and_grad(self, owner: Any, name: str, point: Any, mode: str, strategy: str,
                                stats: bool):
        """:meth:`value_and_grad` without ``wrt`` by the general path, by the strategy named
        ``strategy``, which is set: the function transformed (or its image found), compiled
        if need be, and run; a prepared path kept for the next."""
        reals = real_point(point) if mode == "reverse" else None
        if mode not in ("reverse", "forward"):
            raise UsageError(f"unknown mode `{mode}`; use reverse or forward")
        f, x, result = owner.points.function_and_point(name, point)
        if not (isinstance(result, RealT) or isinstance(result, VarT)):
            raise UsageError(
                f"grad needs a function returning R; `{name}` returns {print_type(result)}")
        if mode == "forward":
            value, gradient = owner.runtime.differentiator.forward_grad(f, x)
            run_stats = Stats(0, 0)
        else:
            value, gradient = owner.runtime.differentiator.grad(f, x)
            run_stats = owner.runtime.differentiator.last_stats
        taken = owner.points.point_type(name, x)
        # (not for a point whose lists were made arrays: the prepared path takes the point
        # as it is given)
        if reals is not None and not (_holds_array(x) and not _holds_array(point)):
            remember(self._gradients, (name, reals[0], strategy), prepared_gradient(
                owner.runtime.differentiator, f, reals[0], _writer(taken, reals[0])))
        if type(value) is float and finite_reals(value) and finite_reals(gradient):
            out = (value, gradient)  # immutable reals and tuples: the Python data already
        elif type(value) is float and value - value == 0.0 and type(gradient) is list \
                and all_reals(gradient) and all(map(math.isfinite, gradient)):
            out = (value, gradient[:])  # a list of finite reals: its Python data is a copy
        else:
            self._require_finite(owner, name, x, value, gradient)
            out = (to_python(value), to_python(gradient))
        if has_tuples(taken):  # the gradient has the point's type, its tuples as written
            out = (out[0], written(out[1], taken))
        return out + (run_stats,) if stats else out

    def _require_finite(self, owner: Any, name: str, x: Any, value: Any, gradient: Any) -> None:
        """Raises EvalError if the value or a gradient component is NaN or infinite: an
        overflow somewhere in the program must not pass silently as a number."""
        reals: list[float] = []
        map_value(gradient, is_real, lambda r: reals.append(r) or r)
        bad = [i for i, r in enumerate(reals)
               if not (math.isfinite(r) if type(r) is float else all_finite(r))]
        span = owner.decls[name].span
        if type(value) is float and not math.isfinite(value):
            raise EvalError(f"the value of `{name}` is {format_real(value)}: an intermediate "
                            "result overflowed or was undefined", span)
        if bad:
            names = owner.points.input_names(name, x)
            listed = ", ".join(f"{names[i]} = {format_real(reals[i])}" for i in bad[:5])
            raise EvalError(f"the gradient of `{name}` is not finite ({listed}): adjoints "
                            "summed to an overflow", span)

    def grad(self, owner: Any, name: str, point: Any, mode: str = "reverse",
             strategy: str | None = None, stats: bool = False,
             wrt: Sequence[str] | None = None):
        """The work of :meth:`Program.grad`."""
        out = self.value_and_grad(owner, name, point, mode=mode, strategy=strategy, stats=stats,
                                  wrt=wrt)
        return (out[1], out[2]) if stats else out[1]

    @collector_paused_during
    def jvp(self, owner: Any, name: str, point: Any, direction: Any) -> tuple[Any, Any]:
        """The work of :meth:`Program.jvp`."""
        f, x, result = owner.points.function_and_point(name, point)
        v = owner.points.value(direction) if not isinstance(direction, str) else owner.points.parse_point(
            direction, "--dir")
        try:
            value, tangent = owner.runtime.differentiator.jvp(f, x, v)
        except DifferentiationError as exc:
            raise UsageError(exc.message) from None
        return to_python(written(value, result)), to_python(written(tangent, result))

    @collector_paused_during
    def vjp(self, owner: Any, name: str, point: Any) -> tuple[Any, Callable[[Any], Any]]:
        """The work of :meth:`Program.vjp`."""
        f, x, result = owner.points.function_and_point(name, point)
        taken = owner.points.point_type(name, x)
        value, pullback = owner.runtime.differentiator.vjp(f, x)
        return to_python(written(value, result)), collector_paused_during(
            lambda ct: to_python(written(pullback(point_from_python(ct, "the cotangent")),
                                         taken)))

    @collector_paused_during
    def hessian(self, owner: Any, name: str, point: Any, mode: str = "forward-over-reverse",
                strategy: str | None = None,
                wrt: Sequence[str] | None = None) -> tuple[Any, Any, list[Any]]:
        """The work of :meth:`Program.hessian`."""
        if wrt is not None:
            program, point = self.restricted(owner, name, point, wrt)
            return program.hessian(name, point, mode, strategy)
        if mode not in COMPOSITIONS:
            raise UsageError(f"unknown mode `{mode}`; use one of {', '.join(COMPOSITIONS)}")
        f, x = self._scalar_function(owner, name, point)
        with owner.runtime.strategy_of_call(strategy):
            rows = owner.runtime.differentiator.hessian_rows(f, x, mode)
            value, gradient = owner.runtime.differentiator.grad(f, x)
        self._require_finite(owner, name, x, value, gradient)
        taken = owner.points.point_type(name, x)
        return (to_python(value), to_python(written(gradient, taken)),
                [to_python(written(row, taken)) for row in rows])

    def hvp(self, owner: Any, name: str, point: Any, direction: Any) -> tuple[Any, Any, Any]:
        """The work of :meth:`Program.hvp`."""
        runtime = owner.runtime
        inputs = real_inputs(point)
        along = real_inputs(direction) if inputs is not None else None
        key = (name, inputs[0], runtime.interpreter.strategy) if inputs is not None else None
        if along is not None and along[0] == inputs[0] and (
                inputs[0] != -1 or len(along[1]) == len(inputs[1])):
            prepared = self._products.get(key)
            # (instrumented runs, under a step or time limit, report events: general path)
            if prepared is not None and not runtime.interpreter.instrumented:
                # (its runs pause the collector: little is made outside them)
                value, gradient, product = prepared(inputs[1], along[1])
                if prepared.written_as is not None:
                    gradient = prepared.written_as(gradient)
                    product = prepared.written_as(product)
                return to_python(value), to_python(gradient), to_python(product)
        return self._general_hvp(owner, name, point, direction, key, inputs)

    @collector_paused_during
    def _general_hvp(self, owner: Any, name: str, point: Any, direction: Any, key: Any,
                     inputs: Any) -> tuple[Any, Any, Any]:
        """:meth:`hvp` by the general path; a prepared product kept under ``key`` (None:
        not a point of reals, whose ``inputs`` :func:`real_inputs` gave)."""
        runtime = owner.runtime
        f, x = self._scalar_function(owner, name, point)
        v = owner.points.value(direction) if not isinstance(direction, str) else owner.points.parse_point(
            direction, "--dir")
        try:
            value, gradient, product = runtime.differentiator.hvp(f, x, v)
        except DifferentiationError as exc:
            raise UsageError(exc.message) from None
        if key is not None and key not in self._products and not (
                _holds_array(x) and not _holds_array(point)):
            remember(self._products, key, prepared_product(
                runtime.differentiator, f, x, inputs[0],
                _writer(owner.points.point_type(name, x), inputs[0])))
        taken = owner.points.point_type(name, x)
        if has_tuples(taken):
            gradient, product = written(gradient, taken), written(product, taken)
        return to_python(value), to_python(gradient), to_python(product)

    def _scalar_function(self, owner: Any, name: str, point: Any) -> tuple[Any, Any]:
        f, x, result = owner.points.function_and_point(name, point)
        if not (isinstance(result, RealT) or isinstance(result, VarT)):
            raise UsageError(
                f"second derivatives need a function returning R; `{name}` returns "
                f"{print_type(result)}")
        return f, x

    def _chosen(self, owner: Any, name: str, point: Any, wrt: Sequence[str]
                ) -> tuple[int, list[Any], list[int], list[str]]:
        """How many curried arguments the point gives, the parts it gives them as (arrays
        where the parameters are), the positions of the parameters ``wrt`` names and the
        parameters' names; raises UsageError for a name that is not such a parameter."""
        owner.require(name)
        if not wrt:
            raise UsageError("--wrt needs the name of at least one parameter")
        value = owner.points.value(point)
        k = arguments_covered(name, owner.scheme(name).type, value)
        names = argument_names(owner.decls[name].value, k)
        parts = curried_parts(with_arrays(value, argument_type(owner.scheme(name).type, k)), k)
        chosen: list[int] = []
        for wanted in wrt:
            if wanted not in names or wanted == "_" or names.index(wanted) in chosen:
                listed = ", ".join(f"`{n}`" for n in names if n != "_")
                problem = "is given twice" if wanted in names and names.index(wanted) in chosen \
                    else f"is not a parameter of `{name}` that the point gives"
                raise UsageError(f"--wrt: `{wanted}` {problem} (its parameters: {listed}; a "
                                 "parameter written as a pattern has no name to choose)")
            chosen.append(names.index(wanted))
        return k, parts, chosen, names

    @collector_paused_during
    def restricted(self, owner: Any, name: str, point: Any, wrt: Sequence[str]) -> tuple[Any, Any]:
        """The work of :meth:`Program.restricted`."""
        k, parts, chosen, names = self._chosen(owner, name, point, wrt)
        fixed = [part for i, part in enumerate(parts) if i not in chosen]
        key = (name, tuple(chosen), k, _fixed_key(fixed))
        program = self._restrictions.get(key) if key[-1] is not None else None
        if program is None:
            hidden = owner.hidden_name(name)
            body: Term = Var(hidden)
            data: list[Decl] = []
            for i, part in enumerate(parts):
                if i in chosen:
                    body = App(body, Var(names[i]))
                elif _holds_array(part):
                    # data held fixed: a definition of its own, computed once (not a
                    # literal the restricted function would build at every call)
                    held = owner.hidden_name(f"{name}_{names[i]}")
                    data.append(Decl(held, point_term(part, real_term)))
                    body = App(body, Var(held))
                else:
                    body = App(body, point_term(part, real_term))
            for i in reversed(chosen):
                body = Lam(names[i], body)
            program = owner.extended(data + [Decl(name, body)])
            assert hidden in program.decls, "extended() renames the old definition to `hidden`"
            if key[-1] is not None:
                # Kept for the calls to come (a loop holding the data fixed while the chosen
                # parameters move reuses one program and its compiled code); a few only.
                if len(self._restrictions) >= _RESTRICTIONS_KEPT:
                    del self._restrictions[next(iter(self._restrictions))]
                self._restrictions[key] = program
        return program, packed([parts[i] for i in chosen])

    @collector_paused_during
    def jacobian(self, owner: Any, name: str, point: Any, mode: str | None = None,
                 wrt: Sequence[str] | None = None) -> "Jacobian":
        """The work of :meth:`Program.jacobian`."""
        if wrt is not None:
            program, point = self.restricted(owner, name, point, wrt)
            return program.jacobian(name, point, mode)
        if mode not in (None, FORWARD, REVERSE):
            raise UsageError(f"unknown mode `{mode}`; use forward or reverse")
        f, x, result = owner.points.function_and_point(name, point)
        if not is_differentiable(result):
            raise UsageError(f"a Jacobian needs a result built from R, pairs and lists; "
                             f"`{name}` returns {print_type(result)}")
        inputs = count_reals(x)
        if mode is None:
            outputs = count_reals(owner.runtime.apply(f, x))
            mode = FORWARD if inputs <= outputs else REVERSE
        value, jacobian = owner.runtime.differentiator.jacobian(f, x, mode)
        rows = [[] for _ in range(count_reals(value))]
        reals = iter(_reals_of(jacobian))
        for row in rows:
            row.extend(next(reals) for _ in range(inputs))
        bad = next((r for row in rows for r in row if not math.isfinite(r)), None)
        if bad is not None:
            raise EvalError(f"the Jacobian of `{name}` is not finite ({format_real(bad)}): an "
                            "intermediate derivative overflowed or was undefined")
        # -0.0 (a zero tangent times a negative partial) reads as 0
        rows = [[r + 0.0 for r in row] for row in rows]
        jacobian = map_value(jacobian, is_real, lambda r: r + 0.0)
        taken = owner.points.point_type(name, x)
        return Jacobian(to_python(written(value, result)),
                        to_python(written(jacobian, map_type(
                            result, lambda leaf: taken if isinstance(leaf, RealT) else leaf))),
                        rows, mode,
                        owner.points.input_names(name, x), output_names(name, written(value, result)))
