"""Source locations, the error family, and the one place errors are rendered.

Stages raise; only the front ends (CLI, REPL) call :func:`render`.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Span:
    """A region of one source text: 1-based line/column of its first and last characters.

    ``end_col`` is exclusive (the column just after the last character) so that
    ``end_col - col`` is the caret width on a one-line span.
    """

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def merge(self, other: "Span | None") -> "Span":
        """The smallest span covering ``self`` and ``other`` (same file)."""
        if other is None or other.file != self.file:
            return self
        start = min((self.line, self.col), (other.line, other.col))
        end = max((self.end_line, self.end_col), (other.end_line, other.end_col))
        return Span(self.file, start[0], start[1], end[0], end[1])

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@attrs.frozen
class DerivativeSpan(Span):
    """The span of a source primitive application, given to the terms of its derivative
    (the partials of the table, instantiated by the transformations): an error in them is
    reported as an error of the derivative of ``primitive`` (its spelling), at the source."""

    primitive: str = ""

    @classmethod
    def of(cls, span: Span, primitive: str) -> "DerivativeSpan":
        return cls(span.file, span.line, span.col, span.end_line, span.end_col, primitive)


class LambdadError(Exception):
    """Any error a user can cause.  ``kind`` names the family in the rendered message."""

    kind = "error"
    exit_code = 1

    def __init__(self, message: str, span: Span | None = None, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.span = span
        self.notes = tuple(notes)

    def with_span(self, span: Span | None) -> "LambdadError":
        """The same error located at ``span`` if it had no location yet."""
        if self.span is None and span is not None:
            self.span = span
        return self


class ParseError(LambdadError):
    kind = "parse error"


class TypeCheckError(LambdadError):
    kind = "type error"


class EvalError(LambdadError):
    """A runtime error of the program: domain, division by zero, zip lengths, bad range."""

    kind = "runtime error"


class ResourceError(EvalError):
    """The run exceeded a limit the user set (steps, time) or the machine's (memory, depth)."""

    kind = "resource error"


class DifferentiationError(LambdadError):
    """A program that cannot be differentiated as asked (e.g. nested use of grad)."""

    kind = "differentiation error"


class UsageError(LambdadError):
    """Bad flags, a missing file, a point of the wrong shape."""

    kind = "usage error"
    exit_code = 2


class ToolError(LambdadError):
    """An optional outside tool that the request needs is not installed (or failed); the
    message says how to install it."""

    kind = "tool error"
    exit_code = 4


class FileAccessError(UsageError):
    """A file or stream that cannot be read or written: missing, a directory, too large,
    a full disk (exit 2, like a usage error)."""

    kind = "I/O error"


def render(error: LambdadError, sources: dict[str, str] | None = None) -> str:
    """The user-facing text of ``error``: ``file:line:col: kind: message``, source line, caret.

    ``sources`` maps file names to their text; without the text only the first line is given.
    """
    span = error.span
    head = f"{error.kind}: {error.message}"
    if span is None:
        lines = [head]
    else:
        lines = [f"{span}: {head}"]
        text = (sources or {}).get(span.file)
        if text is not None:
            source_lines = text.splitlines() or [""]
            line, col, end_line, end_col = span.line, span.col, span.end_line, span.end_col
            if line > len(source_lines):
                # the end of the input: point just after the last line's text
                line = end_line = len(source_lines)
                col = end_col = len(source_lines[-1].expandtabs(1)) + 1
            if 1 <= line:
                line_text = source_lines[line - 1].expandtabs(1)
                lines.append(f"{line:>5} | {line_text}")
                last = end_col if end_line == line else len(line_text) + 1
                width = max(1, last - col)
                lines.append(f"{'':>5} | {' ' * (col - 1)}{'^' * width}")
    lines.extend(f"  note: {note}" for note in error.notes)
    return "\n".join(lines)
