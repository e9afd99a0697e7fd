"""THE primitive table: every built-in of the language, with everything any stage needs.

Each entry holds the primitive's name and spelling, its type, how to evaluate it (with its
domain check), and, for real functions, its partial derivatives written as terms of the
language (AD.md section 7).  The parser (names, arities, operator spellings), the type
checker (types), the interpreter (evaluation), both transformations (derivative rules), the
printer (spellings and precedence) and the gradient checker (domains, kinks) all read this
table; no other module branches on a primitive's name.  Adding a primitive is one entry.
An entry is a :class:`~lambdad.primitive_entry.Primitive`; the entries on arrays are
written in :mod:`lambdad.array_primitives` and are part of this table.

Kinds of primitive:

``real``
    ``R^k -> R``.  Differentiated by the chain rule from ``partials``: the i-th entry is a
    term over ``params`` (and ``result``, bound to the primal value) for ``∂_i f``.
``test``
    ``R^k -> Bool`` (comparisons).  Both transformations look at primals only.
``logic``
    ``Bool -> ... -> Bool``.  No reals involved; unchanged by the transformations.
``structural``
    Polymorphic plumbing (``fst``, ``map``, ``fold``, ``zip``): both transformations map it
    to itself at the transformed type.
``constant``
    Real-valued but locally constant (``length``, ``range``): the transformations pass the
    primals of real arguments and pair every real of the result with a zero derivative.
``ad``
    ``grad``, ``jvp``, ``vjp``, ``jacfwd``, ``jacrev``: evaluated by the pipeline through an
    interpreter hook.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from itertools import chain
from typing import Any

import attrs

from .errors import DomainError  # raised here; part of this module's interface
from .iterate import Step, run
from .syntax import (
    BOOL,
    REAL,
    Annot,
    BoolLit,
    Builtin,
    Const,
    FunT,
    If,
    Lam,
    Let,
    ListT,
    PairT,
    Prim,
    Term,
    Var,
    VarT,
    walk,
)

# The array entries and the shape of an entry, part of this module's interface: other
# modules read the whole table from here.
from .array_primitives import (
    ARRAY_ENTRIES,
    ARRAY_NAMESAKES,
    ELEMENTWISE,
    SHAPE_STAND_IN,
    elementwise_entries,
    has_elementwise_entry,
)
from .primitive_entry import (
    LEVEL_ADD,
    LEVEL_AND,
    LEVEL_APP,
    LEVEL_COMPARE,
    LEVEL_INDEX,
    LEVEL_MUL,
    LEVEL_NEG,
    LEVEL_OR,
    LEVEL_POW,
    NEW_ARRAY,
    REAL_EXPRESSION_KINDS,
    ArrayRule,
    Laws,
    Primitive,
    Spelling,
)
from .primitive_entry import function_type as _fun

_A, _B = VarT("a"), VarT("b")

R2R = _fun(REAL, REAL)
RR2R = _fun(REAL, REAL, REAL)
RR2B = _fun(REAL, REAL, BOOL)


def _num(x: float) -> str:
    """``x`` as lambdad writes it: ``-1``, ``0.5``, ``1e+300``."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)


# The evaluation functions run in inner loops: each builds its message only when it raises,
# and a test is written `not (...)` so that a NaN argument fails it too.
def _div(x: float, y: float) -> float:
    if y == 0.0:
        raise DomainError(f"division by zero ({_num(x)} / {_num(y)})")
    return x / y


def _pow(x: float, y: float) -> float:
    if x < 0.0 and not float(y).is_integer():
        raise DomainError(f"negative base with a non-integer exponent ({_num(x)} ^ {_num(y)})")
    if x == 0.0 and y < 0.0:
        raise DomainError(f"zero raised to a negative power (0 ^ {_num(y)})")
    try:
        return math.pow(x, y)
    except OverflowError:
        raise DomainError(f"overflow in {_num(x)} ^ {_num(y)}") from None


def _whole_exponent(x: float | None, y: float | None) -> bool:
    """Whether ``x ^ y`` is defined at every base ``x``: ``y`` is a literal whole number
    >= 0 (then :func:`_pow` is ``math.pow`` but for its message on an overflow)."""
    return y is not None and y >= 0.0 and float(y).is_integer()


def _log(x: float) -> float:
    if not (x > 0.0):
        raise DomainError(f"log of a non-positive number ({_num(x)})")
    return math.log(x)


def _sqrt(x: float) -> float:
    if not (x >= 0.0):
        raise DomainError(f"sqrt of a negative number ({_num(x)})")
    return math.sqrt(x)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        raise DomainError(f"overflow in exp {_num(x)}") from None


