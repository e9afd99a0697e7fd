"""Stage 1 of parsing: reading text into a concrete tree, and saying what is wrong when it cannot.

lark's LALR(1) parser reads ``grammar.lark`` and calls the callbacks of :class:`_Concrete` on
every reduction (no parse tree is built, and nothing recurses on the nesting depth).  A correct
text is parsed by :class:`lambdad.lalr.Driver`, a faster loop over lark's tables, once its
self-check has passed; lark parses otherwise.  They build a light *concrete tree* of
:class:`_Surface` nodes that still has parentheses, multi-parameter lambdas, patterns and
operators as written; :mod:`lambdad.desugar` turns it into core terms.

A syntax error becomes a :class:`~lambdad.errors.ParseError` in the user's words (what was
expected, habits from other languages) located at the culprit; no lark exception escapes.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import os
import re
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import lark
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .errors import ParseError, Span
from .lalr import Driver, Refused, checked_driver, verdict_file
from .primitives import LINEAR_NAMES, NAMED
from .syntax import (BOOL, COTANGENT, MAT, REAL, VEC, CotangentT, FunT, ListT, Type,
                     VarT, tuple_type)

_ARRAY_TYPES = {"Vec": VEC, "Mat": MAT}


# Names that mean something without a binding: a local binding shadows them, and so does a
# top-level definition, in the definitions after it.
BUILTIN_NAMES = frozenset(NAMED) | frozenset(LINEAR_NAMES)

# The wildcard parameter: binds nothing.
WILDCARD = "_"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
# What the lexer refused at a digit: the number with whatever is glued to it.
_MALFORMED_NUMBER = re.compile(r"[0-9][A-Za-z0-9_.']*(?:(?<=[eE])[+-][A-Za-z0-9_.']*)?")

# Where a piece of the text lies: the offsets of its first character and just after its last.
# Spans (line and column) are made from them only for the nodes that keep one.
Position = tuple[int, int]
# Where it lies in lines and columns: line, col, end_line, end_col (exclusive), 1-based.
Place = tuple[int, int, int, int]


# --------------------------------------------------------------------------- stage 1


class _Token(tuple):
    """A token of the text: its terminal's name ``kind``, its ``text`` and its extent.

    A tuple (made in C, without a Python ``__init__``): the driver makes one per token.
    """

    __slots__ = ()

    kind = property(operator.itemgetter(0))
    text = property(operator.itemgetter(1))
    start = property(operator.itemgetter(2))
    end = property(operator.itemgetter(3))

    def __str__(self) -> str:
        return self[1]


def _token(kind: str, text: str, start: int, end: int) -> _Token:
    return tuple.__new__(_Token, (kind, text, start, end))


class _Surface:
    """A node of the concrete tree: ``kind`` is the grammar alias that built it, ``parts`` its
    sub-trees, tokens and types, ``start`` and ``end`` its extent in the text."""

    __slots__ = ("kind", "start", "end", "parts")

    def __init__(self, kind: str, start: int, end: int, parts: tuple):
        self.kind = kind
        self.start = start
        self.end = end
        self.parts = parts


# The kinds of concrete nodes (:class:`_Concrete` names them) that stand for terms.  A name
# is its NAME token itself (of kind "NAME").
_SURFACE_KINDS = frozenset({
    "let", "abstraction", "linear_abstraction", "conditional", "oplus", "disjunction",
    "conjunction", "binary", "negation", "application", "number", "boolean", "parens",
    "annotation", "tuple", "list", "section"})


class _Located(Exception):
    """An error found by a parser callback, which knows offsets but not the file name."""

    def __init__(self, message: str, pos: Position):
        super().__init__(message)
        self.message = message
        self.pos = pos


def _pos(item: _Token | _Surface) -> Position:
    return (item.start, item.end)


def _extent(first: _Token | _Surface, last: _Token | _Surface) -> Position:
    """The position from the start of ``first`` to the end of ``last``."""
    return (first.start, last.end)


def _is_token(item: Any, *kinds: str) -> bool:
    return item.__class__ is _Token and item[0] in kinds


def _split_signature(items: list) -> tuple[list, Type | None]:
    """The parameters and the optional result type in ``param* [: type]``."""
    if len(items) >= 2 and _is_token(items[-2], "COLON"):
        return items[:-2], items[-1]
    return items, None


class _Lines:
    """Line and column of the offsets of one text (1-based; a column counts characters)."""

    def __init__(self, text: str):
        # The offset at which each line starts, then one past the end of the text: every
        # line, the last too, ends before the start of the next.
        self.starts = [0]
        self.starts.extend(match.end() for match in _NEWLINE.finditer(text))
        self.starts.append(len(text) + 1)

    def place(self, pos: Position) -> Place:
        """``(line, col, end_line, end_col)`` of ``pos``, ``end_col`` exclusive."""
        start, end = pos
        starts = self.starts
        line = bisect_right(starts, start)
        end_line = bisect_right(starts, end)
        return (line, start - starts[line - 1] + 1, end_line, end - starts[end_line - 1] + 1)


_NEWLINE = re.compile("\n")


_TERMINAL_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _from_lark_token(token: lark.Token) -> _Token:
    return _token(token.type, str(token), token.start_pos, token.end_pos)


def _passes_its_child(callback: Callable[[Any, list], Any]) -> Callable[[Any, list], Any]:
    """Marks a callback of a one-child rule that returns that child unchanged: the fast
    driver does not call it, as it does not call lark's one-child ``?rule`` reductions."""
    callback.passes_its_child = True  # type: ignore[attr-defined]
    return callback


