"""The array workloads of ``benchmarks/run.py --only arrays``: each one function written
for every tool that runs it, side by side.

A workload (:class:`ArrayWorkload`) is one size of one of four functions:

``llsq``    GradBench's linear least squares: y(x) = 1/2 sum_i (sign t_i - sum_j x_j t_i^j)^2
            at m = 128 points t_i = -1 + 2i/(m-1), x of n coefficients (``llsq.lam``).
``lse``     logsumexp of a vector of n reals (``lse.lam``).
``mlp``     the softmax cross-entropy of a one-hidden-layer tanh network over a batch of
            scikit-learn's digits (8 x 8 images, 10 classes), with respect to its weights
            (``digits_mlp.lam``); a seeded random data set of the same shape when
            scikit-learn is not installed.
``gmm``     GradBench's Gaussian mixture model objective, d dimensions, k components,
            n = 1000 points, with respect to alpha, mu, q and l (``gmm.lam``).

Each is written as

- a lambdad program with arrays (the ``.lam`` file, data appended as text);
- a hand-written NumPy primal and value+gradient (the gradient derived by hand: the
  floor that an interpreter over NumPy can reach), :func:`numpy_primal` and
  :func:`numpy_value_and_grad`;
- one function over the torch or jax.numpy namespace, differentiated by PyTorch and JAX;
- for sizes the benchmark keeps small, a lambdad program with lists, map and fold.

Every version computes the same array operations as the ``.lam`` program (PyTorch and JAX
take the GMM's components as a third axis, as GradBench's own tools for them do; the floor
goes a component at a time, as the program does, which is faster here).
"""

from __future__ import annotations

import importlib.util
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

LLSQ_POINTS = 128
MLP_INPUTS, MLP_HIDDEN, MLP_CLASSES = 64, 32, 10
DIGITS_ROWS = 1797
GMM_POINTS = 1000
GMM_GAMMA, GMM_M = 1.0, 0.0

# Sizes of each workload, in full and with --quick; and the sizes at which lambdad's list
# version runs too (its cost per real makes larger sizes take seconds to minutes a gradient).
SIZES = {
    "full": {"llsq": [64, 256, 1024, 4096], "lse": [10**3, 10**4, 10**5, 10**6],
             "mlp": [64, 256, 1024, 1797],
             "gmm": [(2, 5), (10, 10), (20, 25), (32, 50), (64, 50)]},
    "quick": {"llsq": [64, 1024], "lse": [10**3, 10**5], "mlp": [64, 1797],
              "gmm": [(2, 5), (20, 25)]},
}
LIST_SIZES = {
    "full": {"llsq": {64, 256, 1024}, "lse": {10**3, 10**4, 10**5}, "mlp": {64, 256},
             "gmm": {(2, 5)}},
    "quick": {"llsq": {64}, "lse": {10**3}, "mlp": {64}, "gmm": {(2, 5)}},
}
TITLES = {"llsq": f"GradBench's llsq, m = {LLSQ_POINTS} points, n coefficients",
          "lse": "logsumexp of n reals",
          "mlp": f"MLP loss on the digits ({MLP_INPUTS} inputs, {MLP_HIDDEN} tanh units, "
                 f"softmax cross-entropy over {MLP_CLASSES} classes), by batch size",
          "gmm": "GradBench's gmm, d dimensions, k components, n points"}
ELEMENTS = {"llsq": "m n (the matrix of powers)", "lse": "n",
            "mlp": f"batch x {MLP_INPUTS} (the inputs)",
            "gmm": "k n d (the transformed points, n x d for each of k components)"}


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@dataclass
class ArrayWorkload:
    """One size of one workload.  ``params`` are the arrays differentiated (the point, a
    tuple of NumPy arrays); ``data`` the fixed ones (and reals) every version gets as it
    likes them; ``elements`` the workload's size in array elements, by which the peer
    targets are stated (:data:`ELEMENTS` says what is counted, per kind)."""

    kind: str
    label: str
    size: Any
    elements: int
    params: tuple
    data: tuple
    source: str                      # lambdad with arrays
    names: tuple[str, ...]           # its functions to time (e.g. lse and lse_builtin)
    list_source: str | None = None   # lambdad with lists (None: not written at this size)
    list_name: str = ""
    list_point: Any = None
    list_gradient: Callable[[Any], tuple] | None = None  # its gradient as the params' arrays
    notes: list[str] = field(default_factory=list)

    @property
    def point(self) -> Any:
        """The point as lambdad's Python API takes it: the array, or a tuple of arrays."""
        return self.params[0] if len(self.params) == 1 else self.params


