"""Gradient checking: forward mode, every reverse-mode strategy and central finite
differences must agree (``lambdad check``; docs/checking.md explains the numbers).

For a function ``f`` of a differentiable input (reals, pairs, lists) returning ``R``, at a
point ``x`` with real leaves ``x_1 ... x_n``:

* finite differences: ``D(h) = (f(x + h e_i) - f(x - h e_i)) / 2h`` with the step
  ``h = eps * max(1, |x_i|)``, ``eps = cbrt(machine epsilon)`` by default, and with the
  step ``h / 2``, extrapolated: ``(4 D(h/2) - D(h)) / 3``;
* forward mode (one dual-number run per input), reverse mode with the ``fused`` (the
  default), the ``factored`` and the ``naive`` strategy.

Each input ``x_i`` gets an error measure of its own.  Its absolute floor ``atol_i`` is the
rounding error of its difference quotients, ``ROUNDING_SAFETY * machine epsilon * M_i / h``,
where ``M_i`` is the largest magnitude among the reals that *move* when ``x_i`` is probed
(the function's value and every primitive result whose arguments differ between the probes
``x + h e_i`` and ``x - h e_i``) -- a large constant elsewhere in the program does not blunt
the check -- plus the truncation error, estimated by how much halving the step changes the
quotient.  The error of a mode's derivative ``d`` against the finite difference ``fd`` is

    error = |d - fd| / max(|d|, |fd|, atol_i / rtol)

(relative, with magnitudes below ``atol_i / rtol`` counted as ``atol_i / rtol``), and the
mode disagrees when ``error > rtol``.  Finite differences can only judge a derivative when
their floor is small: where the rounding part exceeds ``rtol * max(|fd|, 1)`` (a value of
1e30 moving with the input, ``sin x + 1e30``), or where halving the step changes the
quotient by more than 1 % (too curved at the step's scale), the input is *not compared* -- and a point that is not
compared is never reported as checked.  The three AD modes must agree with each other to
``AGREEMENT`` relative (plus rounding on the scale ``M_i``).

Sampled points are drawn with a seeded generator and kept only where the function evaluates
without error at the point and at every finite-difference probe, the probes take the same
branches as the point (same primitives evaluated, same comparison results), and every
primitive with a kink (``relu``, ``abs``, ``max``, ``min``, comparisons) is evaluated
farther from its kink than the probes move its arguments.  The primitives' ``kink`` and
``domain`` functions of the table say where that is; an interpreter with an event hook
reports each primitive evaluated.

The points, the probes and the finite differences are :mod:`lambdad.probing`'s; this module
runs the modes of AD, compares them and writes the report.  It works on a loaded program
(anything with the interface of :class:`lambdad.pipeline.Program`) and never prints;
:meth:`Report.render` is the table.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs

from . import rich
from .calling import (arguments_covered, from_python, input_names, point_from_python,
                      with_arrays)
from .errors import LambdadError, ResourceError, UsageError
from .limits import watch_forked
from .probing import (
    AGREEMENT,
    AGREEMENT_FLOOR,
    ATTEMPTS,
    DEFAULT_EPS,
    DEFAULT_RTOL,
    MIN_EPS,
    NAIVE_SECONDS,
    SAMPLED_ELEMENTS,
    Prober,
    _Differences,
    _error_of,
    _finite,
    _require_checkable,
    _result,
    differentiable_functions,
    finite_differences,
    function_params,
    leaves,
    replace_leaves,
    sample_value,
    with_real,
)
from .syntax import tuple_type, ArrayT, RealT, Type, walk
from .values import format_value

# The derivatives compared: "reverse" is the factored strategy (←D as the paper evaluates it).
MODES = ("forward", "fused", "reverse", "naive")
MODE_TITLES = {"forward": "forward", "fused": "reverse (fused)", "reverse": "reverse (factored)",
               "naive": "reverse (naive)"}
# Pairs of modes that must agree with each other (beyond each agreeing with finite differences).
AGREEING = (("forward", "fused"), ("forward", "reverse"), ("fused", "reverse"),
            ("reverse", "naive"), ("forward", "naive"))


# --------------------------------------------------------------------------- results


@attrs.frozen
class Row:
    """One input real: its path and value, the finite difference, each mode's derivative
    (None for a mode not run), the absolute floor ``atol_i`` of the comparison, the error
    (the largest over the modes, see the module docstring; NaN when finite differences
    were not compared on this input), and the modes that disagree with the finite
    difference."""

    path: str
    value: float
    finite_difference: float
    derivatives: dict[str, float | None]
    error: float
    disagreeing: tuple[str, ...]
    floor: float = 0.0

    @property
    def compared(self) -> bool:
        """Whether the finite difference judged this input's derivatives."""
        return not math.isnan(self.error)


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
    rtol: float = DEFAULT_RTOL

    @property
    def ok(self) -> bool:
        """No disagreement (finite differences may not have been compared: see
        :attr:`compared`)."""
        return not self.mismatches()

    @property
    def compared(self) -> bool:
        """Whether finite differences judged every input's derivatives here."""
        return bool(self.rows) and all(row.compared for row in self.rows)

    def mismatches(self) -> list[str]:
        """One sentence per disagreement: which mode, on which input, by how much."""
        out = []
        for row in self.rows:
            for mode in row.disagreeing:
                d = row.derivatives[mode]
                out.append(f"{MODE_TITLES[mode]} disagrees with finite differences on "
                           f"`{row.path}`: {_number(d)} vs {_number(row.finite_difference)} "
                           f"(error {_error(_error_of(d, row.finite_difference, row.floor, self.rtol))}"
                           f" > rtol {self.rtol:g})")
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
    def failed(self) -> bool:
        """Whether some derivative disagrees (with finite differences or another mode)."""
        return any(not c.ok for c in self.checks)

    @property
    def verified(self) -> bool:
        """Whether finite differences judged every derivative at every point, and there was
        at least one point."""
        return self.problem is None and bool(self.checks) and all(c.compared for c in self.checks)

    @property
    def ok(self) -> bool:
        """Verified and without a disagreement: only then is a function reported ``ok``."""
        return self.verified and not self.failed