class _Concrete(lark.Transformer):
    """Callbacks of the LALR parser, one per grammar alias: they build :class:`_Surface` nodes
    (and, for types, the core types directly: types carry no spans)."""

    def __getattr__(self, name: str) -> Any:
        # lark calls a transformer's method named after a terminal on each token it shifts:
        # every terminal's tokens become :class:`_Token`, as the fast driver makes them.
        if _TERMINAL_NAME.fullmatch(name):
            return _from_lark_token
        raise AttributeError(name)

    # ---- entry points
    def module(self, items):
        return items

    def repl_entry(self, items):
        return items[0]

    def expr_entry(self, items):
        return items[0]

    def type_entry(self, items):
        return items[0]

    # ---- declarations
    def import_decl(self, items):
        """``import "FILE"``: the file's name without its quotes is the node's part."""
        path = items[1].text[1:-1]
        if not path.strip():
            raise _Located('an import names a file: `import "lib/stats.lam"`', _pos(items[1]))
        return _Surface("import", items[0].start, items[1].end, (path, items[1]))

    def decl(self, items):
        """``def NAME param* [: type] = expr``."""
        params, result = _split_signature(items[2:-2])
        return _Surface("decl", items[0].start, items[-1].end, (items[1], params, result, items[-1]))

    def primitive_decl(self, items):
        """``primitive NAME param+ [: type] = expr partial+``."""
        partials = [item for item in items if isinstance(item, _Surface) and item.kind == "partial"]
        head = items[:len(items) - len(partials)]
        params, result = _split_signature(head[2:-2])
        return _Surface("primitive_decl", items[0].start, items[-1].end,
                        (head[1], params, result, head[-1], partials))

    def partial(self, items):
        """``partial NAME = expr``."""
        return _Surface("partial", items[0].start, items[-1].end, (items[1], items[3]))

    def binding(self, items):
        """``NAME [: type] = expr`` at the REPL: a declaration without parameters."""
        _, result = _split_signature(items[1:-2])
        return _Surface("decl", items[0].start, items[-1].end, (items[0], [], result, items[-1]))

    def let_definition(self, items):
        """``let NAME param* [: type] = expr`` at the REPL, without ``in``: a declaration."""
        bind = items[1]
        if bind.kind != "bind_name":
            raise _Located("at the prompt `let` defines one name (`let x = e`); a pattern "
                           "needs `in`: `let (a, b) = e in ...`", _pos(bind))
        return _Surface("decl", items[0].start, bind.end, bind.parts)

    def typed_param(self, items):
        """``(NAME : type)``."""
        return _Surface("typed_param", items[0].start, items[-1].end, (items[1], items[3]))

    def pattern(self, items):
        """``(pat, pat, ...)``; the components are NAME tokens or patterns."""
        parts = tuple(item for item in items if not _is_token(item, "LPAR", "COMMA", "RPAR"))
        return _Surface("pattern", items[0].start, items[-1].end, parts)

    # ---- expressions
    def let(self, items):
        """``let bind in expr``."""
        return _Surface("let", items[0].start, items[-1].end, (items[1], items[3]))

    def bind_name(self, items):
        """``NAME param* [: type] = expr``."""
        params, result = _split_signature(items[1:-2])
        return _Surface("bind_name", items[0].start, items[-1].end,
                        (items[0], params, result, items[-1]))

    def bind_pattern(self, items):
        """``pattern = expr``."""
        return _Surface("bind_pattern", items[0].start, items[-1].end, (items[0], items[2]))

    def abstraction(self, items):
        """``\\ param+ -> expr``."""
        return _Surface("abstraction", items[0].start, items[-1].end, (items[1:-2], items[-1]))

    def linear_abstraction(self, items):
        """``\\a -o expr``."""
        return _Surface("linear_abstraction", items[0].start, items[-1].end, (items[1], items[3]))

    def conditional(self, items):
        """``if expr then expr else expr``."""
        return _Surface("conditional", items[0].start, items[-1].end, (items[1], items[3], items[5]))

    def oplus(self, items):
        """``e1 <+> e2``."""
        return _Surface("oplus", items[0].start, items[-1].end, (items[0], items[2]))

    def disjunction(self, items):
        """``e1 || e2``."""
        return _Surface("disjunction", items[0].start, items[-1].end, (items[0], items[2]))

    def conjunction(self, items):
        """``e1 && e2``."""
        return _Surface("conjunction", items[0].start, items[-1].end, (items[0], items[2]))

    def binary(self, items):
        """``e1 op e2`` for the infix operators of the primitive table."""
        return _Surface("binary", items[0].start, items[-1].end, (items[1], items[0], items[2]))

    def negation(self, items):
        """``-e``."""
        return _Surface("negation", items[0].start, items[-1].end, (items[0], items[1]))

    def application(self, items):
        """``f a``."""
        return _Surface("application", items[0].start, items[-1].end, (items[0], items[1]))

    def number(self, items):
        """``2``, ``0.5``, ``1e-3``: a real."""
        token = items[0]
        value = float(token.text)
        if value == float("inf"):
            raise _Located(f"number `{token}` is too large", _pos(token))
        return _Surface("number", token.start, token.end, (value,))

    def true(self, items):
        return _Surface("boolean", items[0].start, items[0].end, (True,))

    def false(self, items):
        return _Surface("boolean", items[0].start, items[0].end, (False,))

    @_passes_its_child
    def name(self, items):
        """A name: its NAME token is the concrete node (the most frequent reduction)."""
        return items[0]

    def parens(self, items):
        """``(expr)``: kept, because parentheses end an application spine."""
        return _Surface("parens", items[0].start, items[-1].end, (items[1],))

    def annotation(self, items):
        """``(expr : type)``."""
        return _Surface("annotation", items[0].start, items[-1].end, (items[1], items[3]))

    def tuple(self, items):
        """``(e1, e2, ...)``."""
        parts = tuple(items[1:-1:2])
        return _Surface("tuple", items[0].start, items[-1].end, parts)

    def list(self, items):
        """``[e1, ..., en]``."""
        parts = tuple(items[1:-1:2])
        return _Surface("list", items[0].start, items[-1].end, parts)

    def operator_section(self, items):
        """``(op)``: the operator as a function of two arguments."""
        return _Surface("section", items[0].start, items[-1].end, (items[1], None, None))

    def left_section(self, items):
        """``(e op)``: the operator with its left operand given."""
        return _Surface("section", items[0].start, items[-1].end, (items[2], items[1], None))

    def right_section(self, items):
        """``(op e)``: the operator with its right operand given."""
        return _Surface("section", items[0].start, items[-1].end, (items[1], None, items[2]))

    @_passes_its_child
    def section_op(self, items):
        """The operator of ``(op)``: its token."""
        return items[0]

    # ---- types
    def function_type(self, items):
        """``A -> B`` and ``A -o B``."""
        return FunT(items[0], items[2])

    def tuple_type(self, items):
        """``A * B``, and the k-tuple type ``A * B * ... * K`` (section 10)."""
        return tuple_type(items[::2])

    def real_type(self, items):
        """``ℝ``."""
        return REAL

    def list_type(self, items):
        """``[A]``."""
        return ListT(items[1])

    def parens_type(self, items):
        return items[1]

    def ring_type(self, items):
        """``d<K>``: the cotangent space over the ring ``K`` (a nesting level's scalars)."""
        return CotangentT(items[1])

    def named_type(self, items):
        """``R``, ``Bool``, ``d`` (the cotangent space), or a lower-case type variable."""
        token = items[0]
        name = str(token)
        if name == "R":
            return REAL
        if name == "Bool":
            return BOOL
        if name in _ARRAY_TYPES:
            return _ARRAY_TYPES[name]
        if name == "d":
            return COTANGENT
        if name[0].islower():
            # The type checker decides what an annotation's variables mean (it keeps them rigid).
            return VarT(name)
        raise _Located(
            f"unknown type `{name}`; types are R, Bool, Vec, Mat, [A], A * B, A -> B and "
            "lower-case type variables",
            _pos(token),
        )


