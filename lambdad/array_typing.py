"""The array elaboration of type inference (LANGUAGE.md section 9): an application whose
argument is an array is typed by the primitive's array entry, by its rank rule, and
elaborated in place to the entry the rule chooses (``x * y`` of arrays is the elementwise
product, ``m @ v`` the product of a Mat and a Vec, ``sum v`` of a Vec the array ``sum``).

:class:`ArrayTyping` is a part of :class:`lambdad.typecheck._Inference` (its base class):
it holds the elementwise operations waiting for their operands' types and the arms'
array cases, and uses the inference's ``_expect``, ``_show`` and ``_prim_argument``.
"""

from __future__ import annotations

from .errors import TypeCheckError
from .primitives import PRIMITIVES, Primitive
from .syntax import (
    REAL,
    App,
    ArrayT,
    Builtin,
    CotangentT,
    FunT,
    PairT,
    Prim,
    Term,
    Type,
    Var,
    VarT,
    curried_params,
)
from .unify import TypeEnv, _flexible, _span, _Unifier


class _OnArrays(Exception):
    """An argument of a primitive that also applies to arrays is an array: the application
    is typed by the primitive's array entry instead."""


class ArrayTyping(_Unifier):
    """The array cases of inference, and the operations waiting on them."""

    def __init__(self, env: TypeEnv, fixed: list[str] | tuple[str, ...] = ()):
        super().__init__(env, fixed)
        # Inside a linear abstraction (how many deep), an elementwise operation on operands
        # of unknown type waits (``pending``) until they are known: the cotangent `a` of
        # `\a -o x_ (x * a)` is an array when x is one, which only a later use may tell.
        self.linear_depth = 0
        self.pending: list[tuple[Prim, Primitive, list[Type], Type]] = []
        # The linear abstractions whose parameter waits so: (its type, its ring, itself).
        self.linear_params: list[tuple[Type, Type, Term]] = []

    def _maybe_arrays(self, term: Prim, primitive: Primitive, remaining: Type,
                      types: list[Type]) -> Type:
        """The type of ``term`` applying ``primitive`` to arguments of ``types``: by the
        primitive's type, or, when an argument is an array, by its array entry's rule."""
        if primitive.result_type is None:
            try:
                for arg, arg_type in zip(term.args, types):
                    remaining = self._prim_argument(primitive, remaining, arg, arg_type)
                return remaining
            except _OnArrays:
                primitive = PRIMITIVES[primitive.on_arrays]
        return self._array_result(term, primitive, types)

    def _array_result(self, term: Prim, primitive: Primitive, types: list[Type]) -> Type:
        """The type of an application of the array entry ``primitive`` to arguments of
        ``types``, by its rank rule (an argument of unknown type is taken to be a real);
        the application is elaborated to the entry the rule chooses (``x * y`` of arrays is
        the elementwise product, ``m @ v`` the product of a Mat and a Vec).  Raises
        TypeCheckError naming the types given."""
        resolved = [self._resolve(t) for t in types]
        if (primitive.kind == "elementwise" or self.linear_depth) and any(
                isinstance(t, VarT) and _flexible(t) for t in resolved):
            result = self._fresh()
            self.pending.append((term, primitive, resolved, result))
            self._undecided(result, *resolved)
            return result
        return self._array_type(term, primitive, resolved)

    def _undecided(self, *types: Type) -> None:
        """Keeps the variables of ``types`` from being generalised by a ``let`` (as if the
        environment held them): they wait on an elementwise operation (``pending``), and are
        one type, decided later."""
        def keep(v: VarT) -> None:
            self._lower(v, 0)
        for t in types:
            self._scan(t, keep)

    def _solve_pending(self) -> None:
        """Types the elementwise operations left waiting (see ``pending``): each once its
        operands are known; when none is, the first one's unknown operands are taken to be
        its result's type if that is an array, else reals."""
        while self.pending:
            progress = False
            for item in list(self.pending):
                term, primitive, types, result = item
                resolved = [self._resolve(t) for t in types]
                if any(isinstance(t, VarT) and _flexible(t) for t in resolved):
                    continue
                self.pending.remove(item)
                found = self._array_type(term, primitive, resolved)
                self._expect(result, found, term,
                             lambda e, a: f"expected {e}, but this has type {a}")
                progress = True
            if not progress:
                term, primitive, types, result = self.pending[0]
                # the widest array among the result and the known operands (the cotangent
                # `a` of `x * a` has x's shape), else a real
                default: Type = REAL
                for known in (result, *types):
                    known = self._resolve(known)
                    if isinstance(known, ArrayT) and (
                            not isinstance(default, ArrayT) or known.rank > default.rank):
                        default = known
                params = curried_params(primitive.type)
                for k, (arg, t) in enumerate(zip(term.args, types)):
                    t = self._resolve(t)
                    if isinstance(t, VarT) and _flexible(t):
                        self._expect(default if primitive.kind == "elementwise" else params[k],
                                     t, arg, lambda e, a: f"expected {e}, but this has type {a}")
        # a linear abstraction's parameter that is not an array ranges over its ring
        for param, ring, term in self.linear_params:
            if not isinstance(self._resolve(param), ArrayT):
                self._expect(ring, self._ring_of(param), term,
                             lambda e, a: f"expected {e}, but this has type {a}")
        self.linear_params = []

    def _undetermined(self, t: Type) -> bool:
        """Whether the type ``t`` or a component of its pairs is still unknown."""
        work = [t]
        while work:
            t = self._resolve(work.pop())
            if isinstance(t, VarT) and _flexible(t):
                return True
            if isinstance(t, PairT):
                work.extend((t.first, t.second))
        return False

    def _holds_array(self, t: Type) -> bool:
        """Whether the type ``t`` is an array, or arrays paired as a nesting level pairs
        them (``Vec * Vec`` under →D, ``Vec * (Vec -o d)`` under ←D, and so on)."""
        t = self._resolve(t)
        while isinstance(t, PairT):
            t = self._resolve(t.first)
        return isinstance(t, ArrayT)

    def _ring_of(self, cotangent: Type) -> Type:
        """The ring of a backpropagator taking ``cotangent``: the cotangent itself, its
        arrays read as their scalars (AD.md section 10: ``Vec -o d``, and at a nesting
        level ``Vec * Vec -o d<R * R>`` under →D, ``Vec * (Vec -o d) -o d<R * (R -o d)>``
        under ←D).  The cotangent itself when it holds no array."""
        t = self._resolve(cotangent)
        if isinstance(t, ArrayT):
            return REAL
        if isinstance(t, PairT):
            first, second = self._ring_of(t.first), self._ring_of(t.second)
            if first is t.first and second is t.second:
                return cotangent
            return PairT(first, second, arity=t.arity)
        if isinstance(t, FunT):
            arg = self._ring_of(t.arg)
            return cotangent if arg is t.arg else FunT(arg, t.result)
        return cotangent

    def _array_type(self, term: Prim, primitive: Primitive, resolved: list[Type]) -> Type:
        """:meth:`_array_result` of operands whose types ``resolved`` are known (but for
        unknown ones, given a default here)."""
        # An argument of unknown type is taken to be what the primitive's type says; for
        # an elementwise operation, an array of the largest rank among the others (the
        # cotangent `a` of `\a -o x_ (x * a)`), else a real.
        widest: Type = REAL
        for t in resolved:
            if isinstance(t, ArrayT) and (not isinstance(widest, ArrayT) or t.rank > widest.rank):
                widest = t
        params = curried_params(primitive.type)
        for k, (arg, t) in enumerate(zip(term.args, resolved)):
            if isinstance(t, VarT) and _flexible(t):
                default = widest if primitive.kind == "elementwise" else params[k]
                self._expect(default, t, arg, lambda e, a: f"expected {e}, but this has type {a}")
                resolved[k] = default
        found = primitive.result_type(tuple(resolved))
        if isinstance(found, str):
            given = " and ".join(self._show(*resolved))
            raise TypeCheckError(
                f"`{primitive.spelling.symbol}` cannot take {given}: {found}", _span(term))
        if isinstance(found, tuple):
            found, name = found
            primitive = PRIMITIVES[name]
        if found is REAL and primitive.kind == "elementwise" and \
                PRIMITIVES[term.op].kind == "real":
            return found  # (reals only, after all: the real primitive stays)
        if term.op != primitive.name:
            # Elaboration in place: the node is the application of the chosen entry from
            # now on (its spelling, hence its printed form, is unchanged).
            object.__setattr__(term, "op", primitive.name)
        return found

    def _namesake_on_array(self, term: App, arg_type: Type) -> Type:
        """``sum v`` of an array ``v``, where ``sum`` names the prelude's function of lists:
        the application is elaborated (in place) to the array primitive of the same name."""
        entry = PRIMITIVES[term.fn.name]
        object.__setattr__(term, "fn", Builtin(entry.name, span=term.fn.span))
        if entry.result_type is not None and entry.arity == 1:
            found = entry.result_type((self._resolve(arg_type),))
            if isinstance(found, str):
                (given,) = self._show(arg_type)
                raise TypeCheckError(f"`{entry.spelling.symbol}` cannot take {given}: {found}",
                                     _span(term))
            return found
        fn_type = entry.type
        self._expect(fn_type.arg, arg_type, term.arg,
                     lambda e, a: f"this function expects {e}, but the argument has type {a}")
        return fn_type.result

    def _seeded_array(self, t: Type, ring: Type) -> bool:
        """Whether ``t`` is ``Vec * (Vec -o d)`` (←D of an array; ``Mat`` alike), the
        ring ``ring`` then being R; or, at a nesting level, arrays paired as the level pairs
        them with their backpropagator, ``A * (A -o d<K>)`` (``A = Vec * Vec`` under →D),
        the ring being ``A``'s scalars (:meth:`_ring_of`)."""
        if not isinstance(t, PairT) or not self._holds_array(t.first):
            return False
        back = self._resolve(t.second)
        if not (isinstance(back, FunT) and isinstance(self._resolve(back.result), CotangentT)):
            return False
        scalars = self._ring_of(t.first)
        try:
            self._expect(self._resolve(t.first), back.arg, Var("x"), lambda e, a: "")
            self._expect(CotangentT(scalars), back.result, Var("x"), lambda e, a: "")
            self._expect(scalars, ring, Var("x"), lambda e, a: "")
        except TypeCheckError:
            return False
        return True
