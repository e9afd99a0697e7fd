"""Evaluation traces (Baydin et al.'s Figures 2 and 3) and computational graphs.

Both are read off the interpreter's event hook while a transformed program runs; the
interpreter has no trace mode.  A row is one evaluation of a source primitive: its primal
value, and its tangent (forward mode: one column per input real, as n dual-number runs) or
its adjoint (reverse mode: the cotangent its backpropagator's body received).

A value may be an array (``Vec``, ``Mat``): an array operation is one row, its value, tangent
and adjoint whole arrays, shown by their shape and a summary (:func:`values.array_summary`);
an array input is one input row, and a forward trace's column for it is the derivative in
the direction of all ones in that array (the sum of its elements' columns).

Rows are found by the shape of the transformations' output: the rule for a primitive
application (of reals or of arrays) ends in a pair ``(f(x1..xk), tangent)`` or ``(f(x1..xk), \\a -o ...)`` (possibly
``let r = f(x1..xk) in (r, ...)``) carrying the source primitive's span; the ``Prim`` node
in its first component is the primal operation of the row.  Data dependencies between rows
(for level numbering and graph edges) are the identity of the float and array objects
flowing from one primitive's result into another's arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .arraylib import ARRAY, Sparse, dense
from .calling import input_names
from .differentiate import Differentiator
from .reals import is_real
from . import rich
from .errors import Span, UsageError, abridged, printable, source_line
from .graph import Graph, graph_of
from .interpreter import Interpreter
from .primitives import PRIMITIVES
from .printer import print_type
from .runtime import Runtime
from .syntax import (Let, Pair, Prim, RealT, Term, Var, VarT, is_differentiable,
                     walk)
from .tape import BackpropCreated, BackpropRun
from .values import SCALAR_TYPES, PrimEvent, array_summary, format_real, map_value


@attrs.define
class Row:
    """One primitive evaluation: ``v{index}`` in the table."""

    index: int
    symbol: str
    span: Span | None
    args: tuple[Any, ...]
    value: Any  # a float, or an array
    parents: tuple[int, ...]  # row indices (inputs are negative: v-1, v0, ...)
    derivatives: list[Any] = attrs.field(factory=list)
    primitive: str = ""  # the table entry's name
    # per argument: the row index that produced it, or None for a constant operand
    operands: tuple[int | None, ...] = ()
    stamp: int | None = None
    level: int = 0


@attrs.frozen
class Trace:
    """The rows of one evaluation, the input names and values, and what the derivative
    columns mean (``"tangent"`` columns per input, or ``"adjoint"``).  An input is a real
    or a whole array."""

    mode: str
    inputs: tuple[tuple[str, Any], ...]
    input_derivatives: tuple[tuple[Any, ...], ...]
    rows: tuple[Row, ...]
    columns: tuple[str, ...]
    output: float
    file: str = ""
    # the source texts the spans point into, by file name (for the source column)
    sources: dict[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    def __str__(self) -> str:
        return format_trace(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(format_trace(self))

    def _repr_html_(self) -> str:
        header, table = trace_table(self)
        derivative = "tangents" if self.mode == "forward" else "adjoints"
        return rich.html_table(header, table, caption=f"{self.mode} trace: values and "
                               f"{derivative}", numeric_from=3)

    def graph(self, title: str = "", constants: bool = False) -> Graph:
        """The computational graph of this evaluation (see :func:`lambdad.graph.graph_of`)."""
        return graph_of(self, title, constants)

    def source_excerpt(self, span: Span | None) -> str:
        """The source text ``span`` covers when it is one line, else its location."""
        return _source_text(span, self.sources)


# ------------------------------------------------------------------ finding the rule outputs


def _rule_sites(term: Term) -> tuple[set[int], dict[int, int]]:
    """In a raw transformed term: ids of the primal ``Prim`` nodes of primitive rules, and a
    map from the id of each rule's derivative component (tangent expression or linear
    abstraction) to the id of its primal node."""
    primal: set[int] = set()
    derivative_of: dict[int, int] = {}
    lets: dict[str, Prim] = {}
    for node in walk(term):
        if isinstance(node, Let) and isinstance(node.value, Prim):
            lets[node.name] = node.value
        if not isinstance(node, Pair):
            continue
        first = node.first
        if isinstance(first, Var) and first.name in lets and lets[first.name].span == node.span:
            first = lets[first.name]
        if (isinstance(first, Prim) and PRIMITIVES[first.op].kind in _ROW_KINDS
                and first.span is not None and first.span == node.span):
            primal.add(id(first))
            derivative_of[id(node.second)] = id(first)
    return primal, derivative_of


_ROW_KINDS = ("real", "elementwise", "array")
"""The kinds of primitive whose applications are rows: those with a derivative rule."""


def _is_value(x: Any) -> bool:
    return type(x) in SCALAR_TYPES


class _Recorder:
    """Collects rows from interpreter events."""

    def __init__(self) -> None:
        self.primal: set[int] = set()
        self.derivative_of: dict[int, int] = {}
        self.rows: list[Row] = []
        self.latest: dict[int, Row] = {}  # primal node id -> its most recent row
        self.producers: dict[int, int] = {}  # id(float) -> row index
        self.by_stamp: dict[int, Row] = {}
        self.keep: list[Any] = []  # keeps result floats alive so their ids stay unique
        # The registered terms, kept alive for the same reason: the differentiator need not
        # keep a transformed term, and a node made later could take a freed node's id.
        self.registered: list[Term] = []
        self.collect_rows = True
        self.cursor = 0  # in later forward runs: which row the next primal event is

    def register(self, transformed: Term) -> None:
        self.registered.append(transformed)
        primal, derivative_of = _rule_sites(transformed)
        self.primal |= primal
        self.derivative_of.update(derivative_of)

    def __call__(self, event: Any) -> None:
        if isinstance(event, PrimEvent):
            self._on_prim(event)
        elif isinstance(event, BackpropCreated):
            row = self.rows[-1] if self.rows else None
            if row is not None and row.span == event.span and row.stamp is None:
                row.stamp = event.stamp
                self.by_stamp[event.stamp] = row
        elif isinstance(event, BackpropRun):
            row = self.by_stamp.get(event.stamp)
            # (a cotangent of another ring is sent in an inner level's backward phase)
            cotangent = event.cotangent
            if row is not None and (type(cotangent) in SCALAR_TYPES or type(cotangent) is Sparse):
                cotangent = dense(cotangent)
                if row.derivatives:  # (never in place: the cotangent array is shared)
                    row.derivatives[0] = row.derivatives[0] + cotangent
                else:
                    row.derivatives.append(cotangent)

    def _on_prim(self, event: PrimEvent) -> None:
        node_id = id(event.term) if event.term is not None else None
        if node_id in self.primal:
            if self.collect_rows:
                operands = tuple(self.producers.get(id(a)) if _is_value(a) else None
                                 for a in event.args)
                parents = tuple(p for p in operands if p is not None)
                row = Row(len(self.rows) + 1, PRIMITIVES[event.prim.name].spelling.symbol,
                          event.span, event.args, event.result, parents,
                          primitive=event.prim.name, operands=operands)
                self.rows.append(row)
                self.producers[id(event.result)] = row.index
                self.keep.append(event.result)
            else:
                row = self.rows[self.cursor]
                self.cursor += 1
            self.latest[node_id] = row
        elif node_id in self.derivative_of:
            row = self.latest.get(self.derivative_of[node_id])
            if row is not None:
                row.derivatives.append(event.result)


class _TracingDifferentiator(Differentiator):
    """A differentiator whose transformed terms are registered with a recorder.  A function
    that differentiates is traced through its written-out program: its rows are the
    operations of that program, those of the inner derivatives included."""

    def __init__(self, interpreter: Interpreter, recorder: _Recorder, strategy: str):
        super().__init__(interpreter, strategy)
        self.recorder = recorder

    def _transformer(self, mode: str) -> Callable[..., Term]:
        transform = super()._transformer(mode)

        def register(term: Term, **options: Any) -> Term:
            transformed = transform(term, **options)
            self.recorder.register(transformed)
            return transformed

        return register


def trace(program: Any, name: str, point: Any, mode: str = "forward",
          strategy: str = "factored") -> Trace:
    """The trace of ``name`` at ``point`` (a runtime value or Python data).

    Raises UsageError for a point that does not fit, and the program's own errors."""
    if mode not in ("forward", "reverse"):
        raise UsageError(f"unknown mode `{mode}`; use forward or reverse")
    f, x, result = program.points.function_and_point(name, point)
    if not is_differentiable(result):
        raise UsageError(f"a trace needs a function returning reals (R, pairs and lists of "
                         f"them); `{name}` returns {print_type(result)}: give it every "
                         "argument")
    if mode == "reverse" and not isinstance(result, (RealT, VarT)):
        raise UsageError(f"a reverse trace needs a function returning R; `{name}` returns "
                         f"{print_type(result)}")
    recorder = _Recorder()
    differentiator = Runtime(
        strategy=strategy, on_event=recorder, max_steps=program.max_steps,
        differentiator=lambda interpreter, strategy: _TracingDifferentiator(
            interpreter, recorder, strategy)).differentiator
    definition = program.decls[name].value
    names = input_names(definition, x, program.points.arguments_covered(name, x),
                        whole_arrays=True, t=program.points.point_type(name, x))
    leaves: list[Any] = []
    map_value(x, is_real, lambda r: leaves.append(r) or r)
    # fresh float and array objects so dependencies on inputs are recognised by identity
    fresh = iter([r * 1.0 for r in leaves])
    x = map_value(x, is_real, lambda _: next(fresh))
    inputs: list[Any] = []
    map_value(x, is_real, lambda r: inputs.append(r) or r)
    for position, value in enumerate(inputs):
        recorder.producers[id(value)] = position - len(inputs) + 1
    recorder.keep.extend(inputs)
    if mode == "forward":
        columns = []
        input_derivatives = []
        output = 0.0
        for i in range(len(inputs)):
            recorder.cursor = 0
            position = iter(range(len(inputs)))
            direction = map_value(x, is_real, lambda r: _unit(r, next(position) == i))
            output, _ = differentiator.jvp(f, x, direction)
            recorder.collect_rows = False
            along = "·1" if type(inputs[i]) is ARRAY else ""  # (all ones in the array)
            columns.append(f"∂/∂{names[i]}{along}")
            input_derivatives.append(tuple(_unit(r, j == i) for j, r in enumerate(inputs)))
        per_input = tuple(tuple(row) for row in zip(*input_derivatives)) if inputs else ()
    else:
        output, gradient = differentiator.grad(f, x)
        flat: list[float] = []
        map_value(gradient, is_real, lambda r: flat.append(r) or r)
        columns = ["adjoint"]
        per_input = tuple((g,) for g in flat)
        for row in recorder.rows:
            if not row.derivatives:
                row.derivatives.append(0.0)
    _assign_levels(recorder.rows)
    rows = sorted(recorder.rows, key=lambda r: (r.level, r.index))
    renumber = {row.index: position + 1 for position, row in enumerate(rows)}
    for row in rows:
        row.parents = tuple(renumber.get(p, p) for p in row.parents)
        row.operands = tuple(None if p is None else renumber.get(p, p) for p in row.operands)
        row.index = renumber[row.index]
    return Trace(mode, tuple(zip(names, inputs)), per_input, tuple(rows), tuple(columns),
                 float(output) if type(output) is float else output, program.file,
                 dict(program.sources))