@functools.cache
def _parser() -> lark.Lark:
    """The LALR parser of ``grammar.lark`` (built once; it holds no per-parse state).

    lark's analysis of the grammar, two thirds of the time ``import lambdad`` takes, is
    kept between processes in the user's cache directory (lark's ``cache`` option; lark
    checks the file against the grammar, its options and its version, and analyses the
    grammar again when they differ or the file cannot be read)."""
    grammar = _grammar()
    return lark.Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        start=["module", "repl_entry", "expr_entry", "type_entry"],
        transformer=_Concrete(),
        maybe_placeholders=False,
        cache=_cache_file(grammar),
    )


@functools.cache
def _grammar() -> str:
    """The text of ``grammar.lark`` (read once)."""
    return (Path(__file__).with_name("grammar.lark")).read_text(encoding="utf-8")


def _cache_file(grammar: str) -> str | bool:
    """Where lark keeps its analysis of ``grammar``: a file of the user's cache directory
    (``$XDG_CACHE_HOME``, else ``~/.cache``) named after the grammar and the versions of
    lark and Python, so that versions of lambdad installed side by side keep their own;
    False (no cache) if that directory cannot be made."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if base.startswith("~"):  # no home directory to expand
        return False
    folder = os.path.join(base, "lambdad")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    digest = hashlib.sha256(f"{grammar}{lark.__version__}{sys.version_info[:2]}".encode())
    return os.path.join(folder, f"grammar-{digest.hexdigest()[:16]}.lark-cache")


# Valid input on which the fast driver must build what lark builds before it is used (see
# lambdad.lalr.checked_driver): every kind of action, blanks and comments, a terminal
# re-typed by its state (`*` in a type and in an expression), `-o`, `d<`.  Small: lark's
# parse of it is paid once per process.
_SELF_CHECK = (
    ("def f (x : R * [R]) : R = let (a, _) = x in\n  if a < 0 then -a * 2 else sin a "
     "-- c\n", "module"),
    ("d<R> -o R -> R", "type_entry"),
    ("\\a -o (a, [1.5])", "expr_entry"),
    ('import "a.lam"\nimport "b c.lam" def import = 1', "module"),
)


def _shape(value: Any) -> Any:
    """A concrete tree (or what a callback made) as plain data, tokens with their extents:
    what two parsers of a text must agree on."""
    if isinstance(value, _Surface):
        return (value.kind, value.start, value.end, _shape(value.parts))
    if isinstance(value, _Token):
        return ("token", *value)
    if isinstance(value, (list, tuple)):
        return tuple(_shape(part) for part in value)
    return value


@functools.cache
def _driver() -> Driver | None:
    """The fast driver over ``_parser()``'s tables (built once, like them), or None when it
    does not build what lark builds (see :func:`lambdad.lalr.checked_driver`): then lark's
    own parser parses everything."""
    cache = _cache_file(_grammar())
    passed = verdict_file(cache, _SELF_CHECK) if cache else None
    return checked_driver(_parser(), _Token, _SELF_CHECK, _shape, passed)


# --------------------------------------------------------------------------- parse errors

# How the terminals read in a message, in the order they are listed.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "RPAR": "`)`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "COLON": "`:`",
    "EQUAL": "`=`",
    "IN": "`in`",
    "THEN": "`then`",
    "ELSE": "`else`",
    "ARROW": "`->`",
    "LOLLI": "`-o`",
    "TIMES": "`*`",
    "DEF": "`def`",
    "PRIMITIVE": "`primitive`",
    "PARTIAL": "`partial`",
    "IMPORT": "`import`",
    "STRING": "a file name in quotes",
    "LET": "`let`",
    "IF": "`if`",
    "TRUE": "`true`",
    "FALSE": "`false`",
    "LAMBDA": "`\\`",
    "REAL": "`ℝ`",
    "LPAR": "`(`",
    "LSQB": "`[`",
    "OPLUS": "`<+>`",
    "RING_OPEN": "`d<`",
    "OROR": "`||`",
    "ANDAND": "`&&`",
    "EQEQ": "`==`",
    "NOTEQ": "`!=`",
    "LESSEQ": "`<=`",
    "GREATEREQ": "`>=`",
    "LESS": "`<`",
    "GREATER": "`>`",
    "PLUS": "`+`",
    "PLUSPLUS": "`++`",
    "BANGBANG": "`!!`",
    "MINUS": "`-`",
    "STAR": "`*`",
    "SLASH": "`/`",
    "AT": "`@`",
    "CARET": "`^`",
    "$END": "end of input",
}

_ATOM_START = frozenset({"NAME", "NUMBER", "TRUE", "FALSE", "LPAR", "LSQB"})
_EXPRESSION_START = _ATOM_START | {"LAMBDA", "LET", "IF", "MINUS"}
_TYPE_START = frozenset({"NAME", "REAL", "LSQB", "LPAR", "RING_OPEN"})
_PARAMETER_START = frozenset({"NAME", "LPAR"})
_COMPARISONS = frozenset({"EQEQ", "NOTEQ", "LESSEQ", "GREATEREQ", "LESS", "GREATER"})
_BINARY = _COMPARISONS | {"OPLUS", "OROR", "ANDAND", "PLUS", "MINUS", "STAR", "SLASH", "AT", "CARET",
                          "PLUSPLUS", "BANGBANG"}


def _expected_words(expected: Iterable[str]) -> str:
    """``expected`` terminal names as a phrase: "an expression, `)` or `,`"."""
    remaining = set(expected)
    phrases = []
    # After an operand `-` is binary and a new atom is one more argument.
    after_operand = "CARET" in remaining or "PLUS" in remaining
    if _ATOM_START <= remaining:
        phrases.append("an argument" if after_operand else "an expression")
        remaining -= _ATOM_START if after_operand else _EXPRESSION_START
    if after_operand:
        phrases.append("an operator")
        remaining -= _BINARY
    if "REAL" in remaining:
        phrases.append("a type")
        remaining -= _TYPE_START
    if _PARAMETER_START <= remaining:
        # After `let` only a name or a pattern; after `\` or a name, more parameters.
        phrases.append("a name or a pattern" if remaining == _PARAMETER_START else "a parameter")
        remaining -= _PARAMETER_START
    phrases.extend(words for name, words in _TERMINAL_WORDS.items() if name in remaining)
    phrases.extend(sorted(f"`{name}`" for name in remaining - _TERMINAL_WORDS.keys()))
    if not phrases:
        return "something else"
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + " or " + phrases[-1]


def _end_position(text: str) -> Place:
    lines = text.split("\n")
    line, col = len(lines), len(lines[-1]) + 1
    return (line, col, line, col + 1)


def _lark_pos(token: lark.Token) -> Place:
    """Line and column of one of lark's tokens (as a :class:`_Lines` places a position)."""
    return (token.line, token.column, token.end_line, token.end_column)


