"""Results of :class:`lambdad.pipeline.Program` as a user reads them: values in the language's
syntax, JSON-ready data, and the tables of ``hessian`` and ``jacobian`` (the CLI's, the REPL's
and the notebook's).
"""

from __future__ import annotations

from typing import Any

import attrs

from .calling import from_python
from .reals import leaves
from .values import format_real, format_value, to_json


def format_python(value: Any) -> str:
    """Python data (a result of :class:`Program`) written in the language's syntax."""
    return format_result(value)


@attrs.frozen
class Jacobian:
    """A Jacobian and how it was computed.  ``jacobian`` has the shape of ``value`` with
    each real replaced by that output's gradient (in the shape of the point); ``matrix`` is
    the same numbers as rows (one per output real) of columns (one per input real), named
    by ``outputs`` and ``inputs``."""

    value: Any
    jacobian: Any
    matrix: list[list[float]]
    mode: str
    inputs: list[str]
    outputs: list[str]


def _reals_of(value: Any) -> list[float]:
    """The reals of a runtime value, left to right (each element of an array, row by
    row)."""
    return leaves(value)


def format_jacobian(result: Jacobian, chosen: bool) -> str:
    """The text ``lambdad jacobian`` and the REPL's ``:jacobian`` print: the value, then the
    matrix with its outputs and inputs named (``chosen``: the mode was the cheaper one,
    not asked for)."""
    inputs, outputs = len(result.inputs), len(result.outputs)
    lines = [f"value: {format_result(result.value)}",
             f"jacobian ({outputs} output{'s' * (outputs != 1)} x {inputs} input"
             f"{'s' * (inputs != 1)}, {result.mode} mode"
             f"{', the cheaper for these sizes' if chosen else ''}):"]
    cells = [[""] + result.inputs] + [
        [name] + [format_real(r) for r in row] for name, row in zip(result.outputs, result.matrix)]
    widths = [max(len(row[i]) for row in cells) for i in range(inputs + 1)]
    for row in cells:
        lines.append("  " + "  ".join(c.rjust(w) if i else c.ljust(w)
                                      for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines)


def format_hessian(value: Any, gradient: Any, rows: list[Any], names: list[str],
                   mode: str) -> str:
    """The text ``lambdad hessian`` and the REPL's ``:hessian`` print: value, gradient and
    a row per input real, named by ``names``."""
    width = max((len(n) for n in names), default=0)
    return "\n".join([
        f"value: {format_result(value)}", f"gradient: {format_result(gradient)}",
        f"hessian ({mode}), row i the gradient of the derivative along input i:",
        *(f"  {name.ljust(width)} : {format_result(row)}" for name, row in zip(names, rows))])


def format_result(value: Any) -> str:
    """Python data (a result of :class:`Program`) written in the language's syntax."""
    return format_value(from_python(value, finite=False, nested=False))


def json_result(value: Any) -> Any:
    """Python data (a result of :class:`Program`) as JSON-ready data (non-finite reals as
    the strings ``"nan"``, ``"inf"``, ``"-inf"``)."""
    return to_json(from_python(value, finite=False, nested=False))
