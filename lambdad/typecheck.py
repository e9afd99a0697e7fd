"""Hindley–Milner type inference with let-polymorphism (LANGUAGE.md §5), for source terms and
for the target language of AD.md §4 (``d``, ``\\a -o e``, ``zero``, ``<+>``, ``seed i``,
``cotangent x e``).

Inference is algorithm J with levels: type variables are unified in place through a binding
map, and each flexible variable records the ``let`` depth at which it was created, so a
``let`` generalises exactly the variables younger than itself without scanning the
environment (the substitution is :class:`lambdad.unify._Unifier`; the array cases, which
elaborate an application to an array primitive, :class:`lambdad.array_typing.ArrayTyping`;
this module holds the inference arms, one per construct, and their messages).  Every pass
over terms and types is iterative (terms are visited by generator functions driven by
:func:`lambdad.iterate.run`, types with explicit stacks), so programs and types nested 10^4
deep are fine.

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
from collections.abc import Callable
from types import GeneratorType
from typing import Any

import attrs

from .array_typing import ArrayTyping, _OnArrays
from .errors import LambdadError, TypeCheckError
from .iterate import Step, run
from .primitives import ARRAY_NAMESAKES, ELEMENTWISE, NAMED, PRIMITIVES, Primitive, declared_by
from .printer import print_term, print_type
from .syntax import (
    BOOL,
    REAL,
    Annot,
    ArrayT,
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
    Seed,
    Term,
    Type,
    Var,
    VarT,
    Zero,
    children,
    free_vars,
    tuple_type,
    with_children,
)
from .unify import (
    MAX_TYPE_PARTS,
    Scheme,
    TypeEnv,
    _ABSENT,
    _Infinite,
    _Mismatch,
    _flexible,
    _letters,
    _map_type,
    _ordered_vars,
    _span,
    _too_large,
    _tree_size,
    print_scheme,
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



# How each target-language construct is named in messages (their printed spellings).
_PLUS = "<+>"
_READ_OFF = "cotangent"


# --------------------------------------------------------------------------- inference


# The deepest tree of primitive applications typed by recursion rather than by steps.
_PRIMITIVE_TREE_DEPTH = 16


class _Inference(ArrayTyping):
    """The state of one inference run: variable bindings and levels, and the scope.

    ``scope`` maps each visible name to a :class:`Scheme` (``let``/``def``-bound, to be
    instantiated) or a bare type (``λ``-bound, monomorphic); local bindings are added and
    removed as the walk enters and leaves their bodies.
    """

    def __init__(self, env: TypeEnv, fixed: list[str] | tuple[str, ...] = ()):
        super().__init__(env, fixed)
        # The names bound here (locals, and the module's declarations so far) over ``env``,
        # which is read, never copied: typing one declaration costs nothing per name of a
        # large environment (a REPL session's, a module of 10^5 definitions).
        self.env = env
        self.scope: dict[str, Scheme | Type] = {}
        self.visited: list[tuple[Term, Type]] = []
        self.primitive_schemes: dict[str, Scheme] = {}
        self.primitive_entries: dict[str, tuple[Primitive, int, Type | None]] = {}
        # The parameter type of a linear abstraction paired with an array (see _pair).
        self.cotangent_hints: dict[int, Type] = {}
        # Backpropagators (linear abstractions, seeds) paired with a value of a type not
        # known yet, by id: their ring waits until it is (arrays at a nesting level).
        self.late_rings: set[int] = set()
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
        if self.pending or self.linear_params:
            self._solve_pending()
        self.late_rings.clear()
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
        if isinstance(failure.left, PairT) and isinstance(failure.right, PairT) and \
                failure.left.arity != failure.right.arity:
            notes.append(_ARITY_NOTE)
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
            arrays = primitive.result_type is not None
            types: list[Type] = []
            for arg in term.args:
                arg_type = self._visit(arg)
                if arg_type.__class__ is GeneratorType:  # not a leaf
                    arg_type = yield arg_type
                types.append(arg_type)
                if not arrays:
                    try:
                        remaining = self._prim_argument(primitive, remaining, arg, arg_type)
                    except _OnArrays:
                        arrays, primitive = True, PRIMITIVES[primitive.on_arrays]
            if arrays:
                remaining = self._array_result(term, primitive, types)
        except LambdadError as error:
            raise error.with_span(_span(term))
        self.visited.append((term, remaining))
        return remaining

    def _prim_of_leaves(self, term: Prim) -> Type:
        """:meth:`_prim` of a primitive applied to leaves only (a leaf itself: no step)."""
        primitive, remaining = self._prim_instance(term)
        if primitive.result_type is not None or primitive.on_arrays is not None:
            return self._maybe_arrays(term, primitive, remaining,
                                      [self._visit(arg) for arg in term.args])
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
        op = term.op
        entry = self.primitive_entries.get(op) if op.__class__ is str else None
        if entry is not None and entry[2] is not None and len(term.args) == entry[1]:
            # (what _prim_instance gives a built-in of a type without variables, inline)
            primitive, remaining = entry[0], entry[2]
        else:
            primitive, remaining = self._prim_instance(term)
        if primitive.result_type is not None:
            return self._array_result(term, primitive, [self._tree_argument(arg)
                                                        for arg in term.args])
        instance = remaining
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
                try:
                    remaining = self._prim_argument(primitive, remaining, arg, arg_type)
                except _OnArrays:  # an array: the rest is typed by the array entry
                    return self._array_tree(term, primitive, instance, remaining, arg_type)
        return remaining

    def _tree_argument(self, arg: Term) -> Type:
        """The type of an argument of a tree of primitive applications (see
        :meth:`_prim_tree`), recorded as :meth:`_visit` records it."""
        if arg.__class__ is not Prim:
            return self._visit(arg)
        try:
            arg_type = self._prim_tree(arg)
        except LambdadError as error:
            raise error.with_span(_span(arg))
        self.visited.append((arg, arg_type))
        return arg_type

    def _array_tree(self, term: Prim, primitive: Primitive, instance: Type, remaining: Type,
                    arg_type: Type) -> Type:
        """:meth:`_prim_tree` of ``term`` once its argument of type ``arg_type``, taken by the
        parameter of ``remaining`` (a part of the scalar type ``instance``), is an array:
        the application typed by the primitive's array entry.  The arguments before it
        were unified with the parameters before ``remaining``; those after it are typed."""
        types: list[Type] = []
        while instance is not remaining:
            assert isinstance(instance, FunT)
            types.append(instance.arg)
            instance = instance.result
        types.append(arg_type)
        types += [self._tree_argument(arg) for arg in term.args[len(types):]]
        return self._array_result(term, PRIMITIVES[primitive.on_arrays], types)

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
            if primitive.on_arrays is not None:
                resolved = self._resolve(arg_type)
                if isinstance(resolved, ArrayT) or (
                        self.linear_depth and isinstance(resolved, VarT) and _flexible(resolved)
                        and primitive.on_arrays.startswith(ELEMENTWISE)):
                    raise _OnArrays()
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
        # (a Builtin: one elaborated already, typed again when a definition that
        # differentiates is written out)
        if term.fn.__class__ in (Var, Builtin) and term.fn.name in ARRAY_NAMESAKES \
                and isinstance(self._resolve(arg_type), ArrayT):
            return self._namesake_on_array(term, arg_type)
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
        first, second = self._fresh(), self._tuple_of(term.arity - 1)
        self._expect(PairT(first, second, term.arity), value, term.value,
                     lambda e, a: f"a {_tuple_words(term.arity)} pattern needs a "
                                  f"{_tuple_words(term.arity)}, but this has type {a}")
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
        if term.second.__class__ is LinLam or term.second.__class__ is Seed:
            # (v, \a -o e), what ←D makes of an array: a value and its backpropagator,
            # whose parameter is a cotangent of the value (AD.md section 10)
            # (at a nesting level, the value is arrays paired: `Vec * Vec` under →D)
            found = self._resolve(first)
            if self._holds_array(found):
                self.cotangent_hints[id(term.second)] = found
            elif self._undetermined(found):
                self.late_rings.add(id(term.second))
        second = yield self._visit(term.second)
        if term.arity > 2:  # (e1, e2, ..., ek): the rest is itself a (k-1)-tuple
            self._expect(self._tuple_of(term.arity - 1), second, term.second,
                         lambda e, a: f"the rest of a {_tuple_words(term.arity)} must be a "
                                      f"{_tuple_words(term.arity - 1)}, but it has type {a}")
        return PairT(first, second, term.arity)

    def _tuple_of(self, k: int) -> Type:
        """``a1 * ... * ak`` with fresh variables (one variable for k = 1)."""
        return tuple_type([self._fresh() for _ in range(k)])

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
        # An array's backpropagator takes a whole cotangent array: ``Vec -o d<K>`` (AD.md
        # section 10); any other takes a scalar of the ring, ``K -o d<K>``.
        param = self.cotangent_hints.pop(id(term), None) or self._fresh()
        old = self._bind_local(term.param, param)
        self.linear_depth += 1
        try:
            body = yield self._visit(term.body)
        finally:
            self.linear_depth -= 1
        self._unbind_local(term.param, old)
        resolved = self._resolve(param)
        if (self.pending and isinstance(resolved, VarT) and _flexible(resolved)) or (
                id(term) in self.late_rings and self._undetermined(resolved)):
            # known once the operations waiting on it are (see _solve_pending)
            self.linear_params.append((param, ring, term))
            self._undecided(param, ring)
        elif not isinstance(resolved, ArrayT):
            self._expect(ring, self._ring_of(param), term,
                         lambda e, a: f"expected {e}, but this has type {a}")
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
        if self.linear_params and self.linear_params[-1][0] is param or self._holds_array(
                self._resolve(param)):
            return FunT(param, CotangentT(ring))
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
        array = self.cotangent_hints.pop(id(term), None)
        if array is not None:  # (an input array's seed: sent whole cotangent arrays)
            return FunT(array, CotangentT(self._ring_of(array)))
        if id(term) in self.late_rings:  # (paired with a value of a type not known yet)
            param, ring = self._fresh(), self._fresh()
            self.linear_params.append((param, ring, term))
            self._undecided(param, ring)
            return FunT(param, CotangentT(ring))
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
            elif self._seeded_array(current, ring):
                images[key] = self._resolve(current.first)  # its gradient is an array
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


_ARITY_NOTE = ("a tuple is what was written: `(a, b, c)` is a triple, not the pair `(a, (b, "
               "c))`, and `fst`/`snd` take pairs only; take a tuple apart with a pattern of "
               "its arity, `let (a, b, c) = t in ...`")


def _tuple_words(k: int) -> str:
    """What a tuple of ``k`` components is called in a message: pair, triple, 4-tuple."""
    return {2: "pair", 3: "triple"}.get(k, f"{k}-tuple")


def _cotangent_words(shown: str) -> str:
    """How a message names the expected cotangent type: ``d`` or ``d<R * R>`` when its ring
    is known, ``d`` (of any ring) when it is still a variable."""
    if re.fullmatch(r"d<[a-z][A-Za-z0-9_']*>", shown):
        return "d (over any ring: d<K>)"
    return shown


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