@attrs.frozen
class Report:
    """The result of :func:`check`: one :class:`FunctionReport` per function."""

    functions: tuple[FunctionReport, ...]

    @property
    def ok(self) -> bool:
        return bool(self.functions) and all(f.ok for f in self.functions)

    def mismatches(self) -> list[str]:
        """Every disagreement as ``name at point: sentence``, and every function or point
        left unchecked, with the reason."""
        out = []
        for function in self.functions:
            if function.problem is not None:
                out.append(f"{function.name}: not checked: {function.problem}")
            for c in function.checks:
                out.extend(f"{c.name} at {point_text(c.point)}: {m}" for m in c.mismatches())
                if not c.compared:
                    why = "; ".join(n for n in c.notes if n.startswith(NOT_COMPARED)) or \
                        "finite differences not compared"
                    out.append(f"{c.name} at {point_text(c.point)}: not checked: {why}")
        return out

    def __str__(self) -> str:
        return self.render()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.render())

    def _repr_html_(self) -> str:
        return rich.Report(self.render(), self.ok)._repr_html_()

    def render(self) -> str:
        """The report as text: a table per function and point, then a verdict."""
        return render_report(self)


NOT_COMPARED = "finite differences not compared"


# --------------------------------------------------------------------------- checking


def validate_tolerances(eps: float | None, rtol: float | None) -> tuple[float, float]:
    """``eps`` and ``rtol`` (defaults for None); raises UsageError unless each is a number
    in (0, 1): a NaN, infinite, zero, negative or huge tolerance would make every
    comparison pass or every step meaningless."""
    eps = DEFAULT_EPS if eps is None else eps
    rtol = DEFAULT_RTOL if rtol is None else rtol
    for flag, value in (("--eps", eps), ("--rtol", rtol)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0.0 < value < 1.0):
            raise UsageError(f"{flag} must be a number between 0 and 1 (exclusive), "
                             f"got {value!r}")
    if eps < MIN_EPS:
        raise UsageError(f"--eps must be at least {MIN_EPS:.2g} (4 machine epsilons), got "
                         f"{eps!r}: a smaller step vanishes against the point's reals")
    return float(eps), float(rtol)