def _unit(r: Any, one: bool) -> Any:
    """A tangent of the input ``r``: 1 (all ones, for an array) when ``one``, else 0."""
    if type(r) is ARRAY:  # (+ 0.0: no -0 where r is negative)
        return r * 0.0 + (1.0 if one else 0.0)
    return 1.0 if one else 0.0


def _assign_levels(rows: list[Row]) -> None:
    """Each row's level: 1 + the highest level of the rows it reads (inputs are level 0).
    Rows are in evaluation order, so parents come first."""
    level = {}
    for row in rows:
        row.level = 1 + max((level.get(p, 0) for p in row.parents), default=0)
        level[row.index] = row.level


# ------------------------------------------------------------------ rendering


def _source_text(span: Span | None, sources: dict[str, str]) -> str:
    if span is None or not span.line:  # (errors.UNPLACED: no text of its own)
        return ""
    text = sources.get(span.file)
    if text is None:
        return str(span)
    line = source_line(text, span.line) if span.line == span.end_line else None
    if line is not None:
        return printable(abridged(line[span.col - 1:span.end_col - 1], 200))
    return f"{str(span)}"


def format_trace(tr: Trace, sources: dict[str, str] | None = None) -> str:
    """The trace as a text table: inputs as ``v-(n-1) .. v0``, operations as ``v1 ..``."""
    header, table = trace_table(tr, sources)
    widths = [max(len(header[c]), *(len(r[c]) for r in table)) if table else len(header[c])
              for c in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def trace_table(tr: Trace, sources: dict[str, str] | None = None
                ) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the trace's table, as text cells (``sources`` defaults
    to the texts the trace was made from)."""
    sources = tr.sources if sources is None else sources
    n = len(tr.inputs)
    header = ["var", "operation", "source", "value", *tr.columns]
    table: list[list[str]] = []
    for position, (name, value) in enumerate(tr.inputs):
        derivs = tr.input_derivatives[position] if tr.input_derivatives else ()
        table.append([f"v{position - n + 1}", "input", name, _number(value),
                      *(_number(d) for d in derivs)])

    for row in tr.rows:
        args = ", ".join(f"v{p}" for p in row.parents)
        operation = f"{row.symbol} {args}".strip() if args else row.symbol
        location = ""
        if row.span is not None and row.span.line:
            location = f"{row.span.line}:{row.span.col}"
            if row.span.file != tr.file:  # e.g. the prelude's `sum`
                location = f"{row.span.file}:{location}"
        source = _source_text(row.span, sources)
        table.append([f"v{row.index}", operation, f"{source}  ({location})" if location else source,
                      _number(row.value), *(_number(d) for d in row.derivatives)])
    return header, table


def _number(x: Any) -> str:
    """A table's number: a zero is ``0`` whatever its sign (``0 * (0 - 1)`` is ``-0``), a
    sign that only says which way an underflow went; an array by its shape and a summary
    (``Vec[3] [0.5, -0.25, 1]``, ``Mat[30x4] min -2 mean 0.1 max 3``, elements to six
    significant digits)."""
    if type(x) is ARRAY or type(x) is Sparse:
        return array_summary(dense(x) + 0.0, _element)
    return format_real(x + 0.0)


def _element(x: float) -> str:
    """An element of an array in a table: six significant digits (the table shows many)."""
    return format_real(float(f"{x:.6g}"))