def _describe(token: lark.Token) -> str:
    if token.type == "NAME":
        return f"name `{token}`"
    if token.type == "NUMBER":
        return f"number `{token}`"
    return f"`{token}`"


def _character(char: str) -> str:
    if char.isprintable() and not char.isspace():
        return f"`{char}`"
    return f"U+{ord(char):04X}"


def _expected_after(text: str, start: str, error: UnexpectedToken) -> tuple[set[str], Place]:
    """The terminals that may follow the text before the unexpected token, and the position
    just after that text's last token.

    lark reports what the parser expected after the reductions the bad token triggered
    (``f x )`` would only "expect `def`"); parsing the prefix again and asking the parser
    state before that token gives everything that could have come next.
    """
    token = error.token
    prefix = text if token.type == "$END" else text[:token.start_pos]
    try:
        interactive = _parser().parse_interactive(prefix, start=start)
        tokens = interactive.exhaust_lexer()
        expected = set(interactive.accepts())
    except (LarkError, _Located):  # pragma: no cover - the prefix parsed once already
        return set(error.accepts or error.expected), _end_position(text)
    if not tokens:
        return expected, (1, 1, 1, 2)
    last = tokens[-1]
    return expected, (last.end_line, last.end_column, last.end_line, last.end_column + 1)


