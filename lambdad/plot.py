"""Plots: a function of one real with its derivatives over an interval, and a list of
reals (a loss per training step) against its index.

The numbers come from lambdad: the k-th derivative of ``f`` is the program
``\\(x : R) -> snd (jvp d x 1)`` with ``d`` the (k-1)-th, added to the program under a
hidden name (forward mode nested k deep, AD.md section 9) and evaluated at every sample
like ``f`` itself.  A sample at which a curve cannot be evaluated (``log 0``, ``sqrt``
of a negative, an overflow) is a gap in that curve, and is counted, never an error.

Drawing needs matplotlib (the ``plot`` extra), imported only when a picture is asked for;
without it :func:`figure` raises ToolError with the command that installs it.  Figures
are made as :class:`matplotlib.figure.Figure` objects drawn by the Agg (PNG) or SVG
canvas directly: pyplot, its global figure registry and the process's default backend
are never touched.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import attrs

from .errors import (
    EvalError,
    FileAccessError,
    LambdadError,
    ResourceError,
    ToolError,
    UsageError,
)
from .parser import parse_expr
from .syntax import Decl
from .values import format_real

SAMPLES = 401  # an odd count: the middle of the interval is a sample
MAX_ORDER = 6  # nested forward mode costs about 2^k times a run of f
MATPLOTLIB_HINT = ("install it with `pip install 'lambdad[plot]'` (or `pip install "
                   "matplotlib`); without -o, `lambdad plot` prints the points as text")
FORMATS = (".svg", ".png", ".pdf")


@attrs.frozen
class Curve:
    """One line of a plot: ``ys[i]`` at ``xs[i]``, NaN where it could not be evaluated."""

    label: str  # for a legend: f, f′, f″, …
    name: str  # for a text column: f, f', f'', …
    xs: tuple[float, ...]
    ys: tuple[float, ...]

    @property
    def gaps(self) -> int:
        """How many samples could not be evaluated."""
        return sum(1 for y in self.ys if y != y)


@attrs.frozen
class Plot:
    """Curves over a common horizontal axis.  In a notebook it shows as SVG; ``text()`` is
    the sampled points as a table."""

    title: str
    xlabel: str
    curves: tuple[Curve, ...]
    # the first failure of each curve with gaps, as the program's error said it
    failures: tuple[str, ...] = ()
    markers: bool = False  # a few points: each is drawn as a dot too
    # the horizontal extent drawn (a function's interval, its gaps at the ends included)
    interval: tuple[float, float] | None = None

    def notes(self) -> list[str]:
        """One line per curve with gaps: how many, and why the first one failed."""
        out = []
        for curve, reason in zip((c for c in self.curves if c.gaps), self.failures):
            out.append(f"{curve.name} is undefined at {curve.gaps} of {len(curve.ys)} "
                       f"points, gaps in the picture (first {reason})")
        return out

    def text(self) -> str:
        """The points as a table: a column for x, one per curve (``undefined`` at a gap)."""
        header = [self.xlabel, *(c.name for c in self.curves)]
        rows = [[format_real(x), *(_cell(c.ys[i]) for c in self.curves)]
                for i, x in enumerate(self.curves[0].xs)] if self.curves else []
        widths = [max([len(header[j]), *(len(r[j]) for r in rows)]) for j in range(len(header))]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines)

    def figure(self) -> Any:
        """A new :class:`matplotlib.figure.Figure` of this plot; ToolError without
        matplotlib."""
        return figure(self)

    def svg(self) -> str:
        """The plot as an SVG document."""
        return render(self, "svg").decode()

    def png(self) -> bytes:
        """The plot as a PNG image."""
        return render(self, "png")

    def _repr_svg_(self) -> str:
        return self.svg()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        gaps = self.notes()
        printer.text("\n".join([f"{self.title}: " + ", ".join(
            f"{c.name} ({len(c.ys)} points)" for c in self.curves), *gaps]))


def _cell(y: float) -> str:
    """A table's number (a zero without its sign, as in trace tables), or ``undefined``."""
    return "undefined" if y != y else format_real(y + 0.0)


# ------------------------------------------------------------------ sampling


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_PRIMES = {1: "′", 2: "″", 3: "‴"}


def derivative_label(name: str, k: int) -> str:
    """``f``, ``f′``, ``f″``, ``f‴``, ``f⁽⁴⁾``, …"""
    if k == 0:
        return name
    return name + _PRIMES.get(k, f"⁽{str(k).translate(_SUPERSCRIPT)}⁾")


