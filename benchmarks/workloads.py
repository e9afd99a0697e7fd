"""The benchmark workloads: each is a lambdad program and the same computation in Python.

A :class:`Workload` names a top-level function of a ``.lam`` program, the point to evaluate
it at (Python data, as ``Program.call`` takes it), and ``python(point, M)``: the same
computation written over a math namespace ``M`` (``math``, ``autograd.numpy``, ``torch``,
``jax.numpy`` or the tape of :mod:`peers`), operation for operation, so every peer runs
the same primitive operations in the same order.

Fixed programs are files beside this one (``wide.lam``, ``mlp.lam``); size-parameterised
ones (let chains, the MLP's data set) are generated text.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE.parent / "programs"

# The MLP's shape: inputs -> hidden tanh units -> one output.
MLP_INPUTS = 2
MLP_HIDDEN = 8

# The chain's starting point: from -0.5 the iterates climb slowly towards 0, so a chain of
# any depth stays finite (from a positive start x*x/2 makes it blow up).
CHAIN_START = -0.5
# The doubling chain multiplies by 2^depth; starting tiny keeps value and gradient finite up
# to depth 1000 (2^1000 * 1e-300 ~ 10).
DOUBLING_START = 1e-300


@dataclass
class Workload:
    """One function to benchmark: ``source`` (program text), ``name`` (its top-level
    function), ``point`` (Python data) and ``python`` (the computation over a namespace)."""

    label: str
    source: str
    name: str
    point: Any
    python: Callable[[Any, Any], Any]
    # Arguments for counting primitive evaluations: the point as curried runtime values.
    args: tuple = field(default=())
    file: str = "<benchmark>"

    def __post_init__(self) -> None:
        if not self.args:
            self.args = (to_runtime(self.point),)


def to_runtime(value: Any) -> Any:
    """Python data as a lambdad runtime value: floats, tuples as right-nested pairs, lists."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, tuple):
        if len(value) == 2:
            return (to_runtime(value[0]), to_runtime(value[1]))
        return (to_runtime(value[0]), to_runtime(value[1:]))
    if isinstance(value, list):
        return [to_runtime(v) for v in value]
    return value


# ---------------------------------------------------------------- 1, 2, 6: the wide function


def wide_python(xs: list, M: Any) -> Any:
    """sum_{i<n} sin(x_i x_{i+1}) + sum_i x_i^2, as ``wide.lam`` computes it."""
    acc = 0.0
    prev = 0.0
    for x in xs:
        acc = acc + M.sin(prev * x) + x ** 2
        prev = x
    return acc


