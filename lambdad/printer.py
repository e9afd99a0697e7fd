"""Syntax back to source text that parses to the same syntax.

``parse_expr(print_term(t)) == t`` and ``parse_module(print_module(m)) == m`` for the terms the
parser builds and the transformations produce (source and target language).  Parentheses are
minimal: each construct has a binding level (the operators' come from their spelling in the
primitive table) and a sub-term is parenthesised only where the grammar needs it.

Layout is for people, in the style of Wadler's "prettier printer" (the documents of
:mod:`lambdad.document`): lines of at most :data:`WIDTH` columns unless a single name or
literal is longer, indentation growing by two columns a level of nesting (one inside
brackets).  What fits on its line stays on one line; otherwise a ``let`` chain has one
binding per line (the body under the ``let``, a long value indented on the line after
``=``), an ``if`` has its branches on their own lines, a lambda its body on the next line,
an application, a list or a tuple one argument or item a line, an operator chain one
operand a line (broken before each operator), a ``def`` with a long head one parameter a
line, and a type breaks before its arrows and ``*``.  ``def f = \\x -> \\y -> e`` prints as
``def f x y = e`` and ``a && b``/``a || b`` come back from their ``if`` forms.

Printing is iterative (a work list of sub-terms, documents laid out by a loop), so very
deep terms print too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from .document import HARD, LINE, Break, Group, Nest, render
from .iterate import collector_paused, run
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
    NameSupply,
    Pair,
    PairT,
    Plus,
    Prim,
    ARRAY_TYPE_NAMES,
    ArrayT,
    RealT,
    ReadOff,
    Seed,
    Term,
    Type,
    Var,
    VarT,
    Zero,
    children,
    free_vars,
    names_in,
    renamed_free,
    tuple_components,
    tuple_items,
    tuple_term,
    numbered,
    walk,
)

__all__ = ["print_type", "print_type_comment", "print_term", "print_decl", "print_module",
           "unshadowed", "builtin_uses"]


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
        elif isinstance(current, ArrayT):
            out.append(ARRAY_TYPE_NAMES[current.rank])
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
        elif isinstance(current, PairT):  # A * B * C: a component that is a tuple is bracketed
            parts: list = []
            for component in tuple_components(current):
                parts.extend((" * ", (component, 2)))
            parts = parts[1:]
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


def _type_step(t: Type, level: int):
    """The document of ``t`` in a context of binding ``level`` (see :func:`print_type`):
    a ``str`` for a type that never breaks, else a step for :func:`run`."""
    if isinstance(t, (FunT, PairT, ListT)) or (isinstance(t, CotangentT)
                                                and not isinstance(t.ring, RealT)):
        return _type_parts(t, level)
    return print_type(t, None)


def _type_parts(t: Type, level: int):
    """A step of :func:`_type_doc`: ``A -> B -> C`` and ``A * B * C`` are one group,
    broken before each arrow or ``*``; brackets indent what they hold."""
    if isinstance(t, ListT):
        return ["[", Nest(1, (yield _type_step(t.item, 0))), "]"]
    if isinstance(t, CotangentT):
        return ["d<", Nest(2, (yield _type_step(t.ring, 0))), ">"]
    pieces: list = []
    kind = type(t)
    if kind is FunT:
        current = t
        while type(current) is kind:
            pieces.append((yield _type_step(current.arg, 1)))
            linear = isinstance(current.result, CotangentT)
            pieces.extend((LINE, "-o " if linear else "-> "))
            current = current.result
        own = 0
        pieces.append((yield _type_step(current, own)))
    else:  # a tuple type: its components as written, a tuple among them bracketed
        own = 1
        for index, component in enumerate(tuple_components(t)):
            if index:
                pieces.extend((LINE, "* "))
            pieces.append((yield _type_step(component, 2)))
    doc: Any = Group(pieces)
    if level > own:
        doc = ["(", Nest(1, doc), ")"]
    return doc


# A type whose text is at most this long is never broken (`R * (R -o d)`).
_SHORT_TYPE = 16


def _type_doc(t: Type):
    """The document of the type ``t`` (:func:`print_type`'s text with its breaks); a type
    abbreviated there is its abbreviated text."""
    text = print_type(t)
    if len(text) <= _SHORT_TYPE or text.endswith("parts]") and "…" in text:
        return text
    return run(_type_step(t, 0))


def print_type_comment(name: str, t: Type, note: str = "", of: Type | None = None) -> str:
    """``-- name : T    (note of S)`` as lines of comment at most :data:`WIDTH` long: ``T``
    and ``S`` break before their arrows and ``*``, and the note in parentheses goes on a
    line of its own when the whole does not fit on one."""
    doc: list = [Group([name, " :", Nest(4, [LINE, _type_doc(t)])])]
    if note:
        remark: list = ["(", note]
        if of is not None:
            remark.extend((" of", Nest(2, [LINE, _type_doc(of)])))
        remark.append(")")
        doc = [Group([*doc, Nest(2, [Break("    "), Group(remark)])])]
    text = render(doc, WIDTH - 3, _MAX_INDENT)
    return "\n".join(f"-- {line}" for line in text.split("\n"))


def print_term(term: Term) -> str:
    """Source text of ``term``; raises ValueError for a non-finite real (it has no literal)."""
    printer = _Printer([term])
    return printer.render(printer.term(term, _BINDER, {}))


def print_decl(decl: Decl) -> str:
    """Source text of one declaration, ``def f x y = e``; raises as :func:`print_term`."""
    printer = _Printer([decl.value])
    return printer.render(printer.decl(decl))


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
    docs: list = []
    for index, decl in enumerate(module.decls):
        if index:
            docs.extend((HARD, HARD))
        docs.append(printer.decl(decl))
    return printer.render(docs) + "\n" if module.decls else ""


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
    declared primitives named in ``primitives`` made uses of their new entries (by the one
    walk renaming free variables, :func:`~lambdad.syntax.renamed_free`)."""

    def declared(t: Term) -> Term:
        if isinstance(t, Prim) and t.op.__class__ is DeclaredName and str(t.op) in primitives:
            return attrs.evolve(t, op=primitives[str(t.op)].name)
        if isinstance(t, Builtin) and t.name.__class__ is DeclaredName \
                and str(t.name) in primitives:
            return attrs.evolve(t, name=primitives[str(t.name)].name)
        return t

    return renamed_free(term, variables, declared if primitives else None)


# Binding levels, loosest first: the operators' levels come from the primitive table.
_BINDER = LEVEL_OR - 2  # let, \x -> e, \a -o e, if: they extend as far right as they can
_SUM = LEVEL_OR - 1  # e1 <+> e2, the loosest binary operator
_ATOM = LEVEL_APP + 1  # literals, names, (...), [...]

WIDTH = 88  # lines are at most this long, unless a name or literal alone is longer
_MAX_INDENT = 48  # deeper nesting is not indented further (10^4 levels must stay linear)

# Names that mean a built-in when free: a binder of that name must not capture one.
_BUILTIN_NAMES = frozenset(NAMED) | frozenset(LINEAR_NAMES)


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


def _chain(parts: list, separator: str = "") -> list:
    """``p1 sep LINE p2 sep LINE ... pn``: the items of a list or a tuple."""
    pieces: list = []
    for index, part in enumerate(parts):
        if index:
            pieces.extend((separator, LINE) if separator else (LINE,))
        pieces.append(part)
    return pieces


class _Printer:
    """The documents of some terms (see :mod:`lambdad.document`), laid out by :meth:`render`.

    An arm gives a construct's document with a placeholder for each sub-term (a
    ``Nest(0, None)``, see :meth:`term`); :meth:`render` fills them in with a loop over a
    work list, so printing needs no recursion however deep the term."""

    def __init__(self, roots: Iterable[Term]):
        self.roots = list(roots)
        self.names: NameSupply | None = None  # made when a binder is first renamed
        # Sub-terms still to write: (placeholder, term, binding level of the context, names)
        self.pending: list[tuple[Nest, Term, int, dict[str, str]]] = []

    def term(self, term: Term, level: int, env: dict[str, str]) -> Nest:
        """The placeholder of ``term`` in a context that needs binding ``level``, with the
        bound names renamed by ``env``."""
        hole = Nest(0, None)
        self.pending.append((hole, term, level, env))
        return hole

    def render(self, doc: Any) -> str:
        """The text of ``doc`` once its placeholders are filled in, laid out."""
        pending = self.pending
        with collector_paused():  # (documents are acyclic: see collector_paused)
            while pending:
                hole, term, level, env = pending.pop()
                arm = _ARMS.get(type(term))
                if arm is None:
                    raise TypeError(f"cannot print {type(term).__name__}")
                own, hole.doc = arm(self, term, env)
                if own < level:
                    hole.doc = ["(", Nest(1, hole.doc), ")"]
            return render(doc, WIDTH, _MAX_INDENT)

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
        if self.names is None:
            self.names = NameSupply(set(_BUILTIN_NAMES) | names_in(*self.roots))
        return self.names.fresh(base)

    def parameters(self, term: Term, env: dict[str, str]) -> tuple[list, Term, dict]:
        """``\\x -> \\(y : A) -> e`` as the parameter documents ``x``, ``(y : A)`` and the
        body ``e``; stops before a name already used (``\\x x -> e`` would not parse)."""
        params: list = []
        seen: set[str] = set()
        while isinstance(term, Lam) and term.param not in seen:
            name, env = self.bind(env, term.param, term.body)
            if term.param_type is None:
                params.append(name)
            else:
                params.append(self.typed(name, term.param_type))
            if term.param != "_":
                seen.add(term.param)
            term = term.body
        return params, term, env

    @staticmethod
    def typed(name: str, t: Type) -> Any:
        """``(x : A)``, broken inside ``A`` when it does not fit."""
        return Group(["(", name, " : ", Nest(2, _type_doc(t)), ")"])

    def definition(self, head: Any, value: Term, env: dict[str, str], tail: str = "",
                   sugar: bool = True) -> Group:
        """``head params [: T] = value tail`` for ``def`` and ``let``: with ``sugar``, the
        value's lambdas become parameters and an annotation of their body the result type.
        The value goes on the next line when the whole does not fit; parameters go on lines
        of their own, indented twice, when the head does not fit."""
        params, body = [], value
        if sugar:
            params, body, env = self.parameters(value, env)
        if sugar and isinstance(body, Annot):
            params.append(Group([": ", Nest(2, _type_doc(body.type))]))
            body = body.expr
        lhs = Group([head, Nest(4, [LINE, *_chain(params)]), " ="]) if params else [head, " ="]
        return Group([lhs, Nest(2, [LINE, self.term(body, _BINDER, env)]), tail])

    def decl(self, decl: Decl) -> Any:
        """``def f params [: T] = e``, or the ``primitive`` declaration it stands for."""
        declared = declared_by(decl.name, decl.value)
        if declared is not None:
            first, *more = _primitive_declaration(declared).split("\n")
            return [first, *(piece for line in more for piece in (HARD, line))]
        return self.definition(f"def {decl.name}", decl.value, {})

    # ---- arms: (binding level, document) of each construct

    def _const(self, term: Const, env):
        """A real literal ``2.5``."""
        return _ATOM, _real(term.value)

    def _bool(self, term: BoolLit, env):
        """``true`` / ``false``."""
        return _ATOM, "true" if term.value else "false"

    def _var(self, term: Var, env):
        """``x``."""
        return _ATOM, env.get(term.name, term.name)

    def _builtin(self, term: Builtin, env):
        """A built-in as a value: its name; an operator has no name, so it is eta-expanded."""
        spelling = _spelling(term.name)
        if spelling.fixity == "function":
            return _ATOM, spelling.symbol
        params = PRIMITIVES[term.name].params
        if spelling.fixity == "prefix":
            return _ATOM, f"(\\{params[0]} -> {spelling.symbol}{params[0]})"
        return _ATOM, f"(\\{' '.join(params)} -> {f' {spelling.symbol} '.join(params)})"

    def _prim(self, term: Prim, env):
        """``x + y``, ``-x``, ``sin x``: per the primitive's spelling; a long operation breaks
        before its operator."""
        spelling = _spelling(term.op)
        level = spelling.level
        if spelling.fixity == "infix":
            return level, self.operations(term, env)
        if spelling.fixity == "prefix":
            # `--x` would be a comment: a nested negation is parenthesised.
            return level, [spelling.symbol, self.term(term.args[0], level + 1, env)]
        return LEVEL_APP, self.applied(spelling.symbol,
                                       [self.term(arg, _ATOM, env) for arg in term.args])

    @staticmethod
    def infix(left: Any, symbol: str, right: Any) -> Group:
        """``left symbol right``, or ``left`` and ``symbol right`` on the next line."""
        return Group([left, Nest(2, [LINE, symbol, " ", right])])

    def operations(self, term: Prim | Plus, env: dict[str, str]) -> Group:
        """``e1 op e2 op ... en`` for operators of one level (``a - b + c``, ``x <+> y <+>
        z``): on one line, or broken before each operator, the operands indented."""
        level, assoc = self.operator(term)
        right_level = level if assoc == "right" else level + 1
        left_level = level if assoc == "left" else level + 1
        links: list = []  # (symbol, operand) from the right end of a left-nested chain
        current: Term = term
        while True:
            left, right = (current.left, current.right) if isinstance(current, Plus) \
                else current.args
            symbol = "<+>" if isinstance(current, Plus) else _spelling(current.op).symbol
            if assoc == "right":  # a ^ b ^ c: the chain goes right
                links.append((symbol, self.term(left, left_level, env)))
                current = right
                if self.operator(current) != (level, assoc):  # ("none": a single link)
                    first = links[0][1]
                    rest = [(sym, doc) for (sym, _), (_, doc) in zip(links, links[1:])]
                    rest.append((links[-1][0], self.term(current, right_level, env)))
                    break
            else:
                links.append((symbol, self.term(right, right_level, env)))
                current = left
                if assoc == "none" or self.operator(current) != (level, assoc):
                    first = self.term(current, left_level, env)
                    rest = links[::-1]
                    break
        tail: list = []
        for symbol, doc in rest:
            tail.extend((LINE, symbol, " ", doc))
        return Group([first, Nest(2, tail)])

    @staticmethod
    def operator(term: Term) -> tuple[int, str | None] | None:
        """The level and associativity of ``term``'s operator, if it is an infix one."""
        if isinstance(term, Plus):
            return _SUM, "left"
        if isinstance(term, Prim):
            spelling = _spelling(term.op)
            if spelling.fixity == "infix":
                return spelling.level, spelling.assoc
        return None

    @staticmethod
    def applied(head: Any, args: list) -> Group:
        """``f a1 ... an`` on one line, or each argument on a line of its own."""
        if not args:
            return head
        return Group([head, Nest(2, [LINE, *_chain(args)])])

    def _app(self, term: App, env):
        """``f a1 ... an``; a built-in head given its arity of arguments is grouped,
        ``(map f) xs``, or it would read back as the primitive applied."""
        args = []
        head: Term = term
        while isinstance(head, App):
            args.append(head.arg)
            head = head.fn
        args.reverse()
        rest = args
        if isinstance(head, Builtin) and _spelling(head.name).fixity == "function" \
                and len(args) >= PRIMITIVES[head.name].arity:
            arity = PRIMITIVES[head.name].arity
            inner = self.applied(self.term(head, _ATOM, env),
                                 [self.term(arg, _ATOM, env) for arg in args[:arity - 1]])
            first: Any = ["(", Nest(1, inner), ")"]
            rest = args[arity - 1:]
        else:
            first = self.term(head, LEVEL_APP, env)
        return LEVEL_APP, self.applied(first, [self.term(arg, _ATOM, env) for arg in rest])

    def _lam(self, term: Lam, env):
        """``\\x (y : A) -> e``."""
        params, body, env = self.parameters(term, env)
        head = ["\\"]
        for index, param in enumerate(params):
            head.extend((" ", param) if index else (param,))
        return _BINDER, self.lambda_([*head, " ->"], body, env)

    def _linlam(self, term: LinLam, env):
        """``\\a -o e``."""
        name, env = self.bind(env, term.param, term.body)
        return _BINDER, self.lambda_(f"\\{name} -o", term.body, env)

    def lambda_(self, head: Any, body: Term, env: dict[str, str]) -> Group:
        """A lambda: its body on the same line, or indented on the next."""
        return Group([head, Nest(2, [LINE, self.term(body, _BINDER, env)])])

    def _let(self, term: Let, env):
        """``let x = e1 in e2``, with ``let f x = e1 in e2`` for a function value."""
        return _BINDER, self.lets(term, env)

    def _letpair(self, term: LetPair, env):
        """``let (x, y) = e1 in e2``."""
        return _BINDER, self.lets(term, env)

    def lets(self, term: Let | LetPair, env: dict[str, str]) -> Any:
        """A ``let`` and its body: on one line, or the body on the next line, under the
        ``let``; a chain of ``let`` has one binding per line, and its body a line too."""
        pieces: list = []
        current: Term = term
        while isinstance(current, (Let, LetPair)):
            if pieces:
                pieces.append(HARD)
            if isinstance(current, Let):
                name, inner = self.bind(env, current.name, current.body)
                pieces.append(self.definition(f"let {name}", current.value, env, " in"))
            else:
                names, body, inner = self.pattern(current, env)
                pieces.append(self.definition(f"let ({', '.join(names)})", current.value,
                                              env, " in", sugar=False))
                current, env = body, inner
                continue
            current, env = current.body, inner
        pieces.extend((LINE if len(pieces) == 1 else HARD, self.term(current, _BINDER, env)))
        return Group(pieces)

    def pattern(self, term: LetPair, env: dict[str, str]
                ) -> tuple[list[str], Term, dict[str, str]]:
        """The printed names of the pattern of ``term``, the body after it and the renaming
        there.  A k-tuple pattern (arity k > 2) absorbs the LetPair taking its rest apart,
        ``let (a, r) = t in let (b, c) = r in e`` (arity 3) being ``let (a, b, c) = t in
        e``; a rest used otherwise is bound to the tuple of fresh names its components get,
        ``let (a, r1, r2) = t in let r = (r1, r2) in e``."""
        names: list[str] = []
        written: set[str] = set()
        current = term
        while True:
            first, env = self.bind(env, current.first, current.body)
            names.append(first)
            written.add(current.first)
            if current.arity == 2:
                second, env = self.bind(env, current.second, current.body)
                names.append(second)
                return names, current.body, env
            rest = current.body
            if isinstance(rest, LetPair) and rest.arity == current.arity - 1 \
                    and isinstance(rest.value, Var) and rest.value.name == current.second \
                    and not written & {rest.first, rest.second} - {"_"} \
                    and current.second not in free_vars(rest.body):
                current = rest
                continue
            parts = [self.fresh("r") for _ in range(current.arity - 1)]
            names.extend(parts)
            if current.second == "_":
                return names, rest, env
            return names, Let(current.second, tuple_term([Var(p) for p in parts]), rest), env

    def _if(self, term: If, env):
        """``if c then e1 else e2``; ``a && b`` and ``a || b`` for their desugared forms.
        Broken, each branch is indented on its own line, and ``else if`` continues the
        chain."""
        if _is_false(term.orelse):
            return LEVEL_AND, self.infix(self.term(term.cond, LEVEL_AND, env), "&&",
                                         self.term(term.then, LEVEL_COMPARE, env))
        if _is_true(term.then):
            return LEVEL_OR, self.infix(self.term(term.cond, LEVEL_OR, env), "||",
                                        self.term(term.orelse, LEVEL_AND, env))
        pieces: list = []
        current: Term = term
        while True:
            pieces.extend(("if ", self.term(current.cond, _BINDER, env), " then",
                           Nest(2, [LINE, self.term(current.then, _BINDER, env)]),
                           LINE, "else"))
            current = current.orelse
            if not isinstance(current, If) or _is_false(current.orelse) \
                    or _is_true(current.then):
                break
            pieces.append(" ")
        pieces.append(Nest(2, [LINE, self.term(current, _BINDER, env)]))
        return _BINDER, Group(pieces)

    def _pair(self, term: Pair, env):
        """``(e1, e2)`` and the k-tuple ``(e1, ..., ek)``, as written: a pair nested in a pair
        keeps its parentheses, ``(x, (x', x_))``.  The rest of a k-tuple that is not
        written as a tuple (a variable, after a transformation) is taken apart first:
        ``let (r1, r2) = rest in (e1, r1, r2)``."""
        items, rest = tuple_items(term)
        if rest is None:
            return _ATOM, self.bracketed("(", items, ")", env)
        parts = [self.fresh("r") for _ in range(term.arity - len(items))]
        tuple_doc = self.bracketed("(", items + [Var(p) for p in parts], ")", env)
        head = f"let ({', '.join(parts)})"
        return _BINDER, Group([self.definition(head, rest, env, " in", sugar=False),
                               LINE, tuple_doc])

    def bracketed(self, opening: str, items: list[Term], closing: str,
                  env: dict[str, str]) -> Group:
        """``(e1, e2)``, ``[e1, ..., en]``: on one line, or one item a line."""
        docs = [self.term(item, _BINDER, env) for item in items]
        return Group([opening, Nest(1, _chain(docs, ",")), closing])

    def _list(self, term: ListLit, env):
        """``[e1, ..., en]``."""
        return _ATOM, self.bracketed("[", list(term.items), "]", env)

    def _annot(self, term: Annot, env):
        """``(e : A)``."""
        return _ATOM, Group(["(", Nest(1, [self.term(term.expr, _BINDER, env), LINE, ": ",
                                           Nest(2, _type_doc(term.type))]), ")"])

    def _zero(self, term: Zero, env):
        """``zero``."""
        return _ATOM, "zero"

    def _plus(self, term: Plus, env):
        """``e1 <+> e2`` (left-associative, the loosest operator)."""
        return _SUM, self.operations(term, env)

    def _seed(self, term: Seed, env):
        """``seed i``, ``seed (k + i)``."""
        return LEVEL_APP, ["seed ", self.term(term.index, _ATOM, env)]

    def _readoff(self, term: ReadOff, env):
        """``cotangent x e``."""
        return LEVEL_APP, self.applied("cotangent", [self.term(term.point, _ATOM, env),
                                                     self.term(term.cotangent, _ATOM, env)])


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
