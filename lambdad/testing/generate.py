"""Type-directed generation of random well-typed programs, terms and points (hypothesis
strategies)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

from ..iterate import run
from ..primitives import (
    ADD,
    FOLD,
    FST,
    LENGTH,
    MAP,
    MUL,
    PRIMITIVES,
    RANGE,
    SND,
    ZIP,
    Primitive,
    declaring,
)
from ..printer import print_module
from ..rules import NameSupply
from ..syntax import (
    BOOL,
    REAL,
    Annot,
    App,
    BoolLit,
    BoolT,
    Builtin,
    Const,
    Decl,
    FunT,
    If,
    Lam,
    Let,
    LetPair,
    ListLit,
    ListT,
    Module,
    Pair,
    PairT,
    tuple_components,
    tuple_type,
    Prim,
    RealT,
    Term,
    Type,
    Var,
    free_vars,
)
from .shapes import (
    BoolShape,
    FunShape,
    INPUT_BOUND,
    INPUT_KINDS,
    INPUT_REAL,
    ListShape,
    MAGNITUDE,
    MAX_LIST,
    PARAM_REAL,
    PairShape,
    Ranges,
    RealShape,
    _CONSTANTS,
    _LITERAL_ARGUMENTS,
    _is_real_function,
    _join,
    _within,
    standard_shape,
)


# --------------------------------------------------------------------------- programs


@attrs.frozen(repr=False)
class GeneratedProgram:
    """A random module and the function of it to differentiate.

    ``params`` are the function's curried parameters with their types; a point for it is a
    single value if there is one parameter, else a tuple with one component per parameter.
    Its ``repr`` is the source text, so a failing example reads as a program.
    """

    module: Module
    name: str
    params: tuple[tuple[str, Type], ...]

    def __repr__(self) -> str:
        try:
            text = self.source()
        except Exception:  # a printer bug must not hide the example that shows it
            return f"GeneratedProgram(module={self.module!r}, name={self.name!r})"
        return "GeneratedProgram(source=" + repr("\n" + text) + ")"

    def __str__(self) -> str:
        return self.source()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # hypothesis prints falsifying examples with this hook (IPython's protocol).
        printer.text(repr(self))

    def source(self) -> str:
        """The module as lambdad source text (via the printer)."""
        return print_module(self.module)

    @property
    def input_type(self) -> Type:
        """The type of a point: the parameter's type, or the tuple of the parameters' types."""
        return tuple_type([t for _, t in self.params])

    def decl(self) -> Decl:
        """The declaration of the function to differentiate."""
        return next(d for d in self.module.decls if d.name == self.name)


_PREFIX = {RealT: "y", BoolT: "c", PairT: "p", ListT: "xs", FunT: "g"}

# Names a binding sometimes gets instead of a fresh one: they shadow inputs (`x`) and helpers
# (`h1`), look like the tangents, backpropagators and parameters the transformations
# generate (`x'`, `x_`, `a`), or are the target language's own words (`zero`, `seed`,
# `cotangent`, `d`), which a local binding may shadow.  Never of the fresh form (`y12`).
TRICKY_NAMES = ("x", "a", "r", "d", "x_", "x'", "a_", "a'", "v'", "zero", "seed",
                "cotangent", "h1")


def _extend(env: tuple, *entries: tuple[str, Any]) -> tuple:
    """``env`` with ``entries`` bound last, hiding earlier bindings of the same names."""
    names = {name for name, _ in entries}
    return tuple(e for e in env if e[0] not in names) + tuple(entries)


class _Builder:
    """Type-directed generation of one program.  Every ``gen_*`` method is a generator
    driven by :func:`lambdad.iterate.run` (sub-terms are ``yield``-ed), returning
    ``(term, shape)``."""

    def __init__(self, draw: Callable, names: NameSupply, budget: int, ranges: Ranges,
                 tricky: bool = True, declared: Sequence[Primitive] = ()):
        self.draw = draw
        self.names = names
        self.budget = budget
        self.ranges = ranges
        self.tricky = tricky
        self.image = ranges.image
        self.squashers = ranges.squashers
        # A program's declared primitives, drawn in half the primitive applications: they
        # are what a fuzz run with them is about.
        self.declared = list(declared)
        self.reals = [p for p in PRIMITIVES.values() if _is_real_function(p)] + self.declared
        self.operators = [p for p in self.reals if p.spelling.fixity == "infix"]
        self.tests = [p for p in PRIMITIVES.values() if p.kind == "test"]
        self.logic = [p for p in PRIMITIVES.values()
                      if p.kind == "logic" and p.type == FunT(BOOL, BOOL)]

    # ---- choices (hypothesis shrinks toward the first option)
    def choose(self, options: Sequence[tuple[str, float]]) -> str:
        """One of the weighted ``(name, weight)`` options; zero weights are impossible."""
        options = [(name, w) for name, w in options if w > 0]
        total = sum(w for _, w in options)
        ticks = [max(1, round(100 * w / total)) for _, w in options]
        k = self.draw(st.integers(0, sum(ticks) - 1))
        for (name, _), tick in zip(options, ticks):
            if k < tick:
                return name
            k -= tick
        return options[-1][0]

    def pick(self, items: Sequence[Any]) -> Any:
        """One of ``items`` (shrinking toward the first)."""
        return items[self.draw(st.integers(0, len(items) - 1))]

    def flip(self, p: float) -> bool:
        """True with probability ``p`` (shrinking toward False)."""
        return self.draw(st.integers(0, 99)) >= 100 - round(100 * p)

    def spend(self) -> bool:
        """Whether there is size budget left for one more compound construct."""
        self.budget -= 1
        return self.budget > 0

    # ---- dispatch
    def gen(self, t: Type, env: tuple, depth: int):
        """A term of type ``t`` over ``env`` (tuple of ``(name, shape)``), and its shape."""
        if isinstance(t, RealT):
            return (yield self.gen_real(env, depth))
        if isinstance(t, BoolT):
            return (yield self.gen_bool(env, depth))
        if isinstance(t, PairT):
            return (yield self.gen_pair(t, env, depth))
        if isinstance(t, ListT):
            return (yield self.gen_list(t, env, depth))
        if isinstance(t, FunT):
            return (yield self.gen_function(t, env, depth))
        raise ValueError(f"cannot generate terms of type {t!r}")

    # ---- environment
    def candidates(self, t: Type, env: tuple) -> list[tuple[Term, Any]]:
        """Variables of type ``t`` in ``env`` and projections of pair variables to ``t``,
        most recent first (sharing: what was just bound is used most)."""
        found = []
        for name, shape in reversed(env):
            stack: list[tuple[Term, Any]] = [(Var(name), shape)]
            while stack:
                term, s = stack.pop()
                if s.type == t:
                    found.append((term, s))
                elif isinstance(s, PairShape) and len(found) < 40:
                    stack.append((SND.applied(term), s.second))
                    stack.append((FST.applied(term), s.first))
        return found

    def variable(self, t: Type, env: tuple) -> tuple[Term, Any] | None:
        """A variable (or projection) of type ``t`` from ``env``, or None if there is none."""
        found = self.candidates(t, env)
        if not found:
            return None
        # Geometric preference for recent bindings.
        index = 0
        while index < len(found) - 1 and self.flip(0.45):
            index += 1
        return found[index]

    # ---- fitting values into the box a λ expects
    def squash(self, term: Term, shape: RealShape) -> tuple[Term, RealShape]:
        """``u term`` with ``u`` a bounded primitive: a real of magnitude at most ~1."""
        u = self.pick(self.squashers)
        return Prim(u.name, (term,)), self.image(u, [shape]) or RealShape(-1.0, 1.0)

    def fit(self, term: Term, shape: Any, target: Any) -> tuple[Term, Any]:
        """``term`` changed (squashed, eta-expanded, mapped) so its shape is within ``target``."""
        if _within(shape, target):
            return term, shape
        if isinstance(shape, RealShape):
            return self.squash(term, shape)
        if isinstance(shape, PairShape):
            a, b = self.names.fresh("y"), self.names.fresh("y")
            first, s1 = self.fit(Var(a), shape.first, target.first)
            second, s2 = self.fit(Var(b), shape.second, target.second)
            return LetPair(a, b, term, Pair(first, second)), PairShape(s1, s2)
        if isinstance(shape, ListShape):
            v = self.names.fresh("v")
            body, s = self.fit(Var(v), shape.item, target.item)
            return MAP.applied(Lam(v, body), term), ListShape(s, shape.length)
        if isinstance(shape, FunShape):
            v = self.names.fresh("v")
            body, s = self.fit(App(term, Var(v)), shape.result, target.result)
            return Lam(v, body), FunShape(shape.arg, s)
        return term, shape

    def bind(self, prefix: str) -> str:
        """A name for a new binding: fresh, or now and then one of :data:`TRICKY_NAMES`
        (shadowing an outer binding, or spelled like the names the transformations make)."""
        if self.tricky and self.flip(0.15):
            return self.pick(TRICKY_NAMES)
        return self.names.fresh(prefix)

    def lam(self, param: str, param_type: Type, body: Term) -> Lam:
        """``\\param -> body``, with the parameter annotated half of the time."""
        return Lam(param, body, param_type if self.flip(0.5) else None)

    # ---- reals
    def leaf_real(self, env: tuple) -> tuple[Term, RealShape]:
        """A real variable (mostly) or a literal."""
        if not self.flip(0.2):
            found = self.variable(REAL, env)
            if found is not None:
                return found
        c = self.pick(_CONSTANTS)
        return Const(c), RealShape(c, c)

    def real_of(self, name: str, shape: Any) -> tuple[Term, RealShape] | None:
        """A real computed from the variable ``name``: itself, a projection, or the sum of a
        list of reals; None for other values."""
        found = self.candidates(REAL, ((name, shape),))
        if found:
            return self.pick(found)
        if isinstance(shape, ListShape) and isinstance(shape.item, RealShape):
            acc, v = self.names.fresh("acc"), self.names.fresh("v")
            add = Lam(acc, Lam(v, ADD.applied(Var(acc), Var(v))))
            lo, hi = min(shape.item.lo, 0.0), max(shape.item.hi, 0.0)
            return (FOLD.applied(add, Const(0.0), Var(name)),
                    RealShape(MAX_LIST * lo, MAX_LIST * hi))
        return None

    def mention(self, term: Term, shape: RealShape, entries: Sequence[tuple[str, Any]]
                ) -> tuple[Term, RealShape]:
        """The real ``term`` combined (``+``, ``*``) with each variable of ``entries`` it does
        not use yet, most of the time: an unused binding shares nothing, and a function that
        ignores its input has a zero derivative."""
        for name, s in entries:
            if name == "_" or self.flip(0.2) or name in free_vars(term):
                continue
            leaf = self.real_of(name, s)
            if leaf is None:
                continue
            made = self.apply_real(self.pick([ADD, MUL]), [(term, shape), leaf])
            if made is not None:
                term, shape = made
        return term, shape

    def gen_real(self, env: tuple, depth: int):
        """A real term: any construct of the language that can produce ``R``."""
        if depth <= 0 or not self.spend():
            return self.leaf_real(env)
        has_pairs = any(isinstance(s, PairShape) for _, s in env)
        kind = self.choose([
            ("leaf", 2), ("prim", 6), ("let", 2.5), ("chain", 1), ("letpair", 1),
            ("project", 0.7), ("if", 1), ("apply", 2), ("fold", 1.5), ("length", 0.3),
            ("annot", 0.3), ("path", 1 if has_pairs else 0), ("poly", 0.5),
        ])
        if kind == "leaf":
            return self.leaf_real(env)
        if kind == "prim":
            term, shape = yield self.gen_prim(env, depth)
        elif kind == "let":
            term, shape = yield self.gen_let(REAL, env, depth)
        elif kind == "chain":
            term, shape = yield self.gen_chain(env, depth)
        elif kind == "letpair":
            term, shape = yield self.gen_letpair(REAL, env, depth)
        elif kind == "project":
            other = self.pick([REAL, PairT(REAL, REAL)])
            first = self.flip(0.5)
            t = PairT(REAL, other) if first else PairT(other, REAL)
            pair, s = yield self.gen(t, env, depth - 1)
            term, shape = (FST.applied(pair), s.first) if first else (SND.applied(pair),
                                                                            s.second)
        elif kind == "if":
            term, shape = yield self.gen_if(REAL, env, depth)
        elif kind == "apply":
            term, shape = yield self.gen_apply(REAL, env, depth)
        elif kind == "fold":
            term, shape = yield self.gen_fold(env, depth)
        elif kind == "length":
            xs, s = yield self.gen_list(ListT(self.pick([REAL, PairT(REAL, REAL)])), env,
                                        depth - 1)
            n = s.length if isinstance(s.length, int) else MAX_LIST
            term, shape = LENGTH.applied(xs), RealShape(0.0, float(n))
        elif kind == "annot":
            inner, shape = yield self.gen_real(env, depth - 1)
            term = Annot(inner, REAL)
        elif kind == "poly":
            term, shape = yield self.gen_poly(env, depth)
        else:
            term, shape = self.variable(REAL, env) or self.leaf_real(env)
        if shape.magnitude > MAGNITUDE:
            term, shape = self.squash(term, shape)
        return term, shape

    def gen_poly(self, env: tuple, depth: int):
        """A polymorphic local function used at two types (let-polymorphism):
        ``let id = \\z -> z in id e1 + fst (id (e2, e3))``, ``let k = \\a b -> a in ...``
        used with a boolean and a list, or ``let tw = \\g z -> g (g z) in ...`` used on a real
        and on a pair."""
        e1, s1 = yield self.gen_real(env, depth - 1)
        e2, s2 = yield self.gen_real(env, depth - 1)
        e3, _ = yield self.gen_real(env, depth - 1)
        kind = self.pick(["id", "const", "twice"])
        name, z = self.names.fresh("g"), self.names.fresh("z")
        if kind == "id":
            value: Term = Lam(z, Var(z))
            first = (App(Var(name), e1), s1)
            second = (FST.applied(App(Var(name), Pair(e2, e3))), s2)
        elif kind == "const":
            b = self.names.fresh("z")
            value = Lam(z, Lam(b, Var(z)))
            first = (App(App(Var(name), e1), BoolLit(self.flip(0.5))), s1)
            second = (App(App(Var(name), e2), ListLit((e3,))), s2)
        else:
            g, q = self.names.fresh("g"), self.names.fresh("p")
            value = Lam(g, Lam(z, App(Var(g), App(Var(g), Var(z)))))
            fn, fs = yield self.gen_function(FunT(REAL, REAL), env, depth - 1)
            fn, _ = self.fit(fn, fs, standard_shape(FunT(REAL, REAL)))
            e1, s1 = self.fit(e1, s1, PARAM_REAL)
            swap = Lam(q, Pair(SND.applied(Var(q)), FST.applied(Var(q))))
            first = (App(App(Var(name), fn), e1), PARAM_REAL)
            second = (FST.applied(App(App(Var(name), swap), Pair(e2, e3))), s2)
        made = self.apply_real(self.pick([ADD, MUL]), [first, second])
        body, shape = made if made is not None else first
        return Let(name, value, body), shape

    def wrappings(self, term: Term, shape: RealShape, position: int, arity: int):
        """The ways of passing ``term`` as argument ``position``: as is, squashed, squashed
        and shifted positive, squashed and halved, squared plus one, or (second argument) a
        literal."""
        out = [(term, shape)]
        squashed, s = self.squash(term, shape)
        out.append((squashed, s))
        out.append((ADD.applied(squashed, Const(2.0)), RealShape(s.lo + 2.0, s.hi + 2.0)))
        # Halved: strictly inside (-1, 1), for asin, acos, atanh.
        out.append((MUL.applied(squashed, Const(0.5)), RealShape(s.lo / 2, s.hi / 2)))
        w = self.names.fresh("w")
        low = 0.0 if shape.lo < 0.0 < shape.hi else min(shape.lo ** 2, shape.hi ** 2)
        positive = Let(w, term, ADD.applied(MUL.applied(Var(w), Var(w)), Const(1.0)))
        out.append((positive, RealShape(low + 1.0, shape.magnitude ** 2 + 1.0)))
        if arity == 2 and position == 1:
            out.extend((Const(c), RealShape(c, c)) for c in _LITERAL_ARGUMENTS)
        return out

    def apply_real(self, prim: Primitive, args: list[tuple[Term, RealShape]]):
        """``prim`` applied to ``args``, each wrapped as little as the primitive's domain
        allows; None if no wrapping works."""
        options = [self.wrappings(t, s, i, len(args)) for i, (t, s) in enumerate(args)]
        least = not self.flip(0.3)  # mostly the least wrapping that works, else any that does
        passing = []
        for combo in itertools.product(*options):
            literal = any(i > 0 and isinstance(t, Const) and t.value in _LITERAL_ARGUMENTS
                          for i, (t, _) in enumerate(combo))
            # A literal integer argument is a constant, not a differentiated input: the
            # primitive only has to evaluate there (`(x - y) ^ 2` with a negative base is
            # fine), and so do its partials (`2 * (x - y) ^ 1`).  Not so for `(x - x) ^ 0.5`,
            # whose partial `0.5 * 0 ^ -0.5` fails: other literals respect the domain.
            r = self.image(prim, [s for _, s in combo], respect_domain=not literal)
            if r is not None:
                passing.append((combo, r))
                if least:
                    break
        if not passing:
            return None
        combo, r = self.pick(passing)
        return Prim(prim.name, tuple(t for t, _ in combo)), r

    def gen_prim(self, env: tuple, depth: int):
        """A real primitive of the table applied to real terms, inside its domain."""
        # Operators (+, -, *, /, ^) are what most programs are made of: drawn more often.
        if self.declared and self.flip(0.5):
            prim = self.pick(self.declared)
        else:
            prim = self.pick(self.operators if self.flip(0.25) else self.reals)
        args = []
        for _ in range(prim.arity):
            args.append((yield self.gen_real(env, depth - 1)))
        made = self.apply_real(prim, args)
        return made if made is not None else self.leaf_real(env)

    def gen_chain(self, env: tuple, depth: int):
        """``let y1 = op v v in let y2 = op y1 y1 in ... body``: each value used several times
        (the sharing that makes naive backpropagation exponential)."""
        start, shape = yield self.gen_real(env, depth - 1)
        length = self.draw(st.integers(2, 4))
        bindings = []
        previous: tuple[Term, RealShape] = (start, shape)
        scope = env
        for _ in range(length):
            name = self.bind("y")
            binary = [p for p in self.reals if p.arity == 2]
            prim = self.pick(binary)
            if previous[0] is start:
                value, s = previous
            else:
                made = self.apply_real(prim, [previous, previous])
                if made is None:
                    break
                value, s = made
                if s.magnitude > MAGNITUDE:
                    value, s = self.squash(value, s)
            bindings.append((name, value))
            scope = _extend(scope, (name, s))
            previous = (Var(name), s)
        body, body_shape = yield self.gen_real(scope, depth - 1)
        if self.flip(0.7):
            # Make sure the end of the chain is used, and used with something else.
            made = self.apply_real(self.pick([ADD, MUL]), [previous, (body, body_shape)])
            if made is not None:
                body, body_shape = made
        for name, value in reversed(bindings):
            body = Let(name, value, body)
        return body, body_shape

    def gen_fold(self, env: tuple, depth: int):
        """``fold (\\acc v -> e) z xs`` with the accumulator kept in the parameter box."""
        item_type = self.pick([REAL, PairT(REAL, REAL)])
        acc_type = self.pick([REAL, REAL, PairT(REAL, REAL)])
        xs, xs_shape = yield self.gen_list(ListT(item_type), env, depth - 1)
        z, z_shape = yield self.gen(acc_type, env, depth - 1)
        acc_shape = standard_shape(acc_type)
        z, _ = self.fit(z, z_shape, acc_shape)
        acc, v = self.bind("acc"), self.bind("v")
        if v == acc:
            v = self.names.fresh("v")
        scope = _extend(env, (acc, acc_shape), (v, xs_shape.item))
        body, body_shape = yield self.gen(acc_type, scope, depth - 1)
        if isinstance(acc_type, RealT):
            body, body_shape = self.mention(body, body_shape, scope[-2:])
        body, _ = self.fit(body, body_shape, acc_shape)
        f = self.lam(acc, acc_type, self.lam(v, item_type, body))
        folded = FOLD.applied(f, z, xs)
        if isinstance(acc_type, RealT):
            return folded, acc_shape
        first = self.flip(0.5)
        return (FST if first else SND).applied(folded), PARAM_REAL

    # ---- booleans
    def gen_bool(self, env: tuple, depth: int):
        if depth <= 0 or not self.spend():
            found = self.variable(BOOL, env)
            if found is not None and self.flip(0.5):
                return found
            value = self.flip(0.5)
            return BoolLit(value), BoolShape()
        kind = self.choose([("compare", 6), ("not", 1 if self.logic else 0), ("and", 1),
                            ("or", 1), ("let", 0.5), ("literal", 0.3)])
        if kind == "compare":
            test = self.pick(self.tests)
            a, _ = yield self.gen_real(env, depth - 1)
            b, _ = yield self.gen_real(env, depth - 1)
            return Prim(test.name, (a, b)), BoolShape()
        if kind == "not":
            b, _ = yield self.gen_bool(env, depth - 1)
            return Prim(self.pick(self.logic).name, (b,)), BoolShape()
        if kind in ("and", "or"):
            a, _ = yield self.gen_bool(env, depth - 1)
            b, _ = yield self.gen_bool(env, depth - 1)
            # `a && b` and `a || b` are sugar for these conditionals (LANGUAGE.md section 4).
            if kind == "and":
                return If(a, b, BoolLit(False)), BoolShape()
            return If(a, BoolLit(True), b), BoolShape()
        if kind == "let":
            return (yield self.gen_let(BOOL, env, depth))
        return BoolLit(self.flip(0.5)), BoolShape()

    # ---- pairs
    def gen_tuple(self, t: PairT, env: tuple, depth: int):
        """``(e1, ..., ek)``: the literal k-tuple of type ``t``, its rest a literal too (as
        the parser makes it)."""
        components = tuple_components(t)
        items = []
        for component in components:
            items.append((yield self.gen(component, env, depth)))
        term, shape = items[-1]
        for k, (item, item_shape) in enumerate(reversed(items[:-1]), start=2):
            term, shape = Pair(item, term, k), PairShape(item_shape, shape, k)
        return term, shape

    def gen_pair(self, t: PairT, env: tuple, depth: int):
        if depth <= 0 or not self.spend():
            found = self.variable(t, env)
            if found is not None and self.flip(0.6):
                return found
            if t.arity > 2:
                return (yield self.gen_tuple(t, env, 0))
            first, s1 = yield self.gen(t.first, env, 0)
            second, s2 = yield self.gen(t.second, env, 0)
            return Pair(first, second), PairShape(s1, s2)
        kind = self.choose([("pair", 5), ("var", 1.5), ("let", 1), ("if", 0.7),
                            ("letpair", 0.5), ("annot", 0.3)])
        shared = yield self.gen_shared(kind, t, env, depth)
        if shared is not None:
            return shared
        if t.arity > 2:
            term, shape = yield self.gen_tuple(t, env, depth - 1)
        else:
            first, s1 = yield self.gen(t.first, env, depth - 1)
            second, s2 = yield self.gen(t.second, env, depth - 1)
            term, shape = Pair(first, second), PairShape(s1, s2)
        if kind == "annot":
            term = Annot(term, t)
        return term, shape

    # ---- lists
    def gen_list(self, t: ListT, env: tuple, depth: int):
        item = t.item
        is_real_list = isinstance(item, RealT)
        if depth <= 0 or not self.spend():
            found = self.variable(t, env)
            if found is not None and self.flip(0.7):
                return found
            if is_real_list and self.flip(0.25):
                return self.range_literal()
            return (yield self.list_literal(item, env, 0))
        kind = self.choose([
            ("literal", 3), ("var", 2), ("map", 3),
            ("range", 2 if is_real_list else 0), ("zip", 0 if is_real_list else 4),
            ("let", 0.7), ("if", 0.3),
        ])
        shared = yield self.gen_shared(kind, t, env, depth)
        if shared is not None:
            return shared
        if kind == "range":
            if self.flip(0.5):
                xs, s = yield self.gen_list(ListT(self.pick([REAL, PairT(REAL, REAL)])), env,
                                            depth - 1)
                n = s.length if isinstance(s.length, int) else MAX_LIST
                return (RANGE.applied(LENGTH.applied(xs)),
                        ListShape(RealShape(0.0, float(max(n - 1, 0))), s.length))
            return self.range_literal()
        if kind == "map":
            return (yield self.gen_map(t, env, depth))
        if kind == "zip":
            return (yield self.gen_zip(t, env, depth))
        return (yield self.list_literal(item, env, depth - 1))

    def range_literal(self) -> tuple[Term, ListShape]:
        """``range k`` for a literal ``k``."""
        k = self.draw(st.integers(0, MAX_LIST))
        return (RANGE.applied(Const(float(k))),
                ListShape(RealShape(0.0, float(max(k - 1, 0))), k))

    def list_literal(self, item: Type, env: tuple, depth: int):
        n = self.draw(st.integers(1, MAX_LIST))
        items, shapes = [], []
        target = standard_shape(item)
        for _ in range(n):
            term, s = yield self.gen(item, env, depth)
            term, s = self.fit(term, s, target)
            items.append(term)
            shapes.append(s)
        shape = shapes[0]
        for s in shapes[1:]:
            shape = _join(shape, s)
        return ListLit(tuple(items)), ListShape(shape, n)

    def gen_map(self, t: ListT, env: tuple, depth: int):
        """``map f xs``, ``f`` a λ over the items or any function value."""
        source_item = self.pick([REAL, REAL, PairT(REAL, REAL)])
        xs, xs_shape = yield self.gen_list(ListT(source_item), env, depth - 1)
        target = standard_shape(t.item)
        if self.flip(0.6):
            v = self.bind("v")
            body, s = yield self.gen(t.item, _extend(env, (v, xs_shape.item)), depth - 1)
            body, s = self.fit(body, s, target)
            f: Term = self.lam(v, source_item, body)
        else:
            f, fs = yield self.gen_function(FunT(source_item, t.item), env, depth - 1)
            f, fs = self.fit(f, fs, FunShape(fs.arg, target))
            s = fs.result
        return MAP.applied(f, xs), ListShape(s, xs_shape.length)

    def gen_zip(self, t: ListT, env: tuple, depth: int):
        """``zip xs ys`` on two lists of equal length (same origin or same literal length)."""
        pair = t.item
        xs, xs_shape = yield self.gen_list(ListT(pair.first), env, depth - 1)
        how = self.choose([("map", 2), ("same", 1), ("literal", 1 if isinstance(xs_shape.length,
                                                                                 int) else 0)])
        if how == "literal":
            items, shapes = [], []
            for _ in range(xs_shape.length):
                term, s = yield self.gen(pair.second, env, depth - 2)
                term, s = self.fit(term, s, standard_shape(pair.second))
                items.append(term)
                shapes.append(s)
            ys: Term = ListLit(tuple(items))
            item_shape = shapes[0] if shapes else standard_shape(pair.second)
            for s in shapes[1:]:
                item_shape = _join(item_shape, s)
            ys_shape = ListShape(item_shape, xs_shape.length)
        elif how == "same" and pair.second == pair.first:
            ys, ys_shape = xs, xs_shape
        else:
            v = self.bind("v")
            body, s = yield self.gen(pair.second, _extend(env, (v, xs_shape.item)), depth - 2)
            body, s = self.fit(body, s, standard_shape(pair.second))
            ys, ys_shape = (MAP.applied(self.lam(v, pair.first, body), xs),
                            ListShape(s, xs_shape.length))
        return (ZIP.applied(xs, ys),
                ListShape(PairShape(xs_shape.item, ys_shape.item), xs_shape.length))

    # ---- functions
    def gen_function(self, t: FunT, env: tuple, depth: int):
        """A function value of type ``t``: a λ, a variable, a built-in used as a value, or a
        partial application."""
        builtins = self.builtin_values(t)
        partial = isinstance(t.result, RealT) and isinstance(t.arg, RealT)
        if depth <= 0 or not self.spend():
            found = self.variable(t, env)
            if found is not None and self.flip(0.6):
                return found
            if builtins and self.flip(0.5):
                return self.pick(builtins)
            return (yield self.gen_lambda(t, env, 0))
        kind = self.choose([("lambda", 5), ("var", 2), ("builtin", 1.5 if builtins else 0),
                            ("partial", 1.5 if partial else 0), ("let", 0.5), ("if", 0.3)])
        shared = yield self.gen_shared(kind, t, env, depth)
        if shared is not None:
            return shared
        if kind == "builtin":
            return self.pick(builtins)
        if kind == "partial":
            curried = FunT(REAL, t)
            g, gs = yield self.gen_function(curried, env, depth - 1)
            a, a_shape = yield self.gen_real(env, depth - 1)
            a, _ = self.fit(a, a_shape, gs.arg)
            return App(g, a), gs.result
        return (yield self.gen_lambda(t, env, depth))

    def builtin_values(self, t: FunT) -> list[tuple[Term, FunShape]]:
        """Real primitives written as functions that fit ``t`` and are defined on the whole
        parameter box (``sin``, ``max``... as values: ``map sin xs``)."""
        arity = 0
        current: Type = t
        while isinstance(current, FunT) and isinstance(current.arg, RealT):
            arity += 1
            current = current.result
        if not isinstance(current, RealT):
            return []
        found = []
        for p in self.reals:
            if p.arity != arity or p.spelling.fixity != "function":
                continue
            r = self.image(p, [PARAM_REAL] * arity)
            if r is None:
                continue
            shape: Any = r
            for _ in range(arity):
                shape = FunShape(PARAM_REAL, shape)
            found.append((Builtin(p.name), shape))
        return found

    def gen_lambda(self, t: FunT, env: tuple, depth: int):
        arg_shape = standard_shape(t.arg)
        if isinstance(t.arg, PairT) and self.flip(0.5):
            # \p -> let (a, b) = p in e : the desugaring of a pattern parameter, with our names
            # `p` stays fresh: the body does not see it, so it must not hide anything.
            p, a, b = self.names.fresh("p"), self.bind("y"), self.bind("y")
            if a == b:
                b = self.names.fresh("y")
            scope = _extend(env, (a, arg_shape.first), (b, arg_shape.second))
            body, s = yield self.gen(t.result, scope, depth - 1)
            if isinstance(t.result, RealT):
                body, s = self.mention(body, s, scope[-2:])
            return (self.lam(p, t.arg, LetPair(a, b, Var(p), body)), FunShape(arg_shape, s))
        name = self.bind(_PREFIX[type(t.arg)])
        body, s = yield self.gen(t.result, _extend(env, (name, arg_shape)), depth - 1)
        if isinstance(t.result, RealT):
            body, s = self.mention(body, s, [(name, arg_shape)])
        return self.lam(name, t.arg, body), FunShape(arg_shape, s)

    def gen_apply(self, t: Type, env: tuple, depth: int):
        """``f a`` (or ``f a b``) for a function value ``f`` returning ``t``: higher-order
        application of variables, λs (β-redexes), built-ins and partial applications."""
        arg_types = self.pick([(REAL,), (REAL, REAL), (PairT(REAL, REAL),), (ListT(REAL),),
                               (FunT(REAL, REAL), REAL)])
        ft: Type = t
        for a in reversed(arg_types):
            ft = FunT(a, ft)
        f, shape = yield self.gen_function(ft, env, depth - 1)
        term = f
        for a in arg_types:
            arg, arg_shape = yield self.gen(a, env, depth - 1)
            arg, _ = self.fit(arg, arg_shape, shape.arg)
            term = App(term, arg)
            shape = shape.result
        return term, shape

    # ---- binding forms (any type)
    def gen_shared(self, kind: str, t: Type, env: tuple, depth: int):
        """A term of type ``t`` by a production that terms of every type share: a variable
        in scope (``var``), ``let``, ``if`` or ``let (a, b) =`` (``letpair``).  None for
        another ``kind``, or for ``var`` when no variable fits: the caller's own
        productions make the term then."""
        if kind == "var":
            return self.variable(t, env)
        if kind == "let":
            return (yield self.gen_let(t, env, depth))
        if kind == "if":
            return (yield self.gen_if(t, env, depth))
        if kind == "letpair":
            return (yield self.gen_letpair(t, env, depth))
        return None

    def gen_let(self, t: Type, env: tuple, depth: int):
        """``let x = e1 in e2`` (``e1`` of a random type; a λ is a local function)."""
        bound = self.pick([REAL, REAL, REAL, PairT(REAL, REAL), FunT(REAL, REAL), ListT(REAL),
                           FunT(REAL, FunT(REAL, REAL)), BOOL])
        value, s = yield self.gen(bound, env, depth - 1)
        name = self.bind(_PREFIX[type(bound)])
        body, body_shape = yield self.gen(t, _extend(env, (name, s)), depth - 1)
        if isinstance(t, RealT):
            body, body_shape = self.mention(body, body_shape, [(name, s)])
        return Let(name, value, body), body_shape

    def gen_letpair(self, t: Type, env: tuple, depth: int):
        """``let (a, b) = e1 in e2``, ``_`` for an ignored component now and then; now and
        then ``let (a, b, c) = e1 in e2`` of a triple."""
        pair_type = self.pick([PairT(REAL, REAL), PairT(REAL, PairT(REAL, REAL)),
                               PairT(ListT(REAL), REAL), tuple_type([REAL, REAL, REAL])])
        value, s = yield self.gen(pair_type, env, depth - 1)
        if pair_type.arity == 3 and isinstance(s, PairShape) and isinstance(s.second, PairShape):
            names = [self.bind("x") for _ in range(3)]
            if len(set(names)) < 3:
                names = [self.names.fresh("x") for _ in range(3)]
            rest = self.names.fresh("p")  # (the pattern's own name for the rest (b, c))
            parts = (s.first, s.second.first, s.second.second)
            bound = tuple(zip(names, parts))
            body, body_shape = yield self.gen(t, _extend(env, *bound), depth - 1)
            if isinstance(t, RealT):
                body, body_shape = self.mention(body, body_shape, bound)
            return LetPair(names[0], rest, value,
                           LetPair(names[1], names[2], Var(rest), body), 3), body_shape
        a = self.bind(_PREFIX[type(pair_type.first)])
        b = self.bind(_PREFIX[type(pair_type.second)])
        if a == b:
            b = self.names.fresh(_PREFIX[type(pair_type.second)])
        if self.flip(0.15):
            b = "_"
            if self.flip(0.3):
                a = "_"
        bound = tuple((n, c) for n, c in ((a, s.first), (b, s.second)) if n != "_")
        body, body_shape = yield self.gen(t, _extend(env, *bound), depth - 1)
        if isinstance(t, RealT):
            body, body_shape = self.mention(body, body_shape, bound)
        return LetPair(a, b, value, body), body_shape

    def gen_if(self, t: Type, env: tuple, depth: int):
        cond, _ = yield self.gen_bool(env, depth - 1)
        a, sa = yield self.gen(t, env, depth - 1)
        b, sb = yield self.gen(t, env, depth - 1)
        if isinstance(t, ListT) and sa.length != sb.length:
            return a, sa
        return If(cond, a, b), _join(sa, sb)


# --------------------------------------------------------------------------- modules


def _definition(name: str, params: Sequence[tuple[str, Type | None]], result: Type | None,
                body: Term) -> Decl:
    """``def name (x1 : A1) ... (xn : An) : B = body``: parameters become λs, the result
    annotation an ``Annot``."""
    value = Annot(body, result) if result is not None else body
    for param, t in reversed(params):
        value = Lam(param, value, t)
    return Decl(name, value)


def _input_params(builder: _Builder, kind: str) -> list[tuple[str, Any]]:
    if kind == "tuple":
        t = builder.pick([PairT(REAL, REAL), PairT(REAL, PairT(REAL, REAL))])
        return [("p", _input_shape(t, "p"))]
    if kind == "list":
        params: list[tuple[str, Any]] = [("xs", ListShape(INPUT_REAL, "xs"))]
        if builder.flip(0.5):
            params.append(("x", INPUT_REAL))
        return params
    if kind == "nested":
        return [("w", _input_shape(PairT(PairT(REAL, REAL), REAL), "w")), ("x", INPUT_REAL)]
    n = builder.draw(st.integers(1, 4))
    return [(f"x{i + 1}", INPUT_REAL) for i in range(n)]


def _input_shape(t: Type, key: str) -> Any:
    """The shape of an input of type ``t``: reals in the input box, lists of a length only
    known to be the input's own (``key``), functions and booleans as for a parameter."""
    if isinstance(t, RealT):
        return INPUT_REAL
    if isinstance(t, PairT):
        return PairShape(_input_shape(t.first, key), _input_shape(t.second, key))
    if isinstance(t, ListT):
        return ListShape(_input_shape(t.item, key), key)
    return standard_shape(t)


