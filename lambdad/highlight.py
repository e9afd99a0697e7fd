"""Syntax highlighting of lambdad source: a Pygments lexer and the three ways it is used.

The lexer (``LambdadLexer``, registered with Pygments as ``lambdad``/``lam`` for ``*.lam``
files through the ``pygments.lexers`` entry point) follows the lexical structure of
LANGUAGE.md section 2 and ``grammar.lark``: ``--`` comments, keywords that are not prefixes
of longer names, numbers, the operators (ASCII and Unicode spellings), the built-ins of the
primitive table and the target language's linear constructs.

:func:`for_terminal` colours text only for a terminal (never a pipe or a file, and never
when ``NO_COLOR`` is set or ``TERM=dumb``); :func:`to_html` gives self-contained HTML (inline
styles, so it needs no style sheet) for notebooks and pages.
"""

from __future__ import annotations

import os
import re
from typing import TextIO

from pygments import highlight
from pygments.formatters import HtmlFormatter, TerminalFormatter
from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
)

from .primitives import LINEAR_NAMES, NAMED

_IDENT_END = r"(?![A-Za-z0-9_'])"
KEYWORDS = ("def", "let", "in", "if", "then", "else", "primitive", "partial")  # LANGUAGE.md §2
CONSTANTS = ("true", "false")
TYPE_NAMES = ("R", "Bool", "ℝ")


class LambdadLexer(RegexLexer):
    """Pygments lexer for lambdad programs (``.lam``)."""

    name = "lambdad"
    aliases = ["lambdad", "lam"]
    filenames = ["*.lam"]
    mimetypes = ["text/x-lambdad"]

    tokens = {
        "root": [
            (r"[ \t\r\n\f]+", Text),
            (r"--[^\n]*", Comment.Single),
            (r"(def)(\s+)([A-Za-z_][A-Za-z0-9_']*)", bygroups(Keyword, Text, Name.Function)),
            (r'(import)(\s+)("[^"\n]*")', bygroups(Keyword.Namespace, Text, String)),
            (words(KEYWORDS, suffix=_IDENT_END), Keyword),
            (words(CONSTANTS, suffix=_IDENT_END), Keyword.Constant),
            (words(TYPE_NAMES, suffix=_IDENT_END), Keyword.Type),
            (words(sorted(NAMED) + list(LINEAR_NAMES), suffix=_IDENT_END), Name.Builtin),
            (r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", Number.Float),
            (r"[A-Za-z_][A-Za-z0-9_']*", Name),
            (r"-o" + _IDENT_END + r"|->|<\+>|\+\+|!!|\|\||&&|==|!=|<=|>=|[\\λ→⊸×⊕<>+\-*/^=]",
             Operator),
            (r"[(),:\[\]]", Punctuation),
            (r".", Text),
        ],
    }


_LEXER = LambdadLexer()
_HTML = HtmlFormatter(noclasses=True, nowrap=True, style="default")
_TERMINAL = TerminalFormatter()


def wants_color(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal that should get colours (not a pipe or a file,
    ``NO_COLOR`` unset, ``TERM`` not ``dumb``)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def ansi(text: str) -> str:
    """``text`` with ANSI colour codes; the same text once they are removed."""
    coloured = highlight(text, _LEXER, _TERMINAL)
    # Pygments ends the output with a newline; keep the text's own ending.
    if not text.endswith("\n") and coloured.endswith("\n"):
        coloured = coloured[:-1]
    return coloured


def for_terminal(text: str, stream: TextIO) -> str:
    """``text`` coloured if ``stream`` is a terminal that wants colours, else unchanged."""
    return ansi(text) if wants_color(stream) else text


def to_html(text: str) -> str:
    """``text`` as a highlighted ``<pre>`` block with inline styles."""
    body = highlight(text, _LEXER, _HTML)
    return ('<pre class="lambdad" style="line-height:125%; margin:0; font-family:monospace">'
            f"{body.rstrip(chr(10))}</pre>")


_ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI colour codes."""
    return _ANSI_CODE.sub("", text)
