"""The properties of QUALITY.md, checked on a generated program and a point."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

from .. import gradcheck
from ..backward import backward_term, backward_type
from ..calling import from_python, uncurried_term
from ..errors import LambdadError
from ..forward import forward_term, forward_type
from ..fuse import fuse
from ..parser import parse_expr, parse_module
from ..primitives import PRIMITIVES, Primitive, declared_primitives
from ..printer import print_module, print_term, print_type
from ..simplify import simplify
from ..interpreter import evaluate_module
from ..syntax import (ArrayT, Builtin, LetPair, ListT, NameSupply, PairT, Prim, RealT, Term, Type,
                      Var, children, renamed_free, tuple_components, tuple_type)
from ..typecheck import Scheme, TypeEnv, check_term, infer_module
from ..values import format_value
from .shapes import INPUT_KINDS
from .arrays import array_cases
from .generate import GeneratedProgram, points_for, programs


# --------------------------------------------------------------------------- properties
# The properties of QUALITY.md, as functions over a generated program (and a point, and the
# loaded program: this module sits below the pipeline, so callers pass ``lambdad.loads``).
# Each raises PropertyViolation, naming the property, when it does not hold.

PROPERTIES = ("types", "round trip", "primal", "modes agree", "finite differences",
              "in-language AD", "nested programs")


class PropertyViolation(AssertionError):
    """A property that does not hold: one of QUALITY.md's five, or ``in-language AD`` (the
    ``grad``/``jvp``/``vjp`` built-ins agree with the API); ``prop`` names it."""

    def __init__(self, prop: str, message: str):
        super().__init__(f"{prop}: {message}")
        self.prop = prop
        self.message = message


class PointRejected(Exception):
    """The source program fails at the point (the generator's ranges are estimates): the
    point says nothing about the stages and is skipped."""


def _transforms() -> list[tuple[str, Callable[[Term], Term], Callable[[Type], Type]]]:
    return [
        ("→D", forward_term, forward_type),
        ("←D", backward_term, backward_type),
        ("→D simplified", lambda t: simplify(forward_term(t)), forward_type),
        ("←D simplified", lambda t: simplify(backward_term(t)), backward_type),
        ("←D fused", lambda t: fuse(backward_term(t)), backward_type),
    ]


def check_types(generated: GeneratedProgram) -> None:
    """Property 5: the type checker accepts the generated module, and every transformed
    declaration (raw and simplified) checks at the transformed type of its scheme, with the
    earlier declarations at their transformed schemes."""
    try:
        typing = infer_module(generated.module)
    except LambdadError as exc:
        raise PropertyViolation("types", f"the generated program is rejected: {exc}") from None
    for label, transform, transform_type in _transforms():
        env = TypeEnv.builtins()
        for decl in generated.module.decls:
            scheme = typing.schemes[decl.name]
            expected = transform_type(scheme.type)
            try:
                term = transform(decl.value)
                check_term(term, expected, env)
            except LambdadError as exc:
                raise PropertyViolation(
                    "types", f"{label} of `{decl.name}` does not check at "
                    f"{print_type(expected)}: {exc}") from None
            env = env.extend(decl.name, Scheme(scheme.vars, expected))


def check_round_trip(generated: GeneratedProgram) -> None:
    """Property 3: ``parse(print(m)) == m`` for the module, and ``parse(print(t)) == t`` for
    every transformed declaration, raw and simplified."""
    text = print_module(generated.module)
    try:
        parsed = parse_module(text, "<generated>")
    except LambdadError as exc:
        raise PropertyViolation("round trip", f"the printed module does not parse: {exc}\n"
                                f"{text}") from None
    if not _same_modules(parsed, generated.module):
        where = next((first_difference(a.value, b.value) for a, b in
                      zip(generated.module.decls, parsed.decls) if a != b), "declarations")
        raise PropertyViolation("round trip", f"the printed module parses to another module "
                                f"({where}):\n{text}\n--- parsed back and printed:\n"
                                f"{print_module(parsed)}")
    bound: list[str] = []
    for decl in generated.module.decls:
        for label, transform, _ in _transforms():
            term = transform(decl.value)
            printed = print_term(term)
            try:
                again = parse_expr(printed, "<transformed>", bound=bound,
                                   declared=declared_primitives(term))
            except LambdadError as exc:
                raise PropertyViolation(
                    "round trip", f"{label} of `{decl.name}` prints as text that does not "
                    f"parse: {exc}\n{printed}") from None
            if not same_up_to_elaboration(again, term):
                raise PropertyViolation(
                    "round trip", f"{label} of `{decl.name}` prints as text that parses to "
                    f"another term ({first_difference(term, again)}):\n{printed}\n"
                    f"--- parsed back and printed:\n{print_term(again)}")
        bound.append(decl.name)


def _same_modules(a: Any, b: Any) -> bool:
    return len(a.decls) == len(b.decls) and all(
        x.name == y.name and same_up_to_elaboration(x.value, y.value)
        for x, y in zip(a.decls, b.decls))


def same_up_to_elaboration(a: Term, b: Term) -> bool:
    """Whether two terms are equal but for what the type checker elaborates in place (the
    array entry an operation on arrays is: ``x * y`` of Vecs the elementwise product,
    ``sum v`` of a Vec the array reduction, ``m @ v`` the product of a Mat and a Vec):
    text parsed back is not elaborated until it is type-checked again), and for the name
    a k-tuple pattern gives the rest of the tuple (``r`` of ``let (a, r) = t in let (b,
    c) = r in e``, the parser's fresh name for ``let (a, b, c) = t in e``).  Iterative."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x == y:
            continue
        if isinstance(x, LetPair) and isinstance(y, LetPair) and x.arity > 2 \
                and x.second != y.second:
            y = attrs.evolve(y, second=x.second,
                             body=renamed_free(y.body, {y.second: x.second}))
        if isinstance(x, (Var, Builtin)) and isinstance(y, (Var, Builtin)):
            if x.name != y.name:
                return False
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, Prim):
            if x.op != y.op and not _elaborated(x.op, y.op):
                return False
        elif _node_text(x) != _node_text(y):
            return False
        kids_x, kids_y = list(children(x)), list(children(y))
        if len(kids_x) != len(kids_y):
            return False
        stack.extend(zip(kids_x, kids_y))
    return True