def check_point(program: Any, name: str, point: Any, eps: float | None = None,
                rtol: float | None = None, prober: Prober | None = None,
                differences: _Differences | None = None,
                naive_seconds: float = NAIVE_SECONDS) -> PointCheck:
    """The check of ``name`` at the runtime value ``point``: finite differences against
    forward mode and every reverse-mode strategy (naive left out if it takes more than
    ``naive_seconds``).  Raises LambdadError if the program fails at ``point`` (or its value
    or a derivative is not finite), ResourceError when a limit is hit, and UsageError if the
    point does not fit or a tolerance is not in (0, 1)."""
    eps, rtol = validate_tolerances(eps, rtol)
    k = arguments_covered(name, program.typing.schemes[name].type, point)
    if prober is None:
        prober = Prober(program, name, k)
    if differences is None:
        differences = finite_differences(prober, point, eps, rtol)
    derivatives: dict[str, list[float | None]] = {}
    notes = []
    for column, mode, strategy in (("forward", "forward", "factored"),
                                   ("fused", "reverse", "fused"),
                                   ("reverse", "reverse", "factored")):
        if mode == "forward" and differences.sampled:
            # one run per real: only the elements probed, not every element of a large array
            derivatives[column] = _forward_at(program, name, point, differences.positions)
            continue
        _, gradient = program.value_and_grad(name, point, mode=mode, strategy=strategy)
        derivatives[column] = leaves(gradient)
    naive = prober.naive_gradient(point, naive_seconds)
    if naive is None:
        # Naive backpropagation is exponential in the sharing (AD.md section 5): on a long
        # chain it would not finish.  Its column is left out rather than waited for.
        naive = [None] * len(derivatives["reverse"])
        notes.append(f"reverse (naive) not run: it takes over {naive_seconds:g} s here "
                     "(its cost grows exponentially with sharing)")
    derivatives["naive"] = naive
    paths = input_names(program.decls[name].value, point, k, t=program.points.point_type(name, point))
    reals = leaves(point)
    rows, conflicts = [], []
    for i, position in enumerate(differences.positions):
        path = paths[position]
        fd, atol = differences.quotients[i], differences.atols[i]
        ds = {mode: derivatives[mode][position] for mode in MODES}
        disagreeing = []
        compared = (differences.problem is None and differences.unresolved[i] is None
                    and _finite(fd))
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
            error = _error_of(d, fd, atol, rtol)
            worst = max(worst, error)
            if error > rtol:
                disagreeing.append(mode)
        # The AD modes sum the same chain-rule terms in different orders: they agree to
        # AGREEMENT relative, up to rounding on the scale of what moves with this input (a
        # derivative that is zero comes out as +-1e-17 in one mode and exactly 0 in another).
        biggest = max([abs(d) for d in ds.values() if d is not None and _finite(d)],
                      default=0.0)
        floor = AGREEMENT_FLOOR * max(1.0, differences.magnitudes[i], biggest)
        for first, second in AGREEING:
            a, b = ds[first], ds[second]
            if a is None or b is None:
                continue
            if _finite(a) and _finite(b) and abs(a - b) > AGREEMENT * max(abs(a), abs(b)) + floor:
                conflicts.append((first, second, path))
        rows.append(Row(path, reals[position], fd, ds, worst, tuple(disagreeing), atol))
        if differences.problem is None and differences.unresolved[i] is not None:
            notes.append(f"{NOT_COMPARED} on `{path}`: {differences.unresolved[i]}")
    if differences.sampled:
        notes.append("finite differences on sampled elements (the rows), seeded: " + ", ".join(
            f"{SAMPLED_ELEMENTS} of the {size} of `{_array_name(paths[start])}`"
            for start, size in differences.sampled))
    if differences.problem is not None:
        notes.append(f"{NOT_COMPARED}: {differences.problem}")
    if differences.domain is not None:
        notes.append(differences.domain)
    return PointCheck(name, point, differences.value, tuple(rows), tuple(notes),
                      tuple(conflicts), rtol)


def _forward_at(program: Any, name: str, point: Any, positions: Sequence[int]
                ) -> list[float | None]:
    """Forward-mode derivatives of ``name`` at ``point`` along the reals at ``positions``
    (one dual-number run each), in a list by real (None elsewhere)."""
    zero = replace_leaves(point, [0.0] * len(leaves(point)))
    out: list[float | None] = [None] * len(leaves(point))
    for position in positions:
        _, tangent = program.jvp(name, point, with_real(zero, position, 1.0))
        out[position] = tangent
    return out


def _array_name(element: str) -> str:
    """The name of the array an element's name (``x[3][1]``) is in (``x``)."""
    return re.sub(r"(\[\d+\])+$", "", element)