def parts(value: tuple, k: int) -> tuple:
    """The k parts of a gradient of k parameters, flat ``(a, b, c)`` or nested to the right
    ``(a, (b, c))`` as lambdad's API returns a tuple."""
    if len(value) == k:
        return tuple(value)
    found = []
    while len(found) < k - 1:
        first, value = value
        found.append(first)
    return (*found, value)


def _num(x: float) -> str:
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _vector_text(v: Any) -> str:
    return "[" + ", ".join(_num(x) for x in v) + "]"


def _matrix_text(m: Any) -> str:
    return "[" + ",\n  ".join(_vector_text(row) for row in m) + "]"


def _library(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- llsq


def llsq(n: int, with_lists: bool = True, seed: int = 0) -> ArrayWorkload:
    import numpy as np

    x = np.random.default_rng(seed).normal(size=n)
    m = LLSQ_POINTS
    t = np.linspace(-1.0, 1.0, m)
    data = (t, np.sign(t), np.arange(n, dtype=np.float64))
    return ArrayWorkload(
        "llsq", f"llsq n={n}", n, m * n, (x,), data, _library("llsq.lam"), ("llsq",),
        list_source=_library("llsq_lists.lam") if with_lists else None,
        list_name="llsq_lists", list_point=x.tolist(),
        list_gradient=lambda g: (np.asarray(g, dtype=np.float64),))


def _llsq_numpy(params: tuple, data: tuple, gradient: bool) -> Any:
    (x,), (t, s, exponents) = params, data
    powers = t[:, None] ** exponents
    r = s - powers @ x
    value = 0.5 * float(r @ r)
    return (value, (-(powers.T @ r),)) if gradient else value


def _llsq_tensor(xp: Any, params: tuple, data: tuple) -> Any:
    (x,), (t, s, exponents) = params, data
    r = s - (t[:, None] ** exponents) @ x
    return 0.5 * (r * r).sum()


# ---------------------------------------------------------------- logsumexp


def lse(n: int, with_lists: bool = True, seed: int = 0) -> ArrayWorkload:
    import numpy as np

    x = np.random.default_rng(seed).normal(size=n)
    return ArrayWorkload(
        "lse", f"lse n={n:.0e}".replace("e+0", "e"), n, n, (x,), (), _library("lse.lam"),
        ("lse", "lse_builtin"),
        list_source=_library("lse_lists.lam") if with_lists else None,
        list_name="lse_lists", list_point=x.tolist(),
        list_gradient=lambda g: (np.asarray(g, dtype=np.float64),))


def _lse_numpy(params: tuple, data: tuple, gradient: bool) -> Any:
    import numpy as np

    (x,) = params
    top = x.max()
    e = np.exp(x - top)
    total = e.sum()
    value = float(top + np.log(total))
    return (value, (e / total,)) if gradient else value


def _lse_tensor(xp: Any, params: tuple, data: tuple) -> Any:
    (x,) = params
    top = x.max()
    return top + xp.log(xp.exp(x - top).sum())


# ---------------------------------------------------------------- MLP on the digits


def digits(seed: int = 3) -> tuple[Any, Any, str]:
    """``(images, labels, source)``: the 1797 x 64 images scaled to [0, 1] and the
    1797 x 10 one-hot labels of scikit-learn's digits, or, when scikit-learn is not
    installed, a seeded random set of the same shape and kind (pixels k/16, random classes);
    ``source`` says which."""
    import numpy as np

    if installed("sklearn"):
        from sklearn.datasets import load_digits

        bunch = load_digits()
        images, classes = bunch.data, bunch.target
        source = "scikit-learn's digits (load_digits: 1797 images of 8 x 8, pixels / 16)"
    else:
        rng = np.random.default_rng(seed)
        images = rng.integers(0, 17, size=(DIGITS_ROWS, MLP_INPUTS)).astype(np.float64)
        classes = rng.integers(0, MLP_CLASSES, size=DIGITS_ROWS)
        source = ("a seeded random data set of the digits' shape (1797 x 64, pixels k/16, "
                  "10 classes): scikit-learn is not installed")
    labels = np.zeros((len(classes), MLP_CLASSES))
    labels[np.arange(len(classes)), classes] = 1.0
    return images / 16.0, labels, source


def mlp_weights(seed: int = 4) -> tuple:
    import numpy as np

    rng = np.random.default_rng(seed)
    return (rng.normal(scale=1 / math.sqrt(MLP_INPUTS), size=(MLP_INPUTS, MLP_HIDDEN)),
            rng.normal(scale=0.1, size=MLP_HIDDEN),
            rng.normal(scale=1 / math.sqrt(MLP_HIDDEN), size=(MLP_HIDDEN, MLP_CLASSES)),
            rng.normal(scale=0.1, size=MLP_CLASSES))


def mlp(batch: int, with_lists: bool = True, data: tuple | None = None) -> ArrayWorkload:
    import numpy as np

    images, labels, where = data if data is not None else digits()
    x, y = images[:batch], labels[:batch]
    w1, b1, w2, b2 = params = mlp_weights()
    source = (_library("digits_mlp.lam")
              + f"\ndef images : Mat = matrix {_matrix_text(x)}\n"
              + f"\ndef labels : Mat = matrix {_matrix_text(y)}\n"
              + "\ndef loss (w1 : Mat) (b1 : Vec) (w2 : Mat) (b2 : Vec) : R =\n"
              + "  xent images labels w1 b1 w2 b2\n")
    list_source = None
    if with_lists:
        rows = ",\n  ".join(f"({_vector_text(a)}, {_vector_text(b)})" for a, b in zip(x, y))
        list_source = (_library("digits_mlp_lists.lam")
                       + f"\ndef digits : [[R] * [R]] =\n  [{rows}]\n"
                       + "\ndef loss (w1 : [[R]]) (b1 : [R]) (w2 : [[R]]) (b2 : [R]) : R =\n"
                       + "  xent_lists digits w1 b1 w2 b2\n")

    def list_gradient(g: Any) -> tuple:
        g1, gb1, g2, gb2 = (np.asarray(part, dtype=np.float64) for part in parts(g, 4))
        return g1.T, gb1, g2.T, gb2

    return ArrayWorkload(
        "mlp", f"mlp batch={batch}", batch, batch * MLP_INPUTS, params, (x, y), source,
        ("loss",), list_source=list_source, list_name="loss",
        list_point=(w1.T.tolist(), b1.tolist(), w2.T.tolist(), b2.tolist()),
        list_gradient=list_gradient, notes=[f"data: {where}"])


def _mlp_numpy(params: tuple, data: tuple, gradient: bool) -> Any:
    import numpy as np

    (w1, b1, w2, b2), (x, y) = params, data
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    top = z.max(axis=1, keepdims=True)
    e = np.exp(z - top)
    total = e.sum(axis=1, keepdims=True)
    value = float(np.mean(top[:, 0] + np.log(total[:, 0]) - (z * y).sum(axis=1)))
    if not gradient:
        return value
    dz = (e / total - y) / len(x)
    dh = (dz @ w2.T) * (1.0 - h * h)
    return value, (x.T @ dh, dh.sum(axis=0), h.T @ dz, dz.sum(axis=0))


def _mlp_tensor(xp: Any, params: tuple, data: tuple) -> Any:
    (w1, b1, w2, b2), (x, y) = params, data
    z = xp.tanh(x @ w1 + b1) @ w2 + b2
    return (_lse_rows(xp, z) - (z * y).sum(1)).mean()


def _lse_rows(xp: Any, z: Any) -> Any:
    if xp.__name__ == "torch":
        return xp.logsumexp(z, 1)
    import jax

    return jax.nn.logsumexp(z, axis=1)


# ---------------------------------------------------------------- GMM


def gmm_constant(n: int, d: int, k: int, gamma: float = GMM_GAMMA, m: float = GMM_M) -> float:
    """The GMM objective's terms that depend on no parameter: -n d log(2 pi) / 2 and the
    Wishart prior's normalisation, k (n_p d log(gamma / sqrt 2) - log Gamma_d(n_p / 2))
    with n_p = d + m + 1 (Gamma_d the multivariate gamma function)."""
    n_p = d + m + 1
    log_multigamma = d * (d - 1) / 4 * math.log(math.pi) + sum(
        math.lgamma(0.5 * n_p + (1 - j) / 2) for j in range(1, d + 1))
    return (-n * d * 0.5 * math.log(2 * math.pi)
            + k * (n_p * d * math.log(gamma / math.sqrt(2)) - log_multigamma))


def _lower_indices(d: int) -> tuple[Any, Any]:
    """Rows and columns of a d x d strictly lower triangle, column after column (the
    packing of GradBench's ``l``)."""
    import numpy as np

    rows = [r for c in range(d - 1) for r in range(c + 1, d)]
    cols = [c for c in range(d - 1) for _ in range(c + 1, d)]
    return np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)