def _tan(x: float) -> float:
    return math.tan(x)


def _sigmoid(x: float) -> float:
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _overflowing(name: str, function: Callable[[float], float]) -> Callable[[float], float]:
    """``function`` with an overflow reported as a DomainError naming ``name``."""

    def evaluate(x: float) -> float:
        try:
            return function(x)
        except OverflowError:
            raise DomainError(f"overflow in {name} {_num(x)}") from None

    return evaluate


def _asin(x: float) -> float:
    if not (-1.0 <= x <= 1.0):
        raise DomainError(f"asin needs -1 <= x <= 1, got {_num(x)}")
    return math.asin(x)


def _acos(x: float) -> float:
    if not (-1.0 <= x <= 1.0):
        raise DomainError(f"acos needs -1 <= x <= 1, got {_num(x)}")
    return math.acos(x)


def _acosh(x: float) -> float:
    if not (x >= 1.0):
        raise DomainError(f"acosh needs x >= 1, got {_num(x)}")
    return math.acosh(x)


def _atanh(x: float) -> float:
    if not (-1.0 < x < 1.0):
        raise DomainError(f"atanh needs -1 < x < 1, got {_num(x)}")
    return math.atanh(x)


def _log1p(x: float) -> float:
    if not (x > -1.0):
        raise DomainError(f"log1p needs x > -1, got {_num(x)}")
    return math.log1p(x)


def _sign(x: float) -> float:
    return 1.0 if x > 0.0 else -1.0 if x < 0.0 else 0.0


def _clip(lo: float, hi: float, x: float) -> float:
    return lo if x < lo else hi if x > hi else x


def _whole_distance(x: float) -> float:
    """Distance from ``x`` to the nearest integer, where floor and ceil jump."""
    return abs(x - round(x))


def _half_distance(x: float) -> float:
    """Distance from ``x`` to the nearest half-integer, where round jumps."""
    return abs(x - math.floor(x) - 0.5)


# Elements a list primitive builds in one step of C code: a longer list is built in pieces
# of this many, so that a run's time and memory limits, checked between two Python
# bytecodes (lambdad.limits), can stop it while it grows (10^8 reals take seconds).
PIECE = 1 << 16


def _zip(xs: list, ys: list) -> list:
    if len(xs) != len(ys):  # the message is only built when needed: zip runs in inner loops
        raise DomainError(f"zip of lists of different lengths ({len(xs)} and {len(ys)})")
    if len(xs) <= PIECE:
        return list(zip(xs, ys))
    out: list = []
    for start in range(0, len(xs), PIECE):
        out.extend(zip(xs[start:start + PIECE], ys[start:start + PIECE]))
    return out


def _range(n: float) -> list:
    if not (n >= 0.0 and float(n).is_integer()):
        raise DomainError(f"range needs a non-negative integer, got {_num(n)}")
    if n <= PIECE:
        return list(map(float, range(int(n))))
    out: list = []
    for start in range(0, int(n), PIECE):
        out.extend(map(float, range(start, min(start + PIECE, int(n)))))
    return out


def _append(xs: list, ys: list) -> list:
    if len(xs) + len(ys) <= PIECE:
        return xs + ys
    return _concat((xs, ys))


def _map(f: Callable, xs: list) -> list:
    return list(map(f, xs))  # (no comprehension frame: map runs in every MLP layer)


# A function value ``f`` of two curried arguments may offer, under this attribute of itself
# (or of ``f.func`` when ``f`` is a ``functools.partial`` over captured values), a function
# taking both at once: ``both(x, y) == f(x)(y)``, without building the closure ``f(x)``.
TWO_ARGUMENTS = "__lambdad_two_arguments__"


def curried_pair(f: Callable) -> Callable[[Any, Any], Any]:
    """A two-argument Python function computing ``f(x)(y)``, without the closure ``f(x)``
    when ``f`` offers it (see TWO_ARGUMENTS)."""
    if type(f) is partial:
        both = getattr(f.func, TWO_ARGUMENTS, None)
        if both is not None:
            return partial(both, *f.args)
    else:
        both = getattr(f, TWO_ARGUMENTS, None)
        if both is not None:
            return both
    return lambda x, y: f(x)(y)


def _fold(f: Callable, z: Any, xs: list) -> Any:
    acc = z
    both = curried_pair(f)
    for x in xs:
        acc = both(acc, x)
    return acc


def _scan(f: Callable, z: Any, xs: list) -> list:
    acc = z
    both = curried_pair(f)
    out = [acc]
    for x in xs:
        acc = both(acc, x)
        out.append(acc)
    return out


def _filter(keep: Callable, xs: list) -> list:
    return list(filter(keep, xs))