_PARAMETER_HINT = ("parameters are written apart, without parentheses (`def f x y = e`, "
                   "`\\x y -> e`); in parentheses a parameter has a type, `(x : R)`, or is a "
                   "pattern, `(a, b)`")
_LAMBDA_HINT = "a function is written `\\x -> e` (also `\\(x : R) -> e`, `\\x y -> e`)"


def _habit_hint(text: str, token: lark.Token) -> tuple[str, Place] | None:
    """A message leading to the right spelling when the unexpected ``token`` is where a
    habit from another language shows: ``x ** 2``, ``fun x -> e``, ``x => e``."""
    start = token.start_pos
    if start is None:
        return None
    line, col = token.line, token.column
    before, here = text[start - 1:start] if start else "", text[start:start + 2]
    if token.type == "STAR" and before == "*":
        return ("there is no `**`: a power is written `x ^ y`", (line, col - 1, line, col + 1))
    if here == "=>":
        return (f"unexpected `=>`: {_LAMBDA_HINT}", (line, col, line, col + 2))
    if token.type == "GREATER" and before == "-":
        return (f"unexpected `->`: {_LAMBDA_HINT}, not `fun x -> e`",
                (line, col - 1, line, col + 1))
    if token.type == "ARROW":
        return (f"unexpected `->`: {_LAMBDA_HINT}", (line, col, line, col + len(token)))
    return None