def _fits(program: Any, name: str, type_text: str) -> bool:
    """Whether ``name`` can be used at the type written ``type_text``."""
    try:
        program.type_of_term(parse_expr(f"({name} : {type_text})", "<plot>",
                                        bound=program.decls))
    except LambdadError:
        return False
    return True


def kind_of(program: Any, name: str) -> str:
    """``"function"`` for a function ``R -> R``, ``"list"`` for a list ``[R]``; raises
    UsageError for anything else (saying its type)."""
    program.require(name)
    if _fits(program, name, "R -> R"):
        return "function"
    if _fits(program, name, "[R]"):
        return "list"
    raise UsageError(f"plot draws a function R -> R (over --from/--to) or a list [R] "
                     f"(against its index); `{name}` has type {program.scheme(name)}")


def _sample(call: Any, x: Any) -> tuple[float, str | None]:
    """``call(x)`` as a float, or NaN and the reason when it fails or is not finite.  A
    step or time limit is not a gap: it stops the plot."""
    try:
        y = call(x)
    except ResourceError:
        raise
    except EvalError as error:
        return math.nan, error.message
    if not math.isfinite(y):
        return math.nan, f"the value is {format_real(y)}"
    return float(y), None


def function_plot(program: Any, name: str, start: float, stop: float, order: int = 1,
                  samples: int = SAMPLES) -> Plot:
    """``name`` (a function ``R -> R``) and its first ``order`` derivatives at ``samples``
    evenly spaced points from ``start`` to ``stop``.  Raises UsageError for a bad interval,
    order or sample count, or a function of another type; the program's step or time
    limit stops it with ResourceError."""
    start, stop = float(start), float(stop)
    if not (math.isfinite(start) and math.isfinite(stop) and start < stop):
        raise UsageError(f"the interval must go from a number to a larger one; got "
                         f"--from {format_real(start)} --to {format_real(stop)}")
    if not 0 <= order <= MAX_ORDER:
        raise UsageError(f"--order must be between 0 and {MAX_ORDER} (each derivative "
                         f"nests forward mode once more); got {order}")
    if samples < 2:
        raise UsageError(f"--samples must be at least 2; got {samples}")
    if kind_of(program, name) != "function":
        raise UsageError(f"`{name}` is a list: it is drawn against its index, without "
                         "--from, --to or --order")
    names = [name]
    for _ in range(order):
        hidden = program.hidden_name(name)
        term = parse_expr(f"\\(x : R) -> snd (jvp {names[-1]} x 1)", "<plot>",
                          bound=program.decls)
        program = program.extended([Decl(hidden, term)])
        names.append(hidden)
    xs = tuple(start + (stop - start) * i / (samples - 1) for i in range(samples - 1)) + (stop,)
    curves, failures = [], []
    for k, defined in enumerate(names):
        ys, first = [], None
        for x in xs:
            y, reason = _sample(lambda at: program.call(defined, at), x)
            ys.append(y)
            if reason is not None and first is None:
                first = f"at {format_real(x)}: {reason}"
        curves.append(Curve(derivative_label(name, k), name + "'" * k, xs, tuple(ys)))
        if first is not None:
            failures.append(first)
    title = f"{name} on [{format_real(start)}, {format_real(stop)}]"
    return Plot(title, "x", tuple(curves), tuple(failures), interval=(start, stop))


def list_plot(program: Any, name: str) -> Plot:
    """The list ``name`` (of type ``[R]``: a loss per training step, say) against its
    index.  Raises UsageError for another type, and the program's own errors."""
    if kind_of(program, name) != "list":
        raise UsageError(f"`{name}` is a function: give the interval, --from A --to B")
    values = program.run(name)
    ys = tuple(float(v) if math.isfinite(v) else math.nan for v in values)
    if not ys:
        raise UsageError(f"`{name}` is the empty list: there is nothing to draw")
    curve = Curve(name, name, tuple(float(i) for i in range(len(ys))), ys)
    failures = ("the value is not finite",) if curve.gaps else ()
    return Plot(f"{name} ({len(ys)} values)", "index", (curve,), failures,
                markers=len(ys) <= 60)