def _position(xs: list, i: float) -> int:
    """The list position ``i`` names; raises DomainError unless it is a whole number in range."""
    if not float(i).is_integer():
        raise DomainError(f"index {_num(i)} is not a whole number")
    if not 0.0 <= i < len(xs):
        raise DomainError(f"index {int(i)} is out of range for a list of length {len(xs)}"
                          + ("" if i >= 0.0 else " (indices count from 0)"))
    return int(i)


def _index(xs: list, i: float) -> Any:
    return xs[_position(xs, i)]


def _head(xs: list) -> Any:
    if not xs:
        raise DomainError("head of an empty list")
    return xs[0]


def _last(xs: list) -> Any:
    if not xs:
        raise DomainError("last of an empty list")
    return xs[-1]


def _concat(xss: Sequence[list]) -> list:
    if sum(map(len, xss)) <= PIECE:
        return list(chain.from_iterable(xss))
    out: list = []
    for xs in xss:
        if len(xs) <= PIECE:
            out.extend(xs)
        else:
            for start in range(0, len(xs), PIECE):
                out.extend(xs[start:start + PIECE])
    return out


def _real(name, params, doc, evaluate, partials, *, inline=None, result=None, spelling=None,
          domain=None, kink=None, commutative=False, laws=None,
          finite_at_finite=False, inline_at_literals=None) -> Primitive:
    arity = len(params)
    return Primitive(
        name=name,
        kind="real",
        params=params,
        type=_fun(*([REAL] * (arity + 1))),
        spelling=spelling or Spelling(name, "function", LEVEL_APP, "left"),
        doc=doc,
        evaluate=evaluate,
        inline=inline,
        inline_at_literals=inline_at_literals,
        partials=partials,
        result=result,
        domain=domain,
        kink=kink,
        commutative=commutative,
        laws=laws,
        finite_at_finite=finite_at_finite,
    )


def _test(name, symbol, doc, evaluate, inline) -> Primitive:
    return Primitive(
        name=name,
        kind="test",
        params=("x", "y"),
        type=RR2B,
        spelling=Spelling(symbol, "infix", LEVEL_COMPARE, "none"),
        doc=doc,
        evaluate=evaluate,
        inline=inline,
        kink=lambda x, y: abs(x - y),
    )


def _infix(symbol: str, level: int, assoc: str = "left") -> Spelling:
    return Spelling(symbol, "infix", level, assoc)


