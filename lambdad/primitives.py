"""THE primitive table: every built-in of the language, with everything any stage needs.

Each entry holds the primitive's name and spelling, its type, how to evaluate it (with its
domain check), and, for real functions, its partial derivatives written as terms of the
language (AD.md section 7).  The parser (names, arities, operator spellings), the type
checker (types), the interpreter (evaluation), both transformations (derivative rules), the
printer (spellings and precedence) and the gradient checker (domains, kinks) all read this
table; no other module branches on a primitive's name.  Adding a primitive is one entry.

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

from . import arraylib
from .errors import DomainError  # raised here; part of this module's interface
from .iterate import Step, run
from .syntax import (
    BOOL,
    MAT,
    REAL,
    VEC,
    Annot,
    ArrayT,
    BoolLit,
    BoolT,
    Builtin,
    Const,
    FunT,
    If,
    Lam,
    Let,
    ListT,
    PairT,
    Prim,
    RealT,
    Term,
    Type,
    Var,
    VarT,
    walk,
)


@attrs.frozen
class Spelling:
    """How a primitive is written.

    ``fixity`` is ``"infix"`` (``x + y``), ``"prefix"`` (``-x``) or ``"function"`` (``sin x``).
    ``level`` is the binding power of the operator (higher binds tighter), ``assoc`` its
    associativity (``"left"``, ``"right"`` or ``"none"``).
    """

    symbol: str
    fixity: str = "function"
    level: int = 0
    assoc: str = "none"


# Binding powers of LANGUAGE.md section 4, loosest first; the printer and grammar agree.
LEVEL_OR = 1
LEVEL_AND = 2
LEVEL_COMPARE = 3
LEVEL_ADD = 4
LEVEL_MUL = 5
LEVEL_NEG = 6
LEVEL_POW = 7
LEVEL_INDEX = 8
LEVEL_APP = 9


@attrs.frozen
class Laws:
    """The exact algebraic laws of a real operation, which the simplifier applies (each
    holds for every real, so simplifying never changes a value; a side dropped by
    ``absorbing`` is dropped only when it cannot fail).  ``None``: no such law."""

    left_unit: float | None = None       # u . y = y
    right_unit: float | None = None      # x . u = x
    absorbing: float | None = None       # z . y = z = x . z
    negating: float | None = None        # n . y = -y, x . n = -x
    left_negating: float | None = None   # n . y = -y (on the left only)
    of_negation: str | None = None       # x . (-y) = x <of_negation> y
    involution: bool = False             # f (f x) = x (a unary operation)


@attrs.frozen
class ArrayRule:
    """The derivative of an array primitive as terms of the language (AD.md section 10),
    JAX-style as a linear map and its transpose.

    Each parameter is ``"split"`` (a differentiable argument: ``x`` its primal, ``x'`` its
    tangent in →D, ``x_`` its backpropagator in ←D) or ``"primal"`` (an index, a size:
    only its primal is used).  ``tangent`` is the tangent of the result in terms of the
    primals, their tangents and ``result``; ``cotangent`` the body of the result's
    backpropagator ``\a -o ...``: what each ``x_`` is sent, in terms of the primals,
    ``result`` and the cotangent ``a``."""

    modes: tuple[str, ...]
    tangent: str
    cotangent: str


@attrs.frozen
class Primitive:
    """One row of the table; see the module docstring for ``kind``."""

    name: str
    kind: str
    params: tuple[str, ...]
    type: Type
    spelling: Spelling
    doc: str
    evaluate: Callable[..., Any] | None
    # A Python expression over the parameter names that computes the primal without a call,
    # used by code generation for speed; ``None`` means call ``evaluate``.  Only for
    # primitives that cannot fail.
    inline: str | None = None
    # An inline expression (as ``inline``) for the applications whose literal operands make
    # every failure but an overflow impossible, with that condition: it is given each
    # operand's literal value, None for an operand that is not a literal (``x ^ 2``: a
    # whole exponent >= 0 is defined at every base).  An overflow raised there is reported
    # with the message of ``evaluate``.
    inline_at_literals: "tuple[Callable[..., bool], str] | None" = None
    partials: tuple[str, ...] = ()
    result: str | None = None
    # Where the primitive is defined, as a predicate on its real arguments (sampling).
    domain: Callable[..., bool] | None = None
    # Distance from the arguments to the nearest point where the primitive is not smooth
    # (gradient checks sample away from those).
    kink: Callable[..., float] | None = None
    # ``f x y == f y x``: pictures mark the argument order of the other binary operations.
    commutative: bool = False
    # Finite wherever its arguments are finite, and never failing (``sin``, ``max``; not
    # ``+``, which overflows): generated code need not check such a result of operands
    # already known finite.
    finite_at_finite: bool = False
    # For a primitive a program declares (``primitive f x = e partial x = ...``), its
    # definition: the body its evaluation runs and the partials as terms.  None for built-ins.
    declaration: "Declaration | None" = None
    # The algebra the simplifier may use on an application of it.
    laws: Laws | None = None
    # For a primitive making a list whose length its arguments give (``range n``): that
    # length, from the arguments, so that a run's step limit stops it before the list is
    # made (a list counts a step per element).
    size: Callable[..., float] | None = None
    # For a primitive that also applies to arrays (``x * y``, ``sin x``, ``xs !! i``): the
    # name of the entry an application with an argument of array type is (LANGUAGE.md
    # section 9); the type checker chooses it.
    on_arrays: str | None = None
    # For an entry of arrays: its result type from its arguments' types (a rank rule: NumPy
    # broadcasting, ``Mat @ Vec : Vec``), or a message saying why they do not fit.
    result_type: "Callable[[tuple[Type, ...]], Type | str] | None" = None
    # For kind ``array``: the derivative rules as terms (AD.md section 10).
    rule: "ArrayRule | None" = None
    # For an array entry: its evaluation inside a backpropagator's body, without the test
    # that every element is finite (the gradient is tested once, when it is read off).
    cotangent_evaluate: Callable[..., Any] | None = None
    # For the addition of arrays: ``cotangent_evaluate`` adding into its first argument when
    # that is an array nothing else holds (arraylib.accumulating; the code generator knows
    # when: the partial sum of a longer sum, just computed).
    accumulate: Callable[..., Any] | None = None

    @property
    def arity(self) -> int:
        return len(self.params)

    def applied(self, *args: Term, span: Any = None) -> Prim:
        """The term applying this primitive to ``args`` (its arity of them)."""
        assert len(args) == self.arity, f"{self.name} takes {self.arity} arguments"
        return Prim(self.name, args, span=span)

    def value_at(self, *values: Any) -> float | bool | None:
        """This primitive's value at literal arguments, when a literal can stand for its
        application: the value a run computes (the same evaluation), a finite real or a
        truth value.  None when the evaluation fails (left to fail where it runs) or is not
        finite.  The simplifier, fusion and code generation fold literals by it."""
        if self.kind not in REAL_EXPRESSION_KINDS or self.evaluate is None:
            return None
        try:
            result = self.evaluate(*values)
        except (DomainError, ArithmeticError, ValueError, TypeError):
            return None
        if type(result) is bool or (type(result) is float and math.isfinite(result)):
            return result
        return None


def _fun(*types: Type) -> Type:
    """The curried function type ``t1 -> t2 -> ... -> tn``."""
    result = types[-1]
    for t in reversed(types[:-1]):
        result = FunT(t, result)
    return result


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
# An application of a real primitive to an argument of array type is the primitive's
# elementwise entry (its name prefixed by ELEMENTWISE), chosen by the type checker; its
# partials are the real primitive's, taken elementwise (a conditional one is rewritten with
# `heaviside`, since a test looks at one real).  The other array primitives carry their
# derivative rules as terms (ArrayRule), typed once at their parameters' types.

ELEMENTWISE = "array."

_ELEMENTWISE_PARTIALS = {
    # (log x where x > 0, 0 elsewhere, computed without a log of a non-positive number)
    "pow": ("y * x ^ (y - 1)", "heaviside x * log (abs x + 1 - heaviside x) * r"),
    "relu": ("heaviside x",),
    "abs": ("sign x",),
    "max": ("1 - heaviside (y - x)", "heaviside (y - x)"),
    "min": ("1 - heaviside (x - y)", "heaviside (x - y)"),
    "clip": ("heaviside (lo - x)", "(1 - heaviside (lo - x)) * heaviside (x - hi)",
             "(1 - heaviside (lo - x)) * (1 - heaviside (x - hi))"),
}


def _type_words(t: Type) -> str:
    return {RealT: "R", BoolT: "Bool"}.get(type(t)) or (
        ("Vec" if t.rank == 1 else "Mat") if isinstance(t, ArrayT) else "a non-numeric type")


def _broadcast(types: tuple[Type, ...]) -> Type | str:
    """NumPy's broadcasting on ranks: R with anything, a Vec against a Mat's rows."""
    rank = 0
    for t in types:
        if isinstance(t, ArrayT):
            rank = max(rank, t.rank)
        elif not isinstance(t, RealT):
            return f"elementwise operations take R, Vec or Mat, not {_type_words(t)}"
    return REAL if rank == 0 else ArrayT(rank)


def _elementwise(real: Primitive) -> Primitive:
    ufunc, check = arraylib.UFUNCS[real.name]
    cotangent_evaluate = arraylib.elementwise(real.spelling.symbol, real.evaluate, ufunc, check,
                                              finite=False)
    return attrs.evolve(
        real, name=ELEMENTWISE + real.name, kind="elementwise",
        evaluate=arraylib.elementwise(real.spelling.symbol, real.evaluate, ufunc, check),
        cotangent_evaluate=cotangent_evaluate,
        accumulate=arraylib.accumulating(cotangent_evaluate) if real.name == "add" else None,
        inline=None, inline_at_literals=None, finite_at_finite=False,
        # (units only: `0 * v` is not the real 0, and a negation built would be the real one)
        laws=None if real.laws is None or (real.laws.left_unit is None
                                           and real.laws.right_unit is None)
        else Laws(left_unit=real.laws.left_unit, right_unit=real.laws.right_unit),
        partials=_ELEMENTWISE_PARTIALS.get(real.name, real.partials),
        result=real.result or ("r" if real.name == "pow" else None),
        result_type=_broadcast, doc=real.doc + " (elementwise on arrays)")


def _of_ranks(table: dict[tuple[int, ...], Type]) -> Callable[[tuple[Type, ...]], Type | str]:
    """A result type read from the ranks of the arguments (0 for R), by ``table``."""

    def result_type(types: tuple[Type, ...]) -> Type | str:
        ranks = tuple(t.rank if isinstance(t, ArrayT) else 0 if isinstance(t, RealT) else -1
                      for t in types)
        found = table.get(ranks)
        if found is None:
            return "it takes " + " or ".join(
                " and ".join(("R", "Vec", "Mat")[r] for r in key) for key in table)
        return found
    return result_type


_ANY_ARRAY = {(1,): REAL, (2,): REAL}


def _array(name: str, params: tuple[str, ...], type_: Type, doc: str, evaluate, *,
           modes: tuple[str, ...] | None = None, tangent: str | None = None,
           cotangent: str | None = None, result_type=None, symbol: str | None = None,
           fixity: str = "function", level: int = LEVEL_APP, result: str | None = None,
           kind: str = "array") -> Primitive:
    rule = None if kind != "array" else ArrayRule(
        modes or ("split",) * len(params), tangent or "0", cotangent or "zero")
    return Primitive(name, kind, params, type_,
                     Spelling(symbol or name, fixity, level, "left"), doc,
                     arraylib.densely(evaluate),
                     result=result, result_type=result_type, rule=rule)


_ARRAY_ENTRIES: list[Primitive] = [
    # ---- construction and conversion
    _array("array", ("xs",), _fun(ListT(REAL), VEC), "the Vec of the reals of a list",
           arraylib.from_list, modes=("whole",), tangent="array (map snd xs)",
           cotangent="fold (\\acc p -> acc <+> snd (snd p) (a !! fst p)) zero "
                     "(zip (range (length xs)) xs)"),
    _array("matrix", ("xss",), _fun(ListT(ListT(REAL)), MAT),
           "the Mat whose rows are the lists of xss (all of one length)", arraylib.from_rows,
           modes=("whole",), tangent="matrix (map (\\r -> map snd r) xss)",
           cotangent="fold (\\acc p -> acc <+> fold (\\acc2 q -> acc2 <+> snd (snd q) "
                     "(a !! fst p !! fst q)) zero (zip (range (length (snd p))) (snd p))) "
                     "zero (zip (range (length xss)) xss)"),
    _array("stack", ("vs",), _fun(ListT(VEC), MAT),
           "the Mat whose rows are the Vecs of vs (all of one length)", arraylib.stack,
           modes=("whole",), tangent="stack (map snd vs)",
           cotangent="fold (\\acc p -> acc <+> snd (snd p) (a !! fst p)) zero "
                     "(zip (range (length vs)) vs)"),
    _array("tolist", ("v",), _fun(VEC, ListT(REAL)), "the reals of a Vec, as a list",
           arraylib.to_list, modes=("image",),
           tangent="map (\\i -> (v !! i, v' !! i)) (range (size v))",
           cotangent="map (\\i -> (v !! i, \\a -o v_ (one_hot v i a))) (range (size v))"),
    _array("rows", ("m",), _fun(MAT, ListT(VEC)), "the rows of a Mat, as a list of Vecs",
           arraylib.rows, modes=("image",),
           tangent="map (\\i -> (m !! i, m' !! i)) (range (nrows m))",
           cotangent="map (\\i -> (m !! i, \\a -o m_ (one_hot m i a))) (range (nrows m))"),
    _array("zeros", ("n",), _fun(REAL, VEC), "zeros n: the Vec of n zeros", arraylib.zeros,
           kind="constant"),
    _array("ones", ("n",), _fun(REAL, VEC), "ones n: the Vec of n ones", arraylib.ones,
           kind="constant"),
    _array("arange", ("n",), _fun(REAL, VEC), "arange n: the Vec 0, 1, ..., n - 1",
           arraylib.arange, kind="constant"),
    _array("linspace", ("lo", "hi", "n"), _fun(REAL, REAL, REAL, VEC),
           "linspace lo hi n: n evenly spaced reals from lo to hi (a constant of lo and hi)",
           arraylib.linspace, kind="constant"),
    _array("fill", ("n", "x"), _fun(REAL, REAL, VEC), "fill n x: the Vec of n copies of x",
           arraylib.fill, modes=("primal", "split"), tangent="fill n x'",
           cotangent="x_ (sum a)"),
    _array("reshape", ("v", "m", "n"), _fun(VEC, REAL, REAL, MAT),
           "reshape v m n: the m x n Mat of the elements of v, row by row", arraylib.reshape,
           modes=("split", "primal", "primal"), tangent="reshape v' m n",
           cotangent="v_ (flatten a)"),
    _array("flatten", ("m",), _fun(MAT, VEC), "the elements of a Mat, row by row",
           arraylib.flatten, tangent="flatten m'",
           cotangent="m_ (reshape a (nrows m) (ncols m))"),
    _array("outer", ("u", "v"), _fun(VEC, VEC, MAT), "outer u v: the Mat of u_i * v_j",
           arraylib.outer, tangent="outer u' v + outer u v'",
           cotangent="u_ (a @ v) <+> v_ (transpose a @ u)"),
    # ---- sizes (locally constant)
    _array("size", ("v",), _fun(VEC, REAL), "the number of elements of a Vec", arraylib.size,
           kind="constant"),
    _array("nrows", ("m",), _fun(MAT, REAL), "the number of rows of a Mat", arraylib.nrows,
           kind="constant"),
    _array("ncols", ("m",), _fun(MAT, REAL), "the number of columns of a Mat",
           arraylib.ncols, kind="constant"),
    # ---- reductions
    _array("sum", ("x",), _fun(VEC, REAL), "the sum of every element of a Vec or Mat",
           arraylib.total, result_type=_of_ranks(_ANY_ARRAY), tangent="sum x'",
           cotangent="x_ (spread x a)"),
    _array("mean", ("x",), _fun(VEC, REAL), "the mean of every element of a Vec or Mat",
           arraylib.mean, result_type=_of_ranks(_ANY_ARRAY), tangent="mean x'",
           cotangent="x_ (spread x (a / count x))"),
    _array("count", ("x",), _fun(VEC, REAL), "the number of elements of a Vec or Mat",
           lambda x: float(x.size), result_type=_of_ranks(_ANY_ARRAY), modes=("primal",)),
    _array("maximum", ("x",), _fun(VEC, REAL),
           "the largest element of a Vec or Mat; its derivative is shared equally by the "
           "elements equal to it (a subgradient)", arraylib.maximum,
           result_type=_of_ranks(_ANY_ARRAY), result="r",
           tangent="sum (maximum_share x r * x')", cotangent="x_ (maximum_share x r * a)"),
    _array("logsumexp", ("x",), _fun(VEC, REAL),
           "log (sum (exp x)), computed stably (shifted by the maximum)", arraylib.logsumexp,
           result_type=_of_ranks(_ANY_ARRAY), tangent="sum (softmax x * x')",
           cotangent="x_ (softmax x * a)"),
    _array("softmax", ("x",), _fun(VEC, VEC),
           "exp (x - logsumexp x), per row of a Mat", arraylib.softmax,
           result_type=_of_ranks({(1,): VEC, (2,): MAT}), result="r",
           tangent="r * (x' - softmax_inner x (r * x'))",
           cotangent="x_ (r * (a - softmax_inner x (r * a)))"),
    _array("sum_rows", ("m",), _fun(MAT, VEC), "the sum of each row of a Mat",
           arraylib.sum_rows, tangent="sum_rows m'", cotangent="m_ (per_row a m)"),
    _array("sum_cols", ("m",), _fun(MAT, VEC), "the sum of each column of a Mat",
           arraylib.sum_cols, tangent="sum_cols m'", cotangent="m_ (spread m a)"),
    _array("maximum_rows", ("m",), _fun(MAT, VEC),
           "the largest element of each row of a Mat (derivative as for maximum)",
           arraylib.maximum_rows, result="r",
           tangent="sum_rows (maximum_share m r * m')",
           cotangent="m_ (maximum_share m r * per_row a m)"),
    _array("logsumexp_rows", ("m",), _fun(MAT, VEC), "logsumexp of each row of a Mat",
           arraylib.logsumexp_rows, tangent="sum_rows (softmax m * m')",
           cotangent="m_ (softmax m * per_row a m)"),
    # ---- linear algebra
    _array("dot", ("x", "y"), _fun(VEC, VEC, REAL), "dot u v: the sum of u_i * v_i",
           arraylib.dot, tangent="dot x' y + dot x y'", cotangent="x_ (a * y) <+> y_ (a * x)"),
    _array("matmul", ("x", "y"), _fun(MAT, MAT, MAT),
           "a @ b: the matrix product (Mat @ Mat : Mat, Mat @ Vec : Vec, Vec @ Mat : Vec, "
           "Vec @ Vec : R)", arraylib.matmul, symbol="@", fixity="infix", level=LEVEL_MUL,
           result_type=lambda ts: _matmul_entry(ts),
           tangent="x' @ y + x @ y'",
           cotangent="x_ (a @ transpose y) <+> y_ (transpose x @ a)"),
    _array("matvec", ("x", "y"), _fun(MAT, VEC, VEC), "a @ v of a Mat and a Vec",
           arraylib.matmul, symbol="@", fixity="infix", level=LEVEL_MUL,
           tangent="x' @ y + x @ y'", cotangent="x_ (outer a y) <+> y_ (transpose x @ a)"),
    _array("vecmat", ("x", "y"), _fun(VEC, MAT, VEC), "v @ a of a Vec and a Mat",
           arraylib.matmul, symbol="@", fixity="infix", level=LEVEL_MUL,
           tangent="x' @ y + x @ y'", cotangent="x_ (y @ a) <+> y_ (outer x a)"),
    _array("transpose", ("m",), _fun(MAT, MAT), "the transpose of a Mat", arraylib.transpose,
           tangent="transpose m'", cotangent="m_ (transpose a)"),
    # ---- access
    _array("array.index", ("x", "i"), _fun(VEC, REAL, REAL),
           "x !! i: element i of a Vec (a real), row i of a Mat (a Vec), counting from 0",
           arraylib.index, symbol="!!", fixity="infix", level=LEVEL_INDEX,
           result_type=_of_ranks({(1, 0): REAL, (2, 0): VEC}), modes=("split", "primal"),
           tangent="x' !! i", cotangent="x_ (one_hot x i a)"),
    _array("slice", ("x", "lo", "hi"), _fun(VEC, REAL, REAL, VEC),
           "slice v lo hi: elements lo .. hi - 1 of a Vec (rows, of a Mat)", arraylib.slice_of,
           result_type=_of_ranks({(1, 0, 0): VEC, (2, 0, 0): MAT}),
           modes=("split", "primal", "primal"), tangent="slice x' lo hi",
           cotangent="x_ (unslice x lo a)"),
    _array("concatenate", ("x", "y"), _fun(VEC, VEC, VEC),
           "concatenate u v: the elements (rows, of Mats) of u, then those of v",
           arraylib.concatenate, result_type=_of_ranks({(1, 1): VEC, (2, 2): MAT}),
           tangent="concatenate x' y'",
           cotangent="x_ (window a 0 x) <+> y_ (window a (extent x) y)"),
    # ---- what the rules above are written with
    _array("spread", ("x", "c"), _fun(VEC, REAL, VEC),
           "spread x c: c broadcast to the shape of x", arraylib.spread,
           result_type=lambda ts: ts[0], modes=("primal", "split"), tangent="spread x c'",
           cotangent="c_ (sum_to c a)"),
    _array("sum_to", ("x", "c"), _fun(REAL, VEC, REAL),
           "sum_to x c: c summed down to the shape of x (the transpose of broadcasting)",
           arraylib.sum_to, result_type=lambda ts: ts[0], modes=("primal", "split"),
           tangent="sum_to x c'", cotangent="c_ (spread c a)"),
    _array("per_row", ("v", "m"), _fun(VEC, MAT, MAT),
           "per_row v m: element i of v spread over row i of m's shape", arraylib.per_row,
           modes=("split", "primal"), tangent="per_row v' m", cotangent="v_ (sum_rows a)"),
    _array("maximum_share", ("x", "r"), _fun(VEC, REAL, VEC),
           "maximum_share x r: 1 / (number of ties) where x equals its maximum r (per row), "
           "0 elsewhere", arraylib.maximum_share,
           result_type=_of_ranks({(1, 0): VEC, (2, 1): MAT}), modes=("primal", "primal"),
           tangent="spread x 0"),
    _array("softmax_inner", ("x", "c"), _fun(VEC, VEC, VEC),
           "softmax_inner x c: the sum of c (of each row) spread over x's shape",
           lambda x, c: arraylib.spread(x, arraylib.sum_rows(c)[:, None])
           if x.ndim == 2 else arraylib.spread(x, arraylib.total(c)),
           result_type=_of_ranks({(1, 1): VEC, (2, 2): MAT}), modes=("primal", "split"),
           tangent="softmax_inner x c'", cotangent="c_ (softmax_inner x a)"),
    _array("one_hot", ("x", "i", "c"), _fun(VEC, REAL, REAL, VEC),
           "one_hot x i c: the array of x's shape that is c at position i, else 0",
           arraylib.one_hot, result_type=_of_ranks({(1, 0, 0): VEC, (2, 0, 1): MAT}),
           modes=("primal", "primal", "split"), tangent="one_hot x i c'",
           cotangent="c_ (a !! i)"),
    _array("unslice", ("x", "lo", "c"), _fun(VEC, REAL, VEC, VEC),
           "unslice x lo c: the array of x's shape that is c from position lo on, else 0",
           arraylib.unslice, result_type=_of_ranks({(1, 0, 1): VEC, (2, 0, 2): MAT}),
           modes=("primal", "primal", "split"), tangent="unslice x lo c'",
           cotangent="c_ (window a lo c)"),
    _array("window", ("x", "lo", "c"), _fun(VEC, REAL, VEC, VEC),
           "window x lo c: the elements (rows) of x from lo on, as many as c has",
           lambda x, lo, c: arraylib.part(x, lo, c.shape[0]),
           result_type=_of_ranks({(1, 0, 1): VEC, (2, 0, 2): MAT}),
           modes=("split", "primal", "primal"), tangent="window x' lo c",
           cotangent="x_ (unslice x lo a)"),
    _array("where", ("c", "x", "y"), _fun(VEC, VEC, VEC, VEC),
           "where c x y: x where c is not 0, y where it is (elementwise, broadcast): with a "
           "comparison of arrays, the select of piecewise functions, where (x > 0) x (0.1 * x)",
           arraylib.where, result_type=_broadcast, modes=("primal", "split", "split"),
           tangent="where c x' y'",
           cotangent="x_ (sum_to x (where c a 0)) <+> y_ (sum_to y (where c 0 a))"),
    _array("extent", ("x",), _fun(VEC, REAL),
           "the length of a Vec, the number of rows of a Mat", lambda x: float(x.shape[0]),
           result_type=_of_ranks(_ANY_ARRAY), modes=("primal",)),
]

# Comparisons of arrays, elementwise: 1 where the comparison holds, 0 elsewhere (a Vec or
# Mat, as NumPy's masks), locally constant.
_ARRAY_ENTRIES += [
    _array(ELEMENTWISE + p.name, ("x", "y"), _fun(VEC, VEC, VEC),
           f"{p.doc}, elementwise on arrays: 1 where it holds, 0 elsewhere",
           arraylib.comparison(p.name), symbol=p.spelling.symbol, fixity="infix",
           level=p.spelling.level, result_type=_broadcast, modes=("primal", "primal"),
           result="r", tangent="spread r 0")
    for p in _ENTRIES if p.kind == "test"]

# Each real primitive computed elementwise, and the list primitives' array entries.
_ARRAY_ENTRIES += [_elementwise(p) for p in _ENTRIES
                   if p.kind == "real" and p.name in arraylib.UFUNCS]
_ENTRIES = [attrs.evolve(p, on_arrays=ELEMENTWISE + p.name)
            if (p.kind == "real" and p.name in arraylib.UFUNCS) or p.kind == "test"
            else attrs.evolve(p, on_arrays="array.index") if p.name == "index" else p
            for p in _ENTRIES]
# Array primitives named as functions of lists that the prelude defines: applied to an
# array, the name means the array primitive (the type checker elaborates the application).
ARRAY_NAMESAKES = frozenset(("sum", "mean", "maximum", "logsumexp", "dot", "softmax"))

# `@` resolves to one of these by the ranks of its operands
_MATMUL_BY_RANKS = {(2, 2): ("matmul", MAT), (2, 1): ("matvec", VEC), (1, 2): ("vecmat", VEC),
                    (1, 1): ("dot", REAL)}


def _matmul_entry(types: tuple[Type, ...]) -> "tuple[Type, str] | str":
    """The result type of ``a @ b`` and the entry computing it, by the operands' ranks."""
    ranks = tuple(t.rank if isinstance(t, ArrayT) else 0 for t in types)
    found = _MATMUL_BY_RANKS.get(ranks)
    if found is None:
        return "it takes Mat @ Mat, Mat @ Vec, Vec @ Mat or Vec @ Vec"
    return found[1], found[0]


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

REAL_EXPRESSION_KINDS = ("real", "test", "logic")
"""The kinds of primitive a declared primitive's body and partials may apply."""


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
