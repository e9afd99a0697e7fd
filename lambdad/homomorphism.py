"""The homomorphism →D and ←D share: one arm per construct of the core syntax.

BMP (Brunel, Mazza, Pagani, POPL 2020) define ←D as →D everywhere but at the reals: the
same image of variables, λ, application, pairs, ``let`` and the structural primitives, and
of conditionals as Mazza and Pagani (POPL 2021) do (the test looks at primals).
:class:`Differentiation` is that homomorphism, with the chain rule for a primitive
application (BMP's rule for primitives) and AD.md section 10's rule for an array
primitive; :mod:`lambdad.forward` and :mod:`lambdad.backward` say what happens at the
reals.  The pieces it is built from (names, partial derivatives, the rule for non-real
primitives) are in :mod:`lambdad.rules`.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from .errors import DifferentiationError, Span
from .primitives import PRIMITIVES, Primitive
from .rules import (
    BACKPROPAGATOR,
    LINEAR_PARAM,
    NameSupply,
    ZeroOf,
    applied_primitive,
    array_rule_shared,
    array_rule_term,
    eta_expand,
    lift,
    marked_function,
    marked_function_type,
    name_arguments,
    no_reverse_image,
    not_differentiable,
    partials,
    primal_of,
    rename,
    result_name,
    signature,
    without_zero_parts,
    zero_derivative,
)
from .syntax import (
    Annot,
    App,
    BoolLit,
    Builtin,
    Const,
    If,
    Lam,
    Let,
    LetPair,
    LinLam,
    ListLit,
    Pair,
    Plus,
    Prim,
    ReadOff,
    RealT,
    Seed,
    Term,
    Type,
    Var,
    Zero,
    children,
    free_vars,
)


class Differentiation:
    """The arms shared by →D and ←D, one per construct of the core syntax.

    BMP's two transformations are the same homomorphism on every construct — variables,
    λ, application, pairs, ``let`` (which keeps its sharing), conditionals (Mazza–Pagani:
    the test looks at primals), lists and the structural primitives — and differ only at
    the reals: what a literal's derivative is, and how the chain rule combines the partial
    derivatives of a primitive (a sum of tangents for →D, a linear abstraction sending
    the cotangent on for ←D).  A subclass says just that, in :meth:`transform_type`,
    :meth:`zero` and :meth:`combine`.
    """

    symbol = "D"
    suffix = "'"

    def __init__(self, names: NameSupply, constants: AbstractSet[str] = frozenset()):
        self.names = names
        # The variables in scope whose values are constants of the differentiation (a
        # closure's captured reals and arrays, embedded as constants: AD.md section 6),
        # and those bound to terms built from them (see inactive): their derivative
        # parts are zero, so the rules leave out what they would send or add.
        self.constants = set(constants)
        self._inactive: dict[int, tuple[Term, bool]] = {}  # id -> (term, answer) now

    # ---- constants
    def inactive(self, t: Term) -> bool:
        """Whether ``t`` is a constant of the differentiation: built from literals and
        variables of :attr:`constants` by pairs, annotations and primitives other than
        ``grad``, ``jvp``, ... (so its value does not depend on the point, and its
        derivative part is zero, as ←D(r) and →D(r) of a literal r are).  Answered once
        per term (the sub-terms of a term are asked again by its rule); the answers keep
        their terms alive, so an id is never another term's."""
        if not self.constants:
            return False
        known = self._inactive
        found = known.get(id(t))
        if found is not None:
            return found[1]
        # post-order over the compound sub-terms not answered yet (no recursion)
        pending = [(t, False)]
        while pending:
            node, expanded = pending.pop()
            if id(node) in known:
                continue
            if isinstance(node, Prim) and zero_derivative(PRIMITIVES[node.op]):
                known[id(node)] = (node, True)
                continue
            compound = isinstance(node, (Pair, Annot)) or (
                isinstance(node, Prim) and PRIMITIVES[node.op].kind != "ad")
            if not compound:
                answer = (isinstance(node, (Const, BoolLit))
                          or (isinstance(node, Var) and node.name in self.constants))
                known[id(node)] = (node, answer)
                continue
            if not expanded:
                pending.append((node, True))
                pending.extend((c, False) for c in children(node) if id(c) not in known)
                continue
            known[id(node)] = (node, all(known[id(c)][1] for c in children(node)))
        return known[id(t)][1]

    def bind(self, bound: tuple[str, ...], value: Term | None
             ) -> tuple[set[str], set[str]] | None:
        """Enters the scope of ``bound`` names bound to ``value`` (None: to something not
        known constant, a λ's parameter): they are constants there when ``value`` is
        :meth:`inactive`, and no longer constants otherwise.  Returns what :meth:`unbind`
        needs to leave the scope, or None when there is nothing to leave (no constants: a
        name bound now cannot be one, as :meth:`inactive` of anything is false)."""
        if not self.constants:
            return None
        constant = value is not None and self.inactive(value)
        added: set[str] = set()
        removed: set[str] = set()
        for name in bound:
            if constant and name not in self.constants:
                self.constants.add(name)
                added.add(name)
            elif not constant and name in self.constants:
                self.constants.discard(name)
                removed.add(name)
        if removed:
            self._inactive.clear()  # (answers given before may name the hidden ones)
        return added, removed

    def unbind(self, scope: tuple[set[str], set[str]] | None) -> None:
        """Leaves a scope :meth:`bind` entered."""
        if scope is None:
            return
        added, removed = scope
        if added:
            self.constants -= added
            self._inactive.clear()
        self.constants |= removed

    # ---- what a subclass provides
    def transform_type(self, t: Type) -> Type:
        raise NotImplementedError

    def zero(self, span: Span | None) -> Term:
        """The derivative part of a literal: ``0`` or ``\\a -o zero``."""
        raise NotImplementedError

    def zero_of(self, span: Span | None) -> ZeroOf:
        """The derivative part of a constant of a ground type (see :func:`lift`)."""
        raise NotImplementedError

    def combine(self, contributions: list[tuple[Term, str]], taken: set[str],
                span: Span | None) -> Term:
        """The derivative part of ``f(x1..xk)`` from ``(∂i f, name of xi's derivative)``
        for the non-literal arguments; ``taken`` are names it must not bind."""
        raise NotImplementedError

    # ---- the arms
    def term(self, t: Term):
        """D(t), a generator driven by :func:`lambdad.iterate.run`."""
        s = t.span
        if isinstance(t, Const):
            # BMP, constants: D(r) = (r, 0) / (r, \a -o zero)
            return Pair(t, self.zero(s), span=s)
        if isinstance(t, (Var, BoolLit)):
            # variables and booleans are their own images
            return t
        if isinstance(t, Builtin):
            # a primitive used as a value: D of its eta-expansion
            return (yield self.term(eta_expand(t.name, self.names, s)))
        if isinstance(t, Prim):
            prim = PRIMITIVES[t.op]
            if prim.kind == "real" or prim.kind == "elementwise":
                return (yield from self.chain_rule(t, prim))
            if prim.kind == "array":
                return (yield from self.array_rule(t, prim))
            if prim.kind == "ad":
                # a use the expansion (lambdad.nesting) left in place: its function has no
                # image it could build
                return (yield from self.differentiation(t))
            return (yield from self.locally_constant(t, prim))
        if isinstance(t, Lam):
            # D(\x -> e) = \x -> D(e), annotation transformed
            scope = self.bind((t.param,), None)
            body = yield self.term(t.body)
            self.unbind(scope)
            param_type = None if t.param_type is None else self.located_type(t.param_type, s)
            return Lam(t.param, body, param_type, span=s)
        if isinstance(t, App) and (applied := applied_primitive(t)) is not None:
            # a built-in applied to all its arguments (``sum v`` of an array v, elaborated
            # from the prelude's name): D of the primitive application
            return (yield self.term(applied))
        if isinstance(t, App):
            # D(f a) = D(f) D(a), the application of a backpropagator included
            fn = yield self.term(t.fn)
            arg = yield self.term(t.arg)
            return App(fn, arg, span=s)
        if isinstance(t, Let):
            # D(let x = e1 in e2) = let x = D(e1) in D(e2): the sharing is kept
            value = yield self.term(t.value)
            scope = self.bind((t.name,), t.value)
            body = yield self.term(t.body)
            self.unbind(scope)
            return Let(t.name, value, body, span=s)
        if isinstance(t, LetPair):
            # D(let (x, y) = e1 in e2) = let (x, y) = D(e1) in D(e2); a k-tuple pattern
            # alike: D of a k-tuple type is the k-tuple of the D's
            value = yield self.term(t.value)
            scope = self.bind((t.first, t.second), t.value)
            body = yield self.term(t.body)
            self.unbind(scope)
            return LetPair(t.first, t.second, value, body, t.arity, span=s)
        if isinstance(t, Pair):
            # D((e1, e2)) = (D(e1), D(e2)); D((e1, ..., ek)) = (D(e1), ..., D(ek))
            first = yield self.term(t.first)
            second = yield self.term(t.second)
            return Pair(first, second, t.arity, span=s)
        if isinstance(t, If):
            # Mazza-Pagani: D(if c then e1 else e2) = if D(c) then D(e1) else D(e2), the
            # derivative of the branch taken
            cond = yield self.term(t.cond)
            then = yield self.term(t.then)
            orelse = yield self.term(t.orelse)
            return If(cond, then, orelse, span=s)
        if isinstance(t, ListLit):
            # D([e1, ..., en]) = [D(e1), ..., D(en)]
            items = []
            for item in t.items:
                items.append((yield self.term(item)))
            return ListLit(tuple(items), span=s)
        if isinstance(t, Annot):
            # D((e : A)) = (D(e) : D(A))
            expr = yield self.term(t.expr)
            return Annot(expr, self.located_type(t.type, s), span=s)
        if isinstance(t, LinLam):
            # D(\a -o e) = \a -o D(e): the parameter ranges over D(K) when the body is
            # in d<K> (AD.md section 9, the linear constructs)
            scope = self.bind((t.param,), None)
            body = yield self.term(t.body)
            self.unbind(scope)
            return LinLam(t.param, body, span=s)
        if isinstance(t, Zero):
            # D(zero) = zero, now over the ring D(K)
            return t
        if isinstance(t, Seed):
            # D(seed i) = seed i over the ring D(K); a computed index is a real of the
            # program: its primal numbers the input (seed (fst D(i)))
            if isinstance(t.index, Const):
                return t
            index = yield self.term(t.index)
            return Seed(primal_of(RealT(), index, s), span=s)
        if isinstance(t, Plus):
            # D(e1 <+> e2) = D(e1) <+> D(e2): cotangents over D(K) add in D(K)
            left = yield self.term(t.left)
            right = yield self.term(t.right)
            return Plus(left, right, span=s)
        if isinstance(t, ReadOff):
            # D(cotangent x e) = cotangent D(x) D(e): the backward phase runs over D(K) and
            # returns D(A)
            point = yield self.term(t.point)
            cotangent = yield self.term(t.cotangent)
            return ReadOff(point, cotangent, span=s)
        # anything this arm list does not know
        raise not_differentiable(t)

    def differentiation(self, t: Prim):
        """D of a use of ``grad``/``jvp``/``vjp``/... that :mod:`lambdad.nesting` did not
        write out, because the function it differentiates has no image it could build (a
        function given as an argument); the expansion marks such a use with the function's
        type (:func:`marked_function_type`).  →D has a rule for it
        (:meth:`lambdad.forward._Forward.differentiation`); ←D has none: raises
        :class:`NoReverseImageError` at the use (and NestedDifferentiationError for a use
        not marked: the expansion comes first)."""
        if marked_function_type(t) is None:
            raise not_differentiable(t)
        # a use inside the function, of the argument itself, is refused first, where it is
        yield self.term(marked_function(t))
        raise no_reverse_image(t)

    def chain_rule(self, t: Prim, prim: Primitive):
        """BMP, primitive application: D(f(t1..tk)) = let (x1, dx1) = D(t1) in ...
        let (xk, dxk) = D(tk) in (f(x1..xk), combine [(∂1f(x1..xk), dx1), ...]) — with
        ``let r = f(x1..xk) in (r, ...)`` when the partials mention the result.  A literal
        argument has a zero derivative, so its partial is left out: ``x ^ 2`` is
        differentiated as a power with a constant exponent (never ``log`` of its base)."""
        s = t.span
        images: dict[int, Term] = {}
        for i, arg in enumerate(t.args):
            if not isinstance(arg, Var):
                images[i] = yield self.term(arg)
        order, params = name_arguments(t.args, self.suffix, self.names)
        primals = [primal for primal, _ in params]
        taken = {n for pair in params for n in pair}
        result = result_name(prim, taken)
        if result is not None:
            taken.add(result)
        application = Prim(t.op, tuple(Var(x, span=s) for x in primals), span=s)
        # A constant argument (a literal, or a constant of the differentiation: see
        # inactive) has a zero derivative part: its term is left out (0 * e = 0 in the
        # sum of tangents; in ←D, a zero backpropagator is sent nothing).
        varying = ([not isinstance(arg, Const) and not self.inactive(arg) for arg in t.args]
                   if self.constants else [not isinstance(arg, Const) for arg in t.args])
        contributions = [
            (derivative, derivative_name)
            for keep, derivative, (_, derivative_name)
            in zip(varying, partials(prim, primals, result, s), params)
            if keep
        ]
        if prim.kind == "elementwise":
            # arrays and reals broadcast: each argument's cotangent is summed to its shape
            kept = [primal for keep, primal in zip(varying, primals) if keep]
            derivative_part = self.combine(contributions, taken, s, kept)
        else:
            derivative_part = self.combine(contributions, taken, s)
        body: Term = Pair(application if result is None else Var(result, span=s),
                          derivative_part, span=s)
        if result is not None:
            body = Let(result, application, body, span=s)
        for i in reversed(order):
            primal, derivative_name = params[i]
            body = LetPair(primal, derivative_name, images.get(i, t.args[i]), body, span=s)
        return body

    def array_rule(self, t: Prim, prim: Primitive):
        """An array primitive (AD.md section 10), by its rule in the table:
        D(f(t1..tk)) = let (x1, dx1) = D(t1) in ... in (f(x1..xk), δ) where δ is the
        rule's tangent (→D) or ``\a -o`` its cotangent (←D, one backpropagator for the
        whole array result), over the primals, their derivative parts and ``result``.  An
        index or a size argument ("primal") is passed as its primal; a list argument
        ("whole") as its image, the rule reading its pairs; a primitive whose result is a
        list ("image") has its whole image given by the rule."""
        s = t.span
        rule = prim.rule
        param_types, _ = signature(prim)
        renaming: dict[str, str] = {}
        bindings: list[tuple[str, str | None, Term]] = []
        value_args: list[Term] = []
        zeros: set[str] = set()  # the derivative parts of constant arguments
        for arg, param, param_type, mode in zip(t.args, prim.params, param_types, rule.modes):
            if mode == "split" and self.inactive(arg):
                zeros.add(param + self.suffix)
            image = yield self.term(arg)
            primal = self.names.fresh(param, (self.suffix,))
            renaming[param] = primal
            if mode == "primal":
                bindings.append((primal, None, primal_of(param_type, image, s)))
                value_args.append(Var(primal, span=s))
            elif mode == "whole":
                bindings.append((primal, None, image))
                value_args.append(primal_of(param_type, Var(primal, span=s), s))
            else:
                renaming[param + self.suffix] = primal + self.suffix
                bindings.append((primal, primal + self.suffix, image))
                value_args.append(Var(primal, span=s))
        application = Prim(t.op, tuple(value_args), span=s)
        template = array_rule_term(prim, self.suffix)
        if zeros and rule.modes != ("image",):
            template = without_zero_parts(
                template, zeros, {param + self.suffix for param, mode
                                  in zip(prim.params, rule.modes) if mode == "split"}
            ) or template
        if rule.modes == ("image",):
            body: Term = rename(template, renaming, s)
        else:
            result = None
            if prim.result is not None:
                result = renaming[prim.result] = self.names.fresh(prim.result)
            shared = []
            for name, term, _ in array_rule_shared(prim):
                shared.append((renaming.setdefault(name, self.names.fresh(name)), term))
            linear = self.names.fresh(LINEAR_PARAM)
            renaming[LINEAR_PARAM] = linear
            derivative = rename(template, renaming, s)
            if self.suffix == BACKPROPAGATOR:
                derivative = LinLam(linear, derivative, span=s)
            # the rule's shared values, bound ahead of the derivative part (those it uses)
            body = Pair(application if result is None else Var(result, span=s), derivative,
                        span=s)
            used = free_vars(derivative) if shared else frozenset()
            for name, term in reversed(shared):
                if name in used:
                    body = Let(name, rename(term, renaming, s), body, span=s)
                    used = used | free_vars(body.value)
            if result is not None:
                body = Let(result, application, body, span=s)
        for primal, derivative_name, image in reversed(bindings):
            body = (Let(primal, image, body, span=s) if derivative_name is None
                    else LetPair(primal, derivative_name, image, body, span=s))
        return body

    def locally_constant(self, t: Prim, prim: Primitive):
        """Comparisons, logic, ``length``/``range``, structural primitives:
        D(f(t1..tk)) = f(a1..ak) with ``ai = fst D(ti)`` where f takes a real and
        ``ai = D(ti)`` otherwise, each real of the result paired with a zero derivative
        (``D(t1 < t2) = fst D(t1) < fst D(t2)``, ``D(length xs) = (length xs, 0)``,
        ``D(map f xs) = map D(f) D(xs)``), all read from the primitive's type."""
        s = t.span
        param_types, result_type = signature(prim)
        args = []
        for arg, param_type in zip(t.args, param_types):
            image = yield self.term(arg)
            args.append(primal_of(param_type, image, s))
        application = Prim(t.op, tuple(args), span=s)
        return lift(result_type, application, self.zero_of(s), s)

    def located_type(self, t: Type, span: Span | None) -> Type:
        """D(t); a DifferentiationError it raises is located at ``span``."""
        try:
            return self.transform_type(t)
        except DifferentiationError as error:
            raise error.with_span(span) from None
