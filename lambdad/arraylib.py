"""The array operations of the language, on NumPy (float64): the one door to the array library.

The primitive table (:mod:`lambdad.primitives`) evaluates every array primitive by a function
of this module, and nothing else in lambdad calls NumPy on a program's arrays (but
:mod:`lambdad.sparse`, its part): another array library (JAX under ``jit``, for GPUs) would
replace these two modules only.  Each function takes
and returns float64 arrays (``Vec``: rank 1, ``Mat``: rank 2) or Python floats, checks the
shapes it combines, and raises :class:`~lambdad.errors.DomainError` naming both shapes on a
mismatch and naming the operation on a result that is not finite, as the scalar primitives
do (the interpreter adds the location).

Cotangents read from single elements (``v !! i`` in a loop) are kept sparse, as
:class:`Sparse` lists of (position, value), so that a backward phase reading n elements of
an array costs O(n), not O(n * size); they become dense once, when the backpropagator of
the array runs with their sum (AD.md section 10).  They are defined in
:mod:`lambdad.sparse` and imported from here, the one door (``__all__`` lists its names).
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import DomainError
from .sparse import Sparse, array_adjoint, dense, densely

__all__ = ["ARRAY", "FLOAT", "DENSE_INSIDE", "SMALLEST_NORMAL", "COTANGENT_RESULTS", "UFUNCS",
           "Sparse", "array_adjoint", "dense", "densely", "zeros_of", "shape_text", "quiet",
           "quieted", "quiet_context", "all_finite", "finite_in_run", "as_array", "elementwise",
           "in_place", "subnormals_flushed", "needing", "from_list", "from_rows", "stack",
           "to_list", "rows", "shape_stand_in", "zeros", "ones", "fill", "linspace", "arange",
           "reshape", "flatten", "outer", "size", "nrows", "ncols", "total", "mean", "maximum",
           "logsumexp", "sum_rows", "sum_cols", "maximum_rows", "logsumexp_rows", "maximum_share",
           "maximum_share_sparse", "softmax", "per_row", "dot", "matmul", "transpose", "index",
           "one_hot", "one_hot_array", "slice_of", "unslice", "concatenate", "part", "sum_to",
           "spread", "comparison", "where", "index_list", "gather", "scatter"]

ARRAY = np.ndarray
"""The class of array values."""

FLOAT = np.dtype(np.float64)
"""The type of their elements."""


def zeros_of(shape: tuple[int, ...]) -> ARRAY:
    """The array of zeros of ``shape``."""
    return np.zeros(shape)


def _filled(shape: Any, value: float) -> ARRAY:
    """The array of ``shape`` (a size, or a tuple of them), every element the real ``value``:
    ``np.full``'s array, by two calls into NumPy (not its Python wrapper's four)."""
    out = _empty(shape)
    out.fill(value)
    return out


_empty = np.empty


def shape_stand_in(x: Any) -> Any:
    """What a backpropagator keeps of an operand whose shape alone it reads (the entries'
    ``shape_only``), and →D's zero tangent (:func:`spread`): for an array of
    :data:`_STAND_IN_LEAST` elements or more, a read-only array of its shape over one shared
    zero (zero strides: made at no cost, freeing the operand); anything else as it is."""
    if type(x) is ARRAY and x.size >= _STAND_IN_LEAST:
        return ARRAY(x.shape, FLOAT, _ONE_ZERO, 0, (0,) * x.ndim)
    return x


_STAND_IN_LEAST = 2048  # (16 kB: below, the stand-in's microsecond costs more than it frees)
_ONE_ZERO = bytes(FLOAT.itemsize)


def shape_text(x: Any) -> str:
    """``x``'s shape as the messages write it: ``R``, ``Vec[3]``, ``Mat[2x3]``."""
    if type(x) is ARRAY:
        if x.ndim == 1:
            return f"Vec[{x.shape[0]}]"
        return f"Mat[{x.shape[0]}x{x.shape[1]}]"
    return "R"


def quiet() -> Any:
    """The context in which array operations run: NumPy's floating-point warnings off, since
    a result that is not finite is an error raised with the operation's name (see _finite).
    The interpreter runs each program with array operations under it (:func:`quieted`), and
    enters it when a run under way compiles its first array code (and leaves it, whatever
    happens), so that an operation does not enter it each time."""
    return np.errstate(all="ignore")


