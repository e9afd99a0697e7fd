"""Hindley–Milner type inference with let-polymorphism (LANGUAGE.md §5), for source terms and
for the target language of AD.md §4 (``d``, ``\\a -o e``, ``zero``, ``<+>``, ``seed i``,
``cotangent x e``).

Inference is algorithm J with levels: type variables are unified in place through a binding
map, and each flexible variable records the ``let`` depth at which it was created, so a
``let`` generalises exactly the variables younger than itself without scanning the
environment.  Every pass over terms and types is iterative (terms are visited by generator
functions driven by :func:`lambdad.iterate.run`, types with explicit stacks), so programs and
types nested 10^4 deep are fine.

Type variables written in annotations are *rigid*: within one top-level declaration a name
means one variable, which unifies only with itself (and with flexible variables).  The
declaration's scheme generalises them with the rest.

Results: the scheme of every top-level name, and a table ``types`` mapping ``id(node)`` of
every term node to its fully substituted type.  The table is keyed by identity because equal
nodes at different places can have different types; callers keep the terms alive while they
use it.  Inside one declaration (or term) the variables left in its types are named
``a, b, c, e, ...`` (``d`` is the cotangent type), the declaration's own scheme first.
"""

from __future__ import annotations

import difflib
import itertools
import re
import string
from types import GeneratorType
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from .errors import LambdadError, Span, TypeCheckError
from .iterate import Step, run
from .persistent import PersistentMap
from .primitives import NAMED, PRIMITIVES, Primitive, declared_by
from .printer import print_term, print_type
from .syntax import (
    BACKPROPAGATOR,
    BOOL,
    COTANGENT,
    REAL,
    Annot,
    App,
    BoolLit,
    BoolT,
    Builtin,
    Const,
    CotangentT,
    backpropagator_type,
    FunT,
    If,
    Let,
    LetPair,
    Lam,
    LinLam,
    ListLit,
    ListT,
    Module,
    Pair,
    PairT,
    Plus,
    Prim,
    ReadOff,
    RealT,
    Seed,
    Term,
    Type,
    Var,
    VarT,
    Zero,
    children,
    free_vars,
    with_children,
)

__all__ = [
    "ModuleTyping",
    "Scheme",
    "TermTyping",
    "TypeEnv",
    "check_term",
    "infer_module",
    "infer_term",
    "print_scheme",
]


# --------------------------------------------------------------------------- schemes


@attrs.frozen
class Scheme:
    """``∀ vars. type``: the type of a ``let``- or ``def``-bound name.  Variables of ``type``
    not listed in ``vars`` are fixed (they belong to an enclosing scope)."""

    vars: tuple[str, ...]
    type: Type

    def __str__(self) -> str:
        return print_scheme(self)


def print_scheme(scheme: Scheme) -> str:
    """Source text of ``scheme``'s type with its quantified variables renamed ``a, b, c, ...``
    in order of first occurrence (``(a -> b) -> [a] -> [b]``); never fails."""
    quantified = set(scheme.vars)
    names = _ordered_vars(scheme.type)
    letters = _letters({name for name in names if name not in quantified})
    rename = {name: next(letters) for name in names if name in quantified}
    if all(old == new for old, new in rename.items()):
        return print_type(scheme.type)
    return print_type(_rename_vars(scheme.type, rename))


class TypeEnv(PersistentMap[Scheme]):
    """A persistent mapping from names to schemes: :meth:`extend` returns a new environment
    and leaves this one unchanged, in O(log n) (a REPL session extends its environment once
    per definition).  Primitives are not in it: the parser turns their names into
    ``Builtin``/``Prim`` nodes, typed from the primitive table."""

    __slots__ = ("_free",)

    def __init__(self, schemes: Mapping[str, Scheme] | None = None):
        super().__init__(schemes)
        self._free: frozenset[str] = _free_in(self.values())

    @classmethod
    def builtins(cls) -> "TypeEnv":
        """The environment every program starts from: empty, since every built-in is a
        primitive of the table."""
        return cls()

    def extend(self, name: str, scheme: Scheme) -> "TypeEnv":
        """This environment with ``name`` bound (or rebound) to ``scheme``."""
        return self.extend_all({name: scheme})

    def extend_all(self, schemes: Mapping[str, Scheme]) -> "TypeEnv":
        """This environment with every name of ``schemes`` bound (or rebound) to its scheme."""
        env = PersistentMap.update(self, schemes)
        if env is self:
            return self
        replaced = [self[name] for name in schemes if name in self]
        if _free_in(replaced):  # a scheme with free variables went away: count again
            env._free = _free_in(env.values())
        else:
            env._free = self._free | _free_in(schemes.values())
        return env

    update = extend_all

    @property
    def free(self) -> frozenset[str]:
        """The type variables free in the environment's schemes (not quantified there)."""
        return self._free

    def __repr__(self) -> str:
        inside = ", ".join(f"{name}: {scheme}" for name, scheme in self.items())
        return f"TypeEnv({{{inside}}})"


def _free_in(schemes: Iterable[Scheme]) -> frozenset[str]:
    """The type variables of ``schemes`` that they do not quantify."""
    free: set[str] = set()
    for scheme in schemes:
        free.update(set(_ordered_vars(scheme.type)) - set(scheme.vars))
    return frozenset(free)


@attrs.frozen(eq=False)
class ModuleTyping:
    """The typing of a module: each declaration's scheme (in order), the type of every term
    node by ``id``, and the input environment extended with the module's names."""

    schemes: dict[str, Scheme]
    types: dict[int, Type]
    env: TypeEnv


@attrs.frozen(eq=False)
class TermTyping:
    """The typing of one term: its type, that type generalised, and the type of every node."""

    type: Type
    scheme: Scheme
    types: dict[int, Type]


# --------------------------------------------------------------------------- entry points