_ENTRIES: list[Primitive] = [
    # ---- arithmetic
    _real("add", ("x", "y"), "x + y", lambda x, y: x + y, ("1", "1"),
          inline="({x} + {y})", spelling=_infix("+", LEVEL_ADD), commutative=True,
          laws=Laws(left_unit=0.0, right_unit=0.0, of_negation="sub")),
    _real("sub", ("x", "y"), "x - y", lambda x, y: x - y, ("1", "-1"),
          inline="({x} - {y})", spelling=_infix("-", LEVEL_ADD),
          laws=Laws(right_unit=0.0, left_negating=0.0, of_negation="add")),
    _real("mul", ("x", "y"), "x * y", lambda x, y: x * y, ("y", "x"),
          inline="({x} * {y})", spelling=_infix("*", LEVEL_MUL), commutative=True,
          laws=Laws(left_unit=1.0, right_unit=1.0, absorbing=0.0, negating=-1.0)),
    _real("div", ("x", "y"), "x / y; division by zero is a runtime error", _div,
          ("1 / y", "-x / (y * y)"), spelling=_infix("/", LEVEL_MUL), laws=Laws(right_unit=1.0),
          domain=lambda x, y: abs(y) > 0.1),
    _real("pow", ("x", "y"),
          "real power x ^ y; a negative base needs an integer exponent. The derivative in x "
          "is 0 for y = 0 (x ^ 0 is constant, also at x = 0); the derivative in y "
          "is log x * x ^ y for x > 0 and 0 otherwise (where x ^ y is only defined for "
          "integer y); a literal exponent is never differentiated",
          _pow, ("if y == 0 then 0 else y * x ^ (y - 1)", "if x > 0 then log x * r else 0"),
          result="r", spelling=_infix("^", LEVEL_POW, "right"), laws=Laws(right_unit=1.0),
          inline_at_literals=(_whole_exponent, "_m.pow({x}, {y})"),
          # Far from 0, and a negative base only with a whole exponent (x ^ 2 at -1).
          domain=lambda x, y: (x > 0.1 or (x < -0.1 and float(y).is_integer()))
          and abs(y) < 4),
    _real("neg", ("x",), "-x", lambda x: -x, ("-1",), inline="(-{x})",
          spelling=Spelling("-", "prefix", LEVEL_NEG, "none"), laws=Laws(involution=True),
          finite_at_finite=True),
    # ---- elementary functions
    _real("sin", ("x",), "sine", math.sin, ("cos x",), inline="_m.sin({x})",
          finite_at_finite=True),
    _real("cos", ("x",), "cosine", math.cos, ("-sin x",), inline="_m.cos({x})",
          finite_at_finite=True),
    _real("tan", ("x",), "tangent", _tan, ("1 + r * r",), result="r", inline="_m.tan({x})",
          domain=lambda x: abs(math.cos(x)) > 0.2),
    _real("exp", ("x",), "exponential; overflow is a runtime error", _exp, ("r",), result="r",
          domain=lambda x: x < 5),
    _real("log", ("x",), "natural logarithm; needs x > 0", _log, ("1 / x",),
          domain=lambda x: x > 0.1),
    _real("sqrt", ("x",), "square root; needs x >= 0 (its derivative needs x > 0)", _sqrt,
          ("0.5 / r",), result="r", domain=lambda x: x > 0.1),
    _real("tanh", ("x",), "hyperbolic tangent", math.tanh, ("1 - r * r",), result="r",
          inline="_m.tanh({x})", finite_at_finite=True),
    _real("sigmoid", ("x",), "logistic function 1 / (1 + exp (-x))", _sigmoid,
          ("r * (1 - r)",), result="r"),
    _real("asin", ("x",), "inverse sine, in [-pi/2, pi/2]; needs -1 <= x <= 1", _asin,
          ("1 / sqrt (1 - x * x)",), domain=lambda x: abs(x) < 0.9),
    _real("acos", ("x",), "inverse cosine, in [0, pi]; needs -1 <= x <= 1", _acos,
          ("-1 / sqrt (1 - x * x)",), domain=lambda x: abs(x) < 0.9),
    _real("atan", ("x",), "inverse tangent, in (-pi/2, pi/2)", math.atan,
          ("1 / (1 + x * x)",), inline="_m.atan({x})", finite_at_finite=True),
    _real("atan2", ("y", "x"),
          "the angle of the point (x, y), in (-pi, pi]; atan2 0 0 = 0. It jumps on the "
          "negative x axis", math.atan2, ("x / (x * x + y * y)", "-y / (x * x + y * y)"),
          inline="_m.atan2({y}, {x})", domain=lambda y, x: x * x + y * y > 0.01,
          kink=lambda y, x: min(math.hypot(x, y), abs(y) if x < 0.0 else math.inf),
          finite_at_finite=True),
    _real("sinh", ("x",), "hyperbolic sine; overflow is a runtime error",
          _overflowing("sinh", math.sinh), ("cosh x",), domain=lambda x: abs(x) < 5),
    _real("cosh", ("x",), "hyperbolic cosine; overflow is a runtime error",
          _overflowing("cosh", math.cosh), ("sinh x",), domain=lambda x: abs(x) < 5),
    _real("asinh", ("x",), "inverse hyperbolic sine", math.asinh, ("1 / sqrt (x * x + 1)",),
          inline="_m.asinh({x})", finite_at_finite=True),
    _real("acosh", ("x",), "inverse hyperbolic cosine, >= 0; needs x >= 1", _acosh,
          ("1 / sqrt (x * x - 1)",), domain=lambda x: x > 1.1),
    _real("atanh", ("x",), "inverse hyperbolic tangent; needs -1 < x < 1", _atanh,
          ("1 / (1 - x * x)",), domain=lambda x: abs(x) < 0.9),
    _real("log1p", ("x",), "log (1 + x), accurate for small x; needs x > -1", _log1p,
          ("1 / (1 + x)",), domain=lambda x: x > -0.9),
    _real("expm1", ("x",), "exp x - 1, accurate for small x; overflow is a runtime error",
          _overflowing("expm1", math.expm1), ("r + 1",), result="r", domain=lambda x: x < 5),
    _real("erf", ("x",), "the error function, 2 / sqrt pi times the integral of exp (-t^2) "
          "from 0 to x", math.erf, ("1.1283791670955126 * exp (-(x * x))",),
          inline="_m.erf({x})", finite_at_finite=True),
    _real("floor", ("x",), "the largest integer <= x; derivative 0 (away from its jumps)",
          lambda x: float(math.floor(x)), ("0",), inline="float(_m.floor({x}))",
          kink=_whole_distance, finite_at_finite=True),
    _real("ceil", ("x",), "the smallest integer >= x; derivative 0 (away from its jumps)",
          lambda x: float(math.ceil(x)), ("0",), inline="float(_m.ceil({x}))",
          kink=_whole_distance, finite_at_finite=True),
    _real("round", ("x",), "the nearest integer, halves to even (round 2.5 = 2); derivative "
          "0 (away from its jumps)", lambda x: float(round(x)), ("0",),
          inline="float(round({x}))", kink=_half_distance, finite_at_finite=True),
    _real("sign", ("x",), "-1, 0 or 1 as x is negative, zero or positive; derivative 0 "
          "(away from 0)", _sign, ("0",), kink=abs, finite_at_finite=True),
    _real("relu", ("x",), "max x 0; derivative 0 at 0", lambda x: x if x > 0.0 else 0.0,
          ("if x > 0 then 1 else 0",), inline="({x} if {x} > 0.0 else 0.0)",
          kink=lambda x: abs(x), finite_at_finite=True),
    _real("heaviside", ("x",), "1 where x > 0, else 0 (a step; derivative 0 away from 0): "
          "with arrays, the select of piecewise functions, heaviside (x - y) * a + "
          "(1 - heaviside (x - y)) * b", lambda x: 1.0 if x > 0.0 else 0.0, ("0",),
          inline="(1.0 if {x} > 0.0 else 0.0)", kink=abs, finite_at_finite=True),
    _real("abs", ("x",), "absolute value; derivative 0 at 0", abs,
          ("if x > 0 then 1 else if x < 0 then -1 else 0",), inline="abs({x})",
          kink=lambda x: abs(x), finite_at_finite=True),
    _real("max", ("x", "y"), "the larger argument; at ties the derivative is the first's",
          lambda x, y: x if x >= y else y,
          ("if x >= y then 1 else 0", "if x >= y then 0 else 1"),
          inline="({x} if {x} >= {y} else {y})", kink=lambda x, y: abs(x - y),
          finite_at_finite=True),
    _real("min", ("x", "y"), "the smaller argument; at ties the derivative is the first's",
          lambda x, y: x if x <= y else y,
          ("if x <= y then 1 else 0", "if x <= y then 0 else 1"),
          inline="({x} if {x} <= {y} else {y})", kink=lambda x, y: abs(x - y),
          finite_at_finite=True),
    _real("clip", ("lo", "hi", "x"),
          "x limited to [lo, hi]: lo when x < lo, else hi when x > hi, else x",
          _clip, ("if x < lo then 1 else 0", "if x < lo then 0 else if x > hi then 1 else 0",
                  "if x < lo then 0 else if x > hi then 0 else 1"),
          inline="({lo} if {x} < {lo} else {hi} if {x} > {hi} else {x})",
          domain=lambda lo, hi, x: hi - lo > 0.1,
          kink=lambda lo, hi, x: min(abs(x - lo), abs(x - hi)), finite_at_finite=True),
    # ---- comparisons (on reals only)
    _test("lt", "<", "x < y", lambda x, y: x < y, "({x} < {y})"),
    _test("le", "<=", "x <= y", lambda x, y: x <= y, "({x} <= {y})"),
    _test("gt", ">", "x > y", lambda x, y: x > y, "({x} > {y})"),
    _test("ge", ">=", "x >= y", lambda x, y: x >= y, "({x} >= {y})"),
    _test("eq", "==", "x == y (exact)", lambda x, y: x == y, "({x} == {y})"),
    _test("ne", "!=", "x != y (exact)", lambda x, y: x != y, "({x} != {y})"),
    # ---- booleans
    Primitive("not", "logic", ("b",), _fun(BOOL, BOOL), Spelling("not", "function", LEVEL_APP),
              "boolean negation", lambda b: not b, inline="(not {b})"),
    # ---- structure
    Primitive("fst", "structural", ("p",), _fun(PairT(_A, _B), _A),
              Spelling("fst", "function", LEVEL_APP), "first component of a pair",
              lambda p: p[0], inline="{p}[0]"),
    Primitive("snd", "structural", ("p",), _fun(PairT(_A, _B), _B),
              Spelling("snd", "function", LEVEL_APP), "second component of a pair",
              lambda p: p[1], inline="{p}[1]"),
    Primitive("map", "structural", ("f", "xs"), _fun(FunT(_A, _B), ListT(_A), ListT(_B)),
              Spelling("map", "function", LEVEL_APP), "apply f to every element", _map),
    Primitive("fold", "structural", ("f", "z", "xs"),
              _fun(_fun(_B, _A, _B), _B, ListT(_A), _B),
              Spelling("fold", "function", LEVEL_APP),
              "left fold: fold f z [x1, x2] = f (f z x1) x2", _fold),
    Primitive("zip", "structural", ("xs", "ys"), _fun(ListT(_A), ListT(_B), ListT(PairT(_A, _B))),
              Spelling("zip", "function", LEVEL_APP),
              "pair up two lists of the same length (a runtime error otherwise)", _zip),
    Primitive("length", "constant", ("xs",), _fun(ListT(_A), REAL),
              Spelling("length", "function", LEVEL_APP), "number of elements, as a real",
              lambda xs: float(len(xs)), inline="float(len({xs}))"),
    Primitive("range", "constant", ("n",), _fun(REAL, ListT(REAL)),
              Spelling("range", "function", LEVEL_APP),
              "range n = [0, 1, ..., n - 1]; n must be a non-negative integer", _range,
              size=lambda n: n if type(n) is float and n > 0.0 else 0.0),
    # ---- lists (whole-number positions and counts are read from primals)
    Primitive("index", "structural", ("xs", "i"), _fun(ListT(_A), REAL, _A),
              Spelling("!!", "infix", LEVEL_INDEX, "left"),
              "xs !! i is the element at position i, counting from 0; i must be a whole "
              "number with 0 <= i < length xs (a runtime error otherwise)", _index),
    Primitive("head", "structural", ("xs",), _fun(ListT(_A), _A),
              Spelling("head", "function", LEVEL_APP),
              "the first element; a runtime error on an empty list", _head),
    Primitive("last", "structural", ("xs",), _fun(ListT(_A), _A),
              Spelling("last", "function", LEVEL_APP),
              "the last element; a runtime error on an empty list", _last),
    Primitive("append", "structural", ("xs", "ys"), _fun(ListT(_A), ListT(_A), ListT(_A)),
              Spelling("++", "infix", LEVEL_ADD, "left"),
              "xs ++ ys: the elements of xs, then those of ys", _append),
    Primitive("concat", "structural", ("xss",), _fun(ListT(ListT(_A)), ListT(_A)),
              Spelling("concat", "function", LEVEL_APP),
              "the lists of xss one after the other", _concat),
    Primitive("filter", "structural", ("keep", "xs"), _fun(FunT(_A, BOOL), ListT(_A), ListT(_A)),
              Spelling("filter", "function", LEVEL_APP),
              "the elements x of xs for which keep x is true, in order", _filter),
    Primitive("scan", "structural", ("f", "z", "xs"),
              _fun(_fun(_B, _A, _B), _B, ListT(_A), ListT(_B)),
              Spelling("scan", "function", LEVEL_APP),
              "left scan, every intermediate fold: scan f z [x1, x2] = "
              "[z, f z x1, f (f z x1) x2]; its last element is fold f z xs", _scan),
    # ---- differentiation (evaluated by the pipeline through an interpreter hook)
    Primitive("grad", "ad", ("f", "x"), _fun(FunT(_A, REAL), _A, _A),
              Spelling("grad", "function", LEVEL_APP),
              "gradient of f : a -> R at x, by backpropagation", None),
    Primitive("jvp", "ad", ("f", "x", "v"), _fun(FunT(_A, _B), _A, _A, PairT(_B, _B)),
              Spelling("jvp", "function", LEVEL_APP),
              "forward mode: (f x, derivative of f at x in direction v)", None),
    Primitive("vjp", "ad", ("f", "x"), _fun(FunT(_A, _B), _A, PairT(_B, FunT(_B, _A))),
              Spelling("vjp", "function", LEVEL_APP),
              "reverse mode: (f x, the pull-back of f at x)", None),
    Primitive("jacfwd", "ad", ("f", "x"), _fun(FunT(_A, ListT(REAL)), _A, ListT(_A)),
              Spelling("jacfwd", "function", LEVEL_APP),
              "Jacobian of f at x by forward mode, one run per real of x (per element of an "
              "array): element i is the gradient of output i, in the shape of x", None),
    Primitive("jacrev", "ad", ("f", "x"), _fun(FunT(_A, ListT(REAL)), _A, ListT(_A)),
              Spelling("jacrev", "function", LEVEL_APP),
              "Jacobian of f at x by reverse mode, one backward pass per output: element i "
              "is the gradient of output i, in the shape of x", None),
]