def quieted(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run under :func:`quiet`: NumPy's state put back as it was when it
    returns or raises.  (An ``errstate`` applied to a function, made once: half the cost of
    entering and leaving one, which a small array program's call pays once; the
    ``errstate`` object is only read.)"""
    return np.errstate(all="ignore")(function)


def quiet_context() -> contextvars.Context | None:
    """A context of its own in which array operations run: NumPy's settings at their
    defaults but for its floating-point warnings, off (as under :func:`quiet`).  A run in
    it (``context.run(function, *args)``) leaves the caller's context as it was, and costs
    a sixth of entering and leaving :func:`quiet`: for the interpreter's runs of points
    with no function of the caller's in them (what else runs there sees none of the
    caller's context variables).  None when NumPy keeps its error state elsewhere than in
    a context variable (NumPy 1: process-wide), where entering one would change the
    caller's: then the caller runs under :func:`quiet`."""
    before = np.geterr()
    context = contextvars.Context()
    context.run(np.errstate(all="ignore").__enter__)  # (left inside: the context's own)
    if np.geterr() != before:  # (set for the whole thread: put back, not used)
        np.seterr(**before)
        return None
    return context if context.run(np.geterr) == _IGNORED else None


_IGNORED = {"divide": "ignore", "over": "ignore", "under": "ignore", "invalid": "ignore"}


_DOT_MOST = 10_000
"""Up to this many elements the quick finiteness test of an array sums the squares of its
elements by a dot product (BLAS, which runs that on one thread up to about there: twice as
quick as NumPy's sum for small arrays); above, it sums the elements."""


def _finite_quick(x: ARRAY) -> bool:
    """Whether a number that is finite when every element of the array ``x`` is, and NaN
    or infinite when one is not (or when it overflows: :func:`_finite` tells that apart),
    is finite: the sum of the squares of a small array (no cancellation: an infinite
    element gives inf, a NaN NaN), the sum of a large one.  In a run (under quiet()),
    where an overflow does not warn."""
    if x.size <= _DOT_MOST:
        flat = x if x.ndim == 1 else x.ravel()  # (a view: results are contiguous)
        return _isfinite_real(flat.dot(flat))
    total = float(_add_reduce(x, axis=None))
    return total - total == 0.0


def _finite(name: str, result: Any) -> Any:
    """``result``, unless some element is not finite: then a DomainError naming ``name``."""
    if type(result) is ARRAY:
        # One reduction says all is well, mostly: the sum of finite numbers is finite (but
        # for an overflow of the sum itself, which the exact test below tells apart).
        with quiet():
            total = float(np.add.reduce(result, axis=None))
        if total - total == 0.0:
            return result
        if not np.isfinite(result).all():
            raise DomainError(f"{name} gave a result that is not finite (an overflow or an "
                              "undefined value in some element)")
        return result
    if result - result != 0.0:
        raise DomainError(f"{name} gave a result that is not finite")
    return float(result)


def all_finite(x: Any) -> bool:
    """Whether every element of the array ``x`` is finite."""
    if type(x) is Sparse:
        x = x.dense()
    size = x.size
    if size <= _SMALL:  # (one test and no errstate, quicker for a small array; counting is
        return _count_nonzero(_isfinite(x)) == size  # quicker than `.all()`'s wrapper)
    with quiet():  # (finite when every element is, mostly; a float's `-` never warns)
        total = float(np.add.reduce(x, axis=None))
    return total - total == 0.0 or bool(np.isfinite(x).all())


_SMALL = 10_000
_isfinite = np.isfinite
_count_nonzero = np.count_nonzero
_isfinite_real = math.isfinite


def finite_in_run(x: ARRAY) -> bool:
    """Whether every element of the float64 array ``x`` is finite, told in a run (under
    :func:`quiet`, where the sum of squares that may overflow does not warn): what
    :func:`all_finite` tells, by one dot product for a small array (a third of the cost
    of its test and count, which do not warn anywhere), by the exact test when the sum
    is not finite (an overflow of finite elements)."""
    if x.size <= _DOT_MOST:  # (_finite_quick, inlined)
        flat = x if x.ndim == 1 else x.ravel()
        if _isfinite_real(flat.dot(flat)):
            return True
    elif _finite_quick(x):
        return True
    return bool(_isfinite(x).all())


def as_array(value: Any, rank: int, what: str = "an array") -> ARRAY:
    """``value`` (a NumPy array or nested lists/tuples of numbers) as a fresh float64 array
    of rank ``rank``; raises DomainError when it is not one (ragged rows, wrong rank, a
    value that is not a finite number)."""
    try:
        # (a float64 array is used as it is: programs never change an array)
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DomainError(f"{what} must be numbers in a rectangular shape") from None
    if array.ndim != rank:
        raise DomainError(f"{what} must have rank {rank} ({'Vec' if rank == 1 else 'Mat'}), "
                          f"not rank {array.ndim}")
    with quiet():
        total = float(np.add.reduce(array, axis=None))
    if total - total != 0.0 and not np.isfinite(array).all():
        raise DomainError(f"{what} has an element that is not a finite number")
    return array


# --------------------------------------------------------------------------- elementwise


_add_reduce = np.add.reduce  # (np.sum and np.max less their Python wrappers)
_max_reduce = np.maximum.reduce


def _broadcast_check(name: str, arrays: Sequence[Any]) -> None:
    """Raises DomainError unless the shapes of ``arrays`` broadcast (R with anything; a
    Vec of n against the rows of a Mat of m x n; equal shapes)."""
    shapes = [a.shape for a in arrays if type(a) is ARRAY]
    if len(shapes) < 2:
        return
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        shown = " and ".join(shape_text(a) for a in arrays if type(a) is ARRAY)
        raise DomainError(f"{name}: shapes {shown} do not match") from None


def elementwise(name: str, scalar: Callable[..., float], ufunc: Callable[..., Any],
                check: Callable[..., Any] | None = None, finite: bool = True,
                arity: int | None = None, tested: bool = True) -> Callable[..., Any]:
    """The array version of the real primitive ``name``: ``ufunc`` on arrays broadcast
    against each other and against reals, each element's domain checked by ``check`` (a
    function of the arguments returning a message, or None when every element is in
    the domain), the result checked finite (unless not ``finite``: no domain check
    either).  Applied to reals only (as the partial derivatives of an array operation may
    be) it is ``scalar``.  Of ``arity`` 1 or 2 (the primitive's, when given), arrays and
    reals (the common case) take a short path that gives what the general one gives.
    Not ``tested``: the domain is checked but not the result (where generated code tests
    it later: see Primitive.untested_evaluate), unless it is empty, which would drop an
    argument's elements: then the arguments are tested."""

    def evaluate(*args: Any) -> Any:
        arrays = False
        for a in args:  # (runs per operation: a loop, no generator)
            kind = type(a)
            if kind is ARRAY:
                arrays = True
            elif kind is Sparse:
                if ufunc is np.add:  # sparse cotangents add as they are (see Sparse)
                    return args[0] + args[1]
                if ufunc is np.multiply and len(args) == 2:  # and scale by a real
                    other = args[1] if a is args[0] else args[0]
                    if type(other) is float:
                        return a * other
                args = tuple(map(dense, args))
                arrays = True
                break
        if not arrays:
            return scalar(*args)
        # (in a run, under quiet(): no warning, nothing printed)
        if not finite:
            try:
                return ufunc(*args)
            except ValueError:
                _broadcast_check(name, args)  # (raises, naming the shapes)
                raise
        if check is not None:
            problem = check(*args)
            if problem is not None:
                raise DomainError(f"{name}: {problem}")
        try:
            result = ufunc(*args)
        except ValueError:
            _broadcast_check(name, args)  # (raises, naming the shapes)
            raise
        if not tested:
            return result if result.size else _untested_empty(name, result, args)
        return result if _finite_quick(result) else _finite(name, result)

    if not finite:
        if arity == 1:
            return _named(lambda x: ufunc(x) if type(x) is ARRAY else evaluate(x), name)
        if arity == 2:
            return _named(_unchecked_binary(name, scalar, ufunc, evaluate), name)
        return _named(evaluate, name)

    def unary(x: Any) -> Any:
        if type(x) is not ARRAY:
            return evaluate(x)
        if check is not None:
            problem = check(x)
            if problem is not None:
                raise DomainError(f"{name}: {problem}")
        result = ufunc(x)
        if not tested:
            return result
        return result if _finite_quick(result) else _finite(name, result)

    def binary(x: Any, y: Any) -> Any:
        kx, ky = type(x), type(y)
        if not ((kx is ARRAY and (ky is ARRAY or ky is float))
                or (kx is float and ky is ARRAY)):
            return evaluate(x, y)
        if check is not None:
            problem = check(x, y)
            if problem is not None:
                raise DomainError(f"{name}: {problem}")
        try:
            result = ufunc(x, y)
        except ValueError:
            _broadcast_check(name, (x, y))  # (raises, naming the shapes)
            raise
        if not tested:
            return result if result.size else _untested_empty(name, result, (x, y))
        return result if _finite_quick(result) else _finite(name, result)

    return _named(unary if arity == 1 else binary if arity == 2 else evaluate, name)


def _unchecked_binary(name: str, scalar: Callable[..., float], ufunc: Callable[..., Any],
                      evaluate: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """The binary ``evaluate`` of :func:`elementwise` without checks (not ``finite``): two
    reals, and arrays and reals, take a short path that gives what it gives."""

    def binary(x: Any, y: Any) -> Any:
        kx, ky = type(x), type(y)
        if kx is float and ky is float:
            return scalar(x, y)
        if (kx is ARRAY and (ky is ARRAY or ky is float)) or (kx is float and ky is ARRAY):
            try:
                return ufunc(x, y)
            except ValueError:
                _broadcast_check(name, (x, y))  # (raises, naming the shapes)
                raise
        return evaluate(x, y)

    return binary


def _untested_empty(name: str, result: ARRAY, args: Sequence[Any]) -> ARRAY:
    """The empty ``result`` of ``name`` on ``args`` (broadcast against an array of no
    elements), unless an array argument holds a non-finite element, which the result
    drops: then a DomainError, as if the result were not finite."""
    for a in args:
        if type(a) is ARRAY and a.size and not _finite_quick(a):
            _finite(name, a)
    return result


def _named(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    function.__name__ = f"{name}_elementwise"
    return function


def in_place(ufunc: Any, evaluate: Callable[..., Any], name: str | None = None,
             check: Callable[..., Any] | None = None, tested: bool = True) -> Callable | None:
    """The elementwise operation ``evaluate`` of a backpropagator's body, computed by the
    NumPy ufunc ``ufunc``, made to write into one of its operands (with ``name``, the
    operation ``name`` of a program's primal, whose domain is checked first by ``check``
    and result tested after, as :func:`elementwise` does): the function
    ``into, *args -> evaluate(*args)`` writes the result into ``args[k]`` for the first
    ``k`` of the tuple ``into`` where it can: an array its caller owns (made right there
    for this operation, which nothing else holds: the code generator names only those),
    that may be written (not a read-only broadcast) and has the result's shape, every
    other operand a real or an array of that shape or of its rows' (a Vec against a Mat),
    or, for the addition, a sparse cotangent of that shape (scattered into it).  Else it
    is ``evaluate``.  It never writes into another operand.  A sum of k cotangent arrays
    then makes one new array, not k - 1, and the product of a new cotangent array by a
    partial makes none.  Not ``tested``: the domain checked, not the result (as ``evaluate``
    then).  None when ``ufunc`` is not a NumPy ufunc (it cannot write into an operand)."""
    if not isinstance(ufunc, np.ufunc):
        return None

    def compute(into: tuple[int, ...], *args: Any) -> Any:
        for k in into:
            out = args[k]
            if type(out) is not ARRAY or not out.flags.writeable:
                continue
            shape = out.shape
            for a in args:
                kind = type(a)
                if kind is ARRAY:
                    if a.shape != shape and (a.ndim >= out.ndim
                                             or a.shape != shape[out.ndim - a.ndim:]):
                        break
                elif kind is Sparse and ufunc is np.add and a.shape == shape \
                        and len(args) == 2:
                    a._scatter(out)
                    return out
                elif kind is not float:
                    break
            else:
                if name is None:
                    return ufunc(*args, out=out)  # (in a run, under quiet())
                if check is not None:
                    problem = check(*args)
                    if problem is not None:
                        raise DomainError(f"{name}: {problem}")
                result = ufunc(*args, out=out)  # (of out's shape: empty drops no element)
                return result if not tested or _finite_quick(result) else _finite(name, result)
        return evaluate(*args)

    compute.__name__ = f"{getattr(ufunc, '__name__', 'operation')}_in_place"
    return compute


SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)
"""2.2e-308: the smallest positive float64 of full precision; the positive ones below it
are subnormal."""

_min_reduce = np.minimum.reduce


def subnormals_flushed(evaluate: Callable[..., Any]) -> Callable[..., Any]:
    """``evaluate``, an operation of a backpropagator's body whose results are never
    negative (``exp``, as in the softmax weights ``exp (x - r)`` of logsumexp's
    derivative), with the subnormal elements of an array result (positive and below
    :data:`SMALLEST_NORMAL`) made 0, in its new array.  Arithmetic on subnormal numbers
    is slow on x86 (a matrix product of an array with 3% of them took six times as long,
    GMM at d = 64, k = 50): XLA flushes them to zero on CPUs for that reason.  A weight
    below 2.2e-308 changes no sum it enters with weights of normal size; only a gradient
    made of such weights alone reads 0 instead.  One reduction when there is none."""

    def compute(*args: Any) -> Any:
        result = evaluate(*args)
        if type(result) is ARRAY and result.size \
                and _min_reduce(result, axis=None) < SMALLEST_NORMAL:
            result[result < SMALLEST_NORMAL] = 0.0
        return result

    compute.__name__ = f"{getattr(evaluate, '__name__', 'operation')}_flushed"
    return compute


COTANGENT_RESULTS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "exp": subnormals_flushed,
}
"""How the elementwise operations named here compute in a backpropagator's body, made from
their plain evaluation (and its version writing into an operand)."""


def _first_bad(mask: ARRAY, x: ARRAY) -> str:
    index = np.unravel_index(np.argmax(mask), mask.shape)
    where = ", ".join(map(str, index))
    return f"element [{where}] is {float(np.asarray(x)[index])!r}"


def needing(condition: Callable[..., ARRAY], words: str) -> Callable[..., str | None]:
    """A ``check`` for :func:`elementwise`: ``words`` and the first element where
    ``condition`` (of the first argument, broadcast) fails."""

    def check(*args: Any) -> str | None:
        ok = condition(*args)  # (in a run, under quiet())
        if type(ok) is ARRAY:
            if ok.all():
                return None
            bad = ~ok
            x = np.broadcast_to(args[0], bad.shape)
            return f"{words}, but {_first_bad(bad, x)}"
        return None if ok else words

    return check


def _sigmoid(x: ARRAY) -> ARRAY:
    out = np.empty_like(x)
    positive = x >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-x[positive]))
    z = np.exp(x[~positive])
    out[~positive] = z / (1.0 + z)
    return out