def shape_example(program: Any, input_type: Type) -> Any:
    """For a function whose input type ``input_type`` holds arrays: the value of the first
    of the program's own definitions of that type (its initial weights, say), whose shapes
    the sampled points take (a function of arrays may only fit the shapes of its data);
    None when there is none, or no arrays."""
    if not any(isinstance(node, ArrayT) for node in walk(input_type)):
        return None
    for name in program.names():
        scheme = program.typing.schemes.get(name)
        if scheme is None or scheme.vars or scheme.type != input_type:
            continue
        try:
            return program.value_of(name)
        except LambdadError:
            continue
    return None


def sample_point(prober: Prober, input_type: Type, seed: int, index: int,
                 eps: float = DEFAULT_EPS, rtol: float = DEFAULT_RTOL, like: Any = None
                 ) -> tuple[Any, _Differences] | str:
    """The ``index``-th sampled point of ``prober``'s function for ``seed`` (from a
    generator of its own, so points can be drawn in any order or in parallel), with its
    finite differences: the first of ``ATTEMPTS`` candidates where the function evaluates
    without error, away from kinks and branch switches, with finite differences that can
    judge every input, and (for the first two thirds of the attempts) inside the table's
    domains; the first third are drawn with alternating signs (see :func:`sample_value`).
    Returns why none was found instead, if so; raises ResourceError when a limit is hit."""
    rng = random.Random(f"{seed}/{prober.name}/{index}")
    last_problem = "no candidate"
    for attempt in range(ATTEMPTS):
        # Consecutive points lie in opposite orthants (signs + - + ... and - + - ...) during
        # the first third of the attempts, so both sides of `relu x` or `max x y` are seen
        # and a wrong derivative on either side is caught.
        point = sample_value(input_type, rng, index if attempt < ATTEMPTS // 3 else None,
                             like)
        try:
            differences = finite_differences(prober, point, eps, rtol)
        except ResourceError:
            raise
        except LambdadError as exc:
            last_problem = exc.message
            continue
        if differences.problem is not None:
            last_problem = differences.problem
            continue
        reason = next((r for r in differences.unresolved if r is not None), None)
        if reason is not None:
            last_problem = f"{NOT_COMPARED}: {reason}"
            continue
        # The table's domains are margins (log x with x > 0.1...): insist on them for the
        # first two thirds of the attempts, then accept any point where the probes are fine.
        if differences.domain is not None and attempt < 2 * ATTEMPTS // 3:
            last_problem = differences.domain
            continue
        return point, differences
    return last_problem


