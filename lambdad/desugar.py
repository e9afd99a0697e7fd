"""Stage 2 of parsing: the concrete tree of :mod:`lambdad.reading` to the core terms.

:class:`_Desugarer` walks the concrete tree with :func:`lambdad.iterate.run` and builds the core
terms: nested ``Lam`` for parameters, ``LetPair`` chains for patterns, right-nested ``Pair``
for tuples (each carrying the arity of the tuple it begins, see
:class:`~lambdad.syntax.PairT`), ``If`` for ``&&``/``||``, ``Prim`` for operators.  It also
resolves names: a name
bound by an enclosing binder or an earlier declaration is a ``Var``; any other name of the
primitive table is a built-in, and ``zero``/``seed``/``cotangent`` are the target language's
linear constructs.

Built-ins are saturated per application spine: ``f a1 ... an`` with a built-in head of arity
``k <= n`` is ``Prim(f, a1..ak)`` applied to the rest, while a parenthesised head ends the
spine, so ``(map g) xs`` keeps ``map`` a ``Builtin`` (the printer relies on this).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Container, Iterable, Mapping, Set
from types import GeneratorType
from typing import Any

import attrs

from .errors import ParseError, Span, TypeCheckError
from .iterate import Step, run
from .primitives import (
    LINEAR_NAMES,
    NAMED,
    OPERATORS,
    PRIMITIVES,
    REAL_EXPRESSION_KINDS,
    RESULT,
    Declaration,
    Primitive,
    declare,
    declaring,
)
from .printer import print_type
from .reading import (
    BUILTIN_NAMES,
    Position,
    WILDCARD,
    _IDENTIFIER,
    _Lines,
    _SURFACE_KINDS,
    _Surface,
    _Token,
    _extent,
    _placed,
    _pos,
)
from .syntax import (
    REAL,
    Annot,
    App,
    BoolLit,
    Builtin,
    Const,
    Decl,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    NameSupply,
    Pair,
    Plus,
    Prim,
    ReadOff,
    Seed,
    Term,
    Type,
    Var,
    Zero,
    free_vars,
    walk,
)


# --------------------------------------------------------------------------- stage 2


def _fresh_names(text: str, bound: Container[str] = frozenset()) -> NameSupply:
    """A supply of variable names (``p``, ``p1``, ``p2``, ...) that occur nowhere else: not
    in ``text`` (its words, read when the first name is asked for: most texts need none),
    not among the ``bound`` names (read, not copied), not among the built-in names."""
    return NameSupply(lambda: _identifiers(text) | BUILTIN_NAMES, outside=bound)


class _Names:
    """A set of names: those given (read, not copied) and those added."""

    def __init__(self, given: Container[str]):
        self._given = given
        self._added: set[str] = set()

    def __contains__(self, name: object) -> bool:
        return name in self._added or name in self._given

    def add(self, name: str) -> None:
        self._added.add(name)


class _Scope:
    """The names a term may refer to: top-level definitions and the enclosing binders."""

    def __init__(self, top: Container[str]):
        self.top = _Names(top)
        # The names bound by enclosing binders, with how many bind each.
        self.local: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.local or name in self.top

    def binds_locally(self, name: str) -> bool:
        """Whether an enclosing binder (not a top-level definition) binds ``name``."""
        return name in self.local

    def enter(self, names: Iterable[str]) -> None:
        for name in names:
            if name != WILDCARD:
                self.local[name] = self.local.get(name, 0) + 1

    def leave(self, names: Iterable[str]) -> None:
        for name in names:
            if name != WILDCARD:
                count = self.local[name] - 1
                if count:
                    self.local[name] = count
                else:
                    del self.local[name]


def _pattern_tokens(pattern: _Surface) -> list[_Token]:
    """The NAME tokens of a pattern, left to right."""
    tokens = []
    stack: list[Any] = [pattern]
    while stack:
        item = stack.pop()
        if isinstance(item, _Token):
            tokens.append(item)
        else:
            stack.extend(reversed(item.parts))
    return tokens


def _parameter_tokens(param: Any) -> list[_Token]:
    if isinstance(param, _Token):
        return [param]
    if param.kind == "typed_param":
        return [param.parts[0]]
    return _pattern_tokens(param)


def _builtin_arity(name: str) -> int | None:
    if name in NAMED:
        return NAMED[name].arity
    return _LINEAR_ARITY.get(name)


# The primitive each infix operator is, by its spelling.
_INFIX = {symbol: entry.name for (symbol, fixity), entry in OPERATORS.items() if fixity == "infix"}


# The linear constructs of the target language are written like built-ins of these arities.
_LINEAR_ARITY = {"zero": 0, "seed": 1, "cotangent": 2}
assert set(_LINEAR_ARITY) == set(LINEAR_NAMES)

# The built-in names of one argument (`sin`, `exp`, ...): applied to a leaf, a leaf.
_BUILTIN_ONE_ARGUMENT = frozenset(name for name in [*NAMED, *_LINEAR_ARITY]
                                  if _builtin_arity(name) == 1)


class _Desugarer:
    """The core term of a concrete tree, with names resolved (stage 2; see the module docstring).

    One arm per grammar alias; an arm gives the term itself (a leaf, converted at once) or
    a generator driven by :func:`run`.
    """

    def __init__(self, file: str, lines: _Lines, names: NameSupply, scope: _Scope,
                 origin: tuple[int, int] = (1, 1)):
        self.file = file
        # Lines and columns of the text's offsets.
        self.lines = lines
        # Where the text starts in its file (line, column): see _placed.
        self.origin = origin
        # Whether that is not the start of the file (spans are moved there).
        self.placed = origin != (1, 1)
        self.names = names
        self.scope = scope
        # The names being defined around the current term (`def f`, `let g x = ...`): a
        # use of one of them that is not otherwise in scope is an attempt at recursion.
        self.defining: list[str] = []
        # Declarations further down the file, by name: a use of one is a forward reference.
        self.later: dict[str, Position] = {}
        # Whether the term is a program's (every free name must be defined: recursion and
        # forward references are reported as such) or an open term (free names are fine).
        self.closed = False
        # The primitives the program has declared so far, by name.
        self.declared: dict[str, Primitive] = {}
        # The arm of each kind of concrete node (see _Concrete).
        self.arms: dict[str, Callable[[_Surface], Step[Term] | Term]] = {
            name[1:]: getattr(self, name) for name in dir(type(self))
            if name.startswith("_") and name[1:] in _SURFACE_KINDS}
        self.arms["NAME"] = self._name
        # A built-in applied to a leaf is a leaf too (see _binary for operators).
        self.arms["application"] = self._application_at_once
        # The lines on which the last span started and ended, each as (offset of its first
        # character, offset of the next line's, line number): the walk meets nodes in the
        # order of the text, so most spans start on the line of the one before, and the
        # lets of a chain all end where it ends.  Searched for only when they do not.
        self.start_line = self.end_line = (0, 0, 0)

    def span(self, pos: Position) -> Span:
        return self.span_at(*pos)

    def span_at(self, start: int, end: int) -> Span:
        """The span from offset ``start`` to ``end`` (one per node: the lines' search is
        mostly skipped, see ``start_line``)."""
        if self.placed:  # a text of its own inside a file
            return Span(self.file, *_placed(self.lines.place((start, end)), self.origin))
        first, after, line = self.start_line
        if not first <= start < after:
            starts = self.lines.starts
            line = bisect_right(starts, start)
            first = starts[line - 1]
            after = starts[line]
            self.start_line = (first, after, line)
        if end < after:  # most nodes lie on one line
            return Span(self.file, line, start - first + 1, line, end - first + 1)
        end_first, end_after, end_line = self.end_line
        if not end_first <= end < end_after:
            starts = self.lines.starts
            end_line = bisect_right(starts, end)
            end_first = starts[end_line - 1]
            self.end_line = (end_first, starts[end_line], end_line)
        return Span(self.file, line, start - first + 1, end_line, end - end_first + 1)

    def error(self, message: str, pos: Position) -> ParseError:
        return ParseError(message, self.span(pos))

    def term(self, s: _Surface) -> Step[Term] | Term:
        """The core term of ``s``: a step for :func:`run` (or the term itself for a leaf)."""
        return self.arms[s.kind](s)

    # ---- declarations

    def declaration(self, s: _Surface) -> Step[Decl]:
        """``def f p1 ... pn : T = e`` is ``def f = \\p1 -> ... \\pn -> (e : T)``."""
        name, params, result, body = s.parts
        self.defining.append(str(name))
        value = yield self.function(params, result, body, _extent(params[0], body) if params
                                    else _pos(body))
        self.defining.pop()
        return Decl(str(name), value, span=self.span(_pos(s)))

    def primitive_declaration(self, s: _Surface) -> Decl:
        """``primitive f x y = e partial x = dx partial y = dy``: a new entry for the
        primitive table (see :func:`lambdad.primitives.declare`), and the declaration
        ``def f x y = f x y`` (the primitive applied) by which ``grad``, ``check`` and the
        other commands reach it by name; elsewhere ``f`` means the primitive, like a
        built-in's name.  Its body and partials may use only the
        parameters (the partials also ``result``), numbers, ``let``, ``if`` and real
        primitives: they are evaluated on reals, inside the transformed programs too."""
        name, params, result_type, body, partials = s.parts
        names = []
        for param in params:
            if isinstance(param, _Token) and str(param) != WILDCARD:
                names.append(str(param))
            elif isinstance(param, _Surface) and param.kind == "typed_param" \
                    and param.parts[1] == REAL:
                names.append(str(param.parts[0]))
            else:
                raise self.error("a primitive's parameters are reals, written `x` or `(x : R)`",
                                 _pos(param))
        self.distinct(param if isinstance(param, _Token) else param.parts[0]
                      for param in params)
        if result_type is not None and result_type != REAL:
            raise self.error(f"a primitive returns R, not {print_type(result_type)}", _pos(s))
        body_term = self.real_expression(body, names)
        by_param: dict[str, Term] = {}
        bound = names + ([RESULT] if RESULT not in names else [])
        for clause in partials:
            param, value = clause.parts
            if str(param) not in names:
                raise self.error(f"`{param}` is not a parameter of `{name}`", _pos(param))
            if str(param) in by_param:
                raise self.error(f"a second partial for `{param}`", _pos(param))
            by_param[str(param)] = self.real_expression(value, bound)
        missing = [param for param in names if param not in by_param]
        if missing:
            raise self.error(f"`{name}` needs a partial derivative for every parameter: "
                             f"`partial {missing[0]} = ...` is missing", _pos(s))
        terms = tuple(by_param[param] for param in names)
        mentions_result = RESULT not in names and any(
            RESULT in free_vars(term) for term in terms)
        declaration = Declaration(tuple(names), body_term, terms,
                                  RESULT if mentions_result else None)
        entry = declare(str(name), declaration, f"declared at {self.span(_pos(name))}")
        self.declared[str(name)] = entry
        span = self.span(_pos(s))
        return Decl(str(name), declaring(entry, span), span=span)

    def real_expression(self, s: _Surface, names: list[str]) -> Term:
        """The term of a primitive's body or partial: only ``names`` are in scope, and only
        numbers, booleans, ``let``, ``if`` and applications of real, comparison and boolean
        primitives are allowed (raises ParseError at anything else)."""
        outer = self.scope, self.later, self.defining
        self.scope, self.later, self.defining = _Scope(()), {}, []
        self.scope.enter(names)
        try:
            term = run(self.term(s))
        finally:
            self.scope, self.later, self.defining = outer
        unknown = free_vars(term) - set(names)
        for node in walk(term):
            if isinstance(node, Var) and node.name in unknown:
                raise ParseError(
                    f"`{node.name}` is not a parameter: a primitive's body and partials use "
                    f"only its parameters ({', '.join(f'`{n}`' for n in names)}), numbers "
                    "and primitives", node.span)
        for node in walk(term):
            allowed = isinstance(node, (Const, BoolLit, Var, Let, If, Annot)) or (
                isinstance(node, Prim) and PRIMITIVES[node.op].kind in REAL_EXPRESSION_KINDS)
            if not allowed:
                raise ParseError(
                    "a primitive's body and partials are expressions over reals (numbers, "
                    "its parameters, `let`, `if`, arithmetic and real functions): this "
                    f"{_construct(node)} is not allowed", node.span)
        return term

    def check_definable(self, name: _Token) -> None:
        """Raises unless ``name`` may name a declaration (any name but ``_``: a definition
        of a built-in's name shadows the built-in in the definitions after it, LANGUAGE.md
        section 10, so adding a built-in never breaks a program)."""
        if str(name) == WILDCARD:
            raise self.error("a declaration needs a name, not `_`", _pos(name))

    # ---- binders

    def function(self, params: list, result: Type | None, body: _Surface,
                 pos: Position) -> Step[Term]:
        """``\\p1 ... pn -> e`` as nested ``Lam``; a pattern parameter ``(a, b)`` becomes a
        fresh parameter ``p`` and ``let (a, b) = p in ...``; ``result`` annotates the body."""
        names = self.distinct(t for param in params for t in _parameter_tokens(param))
        fresh = [None if isinstance(param, _Token) or param.kind == "typed_param"
                 else self.names.name("p") for param in params]
        self.scope.enter(names)
        term = yield self.term(body)
        self.scope.leave(names)
        if result is not None:
            term = Annot(term, result, span=term.span)
        for index in range(len(params) - 1, -1, -1):
            param = params[index]
            span = self.span(pos if index == 0 else _extent(param, body))
            if isinstance(param, _Token):
                term = Lam(str(param), term, span=span)
            elif param.kind == "typed_param":
                term = Lam(str(param.parts[0]), term, param.parts[1], span=span)
            else:
                value = Var(fresh[index], span=self.span(_pos(param)))
                term = Lam(fresh[index], self.destructure(param, value, term), span=span)
        return term

    def distinct(self, tokens: Iterable[_Token]) -> list[str]:
        """The names of ``tokens``; raises if one (other than ``_``) occurs twice."""
        seen: set[str] = set()
        names = []
        for token in tokens:
            name = str(token)
            if name in seen:
                raise self.error(f"`{name}` is bound twice here", _pos(token))
            if name != WILDCARD:
                seen.add(name)
            names.append(name)
        return names

    def destructure(self, pattern: _Surface, value: Term, body: Term) -> Term:
        """``let pattern = value in body`` as nested ``LetPair``: the k-tuple pattern ``(a,
        b, c)`` is a LetPair of arity k binding ``a`` and a fresh name for the (k-1)-tuple
        ``(b, c)``, and every nested pattern is matched against a fresh name."""
        steps: list[tuple[str, str, Term, Span, int]] = []
        # (components, index of the first one, value): the pattern (items[i], ..., items[-1])
        work: list[tuple[tuple, int, Term, Position]] = [(pattern.parts, 0, value, _pos(pattern))]
        while work:
            items, first, current, pos = work.pop()
            nested = []
            names = []
            for part in (items[first], None if len(items) - first > 2 else items[first + 1]):
                if part is None:  # the rest of an n-tuple pattern is itself a pair
                    name = self.names.name("p")
                    nested.append((items, first + 1, Var(name, span=self.span(pos)), pos))
                elif isinstance(part, _Token):
                    name = str(part)
                else:
                    name = self.names.name("p")
                    nested.append((part.parts, 0, Var(name, span=self.span(_pos(part))), _pos(part)))
                names.append(name)
            steps.append((names[0], names[1], current, self.span(pos), len(items) - first))
            work.extend(reversed(nested))
        for first_name, second_name, current, span, arity in reversed(steps):
            body = LetPair(first_name, second_name, current, body, arity, span=span)
        return body

    # ---- arms

    def _number(self, s):
        """A real literal (a leaf: no step)."""
        return Const(s.parts[0], span=self.span_at(s.start, s.end))

    def _boolean(self, s):
        """``true`` / ``false`` (a leaf: no step)."""
        return BoolLit(s.parts[0], span=self.span_at(s.start, s.end))

    def _name(self, s):
        """A bound name is a ``Var``; a free built-in name not applied to all its arguments is
        a ``Builtin`` (or ``zero``); any other free name is a ``Var`` (unbound: a type error).
        A leaf: no step; ``s`` is the NAME token."""
        name = s[1]  # (s.text, s.start, s.end, read as the tuple's items: most nodes)
        span = self.span_at(s[2], s[3])
        if name in self.scope.local and name != WILDCARD:  # most names: a local variable
            return Var(name, span=span)
        if name == WILDCARD:
            raise self.error("`_` is not a value: it only ignores a parameter or a pattern "
                             "component", _pos(s))
        if name in self.declared and not self.scope.binds_locally(name):
            return Builtin(self.declared[name].name, span=span)
        if name in self.scope:
            return Var(name, span=span)
        if name in NAMED:
            return Builtin(NAMED[name].name, span=span)
        if name in _LINEAR_ARITY:
            if _LINEAR_ARITY[name] == 0:
                return self.saturate(name, [], _pos(s))
            count = _LINEAR_ARITY[name]
            raise self.error(f"`{name}` needs {count} argument{'s' if count > 1 else ''} here",
                             _pos(s))
        self.check_reachable(name, _pos(s))
        return Var(name, span=span)

    def check_reachable(self, name: str, pos: Position) -> None:
        """Raises a TypeCheckError leading to the right construct for a free ``name`` that
        refers to the definition it is in (recursion) or to a later one."""
        if not self.closed:
            return
        if name in self.defining:
            raise TypeCheckError(
                f"no recursion: `{name}` cannot use itself (every program terminates); "
                "iterate with `fold` over a list, e.g. `fold step start (range n)`",
                self.span(pos))
        if name in self.later and name not in self.scope.top:
            line = self.lines.place(self.later[name])[0]
            raise TypeCheckError(
                f"`{name}` is defined later, at line {line}: a definition sees only the "
                "ones above it (move it up)", self.span(pos))

    def saturate(self, name: str, args: list[Term], pos: Position) -> Term:
        """The built-in ``name`` applied to exactly its arity of arguments."""
        span = self.span(pos)
        if name in NAMED:
            return Prim(NAMED[name].name, tuple(args), span=span)
        if name == "zero":
            return Zero(span=span)
        if name == "seed":
            index = args[0]
            if isinstance(index, Const) and not (index.value >= 0 and index.value.is_integer()):
                raise ParseError("`seed` expects a whole number >= 0", index.span)
            return Seed(index, span=span)
        if name == "cotangent":
            return ReadOff(args[0], args[1], span=span)
        raise AssertionError(f"no such built-in {name!r}")  # pragma: no cover

    def _application_at_once(self, s):
        """``f a`` of a built-in ``f`` of one argument and a leaf ``a`` (``sin x``), as a
        leaf; any other application is the step :meth:`_application`."""
        head = s.parts[0]
        if head.__class__ is _Token and head[1] in _BUILTIN_ONE_ARGUMENT:
            name = head[1]
            if name not in self.scope and name not in self.declared:
                arg_tree = s.parts[1]
                arg = self.arms[arg_tree.kind](arg_tree)
                if arg.__class__ is not GeneratorType:
                    return self.saturate(name, [arg], (s.start, s.end))
        return self._application(s)

    def arguments(self, nodes: list) -> Step[list[Term]]:
        """The terms of the argument nodes of an application spine (a step)."""
        args = []
        for node in nodes:
            arg = self.term(node.parts[1])
            if arg.__class__ is GeneratorType:  # not a leaf
                arg = yield arg
            args.append(arg)
        return args

    def _application(self, s):
        """``f a1 ... an``: see the module docstring for built-in heads."""
        spine = []
        head = s
        while head.kind == "application":
            spine.append(head)
            head = head.parts[0]
        spine.reverse()
        fn = None
        used = 0
        name = head.text if head.kind == "NAME" else None
        if name in self.declared and not self.scope.binds_locally(name):
            arity = self.declared[name].arity
            if arity <= len(spine):
                args = yield from self.arguments(spine[:arity])
                fn = Prim(self.declared[name].name, tuple(args), span=self.span(
                    _pos(spine[arity - 1])))
                used = arity
        elif name is not None and name not in self.scope:
            arity = _builtin_arity(name)
            if arity is not None and arity <= len(spine):
                args = yield from self.arguments(spine[:arity])
                fn = self.saturate(name, args, _pos(spine[arity - 1]) if arity else _pos(head))
                used = arity
        if fn is None:
            fn = yield self.term(head)
        for node in spine[used:]:
            arg = self.term(node.parts[1])
            if arg.__class__ is GeneratorType:  # not a leaf
                arg = yield arg
            fn = App(fn, arg, span=self.span_at(node.start, node.end))
        return fn

    def _parens(self, s):
        """``(e)``."""
        return (yield self.term(s.parts[0]))

    def _annotation(self, s):
        """``(e : A)``."""
        expr = yield self.term(s.parts[0])
        return Annot(expr, s.parts[1], span=self.span(_pos(s)))

    def _tuple(self, s):
        """``(e1, ..., en)``: the n-tuple, pairs of arities n, n - 1, ..., 2 nesting to the
        right (distinct from ``(e1, (e2, ..., en))``, whose pairs all have arity 2)."""
        items = []
        for part in s.parts:
            items.append((yield self.term(part)))
        term = items[-1]
        for index in range(len(items) - 2, -1, -1):
            pos = _pos(s) if index == 0 else _extent(s.parts[index], s.parts[-1])
            term = Pair(items[index], term, len(items) - index, span=self.span(pos))
        return term

    def _list(self, s):
        """``[e1, ..., en]``."""
        items = []
        for part in s.parts:
            items.append((yield self.term(part)))
        return ListLit(tuple(items), span=self.span(_pos(s)))

    def _section(self, s):
        """``(op)`` is ``\\p q -> p op q``, ``(op e)`` is ``\\p -> p op e`` and ``(e op)`` is
        ``\\p -> e op p``, with fresh parameters; an operand other than a name or a number
        is computed once, outside the function (``let q = e in \\p -> p op q``), except
        the right operand of ``&&`` and ``||``, which stays where it is only evaluated
        when needed."""
        op, left_tree, right_tree = s.parts
        span = self.span(_pos(s))
        shared: list[tuple[str, Term]] = []
        params: list[str] = []
        operands = []
        for tree in (left_tree, right_tree):
            if tree is None:
                params.append(self.names.name("p"))
                operands.append(Var(params[-1], span=span))
                continue
            term = yield self.term(tree)
            lazy = tree is right_tree and op.kind in ("ANDAND", "OROR")
            if not lazy and not isinstance(term, (Var, Const, BoolLit)):
                shared.append((self.names.name("q"), term))
                term = Var(shared[-1][0], span=span)
            operands.append(term)
        left, right = operands
        if op.kind == "ANDAND":
            body: Term = If(left, right, BoolLit(False, span=span), span=span)
        elif op.kind == "OROR":
            body = If(left, BoolLit(True, span=span), right, span=span)
        else:
            body = Prim(_INFIX[op.text], (left, right), span=span)
        for name in reversed(params):
            body = Lam(name, body, span=span)
        for name, value in reversed(shared):
            body = Let(name, value, body, span=span)
        return body

    def _binary(self, s):
        """``e1 op e2``: the primitive spelled ``op``.  A tree of operators is converted by a
        loop, its operands left to right as recursion would: at once when they are all
        leaves (most of a long program's lines), else as one step from the first operand
        that is not a leaf on."""
        nodes: list[_Surface] = []
        lefts: list[Term | None] = []
        found = self._operators(nodes, lefts, s)
        if found.__class__ is GeneratorType:
            return self._operators_by_steps(nodes, lefts, found)
        return found

    def _operators_by_steps(self, nodes: list[_Surface], lefts: list[Term | None], step):
        """The rest of the tree of :meth:`_operators` whose operand ``step`` is next."""
        while True:
            found = self._operators(nodes, lefts, None, (yield step))
            if found.__class__ is not GeneratorType:
                return found
            step = found

    def _operators(self, nodes: list[_Surface], lefts: list[Term | None], node: Any,
                   term: Term | None = None):
        """Converts a tree of operators from its operand ``node`` (or, if ``term`` is given,
        from the operand just converted to ``term``) until it is done, giving its term, or
        until an operand is not a leaf, giving that operand's step.  ``nodes`` are the
        operator nodes whose right operand is next or being converted, ``lefts`` the term
        of each one's left operand (None while that is being converted)."""
        arms = self.arms
        local = self.scope.local
        while True:
            if term is None:
                while node.kind == "binary":  # down to the leftmost operand
                    nodes.append(node)
                    lefts.append(None)
                    node = node.parts[1]
                if node.__class__ is _Token and node[1] in local and node[1] != WILDCARD:
                    # (what _name gives a local variable, inline: most operands are one)
                    term = Var(node[1], span=self.span_at(node[2], node[3]))
                else:
                    term = arms[node.kind](node)
                    if term.__class__ is GeneratorType:  # not a leaf
                        return term
            # up while ``term`` completes a right operand
            while nodes:
                if lefts[-1] is None:
                    lefts[-1] = term
                    node = nodes[-1].parts[2]
                    break
                node = nodes.pop()
                term = Prim(_INFIX[node.parts[0][1]], (lefts.pop(), term),
                            span=self.span_at(node.start, node.end))
            else:
                return term
            term = None

    def _negation(self, s):
        """``-e``: the primitive spelled as prefix ``-``."""
        op, operand = s.parts
        arg = yield self.term(operand)
        return Prim(OPERATORS[(str(op), "prefix")].name, (arg,), span=self.span(_pos(s)))

    def _conjunction(self, s):
        """``a && b`` is ``if a then b else false``."""
        left = yield self.term(s.parts[0])
        right = yield self.term(s.parts[1])
        span = self.span(_pos(s))
        return If(left, right, BoolLit(False, span=span), span=span)

    def _disjunction(self, s):
        """``a || b`` is ``if a then true else b``."""
        left = yield self.term(s.parts[0])
        right = yield self.term(s.parts[1])
        span = self.span(_pos(s))
        return If(left, BoolLit(True, span=span), right, span=span)

    def _oplus(self, s):
        """``e1 <+> e2``."""
        left = yield self.term(s.parts[0])
        right = yield self.term(s.parts[1])
        return Plus(left, right, span=self.span(_pos(s)))

    def _conditional(self, s):
        """``if c then e1 else e2``."""
        cond = yield self.term(s.parts[0])
        then = yield self.term(s.parts[1])
        orelse = yield self.term(s.parts[2])
        return If(cond, then, orelse, span=self.span(_pos(s)))

    def _abstraction(self, s):
        """``\\p1 ... pn -> e``."""
        params, body = s.parts
        return (yield self.function(params, None, body, _pos(s)))

    def _linear_abstraction(self, s):
        """``\\a -o e``."""
        name, body = s.parts
        self.scope.enter([str(name)])
        term = yield self.term(body)
        self.scope.leave([str(name)])
        return LinLam(str(name), term, span=self.span(_pos(s)))

    def _let(self, s):
        """``let x p1 ... pn : T = e1 in e2`` (a local function when n > 0) and
        ``let pattern = e1 in e2``; the bound names are not visible in ``e1``.  A ``let``
        whose body is a ``let``, and so on, is one step: the chain (a long program's usual
        shape) is converted by a loop, in the order recursion would take."""
        # The lets of the chain, outermost first, with their bound names and values.
        chain: list[tuple[_Surface, list[str], Term]] = []
        while s.kind == "let":
            bind, body = s.parts
            if bind.kind == "bind_name":
                name, params, result, value_tree = bind.parts
                self.defining.append(name.text)
                if params or result is not None:
                    value = yield self.function(params, result, value_tree,
                                                _extent(params[0], value_tree) if params
                                                else _pos(value_tree))
                else:  # `let x = e in ...`: no function to build
                    value = self.term(value_tree)
                    if value.__class__ is GeneratorType:  # not a leaf
                        value = yield value
                self.defining.pop()
                names = [name.text]
            else:
                pattern, value_tree = bind.parts
                value = yield self.term(value_tree)
                names = self.distinct(_pattern_tokens(pattern))
            self.scope.enter(names)
            chain.append((s, names, value))
            s = body
        term = self.term(s)
        if term.__class__ is GeneratorType:  # not a leaf
            term = yield term
        for s, names, value in reversed(chain):
            self.scope.leave(names)
            bind = s.parts[0]
            span = self.span_at(s.start, s.end)
            if bind.kind == "bind_name":
                term = Let(names[0], value, term, span=span)
            else:
                # The outermost LetPair stands for the whole `let`.
                term = attrs.evolve(self.destructure(bind.parts[0], value, term), span=span)
        return term

def _construct(term: Term) -> str:
    """What ``term`` is, in a user's words."""
    if isinstance(term, (Prim, Builtin)):
        name = term.op if isinstance(term, Prim) else term.name
        return f"use of `{PRIMITIVES[name].spelling.symbol}`"
    words = {"Lam": "function", "App": "function application", "Pair": "pair",
             "LetPair": "pair pattern", "ListLit": "list"}
    return words.get(type(term).__name__, "construct")


def _identifiers(text: str) -> set[str]:
    """Every identifier-like word of ``text`` (comments included): fresh names avoid them."""
    return set(_IDENTIFIER.findall(text))


def _desugarer(text: str, file: str, bound: Iterable[str],
               declared: Iterable[Primitive] = (),
               origin: tuple[int, int] = (1, 1)) -> _Desugarer:
    if not isinstance(bound, (Set, Mapping)):
        bound = set(bound)
    # ``bound`` is read, never copied: a REPL session's thousands of names cost nothing
    # per entry.
    desugarer = _Desugarer(file, _Lines(text), _fresh_names(text, bound), _Scope(bound),
                           origin)
    desugarer.declared = {str(entry.name): entry for entry in declared}
    return desugarer
