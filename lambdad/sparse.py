"""Sparse cotangents of arrays: part of the array operations of :mod:`lambdad.arraylib`,
which re-exports these names (the one door to the array library).

The cotangent read from a single element (``v !! i`` in a loop) is kept as a
:class:`Sparse` sum of (position, value) entries, so that a backward phase reading n
elements of an array costs O(n), not O(n * size); it becomes dense once, when the
backpropagator of the array runs with the sum (AD.md section 10).  The functions here make
such a cotangent dense where an operation needs the array it stands for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ARRAY = np.ndarray
"""The class of array values (:data:`lambdad.arraylib.ARRAY`, which is this)."""


_FEW_ENTRIES = 8
"""Up to this many entries a sparse cotangent is added into an array entry by entry."""


class Sparse:
    """A cotangent array zero but at some positions: a sum of one-hot cotangents of an
    array of ``shape`` (a position is an element number of a Vec, a row number of a Mat).

    One is a single entry (``position``, ``value``) or the sum of two (``left``,
    ``right``): adding two makes such a node, in constant time and changing neither, so
    that n reads of elements send n entries at O(n) cost in all.  Adding a dense array,
    multiplying, or any array operation makes it dense first (:meth:`dense`: one scatter
    of every entry).  NumPy never sees one: ``__array_ufunc__ = None`` makes
    ``ndarray + sparse`` call :meth:`__radd__`."""

    __slots__ = ("shape", "position", "value", "left", "right")
    __array_ufunc__ = None

    def __init__(self, shape: tuple[int, ...], position: int = 0, value: Any = 0.0,
                 left: "Sparse | None" = None, right: "Sparse | None" = None):
        self.shape = shape
        self.position = position
        self.value = value
        self.left = left
        self.right = right

    def entries(self) -> tuple[list[int], list[Any]]:
        """Every (position, value) of the sum, as two lists (iteratively: sums nest as
        deep as the number of entries)."""
        positions: list[int] = []
        values: list[Any] = []
        stack = [self]
        while stack:
            node = stack.pop()
            if node.left is None:
                positions.append(node.position)
                values.append(node.value)
            else:
                stack.append(node.right)
                stack.append(node.left)
        return positions, values

    def dense(self) -> ARRAY:
        out = np.zeros(self.shape)
        self._scatter(out)
        return out

    def _scatter(self, out: ARRAY) -> None:
        positions, values = self.entries()
        if len(positions) <= _FEW_ENTRIES:
            # (what `np.add.at` does, entry by entry in the same order, bit for bit, without
            # its setup: a maximum's one tie, a few reads)
            for position, value in zip(positions, values):
                out[position] += value
            return
        np.add.at(out, np.asarray(positions, dtype=np.intp), np.asarray(values))

    def __add__(self, other: Any) -> Any:
        if type(other) is Sparse:
            return Sparse(self.shape, left=self, right=other)
        if type(other) is ARRAY:
            out = other.copy()
            self._scatter(out)
            return out
        if other == 0.0:
            return self
        return self.dense() + other

    __radd__ = __add__

    def __mul__(self, other: Any) -> Any:
        if type(other) is float:  # scaled by a real: sparse still, each entry scaled
            if self.left is None:  # (one entry: a maximum's one tie)
                return Sparse(self.shape, self.position, self.value * other)
            positions, values = self.entries()
            return Sparse.of(self.shape, positions, [v * other for v in values])
        return dense(self) * dense(other)

    @staticmethod
    def of(shape: tuple[int, ...], positions: Sequence[int], values: Sequence[Any]) -> "Sparse":
        """The sum of the entries (``positions[k]``, ``values[k]``), at least one."""
        found = Sparse(shape, positions[0], values[0])
        for k in range(1, len(positions)):
            found = Sparse(shape, left=found, right=Sparse(shape, positions[k], values[k]))
        return found

    __rmul__ = __mul__

    def __sub__(self, other: Any) -> Any:
        return self.dense() - dense(other)

    def __rsub__(self, other: Any) -> Any:
        return dense(other) - self.dense()

    def __truediv__(self, other: Any) -> Any:
        return self.dense() / dense(other)

    def __neg__(self) -> Any:
        return -self.dense()

    def __repr__(self) -> str:
        return f"Sparse({self.shape}, {len(self.entries()[0])} entries)"


def dense(x: Any) -> Any:
    """``x`` with a sparse cotangent made dense (anything else as it is)."""
    return x.dense() if type(x) is Sparse else x


def array_adjoint(x: ARRAY, adjoint: Any) -> ARRAY:
    """The adjoint of the input array ``x`` as a dense array of its shape (``adjoint`` may
    be sparse, or the real 0 of an input never reached)."""
    adjoint = dense(adjoint)
    if type(adjoint) is not ARRAY:
        filled = np.empty(x.shape)  # (np.full's array, less its Python wrapper)
        filled.fill(float(adjoint))
        return filled
    return adjoint


def densely(function: Callable[..., Any], arity: int | None = None) -> Callable[..., Any]:
    """``function`` taking sparse cotangents as dense arrays (the array operations other
    than addition are computed on dense arrays); of ``arity`` 1 or 2 (when given), without
    a loop over its arguments."""

    def evaluate(*args: Any) -> Any:
        for a in args:
            if type(a) is Sparse:
                return function(*map(dense, args))
        return function(*args)

    def one(x: Any) -> Any:
        return function(x.dense() if type(x) is Sparse else x)

    def two(x: Any, y: Any) -> Any:
        if type(x) is Sparse or type(y) is Sparse:
            return function(dense(x), dense(y))
        return function(x, y)

    chosen = one if arity == 1 else two if arity == 2 else evaluate
    chosen.__name__ = getattr(function, "__name__", "evaluate")
    return chosen