def check(program: Any, names: str | Iterable[str] | None = None, point: Any = None,
          samples: int = 3, seed: int = 0, eps: float | None = None,
          rtol: float | None = None, naive_seconds: float = NAIVE_SECONDS,
          jobs: int = 1, wrt: Sequence[str] | None = None) -> Report:
    """The gradient check of ``names`` (default: :func:`differentiable_functions`) at
    ``point`` (Python data or lambdad syntax, for every name) or at ``samples`` seeded random
    points, drawn and checked by ``jobs`` worker processes (the report does not depend on
    ``jobs``); naive backpropagation is left out where it takes over ``naive_seconds``.
    Raises UsageError for an unknown or non-differentiable name, a program with nothing to
    check, a point that does not fit or a tolerance outside (0, 1); LambdadError if the
    program fails at the given point; ResourceError when a limit is hit.  With ``wrt``
    (parameter names of the one function named), only those parameters are checked, the
    others held at their values in ``point``, which is required."""
    eps, rtol = validate_tolerances(eps, rtol)
    if isinstance(names, str):
        names = [names]
    names = list(names) if names is not None else differentiable_functions(program)
    if wrt is not None:
        if len(names) != 1 or point is None:
            raise UsageError("--wrt needs one function and a point (--at): the parameters "
                             "not chosen are held at their values there")
        program, point = program.restricted(names[0], point, wrt)
    if not names:
        raise UsageError("nothing to check: no function of reals, pairs and lists of reals "
                         "returning R is defined" + (f" (defined: {', '.join(program.names())})"
                                                     if program.names() else ""))
    for name in names:
        _require_checkable(program, name)
    if point is not None:
        reports = []
        value = program.points.parse_point(point) if isinstance(point, str) else point_from_python(point)
        for name in names:
            k = arguments_covered(name, program.typing.schemes[name].type, value)
            if not isinstance(_result(program, name, k), RealT):
                raise UsageError(f"`{name}` does not return R")
            fitted = with_arrays(value, tuple_type(function_params(program, name)[:k]))
            reports.append(FunctionReport(name, (check_point(program, name, fitted, eps, rtol,
                                                             naive_seconds=naive_seconds),)))
        return Report(tuple(reports))
    for name in names:
        if not isinstance(_result(program, name, len(function_params(program, name))), RealT):
            raise UsageError(f"`{name}` does not return R")
    if samples < 1:
        raise UsageError("--samples needs a positive number")
    probers: dict[str, Prober] = {}
    shapes: dict[str, Any] = {}  # for a function of arrays: a value giving the shapes
    given_up: set[str] = set()  # functions with a point not found (a serial run skips them)

    def sample_and_check(task: tuple[str, int]) -> PointCheck | str:
        name, index = task
        if name in given_up:
            return "skipped"
        if name not in probers:
            probers[name] = Prober(program, name, len(function_params(program, name)))
        prober = probers[name]
        input_type = tuple_type(function_params(program, name))
        if name not in shapes:
            shapes[name] = shape_example(program, input_type)
        found = sample_point(prober, input_type, seed, index, eps, rtol, shapes[name])
        if isinstance(found, str):
            return found
        sampled, differences = found
        return check_point(program, name, sampled, eps, rtol, prober, differences,
                           naive_seconds)

    tasks = [(name, index) for name in names for index in range(samples)]
    results = iter(in_parallel(sample_and_check, tasks, jobs))
    reports = []
    for name in names:
        checks: list[PointCheck] = []
        problem = None
        for index in range(samples):
            result = next(results)
            if problem is not None:
                continue  # drawn in parallel; a serial run stops at the first failure
            if isinstance(result, str):
                given_up.add(name)
                problem = (f"found {len(checks)} of {samples} points away from kinks and "
                           f"errors in {ATTEMPTS} attempts (last reason: {result})")
            else:
                checks.append(result)
        if checks and problem is not None:
            # Some points were checked: say why there are fewer, but do not fail for that.
            checks[-1] = attrs.evolve(checks[-1], notes=checks[-1].notes + (problem,))
            problem = None
        reports.append(FunctionReport(name, tuple(checks), problem))
    return Report(tuple(reports))


def in_parallel(work: Callable[[Any], Any], tasks: Sequence[Any], jobs: int) -> Iterator[Any]:
    """``work(task)`` for every task, in order, computed by up to ``jobs`` forked worker
    processes (lazily in this process for one job, or where processes cannot be forked).
    Each worker inherits this process's state (the program, its compiled code) and returns
    its results by pickling; a LambdadError raised by ``work`` is raised here again, in
    task order.  Workers are stopped when the caller stops (an error, a time limit)."""
    jobs = min(jobs, len(tasks))
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(work, tasks)
        return
    context = multiprocessing.get_context("fork")
    todo, done = context.SimpleQueue(), context.SimpleQueue()
    for position in range(len(tasks)):
        todo.put(position)
    for _ in range(jobs):
        todo.put(None)

    def serve() -> None:
        watch_forked()  # the command's time and memory limits hold in the workers too
        while (position := todo.get()) is not None:
            try:
                done.put((position, "value", work(tasks[position])))
            except LambdadError as exc:
                done.put((position, "error", (type(exc), exc.message, exc.span, exc.notes)))
            except BaseException as exc:  # noqa: BLE001 - handed to the parent to raise
                done.put((position, "crash", f"{type(exc).__name__}: {exc}"))
        done.close()

    workers = [context.Process(target=serve, daemon=True) for _ in range(jobs)]
    for worker in workers:
        worker.start()
    try:
        results: dict[int, tuple[str, Any]] = {}
        for position in range(len(tasks)):
            while position not in results:
                got, kind, payload = done.get()
                results[got] = (kind, payload)
            kind, payload = results.pop(position)
            if kind == "error":
                cls, message, span, notes = payload
                error = cls.__new__(cls)
                LambdadError.__init__(error, message, span, notes)
                raise error
            if kind == "crash":
                raise RuntimeError(f"a worker process failed: {payload}")
            yield payload
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        for worker in workers:
            worker.join()


