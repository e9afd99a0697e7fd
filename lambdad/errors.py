"""Source locations, the error family, and the one place errors are rendered.

Stages raise; only the front ends (CLI, REPL) call :func:`render`.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import attrs


def direct_init(cls: type) -> Callable[..., None]:
    """An ``__init__`` for the frozen attrs class ``cls`` with the signature and effect of
    the one attrs wrote, storing each field through its slot directly (the class must be
    slotted).

    attrs' own goes through ``object.__setattr__`` by field name (the class's ``__setattr__``
    refuses): about twice the cost, and the parser and every transformation build a node (and a
    span) per construct of a program.  Fields have no validators or converters (checked here).
    """
    fields = attrs.fields(cls)
    namespace: dict[str, Any] = {}
    positional, keyword, body = [], [], []
    for field in fields:
        assert field.validator is None and field.converter is None \
            and not isinstance(field.default, attrs.Factory) and field.alias == field.name, \
            f"{cls.__name__}.{field.name} needs attrs' own __init__"
        slot = next(klass.__dict__[field.name] for klass in cls.__mro__
                    if field.name in klass.__dict__)
        assert isinstance(slot, types.MemberDescriptorType), f"{cls.__name__} is not slotted"
        namespace[f"_set_{field.name}"] = slot.__set__
        parameter = field.name
        if field.default is not attrs.NOTHING:
            namespace[f"_default_{field.name}"] = field.default
            parameter += f"=_default_{field.name}"
        (keyword if field.kw_only else positional).append(parameter)
        body.append(f"    _set_{field.name}(self, {field.name})")
    parameters = ["self", *positional] + (["*", *keyword] if keyword else [])
    source = f"def __init__({', '.join(parameters)}):\n" + ("\n".join(body) or "    pass")
    exec(source, namespace)  # noqa: S102 - built from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


@attrs.frozen(weakref_slot=False)
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


Span.__init__ = direct_init(Span)  # type: ignore[method-assign]  # one per syntax node

# The span of terms that stand for no text of their own (a built-in passed as a value and
# differentiated, `grad sqrt 0`): their derivative's terms are still marked as such (a
# DerivativeSpan), but an error there has no location of its own and takes the one of the
# run it happens in.
UNPLACED = Span("", 0, 0, 0, 0)


@attrs.frozen(weakref_slot=False)
class DerivativeSpan(Span):
    """The span of a source primitive application, given to the terms of its derivative
    (the partials of the table, instantiated by the transformations): an error in them is
    reported as an error of the derivative of ``primitive`` (its spelling), at the source."""

    primitive: str = ""
    # The variables holding the source primitive's arguments where its derivative is
    # computed, so that an error can say at which values (not part of the location).
    arguments: tuple[str, ...] = attrs.field(default=(), eq=False)
    # The variable holding the primitive's value, when its derivative uses it.
    value: str | None = attrs.field(default=None, eq=False)

    @classmethod
    def of(cls, span: Span, primitive: str, arguments: tuple[str, ...] = (),
           value: str | None = None) -> "DerivativeSpan":
        return cls(span.file, span.line, span.col, span.end_line, span.end_col, primitive,
                   tuple(arguments), value)


# (one per primitive application differentiated, on every derivative's terms)
DerivativeSpan.__init__ = direct_init(DerivativeSpan)  # type: ignore[method-assign]


class LambdadError(Exception):
    """Any error a user can cause.  ``kind`` names the family in the rendered message."""

    kind = "error"
    exit_code = 1

    def __init__(self, message: str, span: Span | None = None, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.span = span if span is None or span.line else None  # (UNPLACED: no location)
        self.notes = tuple(notes)

    def with_span(self, span: Span | None) -> "LambdadError":
        """The same error located at ``span`` if it had no location yet."""
        if self.span is None and span is not None and span.line:  # (not UNPLACED)
            self.span = span
        return self


class ParseError(LambdadError):
    kind = "parse error"


class ModuleError(LambdadError):
    """An import that cannot be followed: a file that cannot be read, or a cycle of imports;
    located at the ``import``."""

    kind = "import error"


class TypeCheckError(LambdadError):
    kind = "type error"


class EvalError(LambdadError):
    """A runtime error of the program: domain, division by zero, zip lengths, bad range."""

    kind = "runtime error"


class DomainError(EvalError):
    """A primitive applied outside its domain (``log`` of -1, ``sqrt`` of a negative
    number, an index out of range); raised by the primitive's implementation without a
    location, which the interpreter adds (the application in the source)."""


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


class ShadowWarning(LambdadError):
    """Never raised: a remark on a program that loads, located and rendered as errors are
    (``file:line:col: warning: ...``): a definition of a built-in's or the prelude's name
    in a program that also uses the name's other meaning (see ``Program.warnings``)."""

    kind = "warning"
    exit_code = 0