def infer_module(module: Module, env: TypeEnv | None = None) -> ModuleTyping:
    """The typing of ``module``, each declaration generalised and visible to the next ones;
    raises TypeCheckError (located at the culprit) on the first ill-typed declaration or on
    a name defined twice."""
    env = TypeEnv.builtins() if env is None else env
    inference = _Inference(env)
    schemes: dict[str, Scheme] = {}
    types: dict[int, Type] = {}
    for decl in module.decls:
        if decl.name in schemes:
            raise TypeCheckError(f"`{decl.name}` is already defined", decl.span)
        try:
            _, scheme = inference.declaration(decl.value, types)
        except LambdadError as error:
            raise error.with_span(decl.span)
        entry = declared_by(decl.name, decl.value)
        if entry is not None:
            check_declared(entry)
        schemes[decl.name] = scheme
        inference.define(decl.name, scheme)
    return ModuleTyping(schemes, types, env.extend_all(schemes))


def check_declared(entry: Primitive) -> None:
    """Checks that the body and every partial of the declared primitive ``entry`` are reals
    (``R``) when its parameters (and ``result``) are; raises TypeCheckError located in the
    body or partial that is not (``primitive f x = x > 1``, ``partial x = true``)."""
    declaration = entry.declaration
    assert declaration is not None, f"{entry.name} is a built-in"
    reals = Scheme((), REAL)
    env = TypeEnv.builtins()
    for name in declaration.params:
        env = env.extend(name, reals)
    for index, term in enumerate((declaration.body, *declaration.partials)):
        if index == 1 and declaration.result is not None:
            env = env.extend(declaration.result, reals)
        what = (f"the body of `{entry.name}`" if index == 0 else
                f"the partial of `{entry.name}` for `{declaration.params[index - 1]}`")
        inference = _Inference(env)
        inference.declaration(term, {}, expected=REAL, message=lambda e, a: (
            f"{what} must be a real ({e}), but it has type {a}"))


def infer_term(term: Term, env: TypeEnv | None = None) -> TermTyping:
    """The typing of ``term`` in ``env`` (like the value of one declaration); raises
    TypeCheckError located at the culprit."""
    inference = _Inference(TypeEnv.builtins() if env is None else env)
    types: dict[int, Type] = {}
    final, scheme = inference.declaration(term, types)
    return TermTyping(final, scheme, types)


def check_term(term: Term, expected: Type, env: TypeEnv | None = None) -> TermTyping:
    """The typing of ``term`` at type ``expected``, whose type variables are fixed (the term
    must be at least that general); raises TypeCheckError if the term is ill-typed or its
    type does not match ``expected``."""
    env = TypeEnv.builtins() if env is None else env
    inference = _Inference(env, fixed=_ordered_vars(expected))
    types: dict[int, Type] = {}
    final, scheme = inference.declaration(term, types, expected=expected)
    return TermTyping(final, scheme, types)


# --------------------------------------------------------------------------- type helpers


def _letters(taken: set[str] | frozenset[str] = frozenset()) -> Iterator[str]:
    """Type variable names ``a, b, c, e, ..., z, a1, ...``, skipping ``taken`` and ``d``
    (which spells the cotangent type)."""
    for round_ in itertools.count():
        suffix = str(round_) if round_ else ""
        for letter in string.ascii_lowercase:
            name = letter + suffix
            if name != "d" and name not in taken:
                yield name


def _ordered_vars(t: Type) -> list[str]:
    """Names of the type variables of ``t`` in order of first occurrence; shared sub-trees
    are visited once, so a type built as a graph is not unfolded into a tree."""
    seen: dict[str, None] = {}
    visited: set[int] = set()
    stack = [t]
    while stack:
        current = stack.pop()
        if id(current) in visited:
            continue
        visited.add(id(current))
        if isinstance(current, VarT):
            seen.setdefault(current.name)
        else:
            stack.extend(reversed(children(current)))
    return list(seen)


def _rename_vars(t: Type, rename: dict[str, str]) -> Type:
    """``t`` with its variables renamed by ``rename`` (others kept), without recursion."""
    return _map_type(t, lambda v: VarT(rename.get(v.name, v.name)), lambda v: None, {})


def _map_type(
    root: Type,
    on_var: Callable[[VarT], Type],
    binding: Callable[[VarT], Type | None],
    memo: dict[int, Any],
    skip: Mapping[int, Type] | None = None,
) -> Type:
    """``root`` rebuilt bottom-up: a variable bound by ``binding`` is replaced by the image of
    its binding, any other variable ``v`` by ``on_var(v)``; unchanged sub-trees are shared.

    ``memo`` maps ``id`` of visited objects to their images (shared structure is visited
    once; the caller keeps the objects alive while ``memo`` lives).  Objects in ``skip`` are
    their own image."""
    stack: list[tuple[Type, bool]] = [(root, False)]
    while stack:
        current, expanded = stack.pop()
        key = id(current)
        if not expanded:
            if key in memo:
                continue
            if skip is not None and key in skip:
                memo[key] = current
                continue
            if isinstance(current, VarT):
                target = binding(current)
                if target is None:
                    memo[key] = on_var(current)
                else:
                    stack.append((current, True))
                    stack.append((target, False))
                continue
            kids = children(current)
            if not kids:
                memo[key] = current
                continue
            stack.append((current, True))
            stack.extend((kid, False) for kid in reversed(kids))
        elif isinstance(current, VarT):
            memo[key] = memo[id(binding(current))]
        else:
            kids = children(current)
            images = [memo[id(kid)] for kid in kids]
            same = all(image is kid for image, kid in zip(images, kids))
            memo[key] = current if same else with_children(current, images)
    return memo[id(root)]


# The most parts (constructors and leaves, written out as a tree) a type may have.  Types
# are built sharing structure, so one that doubles at each definition (``def p1 x = p0 (p0
# x)`` with ``def p0 x = (x, x)``) costs little to infer but is exponential written out;
# printing, transforming and running programs of such types would not end.  No program
# written by hand comes near the bound (a 10^5-tuple's type has 2·10^5 parts).
MAX_TYPE_PARTS = 1_000_000


