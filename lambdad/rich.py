"""Rich output for notebooks: results that show as HTML (tables, highlighted programs) in
Jupyter and as plain text in a terminal.

IPython asks an object for ``_repr_html_`` (and ``_repr_svg_``) to draw it and for
``_repr_pretty_`` for its text form; the objects here answer both, so the same result reads
well in a notebook, in a terminal IPython and in ``print``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from . import highlight

# A notebook's stylesheet may set the font of tables and preformatted text to its own
# (proportional) one: reports and tables name a monospace font themselves, so that their
# columns line up.
MONOSPACE = "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace"
_TABLE_STYLE = (f"border-collapse:collapse; font-family:{MONOSPACE}; font-size:12px; "
                "margin:4px 0")
_PRE_STYLE = (f"margin:0; font-family:{MONOSPACE}; font-size:12px; white-space:pre; "
              "text-align:left; overflow-x:auto")
_CELL_STYLE = "border:1px solid #ccc; padding:2px 8px; text-align:left"
_NUMBER_STYLE = "border:1px solid #ccc; padding:2px 8px; text-align:right"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "",
               numeric_from: int | None = None) -> str:
    """A self-contained HTML table (inline styles) of text cells; columns from
    ``numeric_from`` on are right-aligned."""

    def cell(tag: str, text: str, column: int) -> str:
        numeric = numeric_from is not None and column >= numeric_from
        style = _NUMBER_STYLE if numeric and tag == "td" else _CELL_STYLE
        return f'<{tag} style="{style}">{html.escape(text)}</{tag}>'

    out = [f'<table class="lambdad-table" style="{_TABLE_STYLE}">']
    if caption:
        out.append(f'<caption style="text-align:left; font-weight:bold">'
                   f"{html.escape(caption)}</caption>")
    out.append("<thead><tr>" + "".join(cell("th", h, i) for i, h in enumerate(header))
               + "</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(cell("td", c, i) for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


class Source:
    """lambdad source text: highlighted in a notebook, plain in a terminal."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Source) and other.text == self.text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)

    def _repr_html_(self) -> str:
        return highlight.to_html(self.text)


class Lines:
    """Labelled results (``value: ...``, ``gradient: ...``): an HTML table of two columns in
    a notebook, ``label: text`` lines in a terminal.  The texts are lambdad syntax."""

    def __init__(self, rows: Sequence[tuple[str, str]]):
        self.rows = tuple(rows)

    def __str__(self) -> str:
        return "\n".join(f"{label}: {text}" for label, text in self.rows)

    __repr__ = __str__

    def __getitem__(self, label: str) -> str:
        return dict(self.rows)[label]

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        out = [f'<table class="lambdad-result" style="{_TABLE_STYLE}">']
        for label, text in self.rows:
            out.append(f'<tr><th style="{_CELL_STYLE}">{html.escape(label)}</th>'
                       f'<td style="{_CELL_STYLE}">{highlight.to_html(text)}</td></tr>')
        out.append("</table>")
        return "\n".join(out)


class Report:
    """A text report (gradient check): preformatted in a notebook, with its verdict
    coloured; plain in a terminal."""

    def __init__(self, text: str, ok: bool):
        self.text = text
        self.ok = ok

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.ok else "#cf222e"
        verdict = "agree" if self.ok else "disagree or were not all checked"
        return (f'<div class="lambdad-report"><div style="color:{colour}; font-weight:bold">'
                f"derivatives {verdict}</div>"
                f'<pre style="{_PRE_STYLE}">{html.escape(self.text)}</pre></div>')


class Matrix:
    """Labelled results followed by a matrix with named rows and columns (a Hessian): HTML
    tables in a notebook, ``label: text`` lines and one line per row in a terminal."""

    def __init__(self, rows: Sequence[tuple[str, str]], title: str, names: Sequence[str],
                 cells: Sequence[Sequence[str]], shaped: Sequence[str]):
        self.lines = Lines(rows)
        self.title = title
        self.names = tuple(names)
        self.cells = tuple(tuple(row) for row in cells)
        self.shaped = tuple(shaped)  # each row in the point's shape, for the text form

    def __str__(self) -> str:
        width = max((len(n) for n in self.names), default=0)
        return "\n".join([str(self.lines), f"{self.title}:",
                          *(f"  {n.ljust(width)} : {row}" for n, row in zip(self.names, self.shaped))])

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        table = html_table(["", *self.names],
                           [[name, *row] for name, row in zip(self.names, self.cells)],
                           caption=self.title, numeric_from=1)
        return self.lines._repr_html_() + "\n" + table