def default_jobs() -> int:
    """All the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------- rendering


def _number(x: float | None) -> str:
    """A real in the language's style (``2``, ``0.5``, ``-1e+30``), 12 significant digits."""
    if x is None:
        return "-"
    if not math.isfinite(x):
        return format_value(x)
    text = f"{x:.12g}"
    return text


def _error(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1e}"


def point_text(point: Any) -> str:
    """``point`` as the language writes it, each array of more than ``SUMMARY_ELEMENTS``
    elements shown by its shape and a summary instead."""
    return format_value(point, summarised=True)


def render_check(c: PointCheck) -> list[str]:
    """The table of one point: a row per input real (per probed element of a large array);
    ``floor`` is the absolute floor ``atol_i`` and ``error`` the largest error of a mode
    (the module docstring)."""
    lines = [f"{c.name} at {point_text(c.point)}: value {_number(c.value)}"]
    headers = ["input", "finite diff.", *(MODE_TITLES[m] for m in MODES), "floor", "error"]
    table = [headers]
    for row in c.rows:
        mark = "  <- " + ", ".join(MODE_TITLES[m] for m in row.disagreeing) \
            if row.disagreeing else ""
        table.append([row.path, _number(row.finite_difference),
                      *(_number(row.derivatives[m]) for m in MODES),
                      f"{row.floor:.1e}" if row.compared else "-", _error(row.error) + mark])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers) - 1)]
    for r in table:
        cells = [cell.ljust(width) for cell, width in zip(r, widths)] + [r[-1]]
        lines.append("  " + "  ".join(cells).rstrip())
    lines.extend(f"  note: {note}" for note in c.notes)
    return lines


def render_report(report: Report) -> str:
    """The whole report: each function's tables, its mismatches, and a last verdict line:
    ``ok`` only when finite differences judged every derivative at every point."""
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
    no_naive = sum(1 for f in report.functions for c in f.checks
                   if any(r.derivatives["naive"] is None for r in c.rows))
    if report.ok:
        caveat = f" (reverse (naive) not run at {no_naive} point(s))" if no_naive else ""
        lines.append(f"ok: {len(report.functions)} function(s), {total} point(s): forward, "
                     "reverse (fused, factored, naive) and finite differences agree (error <= rtol "
                     f"{report.functions[0].checks[0].rtol:g}){caveat}")
        return "\n".join(lines)
    failed = [f.name for f in report.functions if f.failed]
    unchecked = [f.name for f in report.functions if not f.failed and not f.verified]
    if failed:
        lines.append(f"FAILED: {', '.join(failed)}")
    if unchecked:
        lines.append(f"NOT CHECKED: {', '.join(unchecked)} (finite differences could not "
                     "judge every derivative: see the notes)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- second order


@attrs.frozen
class SecondOrderCheck:
    """Second derivatives of ``name`` at ``point``: the Hessian by every composition
    (``hessians[mode]``, n×n, rows by input), central differences of the reverse-mode
    gradient (``differences``), the names of the inputs, and the entries that disagree
    (``"x1, x2: ..."``)."""

    name: str
    point: Any
    value: float
    inputs: tuple[str, ...]
    hessians: dict[str, tuple[tuple[float, ...], ...]]
    differences: tuple[tuple[float, ...], ...]
    mismatched: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatched


@attrs.frozen
class SecondOrderReport:
    """``lambdad check --order 2``: one :class:`SecondOrderCheck` per function and point,
    and the functions for which no point could be checked (with the reason)."""

    checks: tuple[SecondOrderCheck, ...]
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.problems and all(c.ok for c in self.checks)

    def mismatches(self) -> list[str]:
        return [f"{c.name}: {m}" for c in self.checks for m in c.mismatched] + list(
            self.problems)

    def render(self) -> str:
        from .differentiate import COMPOSITIONS

        lines: list[str] = []
        for c in self.checks:
            lines.append(f"{c.name} at {format_value(from_python(c.point, finite=False))}: value "
                         f"{_number(c.value)}")
            header = ["entry", *COMPOSITIONS, "finite diff. of grad"]
            table = [header]
            n = len(c.inputs)
            for i in range(n):
                for j in range(n):
                    table.append([f"{c.inputs[i]}, {c.inputs[j]}",
                                  *(_number(c.hessians[m][i][j]) for m in COMPOSITIONS),
                                  _number(c.differences[i][j])])
            widths = [max(len(row[k]) for row in table) for k in range(len(header))]
            lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                      for row in table]
            lines += [f"  mismatch: {m}" for m in c.mismatched]
            lines.append("")
        lines += [f"problem: {p}" for p in self.problems]
        failed = sorted({c.name for c in self.checks if not c.ok})
        if self.ok:
            lines.append(f"ok: {len({c.name for c in self.checks})} function(s), "
                         f"{len(self.checks)} point(s): second derivatives by every "
                         "composition agree with finite differences of the gradient")
        else:
            lines.append("FAILED: " + ", ".join(failed or ["no point checked"]))
        return "\n".join(lines)