def _power(x: Any, y: Any) -> Any:
    # NumPy's `**` is quick for a real exponent (2 is a square) but takes a slow loop for an
    # array of exponents, where float_power is four times quicker (measured: 13 ms against
    # 50 ms for a 128 x 1024 matrix of powers)
    if type(y) is ARRAY:
        return np.float_power(x, y)
    return np.power(x, y)


def _pow_check(x: Any, y: Any) -> str | None:
    if type(y) is float and y >= 0.0 and y.is_integer():
        return None  # a whole exponent >= 0: defined at every base
    if type(y) is ARRAY and y.size <= np.size(x) and ((y >= 0.0) & (y == np.floor(y))).all():
        # whole exponents >= 0, fewer than the bases (llsq's `outer t (ones n) ^ arange n`):
        # defined at every base, told by the exponents alone (first: the smaller test)
        return None
    if type(x) is ARRAY and (x > 0).all():
        return None
    x, y = np.broadcast_arrays(x, y)
    bad = ((x < 0) & (y != np.floor(y))) | ((x == 0) & (y < 0))
    if bad.any():
        return f"a negative base needs a whole exponent and 0 a non-negative one, but " \
               f"{_first_bad(bad, x)} with exponent {float(y[np.unravel_index(np.argmax(bad), bad.shape)])!r}"
    return None