def _tree_size(t: Type, sizes: dict[int, int], cap: int = MAX_TYPE_PARTS) -> int:
    """How many parts ``t`` has written out as a tree, or ``cap + 1`` if more.  ``sizes``
    remembers the sub-trees already counted (by ``id``; the caller keeps them alive), so
    shared structure is visited once.  Iterative."""
    stack: list[tuple[Type, bool]] = [(t, False)]
    while stack:
        current, expanded = stack.pop()
        key = id(current)
        if expanded:
            total = 1 + sum(sizes[id(kid)] for kid in children(current))
            sizes[key] = min(total, cap + 1)
        elif key not in sizes:
            kids = children(current)
            if not kids:
                sizes[key] = 1
                continue
            stack.append((current, True))
            stack.extend((kid, False) for kid in kids if id(kid) not in sizes)
    return sizes[id(t)]


def _too_large(t: Type, node: Term) -> TypeCheckError:
    """The error for the expression ``node`` whose type ``t`` exceeds MAX_TYPE_PARTS."""
    return TypeCheckError(
        f"this expression's type is too large: it has more than {MAX_TYPE_PARTS:,} parts "
        f"written out ({print_type(t, limit=200)})", _span(node),
        ("a type that doubles at each definition, like that of `def p1 x = p0 (p0 x)` with "
         "`def p0 x = (x, x)`, grows exponentially with the number of definitions",))


def _flexible(v: VarT) -> bool:
    """Whether ``v`` is a unification variable made by inference (the others are rigid:
    written in annotations or fixed by the caller)."""
    return v.name.startswith("?")


class _Mismatch(Exception):
    """Unification met two different type constructors (or two different rigid variables)."""

    def __init__(self, left: Type, right: Type):
        super().__init__()
        self.left = left
        self.right = right


class _Infinite(Exception):
    """The occurs check failed: ``var`` would have to equal ``type``, which contains it."""

    def __init__(self, var: VarT, type_: Type):
        super().__init__()
        self.var = var
        self.type = type_


_ABSENT = object()

# How each target-language construct is named in messages (their printed spellings).
_PLUS = "<+>"
_READ_OFF = "cotangent"


# --------------------------------------------------------------------------- inference


# The deepest tree of primitive applications typed by recursion rather than by steps.
_PRIMITIVE_TREE_DEPTH = 16