MAX_HELPERS = 2


def _helper(builder: _Builder, name: str, env: tuple, depth: int):
    """A top-level helper definition the main function may call: a first-order one of one or
    two reals, or a higher-order one taking a function.  Returns the declaration and its
    environment entry."""
    kind = builder.pick(["real", "real2", "higher"])
    params: list[tuple[str, Any]]
    if kind == "real":
        params = [("u", PARAM_REAL)]
    elif kind == "real2":
        params = [("u", PARAM_REAL), ("v", PARAM_REAL)]
    else:
        params = [("k", standard_shape(FunT(REAL, REAL))), ("u", PARAM_REAL)]
    body, shape = yield builder.gen_real(env + tuple(params), depth)
    body, shape = builder.mention(body, shape, [p for p in params if p[0] != "k"])
    body, shape = builder.fit(body, shape, PARAM_REAL)
    annotate = builder.flip(0.7)
    decl = _definition(name, [(p, s.type if annotate else None) for p, s in params],
                       REAL if annotate else None, body)
    fshape: Any = shape
    for _, s in reversed(params):
        fshape = FunShape(s, fshape)
    return decl, (name, fshape)


def _in_span(builder: _Builder, make_step: Callable[[], Any]) -> st.SearchStrategy:
    """Strategy running the generator ``make_step()`` with the builder: drawing it as one
    hypothesis example span lets the shrinker delete or simplify it as a whole."""

    @st.composite
    def span(draw):
        outer = builder.draw
        builder.draw = draw
        try:
            return run(make_step())
        finally:
            builder.draw = outer

    return span()