def wide_point(n: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def wide(n: int) -> Workload:
    path = HERE / "wide.lam"
    return Workload(f"wide n={n}", path.read_text(encoding="utf-8"), "wide", wide_point(n),
                    wide_python, file=str(path))


# ---------------------------------------------------------------- 3: sharing chains


def chain_source(depth: int) -> str:
    """``x_{k+1} = x_k * x_k * 0.5 + sin x_k``, ``depth`` let-bound steps: every x_k is used
    three times."""
    lines = [f"-- The sharing chain, depth {depth}: each x_k is used three times.",
             "def chain (x0 : R) : R ="]
    lines += [f"  let x{k + 1} = x{k} * x{k} * 0.5 + sin x{k} in" for k in range(depth)]
    lines.append(f"  x{depth}")
    return "\n".join(lines) + "\n"


def chain_python(x: Any, M: Any, depth: int) -> Any:
    for _ in range(depth):
        x = x * x * 0.5 + M.sin(x)
    return x


def chain(depth: int) -> Workload:
    return Workload(f"chain d={depth}", chain_source(depth), "chain", CHAIN_START,
                    lambda x, M: chain_python(x, M, depth))


def fold_chain_source(depth: int) -> str:
    """The sharing chain's step ``x * x * 0.5 + sin x`` iterated by a ``fold`` of ``depth``
    steps: the same computation as :func:`chain_source`, as a loop instead of straight-line
    code."""
    return (f"-- The fold chain, depth {depth}: the sharing chain's step, iterated by fold.\n"
            "def fchain (x0 : R) : R =\n"
            f"  fold (\\x k -> x * x * 0.5 + sin x) x0 (range {depth})\n")


def fold_chain(depth: int) -> Workload:
    return Workload(f"fold chain d={depth}", fold_chain_source(depth), "fchain", CHAIN_START,
                    lambda x, M: chain_python(x, M, depth))


def doubling_source(depth: int) -> str:
    """``x_{k+1} = x_k + x_k``, ``depth`` let-bound steps: the naive strategy runs
    ``2^(depth+1) - 1`` bodies."""
    lines = [f"-- The doubling chain, depth {depth}.", "def doubling (x0 : R) : R ="]
    lines += [f"  let x{k + 1} = x{k} + x{k} in" for k in range(depth)]
    lines.append(f"  x{depth}")
    return "\n".join(lines) + "\n"


def doubling_python(x: Any, M: Any, depth: int) -> Any:
    for _ in range(depth):
        x = x + x
    return x


def doubling(depth: int) -> Workload:
    return Workload(f"doubling d={depth}", doubling_source(depth), "doubling",
                    DOUBLING_START, lambda x, M: doubling_python(x, M, depth))


# ---------------------------------------------------------------- 4: reference programs


def _baydin(p: Any, M: Any) -> Any:
    x1, x2 = p
    return M.log(x1) + x1 * x2 - M.sin(x2)


def _jones(p: Any, M: Any) -> Any:
    x1, x2 = p
    return M.exp(2 * x1) + x1 * x2 ** 2 + M.cos(x2)


def _bmp(p: Any, M: Any) -> Any:
    x1, x2 = p
    return M.sin((x1 - x2) ** 2)


def _quadratic(p: Any, M: Any) -> Any:
    a, b, c, x = p
    return a * x ** 2 + b * x + c


def identity() -> Workload:
    """A function of one real that computes nothing: what a call costs beyond arithmetic."""
    return Workload("identity", "def f (x : R) : R = x\n", "f", 2.0, lambda x, M: x,
                    args=(2.0,))


def reference_programs() -> list[Workload]:
    """The four reference functions of LANGUAGE.md section 8, from ``programs/``."""
    out = []
    for stem, point, python in (("baydin", (2.0, 5.0), _baydin), ("jones", (1.0, 2.0), _jones),
                                ("bmp", (3.0, 1.0), _bmp),
                                ("quadratic", (1.0, 2.0, 3.0, 4.0), _quadratic)):
        path = PROGRAMS / f"{stem}.lam"
        out.append(Workload(stem, path.read_text(encoding="utf-8"), "f", point, python,
                            args=tuple(point), file=str(path)))
    return out


# ---------------------------------------------------------------- 5: MLP


def _real(x: float) -> str:
    return repr(round(x, 6))


def mlp_data(points: int, seed: int = 1) -> list[tuple[list[float], float]]:
    """A regression data set: targets from a fixed smooth function of the inputs."""
    rng = random.Random(seed)
    data = []
    for _ in range(points):
        x = [round(rng.uniform(-1.0, 1.0), 6) for _ in range(MLP_INPUTS)]
        data.append((x, round(0.5 * x[0] - 0.3 * x[1] * x[0] + 0.1, 6)))
    return data


def mlp_weights(seed: int = 2) -> tuple:
    rng = random.Random(seed)
    w1 = [[rng.uniform(-0.8, 0.8) for _ in range(MLP_INPUTS)] for _ in range(MLP_HIDDEN)]
    b1 = [rng.uniform(-0.1, 0.1) for _ in range(MLP_HIDDEN)]
    w2 = [rng.uniform(-0.8, 0.8) for _ in range(MLP_HIDDEN)]
    return (w1, b1, w2, 0.05)


def mlp_source(data: list[tuple[list[float], float]]) -> str:
    library = (HERE / "mlp.lam").read_text(encoding="utf-8")
    items = ",\n  ".join(f"([{', '.join(_real(v) for v in x)}], {_real(y)})" for x, y in data)
    return (library + "\ndef data : [[R] * R] =\n  [" + items + "]\n\n"
            "def loss (w : [[R]] * [R] * [R] * R) : R = mse w data\n")


def _dot(xs: list, ys: list) -> Any:
    acc = 0.0
    for x, y in zip(xs, ys):
        acc = acc + x * y
    return acc


def mlp_python(w: Any, M: Any, data: list) -> Any:
    w1, b1, w2, b2 = w
    acc = 0.0
    for x, y in data:
        hidden = [M.tanh(_dot(row, x) + c) for row, c in zip(w1, b1)]
        acc = acc + (_dot(w2, hidden) + b2 - y) ** 2
    return acc / len(data)


def mlp(points: int) -> Workload:
    data = mlp_data(points)
    return Workload(f"mlp {points} points", mlp_source(data), "loss", mlp_weights(),
                    lambda w, M: mlp_python(w, M, data))
