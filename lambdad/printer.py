"""Syntax back to source text that parses to the same syntax.

``parse_expr(print_term(t)) == t`` and ``parse_module(print_module(m)) == m`` for the terms the
parser builds and the transformations produce (source and target language).  Parentheses are
minimal: each construct has a binding level (the operators' come from their spelling in the
primitive table) and a sub-term is parenthesised only where the grammar needs it.

Layout is for people: a term that fits on its line is printed on one line; otherwise a ``let``
chain has one binding per line (the body under the ``let``), an ``if`` has its branches on
their own lines, and a lambda its body on the next line.  ``def f = \\x -> \\y -> e`` prints
as ``def f x y = e`` and ``a && b``/``a || b`` come back from their ``if`` forms.

Printing is iterative (a work stack of text pieces), so very deep terms print too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from .iterate import run
from .primitives import (
    LEVEL_AND,
    LEVEL_APP,
    LEVEL_COMPARE,
    LEVEL_OR,
    LINEAR_NAMES,
    NAMED,
    PRIMITIVES,
    DeclaredName,
    Primitive,
    declare,
    declared_by,
    declaring,
)
from .syntax import (
    Annot,
    App,
    BoolLit,
    BoolT,
    Builtin,
    Const,
    CotangentT,
    Decl,
    FunT,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    ListT,
    Module,
    Pair,
    PairT,
    Plus,
    Prim,
    RealT,
    ReadOff,
    Seed,
    Term,
    Type,
    Var,
    VarT,
    Zero,
    binders,
    children,
    names_in,
    numbered,
    walk,
    with_children,
)

__all__ = ["print_type", "print_term", "print_decl", "print_module", "unshadowed",
           "builtin_uses"]


# Longest type text printed in full: types share structure, so `def p1 x = p0 (p0 x)` ...
# `p5` has a type of 2^32 parts in a few hundred bytes of memory, and no reader wants more.
MAX_TYPE_TEXT = 2000


def print_type(t: Type, limit: int | None = MAX_TYPE_TEXT) -> str:
    """Source text of ``t``: ``*`` binds tighter than ``->``, both associate to the right;
    a function from ``R`` into ``d`` is a backpropagator and prints as ``R -o d``.  Text
    longer than ``limit`` characters is cut there and ends with ``… [type abbreviated: it
    has N parts]`` (``limit=None``: never)."""
    # Work stack of either types to print (with the context's binding level) or literal text.
    # Levels: 0 = any (function position), 1 = operand of '*', 2 = atom.
    out: list[str] = []
    stack: list[tuple[Type, int] | str] = [(t, 0)]
    while stack:
        if limit is not None and len(out) >= limit:  # every piece has a character at least
            text = "".join(out)[:limit]
            return f"{text} … [type abbreviated: it has {_type_size(t)} parts]"
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        current, level = item
        if isinstance(current, RealT):
            out.append("R")
        elif isinstance(current, BoolT):
            out.append("Bool")
        elif isinstance(current, CotangentT):
            if isinstance(current.ring, RealT):
                out.append("d")
            else:  # d<K>: the ring of another nesting level
                stack.extend([">", (current.ring, 0)])
                out.append("d<")
        elif isinstance(current, VarT):
            out.append(current.name)
        elif isinstance(current, ListT):
            stack.extend(["]", (current.item, 0)])
            out.append("[")
        elif isinstance(current, PairT):
            parts: list = [(current.first, 2), " * ", (current.second, 1)]
            if level > 1:
                parts = ["("] + parts + [")"]
            stack.extend(reversed(parts))
        elif isinstance(current, FunT):
            linear = isinstance(current.result, CotangentT)
            arrow = " -o " if linear else " -> "
            parts = [(current.arg, 1), arrow, (current.result, 0)]
            if level > 0:
                parts = ["("] + parts + [")"]
            stack.extend(reversed(parts))
        else:  # pragma: no cover - every type class is handled above
            raise TypeError(f"cannot print type {current!r}")
    return "".join(out)


def _type_size(t: Type) -> int:
    """How many parts (constructors and leaves) ``t`` has written out as a tree; shared
    structure is counted once per occurrence but visited once."""
    sizes: dict[int, int] = {}
    keep: list[Type] = []  # the visited objects stay alive while their ids are keys
    stack: list[tuple[Type, bool]] = [(t, False)]
    while stack:
        current, expanded = stack.pop()
        kids = children(current)
        if expanded:
            sizes[id(current)] = 1 + sum(sizes[id(kid)] for kid in kids)
        elif id(current) not in sizes:
            keep.append(current)
            stack.append((current, True))
            stack.extend((kid, False) for kid in kids if id(kid) not in sizes)
    return sizes[id(t)]


def print_term(term: Term) -> str:
    """Source text of ``term``; raises ValueError for a non-finite real (it has no literal)."""
    printer = _Printer([term])
    printer.emit(_Sub(term, _BINDER, 0, {}))
    return printer.text()


def print_decl(decl: Decl) -> str:
    """Source text of one declaration, ``def f x y = e``; raises as :func:`print_term`."""
    printer = _Printer([decl.value])
    printer.emit_decl(decl)
    return printer.text()


def _primitive_declaration(entry: Primitive) -> str:
    """``primitive f x y = body`` and one indented ``partial x = ...`` line per parameter."""
    declaration = entry.declaration
    lines = [f"primitive {entry.name} {' '.join(declaration.params)} = "
             f"{print_term(declaration.body)}"]
    lines.extend(f"  partial {param} = {print_term(partial)}"
                 for param, partial in zip(declaration.params, declaration.partials))
    return "\n".join(lines)


def print_module(module: Module) -> str:
    """Source text of a program: its declarations separated by blank lines (a definition
    shadowing a built-in that a later one uses is printed renamed: see :func:`unshadowed`)."""
    module = Module(tuple(unshadowed(module.decls)[0]))
    printer = _Printer([decl.value for decl in module.decls])
    for index, decl in enumerate(module.decls):
        if index:
            printer.write("\n\n")
        printer.emit_decl(decl)
    return printer.text() + "\n" if module.decls else ""


def unshadowed(decls: Sequence[Decl], used_after: Iterable[str] = (),
               reserved: Iterable[str] = ()) -> tuple[list[Decl], dict[str, str]]:
    """``decls`` made ready to print as one program, and the names changed.

    A program's definition of a built-in's name (``def cosh x = ...``, ``primitive cosh x =
    ...``) shadows the built-in in the definitions after it (LANGUAGE.md section 10), so
    printed as it is, a later use of the built-in itself (the partial ``cosh x`` that the
    transformations write for ``sinh x``, ``seed`` and ``cotangent`` in reverse mode) would
    parse back as a use of the definition.  Such a definition, when a later declaration
    uses the built-in (or ``used_after`` names it: what is printed after the
    declarations), is renamed ``cosh'1`` (the first such name no declaration uses), its own
    uses with it; so is a definition of a ``reserved`` name (``main``, when a ``main`` is
    printed after the declarations).  Never fails."""
    reserved = frozenset(reserved)
    used_after = frozenset(used_after)
    later = set(used_after)
    # The built-in names used by each declaration and all those after it.
    uses_from: list[set[str]] = [set() for _ in decls]
    for index in range(len(decls) - 1, -1, -1):
        later |= _builtin_uses(decls[index])
        uses_from[index] = set(later)
    taken: set[str] | None = None
    variables: dict[str, str] = {}  # definition renamed: its new name
    primitives: dict[str, Primitive] = {}  # declared primitive renamed: its new entry
    renamed: dict[str, str] = {}
    out: list[Decl] = []
    for index, decl in enumerate(decls):
        entry = declared_by(decl.name, decl.value)
        if variables or primitives:
            if entry is not None:
                entry = _renamed_declaration(entry, primitives)
                decl = attrs.evolve(decl, value=declaring(entry, decl.value.span))
            else:
                decl = attrs.evolve(decl, value=_renamed(decl.value, variables, primitives))
        name = decl.name
        after = uses_from[index + 1] if index + 1 < len(decls) else used_after
        if (name in _BUILTIN_NAMES and name in after) or name in reserved:
            if taken is None:
                taken = {d.name for d in decls} | names_in(*(d.value for d in decls))
            new = numbered(f"{name}'", taken)
            taken.add(new)
            renamed[name] = new
            if entry is not None:
                entry = declare(new, entry.declaration, entry.doc)
                primitives[name] = entry
                variables.pop(name, None)
                decl = attrs.evolve(decl, name=new, value=declaring(entry, decl.value.span))
            else:
                variables[name] = new
                primitives.pop(name, None)
                decl = attrs.evolve(decl, name=new)
        elif name in variables or name in primitives:  # a later definition of the name
            variables.pop(name, None)
            primitives.pop(name, None)
        out.append(decl)
    return out, renamed


def _builtin_uses(decl: Decl) -> set[str]:
    """The names of the built-ins ``decl`` uses by name (a declared primitive: in its body
    and partials)."""
    entry = declared_by(decl.name, decl.value)
    if entry is None:
        return builtin_uses(decl.value)
    return builtin_uses(entry.declaration.body, *entry.declaration.partials)


def builtin_uses(*terms: Term) -> set[str]:
    """The names by which ``terms`` use built-ins (``cosh``, ``seed``; not operators, nor
    primitives the program declares).  Never fails."""
    found = set()
    for term in terms:
        for node in walk(term):
            name = _builtin_use(node)
            if name is not None and not _declared_use(node):
                found.add(name)
    return found


def _declared_use(term: Term) -> bool:
    """Whether ``term`` applies or names a primitive the program declares."""
    return (isinstance(term, Prim) and term.op.__class__ is DeclaredName) or (
        isinstance(term, Builtin) and term.name.__class__ is DeclaredName)


def _renamed_declaration(entry: Primitive, primitives: dict[str, Primitive]) -> Primitive:
    """``entry``, or a new entry of the same name whose body and partials apply the
    ``primitives`` renamed."""
    declaration = entry.declaration
    terms = [declaration.body, *declaration.partials]
    new_terms = [_renamed(term, {}, primitives) for term in terms]
    if all(a is b for a, b in zip(terms, new_terms)):
        return entry
    return declare(str(entry.name), attrs.evolve(
        declaration, body=new_terms[0], partials=tuple(new_terms[1:])), entry.doc)


def _renamed(term: Term, variables: dict[str, str], primitives: dict[str, Primitive]) -> Term:
    """``term`` with its free variables of ``variables`` renamed, and its uses of the
    declared primitives named in ``primitives`` made uses of their new entries."""

    def visit(t: Term, variables: dict[str, str]):
        if isinstance(t, Var):
            new = variables.get(t.name)
            return t if new is None else attrs.evolve(t, name=new)
        if isinstance(t, Prim) and t.op.__class__ is DeclaredName and str(t.op) in primitives:
            t = attrs.evolve(t, op=primitives[str(t.op)].name)
        elif isinstance(t, Builtin) and t.name.__class__ is DeclaredName \
                and str(t.name) in primitives:
            return attrs.evolve(t, name=primitives[str(t.name)].name)
        kids = []
        changed = False
        for kid, names in zip(children(t), binders(t)):
            inner = variables
            if variables and any(name in variables for name in names):
                inner = {k: v for k, v in variables.items() if k not in names}
            new_kid = yield visit(kid, inner)
            changed = changed or new_kid is not kid
            kids.append(new_kid)
        return with_children(t, kids) if changed else t

    return run(visit(term, variables))


# Binding levels, loosest first: the operators' levels come from the primitive table.
_BINDER = LEVEL_OR - 2  # let, \x -> e, \a -o e, if: they extend as far right as they can
_SUM = LEVEL_OR - 1  # e1 <+> e2, the loosest binary operator
_ATOM = LEVEL_APP + 1  # literals, names, (...), [...]

WIDTH = 88  # a term that fits in this many columns is printed on one line
_MAX_INDENT = 48  # deeper nesting is not indented further (10^4 levels must stay linear)

# Names that mean a built-in when free: a binder of that name must not capture one.
_BUILTIN_NAMES = frozenset(NAMED) | frozenset(LINEAR_NAMES)


class _Sub:
    """A sub-term still to print: the binding ``level`` its context needs, the ``indent`` of its
    continuation lines (``None``: the current column), the renaming of bound names in scope,
    and whether it is already known to be on one line."""

    __slots__ = ("term", "level", "indent", "env", "flat")

    def __init__(self, term: Term, level: int, indent: int | None, env: dict[str, str],
                 flat: bool = False):
        self.term = term
        self.level = level
        self.indent = indent
        self.env = env
        self.flat = flat


class _Break:
    """A line break followed by ``indent`` spaces."""

    __slots__ = ("indent",)

    def __init__(self, indent: int):
        self.indent = indent


def _real(value: float) -> str:
    """The shortest text reading back as ``value``: ``2``, ``0.5``, ``1e-10``; ``(-1)``."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"cannot print the non-finite real {value!r}")
    text = repr(abs(value))
    if text.endswith(".0"):
        text = text[:-2]
    # A literal is never negative: a negative constant is a parenthesised negation.
    return f"(-{text})" if str(value).startswith("-") else text