def plot_of(program: Any, name: str, start: float | None = None, stop: float | None = None,
            order: int | None = None, samples: int | None = None) -> Plot:
    """The plot of ``name``: a function ``R -> R`` over ``[start, stop]`` with its first
    ``order`` derivatives (default 1), or a list ``[R]`` against its index (then with no
    interval or order).  Raises UsageError when the arguments do not fit the kind."""
    if kind_of(program, name) == "list":
        given = [flag for flag, value in (("--from", start), ("--to", stop), ("--order", order))
                 if value is not None]
        if given:
            raise UsageError(f"`{name}` is a list, drawn against its index: "
                             f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for a "
                             "function R -> R")
        return list_plot(program, name)
    if start is None or stop is None:
        raise UsageError(f"`{name}` is a function R -> R: give the interval to draw it over "
                         "(--from A --to B; in a notebook, %plot NAME A B)")
    return function_plot(program, name, start, stop, 1 if order is None else order,
                         SAMPLES if samples is None else samples)


def bound_of(program: Any, text: str, what: str) -> float:
    """The real written ``text`` (lambdad syntax: ``-3``, ``0.5``, a defined name) for an
    end of the interval; raises UsageError if it is not one."""
    value = program.points.parse_point(text, what)
    if type(value) is not float:
        raise UsageError(f"{what}: expected a real number, got {text!r}")
    return value


# ------------------------------------------------------------------ drawing


def _matplotlib() -> Any:
    """matplotlib's Figure class; ToolError if matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ToolError("matplotlib is not installed, so the plot cannot be drawn; "
                        + MATPLOTLIB_HINT) from None
    return Figure


_COLOURS = ("#1f5fa8", "#c8501e", "#2e8b57", "#8b3fa8", "#b8860b", "#0f8b8d", "#a83f5f")
_STYLES = ("-", "--", "-.", ":")


def figure(plot: Plot) -> Any:
    """A new matplotlib Figure of ``plot`` (not registered with pyplot); ToolError without
    matplotlib."""
    Figure = _matplotlib()
    fig = Figure(figsize=(7.5, 4.4), dpi=100, layout="constrained")
    axes = fig.add_subplot()
    for number, curve in enumerate(plot.curves):
        (line,) = axes.plot(curve.xs, curve.ys, label=curve.label,
                            color=_COLOURS[number % len(_COLOURS)],
                            linestyle=_STYLES[min(number, 1)] if number < 2
                            else _STYLES[number % len(_STYLES)],
                            linewidth=2.0 if number == 0 else 1.6,
                            marker="o" if plot.markers else None, markersize=3.5)
        line.set_gid(f"lambdad-curve-{number}")  # the SVG group of the curve
    finite = [y for curve in plot.curves for y in curve.ys if y == y]
    if plot.xlabel == "index" and finite and min(finite) > 0 and max(finite) > 100 * min(finite):
        axes.set_yscale("log")  # a loss falling by orders of magnitude
    elif finite and min(finite) < 0 < max(finite):
        axes.axhline(0.0, color="#999999", linewidth=0.8, zorder=0)
    if plot.interval is not None:
        axes.set_xlim(*plot.interval)
    axes.set_title(plot.title)
    axes.set_xlabel(plot.xlabel)
    axes.grid(True, color="#dddddd", linewidth=0.6)
    if len(plot.curves) > 1:
        axes.legend(frameon=False)
    return fig


def render(plot: Plot, fmt: str) -> bytes:
    """``plot`` drawn as ``fmt`` (``svg``, ``png`` or ``pdf``); ToolError without
    matplotlib."""
    fig = figure(plot)
    if fmt == "png":
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)  # draw with Agg, whatever the process's default backend
    out = io.BytesIO()
    # no creation date in the file: the same plot gives the same bytes
    metadata = {"Date": None} if fmt in ("svg", "pdf") else None
    fig.savefig(out, format=fmt, metadata=metadata, dpi=120 if fmt == "png" else None)
    return out.getvalue()


def write_plot(plot: Plot, output: str) -> str:
    """Writes ``plot`` to ``output`` by its suffix (.svg, .png, .pdf).  Returns a note for
    the user.  Raises UsageError for another suffix, ToolError without matplotlib,
    FileAccessError if the file cannot be written."""
    path = Path(output)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"unknown plot format `{suffix or output}`; use "
                         + ", ".join(FORMATS))
    data = render(plot, suffix[1:])
    try:
        path.write_bytes(data)
    except (OSError, ValueError) as error:  # ValueError: a NUL in the file name
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise FileAccessError(f"cannot write {output}: {reason}") from None
    return f"wrote {path}"