UFUNCS: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {
    "add": (np.add, None),
    "sub": (np.subtract, None),
    "mul": (np.multiply, None),
    "div": (np.divide, needing(lambda x, y: np.asarray(y) != 0, "division needs a non-zero "
                                                                "divisor")),
    "pow": (_power, _pow_check),
    "neg": (np.negative, None),
    "sin": (np.sin, None),
    "cos": (np.cos, None),
    "tan": (np.tan, None),
    "exp": (np.exp, None),
    "log": (np.log, needing(lambda x: x > 0, "log needs positive numbers")),
    "sqrt": (np.sqrt, needing(lambda x: x >= 0, "sqrt needs non-negative numbers")),
    "tanh": (np.tanh, None),
    "sigmoid": (_sigmoid, None),
    "asin": (np.arcsin, needing(lambda x: np.abs(x) <= 1, "asin needs -1 <= x <= 1")),
    "acos": (np.arccos, needing(lambda x: np.abs(x) <= 1, "acos needs -1 <= x <= 1")),
    "atan": (np.arctan, None),
    "atan2": (np.arctan2, None),
    "sinh": (np.sinh, None),
    "cosh": (np.cosh, None),
    "asinh": (np.arcsinh, None),
    "acosh": (np.arccosh, needing(lambda x: x >= 1, "acosh needs x >= 1")),
    "atanh": (np.arctanh, needing(lambda x: np.abs(x) < 1, "atanh needs -1 < x < 1")),
    "log1p": (np.log1p, needing(lambda x: x > -1, "log1p needs x > -1")),
    "expm1": (np.expm1, None),
    "floor": (np.floor, None),
    "ceil": (np.ceil, None),
    "round": (np.round, None),
    "sign": (np.sign, None),
    "relu": (lambda x: np.maximum(x, 0.0), None),
    "heaviside": (lambda x: np.heaviside(x, 0.0), None),
    "abs": (np.abs, None),
    "max": (lambda x, y: np.where(x >= y, x, y), None),
    "min": (lambda x, y: np.where(x <= y, x, y), None),
    "clip": (lambda lo, hi, x: np.where(x < lo, lo, np.where(x > hi, hi, x)), None),
}
"""The NumPy function computing each real primitive elementwise, with its domain check."""

