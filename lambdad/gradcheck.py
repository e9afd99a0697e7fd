"""Gradient checking: forward mode, both reverse-mode strategies and central finite
differences must agree (``lambdad check``; docs/checking.md explains the numbers).

For a function ``f`` of a differentiable input (reals, pairs, lists) returning ``R``, at a
point ``x`` with real leaves ``x_1 ... x_n``:

* finite differences: ``D(h) = (f(x + h e_i) - f(x - h e_i)) / 2h`` with the step
  ``h = eps * max(1, |x_i|)``, ``eps = cbrt(machine epsilon)`` by default, and with the
  step ``h / 2``, extrapolated: ``(4 D(h/2) - D(h)) / 3``;
* forward mode (one dual-number run per input), reverse mode with the ``factored`` and the
  ``naive`` strategy.

A derivative ``d`` of a mode agrees with the finite difference ``fd`` when
``|d - fd| <= rtol * max(|d|, |fd|) + atol``.  ``atol`` is the rounding error of the
difference quotients, ``100 * machine epsilon * S / h`` with ``S`` the largest magnitude of
any real the evaluation computed, plus their truncation error, estimated by how much halving
the step changes them; where that change is not small (more than 1 %), the function is too
curved at the step's scale and finite differences are not compared.  The three AD modes must
agree with each other to ``AGREEMENT`` relative (plus rounding on the computation's scale).

Sampled points are drawn with a seeded generator and kept only where the function evaluates
without error at the point and at every finite-difference probe, the probes take the same
branches as the point (same primitives evaluated, same comparison results), and every
primitive with a kink (``relu``, ``abs``, ``max``, ``min``, comparisons) is evaluated
farther from its kink than the probes move its arguments.  The primitives' ``kink`` and
``domain`` functions of the table say where that is; an interpreter with an event hook
reports each primitive evaluated.

This module works on a loaded program (anything with the interface of
:class:`lambdad.pipeline.Program`) and never prints; :meth:`Report.render` is the table.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from .differentiate import Differentiator, is_real, map_value
from .errors import LambdadError, ResourceError, UsageError
from .interpreter import Interpreter
from .syntax import (
    curried_params,
    tuple_type,
    Annot,
    App,
    Lam,
    LetPair,
    ListT,
    PairT,
    Prim,
    RealT,
    Term,
    Type,
    Var,
    VarT,
)
from .values import PrimEvent, fits, format_value

MACHINE_EPSILON = sys.float_info.epsilon
DEFAULT_EPS = MACHINE_EPSILON ** (1.0 / 3.0)  # ≈ 6.06e-6: balances h^2 f''' against eps/h
DEFAULT_RTOL = 1e-5         # AD vs finite differences, relative
AGREEMENT = 1e-9            # AD mode vs AD mode, relative ...
AGREEMENT_FLOOR = 1e-12     # ... plus this times the computation's scale
ROUNDING_SAFETY = 100.0     # rounding bound of a difference quotient: this * eps * S / h
UNSETTLED = 0.01            # halving the step may change a difference by at most this
KINK_MARGIN = 10.0          # a kink must be this many probe moves away
SAMPLE_RANGE = 2.0          # sampled reals are uniform in [-SAMPLE_RANGE, SAMPLE_RANGE]
SAMPLE_LIST_LENGTH = 3
ATTEMPTS = 200              # candidates tried per sampled point
NAIVE_SECONDS = 2.0         # naive backpropagation is given up after this

MODES = ("forward", "reverse", "naive")
MODE_TITLES = {"forward": "forward", "reverse": "reverse (factored)",
               "naive": "reverse (naive)"}


# --------------------------------------------------------------------------- results


@attrs.frozen
class Row:
    """One input real: its path, the finite difference, each mode's derivative (None for a
    mode not run), the largest relative error of a mode against the finite difference (NaN
    when they were not compared), and the modes that disagree with it."""

    path: str
    value: float
    finite_difference: float
    derivatives: dict[str, float | None]
    error: float
    disagreeing: tuple[str, ...]


@attrs.frozen
class PointCheck:
    """The check of one function at one point."""

    name: str
    point: Any
    value: float
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()
    # Pairs of AD modes that disagree with each other (beyond AGREEMENT), with the path.
    mode_conflicts: tuple[tuple[str, str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches()

    def mismatches(self) -> list[str]:
        """One sentence per disagreement: which mode, on which input, by how much."""
        out = []
        for row in self.rows:
            for mode in row.disagreeing:
                d = row.derivatives[mode]
                out.append(f"{MODE_TITLES[mode]} disagrees with finite differences on "
                           f"`{row.path}`: {d!r} vs {row.finite_difference!r} "
                           f"(relative error {_relative(d, row.finite_difference):.1e})")
        for first, second, path in self.mode_conflicts:
            row = next(r for r in self.rows if r.path == path)
            out.append(f"{MODE_TITLES[second]} disagrees with {MODE_TITLES[first]} on "
                       f"`{path}`: {row.derivatives[second]!r} vs {row.derivatives[first]!r}")
        return out


@attrs.frozen
class FunctionReport:
    """Every point checked for one function; ``problem`` says why none could be checked."""

    name: str
    checks: tuple[PointCheck, ...]
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and all(c.ok for c in self.checks)


@attrs.frozen
class Report:
    """The result of :func:`check`: one :class:`FunctionReport` per function."""

    functions: tuple[FunctionReport, ...]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.functions)

    def mismatches(self) -> list[str]:
        """Every disagreement as ``name at point: sentence``, and functions left unchecked."""
        out = []
        for function in self.functions:
            if function.problem is not None:
                out.append(f"{function.name}: {function.problem}")
            for c in function.checks:
                out.extend(f"{c.name} at {format_value(c.point)}: {m}" for m in c.mismatches())
        return out

    def render(self) -> str:
        """The report as text: a table per function and point, then a verdict."""
        return render_report(self)


# --------------------------------------------------------------------------- inputs


def function_params(program: Any, name: str) -> list[Type]:
    """The curried parameter types of the top-level ``name`` (empty if not a function)."""
    return curried_params(program.typing.schemes[name].type)


def _result(program: Any, name: str, k: int) -> Type:
    t = program.typing.schemes[name].type
    for _ in range(k):
        t = t.result
    return t


def is_differentiable(t: Type) -> bool:
    """Whether ``t`` is built from ``R``, pairs and lists only; a type variable (an unused
    component, ``def f (a, _) = a``) stands for ``R`` here."""
    stack = [t]
    while stack:
        current = stack.pop()
        if isinstance(current, PairT):
            stack.extend((current.first, current.second))
        elif isinstance(current, ListT):
            stack.append(current.item)
        elif not isinstance(current, (RealT, VarT)):
            return False
    return True


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


def arity_of_point(program: Any, name: str, point: Any) -> int:
    """How many curried parameters of ``name`` the runtime value ``point`` covers (one, or
    a tuple of the first k); raises UsageError if it fits none."""
    params = function_params(program, name)
    if not params:
        raise UsageError(f"`{name}` is not a function")
    if fits(point, params[0]):
        return 1
    for k in range(2, len(params) + 1):
        if fits(point, tuple_type(params[:k])):
            return k
    raise UsageError(f"the point {format_value(point)} does not fit `{name}`")


def parameter_names(program: Any, name: str, k: int) -> list[str]:
    """Names for the first ``k`` parameters of ``name``: the λ-parameters of its definition,
    ``(a, b)`` for a pattern parameter, ``arg1``... when there is no usable name."""
    term: Term = program.decls[name].value
    names: list[str] = []
    while len(names) < k:
        while isinstance(term, Annot):
            term = term.expr
        if not isinstance(term, Lam):
            names.append(f"arg{len(names) + 1}")
            continue
        body = term.body
        if (isinstance(body, LetPair) and isinstance(body.value, Var)
                and body.value.name == term.param):
            names.append(_pattern_name(term.param, body))
            while isinstance(body, LetPair) and isinstance(body.value, Var):
                body = body.body  # the desugared pattern; the next parameter follows
        elif term.param == "_":
            names.append(f"arg{len(names) + 1}")
        else:
            names.append(term.param)
        term = body
    return names


def _pattern_name(param: str, body: Term) -> str:
    """The pattern a parameter is destructured by, ``(a, b)`` or ``((a, b), c)``: the parser
    turns it into a chain of ``let (x, y) = v in`` on the parameter and fresh names."""
    parts: dict[str, tuple[str, str]] = {}
    while isinstance(body, LetPair) and isinstance(body.value, Var):
        parts[body.value.name] = (body.first, body.second)
        body = body.body

    def spell(name: str) -> str:
        if name not in parts:
            return name
        first, second = parts.pop(name)  # each fresh name is destructured once
        return f"({spell(first)}, {spell(second)})"

    return spell(param)


def leaf_paths(point: Any, names: Sequence[str]) -> list[str]:
    """The path of every real leaf of ``point``, left to right: a parameter name, ``.0`` /
    ``.1`` for pair components, ``[i]`` for list items (``w.1[2]``).  With several names the
    point is the tuple of the parameters."""
    roots: list[tuple[Any, str]]
    if len(names) == 1:
        roots = [(point, names[0])]
    else:
        roots, rest = [], point
        for i, n in enumerate(names):
            if i < len(names) - 1:
                roots.append((rest[0], n))
                rest = rest[1]
            else:
                roots.append((rest, n))
    paths = []
    stack = list(reversed(roots))
    while stack:
        value, path = stack.pop()
        if type(value) is float:
            paths.append(path)
        elif type(value) is tuple:
            first, second = _component_paths(path)
            stack.extend(((value[1], second), (value[0], first)))
        elif type(value) is list:
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))
    return paths


def _component_paths(path: str) -> tuple[str, str]:
    """``(a, b)`` names its components ``a`` and ``b``; anything else gets ``.0`` / ``.1``."""
    if path.startswith("(") and path.endswith(")"):
        inner = path[1:-1]
        depth = 0
        for i, ch in enumerate(inner):
            depth += ch in "(["
            depth -= ch in ")]"
            if ch == "," and depth == 0:
                return inner[:i].strip(), inner[i + 1:].strip()
    return f"{path}.0", f"{path}.1"


def leaves(value: Any) -> list[float]:
    """The reals of ``value`` (pairs, lists), left to right."""
    out = []
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is float:
            out.append(v)
        elif isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
    return out


def replace_leaves(value: Any, reals: Sequence[float]) -> Any:
    """``value`` with its real leaves replaced, in order, by ``reals``."""
    it = iter(reals)
    return map_value(value, is_real, lambda _: next(it))


def sample_value(t: Type, rng: random.Random) -> Any:
    """A random runtime value of the differentiable type ``t``: reals uniform in
    ``[-SAMPLE_RANGE, SAMPLE_RANGE]``, lists of ``SAMPLE_LIST_LENGTH`` items."""
    if isinstance(t, (RealT, VarT)):
        return rng.uniform(-SAMPLE_RANGE, SAMPLE_RANGE)
    if isinstance(t, PairT):
        return (sample_value(t.first, rng), sample_value(t.second, rng))
    if isinstance(t, ListT):
        return [sample_value(t.item, rng) for _ in range(SAMPLE_LIST_LENGTH)]
    raise UsageError("cannot sample a point of a non-differentiable type")


# --------------------------------------------------------------------------- evaluation


@attrs.frozen
class Probe:
    """One evaluation of the function with every primitive evaluation recorded."""

    value: Any
    events: tuple[PrimEvent, ...]

    @property
    def scale(self) -> float:
        """The largest magnitude of a real the evaluation computed (at least 1)."""
        biggest = 1.0
        if type(self.value) is float:
            biggest = max(biggest, abs(self.value))
        for e in self.events:
            if type(e.result) is float and math.isfinite(e.result):
                biggest = max(biggest, abs(e.result))
        return biggest


class Prober:
    """Evaluates the top-level ``name`` of ``program`` on an interpreter that reports every
    primitive evaluation (the program's own interpreter stays uninstrumented and fast)."""

    def __init__(self, program: Any, name: str, k: int):
        self.events: list[PrimEvent] = []
        self.interpreter = Interpreter(on_event=self._record)
        self.interpreter.ad_hooks = Differentiator(self.interpreter).hooks()
        self.function = self.interpreter.evaluate_module(program.module, upto=name)[name]
        self.program, self.name, self.k = program, name, k
        self._naive: tuple[Differentiator, Any] | None = None

    def naive_gradient(self, point: Any, seconds: float) -> list[float] | None:
        """The gradient at ``point`` by naive backpropagation, on an interpreter of its own
        that gives up after ``seconds`` (None then)."""
        if self._naive is None:
            interpreter = Interpreter(strategy="naive", timeout=seconds)
            differentiator = Differentiator(interpreter, "naive")
            interpreter.ad_hooks = differentiator.hooks()
            f = interpreter.evaluate_module(self.program.module, upto=self.name)[self.name]
            if self.k > 1:
                f = interpreter.evaluate(_uncurried(self.name, self.k), {self.name: f})
            self._naive = (differentiator, f)
        differentiator, f = self._naive
        try:
            _, gradient = differentiator.grad(f, point, strategy="naive")
        except ResourceError:
            return None
        return leaves(gradient)

    def _record(self, event: Any) -> None:
        if isinstance(event, PrimEvent):
            self.events.append(event)

    def __call__(self, point: Any) -> Probe:
        """The recorded evaluation at ``point``; raises LambdadError from the program."""
        args, rest = [], point
        for i in range(self.k):
            if i < self.k - 1:
                args.append(rest[0])
                rest = rest[1]
            else:
                args.append(rest)
        self.events = []
        value = self.interpreter.apply(self.function, *args)
        return Probe(value, tuple(self.events))


def _uncurried(name: str, k: int) -> Term:
    """``\\p -> name (fst p) (fst (snd p)) ... `` for a function of ``k`` curried arguments."""
    body: Term = Var(name)
    rest: Term = Var("p")
    for i in range(k):
        body = App(body, Prim("fst", (rest,)) if i < k - 1 else rest)
        rest = Prim("snd", (rest,))
    return Lam("p", body)


def _real_args(event: PrimEvent) -> bool:
    return bool(event.args) and all(type(a) is float for a in event.args)


def _where(event: PrimEvent) -> str:
    return f" at {event.span}" if event.span is not None else ""


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


def domain_problem(center: Probe) -> str | None:
    """The first primitive evaluated outside the comfortable ``domain`` the table gives it
    (``log`` near 0, a divisor near 0...), or None."""
    for e in center.events:
        if e.prim.domain is not None and _real_args(e) and not e.prim.domain(*e.args):
            args = ", ".join(repr(a) for a in e.args)
            return f"`{e.prim.spelling.symbol}`{_where(e)} is evaluated near the edge of its domain ({args})"
    return None


def _finite(value: Any) -> bool:
    return type(value) is float and math.isfinite(value)


def _relative(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


@attrs.frozen
class _Differences:
    value: float
    quotients: tuple[float, ...]
    # Allowed absolute deviation of a derivative from each quotient: rounding error of the
    # difference quotients plus their estimated truncation error.
    atols: tuple[float, ...]
    problem: str | None
    domain: str | None
    scale: float


def _quotient(prober: Prober, center: Probe, point: Any, reals: list[float], i: int,
              h: float) -> tuple[float, float, str | None]:
    """The central difference for input ``i`` with step ``h``, its rounding error bound, and
    what is wrong with its probes (if anything)."""
    x = reals[i]
    up, down = list(reals), list(reals)
    up[i], down[i] = x + h, x - h
    try:
        plus = prober(replace_leaves(point, up))
        minus = prober(replace_leaves(point, down))
    except LambdadError as exc:
        return math.nan, math.inf, f"a finite-difference probe fails: {exc.message}"
    problem = branch_problem(center, plus) or branch_problem(center, minus)
    if not (_finite(plus.value) and _finite(minus.value)):
        return math.nan, math.inf, problem or "a finite-difference probe is not finite"
    step = up[i] - down[i]  # the representable step, not 2h
    scale = max(center.scale, plus.scale, minus.scale)
    rounding = ROUNDING_SAFETY * MACHINE_EPSILON * scale / (step / 2.0)
    return (plus.value - minus.value) / step, rounding, problem


def finite_differences(prober: Prober, point: Any, eps: float) -> _Differences:
    """Central differences at ``point`` for every input real, with each one's tolerance, and
    the reason (if any) they cannot be trusted there: a kink or a branch switch between the
    probes, or differences that change when the step is halved.  Raises LambdadError if the
    function fails at the point itself.

    Each derivative is estimated with the step ``h`` and with ``h / 2`` and extrapolated
    (Richardson: ``(4 D(h/2) - D(h)) / 3`` cancels the ``h^2`` error term); the change
    between the two steps bounds the truncation error left."""
    center = prober(point)
    if not _finite(center.value):
        raise _NotFinite(center.value)
    reals = leaves(point)
    quotients, atols = [], []
    problem = None
    for i, x in enumerate(reals):
        h = eps * max(1.0, abs(x))
        coarse, coarse_rounding, trouble = _quotient(prober, center, point, reals, i, h)
        problem = problem or trouble
        fine, fine_rounding, trouble = _quotient(prober, center, point, reals, i, h / 2.0)
        problem = problem or trouble
        estimate = (4.0 * fine - coarse) / 3.0
        rounding = (4.0 * fine_rounding + coarse_rounding) / 3.0
        truncation = abs(fine - coarse) / 3.0
        if problem is None and math.isfinite(estimate) and \
                truncation > UNSETTLED * max(abs(estimate), rounding):
            problem = (f"the finite differences for input {i + 1} do not settle (halving the "
                       f"step changes them by {abs(fine - coarse):.2g}): the function is too "
                       "curved at this scale")
        quotients.append(estimate)
        atols.append(rounding + truncation)
    return _Differences(center.value, tuple(quotients), tuple(atols), problem,
                        domain_problem(center), center.scale)


class _NotFinite(Exception):
    def __init__(self, value: Any):
        super().__init__(f"the function's value is {value!r}")
        self.value = value


# --------------------------------------------------------------------------- checking


def check_point(program: Any, name: str, point: Any, eps: float | None = None,
                rtol: float | None = None, prober: Prober | None = None,
                differences: _Differences | None = None,
                naive_seconds: float = NAIVE_SECONDS) -> PointCheck:
    """The check of ``name`` at the runtime value ``point``: finite differences against
    forward mode and both reverse-mode strategies (naive left out if it takes more than
    ``naive_seconds``).  Raises LambdadError if the program fails at ``point`` and
    UsageError if the point does not fit."""
    eps = DEFAULT_EPS if eps is None else eps
    rtol = DEFAULT_RTOL if rtol is None else rtol
    k = arity_of_point(program, name, point)
    if prober is None:
        prober = Prober(program, name, k)
    if differences is None:
        try:
            differences = finite_differences(prober, point, eps)
        except _NotFinite as exc:
            return PointCheck(name, point, math.nan, (), (f"not checked: {exc}",))
    derivatives: dict[str, list[float | None]] = {}
    notes = []
    for mode in ("forward", "reverse"):
        _, gradient = program.value_and_grad(name, point, mode=mode, strategy="factored")
        derivatives[mode] = leaves(gradient)
    naive = prober.naive_gradient(point, naive_seconds)
    if naive is None:
        # Naive backpropagation is exponential in the sharing (AD.md section 5): on a long
        # chain it would not finish.  Its column is left out rather than waited for.
        naive = [None] * len(derivatives["reverse"])
        notes.append(f"reverse (naive) not run: it takes over {naive_seconds:g} s here "
                     "(its cost grows exponentially with sharing)")
    derivatives["naive"] = naive
    paths = leaf_paths(point, parameter_names(program, name, k))
    # The AD modes sum the same chain-rule terms in different orders: they agree to
    # AGREEMENT relative, up to rounding on the scale of the computation (a derivative that
    # is zero comes out as +-1e-17 in one mode and exactly 0 in another).
    biggest = max([abs(d) for ds in derivatives.values() for d in ds if d is not None
                   and _finite(d)], default=0.0)
    floor = AGREEMENT_FLOOR * max(1.0, differences.scale, biggest)
    reals = leaves(point)
    rows, conflicts = [], []
    for i, path in enumerate(paths):
        fd = differences.quotients[i]
        atol = differences.atols[i]
        ds = {mode: derivatives[mode][i] for mode in MODES}
        disagreeing = []
        compared = differences.problem is None and _finite(fd)
        worst = 0.0 if compared else math.nan
        for mode, d in ds.items():
            if d is None:
                continue
            if not _finite(d):
                disagreeing.append(mode)
                worst = math.inf
                continue
            if not compared:
                continue
            slack = abs(d - fd) - rtol * max(abs(d), abs(fd))
            worst = max(worst, abs(d - fd) / max(abs(fd), abs(d), atol / rtol, 1e-300))
            if slack > atol:
                disagreeing.append(mode)
        for first, second in (("forward", "reverse"), ("reverse", "naive"), ("forward", "naive")):
            a, b = ds[first], ds[second]
            if a is None or b is None:
                continue
            if _finite(a) and _finite(b) and abs(a - b) > AGREEMENT * max(abs(a), abs(b)) + floor:
                conflicts.append((first, second, path))
        rows.append(Row(path, reals[i], fd, ds, worst, tuple(disagreeing)))
    if differences.problem is not None:
        notes.append(f"finite differences not compared: {differences.problem}")
    if differences.domain is not None:
        notes.append(differences.domain)
    return PointCheck(name, point, differences.value, tuple(rows), tuple(notes),
                      tuple(conflicts))


def sample_points(program: Any, name: str, samples: int, seed: int, eps: float | None = None
                  ) -> tuple[list[tuple[Any, Prober, _Differences]], str | None]:
    """Up to ``samples`` points (seeded) where ``name`` evaluates without error, away from
    kinks and branch switches and inside the table's domains; with each, its finite
    differences.  Also says why fewer were found, if so."""
    eps = DEFAULT_EPS if eps is None else eps
    params = function_params(program, name)
    rng = random.Random(seed)
    input_type = tuple_type(params)
    k = len(params)
    prober = Prober(program, name, k)
    found = []
    last_problem = None
    for _ in range(samples):
        for attempt in range(ATTEMPTS):
            point = sample_value(input_type, rng)
            try:
                differences = finite_differences(prober, point, eps)
            except (LambdadError, _NotFinite) as exc:
                last_problem = getattr(exc, "message", None) or str(exc)
                continue
            if differences.problem is not None:
                last_problem = differences.problem
                continue
            # The table's domains are margins (log x with x > 0.1...): insist on them for the
            # first half of the attempts, then accept any point where the probes are fine.
            if differences.domain is not None and attempt < ATTEMPTS // 2:
                last_problem = differences.domain
                continue
            found.append((point, prober, differences))
            break
        else:
            break
    problem = None
    if len(found) < samples:
        problem = (f"found {len(found)} of {samples} points away from kinks and errors in "
                   f"{ATTEMPTS} attempts (last reason: {last_problem})")
    return found, problem


def check(program: Any, names: str | Iterable[str] | None = None, point: Any = None,
          samples: int = 3, seed: int = 0, eps: float | None = None,
          rtol: float | None = None, naive_seconds: float = NAIVE_SECONDS) -> Report:
    """The gradient check of ``names`` (default: :func:`differentiable_functions`) at
    ``point`` (Python data or lambdad syntax, for every name) or at ``samples`` seeded random
    points; naive backpropagation is left out where it takes over ``naive_seconds``.
    Raises UsageError for an unknown or non-differentiable name or a point that does not
    fit, LambdadError if the program fails at the given point."""
    if isinstance(names, str):
        names = [names]
    names = list(names) if names is not None else differentiable_functions(program)
    reports = []
    for name in names:
        if name not in program.decls or name not in program.names():
            known = ", ".join(program.names()) or "none"
            raise UsageError(f"no top-level definition named `{name}` (defined: {known})")
        params = function_params(program, name)
        if not params or not all(is_differentiable(p) for p in params):
            raise UsageError(f"`{name}` does not take reals, pairs and lists of reals only; "
                             f"it has type {program.typing.schemes[name]}")
        if point is not None:
            value = program.parse_point(point) if isinstance(point, str) else _runtime(point)
            k = arity_of_point(program, name, value)
            if not isinstance(_result(program, name, k), RealT):
                raise UsageError(f"`{name}` does not return R")
            reports.append(FunctionReport(name, (check_point(program, name, value, eps, rtol,
                                                             naive_seconds=naive_seconds),)))
            continue
        if not isinstance(_result(program, name, len(params)), RealT):
            raise UsageError(f"`{name}` does not return R")
        found, problem = sample_points(program, name, samples, seed, eps)
        checks = tuple(check_point(program, name, p, eps, rtol, prober, d, naive_seconds)
                       for p, prober, d in found)
        if not found:
            problem = problem or "no point found"
        elif problem is not None:
            # Some points were checked: say why there are fewer, but do not fail for that.
            checks = checks[:-1] + (attrs.evolve(checks[-1], notes=checks[-1].notes
                                                 + (problem,)),)
            problem = None
        reports.append(FunctionReport(name, checks, problem))
    return Report(tuple(reports))


def _runtime(value: Any) -> Any:
    """Python data as a runtime value: numbers as floats, tuples as right-nested pairs."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, tuple):
        if len(value) < 2:
            raise UsageError("a tuple point needs at least two components")
        rest = value[1] if len(value) == 2 else value[1:]
        return (_runtime(value[0]), _runtime(rest))
    if isinstance(value, list):
        return [_runtime(v) for v in value]
    raise UsageError(f"cannot use {value!r} as a point")


# --------------------------------------------------------------------------- rendering


def _number(x: float) -> str:
    return f"{x:.12g}" if math.isfinite(x) else repr(x)


def render_check(c: PointCheck) -> list[str]:
    """The table of one point: a row per input real."""
    lines = [f"{c.name} at {format_value(c.point)}: value {_number(c.value)}"]
    headers = ["input", "finite diff.", *(MODE_TITLES[m] for m in MODES), "error"]
    table = [headers]
    for row in c.rows:
        mark = "  <- " + ", ".join(MODE_TITLES[m] for m in row.disagreeing) \
            if row.disagreeing else ""
        table.append([row.path, _number(row.finite_difference),
                      *(_number(row.derivatives[m]) if row.derivatives[m] is not None else "-"
                        for m in MODES),
                      (f"{row.error:.1e}" if not math.isnan(row.error) else "-") + mark])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers) - 1)]
    for r in table:
        cells = [cell.ljust(width) for cell, width in zip(r, widths)] + [r[-1]]
        lines.append("  " + "  ".join(cells).rstrip())
    lines.extend(f"  note: {note}" for note in c.notes)
    return lines


def render_report(report: Report) -> str:
    """The whole report: each function's tables, its mismatches, and a last verdict line."""
    lines: list[str] = []
    for function in report.functions:
        for c in function.checks:
            lines.extend(render_check(c))
            lines.extend(f"  MISMATCH: {m}" for m in c.mismatches())
            lines.append("")
        if function.problem is not None:
            lines.append(f"{function.name}: not checked: {function.problem}")
            lines.append("")
    total = sum(len(f.checks) for f in report.functions)
    skipped = sum(1 for f in report.functions for c in f.checks
                  if any(math.isnan(r.error) for r in c.rows))
    no_naive = sum(1 for f in report.functions for c in f.checks
                   if any(r.derivatives["naive"] is None for r in c.rows))
    if report.ok:
        caveats = [f"finite differences not compared at {skipped} point(s)"] if skipped else []
        if no_naive:
            caveats.append(f"reverse (naive) not run at {no_naive} point(s)")
        lines.append(f"ok: {len(report.functions)} function(s), {total} point(s): forward, "
                     "reverse (factored, naive) and finite differences agree"
                     + (f" ({'; '.join(caveats)})" if caveats else ""))
    else:
        bad = [f.name for f in report.functions if not f.ok]
        lines.append(f"FAILED: {', '.join(bad)}")
    return "\n".join(lines)