def programs(max_depth: int = 4, inputs: Sequence[str] = INPUT_KINDS, helpers: bool = True,
             budget: int = 60, tricky: bool = True,
             declared: Sequence[Primitive] = ()) -> st.SearchStrategy:
    """Strategy: a random well-typed module ending with ``def f (params) : R = body``, as a
    :class:`GeneratedProgram`.

    ``inputs`` chooses the parameter forms among ``"reals"`` (``(x1 : R) ... (xn : R)``),
    ``"tuple"`` (``(p : R * R)`` or ``R * R * R``), ``"list"`` (``(xs : [R])``, maybe a real
    ``x`` too) and ``"nested"`` (``(w : (R * R) * R) (x : R)``).  ``max_depth`` bounds the
    nesting of constructs, ``budget`` the number of compound constructs; ``helpers`` allows
    top-level definitions ``h1``, ``h2`` before ``f``; ``tricky`` lets some bindings take
    names from :data:`TRICKY_NAMES` (shadowing, names like the generated ones).
    ``declared`` primitives (from a program's ``primitive`` declarations) are drawn like
    the table's real functions, and declared at the top of every program.
    """
    ranges = Ranges()
    kinds = tuple(inputs)

    @st.composite
    def draw_program(draw) -> GeneratedProgram:
        builder = _Builder(draw, NameSupply(), budget, ranges, tricky, declared)
        kind = draw(st.sampled_from(kinds))
        params = _input_params(builder, kind)
        decls: list[Decl] = []
        env: tuple = ()
        while helpers and len(decls) < MAX_HELPERS and builder.flip(0.4):
            name = f"h{len(decls) + 1}"
            decl, entry = draw(_in_span(builder, lambda: _helper(
                builder, name, env, max(1, max_depth - 2))))
            decls.append(decl)
            env = env + (entry,)
        body, shape = run(builder.gen_real(env + tuple(params), max_depth))
        body, shape = builder.mention(body, shape, params)
        decls.append(_definition("f", [(p, s.type) for p, s in params], REAL, body))
        declarations = tuple(Decl(str(p.name), declaring(p)) for p in declared)
        return GeneratedProgram(Module(declarations + tuple(decls)), "f",
                                tuple((p, s.type) for p, s in params))

    return draw_program()