@functools.cache
def _erf_function() -> Callable[[Any], Any]:
    """erf on arrays: SciPy's ufunc where installed (imported at the first use, as
    importing SciPy costs more time and memory than lambdad's own import), else
    ``math.erf`` applied to each element."""
    try:
        from scipy.special import erf  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - depends on the machine
        return np.vectorize(math.erf, otypes=[np.float64])
    return erf


UFUNCS["erf"] = (lambda x: _erf_function()(x), None)  # erf is not a NumPy ufunc


# --------------------------------------------------------------------------- array operations


def _rank(x: Any, rank: int, name: str) -> None:
    if type(x) is not ARRAY or x.ndim != rank:
        raise DomainError(f"{name} needs a {'Vec' if rank == 1 else 'Mat'}, not {shape_text(x)}")


def _count(n: float, name: str) -> int:
    if not (n >= 0.0 and float(n).is_integer()):
        raise DomainError(f"{name} needs a whole number >= 0, got {n!r}")
    return int(n)


def _position(i: float, x: ARRAY) -> int:
    """``i`` as a position of the elements (rows) of ``x``; DomainError if it is none."""
    if 0.0 <= i < x.shape[0]:
        k = int(i)
        if k == i:
            return k
    if not float(i).is_integer():
        raise DomainError(f"index {i!r} is not a whole number")
    raise DomainError(f"index {int(i)} is out of range for {shape_text(x)}"
                      + ("" if i >= 0.0 else " (indices count from 0)"))


def from_list(xs: list) -> ARRAY:
    """``array xs``: the Vec of the reals of ``xs``."""
    return np.array(xs, dtype=np.float64) if xs else np.zeros(0)


def from_rows(xss: list) -> ARRAY:
    """``matrix xss``: the Mat whose rows are the lists of ``xss`` (all of one length)."""
    lengths = {len(xs) for xs in xss}
    if len(lengths) > 1:
        raise DomainError(f"matrix needs rows of one length, got lengths {sorted(lengths)}")
    if not xss:
        return np.zeros((0, 0))
    return np.array(xss, dtype=np.float64).reshape(len(xss), lengths.pop())


def stack(vs: list) -> ARRAY:
    """``stack vs``: the Mat whose rows are the Vecs of ``vs`` (all of one length)."""
    lengths = {v.shape[0] for v in vs}
    if len(lengths) > 1:
        raise DomainError(f"stack needs Vecs of one length, got lengths {sorted(lengths)}")
    if not vs:
        return np.zeros((0, 0))
    return np.stack(vs)


