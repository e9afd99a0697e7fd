"""Documents: text with the places where it may break, laid out to a width (Wadler's
"prettier printer", in Lindig's strict form).

A document is one of

- a ``str`` (or a subclass): text, never broken (no newline in it);
- :data:`LINE`: a space, or a line break when its group does not fit;
- :data:`SOFT`: nothing, or a line break when its group does not fit;
- :data:`HARD`: always a line break (its groups never fit on one line);
- :class:`Nest`: a document whose line breaks indent ``by`` columns more;
- :class:`Group`: a document laid out on one line if it fits, with its own breaks
  (``LINE``, ``SOFT`` outside any inner group) broken otherwise;
- a ``list`` (or ``tuple``) of documents, one after another.

:func:`render` lays a document out: a group is flat when it fits in what is left of its
line up to the next break that is not its own (the text after it counts, so a closing
``)`` or `` in`` does not spill over the width; a group after it counts up to its first
break); inner groups are decided again.  The width of every group on one line is measured
first, in one pass, so a fit costs the text that follows the group up to a break, not the
group again (and never more than the width of it).  Measure, layout and fit are loops
over explicit stacks, so documents nested 10^4 deep lay out too.
"""

from __future__ import annotations

__all__ = ["Break", "LINE", "SOFT", "HARD", "Nest", "Group", "render"]


class Break:
    """A place to break a line: ``flat`` is its text when its group stays on one line;
    ``hard``: it always breaks."""

    __slots__ = ("flat", "hard")

    def __init__(self, flat: str, hard: bool = False):
        self.flat = flat
        self.hard = hard

    def __repr__(self) -> str:
        return "HARD" if self.hard else "LINE" if self.flat else "SOFT"


LINE = Break(" ")
SOFT = Break("")
HARD = Break("", hard=True)


class Nest:
    """``doc`` with its line breaks indented ``by`` more columns."""

    __slots__ = ("by", "doc")

    def __init__(self, by: int, doc):
        self.by = by
        self.doc = doc


class Group:
    """``doc`` on one line if it fits, else with its own breaks broken.  ``width`` is its
    width on one line, once :func:`render` has measured it."""

    __slots__ = ("doc", "width")

    def __init__(self, doc):
        self.doc = doc
        self.width: int | None = None


# The width a hard break counts for: no group holding one fits.
_HARD_WIDTH = 1 << 40


# On the stack of _measure: the group below it ends here.
_CLOSE = object()


def _measure(doc) -> None:
    """Sets the ``width`` of every group in ``doc``: one pass, keeping the column the text
    so far would reach on one line; a group's width is the column at its end less the
    column at its start."""
    column = 0
    starts: list[int] = []  # the columns at which the groups open at this point start
    todo = [doc]
    while todo:
        current = todo.pop()
        kind = type(current)
        if kind is str:
            column += len(current)
        elif kind is list or kind is tuple:
            todo.extend(reversed(current))
        elif kind is Nest:
            todo.append(current.doc)
        elif kind is Group:
            starts.append(column)
            todo.extend((current, _CLOSE, current.doc))
        elif current is _CLOSE:
            todo.pop().width = column - starts.pop()
        elif kind is Break:
            column += _HARD_WIDTH if current.hard else len(current.flat)
        elif isinstance(current, str):
            column += len(current)
        else:
            raise TypeError(f"not a document: {current!r}")


class _Restore:
    """On the layout stack: the indentation and mode to go back to (the end of a nest, or
    of a group laid out flat)."""

    __slots__ = ("indent", "flat")

    def __init__(self, indent: int, flat: bool):
        self.indent = indent
        self.flat = flat


def render(doc, width: int, max_indent: int | None = None) -> str:
    """The text of ``doc`` laid out in ``width`` columns (exceeded only by text that cannot
    break).  Indentation stops growing at ``max_indent`` columns, which keeps the text of a
    document nested deeper than any reader would nest linear in its size."""
    limit = width if max_indent is None else max_indent
    out: list[str] = []
    column = indent = 0
    flat = False
    _measure(doc)
    # Work stack of the documents to lay out (the next on top) and of _Restore marks.
    stack: list = [doc]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is str:
            out.append(current)
            column += len(current)
        elif kind is list or kind is tuple:
            stack.extend(reversed(current))
        elif kind is Nest:
            if current.by:
                stack.append(_Restore(indent, flat))
                indent = min(indent + current.by, limit)
            stack.append(current.doc)
        elif kind is Break:
            if flat and not current.hard:
                out.append(current.flat)
                column += len(current.flat)
            else:
                out.append("\n" + " " * indent)
                column = indent
        elif kind is Group:
            if not flat and _fits(width - column - current.width, stack):
                stack.append(_Restore(indent, False))
                flat = True
            stack.append(current.doc)
        elif kind is _Restore:
            indent, flat = current.indent, current.flat
        elif isinstance(current, str):  # a subclass (a parser's token)
            stack.append(str(current))
        else:
            raise TypeError(f"not a document: {current!r}")
    return "".join(out)


def _fits(room: int, rest: list) -> bool:
    """Whether what follows a group laid out flat with ``room`` columns left after it
    (``rest``, the layout stack, in break mode up to its first mark of flat mode) fits in
    that room up to its next line break.  A group not yet decided is taken broken: it fits
    when its text up to its first break does (if it turns out flat, its own fit checks what
    follows it)."""
    flat = False
    below = len(rest)
    while room >= 0:
        if not below:
            return True
        below -= 1
        current = rest[below]
        if type(current) is _Restore:
            flat = current.flat
            continue
        room, ended = _scan(room, current, flat)
        if ended:
            return True
    return False


def _scan(room: int, doc, flat: bool) -> tuple[int, bool]:
    """The room left after ``doc`` in mode ``flat`` (negative: it overflowed), and whether
    it ended its line first (a hard break, or in break mode any break)."""
    todo = [doc]
    while todo:
        current = todo.pop()
        kind = type(current)
        if kind is str:
            room -= len(current)
            if room < 0:
                return room, False
        elif kind is list or kind is tuple:
            todo.extend(reversed(current))
        elif kind is Group and flat:
            room -= current.width
            if room < 0:
                return room, False
        elif kind is Nest or kind is Group:
            todo.append(current.doc)
        elif kind is Break:
            if current.hard or not flat:
                return room, True
            room -= len(current.flat)
            if room < 0:
                return room, False
        elif isinstance(current, str):
            todo.append(str(current))
        else:
            raise TypeError(f"not a document: {current!r}")
    return room, False