class ToolError(LambdadError):
    """An optional outside tool that the request needs is not installed (or failed); the
    message says how to install it."""

    kind = "tool error"
    exit_code = 4


class FileAccessError(UsageError):
    """A file or stream that cannot be read or written: missing, a directory, too large,
    a full disk (exit 2, like a usage error)."""

    kind = "I/O error"


# What a message may not contain raw: C0 controls and DEL become their Unicode control
# pictures (ESC shows as ␛), C1 controls, bidirectional overrides and the line and
# paragraph separators become U+FFFD.  One character for one, so carets stay aligned.
_VISIBLE = types.MappingProxyType({
    **{code: 0x2400 + code for code in range(0x20)},
    0x7F: 0x2421,
    **{code: 0xFFFD for code in range(0x80, 0xA0)},
    **{code: 0xFFFD for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E,
                                0x200F, 0x061C, 0x2028, 0x2029, 0x85)},
})
# The longest message and source excerpt shown; past them the text is cut, saying so.
MAX_MESSAGE_CHARS = 1000
MAX_SOURCE_COLUMNS = 160


def printable(text: str) -> str:
    """``text`` safe to print on a terminal or in a document: every control character,
    bidirectional override and line separator replaced by one visible character (a tab by
    a space), so that a file cannot clear the screen or forge lines of a message."""
    return text.replace("\t", " ").translate(_VISIBLE)


def abridged(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to about ``limit`` characters, saying how many were left out: its start
    and its end are kept (where a message's notes and conclusions are)."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]} … ({len(text) - head - tail} more characters) … {text[-tail:]}"


def source_line(text: str, number: int) -> str | None:
    """Line ``number`` (1-based) of ``text``, or None past the end.  A line ends at ``\n``
    only, as the parser counts lines (not at ``\r``, ``\f``, ``\v`` or U+2028)."""
    if number < 1:
        return None
    parts = text.split("\n", number)
    return parts[number - 1] if number <= len(parts) else None


def render(error: LambdadError, sources: dict[str, str] | None = None) -> str:
    """The user-facing text of ``error``: ``file:line:col: kind: message``, source line, caret.

    ``sources`` maps file names to their text; without the text only the first line is given.
    Control characters are shown as visible characters and long messages and lines are cut
    (:func:`printable`, :func:`abridged`), so a message is safe to print and bounded in size.
    """
    span = error.span
    head = printable(abridged(f"{error.kind}: {error.message}"))
    if span is None:
        lines = [head]
    else:
        lines = [f"{printable(abridged(str(span), 300))}: {head}"]
        text = (sources or {}).get(span.file)
        if text is not None:
            count = text.count("\n") + 1
            line, col, end_line, end_col = span.line, span.col, span.end_line, span.end_col
            if line > count:
                # the end of the input: point just after the last line's text
                line = end_line = count
                col = end_col = len(source_line(text, count) or "") + 1
            line_text = source_line(text, line) if line >= 1 else None
            if line_text is not None:
                last = end_col if end_line == line else len(line_text) + 1
                lines.extend(_excerpt(line, printable(line_text), col, max(col + 1, last)))
    lines.extend(f"  note: {printable(abridged(note))}" for note in error.notes)
    return "\n".join(lines)


def _excerpt(number: int, line_text: str, col: int, end_col: int) -> list[str]:
    """The source line ``number`` and a caret under columns ``col`` to ``end_col`` (exclusive),
    cut to a window of MAX_SOURCE_COLUMNS around the caret when the line is longer."""
    start, prefix, suffix = 0, "", ""
    if len(line_text) > MAX_SOURCE_COLUMNS:
        start = max(0, min(col - 1 - MAX_SOURCE_COLUMNS // 4, len(line_text) - MAX_SOURCE_COLUMNS))
        prefix = "…" if start > 0 else ""
        suffix = "…" if start + MAX_SOURCE_COLUMNS < len(line_text) else ""
        line_text = line_text[start:start + MAX_SOURCE_COLUMNS]
    caret_start = len(prefix) + col - 1 - start
    width = max(1, min(end_col - col, len(prefix) + len(line_text) + 1 - caret_start))
    return [f"{number:>5} | {prefix}{line_text}{suffix}",
            f"{'':>5} | {' ' * caret_start}{'^' * width}"]