def check_second_order(program: Any, names: str | Iterable[str] | None = None,
                       point: Any = None, samples: int = 3, seed: int = 0,
                       eps: float | None = None, rtol: float | None = None
                       ) -> SecondOrderReport:
    """Second derivatives of ``names`` (default: every differentiable function) at
    ``point`` or at ``samples`` seeded random points away from kinks: the Hessian by the four
    compositions of the modes must agree with each other and with central differences of
    the reverse-mode gradient, entry by entry (each named by its two inputs).  Raises as
    :func:`check`."""
    from .differentiate import COMPOSITIONS

    eps, rtol = validate_tolerances(eps, rtol)
    if isinstance(names, str):
        names = [names]
    names = list(names) if names is not None else differentiable_functions(program)
    if not names:
        raise UsageError("nothing to check: no function of reals, pairs and lists of reals "
                         "returning R is defined")
    checks: list[SecondOrderCheck] = []
    problems: list[str] = []
    for name in names:
        params = _require_checkable(program, name)
        if point is not None:
            value = program.points.parse_point(point) if isinstance(point, str) else point_from_python(point)
            checks.append(_second_order_at(program, name, value, eps, rtol, COMPOSITIONS))
            continue
        prober = Prober(program, name, len(params))
        like = shape_example(program, tuple_type(params))  # the shapes of arrays drawn
        found = 0
        for index in range(samples):
            sampled = sample_point(prober, tuple_type(params), seed, index, eps, rtol, like)
            if isinstance(sampled, str):
                problems.append(f"{name}: no point away from kinks and errors ({sampled})")
                break
            checks.append(_second_order_at(program, name, sampled[0], eps, rtol,
                                           COMPOSITIONS))
            found += 1
    return SecondOrderReport(tuple(checks), tuple(problems))


def _second_order_at(program: Any, name: str, point: Any, eps: float, rtol: float,
                     compositions: Sequence[str]) -> SecondOrderCheck:
    """Every composition's Hessian and the differences of the gradient at ``point``."""
    hessians: dict[str, tuple[tuple[float, ...], ...]] = {}
    value = 0.0
    for mode in compositions:
        value, _, rows = program.hessian(name, point, mode=mode)
        hessians[mode] = tuple(tuple(leaves(from_python(row, finite=False))) for row in rows)
    inputs = tuple(program.input_names(name, point))
    reals = leaves(point)
    differences = []
    for i, r in enumerate(reals):
        h = eps * max(1.0, abs(r))
        up = leaves(from_python(program.grad(name, replace_leaves(
            point, [x + h if k == i else x for k, x in enumerate(reals)])), finite=False))
        down = leaves(from_python(program.grad(name, replace_leaves(
            point, [x - h if k == i else x for k, x in enumerate(reals)])), finite=False))
        differences.append(tuple((u - d) / (2 * h) for u, d in zip(up, down)))
    reference = hessians[compositions[0]]
    scale = max([1.0] + [abs(x) for row in reference for x in row])
    mismatched = []
    for i in range(len(reals)):
        for j in range(len(reals)):
            entry = f"{inputs[i]}, {inputs[j]}"
            exact = reference[i][j]
            for mode in compositions[1:]:
                if abs(hessians[mode][i][j] - exact) > AGREEMENT * (abs(exact) + scale):
                    mismatched.append(f"{entry}: {mode} gives {_number(hessians[mode][i][j])}"
                                      f", {compositions[0]} {_number(exact)}")
            if abs(exact - differences[i][j]) > rtol * (abs(differences[i][j]) + scale):
                mismatched.append(f"{entry}: {_number(exact)} against finite differences "
                                  f"of the gradient {_number(differences[i][j])}")
    return SecondOrderCheck(name, point, value, inputs, hessians, tuple(differences),
                            tuple(mismatched))