# ---------------------------------------------------------------- arrays (LANGUAGE.md §9)
# The array entries (array_primitives.py): the array primitives proper, and an elementwise
# entry for each real primitive with a NumPy ufunc and each comparison, which an application
# of it to an array is (the type checker chooses it by ``on_arrays``).
_ARRAY_ENTRIES = ARRAY_ENTRIES + elementwise_entries(_ENTRIES)
_ENTRIES = [attrs.evolve(p, on_arrays=ELEMENTWISE + p.name) if has_elementwise_entry(p)
            else attrs.evolve(p, on_arrays="array.index") if p.name == "index" else p
            for p in _ENTRIES]




class _Table(Mapping[str, Primitive]):
    """The built-ins by name.  A primitive a program declares is not stored here: its name
    (a :class:`DeclaredName`, which every ``Prim`` and ``Builtin`` of it holds) carries its
    own entry, which this table returns for it.  So the entries of every program are looked
    up through this one table, with no table per program to pass around and none changed
    at run time."""

    def __init__(self, entries: list[Primitive]):
        self._entries = {p.name: p for p in entries}

    def __getitem__(self, name: str) -> Primitive:
        if name.__class__ is str:  # a built-in's name (most lookups, and the quickest test)
            return self._entries[name]
        declared = getattr(name, "primitive", None)
        if declared is not None:
            return declared
        return self._entries[name]

    def get(self, name: str, default: Any = None) -> Any:
        """``self[name]``, or ``default`` for no primitive (Mapping's own ``get`` goes
        through a raised KeyError; the transformations look up every primitive they meet)."""
        if name.__class__ is str:
            return self._entries.get(name, default)
        declared = getattr(name, "primitive", None)
        if declared is not None:
            return declared
        return self._entries.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


