"""Peer implementations: the same workloads run by other automatic-differentiation tools.

Each peer turns a workload's ``python(point, M)`` into a zero-argument callable computing
value and gradient at the workload's point.  Peers are optional (the ``bench`` extra of
pyproject.toml) and skipped when their package is not installed:

``python``      plain Python floats and ``math``: the primal only, the floor.
``tape``        a minimal reverse-mode tape in pure Python (below): what interpretation in
                Python costs at the least.
``autograd``    HIPS autograd on Python scalars.
``torch``       PyTorch eager mode, every real a 0-d float64 tensor.
``jax``         JAX eager (``jax.value_and_grad`` called op by op).
``jax-jit``     ``jax.jit(jax.value_and_grad(...))``; its compile time is reported apart.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable
from typing import Any


def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def map_leaves(value: Any, leaf: Callable[[float], Any]) -> Any:
    """``value`` (floats in tuples and lists) with every float replaced by ``leaf(x)``."""
    if isinstance(value, tuple):
        return tuple(map_leaves(v, leaf) for v in value)
    if isinstance(value, list):
        return [map_leaves(v, leaf) for v in value]
    return leaf(value)


def leaves(value: Any) -> list[Any]:
    """The leaves of ``value``, left to right."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


# ---------------------------------------------------------------- a minimal tape


class Tape:
    """Reverse mode at its smallest: every operation appends its node to ``nodes``, in
    creation order, so reversed creation order is a reverse topological order."""

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes: list[Var] = []


class Var:
    """A real on a :class:`Tape`: its value, its parents with the local partials, and its
    adjoint."""

    __slots__ = ("value", "parents", "adjoint", "tape")

    def __init__(self, value: float, tape: Tape, parents: tuple = ()):
        self.value = value
        self.parents = parents
        self.adjoint = 0.0
        self.tape = tape
        tape.nodes.append(self)

    def __add__(self, other: Any) -> "Var":
        if isinstance(other, Var):
            return Var(self.value + other.value, self.tape, ((self, 1.0), (other, 1.0)))
        return Var(self.value + other, self.tape, ((self, 1.0),))

    __radd__ = __add__

    def __sub__(self, other: Any) -> "Var":
        if isinstance(other, Var):
            return Var(self.value - other.value, self.tape, ((self, 1.0), (other, -1.0)))
        return Var(self.value - other, self.tape, ((self, 1.0),))

    def __rsub__(self, other: float) -> "Var":
        return Var(other - self.value, self.tape, ((self, -1.0),))

    def __mul__(self, other: Any) -> "Var":
        if isinstance(other, Var):
            return Var(self.value * other.value, self.tape,
                       ((self, other.value), (other, self.value)))
        return Var(self.value * other, self.tape, ((self, other),))

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> "Var":
        if isinstance(other, Var):
            q = self.value / other.value
            return Var(q, self.tape, ((self, 1.0 / other.value), (other, -q / other.value)))
        return Var(self.value / other, self.tape, ((self, 1.0 / other),))

    def __pow__(self, k: float) -> "Var":
        return Var(self.value ** k, self.tape, ((self, k * self.value ** (k - 1)),))


def _unary(f: Callable[[float], float], df: Callable[[float, float], float]):
    def apply(x: Any) -> Any:
        if not isinstance(x, Var):
            return f(x)
        y = f(x.value)
        return Var(y, x.tape, ((x, df(x.value, y)),))
    return apply


class TapeMath:
    """The math namespace of the tape: ``math``'s functions lifted to :class:`Var`."""

    sin = staticmethod(_unary(math.sin, lambda x, y: math.cos(x)))
    cos = staticmethod(_unary(math.cos, lambda x, y: -math.sin(x)))
    exp = staticmethod(_unary(math.exp, lambda x, y: y))
    log = staticmethod(_unary(math.log, lambda x, y: 1.0 / x))
    tanh = staticmethod(_unary(math.tanh, lambda x, y: 1.0 - y * y))


def tape_value_and_grad(f: Callable[[Any, Any], Any], point: Any) -> tuple[float, Any]:
    tape = Tape()
    inputs = map_leaves(point, lambda x: Var(x, tape))
    out = f(inputs, TapeMath)
    out.adjoint = 1.0
    for node in reversed(tape.nodes):
        a = node.adjoint
        if a:
            for parent, partial in node.parents:
                parent.adjoint += partial * a
    return out.value, map_leaves(inputs, lambda v: v.adjoint)


# ---------------------------------------------------------------- the peers


class Peer:
    """A named way to compute value and gradient; ``prepare`` returns the callable to time
    and the seconds its preparation took (JAX's compile time), or None when it does not
    apply."""

    name = "peer"
    module = ""
    what = ""

    def installed(self) -> bool:
        return not self.module or available(self.module)

    def load(self) -> None:
        """Imports the peer's package (and initialises it), so timing never includes it."""
        if self.module:
            importlib.import_module(self.module)
        if self.module == "jax":
            _jax()

    def prepare(self, f: Callable[[Any, Any], Any], point: Any) -> tuple[Callable[[], Any], float]:
        raise NotImplementedError


class PlainPython(Peer):
    name = "python"
    what = "primal with floats and math (no gradient)"

    def prepare(self, f, point):
        return (lambda: f(point, math)), 0.0


class MinimalTape(Peer):
    name = "tape"
    what = "a minimal pure-Python reverse-mode tape (benchmarks/peers.py)"

    def prepare(self, f, point):
        return (lambda: tape_value_and_grad(f, point)), 0.0


class Autograd(Peer):
    name = "autograd"
    module = "autograd"
    what = "HIPS autograd, value_and_grad on Python scalars"

    def prepare(self, f, point):
        import autograd
        import autograd.numpy as anp

        vg = autograd.value_and_grad(lambda p: f(p, anp))
        return (lambda: vg(point)), 0.0


class Torch(Peer):
    name = "torch"
    module = "torch"
    what = "PyTorch eager, 0-d float64 tensors, torch.autograd.grad"

    def prepare(self, f, point):
        import torch

        torch.set_num_threads(1)

        def run():
            inputs = map_leaves(point, lambda x: torch.tensor(x, dtype=torch.float64,
                                                              requires_grad=True))
            out = f(inputs, torch)
            grads = torch.autograd.grad(out, leaves(inputs), allow_unused=True)
            return out.item(), [0.0 if g is None else g.item() for g in grads]

        return run, 0.0


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax


class JaxEager(Peer):
    name = "jax"
    module = "jax"
    what = "JAX eager: value_and_grad without jit"

    def prepare(self, f, point):
        jax = _jax()
        import jax.numpy as jnp

        vg = jax.value_and_grad(lambda p: f(p, jnp))

        def run():
            value, grad = vg(point)
            return jax.block_until_ready((value, grad))

        return run, 0.0


class JaxJit(Peer):
    name = "jax-jit"
    module = "jax"
    what = "jax.jit(value_and_grad); compile time (first call) reported apart"

    def prepare(self, f, point):
        jax = _jax()
        import jax.numpy as jnp

        vg = jax.jit(jax.value_and_grad(lambda p: f(p, jnp)))
        start = time.perf_counter()
        jax.block_until_ready(vg(point))
        compile_seconds = time.perf_counter() - start
        return (lambda: jax.block_until_ready(vg(point))), compile_seconds


PEERS: tuple[Peer, ...] = (PlainPython(), MinimalTape(), Autograd(), Torch(), JaxEager(),
                           JaxJit())
