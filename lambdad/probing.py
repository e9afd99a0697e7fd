"""The points of a gradient check and the finite differences at them (``lambdad check``).

The numbers of the check (steps, tolerances, sampling ranges); the inputs of a function and
their real leaves; sampled values; a :class:`Prober` that evaluates the function with an event
hook and records every primitive evaluated, so a probe can be refused when it takes another
branch, comes near a kink or leaves a primitive's domain; and :func:`finite_differences`,
the extrapolated central quotients with their rounding floors.

An array input (``Vec``, ``Mat``) is its elements, row by row.  The finite differences probe
every element of an array of at most :data:`SAMPLED_ELEMENTS` elements, and that many
elements drawn with a seeded generator from a larger one (:func:`probed_positions`): each
probe costs two runs of the function, so a 569 x 30 matrix is sampled, not probed whole.  :mod:`lambdad.gradcheck`
compares the modes of AD against them and writes the report; docs/checking.md explains the
numbers.
"""

from __future__ import annotations

import math
import random
import sys
import time
from typing import Any

import attrs

from .arraylib import ARRAY, as_array
from .calling import curried_parts, uncurried_term
from .differentiate import Differentiator
from .reals import is_real, leaves, replace_leaves  # noqa: F401 (re-exported)
from .errors import EvalError, LambdadError, ResourceError, UsageError
from .runtime import Runtime
from .syntax import (is_differentiable, curried_params, ArrayT, ListT, Module, PairT, RealT,
                     Type, VarT)
from .values import PrimEvent, format_value, map_value


MACHINE_EPSILON = sys.float_info.epsilon
# The smallest relative step: x ± eps * |x| / 2 (the finer probe) still differs from x.
MIN_EPS = 4.0 * MACHINE_EPSILON
DEFAULT_EPS = MACHINE_EPSILON ** (1.0 / 3.0)  # ≈ 6.06e-6: balances h^2 f''' against eps/h
DEFAULT_RTOL = 1e-5         # AD vs finite differences, relative
AGREEMENT = 1e-9            # AD mode vs AD mode, relative ...
AGREEMENT_FLOOR = 1e-12     # ... plus this times the computation's scale
ROUNDING_SAFETY = 100.0     # rounding bound of a difference quotient: this * eps * S / h
UNSETTLED = 0.01            # halving the step may change a difference by at most this
KINK_MARGIN = 10.0          # a kink must be this many probe moves away
SAMPLE_RANGE = 2.0          # sampled reals are uniform in [-SAMPLE_RANGE, SAMPLE_RANGE]
SAMPLE_LIST_LENGTH = 3
SAMPLE_ARRAY_LENGTH = 3     # sampled arrays: Vec of 3, Mat of 3 x 3 (shapes that fit together)
SAMPLED_ELEMENTS = 10       # elements probed by finite differences in an array larger than this
ATTEMPTS = 200              # candidates tried per sampled point
NAIVE_SECONDS = 2.0         # naive backpropagation is given up after this


# --------------------------------------------------------------------------- inputs


def function_params(program: Any, name: str) -> list[Type]:
    """The curried parameter types of the top-level ``name`` (empty if not a function)."""
    return curried_params(program.typing.schemes[name].type)


def _result(program: Any, name: str, k: int) -> Type:
    t = program.typing.schemes[name].type
    for _ in range(k):
        t = t.result
    return t


def _require_checkable(program: Any, name: str) -> list[Type]:
    """The curried parameter types of ``name``; UsageError if the program has no such
    definition or its parameters are not reals, pairs and lists of reals."""
    if name not in program.decls:  # the program's own names, or the prelude's
        known = ", ".join(program.names()) or "none"
        raise UsageError(f"no top-level definition named `{name}` (defined: {known})")
    params = function_params(program, name)
    if not params or not all(is_differentiable(p) for p in params):
        raise UsageError(f"`{name}` does not take reals, pairs and lists of reals only; "
                         f"it has type {program.typing.schemes[name]}")
    return params


def differentiable_functions(program: Any) -> list[str]:
    """The program's own top-level functions whose curried parameters are all differentiable
    and whose result is ``R``: what ``lambdad check`` checks by default."""
    found = []
    for name in program.names():
        params = function_params(program, name)
        if params and all(is_differentiable(p) for p in params) and isinstance(
                _result(program, name, len(params)), RealT):
            found.append(name)
    return found