PRIMITIVES: Mapping[str, Primitive] = _Table(_ENTRIES + _ARRAY_ENTRIES)

# Primitives written as operators, by (symbol, fixity): the grammar's operators map here.
OPERATORS: dict[tuple[str, str], Primitive] = {
    (p.spelling.symbol, p.spelling.fixity): p
    for p in _ENTRIES + [PRIMITIVES["matmul"]]
    if p.spelling.fixity in ("infix", "prefix")
}

# Primitives written as names (``sin``, ``map``): a free occurrence of the name means them.
NAMED: dict[str, Primitive] = {
    p.spelling.symbol: p for p in _ENTRIES + _ARRAY_ENTRIES
    if p.spelling.fixity == "function" and not p.name.startswith(ELEMENTWISE)
}

# The entries other modules build terms with, by their role: no module but this one names
# a primitive by a literal.
ADD = PRIMITIVES["add"]
SUB = PRIMITIVES["sub"]
MUL = PRIMITIVES["mul"]
DIV = PRIMITIVES["div"]
POW = PRIMITIVES["pow"]
NEG = PRIMITIVES["neg"]
FST = PRIMITIVES["fst"]
SND = PRIMITIVES["snd"]
MAP = PRIMITIVES["map"]
FOLD = PRIMITIVES["fold"]
ZIP = PRIMITIVES["zip"]
LENGTH = PRIMITIVES["length"]
RANGE = PRIMITIVES["range"]
SPREAD = PRIMITIVES["spread"]
SUM_TO = PRIMITIVES["sum_to"]
FROM_LIST = PRIMITIVES["array"]
FROM_ROWS = PRIMITIVES["matrix"]