def to_list(v: ARRAY) -> list:
    """``tolist v``: the reals of ``v`` as a list."""
    return v.tolist()


def rows(m: ARRAY) -> list:
    """``rows m``: the rows of ``m`` as a list of Vecs."""
    return list(m)


def zeros(n: float) -> ARRAY:
    return np.zeros(_count(n, "zeros"))


def ones(n: float) -> ARRAY:
    return np.ones(_count(n, "ones"))


def fill(n: float, x: float) -> ARRAY:
    return _filled(_count(n, "fill"), x)


def linspace(a: float, b: float, n: float) -> ARRAY:
    return np.linspace(a, b, _count(n, "linspace"))


def arange(n: float) -> ARRAY:
    return np.arange(_count(n, "arange"), dtype=np.float64)


def reshape(v: ARRAY, m: float, n: float) -> ARRAY:
    rows_, cols = _count(m, "reshape"), _count(n, "reshape")
    if rows_ * cols != v.shape[0]:
        raise DomainError(f"reshape of {shape_text(v)} into {rows_}x{cols}: the sizes differ")
    return v.reshape(rows_, cols)


def flatten(m: ARRAY) -> ARRAY:
    return m.reshape(-1)


def outer(u: ARRAY, v: ARRAY) -> ARRAY:
    return np.outer(u, v)


def size(v: ARRAY) -> float:
    return float(v.shape[0])


def nrows(m: ARRAY) -> float:
    return float(m.shape[0])


def ncols(m: ARRAY) -> float:
    return float(m.shape[1])


def total(x: Any) -> float:
    """``sum x``: the sum of every element."""
    if type(x) is Sparse:
        x = x.dense()
    return float(_add_reduce(x, axis=None))


def mean(x: ARRAY) -> float:
    if type(x) is Sparse:
        x = x.dense()
    size = x.size
    if size == 0:
        raise DomainError("mean of an empty array")
    # (np.mean's own steps less its Python wrappers: the float64 sum divided by the count,
    # bit for bit)
    return float(_add_reduce(x, axis=None)) / size


def maximum(x: ARRAY) -> float:
    if type(x) is Sparse:
        x = x.dense()
    if x.size == 0:
        raise DomainError("maximum of an empty array")
    return float(_max_reduce(x, axis=None))


def logsumexp(x: ARRAY) -> float:
    """log (sum (exp x)), computed stably (shifted by the maximum)."""
    if type(x) is Sparse:
        x = x.dense()
    if x.size == 0:
        raise DomainError("logsumexp of an empty array")
    top = _max_reduce(x, axis=None)
    return float(top + np.log(_add_reduce(np.exp(x - top), axis=None)))


# NumPy reduces along an axis of a Mat a row (or column) at a time: for many short rows it
# is several times slower here than a product with a vector of ones (the BLAS's matrix times
# vector: the rows of 100 000 x 2 summed in 0.1 ms against 3.5 ms, of 10 000 x 10 in 0.03
# against 0.38 ms), and than a running maximum over the columns for the maximum of each of
# many rows of a few columns (0.07 against 0.83 ms for 10 000 x 10).  Below a few thousand
# elements NumPy's own reduction is quicker.  (Sums by the BLAS come in another order: their
# last bits may differ.  Maxima are the same.)
_REDUCED_BY_BLAS = 4096  # elements
_MAXIMA_BY_COLUMNS = 16  # columns


def sum_rows(m: ARRAY) -> ARRAY:
    if type(m) is Sparse:
        m = m.dense()
    if m.size < _REDUCED_BY_BLAS:
        return _add_reduce(m, axis=1)
    return m @ np.ones(m.shape[1])


def sum_cols(m: ARRAY) -> ARRAY:
    if type(m) is Sparse:
        m = m.dense()
    if m.size < _REDUCED_BY_BLAS:
        return _add_reduce(m, axis=0)
    return np.ones(m.shape[0]) @ m


def _row_maxima(m: ARRAY) -> ARRAY:
    """The maximum of each row of ``m`` (at least one column)."""
    if m.shape[1] > _MAXIMA_BY_COLUMNS or m.size < _REDUCED_BY_BLAS:
        return _max_reduce(m, axis=1)
    top = m[:, 0].copy()
    for j in range(1, m.shape[1]):
        np.maximum(top, m[:, j], out=top)
    return top


def maximum_rows(m: ARRAY) -> ARRAY:
    if type(m) is Sparse:
        m = m.dense()
    if m.shape[1] == 0:
        raise DomainError("maximum_rows of a Mat with no columns")
    return _row_maxima(m)


def logsumexp_rows(m: ARRAY) -> ARRAY:
    if type(m) is Sparse:
        m = m.dense()
    if m.shape[1] == 0:
        raise DomainError("logsumexp_rows of a Mat with no columns")
    top = _row_maxima(m)
    return top + np.log(sum_rows(np.exp(m - top[:, None])))