def _spelling(name: str):
    return PRIMITIVES[name].spelling


def _is_false(term: Term) -> bool:
    return isinstance(term, BoolLit) and term.value is False


def _is_true(term: Term) -> bool:
    return isinstance(term, BoolLit) and term.value is True


def _builtin_use(term: Term) -> str | None:
    """The name by which ``term`` refers to a built-in, if it is written as a free name."""
    if isinstance(term, (Builtin, Prim)):
        spelling = _spelling(term.op if isinstance(term, Prim) else term.name)
        return str(spelling.symbol) if spelling.fixity == "function" else None
    if isinstance(term, Zero):
        return "zero"
    if isinstance(term, Seed):
        return "seed"
    if isinstance(term, ReadOff):
        return "cotangent"
    return None


class _Printer:
    """The text of some terms, laid out (see the module docstring)."""

    def __init__(self, roots: Iterable[Term]):
        self.roots = list(roots)
        self.out: list[str] = []
        self.column = 0
        self.size: dict[int, int] = {}
        self.multiline: set[int] = set()
        self.taken: set[str] | None = None
        for root in self.roots:
            self.measure(root)

    # ---- measuring: one-line width of every sub-term, and whether it must span lines

    def measure(self, root: Term) -> None:
        """Fill ``size`` and ``multiline`` for ``root`` and its sub-terms, bottom-up."""
        stack: list[tuple[Term, bool]] = [(root, False)]
        while stack:
            term, done = stack.pop()
            if id(term) in self.size:
                continue
            kids = list(children(term))
            if not done:
                stack.append((term, True))
                stack.extend((kid, False) for kid in kids)
                continue
            size = self.own_width(term) + sum(self.size[id(kid)] + 1 for kid in kids)
            self.size[id(term)] = size
            chain = isinstance(term, (Let, LetPair)) and isinstance(term.body, (Let, LetPair))
            if chain:  # the last `let` of a chain gets its own line too
                self.multiline.add(id(term.body))
            if chain or any(id(kid) in self.multiline for kid in kids):
                self.multiline.add(id(term))

    @staticmethod
    def own_width(term: Term) -> int:
        """Roughly the width of ``term``'s own keywords and names (its sub-terms excluded)."""
        if isinstance(term, Const):
            return len(repr(term.value))
        if isinstance(term, (Var, Builtin)):
            return len(term.name)
        if isinstance(term, Prim):
            return len(_spelling(term.op).symbol) + 2
        if isinstance(term, Lam):
            typed = 12 if term.param_type is not None else 0
            return len(term.param) + 5 + typed
        if isinstance(term, Let):
            return len(term.name) + 10
        if isinstance(term, LetPair):
            return len(term.first) + len(term.second) + 14
        if isinstance(term, Annot):
            return len(print_type(term.type)) + 5
        # `seed i`: 5 for "seed ", less the 2 by which a literal index's estimate (repr,
        # `0.0`) exceeds its printed form (`0`)
        widths = {BoolLit: 5, App: 0, Pair: 4, If: 16, ListLit: 2, LinLam: 6, Zero: 4,
                  Plus: 5, Seed: 3, ReadOff: 10}
        return widths.get(type(term), 8)

    def fits(self, term: Term) -> bool:
        return id(term) not in self.multiline and self.column + self.size[id(term)] <= WIDTH

    # ---- output

    def write(self, text: str) -> None:
        self.out.append(text)
        newline = text.rfind("\n")
        self.column = self.column + len(text) if newline < 0 else len(text) - newline - 1

    def text(self) -> str:
        return "".join(self.out)

    def emit(self, root: Any) -> None:
        """Print ``root`` (a piece: text, a break or a sub-term) and everything it expands to."""
        stack = [root]
        while stack:
            piece = stack.pop()
            if isinstance(piece, str):
                self.write(piece)
            elif isinstance(piece, _Break):
                self.write("\n" + " " * piece.indent)
            else:
                stack.extend(reversed(self.expand(piece)))

    def expand(self, sub: _Sub) -> list:
        """The pieces of one sub-term, parenthesised if its context binds tighter."""
        term = sub.term
        flat = sub.flat or self.fits(term)
        indent = min(self.column if sub.indent is None else sub.indent, _MAX_INDENT)
        arm = _ARMS.get(type(term))
        if arm is None:
            raise TypeError(f"cannot print {type(term).__name__}")
        level, pieces = arm(self, term, indent, sub.env, flat)
        if level < sub.level:
            return ["(", *pieces, ")"]
        return pieces

    # ---- names: a binder that would capture a built-in written inside its scope is renamed

    def bind(self, env: dict[str, str], name: str, scope: Term) -> tuple[str, dict[str, str]]:
        """The printed name of a binder of ``name`` over ``scope``, and the renaming inside."""
        if name in _BUILTIN_NAMES and any(_builtin_use(t) == name for t in walk(scope)):
            new = self.fresh(name)
            return new, {**env, name: new}
        if name in env:
            env = {key: value for key, value in env.items() if key != name}
        return name, env

    def fresh(self, base: str) -> str:
        if self.taken is None:
            self.taken = set(_BUILTIN_NAMES) | names_in(*self.roots)
        name = numbered(base, self.taken)
        self.taken.add(name)
        return name

    def parameters(self, term: Term, env: dict[str, str]) -> tuple[list[str], Term, dict]:
        """``\\x -> \\(y : A) -> e`` as the parameter texts ``x``, ``(y : A)`` and the body
        ``e``; stops before a name already used (``\\x x -> e`` would not parse)."""
        params: list[str] = []
        seen: set[str] = set()
        while isinstance(term, Lam) and term.param not in seen:
            name, env = self.bind(env, term.param, term.body)
            if term.param_type is None:
                params.append(name)
            else:
                params.append(f"({name} : {print_type(term.param_type)})")
            if term.param != "_":
                seen.add(term.param)
            term = term.body
        return params, term, env

    def definition(self, head: list, value: Term, indent: int, env: dict[str, str],
                   flat: bool, sugar: bool = True) -> list:
        """``head params [: T] = value`` for ``def`` and ``let``: with ``sugar``, the value's
        lambdas become parameters and an annotation of their body the result type."""
        params, body = [], value
        if sugar:
            params, body, env = self.parameters(value, env)
        pieces = list(head)
        for param in params:
            pieces.extend((" ", param))
        if sugar and isinstance(body, Annot):
            pieces.append(f" : {print_type(body.type)}")
            body = body.expr
        pieces.append(" =")
        inner = indent + 2
        if not flat and not self.fits_after(pieces, body):
            pieces.extend((_Break(inner), _Sub(body, _BINDER, inner, env)))
        else:
            pieces.extend((" ", _Sub(body, _BINDER, inner, env, flat)))
        return pieces

    def fits_after(self, pieces: list, term: Term) -> bool:
        width = sum(len(p) for p in pieces if isinstance(p, str)) + 1
        return id(term) not in self.multiline and self.column + width + self.size[id(term)] <= WIDTH

    def emit_decl(self, decl: Decl) -> None:
        """Print ``def f params [: T] = e``, or the ``primitive`` declaration it stands for."""
        declared = declared_by(decl.name, decl.value)
        if declared is not None:
            self.write(_primitive_declaration(declared))
            return
        flat = self.fits_after(["def ", decl.name, " = "], decl.value)
        for piece in self.definition(["def ", decl.name], decl.value, 0, {}, flat):
            self.emit(piece)

    # ---- arms: (binding level, pieces) of each construct, given its indentation and mode

    def _const(self, term: Const, indent, env, flat):
        """A real literal ``2.5``."""
        return _ATOM, [_real(term.value)]

    def _bool(self, term: BoolLit, indent, env, flat):
        """``true`` / ``false``."""
        return _ATOM, ["true" if term.value else "false"]

    def _var(self, term: Var, indent, env, flat):
        """``x``."""
        return _ATOM, [env.get(term.name, term.name)]

    def _builtin(self, term: Builtin, indent, env, flat):
        """A built-in as a value: its name; an operator has no name, so it is eta-expanded."""
        spelling = _spelling(term.name)
        if spelling.fixity == "function":
            return _ATOM, [spelling.symbol]
        params = PRIMITIVES[term.name].params
        if spelling.fixity == "prefix":
            return _ATOM, [f"(\\{params[0]} -> {spelling.symbol}{params[0]})"]
        return _ATOM, [f"(\\{' '.join(params)} -> {f' {spelling.symbol} '.join(params)})"]

    def _prim(self, term: Prim, indent, env, flat):
        """``x + y``, ``-x``, ``sin x``: per the primitive's spelling."""
        spelling = _spelling(term.op)
        level = spelling.level
        if spelling.fixity == "infix":
            left_level = level if spelling.assoc == "left" else level + 1
            right_level = level if spelling.assoc == "right" else level + 1
            left, right = term.args
            return level, [_Sub(left, left_level, indent, env, flat), f" {spelling.symbol} ",
                           _Sub(right, right_level, indent, env, flat)]
        if spelling.fixity == "prefix":
            # `--x` would be a comment: a nested negation is parenthesised.
            return level, [spelling.symbol, _Sub(term.args[0], level + 1, indent, env, flat)]
        pieces: list = [spelling.symbol]
        gap = self.gap(indent, flat)
        for arg in term.args:
            pieces.extend((gap, _Sub(arg, _ATOM, None, env, flat)))
        return LEVEL_APP, pieces

    @staticmethod
    def gap(indent: int, flat: bool) -> str | _Break:
        """What separates the arguments of an application: a space, or (when the application
        does not fit) a line break, one argument per line."""
        return " " if flat else _Break(indent + 2)

    def _app(self, term: App, indent, env, flat):
        """``f a1 ... an``; a built-in head given its arity of arguments is grouped,
        ``(map f) xs``, or it would read back as the primitive applied."""
        args = []
        head: Term = term
        while isinstance(head, App):
            args.append(head.arg)
            head = head.fn
        args.reverse()
        pieces: list = []
        rest = args
        gap = self.gap(indent, flat)
        if isinstance(head, Builtin) and _spelling(head.name).fixity == "function":
            arity = PRIMITIVES[head.name].arity
            if len(args) >= arity:
                pieces.extend(("(", _Sub(head, _ATOM, None, env, flat)))
                for arg in args[:arity - 1]:
                    pieces.extend((" ", _Sub(arg, _ATOM, None, env, flat)))
                pieces.append(")")
                rest = args[arity - 1:]
        if not pieces:
            pieces.append(_Sub(head, LEVEL_APP, indent, env, flat))
        for arg in rest:
            pieces.extend((gap, _Sub(arg, _ATOM, None, env, flat)))
        return LEVEL_APP, pieces

    def _lam(self, term: Lam, indent, env, flat):
        """``\\x (y : A) -> e``."""
        params, body, env = self.parameters(term, env)
        return _BINDER, ["\\", " ".join(params), " ->", *self.body(body, indent, env, flat)]

    def _linlam(self, term: LinLam, indent, env, flat):
        """``\\a -o e``."""
        name, env = self.bind(env, term.param, term.body)
        return _BINDER, ["\\", name, " -o", *self.body(term.body, indent, env, flat)]

    def body(self, body: Term, indent: int, env: dict[str, str], flat: bool) -> list:
        """A lambda's body: on the same line, or indented on the next."""
        if flat or self.fits_after([" "], body):
            return [" ", _Sub(body, _BINDER, indent + 2, env, flat)]
        return [_Break(indent + 2), _Sub(body, _BINDER, indent + 2, env)]

    def _let(self, term: Let, indent, env, flat):
        """``let x = e1 in e2``, with ``let f x = e1 in e2`` for a function value."""
        name, inner = self.bind(env, term.name, term.body)
        pieces = self.definition(["let ", name], term.value, indent, env, flat)
        return _BINDER, [*pieces, " in", *self.continuation(term.body, indent, inner, flat)]

    def _letpair(self, term: LetPair, indent, env, flat):
        """``let (x, y) = e1 in e2``."""
        first, inner = self.bind(env, term.first, term.body)
        second, inner = self.bind(inner, term.second, term.body)
        head = ["let ", f"({first}, {second})"]
        pieces = self.definition(head, term.value, indent, env, flat, sugar=False)
        return _BINDER, [*pieces, " in", *self.continuation(term.body, indent, inner, flat)]

    @staticmethod
    def continuation(body: Term, indent: int, env: dict[str, str], flat: bool) -> list:
        """The body of a ``let``: on the next line, under the ``let``."""
        if flat:
            return [" ", _Sub(body, _BINDER, indent, env, True)]
        return [_Break(indent), _Sub(body, _BINDER, indent, env)]

    def _if(self, term: If, indent, env, flat):
        """``if c then e1 else e2``; ``a && b`` and ``a || b`` for their desugared forms."""
        if _is_false(term.orelse):
            return LEVEL_AND, [_Sub(term.cond, LEVEL_AND, indent, env, flat), " && ",
                               _Sub(term.then, LEVEL_COMPARE, indent, env, flat)]
        if _is_true(term.then):
            return LEVEL_OR, [_Sub(term.cond, LEVEL_OR, indent, env, flat), " || ",
                              _Sub(term.orelse, LEVEL_AND, indent, env, flat)]
        if flat:
            return _BINDER, ["if ", _Sub(term.cond, _BINDER, indent, env, True), " then ",
                             _Sub(term.then, _BINDER, indent, env, True), " else ",
                             _Sub(term.orelse, _BINDER, indent, env, True)]
        inner = indent + 2
        pieces = ["if ", _Sub(term.cond, _BINDER, inner, env), " then", _Break(inner),
                  _Sub(term.then, _BINDER, inner, env), _Break(indent), "else"]
        orelse = term.orelse
        if isinstance(orelse, If) and not _is_false(orelse.orelse) and not _is_true(orelse.then):
            pieces.extend((" ", _Sub(orelse, _BINDER, indent, env)))  # else if ...
        else:
            pieces.extend((_Break(inner), _Sub(orelse, _BINDER, inner, env)))
        return _BINDER, pieces

    def _pair(self, term: Pair, indent, env, flat):
        """``(e1, e2)``.  A right-nested pair keeps its inner parentheses, ``(x, (x', x_))``:
        ``(a, b, c)`` would read back the same, but the nesting is the type's shape (dual
        numbers, gradients in the shape of the input) and the reader should see it."""
        return _ATOM, ["(", *self.items([term.first, term.second], env, flat), ")"]

    def items(self, items: list[Term], env: dict[str, str], flat: bool) -> list:
        pieces: list = []
        for index, item in enumerate(items):
            if index:
                pieces.append(", ")
            pieces.append(_Sub(item, _BINDER, None, env, flat))
        return pieces

    def _list(self, term: ListLit, indent, env, flat):
        """``[e1, ..., en]``."""
        return _ATOM, ["[", *self.items(list(term.items), env, flat), "]"]

    def _annot(self, term: Annot, indent, env, flat):
        """``(e : A)``."""
        return _ATOM, ["(", _Sub(term.expr, _BINDER, None, env, flat),
                       f" : {print_type(term.type)})"]

    def _zero(self, term: Zero, indent, env, flat):
        """``zero``."""
        return _ATOM, ["zero"]

    def _plus(self, term: Plus, indent, env, flat):
        """``e1 <+> e2`` (left-associative, the loosest operator)."""
        return _SUM, [_Sub(term.left, _SUM, indent, env, flat), " <+> ",
                      _Sub(term.right, LEVEL_OR, indent, env, flat)]

    def _seed(self, term: Seed, indent, env, flat):
        """``seed i``, ``seed (k + i)``."""
        return LEVEL_APP, ["seed ", _Sub(term.index, _ATOM, None, env, flat)]

    def _readoff(self, term: ReadOff, indent, env, flat):
        """``cotangent x e``."""
        return LEVEL_APP, ["cotangent ", _Sub(term.point, _ATOM, None, env, flat), " ",
                           _Sub(term.cotangent, _ATOM, None, env, flat)]


_ARMS: dict[type, Any] = {
    Const: _Printer._const,
    BoolLit: _Printer._bool,
    Var: _Printer._var,
    Builtin: _Printer._builtin,
    Prim: _Printer._prim,
    App: _Printer._app,
    Lam: _Printer._lam,
    LinLam: _Printer._linlam,
    Let: _Printer._let,
    LetPair: _Printer._letpair,
    If: _Printer._if,
    Pair: _Printer._pair,
    ListLit: _Printer._list,
    Annot: _Printer._annot,
    Zero: _Printer._zero,
    Plus: _Printer._plus,
    Seed: _Printer._seed,
    ReadOff: _Printer._readoff,
}