# Names of the target language's linear constructs; like NAMED, a local binding shadows them.
LINEAR_NAMES = ("zero", "seed", "cotangent")

# ---------------------------------------------------------------- declared primitives


class DeclaredName(str):
    """The name of a primitive declared by a program, carrying its table entry.

    It lives in the program's namespace, apart from the built-ins' internal names: it
    equals another declared name of the same spelling (so printed programs parse back to
    equal terms) but never a plain ``str``, so no declaration (``primitive mul x y = ...``)
    can be mistaken for a built-in entry (``mul``, the primitive of ``*``) by a lookup, a
    law of the simplifier or a comparison of terms.  :data:`PRIMITIVES` reads the entry
    from it."""

    primitive: Primitive

    def __eq__(self, other: object) -> bool:
        return other.__class__ is DeclaredName and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


@attrs.frozen
class Declaration:
    """A program's ``primitive f x y = body  partial x = dx  partial y = dy``: the
    parameter names, the body and one partial derivative per parameter, as terms over the
    parameters (the partials also over ``result``, the primitive's value, when they name
    it).  Bodies and partials are expressions over reals: numbers, the parameters, ``let``,
    ``if``, and real, comparison and boolean primitives (built-in or declared earlier)."""

    params: tuple[str, ...]
    body: Term
    partials: tuple[Term, ...]
    result: str | None

    def __call__(self, *args: float) -> float:
        """The body's value at ``args``; raises DomainError as a built-in primitive does."""
        return evaluate_real(self.body, dict(zip(self.params, args)))


RESULT = "result"
"""The name a declared primitive's partials give to its value (as ``r`` in ``∂ exp x = r``)."""