def maximum_share(x: ARRAY, top: Any) -> ARRAY:
    """The subgradient of the maximum: 1 / (number of ties) at the elements equal to the
    maximum ``top`` (per row, for a Vec ``top`` of a Mat), 0 elsewhere."""
    if type(top) is ARRAY and x.ndim == 2:
        at = x == top[:, None]
        share = at.astype(np.float64)
        if _count_nonzero(at) != x.shape[0] or not _finite_quick(top):
            # some row has ties: each row's shares divided by its count (with finite maxima,
            # every row has an element at its maximum, so as many as rows means none has
            # ties: each share is 1 already, as the division would leave it)
            share /= sum_rows(share)[:, None]
        return share
    at = x == top
    return at / float(np.count_nonzero(at))


def maximum_share_sparse(x: ARRAY, top: Any) -> Any:
    """:func:`maximum_share` in a backpropagator's body: for the maximum of a Vec, the
    sparse cotangent of its ties (so that ``maximum_share x r * a`` costs one comparison
    of x, not four passes over it); else the dense array."""
    if x.ndim == 1 and type(top) is not ARRAY:
        ties = (x == top).nonzero()[0].tolist()  # (np.flatnonzero less its wrapper)
        if ties:
            share = 1.0 / len(ties)
            return Sparse.of(x.shape, ties, [share] * len(ties))
    return maximum_share(x, top)


def softmax(x: ARRAY) -> ARRAY:
    """exp (x - logsumexp x): the derivative of logsumexp (per row of a Mat)."""
    if x.ndim == 2:
        e = np.exp(x - _row_maxima(x)[:, None])
        return e / sum_rows(e)[:, None]
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def per_row(v: ARRAY, m: ARRAY) -> ARRAY:
    """``v`` (one number per row of ``m``) spread over the columns of ``m``: a read-only
    view of ``v``, what ``np.broadcast_to(v[:, None], m.shape)`` makes, made directly (a
    third of its cost, in a small array program's backward phase) when ``v`` is one
    contiguous block of that many elements."""
    v = dense(v)
    shape = m.shape
    if v.ndim == 1 and v.flags.c_contiguous and 0 < v.shape[0] == shape[0]:
        view = ARRAY(shape, FLOAT, v, 0, (v.strides[0], 0))
        view.flags.writeable = False
        return view
    return np.broadcast_to(v[:, None], shape)


