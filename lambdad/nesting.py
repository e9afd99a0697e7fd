"""``grad``, ``jvp`` and ``vjp`` written out as target programs (AD.md section 9).

When a program runs, ``grad f x`` differentiates the *value* ``f`` (lambdad.differentiate).
To print a function that differentiates, and to transform it again, each use is replaced
here by the program the paper's read-off describes, over the image of ``f``:

    grad f x  ~>  let x1 = seeded(x) in let (v, v_) = ←D(f) x1 in cotangent x1 (v_ 1)
    jvp f x t ~>  let v = →D(f) (zipped(x, t)) in (primal(v), tangent(v))
    vjp f x   ~>  let x1 = seeded(x) in let v = ←D(f) x1 in
                  (primal(v), \\c -> cotangent x1 (v_1 c1 <+> ... <+> v_n cn))
    jacrev f x ~> let x1 = seeded(x) in map (\\o -> cotangent x1 (snd o 1)) (←D(f) x1)
    jacfwd f x ~> the columns →D(f) (zipped(x, e_j)), one per real of x (per element of an
                  array), zipped into rows

``←D(f)`` and ``→D(f)`` are the transformations of the term ``f`` in which every variable it
captures is embedded into the inner level: a real (or a structure of reals) becomes a
constant ``(z, \\a -o zero)`` / ``(z, 0)`` — which is why a real captured from an outer
level cannot be confused with the inner one's input (Siskind and Pearlmutter's test gives
1) — and a function defined by ``let`` or at top level is bound to the image of its
definition.  The expansion is applied innermost first, so the term handed to a
transformation differentiates only through a use left in place (below); the outer transformations then meet the linear
constructs of the inner ones, whose rules (``homomorphism.Differentiation``) give every level a
ring of its own (``d``, ``d<R * R>``, ``d<R * (R -o d)>``, ...).

Before expanding, definitions that differentiate a function they are given (the prelude's
``hvp``, or a λ bound by a local ``let``) are inlined at their uses and applications of λs
become ``let``s, so the function reaching ``grad`` is known.  A use whose function has no
image all the same — a parameter of an enclosing function, or a function built from one —
is left in place, its function annotated with its type (``grad (f : A -> R) x``;
:func:`lambdad.rules.marked_function_type`): the image of ``f`` under the outer
transformation is a variable, but the inner differentiation needs the image of ``f``'s own
transformation, which no term builds from it.  The outer transformation then decides:
→D writes the use out over the target language's own ``vjp``/``jvp`` applied to the image
→D(f), which is a function on reals like any other
(:meth:`lambdad.forward._Forward.differentiation`); ←D has no program for it and says why
(:func:`lambdad.rules.no_reverse_image`: it would need ←D(f) at a second cotangent type).
The expansion stays innermost first: a use whose function holds such a use under ←D has no
image either, and is left in place too.  Refused with a located error besides: a ``vjp``
whose result holds functions (a cotangent of a function type means nothing; the run-time
route refuses it too), a ``jvp`` returning a function whose argument holds functions, and —
as everywhere — a function-typed input or direction.

When the program runs, :func:`expand_closure` does the same for a closure that either mode
differentiates: the functions it captures are known by their values, so an inner
transformation of one is a free variable that the caller binds to the transformed value;
a captured closure that differentiates is first defined inside the closure
(:func:`inline_closures`), so that a function given to it is known by its term; a use
whose function has no image all the same is refused there, with a located error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from .backward import backward_term
from .errors import DifferentiationError, Span
from .forward import forward_term, holds, tangent_of, zipped
from .iterate import run
from . import primitives
from .primitives import PRIMITIVES
from .rules import (NameSupply, NoReverseImageError, ZeroOf, backpropagator_zero, lift, plus,
                    primal_of, tangent_zero, times)
from .syntax import (
    ArrayT,
    rename_bound,
    renamed_free,
    Annot,
    App,
    Builtin,
    Const,
    If,
    FunT,
    Lam,
    Let,
    LetPair,
    ListT,
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
    free_vars,
    walk,
    with_children,
)
from .typecheck import TypeEnv, infer_term

FORWARD, REVERSE = "forward", "reverse"
"""The transformations, by name (as the run-time route names them)."""

FIRST, SECOND = primitives.FST.name, primitives.SND.name
MAP, FOLD, ZIP = primitives.MAP.name, primitives.FOLD.name, primitives.ZIP.name
LENGTH, RANGE = primitives.LENGTH.name, primitives.RANGE.name
INDEX, SCAN = primitives.PRIMITIVES["index"].name, primitives.PRIMITIVES["scan"].name
EQ = primitives.PRIMITIVES["eq"].name
ELEMENT, FROM_LIST = primitives.PRIMITIVES["array.index"].name, primitives.FROM_LIST.name
SIZE, FLATTEN = primitives.PRIMITIVES["size"].name, primitives.PRIMITIVES["flatten"].name
RESHAPE = primitives.PRIMITIVES["reshape"].name
NROWS, NCOLS = primitives.PRIMITIVES["nrows"].name, primitives.PRIMITIVES["ncols"].name


def differentiates(term: Term) -> bool:
    """Whether ``term`` uses ``grad``, ``jvp``, ``vjp`` or a Jacobian (a primitive of kind
    ``ad``), applied or as a value."""
    for node in walk(term):
        name = node.op if isinstance(node, Prim) else node.name if isinstance(node, Builtin) \
            else None
        if name is not None and PRIMITIVES[name].kind == "ad":
            return True
    return False


def expand(term: Term, definitions: Mapping[str, Term], env: TypeEnv,
           names: NameSupply | None = None) -> Term:
    """``term`` (a top-level definition's value) with every ``grad``/``jvp``/``vjp`` replaced
    by its target program (see the module docstring); ``term`` itself when it does not
    differentiate.  ``definitions`` are the program's top-level values, ``env`` their
    types.  A use whose function has no image is left in place, marked (see the module
    docstring).  Raises DifferentiationError located at a use that has no target program,
    and TypeCheckError if ``term`` is ill-typed."""
    inlines = _differentiating(definitions)
    if not differentiates(term) and not free_vars(term) & inlines:
        return term
    if names is None:
        names = NameSupply.for_terms(term, *definitions.values())
        names.avoid(definitions)
    inlined = _inline(term, definitions, inlines, names)
    typing = infer_term(inlined, env)
    return run(_Expansion(typing.types, definitions, env, names).go(inlined, {}))


@attrs.frozen
class ClosureProgram:
    """A function value that differentiates, written out as a target program (see
    :func:`expand_closure`): ``term`` is a λ whose free variables are the names the closure
    captured and the names of ``images``, each standing for the image of a captured
    function value under some transformations: ``images[name] = (captured name, modes,
    type)``, the modes innermost first, the type the function is used at."""

    term: Term
    images: Mapping[str, tuple[str, tuple[str, ...], Type]]


def expand_closure(lam: Lam, captured: Sequence[tuple[str, Type | None]],
                   point_type: Type | None) -> ClosureProgram:
    """The closure ``lam`` (its captured values of the given types; ``None`` for one whose
    type the uses in ``lam`` tell, such as a function) with every
    ``grad``/``jvp``/``vjp`` written out as a target program, as :func:`expand` does for a
    definition.  A captured function is known only by its value: an inner transformation
    of it is a free variable of the result, whose value the caller makes by transforming the
    function value (:attr:`ClosureProgram.images`).  ``point_type`` is the type of the
    argument ``lam`` will be differentiated at, when known.  Raises DifferentiationError
    (or TypeCheckError) when a use has no target program or its type is left open."""
    wrapped: Term = lam if point_type is None else attrs.evolve(lam, param_type=point_type)
    for name, type_ in reversed(captured):
        wrapped = Lam(name, wrapped, param_type=type_, span=lam.span)
    names = NameSupply.for_terms(wrapped)
    inlined = _results_named(_inline(wrapped, {}, set(), names), names)
    typing = infer_term(inlined, TypeEnv.builtins())
    # the captured names' types, as the uses in ``lam`` tell them
    types: dict[str, Type] = {}
    wrapper = inlined
    for name, _ in captured:
        assert isinstance(wrapper, Lam)
        fn_type = typing.types[id(wrapper)]
        assert isinstance(fn_type, FunT)
        types[name] = fn_type.arg
        wrapper = wrapper.body
    expansion = _Expansion(typing.types, {}, TypeEnv.builtins(), names,
                           runtime={name: (name, (), types[name]) for name, _ in captured})
    term = run(expansion.go(inlined, {}))
    for _ in captured:
        assert isinstance(term, Lam)
        term = term.body
    free = free_vars(term)
    return ClosureProgram(term, {name: image for name, image in expansion.runtime.items()
                                 if name in free and image[1]})


def inline_closures(lam: Lam, layout: Sequence[tuple[str, object]]
                    ) -> tuple[Lam, tuple[str, ...]]:
    """The closure ``lam`` specialised to the closures it captured that differentiate:
    ``layout`` gives, for each name ``lam`` captured, ``None`` for a value it keeps, or
    ``(λ, layout)`` for a closure (its λ-term and, in turn, what it captured) to define
    inside ``lam``'s body by a ``let`` of that λ — so that the function that closure
    differentiates, perhaps one given to it as an argument, is known by its term where
    :func:`expand_closure` meets the use (a closure known by its value has no image a
    term can build for a function it is given).  Returns the λ and the names of the values
    kept, in the order of ``layout`` (depth first): those ``lam`` captured itself keep
    their names, those of the inner closures get fresh ones."""
    terms: list[Term] = [lam]
    pending = [layout]
    while pending:
        for _, inner in pending.pop():
            if inner is not None:
                terms.append(inner[0])
                pending.append(inner[1])
    names = NameSupply.for_terms(*terms)
    kept: list[str] = []

    def build(fn: Lam, entries: Sequence[tuple[str, object]], outermost: bool) -> Lam:
        renaming: dict[str, str] = {}
        definitions: list[tuple[str, Term]] = []
        for name, inner in entries:
            if inner is None:
                new = name if outermost else names.renamed(name)
                kept.append(new)
            else:
                new = names.renamed(name)
                # without its annotations, as a definition inlined (see _unannotated)
                definitions.append((new, build(_unannotated(inner[0]), inner[1], False)))
            renaming[name] = new
        body = renamed_free(fn.body, renaming)
        for name, value in reversed(definitions):
            body = Let(name, value, body, span=fn.span)
        return attrs.evolve(fn, body=body)

    return build(lam, layout, True), tuple(kept)


def _ground(t: Type) -> bool:
    """Whether ``t`` has no type variable."""
    return not any(isinstance(inner, VarT) for inner in walk(t))


# ---------------------------------------------------------------- inlining


def _fresh_copy(term: Term, avoid: set[str], seen: set[str], names: NameSupply) -> Term:
    """``term`` with every binder whose name is in ``avoid`` or ``seen`` (binders met
    before) renamed to a fresh name, bound occurrences following; the binders kept join
    ``seen``.  Afterwards no two binders share a name, and none is a name of ``avoid``."""

    def choose(name: str) -> str:
        new = names.renamed(name) if name in avoid or name in seen else name
        seen.add(new)
        return new

    return rename_bound(term, choose)



def _differentiating(definitions: Mapping[str, Term]) -> set[str]:
    """The definitions that differentiate: that use ``grad`` (...), or one that does."""
    found: set[str] = set()
    for name, value in definitions.items():  # in program order: uses come later
        if differentiates(value) or free_vars(value) & found:
            found.add(name)
    return found


def _inline(term: Term, definitions: Mapping[str, Term], inlines: set[str],
            names: NameSupply) -> Term:
    """``term`` with distinct binders, every top-level definition that differentiates
    inlined (a fresh copy per use), every ``grad``/``jvp``/``vjp`` used as a value
    eta-expanded, and every application of a λ (or of a ``let`` around one) turned into a
    ``let``: afterwards the function reaching each ``grad`` is found through ``let``s."""
    avoid = set(definitions)
    seen: set[str] = set()
    term = _fresh_copy(term, avoid, seen, names)

    # λs bound by a local ``let`` that differentiate, inlined at their uses in the let's body
    # like top-level definitions (binders are distinct, so a copy captures nothing)
    local: dict[str, Term] = {}

    def go(t: Term, bound: frozenset[str]):
        if isinstance(t, Var) and t.name in inlines and t.name not in bound:
            copy = _fresh_copy(_unannotated(definitions[t.name]), avoid, seen, names)
            return (yield go(copy, frozenset()))
        if isinstance(t, Var) and t.name in local:
            return _fresh_copy(local[t.name], avoid, seen, names)
        if isinstance(t, Builtin) and PRIMITIVES[t.name].kind == "ad":
            return _eta_expand(t, names)
        if isinstance(t, Let) and isinstance(t.value, Lam) and differentiates(t.value):
            value = yield go(t.value, bound)
            local[t.name] = value
            body = yield go(t.body, bound | {t.name})
            del local[t.name]
            if t.name not in free_vars(body):
                return body  # a λ has no effect: unused, it goes
            return attrs.evolve(t, value=value, body=body)
        kids = []
        for child, names_bound in zip(children(t), binders(t)):
            kids.append((yield go(child, bound | frozenset(names_bound))))
        t = with_children(t, kids)
        if isinstance(t, App):
            return _beta(t)
        return t

    return run(go(term, frozenset()))


def _results_named(term: Term, names: NameSupply) -> Term:
    """``term`` with each ``let (a, b) = e in body`` whose ``e`` differentiates (a use of
    ``jvp``, ``vjp``, ...) written ``let p = e in body`` with ``fst p`` and ``snd p`` for
    ``a`` and ``b``: a function among them (a tangent function, a pull-back) is then
    built from ``p``, whose definition the expansion knows, so differentiating it has an
    image.  Binders are distinct (after :func:`_inline`), so nothing is captured."""

    def go(t: Term):
        kids = []
        for child in children(t):
            kids.append((yield go(child)))
        t = with_children(t, kids)
        if (isinstance(t, LetPair) and isinstance(t.value, Prim)
                and PRIMITIVES[t.value.op].kind == "ad"):
            s = t.span
            pair = names.fresh("r")
            parts = {t.first: Prim(FIRST, (Var(pair, span=s),), span=s),
                     t.second: Prim(SECOND, (Var(pair, span=s),), span=s)}
            return Let(pair, t.value, _substituted(t.body, parts), span=s)
        return t

    return run(go(term))


def _substituted(term: Term, values: Mapping[str, Term]) -> Term:
    """``term`` with each free occurrence of a name of ``values`` replaced by its term
    (whose free names no binder of ``term`` binds)."""

    def go(t: Term, hidden: frozenset[str]):
        if isinstance(t, Var):
            return t if t.name in hidden or t.name not in values else values[t.name]
        kids = []
        for child, bound in zip(children(t), binders(t)):
            kids.append((yield go(child, hidden | frozenset(bound) if bound else hidden)))
        return with_children(t, kids)

    return run(go(term, frozenset()))


def _unannotated(term: Term) -> Term:
    """``term`` without its type annotations: a definition inlined at one use has that
    use's types, which its annotations (``a -> R``, with ``a`` rigid) do not say."""

    def go(t: Term):
        kids = []
        for child in children(t):
            kids.append((yield go(child)))
        t = with_children(t, kids)
        if isinstance(t, Annot):
            return t.expr
        if isinstance(t, Lam) and t.param_type is not None:
            return attrs.evolve(t, param_type=None)
        return t

    return run(go(term))


def _eta_expand(t: Builtin, names: NameSupply) -> Term:
    """``\\f -> \\x -> grad f x`` for ``grad`` used as a value (``map (grad f) xs``)."""
    prim = PRIMITIVES[t.name]
    params = [names.renamed(p) for p in prim.params]
    body: Term = Prim(t.name, tuple(Var(p, span=t.span) for p in params), span=t.span)
    for param in reversed(params):
        body = Lam(param, body, span=t.span)
    return body


def _beta(t: App) -> Term:
    """``(\\x -> b) a`` as ``let x = a in b``, through the ``let``s around the λ (binders
    are distinct, so floating them out captures nothing); a saturated eta-expanded
    primitive becomes the primitive again.  Iterative."""
    wrappers: list[Term] = []
    fn = t.fn
    while isinstance(fn, (Let, LetPair)):
        wrappers.append(fn)
        fn = fn.body
    if not isinstance(fn, Lam):
        return t
    result: Term = Let(fn.param, t.arg, fn.body, span=t.span)
    for wrapper in reversed(wrappers):
        result = attrs.evolve(wrapper, body=result)
    return result


# ---------------------------------------------------------------- the expansion


class _Expansion:
    """The bottom-up replacement of ``grad``/``jvp``/``vjp`` (see the module docstring).

    ``types`` is the type of every node of the inlined term by ``id``; ``scope`` (passed
    down) maps each name bound around the current node to its defining term (``None`` for
    a λ parameter or a name bound by a pattern, whose definition is not a term here)."""

    def __init__(self, types: dict[int, Type], definitions: Mapping[str, Term], env: TypeEnv,
                 names: NameSupply,
                 runtime: Mapping[str, tuple[str, tuple[str, ...], Type]] | None = None):
        self.types = types
        # names of functions known only when the program runs (see expand_closure), each
        # with the captured name whose value it stands for and the transformations (inner
        # first) applied to that value
        self.at_run_time = runtime is not None
        self.runtime = dict(runtime or {})
        self.definitions = definitions
        self.env = env
        self.names = names
        # the type of each bound name, from its binder (names are distinct after inlining)
        self.name_types: dict[str, Type] = {}

    def go(self, t: Term, scope: dict[str, Term | None]):
        if isinstance(t, Prim) and PRIMITIVES[t.op].kind == "ad":
            args = []
            for arg in t.args:
                args.append((yield self.go(arg, scope)))
            return self.expand(t, args, scope)
        if isinstance(t, Let):
            value = yield self.go(t.value, scope)
            self.name_types[t.name] = self.types.get(id(t.value))
            inner = {**scope, t.name: value}
            body = yield self.go(t.body, inner)
            return attrs.evolve(t, value=value, body=body)
        if isinstance(t, LetPair):
            pair_type = self.types.get(id(t.value))
            if isinstance(pair_type, PairT):
                self.name_types[t.first] = pair_type.first
                self.name_types[t.second] = pair_type.second
        kids = []
        for child, bound in zip(children(t), binders(t)):
            inner = scope
            if bound:
                inner = {**scope, **{name: None for name in bound}}
                if isinstance(t, Lam):
                    fn_type = self.types.get(id(t))
                    if isinstance(fn_type, FunT):
                        self.name_types[t.param] = fn_type.arg
            kids.append((yield self.go(child, inner)))
        return with_children(t, kids)

    # ---- one use
    def expand(self, t: Prim, args: list[Term], scope: dict[str, Term | None]) -> Term:
        s = t.span
        name = PRIMITIVES[t.op].name
        rule = _RULES.get(name)
        if rule is None:
            raise DifferentiationError(
                f"`{PRIMITIVES[t.op].spelling.symbol}` has no printed program: it is "
                "computed when the program runs (show prints the programs of grad, jvp and "
                "vjp)", s)
        point_type = self.types[id(t.args[1])]
        _require_point(point_type, t.args[1], "differentiate with respect to")
        if self.at_run_time and not (_ground(self.types[id(t)]) and _ground(point_type)):
            # a type left open by the values at hand: the numbering of the point's reals
            # (and the read-off) depend on it
            raise DifferentiationError("the type of this differentiation is not known", s)
        try:
            return rule(self, t, args, point_type, scope)
        except _NoImage as missing:
            if self.at_run_time:
                raise missing.error from None
        # left in place, its function marked with its type: →D has a rule for it
        # (forward._Forward.differentiation), ←D says why it has none
        marked = Annot(args[0], self.types[id(t.args[0])], span=getattr(args[0], "span", s))
        return Prim(t.op, (marked, *args[1:]), span=s)

    def grad(self, t: Prim, args: list[Term], point_type: Type, scope) -> Term:
        """``grad f x``: seed, run ←D(f), read off with the cotangent 1 (AD.md section 3)."""
        s = t.span
        f, point = args
        image = self.image(f, scope, backward_term, backpropagator_zero(s),
                           s, REVERSE)
        seeded, value = self.names.fresh("x"), self.names.fresh("v", ("_",))
        back = value + "_"
        body = LetPair(value, back, App(image, Var(seeded, span=s), span=s),
                       ReadOff(Var(seeded, span=s),
                               App(Var(back, span=s), Const(1.0, span=s), span=s), span=s),
                       span=s)
        return Let(seeded, self.seeded(point_type, point, s)[0], body, span=s)

    def jvp(self, t: Prim, args: list[Term], point_type: Type, scope) -> Term:
        """``jvp f x t``: run →D(f) on the point paired with the direction; split (AD.md
        section 2)."""
        s = t.span
        f, point, direction = args
        _require_point(self.types[id(t.args[2])], t.args[2], "give a direction for")
        result_type = self.types[id(t)]
        assert isinstance(result_type, PairT)
        out_type = result_type.first
        image = self.image(f, scope, forward_term, tangent_zero(s), s, FORWARD)
        out = self.names.fresh("v")
        dual = App(image, self.zipped(point_type, point, direction, s), span=s)
        return Let(out, dual, Pair(self.part(out_type, Var(out, span=s), 0, s),
                                   self.part(out_type, Var(out, span=s), 1, s), span=s), span=s)

    def part(self, t: Type, term: Term, which: int, span: Span | None) -> Term:
        """The primal (``which == 0``) or the tangent (1) of ``term : →D(t)``.  A function
        ``h : →D(A -> B)`` gives ``\\a -> part (h (a, 0))``: applied to a constant, its
        tangent is the derivative along the direction of the differentiation that made it
        (Manzyuk et al., JFP 2019: a derivative that returns a function).  Raises
        DifferentiationError for a function whose argument holds functions (a constant of
        →D(A) is then no term)."""
        if not _has_function(t):
            return primal_of(t, term, span) if which == 0 else tangent_of(t, term, span)
        if isinstance(t, PairT):
            return self.parts(t, term, span, lambda p, q: Pair(
                self.part(t.first, p, which, span), self.part(t.second, q, which, span),
                t.arity, span=span))
        if isinstance(t, ListT):
            item = self.names.fresh("h")
            return Prim(MAP, (Lam(item, self.part(t.item, Var(item, span=span), which, span),
                                  span=span), term), span=span)
        assert isinstance(t, FunT)
        if _has_function(t.arg) or any(isinstance(inner, FunT) for inner in walk(t.arg)):
            raise DifferentiationError(
                "this `jvp` returns a function whose argument holds functions: a constant "
                "argument of its derivative would be the derivative of a function value, which "
                "no target program can build", span)
        a = self.names.fresh("a")
        constant = lift(t.arg, Var(a, span=span), tangent_zero(span), span)
        return Lam(a, self.part(t.result, App(term, constant, span=span), which, span),
                   span=span)

    def vjp(self, t: Prim, args: list[Term], point_type: Type, scope) -> Term:
        """``vjp f x``: seed, run ←D(f); the pull-back reads off what the backpropagators of
        the result send for a cotangent ``c`` (AD.md section 6)."""
        s = t.span
        f, point = args
        result_type = self.types[id(t)]
        assert isinstance(result_type, PairT)
        out_type = result_type.first
        if _has_function(out_type):
            raise DifferentiationError("this `vjp` returns a function: a pull-back would take "
                                       "a cotangent of a function type, which means nothing "
                                       "(differentiate what the function computes instead)", s)
        image = self.image(f, scope, backward_term, backpropagator_zero(s),
                           s, REVERSE)
        seeded, out, c = self.names.fresh("x"), self.names.fresh("v"), self.names.fresh("c")
        pullback = Lam(c, ReadOff(Var(seeded, span=s),
                                  self.sent(out_type, Var(out, span=s), Var(c, span=s), s),
                                  span=s), span=s)
        body = Let(out, App(image, Var(seeded, span=s), span=s),
                   Pair(primal_of(out_type, Var(out, span=s), s), pullback, span=s), span=s)
        return Let(seeded, self.seeded(point_type, point, s)[0], body, span=s)

    def jacrev(self, t: Prim, args: list[Term], point_type: Type, scope) -> Term:
        """``jacrev f x`` for ``f : A -> [R]``: seed, run ←D(f), and read each output's
        gradient off with the cotangent 1 (a backward phase per output)."""
        s = t.span
        f, point = args
        image = self.image(f, scope, backward_term, backpropagator_zero(s),
                           s, REVERSE)
        seeded, out, o = self.names.fresh("x"), self.names.fresh("v"), self.names.fresh("o")
        row = ReadOff(Var(seeded, span=s), App(Prim(SECOND, (Var(o, span=s),), span=s),
                                              Const(1.0, span=s), span=s), span=s)
        rows = Prim(MAP, (Lam(o, row, span=s), Var(out, span=s)), span=s)
        body = Let(out, App(image, Var(seeded, span=s), span=s), rows, span=s)
        return Let(seeded, self.seeded(point_type, point, s)[0], body, span=s)

    def jacfwd(self, t: Prim, args: list[Term], point_type: Type, scope) -> Term:
        """``jacfwd f x`` for ``f : A -> [R]``: a run of →D(f) per real of ``x`` along that
        real's direction (the columns), then each output's row in the shape of ``x``
        (:meth:`jacfwd_of_lists` when ``x`` holds a list)."""
        s = t.span
        f, point = args
        if any(isinstance(inner, (ListT, ArrayT)) for inner in walk(point_type)):
            return self.jacfwd_of_lists(t, f, point, point_type, scope)
        n = sum(1 for inner in walk(point_type) if isinstance(inner, RealT))
        image = self.image(f, scope, forward_term, tangent_zero(s), s, FORWARD)
        g, x = self.names.fresh("g"), self.names.fresh("x")
        columns = [self.names.fresh("c") for _ in range(n)]
        q = self.names.fresh("q")
        # each element of the zipped columns is (t1, (t2, ... tn)): the tangents of one output
        parts = [self.names.fresh("t") for _ in range(n)]
        leaves = iter(parts)
        row = self.rebuilt(point_type, Var(x, span=s),
                           lambda: Var(next(leaves), span=s), s)
        if n:
            rests = [q] + [self.names.fresh("q") for _ in range(n - 1)]
            row = Let(parts[-1], Var(rests[-1], span=s), row, span=s)
            for k in reversed(range(n - 1)):
                row = LetPair(parts[k], rests[k + 1], Var(rests[k], span=s), row, span=s)
        if n == 0:
            zipped: Term = App(f, Var(x, span=s), span=s)
        else:
            zipped = Var(columns[-1], span=s)
            for column in reversed(columns[:-1]):
                zipped = Prim(ZIP, (Var(column, span=s), zipped), span=s)
        body: Term = Prim(MAP, (Lam(q, row, span=s), zipped), span=s)
        for j in reversed(range(n)):
            counter = iter(range(n))
            direction = self.rebuilt(point_type, Var(x, span=s), lambda: Const(
                1.0 if next(counter) == j else 0.0, span=s), s)
            out = App(Var(g, span=s), self.zipped(point_type, Var(x, span=s), direction, s),
                      span=s)
            body = Let(columns[j], tangent_of(ListT(RealT()), out, s), body, span=s)
        return Let(x, point, Let(g, image, body, span=s), span=s)

    def jacfwd_of_lists(self, t: Prim, f: Term, point: Term, point_type: Type,
                        scope) -> Term:
        """``jacfwd f x`` for an ``x`` holding lists or arrays: the number of runs is the
        number of reals of ``x`` (each element of an array one), known when the program
        runs, so the columns are a ``map`` over
        ``range n``: the j-th runs →D(f) along the direction with 1 at the real numbered j
        (the numbering ``grad`` seeds by); the k-th row has, at the real numbered j, the
        k-th entry of the j-th column::

            let cs = map (\\j -> tangent (→D(f) (zipped x e_j))) (range n) in
            map (\\k -> x with the real numbered j replaced by cs !! j !! k)
                (range (length (f x)))
        """
        s = t.span
        image = self.image(f, scope, forward_term, tangent_zero(s), s, FORWARD)
        g, x, columns = self.names.fresh("g"), self.names.fresh("x"), self.names.fresh("cs")
        j, k = self.names.fresh("j"), self.names.fresh("k")

        def var(name: str) -> Term:
            return Var(name, span=s)

        def unit(_: Term, index: Term) -> Term:
            return If(Prim(EQ, (index, var(j)), span=s), Const(1.0, span=s),
                      Const(0.0, span=s), span=s)

        def entry(_: Term, index: Term) -> Term:
            column = Prim(INDEX, (var(columns), index), span=s)
            return Prim(INDEX, (column, var(k)), span=s)

        direction, _ = self.seeded(point_type, var(x), s, leaf=unit)
        run_j = App(var(g), self.zipped(point_type, var(x), direction, s), span=s)
        column = Lam(j, tangent_of(ListT(RealT()), run_j, s), span=s)
        count = self.reals_in(point_type, var(x), s, elements=True)
        all_columns = Prim(MAP, (column, Prim(RANGE, (count,), span=s)), span=s)
        row, _ = self.seeded(point_type, var(x), s, leaf=entry)
        outputs = Prim(LENGTH, (App(f, var(x), span=s),), span=s)
        rows = Prim(MAP, (Lam(k, row, span=s), Prim(RANGE, (outputs,), span=s)), span=s)
        return Let(x, point, Let(g, image, Let(columns, all_columns, rows, span=s), span=s),
                   span=s)

    def rebuilt(self, t: Type, value: Term, real: Callable[[], Term], span: Span | None) -> Term:
        """A value of ``t`` with each real given by ``real()`` (left to right) and every
        other leaf taken from ``value``; for types without lists."""
        if isinstance(t, RealT):
            return real()
        if isinstance(t, PairT):
            return self.parts(t, value, span, lambda p, q: Pair(
                self.rebuilt(t.first, p, real, span), self.rebuilt(t.second, q, real, span),
                t.arity, span=span))
        return value

    def parts(self, t: PairT, value: Term, span: Span | None,
              body: Callable[[Term, Term], Term]) -> Term:
        """``let (p, q) = value in body(p, q)`` with ``p`` and ``q`` fresh: a term built
        from the parts of the pair ``value : t``, each named once."""
        a, b = self.names.fresh("p"), self.names.fresh("q")
        return LetPair(a, b, value, body(Var(a, span=span), Var(b, span=span)), t.arity,
                       span=span)

    # ---- the image of the differentiated function
    def image(self, f: Term, scope: dict[str, Term | None],
              transform: Callable[[Term, NameSupply], Term], zero: ZeroOf,
              span: Span | None, mode: str) -> Term:
        """D(f) with the variables ``f`` captures embedded into the inner level: reals as
        constants, functions bound to the image of their definition (``let`` or top
        level).  Raises _NoImage for a captured function whose definition is not known (a
        parameter), or when ←D meets a use left in place inside ``f``."""
        constants: list[tuple[str, Term]] = []
        functions: list[tuple[str, Term]] = []
        done: set[str] = set()
        # Depth-first over the captured names: a function's definition is bound after the
        # names it captures itself (no recursion in lambdad: the captures form a DAG).
        pending: list[tuple[str, bool]] = [(name, False) for name in sorted(free_vars(f),
                                                                         reverse=True)]
        while pending:
            name, ready = pending.pop()
            if name in done and not ready:
                continue
            definition, type_ = self.definition_of(name, scope)
            if not _has_function(type_):
                done.add(name)
                constants.append((name, lift(type_, Var(name, span=span), zero, span)))
                continue
            if definition is None and name in self.runtime:
                # a function captured when the program runs: the image of its value is
                # made then, under this transformation after those it is already under
                captured, modes, type_ = self.runtime[name]
                image_name = self.names.renamed(name)
                self.runtime[image_name] = (captured, modes + (mode,), type_)
                done.add(name)
                functions.append((name, Var(image_name, span=span)))
                continue
            if definition is None:
                raise _NoImage(DifferentiationError(
                    f"this differentiates a function built from `{name}`, a function given as "
                    "an argument, whose inner image no term can build from it",
                    getattr(f, "span", None) or span))
            if ready:
                functions.append((name, _transformed(transform, definition, self.names)))
                continue
            done.add(name)
            pending.append((name, True))
            pending.extend((inner, False) for inner in sorted(free_vars(definition), reverse=True)
                           if inner not in done)
        body = _transformed(transform, f, self.names)
        for name, value in reversed(constants + functions):
            body = Let(name, value, body, span=span)
        return body

    def definition_of(self, name: str, scope: dict[str, Term | None]) -> tuple[Term | None, Type]:
        """The defining term of the captured ``name`` (None if unknown) and its type."""
        if name in scope:
            type_ = self.name_types.get(name)
            if type_ is None:
                type_ = FunT(RealT(), RealT())  # a pattern-bound name: treat as unknown function
            return scope[name], type_
        if name in self.definitions:
            return self.definitions[name], self.env[name].type
        if name in self.runtime:
            return None, self.runtime[name][2]  # the image of a captured function
        raise DifferentiationError(f"`{name}` is not defined")  # pragma: no cover

    # ---- inputs and outputs
    def seeded(self, t: Type, point: Term, span: Span | None,
               offset: tuple[int, Term | None] = (0, None),
               leaf: Callable[[Term, Term], Term] | None = None,
               ) -> tuple[Term, tuple[int, Term | None]]:
        """``point : A`` as a seeded input of ←D(A): its i-th real ``r`` becomes
        ``(r, seed i)`` (left to right; ``leaf(r, i)`` instead when given), and the offset of
        the reals after it.  An offset is a number plus, after a list, a term
        (``seed (k + i)`` numbers the reals of a list, whose length is known when the
        program runs; the items of a list of lists start where a scan of their sizes
        says).  With ``leaf``, each element of an array is a real of its own, numbered row
        by row (an array of the leaves); without, an array has one seed."""
        static, dynamic = offset
        if isinstance(t, (RealT, ArrayT)):
            index: Term = Const(float(static), span=span)
            if dynamic is not None:
                index = dynamic if static == 0 else plus(dynamic, index, span)
            if isinstance(t, ArrayT) and leaf is not None:
                return self.array_of_leaves(t, point, index, leaf, span)
            # (an array has one seed, for its whole cotangent)
            made = (Pair(point, Seed(index, span=span), span=span) if leaf is None
                    else leaf(point, index))
            return made, (static + 1, dynamic)
        if isinstance(t, PairT):
            a, b = self.names.fresh("p"), self.names.fresh("q")
            first, offset = self.seeded(t.first, Var(a, span=span), span, offset, leaf)
            second, offset = self.seeded(t.second, Var(b, span=span), span, offset, leaf)
            return LetPair(a, b, point, Pair(first, second, t.arity, span=span), t.arity,
                           span=span), offset
        if isinstance(t, ListT) and _has_real(t):
            q, i, r = self.names.fresh("q"), self.names.fresh("i"), self.names.fresh("r")
            # the list is named where the reals after it are numbered (a pair's component
            # is a variable there; the point itself has nothing after it)
            xs = point.name if isinstance(point, Var) else self.names.fresh("xs")
            base: Term = Const(float(static), span=span)
            if dynamic is not None:
                base = dynamic if static == 0 else plus(dynamic, base, span)
            count = Prim(LENGTH, (Var(xs, span=span),), span=span)
            numbered = Prim(ZIP, (Prim(RANGE, (count,), span=span), Var(xs, span=span)),
                            span=span)
            elements = leaf is not None
            per_item = self.reals_in(t.item, None, span, elements)
            if per_item is not None:
                # items of one size: the i-th starts at base + i * size (base + i for reals)
                first = (Var(i, span=span) if isinstance(per_item, Const) and per_item.value == 1
                         else times(Var(i, span=span), per_item, span))
                start = first if static == 0 and dynamic is None else plus(base, first, span)
                item, _ = self.seeded(t.item, Var(r, span=span), span, (0, start), leaf)
                after = times(per_item, count, span)
                body: Term = Prim(MAP, (Lam(q, LetPair(i, r, Var(q, span=span), item,
                                                       span=span), span=span), numbered),
                                  span=span)
            else:
                # items holding lists: the i-th starts where the reals of those before end
                # (a scan of their sizes)
                starts, start = self.names.fresh("starts"), self.names.fresh("s")
                acc, y = self.names.fresh("acc"), self.names.fresh("y")
                size = self.reals_in(t.item, Var(y, span=span), span, elements)
                add = Lam(acc, Lam(y, plus(Var(acc, span=span), size, span), span=span),
                          span=span)
                item, _ = self.seeded(t.item, Var(r, span=span), span,
                                      (0, Var(start, span=span)), leaf)
                item = Let(start, Prim(INDEX, (Var(starts, span=span), Var(i, span=span)),
                                       span=span), item, span=span)
                body = Let(starts, Prim(SCAN, (add, base, Var(xs, span=span)), span=span),
                           Prim(MAP, (Lam(q, LetPair(i, r, Var(q, span=span), item, span=span),
                                          span=span), numbered), span=span), span=span)
                after = Prim(FOLD, (add, Const(0.0, span=span), Var(xs, span=span)),
                             span=span)
            if not isinstance(point, Var):
                body = Let(xs, point, body, span=span)
            return body, (0, plus(base, after, span))
        return point, offset

    def array_of_leaves(self, t: ArrayT, point: Term, index: Term,
                        leaf: Callable[[Term, Term], Term], span: Span | None
                        ) -> tuple[Term, tuple[int, Term | None]]:
        """The array of ``point``'s shape whose element ``e`` (row by row) is
        ``leaf(point's element e, index + e)``, and the offset after its elements::

            array (map (\\e -> leaf (v !! e) (index + e)) (range (size v)))

        with ``v = flatten point`` and the result reshaped for a Mat."""
        if not isinstance(point, Var):
            name = self.names.fresh("v")
            made, after = self.array_of_leaves(t, Var(name, span=span), index, leaf, span)
            return Let(name, point, made, span=span), after
        flat = point if t.rank == 1 else Prim(FLATTEN, (point,), span=span)
        v, e = self.names.fresh("v"), self.names.fresh("e")
        size = Prim(SIZE, (Var(v, span=span),), span=span)
        number = Var(e, span=span) if isinstance(index, Const) and index.value == 0 \
            else plus(index, Var(e, span=span), span)
        element = Prim(ELEMENT, (Var(v, span=span), Var(e, span=span)), span=span)
        made: Term = Prim(FROM_LIST, (Prim(MAP, (
            Lam(e, leaf(element, number), span=span),
            Prim(RANGE, (size,), span=span)), span=span),), span=span)
        if t.rank == 2:
            made = Prim(RESHAPE, (made, Prim(NROWS, (point,), span=span),
                                  Prim(NCOLS, (point,), span=span)), span=span)
        count = Prim(SIZE, (flat,), span=span)
        return Let(v, flat, made, span=span), (0, plus(index, count, span))

    def reals_in(self, t: Type, value: Term | None, span: Span | None,
                 elements: bool = False) -> Term | None:
        """The number of reals in ``value : t``: a literal when every value of ``t`` has
        the same number (then ``value`` may be None), else a term over ``value`` (None
        when ``value`` is None).  An array counts one (its seed), or with ``elements`` its
        number of elements."""
        static = _static_reals(t, elements)
        if static is not None:
            return Const(float(static), span=span)
        if value is None:
            return None
        if isinstance(t, ArrayT):
            flat = value if t.rank == 1 else Prim(FLATTEN, (value,), span=span)
            return Prim(SIZE, (flat,), span=span)
        if isinstance(t, PairT):
            return self.parts(t, value, span, lambda p, q: plus(
                self.reals_in(t.first, p, span, elements),
                self.reals_in(t.second, q, span, elements), span))
        assert isinstance(t, ListT)
        per_item = self.reals_in(t.item, None, span, elements)
        if per_item is not None:
            return times(per_item, Prim(LENGTH, (value,), span=span), span)
        acc, y = self.names.fresh("acc"), self.names.fresh("y")
        add = Lam(acc, Lam(y, plus(Var(acc, span=span),
                                   self.reals_in(t.item, Var(y, span=span), span, elements),
                                   span), span=span), span=span)
        return Prim(FOLD, (add, Const(0.0, span=span), value), span=span)

    def zipped(self, t: Type, point: Term, direction: Term, span: Span | None) -> Term:
        """The point of →D(A) with primal ``point`` and tangent ``direction``."""
        return zipped(t, point, direction, self.names, span)

    def sent(self, t: Type, out: Term, cotangent: Term, span: Span | None) -> Term:
        """What the backpropagators of ``out : ←D(B)`` send for the cotangent ``cotangent : B``
        (the sum over the reals of B)."""
        if isinstance(t, RealT):
            return App(Prim(SECOND, (out,), span=span), cotangent, span=span)
        if isinstance(t, PairT):
            a, b = self.names.fresh("p"), self.names.fresh("q")
            c, e = self.names.fresh("c"), self.names.fresh("c")
            return LetPair(a, b, out, LetPair(c, e, cotangent, Plus(
                self.sent(t.first, Var(a, span=span), Var(c, span=span), span),
                self.sent(t.second, Var(b, span=span), Var(e, span=span), span), span=span),
                t.arity, span=span), t.arity, span=span)
        if isinstance(t, ListT) and _has_real(t):
            total, q = self.names.fresh("acc"), self.names.fresh("q")
            a, b = self.names.fresh("p"), self.names.fresh("c")
            step = Lam(total, Lam(q, Plus(Var(total, span=span), LetPair(
                a, b, Var(q, span=span),
                self.sent(t.item, Var(a, span=span), Var(b, span=span), span), span=span),
                span=span), span=span), span=span)
            return Prim(FOLD, (step, Zero(span=span), Prim(ZIP, (out, cotangent), span=span)),
                        span=span)
        return Zero(span=span)


class _NoImage(Exception):
    """The function of a use has no image the expansion can build; ``error`` says so."""

    def __init__(self, error: DifferentiationError):
        super().__init__(str(error))
        self.error = error


def _transformed(transform: Callable[[Term, NameSupply], Term], term: Term,
                 names: NameSupply) -> Term:
    """``transform(term)``; raises _NoImage when ``term`` holds a use left in place whose
    image ←D cannot write (rules.NoReverseImageError): then neither can it write this one's."""
    try:
        return transform(term, names)
    except NoReverseImageError as error:
        raise _NoImage(error) from None


_RULES = {"grad": _Expansion.grad, "jvp": _Expansion.jvp, "vjp": _Expansion.vjp,
          "jacrev": _Expansion.jacrev, "jacfwd": _Expansion.jacfwd}
"""The uses with a target program, by the name of the primitive."""


def _static_reals(t: Type, elements: bool = False) -> int | None:
    """How many reals every value of ``t`` holds, or None when that depends on the value
    (a list holding reals; an array, counted by its ``elements``, else as one)."""
    if isinstance(t, ListT):
        return 0 if not _has_real(t) else None
    if isinstance(t, PairT):
        first, second = _static_reals(t.first, elements), _static_reals(t.second, elements)
        return None if first is None or second is None else first + second
    if isinstance(t, ArrayT):
        return None if elements else 1
    return 1 if isinstance(t, RealT) else 0


def _has_function(t: Type | None) -> bool:
    return holds(t, FunT)


def _has_real(t: Type) -> bool:
    return holds(t, RealT) or holds(t, ArrayT)


def _require_point(t: Type, term: Term, verb: str) -> None:
    if _has_function(t):
        raise DifferentiationError(
            f"cannot {verb} a function-typed input: the point must be built from reals, "
            "pairs and lists", getattr(term, "span", None))