def declare(name: str, declaration: Declaration, doc: str) -> Primitive:
    """The table entry of a primitive a program declares: a real function of its
    parameters, evaluated by its body and differentiated by its partials, written as a
    function (``f x y``)."""
    declared = DeclaredName(name)
    entry = Primitive(
        name=declared,
        kind="real",
        params=declaration.params,
        type=_fun(*([REAL] * (len(declaration.params) + 1))),
        spelling=Spelling(declared, "function", LEVEL_APP, "left"),
        doc=doc,
        evaluate=declaration,
        result=declaration.result,
        declaration=declaration,
    )
    declared.primitive = entry
    return entry


def evaluate_real(term: Term, env: dict[str, Any]) -> Any:
    """The value of a term made of numbers, booleans, variables of ``env``, ``let``,
    ``if``, annotations and primitive applications; raises DomainError from a primitive,
    or naming the first operation whose result is not finite (an overflow: lambdad computes
    with finite reals only, inside a declared primitive's body as everywhere else)."""

    def go(t: Term, env: dict[str, Any]) -> Step[Any]:
        if isinstance(t, (Const, BoolLit)):
            return t.value
        if isinstance(t, Var):
            return env[t.name]
        if isinstance(t, Annot):
            return (yield go(t.expr, env))
        if isinstance(t, Let):
            value = yield go(t.value, env)
            return (yield go(t.body, {**env, t.name: value}))
        if isinstance(t, If):
            condition = yield go(t.cond, env)
            return (yield go(t.then if condition else t.orelse, env))
        if isinstance(t, Prim):
            args = []
            for arg in t.args:
                args.append((yield go(arg, env)))
            value = PRIMITIVES[t.op].evaluate(*args)
            if value.__class__ is float and value - value:
                raise DomainError(_not_finite(t, args, value))
            return value
        raise AssertionError(f"not an expression over reals: {type(t).__name__}")

    return run(go(term, env))


def _not_finite(term: Prim, args: list, value: float) -> str:
    """The message of the operation ``term`` of a declared primitive's body whose result
    ``value`` on ``args`` is not finite."""
    spelling = PRIMITIVES[term.op].spelling
    shown = [_num(a) if a.__class__ is float else str(a).lower() for a in args]
    if spelling.fixity == "infix" and len(shown) == 2:
        operation = f"{shown[0]} {spelling.symbol} {shown[1]}"
    elif spelling.fixity == "prefix" and len(shown) == 1:
        operation = f"{spelling.symbol}{shown[0]}"
    else:
        operation = " ".join([spelling.symbol, *shown])
    where = f" (at {term.span})" if term.span is not None else ""
    return (f"`{operation}` is {_num(value) if value == value else 'nan'} in a declared "
            f"primitive's body{where}: {'an overflow' if value == value else 'undefined'} "
            "(lambdad computes with finite reals only)")


def declared_by(name: str, value: Term) -> Primitive | None:
    """The primitive that the declaration ``def name = value`` declares, if it is one:
    ``\\x y -> f x y`` with ``f`` the primitive ``name`` declared (the parser's form of
    ``primitive f x y = ...``); None otherwise."""
    params = []
    while isinstance(value, Lam):
        params.append(value.param)
        value = value.body
    if not isinstance(value, Prim) or value.op.__class__ is not DeclaredName \
            or str(value.op) != name:
        return None
    entry = PRIMITIVES.get(value.op)
    if entry is None or entry.declaration is None or entry.params != tuple(params) or any(
            not (isinstance(arg, Var) and arg.name == param)
            for arg, param in zip(value.args, params)):
        return None
    return entry


def declared_primitives(term: Term) -> list[Primitive]:
    """The declared primitives ``term`` applies or names, with those their own bodies and
    partials use, each once: what a printed program must declare."""
    found: dict[int, Primitive] = {}
    work = [term]
    while work:
        t = work.pop()
        for node in walk(t):
            op = node.op if isinstance(node, Prim) else node.name if isinstance(
                node, Builtin) else None
            entry = PRIMITIVES.get(op) if op is not None else None
            if entry is not None and entry.declaration is not None and id(entry) not in found:
                found[id(entry)] = entry
                work.append(entry.declaration.body)
                work.extend(entry.declaration.partials)
    return list(found.values())


def declaring(entry: Primitive, span: Any = None) -> Term:
    """``\\x y -> f x y`` for the declared primitive ``f``: the value of the declaration that
    ``primitive f x y = ...`` stands for (see :func:`declared_by`)."""
    value: Term = Prim(entry.name, tuple(Var(param, span=span) for param in entry.params),
                       span=span)
    for param in reversed(entry.params):
        value = Lam(param, value, span=span)
    return value
