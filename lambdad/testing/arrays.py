"""Random well-typed array programs (LANGUAGE.md section 9), a hypothesis strategy.

A program is one definition ``def f (w1 : Vec) ... : R`` of one to three ``Vec``
parameters, sometimes an ``R`` and a ``Mat`` parameter too, all arrays of one length
:data:`ARRAY_LENGTH` (a ``Mat`` is square), so every operation's shapes fit.  Its body is
built by type (``Vec`` or ``R``) from the array operations: elementwise arithmetic with
scalar broadcasting, the bounded smooth real functions elementwise, ``exp`` of a bounded
argument, ``log``, ``sqrt`` and ``/`` kept inside their domains (``log (1 + e * e)``,
``e / (2 + cos e')``), reductions (``sum``, ``mean``, ``logsumexp``), ``dot`` and ``@`` of
every rank, ``transpose``, ``flatten``, reductions per row (and, with ``matrices``, Mats
made by ``outer``, ``stack``, ``reshape``, ``gather`` of rows, elementwise operations and
``@``), elements read by ``!!`` (in a ``fold`` too: sparse cotangents), ``slice``,
``concatenate`` and ``gather`` (indices repeating: their cotangents add up), the round trip
through lists (``array (map ... (tolist e))``) and ``let`` with sharing.  Well-typed by
construction: each production makes the type it is asked for from sub-terms of the types it
needs.  Smooth everywhere (no kinks), inputs in ``[-1, 1]``: the properties' finite differences can judge them.

The result is a :class:`~lambdad.testing.generate.GeneratedProgram`, so every property of
:mod:`.properties` applies to it; :func:`array_cases` draws a program and a point (NumPy
arrays).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..parser import parse_module
from ..syntax import MAT, REAL, VEC
from .generate import GeneratedProgram

ARRAY_LENGTH = 3
"""The length of every array input (a Mat is ARRAY_LENGTH x ARRAY_LENGTH)."""

_SMOOTH = ("sin", "cos", "tanh", "sigmoid", "atan")
"""Bounded real functions, smooth everywhere: applied elementwise to any argument."""


_ELEMENTWISE = ("binary", "scale", "smooth")
"""The productions of :meth:`_Writer.elementwise`, for terms of each type."""


class _Writer:
    """Source text of terms of type ``Vec`` or ``R`` over the variables in scope."""

    def __init__(self, draw: Any, vectors: list[str], reals: list[str], matrix: str | None,
                 matrices: bool = True):
        self.draw = draw
        self.matrices = matrices
        self.vectors = vectors
        self.reals = reals
        self.matrix = matrix
        self.lets = 0

    def pick(self, items: list[Any]) -> Any:
        return items[self.draw(st.integers(0, len(items) - 1))]

    def vec(self, depth: int) -> str:
        """A term of type Vec (of length ARRAY_LENGTH)."""
        options = ["var"] * 2
        if depth > 0:
            options += ["binary", "binary", "scale", "shift", "smooth", "exponential",
                        "logarithm", "root", "divide", "square", "slice", "gather", "lists"]
            if self.matrix is not None or self.matrices:
                options += ["matvec", "vecmat", "transposed", "per_row", "flattened"]
            if self.matrices:
                options.append("row")
        kind = self.pick(options)
        d = depth - 1
        if kind == "var":
            return self.pick(self.vectors)
        if kind in _ELEMENTWISE:
            return self.elementwise(kind, self.vec, d)
        if kind == "shift":
            return f"({self.vec(d)} + {self.real(d)})"
        if kind == "exponential":
            return f"exp (tanh ({self.vec(d)}))"
        if kind == "logarithm":
            a = self.vec(d)
            return f"log (1 + {a} * {a})"
        if kind == "root":
            return f"sqrt (1 + {self.vec(d)} ^ 2)"
        if kind == "divide":
            return f"({self.vec(d)} / (2 + cos ({self.vec(d)})))"
        if kind == "square":
            return f"({self.vec(d)} ^ 2)"
        if kind == "slice":
            lo = self.pick(list(range(ARRAY_LENGTH + 1)))
            return f"slice (concatenate ({self.vec(d)}) ({self.vec(d)})) {lo} {lo + ARRAY_LENGTH}"
        if kind == "gather":  # (indices may repeat: their cotangents add up)
            return f"gather (concatenate ({self.vec(d)}) ({self.vec(d)})) {self.indices(2)}"
        if kind == "lists":
            return f"array (map (\\t -> t * sin t) (tolist ({self.vec(d)})))"
        if kind == "matvec":
            return f"tanh ({self.mat(d)} @ {self.vec(d)})"
        if kind == "vecmat":
            return f"tanh ({self.vec(d)} @ {self.mat(d)})"
        if kind == "per_row":
            reduction = self.pick(["sum_rows", "logsumexp_rows"]
                                  + (["sum_cols"] if self.matrices else []))
            return f"{reduction} ({self.mat(d)})"
        if kind == "flattened":
            lo = ARRAY_LENGTH * self.pick(list(range(ARRAY_LENGTH)))
            return f"slice (flatten ({self.mat(d)})) {lo} {lo + ARRAY_LENGTH}"
        if kind == "transposed":
            return f"tanh (transpose ({self.mat(d)}) @ {self.vec(d)})"
        # a row of a matrix
        return f"(({self.mat(d)}) !! {self.pick(list(range(ARRAY_LENGTH)))})"

    def mat(self, depth: int) -> str:
        """A term of type Mat (ARRAY_LENGTH x ARRAY_LENGTH): the Mat parameter, or (with
        ``matrices``) an operation making one."""
        if not self.matrices:
            return self.matrix
        options = ["var"] * 2 if self.matrix is not None else []
        options.append("outer")
        if depth > 0:
            options += ["binary", "broadcast", "scale", "smooth", "transpose", "stack",
                        "reshape", "product", "gather"]
        kind = self.pick(options)
        d = depth - 1
        if kind == "var":
            return self.matrix
        if kind == "outer":
            return f"outer ({self.vec(d)}) ({self.vec(d)})"
        if kind in _ELEMENTWISE:
            return self.elementwise(kind, self.mat, d)
        if kind == "broadcast":  # a Vec against each row
            if self.draw(st.booleans()):
                return f"({self.mat(d)} + {self.vec(d)})"
            return f"({self.vec(d)} * {self.mat(d)})"
        if kind == "transpose":
            return f"transpose ({self.mat(d)})"
        if kind == "gather":  # rows, in another order, some repeated
            return f"gather ({self.mat(d)}) {self.indices(1)}"
        if kind == "stack":
            return "stack [" + ", ".join(self.vec(d) for _ in range(ARRAY_LENGTH)) + "]"
        if kind == "reshape":
            return (f"reshape (concatenate ({self.vec(d)}) (concatenate ({self.vec(d)}) "
                    f"({self.vec(d)}))) {ARRAY_LENGTH} {ARRAY_LENGTH}")
        return f"tanh ({self.mat(d)} @ {self.mat(d)})"

    def real(self, depth: int) -> str:
        """A term of type R."""
        options = ["leaf"]
        if depth > 0:
            options += ["sum", "mean", "dot", "matmul", "logsumexp", "element", "fold",
                        "arithmetic", "smooth"]
        kind = self.pick(options)
        d = depth - 1
        if kind == "leaf":
            if self.reals and self.draw(st.booleans()):
                return self.pick(self.reals)
            return self.pick(["0.5", "2", "-1.5"])
        if kind in ("sum", "mean", "logsumexp"):
            return f"{kind} ({self.vec(d)})"
        if kind == "dot":
            return f"dot ({self.vec(d)}) ({self.vec(d)})"
        if kind == "matmul":
            return f"({self.vec(d)} @ {self.vec(d)})"
        if kind == "element":
            return f"(({self.vec(d)}) !! {self.pick(list(range(ARRAY_LENGTH)))})"
        if kind == "fold":
            v = self.pick(self.vectors)
            return f"fold (\\acc i -> acc + {v} !! i * {v} !! i) 0 (range (size {v}))"
        return self.elementwise("binary" if kind == "arithmetic" else kind, self.real, d)

    def indices(self, blocks: int) -> str:
        """A literal Vec of ARRAY_LENGTH indices into an array of ``blocks`` times
        ARRAY_LENGTH elements (or rows), as ``gather`` takes them."""
        chosen = [self.pick(list(range(blocks * ARRAY_LENGTH))) for _ in range(ARRAY_LENGTH)]
        return "(array [" + ", ".join(map(str, chosen)) + "])"

    def elementwise(self, kind: str, term: Any, d: int) -> str:
        """A ``binary`` operation, a ``scale`` by a real or a ``smooth`` function, of terms
        of one type made by ``term`` (``self.vec``, ``self.mat``, ``self.real``) at depth
        ``d``."""
        if kind == "binary":
            return f"({term(d)} {self.pick(['+', '-', '*'])} {term(d)})"
        if kind == "scale":
            return f"({self.real(d)} * {term(d)})"
        return f"{self.pick(list(_SMOOTH))} ({term(d)})"

    def body(self, depth: int) -> str:
        """The definition's body (of type R): a few ``let``s of Vecs, then a real."""
        lets = []
        for _ in range(self.draw(st.integers(0, 2))):
            self.lets += 1
            name = f"y{self.lets}"
            lets.append(f"let {name} = {self.vec(depth - 1)} in\n  ")
            self.vectors.append(name)
        options = ["sum", "mean", "dot", "logsumexp", "mixed"]
        kind = self.pick(options)
        if kind == "mixed":
            result = f"{self.real(depth)} + sum ({self.vec(depth - 1)})"
        elif kind == "dot":
            result = f"dot ({self.vec(depth - 1)}) ({self.vec(depth - 1)})"
        else:
            result = f"{kind} ({self.vec(depth - 1)})"
        return "".join(lets) + result