class _Inference:
    """The state of one inference run: variable bindings and levels, and the scope.

    ``scope`` maps each visible name to a :class:`Scheme` (``let``/``def``-bound, to be
    instantiated) or a bare type (``λ``-bound, monomorphic); local bindings are added and
    removed as the walk enters and leaves their bodies.
    """

    def __init__(self, env: TypeEnv, fixed: list[str] | tuple[str, ...] = ()):
        self.bindings: dict[str, Type] = {}
        self.levels: dict[str, int] = {}
        # Rigid variables free in the environment or fixed by the caller: at level 0 (never
        # generalised), and they keep their names in the results.
        self.fixed: dict[str, int] = dict.fromkeys(sorted(env.free), 0)
        self.env_free = frozenset(self.fixed)
        self.fixed.update((name, 0) for name in fixed)
        # Level of each rigid variable: the shallowest place it is mentioned or escapes to.
        self.rigid_levels: dict[str, int] = dict(self.fixed)
        self.counter = itertools.count()
        self.level = 0
        # Bindings written during one unification, so a failure can be undone and the
        # message can show the types as they were before it.
        self.trail: list[tuple[str, Type | None]] | None = None
        # Objects known to contain no unbound variable: scans skip them.
        self.ground: dict[int, Type] = {}
        # The names bound here (locals, and the module's declarations so far) over ``env``,
        # which is read, never copied: typing one declaration costs nothing per name of a
        # large environment (a REPL session's, a module of 10^5 definitions).
        self.env = env
        self.scope: dict[str, Scheme | Type] = {}
        self.visited: list[tuple[Term, Type]] = []
        self.primitive_schemes: dict[str, Scheme] = {}
        self.primitive_entries: dict[str, tuple[Primitive, int, Type | None]] = {}
        # The arms of nodes without sub-terms: plain functions, not steps.
        self.leaves: dict[type, Callable[[Any], Type]] = {
            Const: self._const,
            BoolLit: self._bool,
            Var: self._var,
            Builtin: self._builtin,
            Zero: self._zero,
        }
        # The arms of the other nodes, steps (_visit types primitive applications itself).
        self.arms: dict[type, Callable[[Any], Step[Type]]] = {
            **self.leaves,
            Lam: self._lam,
            App: self._app,
            Let: self._let,
            LetPair: self._let_pair,
            Pair: self._pair,
            If: self._if,
            ListLit: self._list,
            Annot: self._annot,
            LinLam: self._lin_lam,
            Plus: self._plus,
            Seed: self._seed,
            ReadOff: self._read_off,
        }

    # ----------------------------------------------------------- declarations

    def declaration(
        self, term: Term, types: dict[int, Type], expected: Type | None = None,
        message: Callable[[str, str], str] | None = None,
    ) -> tuple[Type, Scheme]:
        """The type and scheme of ``term`` as a top-level definition; the type of each of its
        nodes is added to ``types``.  Raises TypeCheckError (saying ``message(expected,
        actual)`` if the term's type is not ``expected``)."""
        self.level = 1
        self.rigid_levels = dict(self.fixed)
        self.visited = []
        result = run(self._visit(term))
        if expected is not None:
            self._expect(expected, result, term,
                         message or (lambda e, a: f"expected {e}, but this has type {a}"))
        self.level = 0
        # Every variable left is generalised (their levels are all >= 1), except those fixed
        # by the environment or the caller; name them in order of first occurrence, the
        # declaration's own type first, so its scheme reads a, b, c, ...
        rename: dict[str, str] = {}
        letters = _letters(frozenset(self.fixed))
        seen: list[str] = []

        def name_var(v: VarT) -> Type:
            new = rename.get(v.name)
            if new is None:
                new = rename[v.name] = v.name if v.name in self.fixed else next(letters)
                seen.append(new)
            return VarT(new)

        memo: dict[int, Any] = {}
        # Shared structure is visited once, leaves left to right: ``seen`` is in order of
        # first occurrence.
        final = _map_type(result, name_var, self._binding, memo)
        quantified = tuple(name for name in seen if name not in self.env_free)
        sizes: dict[int, int] = {}
        for node, node_type in self.visited:
            if node_type is REAL or node_type is BOOL:  # most nodes: nothing to substitute
                types[id(node)] = node_type
                continue
            zonked = types[id(node)] = _map_type(node_type, name_var, self._binding, memo)
            # Visited children first: the first type too large is the innermost one.
            if _tree_size(zonked, sizes) > MAX_TYPE_PARTS:
                self.visited = []
                raise _too_large(zonked, node)
        # Nothing of this declaration is reachable any more but through the zonked results.
        self.visited = []
        self.bindings.clear()
        self.levels.clear()
        self.ground.clear()
        return final, Scheme(quantified, final)

    def define(self, name: str, scheme: Scheme) -> None:
        """Make the top-level ``name`` visible to the following declarations."""
        self.scope[name] = scheme

    # ----------------------------------------------------------- variables

    def _fresh(self) -> VarT:
        var = VarT(f"?{next(self.counter)}")
        self.levels[var.name] = self.level
        return var

    def _binding(self, v: VarT) -> Type | None:
        return self.bindings.get(v.name)

    def _write(self, name: str, t: Type) -> None:
        if self.trail is not None:
            self.trail.append((name, self.bindings.get(name)))
        self.bindings[name] = t

    def _resolve(self, t: Type) -> Type:
        """``t`` with bound variables at its root followed (paths are compressed)."""
        if not isinstance(t, VarT):
            return t
        target = self.bindings.get(t.name)
        if target is None:
            return t
        path = [t.name]
        while isinstance(target, VarT):
            further = self.bindings.get(target.name)
            if further is None:
                break
            path.append(target.name)
            target = further
        for name in path[:-1]:
            self._write(name, target)
        return target

    def _scan(self, root: Type, on_var: Callable[[VarT], None]) -> None:
        """Call ``on_var`` once for each unbound variable of ``root``; sub-trees found to
        contain none are remembered in ``ground`` and skipped by later scans."""
        ground = self.ground
        has_var: dict[int, bool | None] = {}
        stack: list[tuple[Type, tuple[Type, ...] | None]] = [(self._resolve(root), None)]
        while stack:
            current, kids = stack.pop()
            key = id(current)
            if kids is None:
                if key in has_var or key in ground:
                    continue
                if isinstance(current, VarT):
                    has_var[key] = True
                    on_var(current)
                    continue
                kids = tuple(self._resolve(kid) for kid in children(current))
                if not kids:
                    has_var[key] = False
                    ground[key] = current
                    continue
                has_var[key] = None
                stack.append((current, kids))
                stack.extend((kid, None) for kid in kids)
            else:
                found = any(has_var.get(id(kid)) for kid in kids)
                has_var[key] = found
                if not found:
                    ground[key] = current

    def _level_of(self, v: VarT) -> int:
        if _flexible(v):
            return self.levels[v.name]
        return self.rigid_levels.get(v.name, 0)

    def _lower(self, v: VarT, level: int) -> None:
        if _flexible(v):
            if self.levels[v.name] > level:
                self.levels[v.name] = level
        elif self.rigid_levels.get(v.name, 0) > level:
            self.rigid_levels[v.name] = level

    def _bind(self, var: VarT, t: Type) -> None:
        """Bind the flexible ``var`` to ``t``; raises _Infinite if ``t`` contains ``var``.
        Variables of ``t`` move up to ``var``'s level: they are now as old as it is."""
        level = self.levels[var.name]

        def visit(v: VarT) -> None:
            if v.name == var.name:
                raise _Infinite(var, t)
            self._lower(v, level)

        self._scan(t, visit)
        self._write(var.name, t)

    def _unify(self, left: Type, right: Type) -> None:
        """Make ``left`` and ``right`` equal; raises _Mismatch or _Infinite."""
        stack = [(left, right)]
        seen: set[tuple[int, int]] = set()
        while stack:
            x, y = stack.pop()
            x, y = self._resolve(x), self._resolve(y)
            if x is y:
                continue
            x_flexible = isinstance(x, VarT) and _flexible(x)
            y_flexible = isinstance(y, VarT) and _flexible(y)
            if x_flexible or y_flexible:
                if x_flexible and y_flexible and x.name == y.name:
                    continue
                if x_flexible:
                    self._bind(x, y)
                else:
                    self._bind(y, x)
                continue
            pair = (id(x), id(y))
            if pair in seen:
                continue
            seen.add(pair)
            if type(x) is not type(y):
                raise _Mismatch(x, y)
            if isinstance(x, VarT):
                if x.name != y.name:
                    raise _Mismatch(x, y)
                continue
            stack.extend(reversed(list(zip(children(x), children(y)))))

    def _instantiate(self, scheme: Scheme) -> Type:
        """A fresh instance of ``scheme``: its quantified variables replaced by new ones."""
        if not scheme.vars:
            return scheme.type
        quantified = set(scheme.vars)
        fresh: dict[str, VarT] = {}

        def instance(v: VarT) -> Type:
            if v.name not in quantified:
                return v
            new = fresh.get(v.name)
            if new is None:
                new = fresh[v.name] = self._fresh()
            return new

        return _map_type(scheme.type, instance, self._binding, {}, self.ground)

    def _generalise(self, t: Type) -> Scheme | Type:
        """``t`` with the variables younger than the current level quantified (the ``let``
        rule of HM); ``t`` itself when there are none."""
        if t is REAL or t is BOOL:  # (most values: nothing to look at)
            return t
        names: list[str] = []

        def visit(v: VarT) -> None:
            if self._level_of(v) > self.level:
                names.append(v.name)

        self._scan(t, visit)
        return Scheme(tuple(names), t) if names else t

    def _annotation(self, t: Type) -> Type:
        """``t``, written in an annotation: its variables are rigid, and mentioned here."""
        for name in _ordered_vars(t):
            level = self.rigid_levels.get(name)
            self.rigid_levels[name] = self.level if level is None else min(level, self.level)
        return t

    def _primitive_type(self, primitive: Primitive) -> Type:
        scheme = self.primitive_schemes.get(primitive.name)
        if scheme is None:
            scheme = Scheme(tuple(_ordered_vars(primitive.type)), primitive.type)
            self.primitive_schemes[primitive.name] = scheme
        return self._instantiate(scheme)

    # ----------------------------------------------------------- errors

    def _show(self, *types: Type) -> list[str]:
        """``types`` as the user should read them: substituted, flexible variables named
        ``a, b, ...`` consistently across all of them, rigid ones as written."""
        letters = _letters(frozenset(self.rigid_levels))
        rename: dict[str, str] = {}

        def name_var(v: VarT) -> Type:
            if not _flexible(v):
                return VarT(v.name)
            new = rename.get(v.name)
            if new is None:
                new = rename[v.name] = next(letters)
            return VarT(new)

        memo: dict[int, Any] = {}
        return [print_type(_map_type(t, name_var, self._binding, memo)) for t in types]

    def _expect(
        self, expected: Type, actual: Type, culprit: Term, message: Callable[[str, str], str]
    ) -> None:
        """Unify ``expected`` with ``actual``, the type of ``culprit``; on failure raises
        TypeCheckError at ``culprit`` with ``message(expected, actual)``."""
        self.trail = []
        try:
            self._unify(expected, actual)
        except (_Mismatch, _Infinite) as failure:
            for name, old in reversed(self.trail):
                if old is None:
                    del self.bindings[name]
                else:
                    self.bindings[name] = old
            self.trail = None
            raise self._failure(failure, expected, actual, culprit, message) from None
        finally:
            self.trail = None

    def _failure(self, failure, expected, actual, culprit, message) -> TypeCheckError:
        if isinstance(failure, _Infinite):
            var, whole = self._show(failure.var, failure.type)
            return TypeCheckError(f"infinite type: {var} = {whole}", _span(culprit))
        shown_expected, shown_actual, left, right = self._show(
            expected, actual, failure.left, failure.right)
        notes = []
        for part, shown, other in ((failure.left, left, right), (failure.right, right, left)):
            if isinstance(part, VarT) and part.name not in self.fixed:
                notes.append(f"`{shown}` is a type variable of an annotation: it stands for "
                             f"any type, so it cannot be {other}")
        return TypeCheckError(message(shown_expected, shown_actual), _span(culprit),
                              tuple(notes[:1]))

    def _unknown(self, term: Var) -> TypeCheckError:
        candidates = [name for name in itertools.chain(self.scope, self.env, NAMED)]
        close = difflib.get_close_matches(term.name, candidates, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        return TypeCheckError(f"unknown name `{term.name}`{hint}", term.span)

    # ----------------------------------------------------------- the walk

    def _visit(self, term: Term) -> Step[Type] | Type:
        """The type of ``term`` (recorded for the types table): a step for :func:`run`, or
        the type itself for a leaf (most nodes of a program: no generator is made for them);
        raises TypeCheckError, located at the innermost enclosing node with a span when the
        culprit has none."""
        leaf = self.leaves.get(term.__class__)
        if leaf is None:
            if term.__class__ is not Prim:
                return self._visit_node(term)
            leaf = self._prim_of_leaves  # most primitive applications: no step either
            for arg in term.args:
                if arg.__class__ not in self.leaves:
                    if not self._shallow_primitives(term, 1):
                        return self._prim(term)
                    leaf = self._prim_tree  # arithmetic over leaves: no step either
                    break
        try:
            result = leaf(term)
        except LambdadError as error:
            raise error.with_span(_span(term))
        self.visited.append((term, result))
        return result

    def _visit_node(self, term: Term) -> Step[Type]:
        arm = self.arms.get(type(term))
        if arm is None:
            raise TypeCheckError(f"cannot type {type(term).__name__} nodes", _span(term))
        try:
            result = yield from arm(term)
        except LambdadError as error:
            raise error.with_span(_span(term))
        self.visited.append((term, result))
        return result

    def _bind_local(self, name: str, value: Scheme | Type) -> object:
        old = self.scope.get(name, _ABSENT)
        if name != "_":
            self.scope[name] = value
        return old

    def _unbind_local(self, name: str, old: object) -> None:
        if name == "_":
            return
        if old is _ABSENT:
            del self.scope[name]
        else:
            self.scope[name] = old  # type: ignore[assignment]

    def _const(self, term: Const) -> Type:
        """A real literal: ``R`` (a leaf: no step)."""
        return REAL

    def _bool(self, term: BoolLit) -> Type:
        """``true``, ``false``: ``Bool`` (a leaf: no step)."""
        return BOOL

    def _var(self, term: Var) -> Type:
        """``x``: an instance of its scheme (HM variable rule); a free primitive name means
        the primitive."""
        entry = self.scope.get(term.name)
        if entry is None:
            entry = self.env.get(term.name)
        if entry is None:
            primitive = NAMED.get(term.name)
            if primitive is None:
                raise self._unknown(term)
            return self._primitive_type(primitive)
        if isinstance(entry, Scheme):
            return self._instantiate(entry)
        return entry

    def _builtin(self, term: Builtin) -> Type:
        """A primitive as a value (``map sin``): an instance of its table type."""
        primitive = PRIMITIVES.get(term.name)
        if primitive is None:
            raise TypeCheckError(f"unknown primitive `{term.name}`", term.span)
        return self._primitive_type(primitive)

    def _prim(self, term: Prim) -> Step[Type]:
        """``x + y``, ``sin x``, ``map f xs``: each argument, left to right, against the
        parameter of an instance of the primitive's type.

        The step of the node itself, as :meth:`_visit_node` would make it (the most common
        inner node: one generator, not two)."""
        try:
            primitive, remaining = self._prim_instance(term)
            for arg in term.args:
                arg_type = self._visit(arg)
                if arg_type.__class__ is GeneratorType:  # not a leaf
                    arg_type = yield arg_type
                remaining = self._prim_argument(primitive, remaining, arg, arg_type)
        except LambdadError as error:
            raise error.with_span(_span(term))
        self.visited.append((term, remaining))
        return remaining

    def _prim_of_leaves(self, term: Prim) -> Type:
        """:meth:`_prim` of a primitive applied to leaves only (a leaf itself: no step)."""
        primitive, remaining = self._prim_instance(term)
        for arg in term.args:
            remaining = self._prim_argument(primitive, remaining, arg, self._visit(arg))
        return remaining

    def _shallow_primitives(self, term: Prim, depth: int) -> bool:
        """Whether ``term``'s arguments are leaves or primitive applications whose own are,
        and so on, at most _PRIMITIVE_TREE_DEPTH deep: typed by recursion (:meth:`_prim_tree`),
        within a bounded depth of the Python stack."""
        for arg in term.args:
            if arg.__class__ is Prim:
                if depth >= _PRIMITIVE_TREE_DEPTH or not self._shallow_primitives(arg, depth + 1):
                    return False
            elif arg.__class__ not in self.leaves:
                return False
        return True

    def _prim_tree(self, term: Prim) -> Type:
        """:meth:`_prim` of a tree of primitive applications over leaves (a leaf itself: no
        step), each inner application recorded and its errors located as :meth:`_visit`
        does (the arithmetic of a line such as ``x * x * 0.5 + sin x``)."""
        primitive, remaining = self._prim_instance(term)
        for arg in term.args:
            if arg.__class__ is Prim:
                try:
                    arg_type = self._prim_tree(arg)
                except LambdadError as error:
                    raise error.with_span(_span(arg))
                self.visited.append((arg, arg_type))
            elif arg.__class__ is Var and self.scope.get(arg.name) is REAL:
                # (what _visit gives a local real variable, inline: most operands are one)
                arg_type = REAL
                self.visited.append((arg, arg_type))
            else:
                arg_type = self._visit(arg)
            if arg_type is remaining.arg:  # (_prim_argument's first test, inline)
                remaining = remaining.result
            else:
                remaining = self._prim_argument(primitive, remaining, arg, arg_type)
        return remaining

    def _prim_instance(self, term: Prim) -> tuple[Primitive, Type]:
        """The primitive ``term`` applies and an instance of its type; raises TypeCheckError
        if there is no such primitive or ``term`` gives it the wrong number of arguments."""
        op = term.op
        # A built-in's entry and arity, looked up once per run (a declared primitive's name
        # is a str subclass that carries its own entry: looked up each time).
        entry = self.primitive_entries.get(op) if op.__class__ is str else None
        if entry is None:
            primitive = PRIMITIVES.get(op)
            if primitive is None:
                raise TypeCheckError(f"unknown primitive `{op}`", term.span)
            # (a type without variables is its own instance: most primitives' types)
            entry = (primitive, primitive.arity,
                     None if _ordered_vars(primitive.type) else primitive.type)
            if op.__class__ is str:
                self.primitive_entries[op] = entry
        primitive, arity, monotype = entry
        if len(term.args) != arity:
            raise TypeCheckError(
                f"`{primitive.spelling.symbol}` takes {arity} argument(s), but is given "
                f"{len(term.args)}", term.span)
        if monotype is not None:
            return primitive, monotype
        return primitive, self._primitive_type(primitive)

    def _prim_argument(self, primitive: Primitive, remaining: Type, arg: Term,
                       arg_type: Type) -> Type:
        """The rest of the primitive's type ``remaining`` after its next parameter takes
        ``arg`` of type ``arg_type``; raises TypeCheckError at ``arg`` if they differ."""
        assert isinstance(remaining, FunT)  # a primitive type has one arrow per parameter
        if arg_type is not remaining.arg:  # (the same type object unifies as it is)
            symbol = primitive.spelling.symbol
            try:
                self._expect(remaining.arg, arg_type, arg,
                             lambda e, a: f"`{symbol}` expects {e}, but this has type {a}")
            except TypeCheckError as error:
                error.notes += _section_hints(primitive, remaining.arg, arg)
                raise
        return remaining.result

    def _lam(self, term: Lam) -> Step[Type]:
        """``\\x -> e`` / ``\\(x : A) -> e``: ``A -> B`` with ``x : A`` monomorphic in ``e``."""
        if term.param_type is None:
            param: Type = self._fresh()
        else:
            param = self._annotation(term.param_type)
        old = self._bind_local(term.param, param)
        body = yield self._visit(term.body)
        self._unbind_local(term.param, old)
        return FunT(param, body)

    def _app(self, term: App) -> Step[Type]:
        """``f e``: ``f : A -> B`` and ``e : A`` give ``B``; also applies a backpropagator
        ``g : R -o d`` (a function type like any other)."""
        fn_type = self._resolve((yield self._visit(term.fn)))
        if isinstance(fn_type, VarT) and _flexible(fn_type):
            shape = FunT(self._fresh(), self._fresh())
            self._bind(fn_type, shape)
            fn_type = shape
        if not isinstance(fn_type, FunT):
            (shown,) = self._show(fn_type)
            raise TypeCheckError(f"{_describe_function(term.fn)} is not a function; it has type "
                                 f"{shown}", _span(term.fn), _indexing_hint(term, fn_type))
        arg_type = yield self._visit(term.arg)
        self._expect(fn_type.arg, arg_type, term.arg,
                     lambda e, a: f"this function expects {e}, but the argument has type {a}")
        return fn_type.result

    def _let(self, term: Let) -> Step[Type]:
        """``let x = e1 in e2``: ``e1``'s type is generalised for ``e2`` (HM ``let``).

        A let whose body is a let, and so on, is one step: the chain (a long program's usual
        shape) is typed by a loop, each inner let recorded and its errors located as if
        visited on its own."""
        chain = [term]  # the lets of the chain entered so far, outermost first
        shadowed = []  # what each one's name meant before it
        try:
            while True:
                self.level += 1
                value = self._visit(term.value)
                if value.__class__ is GeneratorType:  # not a leaf
                    value = yield value
                self.level -= 1
                shadowed.append(self._bind_local(term.name, self._generalise(value)))
                if term.body.__class__ is not Let:
                    break
                term = term.body
                chain.append(term)
            body = self._visit(term.body)
            if body.__class__ is GeneratorType:  # not a leaf
                body = yield body
        except LambdadError as error:
            # as _visit_node does for each inner let (the outermost is the caller's)
            for inner in reversed(chain[1:]):
                error.with_span(_span(inner))
            raise
        for index in range(len(chain) - 1, 0, -1):
            self._unbind_local(chain[index].name, shadowed[index])
            self.visited.append((chain[index], body))
        self._unbind_local(chain[0].name, shadowed[0])
        return body

    def _let_pair(self, term: LetPair) -> Step[Type]:
        """``let (x, y) = e1 in e2``: ``e1 : A * B``; ``x : A``, ``y : B`` generalised."""
        self.level += 1
        value = yield self._visit(term.value)
        first, second = self._fresh(), self._fresh()
        self._expect(PairT(first, second), value, term.value,
                     lambda e, a: f"a pair pattern needs a pair, but this has type {a}")
        self.level -= 1
        old_first = self._bind_local(term.first, self._generalise(first))
        old_second = self._bind_local(term.second, self._generalise(second))
        body = yield self._visit(term.body)
        self._unbind_local(term.second, old_second)
        self._unbind_local(term.first, old_first)
        return body

    def _pair(self, term: Pair) -> Step[Type]:
        """``(e1, e2)``: ``A * B``."""
        first = yield self._visit(term.first)
        second = yield self._visit(term.second)
        return PairT(first, second)

    def _if(self, term: If) -> Step[Type]:
        """``if c then e1 else e2``: ``c : Bool``, both branches of one type."""
        operator = _logical_operator(term)
        if operator is not None:
            return (yield from self._logical(term, operator))
        cond = yield self._visit(term.cond)
        self._expect(BOOL, cond, term.cond,
                     lambda e, a: f"expected Bool, but the condition of `if` has type {a}")
        then = yield self._visit(term.then)
        orelse = yield self._visit(term.orelse)
        self._expect(then, orelse, term.orelse,
                     lambda e, a: f"the branches of `if` have different types: {e} and {a}")
        return then

    def _logical(self, term: If, operator: str) -> Step[Type]:
        """``a && b`` (``if a then b else false``), ``a || b`` (``if a then true else b``):
        both operands ``Bool``; errors name the operator the user wrote."""
        for operand in (term.cond, term.then, term.orelse):
            operand_type = yield self._visit(operand)
            self._expect(BOOL, operand_type, operand,
                         lambda e, a: f"`{operator}` expects Bool, but this has type {a}")
        return BOOL

    def _list(self, term: ListLit) -> Step[Type]:
        """``[e1, ..., en]``: ``[A]`` with every item of type ``A``; ``[]`` is ``[a]``."""
        if not term.items:
            return ListT(self._fresh())
        first = yield self._visit(term.items[0])
        for item in term.items[1:]:
            item_type = yield self._visit(item)
            self._expect(first, item_type, item,
                         lambda e, a: f"the items of a list must have one type, but the first "
                                      f"has type {e} and this one {a}")
        return ListT(first)

    def _annot(self, term: Annot) -> Step[Type]:
        """``(e : A)``: ``e`` must have type ``A``; its variables are rigid."""
        annotated = self._annotation(term.type)
        actual = yield self._visit(term.expr)
        self._expect(annotated, actual, term.expr,
                     lambda e, a: f"annotated {e}, but the expression has type {a}")
        return annotated

    # ----- the target language (AD.md section 4)

    def _lin_lam(self, term: LinLam) -> Step[Type]:
        """``\\a -o e``: ``K -o d<K>`` when ``e : d<K>`` with ``a : K`` (``R -o d`` in a
        first-order program; a nesting level's ring otherwise)."""
        ring = self._fresh()
        old = self._bind_local(term.param, ring)
        body = yield self._visit(term.body)
        self._unbind_local(term.param, old)
        try:
            self._expect(CotangentT(ring), body, term.body,
                         lambda e, a: f"the body of a linear abstraction must have type "
                                      f"{_cotangent_words(e)}, but this has type {a}")
        except TypeCheckError as error:
            if not error.message.startswith("infinite type"):
                raise
            # `\a -o a`: the body has the parameter's type K where d<K> is needed
            raise TypeCheckError(
                "the body of a linear abstraction must be a cotangent over the type of its "
                "parameter (d<K> when the parameter has type K), not a value of that type",
                _span(term.body)) from None
        return backpropagator_type(ring)

    def _zero(self, term: Zero) -> Type:
        """``zero : d<K>`` for any ring ``K`` (a leaf: no step)."""
        return CotangentT(self._fresh())

    def _plus(self, term: Plus) -> Step[Type]:
        """``e1 <+> e2 : d<K>`` when both sides are ``d<K>``."""
        expected: Type = CotangentT(self._fresh())
        for side in (term.left, term.right):
            side_type = yield self._visit(side)
            self._expect(expected, side_type, side,
                         lambda e, a: f"`{_PLUS}` expects {_cotangent_words(e)}, but this "
                                      f"has type {a}")
        return expected

    def _seed(self, term: Seed) -> Step[Type]:
        """``seed i : K -o d<K>`` for any ring ``K``, when ``i : R``."""
        index = yield self._visit(term.index)
        self._expect(REAL, index, term.index,
                     lambda e, a: f"`seed` expects the number of an input real, R, but this "
                                  f"has type {a}")
        return backpropagator_type(self._fresh())

    def _read_off(self, term: ReadOff) -> Step[Type]:
        """``cotangent x e``: ``x`` a seeded input (every real of ``A`` paired with its
        backpropagator, ``K * (K -o d<K>)``), ``e : d<K>``; the result is ``A`` with each
        real replaced by ``K`` (``A`` itself when ``K = R``)."""
        point = yield self._visit(term.point)
        ring = self._fresh()
        result = self._unseeded(point, ring)
        if result is None:
            (shown,) = self._show(point)
            raise TypeCheckError(
                f"`{_READ_OFF}` needs a seeded input (each real paired with its backpropagator, "
                f"R * (R -o d)), but this has type {shown}", _span(term.point))
        cotangent = yield self._visit(term.cotangent)
        self._expect(CotangentT(ring), cotangent, term.cotangent,
                     lambda e, a: f"`{_READ_OFF}` expects {_cotangent_words(e)}, but this "
                                  f"has type {a}")
        return result

    def _seeded_real(self, t: Type, ring: Type) -> bool:
        """Whether ``t`` is ``K * (K -o d<K>)`` (←D(R) over the ring ``K``), ``K`` being
        unified with ``ring``."""
        if not isinstance(t, PairT):
            return False
        back = self._resolve(t.second)
        if not (isinstance(back, FunT) and isinstance(self._resolve(back.result), CotangentT)):
            return False
        self.trail = []
        try:
            self._unify(ring, t.first)
            self._unify(backpropagator_type(ring), back)
        except (_Mismatch, _Infinite):
            for name, old in reversed(self.trail):
                if old is None:
                    del self.bindings[name]
                else:
                    self.bindings[name] = old
            return False
        finally:
            self.trail = None
        return True

    def _unseeded(self, point: Type, ring: Type) -> Type | None:
        """``A`` over ``ring`` such that ``point`` is ←D(A) (each ``K * (K -o d<K>)``
        replaced by ``K``, all of them over the one ring), or None when ``point`` is not (or
        not yet known to be) such a type."""
        images: dict[int, Type] = {}
        root = self._resolve(point)
        stack: list[tuple[Type, bool]] = [(root, False)]
        while stack:
            current, expanded = stack.pop()
            key = id(current)
            if expanded:
                kids = [images[id(self._resolve(kid))] for kid in children(current)]
                images[key] = with_children(current, kids)
            elif key in images:
                continue
            elif self._seeded_real(current, ring):
                images[key] = self._resolve(ring)
            elif isinstance(current, BoolT):
                images[key] = current
            elif isinstance(current, ListT) and isinstance(self._resolve(current.item), VarT):
                images[key] = current  # an empty list literal: nothing to read off
            elif isinstance(current, (PairT, ListT)):
                stack.append((current, True))
                stack.extend((self._resolve(kid), False) for kid in reversed(children(current)))
            else:
                return None
        return images[id(root)]


def _cotangent_words(shown: str) -> str:
    """How a message names the expected cotangent type: ``d`` or ``d<R * R>`` when its ring
    is known, ``d`` (of any ring) when it is still a variable."""
    if re.fullmatch(r"d<[a-z][A-Za-z0-9_']*>", shown):
        return "d (over any ring: d<K>)"
    return shown


def _span(term: Term) -> Span | None:
    return getattr(term, "span", None)


def _logical_operator(term: If) -> str | None:
    """``&&`` or ``||`` when ``term`` is the parser's expansion of one (its literal branch
    spans the whole expression, as no literal written by the user does), else None."""
    for branch, value, operator in ((term.orelse, False, "&&"), (term.then, True, "||")):
        if (isinstance(branch, BoolLit) and branch.value is value and branch.span is not None
                and branch.span == term.span):
            return operator
    return None


def _indexing_hint(term: App, fn_type: Type) -> tuple[str, ...]:
    """A note for ``xs[i]`` written for indexing: a list applied to a one-element list."""
    if isinstance(fn_type, ListT) and isinstance(term.arg, ListLit) and len(term.arg.items) == 1:
        return ("to take an element of a list, index it with `!!`: `xs !! i` (from 0)",)
    return ()


def _describe_function(fn: Term) -> str:
    """How a message names the function position ``fn``: ```f``` for a name, ```f x```
    spelled as ``f`` applied to n arguments, ``this`` otherwise."""
    head, count = fn, 0
    while isinstance(head, App):
        head, count = head.fn, count + 1
    if isinstance(head, Var):
        name = head.name
    elif isinstance(head, Builtin) and head.name in PRIMITIVES:
        name = PRIMITIVES[head.name].spelling.symbol
    elif (isinstance(head, Prim) and head.op in PRIMITIVES
          and PRIMITIVES[head.op].spelling.fixity == "function"):
        name = PRIMITIVES[head.op].spelling.symbol
        count += len(head.args)
    else:
        return "this"
    if count == 0:
        return f"`{name}`"
    plural = "" if count == 1 else "s"
    return f"`{name}` applied to {count} argument{plural}"


def _section_hints(primitive: Primitive, expected: Type, arg: Term) -> tuple[str, ...]:
    """Notes leading to an operator section where a habit shows in a mistyped argument of
    ``primitive``: ``fold + 0 xs`` (a built-in taking a function, as an operand: ``fold``
    plus ``0 xs``) and ``map (- 1) xs`` (a negation where a function is expected)."""
    if primitive.spelling.fixity == "infix" and isinstance(arg, Builtin):
        taker = PRIMITIVES[arg.name]
        if isinstance(taker.type, FunT) and isinstance(taker.type.arg, FunT):
            name, op = taker.spelling.symbol, primitive.spelling.symbol
            return (f"`{name} {op} ...` applies `{op}` to `{name}` itself; to pass the "
                    f"operator to `{name}` as a function, put it in parentheses: "
                    f"`{name} ({op}) ...`",)
    if (isinstance(expected, FunT) and isinstance(arg, Prim) and len(arg.args) == 1
            and PRIMITIVES[arg.op].spelling.fixity == "prefix"):
        operand = print_term(arg.args[0])
        if not isinstance(arg.args[0], (Var, Const)):
            operand = f"({operand})"
        taken = free_vars(arg)
        x = next(name for name in itertools.chain("xyz", (f"x{i}" for i in itertools.count(1)))
                 if name not in taken)
        return (f"`{print_term(arg)}` is a negation (a number), not a section: subtracting "
                f"is written `(\\{x} -> {x} - {operand})` or `(+ (-{operand}))`",)
    return ()
