"""Types under inference: schemes and the type environment, helpers over types, and the
substitution of one inference run (:class:`_Unifier`).

Unification is in place through a binding map, and each flexible variable records the ``let``
depth at which it was created, so a ``let`` generalises exactly the variables younger than
itself without scanning the environment.  Types are walked with explicit stacks, so types
nested 10^4 deep are fine.  Type variables written in annotations are *rigid*: they unify only
with themselves and with flexible variables.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from .errors import Span, TypeCheckError
from .persistent import PersistentMap
from .printer import print_type
from .syntax import ANY_ARITY, BOOL, REAL, ArrayT, PairT, Term, Type, VarT, children, with_children


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


class _Unifier:
    """The substitution of one inference run: flexible variables with their ``let`` levels,
    bindings written in place (undone when a unification fails), rigid variables with the
    level each is mentioned at; unification, instantiation and generalisation over them."""

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
            if isinstance(x, ArrayT):
                if x.rank != y.rank:  # Vec is not Mat
                    raise _Mismatch(x, y)
                continue
            if isinstance(x, PairT) and x.arity != y.arity and x.arity != ANY_ARITY \
                    and y.arity != ANY_ARITY:  # R * R * R is not R * (R * R)
                raise _Mismatch(x, y)
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


def _span(term: Term) -> Span | None:
    return getattr(term, "span", None)