def dot(u: ARRAY, v: ARRAY) -> float:
    if u.shape != v.shape:
        raise DomainError(f"dot: shapes {shape_text(u)} and {shape_text(v)} do not match")
    return float(np.dot(u, v))


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for the ranks 2 @ 2, 2 @ 1 and 1 @ 2."""
    if type(a) is Sparse:
        a = a.dense()
    if type(b) is Sparse:
        b = b.dense()
    inner_a = a.shape[-1]
    inner_b = b.shape[0]
    if inner_a != inner_b:
        raise DomainError(f"@: shapes {shape_text(a)} and {shape_text(b)} do not match "
                          f"({inner_a} columns against {inner_b} rows)")
    return a @ b


def transpose(m: Any) -> ARRAY:
    return dense(m).T  # (a view: no array is ever changed in place)


def index(x: ARRAY, i: float) -> Any:
    """``x !! i``: element ``i`` of a Vec (a real), row ``i`` of a Mat (a Vec)."""
    k = _position(i, x)
    return float(x[k]) if x.ndim == 1 else x[k].copy()


def one_hot(x: ARRAY, i: float, a: Any) -> Sparse:
    """The cotangent of ``x`` that is ``a`` at position ``i`` (an element of a Vec, a row
    of a Mat) and zero elsewhere: sparse (what ``one_hot`` computes in a backpropagator's
    body, where a read in a loop must not cost the whole array)."""
    return Sparse(x.shape, int(i), dense(a))


def one_hot_array(x: ARRAY, i: float, a: Any) -> ARRAY:
    """``one_hot x i a`` as the value of a program: the dense array."""
    return one_hot(x, i, a).dense()


def slice_of(v: ARRAY, lo: float, hi: float) -> ARRAY:
    """``slice v lo hi``: elements lo .. hi - 1 (rows, for a Mat)."""
    n = v.shape[0]
    start, stop = _count(lo, "slice"), _count(hi, "slice")
    if not start <= stop <= n:
        raise DomainError(f"slice {start} {stop} of {shape_text(v)}: needs "
                          f"0 <= lo <= hi <= {n}")
    return v[start:stop].copy()


def unslice(v: ARRAY, lo: float, a: Any) -> ARRAY:
    """The cotangent of ``v`` from the cotangent ``a`` of ``slice v lo hi``."""
    out = np.zeros(v.shape)
    a = dense(a)
    out[int(lo):int(lo) + a.shape[0]] = a
    return out


def concatenate(u: ARRAY, v: ARRAY) -> ARRAY:
    try:  # (NumPy checks the ranks and the rows' lengths)
        return _concatenate((u, v))
    except ValueError:
        raise DomainError(f"concatenate: shapes {shape_text(u)} and {shape_text(v)} do not "
                          "match") from None


_concatenate = np.concatenate


def part(a: Any, lo: float, n: float) -> ARRAY:
    """The elements (rows) ``lo`` .. ``lo + n - 1`` of the cotangent ``a``."""
    return dense(a)[int(lo):int(lo) + int(n)]


def sum_to(x: Any, c: Any) -> Any:
    """The cotangent ``c`` of a broadcast of ``x`` summed back to the shape of ``x``."""
    c = dense(c)
    if type(x) is Sparse:  # (a cotangent of an inner level: only its shape is read)
        x = x.dense()
    if type(c) is not ARRAY:
        return c if type(x) is not ARRAY else _filled(x.shape, c)
    if type(x) is not ARRAY:
        return float(_add_reduce(c, axis=None))
    if c.shape == x.shape:
        return c
    if x.ndim == 1 and c.ndim == 2:
        return sum_cols(c)
    return np.broadcast_to(c, x.shape).copy()


def spread(x: Any, c: Any) -> Any:
    """``c`` broadcast to the shape of ``x`` (the transpose of :func:`sum_to`)."""
    c = dense(c)
    if type(x) is Sparse:
        x = x.dense()
    if type(x) is not ARRAY:
        return c
    if type(c) is not ARRAY:  # (a real; →D's zero of a large array: zeros at no cost)
        return shape_stand_in(x) if c == 0.0 and math.copysign(1.0, c) > 0 \
            and x.size >= _STAND_IN_LEAST else _filled(x.shape, c)
    return np.broadcast_to(c, x.shape).copy() if c.shape != x.shape else c


DENSE_INSIDE = frozenset({total, mean, maximum, logsumexp, sum_rows, sum_cols, maximum_rows,
                          logsumexp_rows, matmul, transpose, sum_to, spread})
"""The operations that make a sparse argument dense themselves: the table takes them as
they are, not wrapped by :func:`densely` (a frame fewer for each in a run)."""


_COMPARISONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                "eq": np.equal, "ne": np.not_equal}


def comparison(name: str) -> Callable[[Any, Any], Any]:
    """The comparison ``name`` of arrays, elementwise: 1.0 where it holds, else 0.0."""
    test = _COMPARISONS[name]

    def compare(x: Any, y: Any) -> Any:
        try:
            return test(x, y).astype(np.float64)
        except ValueError:
            _broadcast_check(name, (x, y))
            raise

    return compare


def where(c: Any, x: Any, y: Any) -> Any:
    """``x`` where ``c`` is not 0, ``y`` where it is (broadcast)."""
    try:
        result = np.where(np.asarray(c) != 0.0, x, y)
    except ValueError:
        _broadcast_check("where", (c, x, y))
        raise
    return result if result.ndim else float(result)


def index_list(values: list, a: Any, i: float) -> Any:
    """Element ``i`` of the cotangent ``a`` (for the backpropagator of ``array xs``)."""
    return float(dense(a)[int(i)])


# --------------------------------------------------------------------------- gathering


def _positions(name: str, idx: ARRAY, x: ARRAY) -> ARRAY:
    """The whole numbers of the Vec ``idx`` as positions (NumPy's integers) into the first
    axis of ``x``; raises DomainError naming the first element of ``idx`` that is not a
    whole number or is out of range."""
    length = x.shape[0]
    with quiet():  # (an infinite index is reported below, as not whole)
        positions = idx.astype(np.intp)
    whole = positions == idx
    if not whole.all():
        raise DomainError(f"{name}: the indices must be whole numbers, but "
                          f"{_first_bad(~whole, idx)}")
    if positions.size and (positions.min() < 0 or positions.max() >= length):
        outside = (positions < 0) | (positions >= length)
        raise DomainError(f"{name}: an index is out of range for {shape_text(x)} (indices "
                          f"count from 0), {_first_bad(outside, idx)}")
    return positions


def gather(x: ARRAY, idx: ARRAY) -> ARRAY:
    """``gather x idx``: the Vec of the elements ``x[idx[k]]`` (of a Mat: the Mat of its
    rows ``idx[k]``); an index may repeat.  NumPy's ``x[idx]``, JAX's ``jnp.take``."""
    _rank(idx, 1, "gather's indices")
    return np.take(x, _positions("gather", idx, x), axis=0)


def scatter(x: ARRAY, idx: ARRAY, c: Any) -> ARRAY:
    """``scatter x idx c``: the array of ``x``'s shape holding, at each position, the sum
    of the elements (rows) of ``c`` whose index in ``idx`` is that position, 0 elsewhere —
    the transpose of :func:`gather` (a repeated index sums its cotangents)."""
    _rank(idx, 1, "scatter's indices")
    c = dense(c)
    if type(c) is not ARRAY:  # (a real cotangent: the same at every position read)
        c = _filled((idx.shape[0],) + x.shape[1:], float(c))
    if c.shape != (idx.shape[0],) + x.shape[1:]:
        raise DomainError(f"scatter: {shape_text(c)} does not fit {idx.shape[0]} indices "
                          f"into {shape_text(x)}")
    positions = _positions("scatter", idx, x)
    if x.ndim == 1:
        return np.bincount(positions, weights=c, minlength=x.shape[0])
    out = np.zeros(x.shape)
    np.add.at(out, positions, c)
    return out
