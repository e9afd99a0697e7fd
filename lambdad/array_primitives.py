"""The primitive table's entries on arrays (LANGUAGE.md section 9, AD.md section 10).

:mod:`lambdad.primitives` puts them in its one table: the array primitives proper
(:data:`ARRAY_ENTRIES`) and, made from its real and comparison entries, their elementwise
entries (:func:`elementwise_entries`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from . import arraylib
from .primitive_entry import (LEVEL_APP, LEVEL_INDEX, LEVEL_MUL, NEW_ARRAY, ArrayRule, Laws,
                              Primitive, Spelling)
from .primitive_entry import function_type as _fun
from .syntax import MAT, REAL, VEC, ArrayT, BoolT, ListT, RealT, Type

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


# The real primitives whose elementwise entries propagate non-finite elements (see
# Primitive.propagates), by the arguments that do: x / inf is 0, so a divisor does not; log,
# sqrt and the like fail (a domain error) on the non-finite elements they do not keep.
_PROPAGATING = {"add": (0, 1), "sub": (0, 1), "mul": (0, 1), "div": (0,), "neg": (0,),
                "log": (0,), "sqrt": (0,), "abs": (0,), "sin": (0,), "cos": (0,), "tan": (0,),
                "sinh": (0,), "cosh": (0,), "asinh": (0,), "log1p": (0,), "floor": (0,),
                "ceil": (0,)}


def _elementwise(real: Primitive) -> Primitive:
    ufunc, check = arraylib.UFUNCS[real.name]
    cotangent_evaluate = arraylib.elementwise(real.spelling.symbol, real.evaluate, ufunc, check,
                                              finite=False, arity=real.arity)
    accumulate = arraylib.in_place(ufunc, cotangent_evaluate)
    in_cotangents = arraylib.COTANGENT_RESULTS.get(real.name)
    if in_cotangents is not None:
        cotangent_evaluate = in_cotangents(cotangent_evaluate)
        accumulate = accumulate and in_cotangents(accumulate)
    return attrs.evolve(
        real, name=ELEMENTWISE + real.name, kind="elementwise",
        evaluate=arraylib.elementwise(real.spelling.symbol, real.evaluate, ufunc, check,
                                      arity=real.arity),
        untested_evaluate=arraylib.elementwise(real.spelling.symbol, real.evaluate, ufunc,
                                               check, arity=real.arity, tested=False),
        propagates=_PROPAGATING.get(real.name, ()),
        cotangent_evaluate=cotangent_evaluate,
        accumulate=accumulate, cotangent_memory=NEW_ARRAY,
        evaluate_into=arraylib.in_place(ufunc, arraylib.elementwise(
            real.spelling.symbol, real.evaluate, ufunc, check, arity=real.arity),
            real.spelling.symbol, check),
        untested_evaluate_into=arraylib.in_place(ufunc, arraylib.elementwise(
            real.spelling.symbol, real.evaluate, ufunc, check, arity=real.arity,
            tested=False), real.spelling.symbol, check, tested=False),
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
           kind: str = "array", cotangent_evaluate=None,
           memory: str | int | None = None,
           propagates: tuple[int, ...] = (), inline: str | None = None,
           shared: tuple[tuple[str, str], ...] = (), shape_only: tuple[int, ...] = ()
           ) -> Primitive:
    rule = None if kind != "array" else ArrayRule(
        modes or ("split",) * len(params), tangent or "0", cotangent or "zero", shared)
    return Primitive(name, kind, params, type_,
                     Spelling(symbol or name, fixity, level, "left"), doc,
                     _densely(evaluate, len(params)),
                     result=result, result_type=result_type, rule=rule,
                     cotangent_evaluate=cotangent_evaluate and _densely(
                         cotangent_evaluate, len(params)), cotangent_memory=memory,
                     propagates=propagates, inline=inline, shape_only=shape_only)


SHAPE_STAND_IN = arraylib.shape_stand_in
"""What generated code calls on an operand a backpropagator captures for arguments that
read only its shape (``Primitive.shape_only``): a stand-in keeping the shape alone."""


def _densely(function, arity: int):
    """``function`` taking sparse cotangents as dense arrays: itself when it makes them
    dense (:data:`arraylib.DENSE_INSIDE`), else wrapped (:func:`arraylib.densely`)."""
    return function if function in arraylib.DENSE_INSIDE else arraylib.densely(function, arity)


def _constant(name: str, params: tuple[str, ...], type_: Type, doc: str, evaluate,
              inline: str | None = None, shape_only: tuple[int, ...] = ()) -> Primitive:
    """A locally constant entry (a size, an array made from a size): no derivative rule,
    its image a constant of the derivative.  ``inline``: as the table's ``inline``, for
    one that cannot fail (read from the shape, which sparse cotangents have too)."""
    return _array(name, params, type_, doc, evaluate, kind="constant", inline=inline,
                  shape_only=shape_only)


ARRAY_ENTRIES: list[Primitive] = [
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
    _constant("zeros", ("n",), _fun(REAL, VEC), "zeros n: the Vec of n zeros", arraylib.zeros),
    _constant("ones", ("n",), _fun(REAL, VEC), "ones n: the Vec of n ones", arraylib.ones),
    _constant("arange", ("n",), _fun(REAL, VEC), "arange n: the Vec 0, 1, ..., n - 1",
              arraylib.arange),
    _constant("linspace", ("lo", "hi", "n"), _fun(REAL, REAL, REAL, VEC),
              "linspace lo hi n: n evenly spaced reals from lo to hi (a constant of lo and hi)",
              arraylib.linspace),
    _array("fill", ("n", "x"), _fun(REAL, REAL, VEC), "fill n x: the Vec of n copies of x",
           arraylib.fill, modes=("primal", "split"), tangent="fill n x'",
           cotangent="x_ (sum a)"),
    _array("reshape", ("v", "m", "n"), _fun(VEC, REAL, REAL, MAT),
           "reshape v m n: the m x n Mat of the elements of v, row by row", arraylib.reshape,
           modes=("split", "primal", "primal"), tangent="reshape v' m n",
           cotangent="v_ (flatten a)", memory=0),
    _array("flatten", ("m",), _fun(MAT, VEC), "the elements of a Mat, row by row",
           arraylib.flatten, tangent="flatten m'",
           cotangent="m_ (reshape a (nrows m) (ncols m))", memory=0),
    _array("outer", ("u", "v"), _fun(VEC, VEC, MAT), "outer u v: the Mat of u_i * v_j",
           arraylib.outer, tangent="outer u' v + outer u v'",
           cotangent="u_ (a @ v) <+> v_ (transpose a @ u)", memory=NEW_ARRAY),
    # ---- sizes (locally constant)
    _constant("size", ("v",), _fun(VEC, REAL), "the number of elements of a Vec", arraylib.size,
              inline="float({v}.shape[0])", shape_only=(0,)),
    _constant("nrows", ("m",), _fun(MAT, REAL), "the number of rows of a Mat", arraylib.nrows,
              inline="float({m}.shape[0])", shape_only=(0,)),
    _constant("ncols", ("m",), _fun(MAT, REAL), "the number of columns of a Mat",
              arraylib.ncols, inline="float({m}.shape[1])", shape_only=(0,)),
    # ---- reductions
    _array("sum", ("x",), _fun(VEC, REAL), "the sum of every element of a Vec or Mat",
           arraylib.total, result_type=_of_ranks(_ANY_ARRAY), propagates=(0,),
           tangent="sum x'",
           cotangent="x_ (spread x a)"),
    _array("mean", ("x",), _fun(VEC, REAL), "the mean of every element of a Vec or Mat",
           arraylib.mean, result_type=_of_ranks(_ANY_ARRAY), propagates=(0,),
           tangent="mean x'",
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
           result_type=_of_ranks(_ANY_ARRAY), result="r",
           # (softmax x is exp (x - r), one exponential from the result: x - r <= 0)
           tangent="sum (exp (x - r) * x')", cotangent="x_ (exp (x - r) * a)"),
    _array("softmax", ("x",), _fun(VEC, VEC),
           "exp (x - logsumexp x), per row of a Mat", arraylib.softmax,
           result_type=_of_ranks({(1,): VEC, (2,): MAT}), result="r",
           tangent="r * (x' - softmax_inner x (r * x'))",
           cotangent="x_ (r * (a - softmax_inner x (r * a)))"),
    _array("sum_rows", ("m",), _fun(MAT, VEC), "the sum of each row of a Mat",
           arraylib.sum_rows, propagates=(0,), tangent="sum_rows m'",
           cotangent="m_ (per_row a m)"),
    _array("sum_cols", ("m",), _fun(MAT, VEC), "the sum of each column of a Mat",
           arraylib.sum_cols, propagates=(0,), tangent="sum_cols m'",
           cotangent="m_ (spread m a)"),
    _array("maximum_rows", ("m",), _fun(MAT, VEC),
           "the largest element of each row of a Mat (derivative as for maximum)",
           arraylib.maximum_rows, result="r", shared=(("s", "maximum_share m r"),),
           tangent="sum_rows (s * m')", cotangent="m_ (s * per_row a m)"),
    _array("logsumexp_rows", ("m",), _fun(MAT, VEC), "logsumexp of each row of a Mat",
           arraylib.logsumexp_rows, result="r",
           tangent="sum_rows (exp (m - per_row r m) * m')",
           cotangent="m_ (exp (m - per_row r m) * per_row a m)"),
    # ---- linear algebra
    _array("dot", ("x", "y"), _fun(VEC, VEC, REAL), "dot u v: the sum of u_i * v_i",
           arraylib.dot, propagates=(0, 1), tangent="dot x' y + dot x y'",
           cotangent="x_ (a * y) <+> y_ (a * x)"),
    _array("matmul", ("x", "y"), _fun(MAT, MAT, MAT),
           "a @ b: the matrix product (Mat @ Mat : Mat, Mat @ Vec : Vec, Vec @ Mat : Vec, "
           "Vec @ Vec : R)", arraylib.matmul, symbol="@", fixity="infix", level=LEVEL_MUL,
           result_type=lambda ts: _matmul_entry(ts),
           tangent="x' @ y + x @ y'",
           cotangent="x_ (a @ transpose y) <+> y_ (transpose x @ a)", memory=NEW_ARRAY),
    _array("matvec", ("x", "y"), _fun(MAT, VEC, VEC), "a @ v of a Mat and a Vec",
           arraylib.matmul, symbol="@", fixity="infix", level=LEVEL_MUL,
           tangent="x' @ y + x @ y'", cotangent="x_ (outer a y) <+> y_ (transpose x @ a)",
           memory=NEW_ARRAY),
    _array("vecmat", ("x", "y"), _fun(VEC, MAT, VEC), "v @ a of a Vec and a Mat",
           arraylib.matmul, symbol="@", fixity="infix", level=LEVEL_MUL,
           tangent="x' @ y + x @ y'", cotangent="x_ (y @ a) <+> y_ (outer x a)",
           memory=NEW_ARRAY),
    _array("transpose", ("m",), _fun(MAT, MAT), "the transpose of a Mat", arraylib.transpose,
           tangent="transpose m'", cotangent="m_ (transpose a)", memory=0),
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
    _array("gather", ("x", "idx"), _fun(VEC, VEC, VEC),
           "gather x idx: the Vec of the elements idx[k] of a Vec x (the Mat of the rows, "
           "of a Mat), idx a Vec of whole numbers counting from 0, which may repeat",
           arraylib.gather, result_type=_of_ranks({(1, 1): VEC, (2, 1): MAT}),
           modes=("split", "primal"), tangent="gather x' idx",
           cotangent="x_ (scatter x idx a)"),
    # ---- what the rules above are written with
    _array("spread", ("x", "c"), _fun(VEC, REAL, VEC),
           "spread x c: c broadcast to the shape of x", arraylib.spread,
           result_type=lambda ts: ts[0], modes=("primal", "split"), tangent="spread x c'",
           cotangent="c_ (sum_to c a)", memory=1, shape_only=(0,)),
    _array("sum_to", ("x", "c"), _fun(REAL, VEC, REAL),
           "sum_to x c: c summed down to the shape of x (the transpose of broadcasting)",
           arraylib.sum_to, result_type=lambda ts: ts[0], modes=("primal", "split"),
           tangent="sum_to x c'", cotangent="c_ (spread c a)", memory=1, shape_only=(0,)),
    _array("per_row", ("v", "m"), _fun(VEC, MAT, MAT),
           "per_row v m: element i of v spread over row i of m's shape", arraylib.per_row,
           modes=("split", "primal"), tangent="per_row v' m", cotangent="v_ (sum_rows a)",
           memory=NEW_ARRAY, shape_only=(1,)),
    _array("maximum_share", ("x", "r"), _fun(VEC, REAL, VEC),
           "maximum_share x r: 1 / (number of ties) where x equals its maximum r (per row), "
           "0 elsewhere", arraylib.maximum_share,
           cotangent_evaluate=arraylib.maximum_share_sparse,
           result_type=_of_ranks({(1, 0): VEC, (2, 1): MAT}), modes=("primal", "primal"),
           tangent="spread x 0"),
    _array("softmax_inner", ("x", "c"), _fun(VEC, VEC, VEC),
           "softmax_inner x c: the sum of c (of each row) spread over x's shape",
           lambda x, c: arraylib.spread(x, arraylib.sum_rows(c)[:, None])
           if x.ndim == 2 else arraylib.spread(x, arraylib.total(c)),
           result_type=_of_ranks({(1, 1): VEC, (2, 2): MAT}), modes=("primal", "split"),
           tangent="softmax_inner x c'", cotangent="c_ (softmax_inner x a)",
           shape_only=(0,)),
    _array("one_hot", ("x", "i", "c"), _fun(VEC, REAL, REAL, VEC),
           "one_hot x i c: the array of x's shape that is c at position i, else 0",
           arraylib.one_hot_array, cotangent_evaluate=arraylib.one_hot,
           result_type=_of_ranks({(1, 0, 0): VEC, (2, 0, 1): MAT}),
           modes=("primal", "primal", "split"), tangent="one_hot x i c'",
           cotangent="c_ (a !! i)", shape_only=(0,)),
    _array("unslice", ("x", "lo", "c"), _fun(VEC, REAL, VEC, VEC),
           "unslice x lo c: the array of x's shape that is c from position lo on, else 0",
           arraylib.unslice, result_type=_of_ranks({(1, 0, 1): VEC, (2, 0, 2): MAT}),
           modes=("primal", "primal", "split"), tangent="unslice x lo c'",
           cotangent="c_ (window a lo c)", memory=NEW_ARRAY, shape_only=(0,)),
    _array("scatter", ("x", "idx", "c"), _fun(VEC, VEC, VEC, VEC),
           "scatter x idx c: the array of x's shape whose element (row) p is the sum of the "
           "elements (rows) k of c with idx[k] = p, 0 where no index is p",
           arraylib.scatter, result_type=_of_ranks({(1, 1, 1): VEC, (2, 1, 2): MAT}),
           modes=("primal", "primal", "split"), tangent="scatter x idx c'",
           cotangent="c_ (gather a idx)", memory=NEW_ARRAY),
    _array("window", ("x", "lo", "c"), _fun(VEC, REAL, VEC, VEC),
           "window x lo c: the elements (rows) of x from lo on, as many as c has",
           lambda x, lo, c: arraylib.part(x, lo, c.shape[0]),
           result_type=_of_ranks({(1, 0, 1): VEC, (2, 0, 2): MAT}),
           modes=("split", "primal", "primal"), tangent="window x' lo c",
           cotangent="x_ (unslice x lo a)", shape_only=(2,)),
    _array("where", ("c", "x", "y"), _fun(VEC, VEC, VEC, VEC),
           "where c x y: x where c is not 0, y where it is (elementwise, broadcast): with a "
           "comparison of arrays, the select of piecewise functions, where (x > 0) x (0.1 * x)",
           arraylib.where, result_type=_broadcast, modes=("primal", "split", "split"),
           tangent="where c x' y'",
           cotangent="x_ (sum_to x (where c a 0)) <+> y_ (sum_to y (where c 0 a))"),
    _array("extent", ("x",), _fun(VEC, REAL),
           "the length of a Vec, the number of rows of a Mat", lambda x: float(x.shape[0]),
           result_type=_of_ranks(_ANY_ARRAY), modes=("primal",), shape_only=(0,)),
]

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


def has_elementwise_entry(entry: Primitive) -> bool:
    """Whether an application of the real or comparison ``entry`` to an array is an
    elementwise entry of its own (``ELEMENTWISE + entry.name``)."""
    return (entry.kind == "real" and entry.name in arraylib.UFUNCS) or entry.kind == "test"


def elementwise_entries(entries: Sequence[Primitive]) -> list[Primitive]:
    """The elementwise entries of the real and comparison primitives among ``entries``:
    each real primitive computed elementwise, and each comparison of arrays, elementwise,
    1 where the comparison holds and 0 elsewhere (a Vec or Mat, as NumPy's masks), locally
    constant."""
    comparisons = [
        _array(ELEMENTWISE + p.name, ("x", "y"), _fun(VEC, VEC, VEC),
               f"{p.doc}, elementwise on arrays: 1 where it holds, 0 elsewhere",
               arraylib.comparison(p.name), symbol=p.spelling.symbol, fixity="infix",
               level=p.spelling.level, result_type=_broadcast, modes=("primal", "primal"),
               result="r", tangent="spread r 0")
        for p in entries if p.kind == "test"]
    return comparisons + [_elementwise(p) for p in entries
                          if p.kind == "real" and p.name in arraylib.UFUNCS]