def with_real(value: Any, i: int, x: float) -> Any:
    """``value`` with its ``i``-th real (as :func:`leaves` counts) replaced by ``x``; only
    the array holding it, if any, is copied."""
    position = 0

    def replaced(r: Any) -> Any:
        nonlocal position
        size = r.size if type(r) is ARRAY else 1
        start, position = position, position + size
        if not start <= i < position:
            return r
        if type(r) is not ARRAY:
            return x
        new = r.copy()
        new.flat[i - start] = x
        return new

    return map_value(value, is_real, replaced)


def probed_positions(value: Any, seed: Any = 0
                     ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """The positions (in :func:`leaves`) of the reals of ``value`` that finite differences
    probe: every real, and every element of an array of at most ``SAMPLED_ELEMENTS``; of a
    larger array, ``SAMPLED_ELEMENTS`` elements drawn by a generator seeded with ``seed``
    and the array's place.  Also, per sampled array, the position of its first element and
    its size."""
    positions: list[int] = []
    notes: list[tuple[int, int]] = []
    start = 0
    place = 0

    def visit(r: Any) -> Any:
        nonlocal start, place
        place += 1
        if type(r) is not ARRAY:
            positions.append(start)
            start += 1
            return r
        if r.size <= SAMPLED_ELEMENTS:
            positions.extend(range(start, start + r.size))
        else:
            rng = random.Random(f"{seed}/{place}/{r.shape}")
            positions.extend(start + k for k in sorted(rng.sample(range(r.size),
                                                                  SAMPLED_ELEMENTS)))
            notes.append((start, r.size))
        start += r.size
        return r

    map_value(value, is_real, visit)
    return tuple(positions), tuple(notes)


def sample_value(t: Type, rng: random.Random, orthant: int | None = None,
                 like: Any = None) -> Any:
    """A random runtime value of the differentiable type ``t``: reals uniform in
    ``[-SAMPLE_RANGE, SAMPLE_RANGE]``, lists of ``SAMPLE_LIST_LENGTH`` items, arrays of
    ``SAMPLE_ARRAY_LENGTH`` elements a side — or, given a value ``like`` of ``t``, lists and
    arrays of its lengths and shapes (a function of arrays may only take the shapes of the
    data it computes with).  With an ``orthant``, the signs alternate: the i-th real is
    positive when ``orthant + i`` is even, negative otherwise (``+ - + ...`` for orthant 0,
    ``- + - ...`` for orthant 1)."""
    value = _draw(t, rng) if like is None else _draw_like(t, like, rng)
    if orthant is None:
        return value
    reals = [abs(r) if (orthant + i) % 2 == 0 else -abs(r) for i, r in enumerate(leaves(value))]
    return replace_leaves(value, reals)


def _draw(t: Type, rng: random.Random) -> Any:
    if isinstance(t, (RealT, VarT)):
        return rng.uniform(-SAMPLE_RANGE, SAMPLE_RANGE)
    if isinstance(t, PairT):
        return (_draw(t.first, rng), _draw(t.second, rng))
    if isinstance(t, ListT):
        return [_draw(t.item, rng) for _ in range(SAMPLE_LIST_LENGTH)]
    if isinstance(t, ArrayT):
        shape = (SAMPLE_ARRAY_LENGTH,) * t.rank
        size = SAMPLE_ARRAY_LENGTH ** t.rank
        return _array_of([rng.uniform(-SAMPLE_RANGE, SAMPLE_RANGE) for _ in range(size)], shape)
    raise UsageError("cannot sample a point of a non-differentiable type")


def _draw_like(t: Type, like: Any, rng: random.Random) -> Any:
    if isinstance(t, PairT) and type(like) is tuple:
        return (_draw_like(t.first, like[0], rng), _draw_like(t.second, like[1], rng))
    if isinstance(t, ListT) and type(like) is list:
        return [_draw_like(t.item, item, rng) for item in like]
    if isinstance(t, ArrayT) and hasattr(like, "shape"):
        size = int(like.size)
        return _array_of([rng.uniform(-SAMPLE_RANGE, SAMPLE_RANGE) for _ in range(size)],
                         tuple(like.shape))
    return _draw(t, rng)


def _array_of(reals: list[float], shape: tuple[int, ...]) -> Any:
    array = as_array(reals, 1, "a sampled array")
    return array.reshape(shape) if len(shape) > 1 else array


# --------------------------------------------------------------------------- evaluation


@attrs.frozen
class Probe:
    """One evaluation of the function with every primitive evaluation recorded."""

    value: Any
    events: tuple[PrimEvent, ...]


def moving_magnitude(plus: Probe, minus: Probe) -> float:
    """The largest magnitude among the reals that differ between two probes of one input:
    their values, and the results of the primitives whose arguments or result differ.  A
    constant (``-1e30``, ``log (exp 30)``) does not move, so it does not count; a sum that
    adds a moving input to it does."""
    biggest = 0.0
    if plus.value != minus.value:
        biggest = max(abs(plus.value), abs(minus.value))
    for a, b in zip(plus.events, minus.events):
        if type(a.result) is float and type(b.result) is float and (
                a.result != b.result or not _same_args(a.args, b.args)):
            for r in (a.result, b.result):
                if math.isfinite(r):
                    biggest = max(biggest, abs(r))
        elif type(a.result) is ARRAY and type(b.result) is ARRAY \
                and a.result.shape == b.result.shape:
            # the elements that move (all of them, when an argument moved but no element
            # of the result did not: a sum of the moving ones)
            moved = a.result != b.result
            if not moved.any() and _same_args(a.args, b.args):
                continue
            for r in (a.result, b.result):
                r = r[moved] if moved.any() else r.ravel()
                r = r[r - r == 0.0]  # (the finite elements)
                if r.size:
                    biggest = max(biggest, float(abs(r).max()))
    return biggest


def _same_args(xs: tuple, ys: tuple) -> bool:
    """Whether two primitive evaluations had the same arguments (arrays elementwise, also
    inside lists and pairs).  Iterative."""
    try:
        return bool(xs == ys)  # (no array among them, or one-element arrays)
    except ValueError:  # an array compared elementwise: the slow way
        pass
    stack = [(xs, ys)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if type(x) is ARRAY or type(y) is ARRAY:
            if not (type(x) is type(y) and x.shape == y.shape and bool((x == y).all())):
                return False
        elif type(x) is tuple or type(x) is list:
            if type(x) is not type(y) or len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif x != y:
            return False
    return True


class Prober:
    """Evaluates the top-level ``name`` of ``program`` on an interpreter that reports every
    primitive evaluation (the program's own interpreter stays uninstrumented and fast)."""

    def __init__(self, program: Any, name: str, k: int):
        self.events: list[PrimEvent] = []
        # The step limit of the program (--max-steps) holds for every probe too.
        self.max_steps = getattr(program, "max_steps", None)
        self.runtime = Runtime(on_event=self._record, max_steps=self.max_steps)
        # Only the declarations `name` needs are compiled (not the whole prelude).
        self.module = Module(tuple(program.dependencies(name)))
        self.function = self.runtime.evaluate_module(self.module, upto=name)[name]
        self.program, self.name, self.k = program, name, k
        self._naive: tuple[Differentiator, Any] | None = None

    def naive_gradient(self, point: Any, seconds: float) -> list[float] | None:
        """The gradient at ``point`` by naive backpropagation, on an interpreter of its own
        that gives up after ``seconds`` (None then).  Any other limit (the program's step
        limit, the caller's time limit) raises ResourceError."""
        if self._naive is None:
            runtime = Runtime(strategy="naive", timeout=seconds, max_steps=self.max_steps)
            f = runtime.evaluate_module(self.module, upto=self.name)[self.name]
            if self.k > 1:
                f = runtime.evaluate(uncurried_term(self.name, self.k), {self.name: f})
            self._naive = (runtime.differentiator, f)
        differentiator, f = self._naive
        started = time.monotonic()
        try:
            _, gradient = differentiator.grad(f, point, strategy="naive")
        except ResourceError:
            if time.monotonic() - started < seconds:
                raise  # not this budget: a limit the user set
            return None
        return leaves(gradient)

    def _record(self, event: Any) -> None:
        if isinstance(event, PrimEvent):
            self.events.append(event)

    def __call__(self, point: Any) -> Probe:
        """The recorded evaluation at ``point``; raises LambdadError from the program."""
        self.events = []
        value = self.runtime.apply(self.function, *curried_parts(point, self.k))
        return Probe(value, tuple(self.events))


def _real_args(event: PrimEvent) -> bool:
    return bool(event.args) and all(type(a) is float for a in event.args)


def _array_args(event: PrimEvent) -> bool:
    """Arguments of an elementwise application to arrays: reals and arrays, one an array."""
    return (any(type(a) is ARRAY for a in event.args)
            and all(type(a) is float or type(a) is ARRAY for a in event.args))


def _elements(args: tuple) -> list[tuple[float, ...]]:
    """The arguments of each element of an elementwise application (a real broadcast to
    every element, a Vec against each row of a Mat), row by row."""
    shape = max((a.shape for a in args if type(a) is ARRAY), key=len)
    lists = [a.tolist() if type(a) is ARRAY else a for a in args]
    out = []
    if len(shape) == 1:
        for j in range(shape[0]):
            out.append(tuple(x if type(x) is float else x[j] for x in lists))
        return out
    for i in range(shape[0]):
        for j in range(shape[1]):
            out.append(tuple(x if type(x) is float else
                             x[j] if type(x[0]) is float else x[i][j] for x in lists))
    return out

def _where(event: PrimEvent) -> str:
    return f" at {event.span}" if event.span is not None and event.span.line else ""


def branch_problem(center: Probe, probe: Probe) -> str | None:
    """Why ``probe`` (a finite-difference probe) does not see the same smooth piece of the
    function as ``center``, or None: another control path, or a kink closer to the center's
    arguments than the probe moved them."""
    for a, b in zip(center.events, probe.events):
        if a.prim is not b.prim and a.prim.name != b.prim.name:
            return "a finite-difference probe takes another branch"
        if type(a.result) is bool and a.result != b.result:
            return (f"a finite-difference probe changes the outcome of "
                    f"`{a.prim.spelling.symbol}`{_where(a)}")
        if a.prim.kink is not None and _array_args(a) and _array_args(b):
            problem = _array_kink(a, b)
            if problem is not None:
                return problem
        if a.prim.kink is not None and _real_args(a) and _real_args(b):
            moved = max(abs(x - y) for x, y in zip(a.args, b.args))
            distance = a.prim.kink(*a.args)
            # Arguments that move together keep their distance to the kink exactly (`max y y`,
            # `y < y`): such a primitive stays on one piece however close it is.
            if moved == 0.0 or b.prim.kink(*b.args) == distance:
                continue
            size = max(abs(x) for x in a.args)
            if distance <= KINK_MARGIN * moved + 1e-12 * (1.0 + size):
                return (f"`{a.prim.spelling.symbol}`{_where(a)} is evaluated "
                        f"{distance:.2g} from a kink")
    if len(center.events) != len(probe.events):
        return "a finite-difference probe takes another branch"
    return None


def _array_kink(a: PrimEvent, b: PrimEvent) -> str | None:
    """:func:`branch_problem`'s kink test, element by element, for an elementwise
    application to arrays (only the elements whose arguments moved)."""
    for xs, ys in zip(_elements(a.args), _elements(b.args)):
        moved = max(abs(x - y) for x, y in zip(xs, ys))
        if moved == 0.0:
            continue
        distance = a.prim.kink(*xs)
        if b.prim.kink(*ys) == distance:
            continue
        size = max(abs(x) for x in xs)
        if distance <= KINK_MARGIN * moved + 1e-12 * (1.0 + size):
            return (f"`{a.prim.spelling.symbol}`{_where(a)} is evaluated "
                    f"{distance:.2g} from a kink (in an element)")
    return None


def domain_problem(center: Probe) -> str | None:
    """The first primitive evaluated outside the comfortable ``domain`` the table gives it
    (``log`` near 0, a divisor near 0...), or None."""
    for e in center.events:
        if e.prim.domain is not None and _array_args(e):
            outside = next((xs for xs in _elements(e.args) if not e.prim.domain(*xs)), None)
            if outside is not None:
                args = ", ".join(map(format_value, outside))
                return (f"`{e.prim.spelling.symbol}`{_where(e)} is evaluated outside the "
                        f"range sampling prefers for it in an element, near the edge of "
                        f"its domain or where it is steep ({args})")
        if e.prim.domain is not None and _real_args(e) and not e.prim.domain(*e.args):
            args = ", ".join(format_value(a) for a in e.args)
            return (f"`{e.prim.spelling.symbol}`{_where(e)} is evaluated outside the range "
                    f"sampling prefers for it, near the edge of its domain or where it is "
                    f"steep ({args})")
    return None


def _finite(value: Any) -> bool:
    return type(value) is float and math.isfinite(value)


def _error_of(d: float, fd: float, floor: float, rtol: float) -> float:
    """``|d - fd| / max(|d|, |fd|, floor / rtol)``: relative, with magnitudes below
    ``floor / rtol`` counted as that (the module docstring)."""
    if d == fd:
        return 0.0
    return abs(d - fd) / max(abs(d), abs(fd), floor / rtol)


@attrs.frozen
class _Differences:
    """Finite differences at a point, for the reals at ``positions`` (in :func:`leaves`):
    every real but the elements of large arrays, which are sampled (``sampled`` says so)."""

    value: float
    positions: tuple[int, ...]
    sampled: tuple[tuple[int, int], ...]
    quotients: tuple[float, ...]
    # Allowed absolute deviation of a derivative from each quotient (atol_i): rounding error
    # of the difference quotients plus their estimated truncation error.
    atols: tuple[float, ...]
    # M_i: the largest magnitude that moves when input i is probed.
    magnitudes: tuple[float, ...]
    # Why the finite differences cannot judge input i (None where they can).
    unresolved: tuple[str | None, ...]
    problem: str | None
    domain: str | None


def _quotient(prober: Prober, center: Probe, point: Any, reals: list[float], i: int,
              h: float) -> tuple[float, float, float, str | None]:
    """The central difference for input ``i`` with step ``h``, its rounding error bound, the
    magnitude ``M_i`` of what moves, and what is wrong with its probes (if anything)."""
    x = reals[i]
    up, down = x + h, x - h
    try:
        plus = prober(with_real(point, i, up))
        minus = prober(with_real(point, i, down))
    except ResourceError:
        raise  # a limit the user set: the check stops, it is not a failed probe
    except LambdadError as exc:
        return math.nan, math.inf, math.inf, f"a finite-difference probe fails: {exc.message}"
    problem = branch_problem(center, plus) or branch_problem(center, minus)
    if not (_finite(plus.value) and _finite(minus.value)):
        return math.nan, math.inf, math.inf, problem or "a finite-difference probe is not finite"
    step = up - down  # the representable step, not 2h
    magnitude = moving_magnitude(plus, minus)
    rounding = ROUNDING_SAFETY * MACHINE_EPSILON * magnitude / (step / 2.0)
    return (plus.value - minus.value) / step, rounding, magnitude, problem


def finite_differences(prober: Prober, point: Any, eps: float = DEFAULT_EPS,
                       rtol: float = DEFAULT_RTOL) -> _Differences:
    """Central differences at ``point`` for every input real (elements of large arrays
    sampled: :func:`probed_positions`), with each one's floor
    ``atol_i``, and the reason (if any) they cannot be trusted there: a kink or a branch
    switch between the probes (for the whole point); for an input, differences that change
    when the step is halved or a floor too large for ``rtol``.  Raises LambdadError if the
    function fails at the point itself or its value is not finite.

    Each derivative is estimated with the step ``h`` and with ``h / 2`` and extrapolated
    (Richardson: ``(4 D(h/2) - D(h)) / 3`` cancels the ``h^2`` error term); the change
    between the two steps bounds the truncation error left."""
    center = prober(point)
    if not _finite(center.value):
        raise EvalError(f"the value of `{prober.name}` at {format_value(point, summarised=True)}"
                        f" is {format_value(center.value, summarised=True)}")
    reals = leaves(point)
    positions, sampled = probed_positions(point, prober.name)
    quotients, atols, magnitudes, unresolved = [], [], [], []
    problem = None
    for i in positions:
        x = reals[i]
        h = eps * max(1.0, abs(x))
        coarse, coarse_rounding, coarse_size, trouble = _quotient(prober, center, point, reals,
                                                                  i, h)
        problem = problem or trouble
        fine, fine_rounding, fine_size, trouble = _quotient(prober, center, point, reals, i,
                                                            h / 2.0)
        problem = problem or trouble
        estimate = (4.0 * fine - coarse) / 3.0
        rounding = (4.0 * fine_rounding + coarse_rounding) / 3.0
        truncation = abs(fine - coarse) / 3.0
        atol = rounding + truncation
        reason = None
        if math.isfinite(estimate):
            if truncation > UNSETTLED * max(abs(estimate), rounding):
                reason = (f"the finite differences do not settle (halving the step changes "
                          f"them by {abs(fine - coarse):.2g}): the function is too curved at "
                          "this scale")
            elif rounding > rtol * max(abs(estimate), 1.0):
                reason = (f"their rounding error is {rounding:.2g} here (magnitudes up "
                          f"to {max(coarse_size, fine_size):.2g} move with this input)")
        quotients.append(estimate)
        atols.append(atol)
        magnitudes.append(max(coarse_size, fine_size))
        unresolved.append(reason)
    return _Differences(center.value, positions, sampled, tuple(quotients), tuple(atols), tuple(magnitudes),
                        tuple(unresolved), problem, domain_problem(center))