def _value_strategy(t: Type) -> st.SearchStrategy:
    """Python data for a point of type ``t``: reals with three decimals in the input box."""
    if isinstance(t, RealT):
        bound = int(INPUT_BOUND * 1000)
        return st.integers(-bound, bound).map(lambda k: k / 1000.0)
    if isinstance(t, BoolT):
        return st.booleans()
    if isinstance(t, PairT):
        return st.tuples(_value_strategy(t.first), _value_strategy(t.second))
    if isinstance(t, ListT):
        return st.lists(_value_strategy(t.item), min_size=0, max_size=MAX_LIST)
    raise ValueError(f"no points of type {t!r}")


def points_for(program: GeneratedProgram) -> st.SearchStrategy:
    """Strategy: points for ``program`` (moderate reals, lists of at most ``MAX_LIST``)."""
    if len(program.params) == 1:
        return _value_strategy(program.params[0][1])
    return st.tuples(*(_value_strategy(t) for _, t in program.params))


def terms_of_type(t: Type, env: Sequence[tuple[str, Type]] = (), max_depth: int = 4,
                  budget: int = 40) -> st.SearchStrategy:
    """Strategy: a random term of type ``t`` whose free variables are among ``env`` (pairs
    ``(name, type)``; reals in ``env`` are assumed to lie in the input box).  Types are
    built from ``R``, ``Bool``, pairs, lists and functions; drawing raises ValueError for a
    type outside that range (type variables, ``d``)."""
    ranges = Ranges()
    scope = tuple((name, _input_shape(ty, name)) for name, ty in env)

    @st.composite
    def draw_term(draw) -> Term:
        builder = _Builder(draw, NameSupply(), budget, ranges)
        term, _ = run(builder.gen(t, scope, max_depth))
        return term

    return draw_term()