def _import_hint(text: str, token: lark.Token, start: str) -> str | None:
    """What to write instead of an ``import`` where there can be none: after definitions,
    or at the REPL's prompt."""
    if token.type != "STRING" or token.start_pos is None or not re.search(
            r"(?<![A-Za-z0-9_'])import\s*$", text[:token.start_pos]):
        return None
    if start == "module":
        return "imports come first in a file, before its definitions"
    return ("`import` is for the top of a file; at the REPL `:load FILE` loads a file with its "
            "imports")


def _from_lark(error: UnexpectedInput, text: str, start: str) -> tuple[str, Place]:
    """Message and position of a lark parse error, in the user's words."""
    if isinstance(error, UnexpectedToken):
        token = error.token
        expected, after = _expected_after(text, start, error)
        if token.type == "$END":
            # Pointed just after the last token: the end of the text may be blank lines.
            return f"unexpected end of input; expected {_expected_words(expected)}", after
        hint = _habit_hint(text, token)
        if hint is not None:
            return hint
        words = _import_hint(text, token, start)
        if words is not None:
            return words, _lark_pos(token)
        if token.type == "RPAR" and expected == {"COMMA", "COLON"}:
            return (f"unexpected `)`: {_PARAMETER_HINT}", _lark_pos(token))
        if token.type == "COMMA" and _PARAMETER_START <= expected and (
                "ARROW" in expected or "EQUAL" in expected):  # `\x, y -> e`, `def f x, y =`
            return (f"unexpected `,`: {_PARAMETER_HINT}", _lark_pos(token))
        if token.type in _COMPARISONS and not _EXPRESSION_START <= expected:
            return (f"comparisons do not chain: add parentheses around one side of `{token}`",
                    _lark_pos(token))
        return f"unexpected {_describe(token)}; expected {_expected_words(expected)}", _lark_pos(token)
    if isinstance(error, UnexpectedCharacters):
        offset = error.pos_in_stream
        line, col = error.line, error.column
        bad = _MALFORMED_NUMBER.match(text, offset)
        if bad is not None:
            return f"malformed number `{bad.group()}`", (line, col, line, col + len(bad.group()))
        if text[offset] == '"':
            return ('a file name in quotes ends with `"` on its line', (line, col, line, col + 1))
        return f"unexpected character {_character(text[offset])}", (line, col, line, col + 1)
    return "syntax error", (error.line, error.column, error.line, error.column + 1)