def _elaborated(first: str, second: str) -> bool:
    """Whether one of two primitives is an elaboration of the other on arrays."""
    if first not in PRIMITIVES or second not in PRIMITIVES:  # (a declared primitive)
        return False
    a, b = PRIMITIVES[first], PRIMITIVES[second]
    return a.on_arrays == second or b.on_arrays == first or (
        a.spelling.symbol == b.spelling.symbol and "array" in (a.kind, b.kind))


def first_difference(a: Term, b: Term) -> str:
    """Where two terms first differ (pre-order), as ``X became Y`` with the two nodes'
    own fields (not their sub-terms); iterative."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x == y:
            continue
        kids_x, kids_y = list(children(x)), list(children(y))
        if type(x) is not type(y) or len(kids_x) != len(kids_y) or \
                _node_text(x) != _node_text(y):
            return f"{_node_text(x)} became {_node_text(y)}"
        stack.extend(reversed(list(zip(kids_x, kids_y))))
    return "equal terms"


def _node_text(t: Term) -> str:
    fields = ", ".join(f"{f.name}={getattr(t, f.name)!r}" for f in attrs.fields(type(t))
                       if f.name != "span" and not isinstance(getattr(t, f.name), (Term, tuple)))
    return f"{type(t).__name__}({fields})"


_ROUTES = (("forward", "factored"), ("reverse", "factored"), ("reverse", "naive"),
           ("reverse", "fused"))


def _source_value(program: Any, name: str, point: Any) -> float:
    try:
        value = program.call(name, point)
    except LambdadError as exc:
        raise PointRejected(exc.message) from None
    if type(value) is not float or not math.isfinite(value):
        raise PointRejected(f"value {value!r}")
    return value


def check_primal(program: Any, name: str, point: Any) -> None:
    """Property 4: the primal of every transformed run is the source value, bit for bit;
    raises PointRejected if the source program fails at ``point``."""
    value = _source_value(program, name, point)
    for mode, strategy in _ROUTES:
        try:
            primal = program.value_and_grad(name, point, mode=mode, strategy=strategy)[0]
        except LambdadError as exc:
            raise PropertyViolation("primal", f"the source program runs at {point!r} but "
                                    f"{mode} ({strategy}) fails: {exc}") from None
        if not (primal == value or (primal != primal and value != value)) or \
                math.copysign(1.0, primal) != math.copysign(1.0, value):
            raise PropertyViolation("primal", f"{mode} ({strategy}) gives the value "
                                    f"{primal!r}, the source program {value!r}")


def check_modes_agree(program: Any, name: str, point: Any) -> None:
    """Property 1: forward mode, reverse mode (factored) and reverse mode (naive) give the
    same gradient to ``gradcheck.AGREEMENT`` relative; the factored strategy runs each
    backpropagator body at most once; each reverse route run again (by the prepared path
    of a repeated call, at a point of Python reals) gives its first run's value, gradient
    and costs bit for bit.  Raises PointRejected if the source program fails."""
    _source_value(program, name, point)
    program = program.extended(())  # (no run of it yet: its first runs take the general path)
    gradients = {}
    for mode, strategy in _ROUTES:
        try:
            value, gradient, stats = program.value_and_grad(name, point, mode=mode,
                                                            strategy=strategy, stats=True)
            # (forward mode has no prepared path: its repeated runs are its first)
            again = program.value_and_grad(name, point, mode=mode, strategy=strategy,
                                           stats=True) if mode == "reverse" else None
        except LambdadError as exc:
            raise PropertyViolation("modes agree", f"{mode} ({strategy}) fails: {exc}") from None
        if again is not None and (repr(again[:2]) != repr((value, gradient))
                                  or again[2] != stats):
            raise PropertyViolation("modes agree", f"{mode} ({strategy}) run again gives "
                                    f"{again!r}, the first run {(value, gradient, stats)!r}")
        gradients[(mode, strategy)] = gradcheck.leaves(gradient)
        if (mode, strategy) == ("reverse", "factored") and stats.bodies_run > stats.created:
            raise PropertyViolation("modes agree", f"factored reverse mode ran "
                                    f"{stats.bodies_run} bodies for {stats.created} "
                                    "backpropagators")
    reference = gradients[_ROUTES[0]]
    everything = [abs(d) for g in gradients.values() for d in g if math.isfinite(d)]
    floor = gradcheck.AGREEMENT_FLOOR * max([1.0, abs(_source_value(program, name, point)),
                                             *everything])
    for route, gradient in gradients.items():
        if len(gradient) != len(reference):
            raise PropertyViolation("modes agree", f"{route} gives {len(gradient)} "
                                    f"derivatives, forward mode {len(reference)}")
        for i, (a, b) in enumerate(zip(reference, gradient)):
            if not (math.isfinite(a) and math.isfinite(b)):
                raise PropertyViolation("modes agree", f"a derivative is not finite: "
                                        f"{route} gives {b!r}, forward {a!r} (input {i})")
            if abs(a - b) > gradcheck.AGREEMENT * max(abs(a), abs(b)) + floor:
                raise PropertyViolation("modes agree", f"{route[0]} ({route[1]}) gives {b!r} "
                                        f"for input {i}, forward mode {a!r}")


def check_finite_differences(program: Any, name: str, point: Any) -> bool:
    """Property 2: every mode agrees with central finite differences (``lambdad check``'s
    tolerances).  Returns False, checking nothing, when the point is near a kink or a branch
    switch; raises PointRejected if the source program fails there."""
    _source_value(program, name, point)
    value = from_python(point, finite=False)
    try:
        result = gradcheck.check_point(program, name, value)
    except LambdadError as exc:
        raise PointRejected(exc.message) from None
    if any(note.startswith("finite differences not compared") or note.startswith("not checked")
           for note in result.notes):
        return False
    if not result.ok:
        raise PropertyViolation("finite differences", "; ".join(result.mismatches()))
    return True


def check_in_language(generated: GeneratedProgram, point: Any, load: Callable[[str], Any],
                      program: Any = None) -> None:
    """Property 6: ``grad``, ``jvp`` and ``vjp`` called inside a program on the function (a
    closure, uncurried by a λ) agree with the API's gradient: the same gradient, the
    directional derivative along all-ones, and the pull-back of 1.  Raises PointRejected if
    the source program fails at ``point``."""
    program = program or load(generated.source())
    value = _source_value(program, generated.name, point)
    _, gradient = program.value_and_grad(generated.name, point)
    k = len(generated.params)
    function = generated.name if k == 1 else f"({print_term(uncurried_term(generated.name, k))})"
    # the point and the all-ones direction written as the point is (a k-tuple for k
    # parameters)
    at = from_python(point, finite=False, nested=False)
    reals = gradcheck.leaves(at)
    ones = gradcheck.replace_leaves(at, [1.0] * len(reals))
    x, v = f"({format_value(at)})", f"({format_value(ones)})"
    text = (generated.source() + f"\ndef main = (grad {function} {x}, jvp {function} {x} {v}, "
            f"snd (vjp {function} {x}) 1)\n")
    try:
        inside, (jvp_value, jvp_derivative), pulled = load(text).run("main")
    except LambdadError as exc:
        raise PropertyViolation("in-language AD", f"grad/jvp/vjp inside the program fail: "
                                f"{exc}\n{text}") from None
    expected = gradcheck.leaves(gradient)
    scale = max([1.0, abs(value), *(abs(g) for g in expected)])

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= gradcheck.AGREEMENT * max(abs(a), abs(b)) + \
            gradcheck.AGREEMENT_FLOOR * scale * max(1, len(expected))

    for what, found in (("grad", gradcheck.leaves(inside)), ("vjp", gradcheck.leaves(pulled))):
        if len(found) != len(expected) or not all(map(close, found, expected)):
            raise PropertyViolation("in-language AD", f"{what} inside the program gives "
                                    f"{found}, the API {expected}\n{text}")
    if jvp_value != value or not close(jvp_derivative, math.fsum(expected)):
        raise PropertyViolation("in-language AD", f"jvp inside the program gives "
                                f"({jvp_value!r}, {jvp_derivative!r}); the value is {value!r} "
                                f"and the gradient sums to {math.fsum(expected)!r}\n{text}")


def _dot(t: Type, a: str, b: str, fresh: Callable[[], str]) -> str:
    """Source text of the inner product of ``a`` and ``b`` of type ``t`` (reals, pairs,
    lists of those; other components count 0)."""
    if isinstance(t, RealT):
        return f"({a} * {b})"
    if isinstance(t, ArrayT):
        return f"(sum ({a} * {b}))"
    if isinstance(t, PairT):  # (a tuple taken apart by a pattern of its arity)
        parts = tuple_components(t)
        names_a = [fresh() for _ in parts]
        names_b = [fresh() for _ in parts]
        terms = " + ".join(_dot(part, x, y, fresh) for part, x, y in zip(parts, names_a, names_b))
        return (f"(let ({', '.join(names_a)}) = {a} in let ({', '.join(names_b)}) = {b} in "
                f"{terms})")
    if isinstance(t, ListT):
        q = fresh()
        item = _dot(t.item, f"(fst {q})", f"(snd {q})", fresh)
        return f"(fold (\\acc {q} -> acc + {item}) 0 (zip {a} {b}))"
    return "0"


def nested_definitions(generated: GeneratedProgram, point: Any) -> dict[str, str]:
    """Scalar functions of the generated one's point that differentiate it, by name:
    ``nested_jvp`` (a directional derivative by ``jvp``: its programs are →D∘→D and
    ←D∘→D) and ``nested_grad`` (the gradient by ``grad`` against a direction: →D∘←D and
    ←D∘←D).  The direction is all ones."""
    at = from_python(point, finite=False, nested=False)  # (written as the point is)
    ones = f"({format_value(gradcheck.replace_leaves(at, [1.0] * len(gradcheck.leaves(at))))})"
    k = len(generated.params)
    function = generated.name if k == 1 else f"({print_term(uncurried_term(generated.name, k))})"
    names = NameSupply()

    def fresh() -> str:
        return names.fresh("nest")

    point_type = (generated.params[0][1] if k == 1
                  else tuple_type([t for _, t in generated.params]))
    return {"nested_jvp": f"def nested_jvp q = snd (jvp {function} q {ones})",
            "nested_grad": (f"def nested_grad q = "
                            f"{_dot(point_type, f'(grad {function} q)', ones, fresh)}")}


def check_nested_programs(generated: GeneratedProgram, point: Any,
                          load: Callable[[str], Any], names: Sequence[str] | None = None
                          ) -> None:
    """Property 7: for functions that differentiate the generated one
    (:func:`nested_definitions`, those of ``names`` if given), the programs ``lambdad show``
    prints by each mode — the compositions →D∘←D, ←D∘←D, →D∘→D, ←D∘→D — parse back to
    themselves, type-check at the transformed type, and run to the value and gradient the
    run-time route computes.  Raises PointRejected if the source program fails at
    ``point``."""
    definitions = nested_definitions(generated, point)
    if names is not None:
        definitions = {name: definitions[name] for name in names}
    text = generated.source() + "\n" + "\n".join(definitions.values()) + "\n"
    program = load(text)
    _source_value(program, generated.name, point)
    at = from_python(point, finite=False, nested=False)  # (a k-tuple for k parameters)
    uncurried = at if len(generated.params) == 1 else tuple(at)
    for name in definitions:
        try:
            expected = program.value_and_grad(name, uncurried)
        except LambdadError as exc:
            raise PointRejected(exc.message) from None
        # forward mode over the function runs its written-out program when the program runs;
        # reverse mode runs it on a level: the two routes agree
        try:
            by_program = program.value_and_grad(name, uncurried, mode="forward")
        except LambdadError as exc:
            raise PropertyViolation("nested programs", f"forward mode over `{name}` fails "
                                    f"where reverse mode does not: {exc}\n{text}") from None
        if not _close([by_program[0], *gradcheck.leaves(by_program[1])],
                      [expected[0], *gradcheck.leaves(expected[1])]):
            raise PropertyViolation("nested programs", f"forward mode over `{name}` gives "
                                    f"{by_program}, reverse mode {expected}\n{text}")
        for mode in ("forward", "reverse"):
            where = f"`show {name} --{mode}`"
            try:
                shown = program.show(name, forward=mode == "forward",
                                     reverse=mode == "reverse", at=uncurried)
                module = parse_module(shown, "<shown>")
            except LambdadError as exc:
                raise PropertyViolation("nested programs", f"{where} fails: {exc}\n{text}") \
                    from None
            again = parse_module(print_module(module), "<reprinted>")
            if again != module:
                raise PropertyViolation("nested programs", f"{where} prints a program that "
                                        f"does not print back to itself:\n{shown}")
            transform_type = forward_type if mode == "forward" else backward_type
            try:
                typing = infer_module(module)
                decl = next(d for d in module.decls if d.name == name)
                check_term(decl.value, transform_type(program.scheme(name).type), typing.env)
                value, gradient = evaluate_module(module)["main"]
            except LambdadError as exc:
                raise PropertyViolation("nested programs", f"{where} prints a program that "
                                        f"fails to check or run: {exc}\n{shown}") from None
            found = [value, *gradcheck.leaves(gradient)]
            wanted = [expected[0], *gradcheck.leaves(expected[1])]
            if not _close(found, wanted):
                raise PropertyViolation("nested programs", f"{where} runs to {found}, the "
                                        f"run-time route gives {wanted}\n{shown}")


def _direction_like(point: Any, steps: Sequence[float] = (1.0, -0.5, 0.25, 2.0)) -> Any:
    """A direction of ``point``'s shape (Python data): its reals replaced, left to right,
    by ``steps`` in turn."""
    count = 0

    def along(x: Any) -> Any:
        nonlocal count
        if isinstance(x, tuple):
            return tuple(along(item) for item in x)
        if isinstance(x, list):
            return [along(item) for item in x]
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            count += 1
            return steps[(count - 1) % len(steps)]
        return x

    return along(point)


def check_products(program: Any, name: str, point: Any) -> None:
    """Hessian-vector products: H·v by forward mode over reverse mode at ``point``, by the
    general path and then again by the prepared one a repeated call at a point of Python
    reals runs, agree bit for bit, and agree (to the modes' tolerance) with the Hessian
    by forward mode over forward mode applied to v.  Raises PointRejected if the source
    program, or the first product, fails at ``point``."""
    _source_value(program, name, point)
    direction = _direction_like(point)
    try:
        first = program.hvp(name, point, direction)
    except LambdadError as exc:
        raise PointRejected(exc.message) from None
    try:
        again = program.hvp(name, point, direction)
    except LambdadError as exc:
        raise PropertyViolation("products", f"a repeated Hessian-vector product fails where "
                                f"the first did not: {exc}") from None
    if repr(again) != repr(first):
        raise PropertyViolation("products", f"a repeated Hessian-vector product gives "
                                f"{again!r}, the first {first!r}")
    try:
        rows = program.hessian(name, point, mode="forward-over-forward")[2]
    except LambdadError as exc:
        raise PropertyViolation("products", f"forward mode over forward mode fails where "
                                f"forward over reverse does not: {exc}") from None
    v = gradcheck.leaves(direction)
    wanted = [math.fsum(r * d for r, d in zip(gradcheck.leaves(row), v)) for row in rows]
    if not _close(gradcheck.leaves(first[2]), wanted):
        raise PropertyViolation("products", f"H·v by forward over reverse is "
                                f"{gradcheck.leaves(first[2])}, by the Hessian of forward "
                                f"over forward {wanted}")


def _close(found: Sequence[float], wanted: Sequence[float]) -> bool:
    """Whether two lists of reals agree to the tolerance the modes are compared with."""
    scale = max([1.0, *(abs(r) for r in wanted)])
    return len(found) == len(wanted) and all(
        abs(a - b) <= gradcheck.AGREEMENT * max(abs(a), abs(b))
        + gradcheck.AGREEMENT_FLOOR * scale for a, b in zip(found, wanted))


def check_properties(generated: GeneratedProgram, point: Any, load: Callable[[str], Any],
                     properties: Sequence[str] = PROPERTIES) -> Any:
    """Checks ``properties`` of ``generated`` at ``point``, loading its source with ``load``
    (``lambdad.loads``); returns the loaded program.  Raises PropertyViolation on the first
    failure and PointRejected if the source program fails at ``point``."""
    if "types" in properties:
        check_types(generated)
    if "round trip" in properties:
        check_round_trip(generated)
    try:
        program = load(generated.source())
    except LambdadError as exc:
        raise PropertyViolation("types", f"the generated program does not load: {exc}") from None
    if "primal" in properties:
        check_primal(program, generated.name, point)
    if "modes agree" in properties:
        check_modes_agree(program, generated.name, point)
    if "finite differences" in properties:
        check_finite_differences(program, generated.name, point)
    if "in-language AD" in properties:
        check_in_language(generated, point, load, program)
    # (`show --at` cannot write an array point as a program yet: array programs skip this)
    if "nested programs" in properties and not has_arrays(generated):
        # Printing, parsing and running four programs costs several times the other
        # properties together: half of the programs (chosen by their text) check one of
        # the two functions, so a run still covers all four compositions.
        draw = int(hashlib.sha256(generated.source().encode()).hexdigest(), 16) % 4
        if draw < 2:
            check_nested_programs(generated, point, load, (("nested_jvp", "nested_grad")[draw],))
    return program


def has_arrays(generated: GeneratedProgram) -> bool:
    """Whether the program takes an array (``Vec``, ``Mat``)."""
    return any(isinstance(t, ArrayT) for _, t in generated.params)


ARRAY_SHARE = 4
"""One program in this many that :func:`cases` draws is an array program."""


def cases(max_depth: int = 4, inputs: Sequence[str] = INPUT_KINDS,
          declared: Sequence[Primitive] = (), arrays: bool = False) -> st.SearchStrategy:
    """Strategy: ``(program, point)`` pairs (``declared`` as for :func:`programs`); with
    ``arrays``, one in :data:`ARRAY_SHARE` is an array program
    (:func:`~lambdad.testing.arrays.array_cases`; a failure shrinks toward the others)."""
    scalar = programs(max_depth=max_depth, inputs=inputs, declared=declared).flatmap(
        lambda g: st.tuples(st.just(g), points_for(g)))
    if not arrays:
        return scalar
    return st.integers(0, ARRAY_SHARE - 1).flatmap(
        lambda k: array_cases(min(max_depth, 3)) if k == ARRAY_SHARE - 1 else scalar)