@st.composite
def array_programs(draw: Any, max_depth: int = 3, matrices: bool = True) -> GeneratedProgram:
    """Strategy: a random array program (see the module docstring), as a
    :class:`~lambdad.testing.generate.GeneratedProgram` named ``f``.  With ``matrices``,
    terms of type Mat are built too (``outer``, elementwise operations and functions of
    Mats, a Vec broadcast against rows, ``transpose``, ``stack``, ``reshape``, ``@`` of two
    Mats, ``sum_cols``, rows read by ``m !! i``); without, the only Mat is the Mat
    parameter: the ←D of several of those operations does not type-check yet (its printed
    program would not load again), though it runs."""
    vectors = [f"w{i + 1}" for i in range(draw(st.integers(1, 3)))]
    params = [(name, VEC) for name in vectors]
    reals = ["r1"] if draw(st.booleans()) else []
    params += [(name, REAL) for name in reals]
    matrix = "m1" if draw(st.booleans()) else None
    if matrix is not None:
        params.append((matrix, MAT))
    writer = _Writer(draw, list(vectors), reals, matrix, matrices)
    body = writer.body(draw(st.integers(1, max_depth)))
    header = " ".join(f"({name} : {'Vec' if t == VEC else 'Mat' if t == MAT else 'R'})"
                      for name, t in params)
    text = f"def f {header} : R =\n  {body}\n"
    return GeneratedProgram(parse_module(text, "<generated>"), "f", tuple(params))


def array_points_for(generated: GeneratedProgram) -> st.SearchStrategy:
    """Strategy: a point for an array program: NumPy arrays (and reals) in ``[-1, 1]``, a
    tuple of them when it has several parameters."""
    unit = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)

    def of(t: Any) -> st.SearchStrategy:
        if t == REAL:
            return unit
        shape = (ARRAY_LENGTH,) * (1 if t == VEC else 2)
        size = ARRAY_LENGTH ** len(shape)
        return st.lists(unit, min_size=size, max_size=size).map(
            lambda xs: np.array(xs, dtype=np.float64).reshape(shape))

    parts = [of(t) for _, t in generated.params]
    return parts[0] if len(parts) == 1 else st.tuples(*parts)


def array_cases(max_depth: int = 3, matrices: bool = False) -> st.SearchStrategy:
    """Strategy: ``(program, point)`` pairs of array programs (``matrices`` as for
    :func:`array_programs`)."""
    return array_programs(max_depth=max_depth, matrices=matrices).flatmap(
        lambda g: st.tuples(st.just(g), array_points_for(g)))