def _placed(pos: Place, origin: tuple[int, int]) -> Place:
    """``pos`` (in a text of its own) moved to where that text starts in its file, at line
    and column ``origin``: the REPL parses each entry alone, not padded to its place, so that
    an entry costs its own length however long the session."""
    first_line, first_col = origin
    if origin == (1, 1):
        return pos
    line, col, end_line, end_col = pos
    return (line + first_line - 1, col + first_col - 1 if line == 1 else col,
            end_line + first_line - 1, end_col + first_col - 1 if end_line == 1 else end_col)


def _concrete(text: str, file: str, start: str, origin: tuple[int, int] = (1, 1)) -> Any:
    """The concrete tree of ``text`` from the grammar rule ``start``; raises ParseError
    located in ``file`` where ``text`` starts at ``origin``."""
    try:
        driver = _driver()
        if driver is not None:
            try:
                return driver.parse(text, start)
            except Refused:
                pass  # lark parses it again and says what is wrong
        return _parser().parse(text, start=start)
    except _Located as error:
        place = _Lines(text).place(error.pos)
        raise ParseError(error.message, Span(file, *_placed(place, origin))) from None
    except UnexpectedInput as error:
        message, pos = _from_lark(error, text, start)
        raise ParseError(message, Span(file, *_placed(pos, origin))) from None
    except LarkError as error:  # pragma: no cover - lark's other failures are grammar bugs
        raise ParseError(f"syntax error ({error})",
                         Span(file, *_placed(_end_position(text), origin))) from None
