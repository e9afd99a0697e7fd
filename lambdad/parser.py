"""Text to syntax: the public entry points of parsing.

Parsing runs in two stages: :mod:`lambdad.reading` reads the text into a concrete tree (the
grammar, lark's tables and the fast driver, the messages of a syntax error), and
:mod:`lambdad.desugar` builds the core terms of :mod:`lambdad.syntax` from it and resolves
names.  This module runs them for a program, an expression, a type or a REPL entry.

Every error is a :class:`~lambdad.errors.ParseError` whose span points at the culprit; no
lark exception escapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs
from lark.exceptions import LarkError, UnexpectedToken

from .desugar import _desugarer
from .errors import ParseError, Span
from .iterate import run
from .primitives import Primitive
from .reading import _concrete, _Lines, _Located, _parser, _pos
from .syntax import Decl, Module, Term, Type

__all__ = ["Import", "ProgramText", "parse_module", "parse_expr", "parse_type", "parse_entry",
           "is_incomplete"]


# --------------------------------------------------------------------------- public API


@attrs.frozen
class Import:
    """``import "FILE"``: the file's name as written (relative to the importing file), and
    where the import is."""

    path: str
    span: Span


class ProgramText:
    """A program's text read: its imports (:attr:`imports`), and its declarations, desugared
    by :meth:`declarations` once the names the imports define are known.  Raises ParseError
    for a syntax error."""

    def __init__(self, text: str, file: str = "<input>"):
        self.text = text
        self.file = file
        trees = _concrete(text, file, "module")
        count = 0
        while count < len(trees) and trees[count].kind == "import":
            count += 1
        self.imports: tuple[Import, ...] = ()
        if count:  # (the lines of a text without imports are found by its desugarer only)
            lines = _Lines(text)
            self.imports = tuple(Import(tree.parts[0], Span(file, *lines.place(_pos(tree))))
                                 for tree in trees[:count])
        self._trees = trees[count:]

    def declarations(self, predefined: Iterable[str] = (), allow_redefinition: bool = False,
                     closed: bool = True, declared: Iterable[Primitive] = ()) -> Module:
        """The declarations of the text; raises ParseError (a name defined twice, a
        definition of a built-in); see :func:`parse_module`.  The names of the ``declared``
        primitives (an imported file's ``primitive`` declarations) mean them, up to a
        definition of the name."""
        text, file = self.text, self.file
        desugarer = _desugarer(text, file, list(predefined), declared)
        desugarer.closed = closed
        defined: dict[str, Span] = {}
        decls = []
        trees = self._trees
        for tree in reversed(trees):  # the first definition of a name wins
            desugarer.later[str(tree.parts[0])] = _pos(tree.parts[0])
        for tree in trees:
            name = tree.parts[0]
            desugarer.check_definable(name)
            if str(name) in defined:
                raise desugarer.error(f"`{name}` is already defined at {defined[str(name)]}",
                                      _pos(name))
            if str(name) in desugarer.scope.top and not allow_redefinition:
                raise desugarer.error(f"`{name}` is already defined", _pos(name))
            if tree.kind == "primitive_decl":
                decls.append(desugarer.primitive_declaration(tree))
            else:
                desugarer.declared.pop(str(name), None)  # an imported primitive shadowed
                decls.append(run(desugarer.declaration(tree)))
            defined[str(name)] = desugarer.span(_pos(name))
            desugarer.scope.top.add(str(name))
        return Module(tuple(decls))


def parse_module(text: str, file: str = "<input>", predefined: Iterable[str] = (),
                 allow_redefinition: bool = False, closed: bool = True) -> Module:
    """The declarations of a program ``text``; raises ParseError (syntax, a name defined twice,
    a definition of a built-in, an import: files are imported by :mod:`lambdad.modules`).

    ``predefined`` names (a prelude, the REPL's environment) are in scope; redefining one is an
    error unless ``allow_redefinition``.  A use of the definition being defined or of a later
    one is an error that says so, unless not ``closed`` (a module whose free names are
    resolved elsewhere, as in the printer's tests).
    """
    read = ProgramText(text, file)
    if read.imports:
        raise ParseError("an import is read where a program file is loaded (`lambdad.load`, "
                         "the command line, `:load` at the REPL, `%lambdad_load` in a "
                         "notebook); here only definitions are", read.imports[0].span)
    return read.declarations(predefined, allow_redefinition, closed)


def parse_expr(text: str, file: str = "<expr>", bound: Iterable[str] = (),
               declared: Iterable[Primitive] = ()) -> Term:
    """The term of the expression ``text``, in which the ``bound`` names are variables and
    the names of the ``declared`` primitives (of a program's ``primitive`` declarations)
    mean them; raises ParseError."""
    tree = _concrete(text, file, "expr_entry")
    return run(_desugarer(text, file, bound, declared).term(tree))


def parse_type(text: str, file: str = "<type>") -> Type:
    """The type written ``text``; raises ParseError."""
    return _concrete(text, file, "type_entry")


def parse_entry(text: str, file: str = "<repl>", bound: Iterable[str] = (),
                declared: Iterable[Primitive] = (),
                origin: tuple[int, int] = (1, 1)) -> Decl | Term:
    """One REPL input: ``def f ... = e`` or ``x = e`` (a Decl), or an expression (a Term),
    whose spans are in ``file`` where ``text`` starts at line and column ``origin``.

    The ``bound`` names are variables; redefining one is allowed; the names of the
    ``declared`` primitives mean them.  Raises ParseError.
    """
    tree = _concrete(text, file, "repl_entry", origin)
    desugarer = _desugarer(text, file, bound, declared, origin)
    desugarer.closed = True
    if tree.kind == "decl":
        desugarer.check_definable(tree.parts[0])
        return run(desugarer.declaration(tree))
    return run(desugarer.term(tree))


_BLANK = re.compile(r"(?:\s|--[^\n]*)*")


def is_incomplete(text: str) -> bool:
    """True if ``text`` is a REPL input cut short (an open bracket, a trailing ``in``, ``->``
    or operator): a prefix of valid input that ended too early.  Never raises."""
    if _BLANK.fullmatch(text):
        return False
    try:
        _parser().parse(text, start="repl_entry")
    except UnexpectedToken as error:
        return error.token.type == "$END"
    except (LarkError, _Located):
        return False
    return False