def gmm(size: tuple[int, int], with_lists: bool = True, n: int | None = None,
        seed: int = 5) -> ArrayWorkload:
    """GradBench's gmm at ``size = (d, k)`` over ``n`` points (:data:`GMM_POINTS` unless
    given): alpha and l normal, mu uniform on [0, 1), q normal, the points normal (rounded to 4 decimals, so the program text stays short),
    gamma = 1, m = 0."""
    import numpy as np

    d, k = size
    n = GMM_POINTS if n is None else n
    rng = np.random.default_rng(seed)
    alpha = rng.normal(size=k)
    mu = rng.uniform(size=(k, d))
    q = rng.normal(size=(k, d))
    l = rng.normal(size=(k, d * (d - 1) // 2))
    x = np.round(rng.normal(size=(n, d)), 4)
    constant = gmm_constant(n, d, k)
    rows, cols = _lower_indices(d)
    call = f"points {_num(GMM_GAMMA)} {_num(GMM_M)} alpha mu q l + ({_num(constant)})"
    # (the factors' table of positions: a constant, computed once as a top-level def)
    tail = (f"\ndef table : Vec = factor_table {d} {k}\n"
            f"\ndef points : Mat = matrix {_matrix_text(x)}\n"
            "\ndef objective (alpha : Vec) (mu : Mat) (q : Mat) (l : Mat) : R =\n"
            f"  gmm_objective table {call}\n")
    list_source = None
    if with_lists:
        list_source = (_library("gmm_lists.lam")
                       + f"\ndef points : [[R]] = {_matrix_text(x)}\n"
                       "\ndef objective (alpha : [R]) (mu : [[R]]) (q : [[R]]) (l : [[R]]) : R =\n"
                       f"  gmm_lists {call}\n")
    return ArrayWorkload(
        "gmm", f"gmm d={d} k={k} n={n}", size, k * n * d, (alpha, mu, q, l),
        (x, rows, cols, GMM_GAMMA, GMM_M, constant), _library("gmm.lam") + tail,
        ("objective",), list_source=list_source, list_name="objective",
        list_point=(alpha.tolist(), mu.tolist(), q.tolist(), l.tolist()),
        list_gradient=lambda g: tuple(np.asarray(part, dtype=np.float64) for part in parts(g, 4)))


def _gmm_numpy(params: tuple, data: tuple, gradient: bool) -> Any:
    """The objective a component at a time (faster here than the components as a third
    axis, whose arrays outgrow the caches), and its gradient derived
    by hand: with w the responsibilities (the softmax over the components of each point's
    terms) and g = -w z the derivative in the transformed points z = (x - mu_c) Q_c^T,
    d alpha = sum_i w - n softmax alpha; d q = sum_i w + exp q * sum_i g (x - mu_c)
    - gamma^2 exp 2q + m; d L_c = g^T (x - mu_c) on the lower triangle, less gamma^2 l;
    d mu_c = -(sum_i g) (diag (exp q) + L_c)."""
    import numpy as np

    (alpha, mu, q, l), (x, rows, cols, gamma, wm, constant) = params, data
    k, d = q.shape
    n = len(x)
    eq = np.exp(q)
    terms = np.empty((k, n))
    kept = []
    for c in range(k):
        lower = np.zeros((d, d))
        lower[rows, cols] = l[c]
        centred = x - mu[c]
        z = centred * eq[c] + centred @ lower.T
        terms[c] = alpha[c] + q[c].sum() - 0.5 * np.einsum("ij,ij->i", z, z)
        if gradient:
            kept.append((lower, centred, z))
    top = terms.max(axis=0)
    e = np.exp(terms - top)
    total = e.sum(axis=0)
    a_top = alpha.max()
    ea = np.exp(alpha - a_top)
    prior = 0.5 * gamma * gamma * (np.sum(eq * eq) + np.sum(l * l)) - wm * q.sum()
    value = float(np.sum(top + np.log(total)) - n * (a_top + np.log(ea.sum())) - prior
                  + constant)
    if not gradient:
        return value
    w = e / total                                                   # k x n
    d_alpha = w.sum(axis=1) - n * ea / ea.sum()
    d_mu, d_q, d_l = np.empty_like(mu), np.empty_like(q), np.empty_like(l)
    for c, (lower, centred, z) in enumerate(kept):
        g = z * -w[c][:, None]
        d_q[c] = w[c].sum() + eq[c] * np.einsum("ij,ij->j", g, centred)
        d_l[c] = (g.T @ centred)[rows, cols]
        g_sum = g.sum(axis=0)
        d_mu[c] = -(g_sum * eq[c] + g_sum @ lower)
    d_q += wm - gamma * gamma * eq * eq
    d_l -= gamma * gamma * l
    return value, (d_alpha, d_mu, d_q, d_l)


def _gmm_tensor(xp: Any, params: tuple, data: tuple) -> Any:
    (alpha, mu, q, l), (x, rows, cols, gamma, wm, constant) = params, data
    k, d = q.shape
    n = x.shape[0]
    if xp.__name__ == "torch":
        lower = l.new_zeros((k, d, d))
        lower[:, rows, cols] = l
        lse = xp.logsumexp
    else:
        import jax

        lower = xp.zeros((k, d, d), dtype=l.dtype).at[:, rows, cols].set(l)
        lse = jax.nn.logsumexp
    eq = xp.exp(q)
    centred = x[None, :, :] - mu[:, None, :]
    z = centred * eq[:, None, :] + centred @ xp.swapaxes(lower, 1, 2)
    terms = alpha[:, None] + q.sum(1)[:, None] - 0.5 * (z * z).sum(2)
    prior = 0.5 * gamma * gamma * ((eq * eq).sum() + (l * l).sum()) - wm * q.sum()
    return lse(terms, 0).sum() - n * lse(alpha, 0) - prior + constant


# ---------------------------------------------------------------- the versions


MAKE: dict[str, Callable[..., ArrayWorkload]] = {"llsq": llsq, "lse": lse, "mlp": mlp, "gmm": gmm}
_NUMPY = {"llsq": _llsq_numpy, "lse": _lse_numpy, "mlp": _mlp_numpy, "gmm": _gmm_numpy}
_TENSOR = {"llsq": _llsq_tensor, "lse": _lse_tensor, "mlp": _mlp_tensor, "gmm": _gmm_tensor}


def numpy_primal(w: ArrayWorkload) -> Callable[[], float]:
    f = _NUMPY[w.kind]
    return lambda: f(w.params, w.data, False)


def numpy_value_and_grad(w: ArrayWorkload) -> Callable[[], tuple[float, tuple]]:
    f = _NUMPY[w.kind]
    return lambda: f(w.params, w.data, True)


def numpy_function(kind: str) -> Callable[[tuple, tuple, bool], Any]:
    """The floor of ``kind``: ``f(params, data, gradient)``, the value or (value, gradient)."""
    return _NUMPY[kind]


def _tensors(convert: Callable[[Any], Any], data: tuple) -> tuple:
    import numpy as np

    return tuple(convert(part) if isinstance(part, np.ndarray) else part for part in data)


def torch_value_and_grad(w: ArrayWorkload) -> Callable[[], tuple[float, tuple]]:
    """PyTorch eager, float64 on the CPU, one thread: fresh leaf tensors (sharing the
    NumPy arrays' memory) each call, the function, ``torch.autograd.grad``."""
    import torch

    torch.set_num_threads(1)
    f = _TENSOR[w.kind]
    data = _tensors(torch.from_numpy, w.data)

    def run() -> tuple[float, tuple]:
        inputs = tuple(torch.from_numpy(p).requires_grad_() for p in w.params)
        out = f(torch, inputs, data)
        grads = torch.autograd.grad(out, inputs)
        return out.item(), tuple(g.numpy() for g in grads)
    return run


def _jax() -> Any:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax


def jax_value_and_grad(w: ArrayWorkload, jit: bool) -> tuple[Callable[[], Any], float]:
    """JAX's ``value_and_grad`` with respect to the parameters (the data passed as a
    second argument), eager or under ``jit``; and the seconds of the first call (tracing
    and compiling under jit), which the timed calls never include."""
    import time

    jax = _jax()
    import jax.numpy as jnp

    f = _TENSOR[w.kind]
    params = tuple(jnp.asarray(p) for p in w.params)
    data = _tensors(jnp.asarray, w.data)
    vg = jax.value_and_grad(lambda p, dt: f(jnp, p, dt))
    if jit:
        vg = jax.jit(vg)
    start = time.perf_counter()
    jax.block_until_ready(vg(params, data))
    first = time.perf_counter() - start

    def run() -> tuple[float, tuple]:
        return jax.block_until_ready(vg(params, data))
    return run, first if jit else 0.0


def agrees(out: Any, value: float, gradient: tuple | None, rtol: float = 1e-8) -> bool:
    """Whether ``out`` (a value, or ``(value, gradient)`` with the gradient an array or a
    tuple of arrays in the parameters' order) matches the floor's ``value`` and
    ``gradient``: each array to ``rtol`` of its largest entry."""
    import numpy as np

    if isinstance(out, tuple) and len(out) == 2:
        theirs_value, theirs = out
    else:
        theirs_value, theirs = out, None
    if not abs(float(theirs_value) - value) <= rtol * max(1.0, abs(value)):
        return False
    if theirs is None or gradient is None:
        return True
    if not isinstance(theirs, (tuple, list)):
        theirs = (theirs,)
    if len(theirs) != len(gradient):
        return False
    for a, b in zip(theirs, gradient):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return False
        if not np.all(np.abs(a - b) <= rtol * max(1.0, float(np.abs(b).max(initial=0.0)))):
            return False
    return True


def finite_difference_check(w: ArrayWorkload, samples: int = 8, step: float = 1e-6,
                            seed: int = 0) -> float:
    """The largest relative difference between the floor's hand-written gradient and
    central differences of its primal, at ``samples`` entries of each parameter chosen at
    random (for the test of the floor)."""
    import numpy as np

    f = _NUMPY[w.kind]
    _, gradient = f(w.params, w.data, True)
    rng = random.Random(seed)
    worst = 0.0
    for index, (p, g) in enumerate(zip(w.params, gradient)):
        for _ in range(samples):
            at = tuple(rng.randrange(s) for s in p.shape)
            moved = [np.array(q, copy=True) for q in w.params]
            moved[index][at] += step
            up = f(tuple(moved), w.data, False)
            moved[index][at] -= 2 * step
            down = f(tuple(moved), w.data, False)
            estimate = (up - down) / (2 * step)
            scale = max(1.0, abs(estimate), abs(float(g[at])))
            worst = max(worst, abs(estimate - float(g[at])) / scale)
    return worst
