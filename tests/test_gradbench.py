"""``python -m lambdad.gradbench``, driven through GradBench's protocol in a subprocess: the
framing and errors of the protocol, the repeated runs, and every module at small sizes
against the eval's formula computed here with NumPy (never with lambdad)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from lambdad.gradbench import THREAD_VARIABLES, blas_threads

RUNS = {"min_runs": 1, "min_seconds": 0}


def session(messages, *options, timeout=120):
    """Run the tool on ``messages`` (dicts, or strings sent as they are), numbering the
    dicts without an id; returns (responses by id, stderr, exit status)."""
    lines = []
    for number, message in enumerate(messages):
        if isinstance(message, dict):
            message = json.dumps({"id": number} | message)
        lines.append(message)
    env = dict(os.environ)
    env.pop("LAMBDAD_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "lambdad.gradbench", *options],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)
    responses = [json.loads(line) for line in done.stdout.splitlines()]
    assert "Traceback" not in done.stderr, done.stderr
    return {r["id"]: r for r in responses}, done.stderr, done.returncode


def run_module(module, calls, *options, timeout=120):
    """Define ``module`` and evaluate each (function, input) of ``calls`` once; returns
    the outputs in order (every answer must be a success)."""
    messages = [{"kind": "start", "eval": module}, {"kind": "define", "module": module}]
    messages += [{"kind": "evaluate", "module": module, "function": f, "input": x}
                 for f, x in calls]
    answers, stderr, status = session(messages, "--no-warmup", *options, timeout=timeout)
    assert status == 0, stderr
    assert answers[1]["success"] is True, answers[1]
    outputs = []
    for number in range(2, 2 + len(calls)):
        answer = answers[number]
        assert answer["success"] is True, answer.get("error")
        outputs.append(answer["output"])
    return outputs


def close(actual, expected, tolerance=1e-9):
    """The same shape, and every number within ``tolerance`` of the expected one relative
    to its size (at least 1), as GradBench's own comparison measures it."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape
    difference = np.abs(actual - expected) / np.maximum(np.abs(actual) + np.abs(expected), 1)
    assert difference.max(initial=0) <= tolerance, (actual, expected)


# ------------------------------------------------------------ the protocol

def test_start_define_evaluate_and_analysis_are_answered_with_their_ids():
    answers, stderr, status = session([
        {"kind": "start", "eval": "hello"},
        {"kind": "define", "module": "hello"},
        {"kind": "evaluate", "module": "hello", "function": "square", "input": 3},
        {"kind": "analysis", "of": 2, "valid": True},
        {"kind": "something new"},
    ])
    assert status == 0 and stderr == ""
    assert answers[0]["tool"] == "lambdad"
    assert answers[1]["success"] is True
    assert [t["name"] for t in answers[1]["timings"]] == ["load"]
    assert answers[2]["output"] == 9
    assert answers[3] == {"id": 3} and answers[4] == {"id": 4}


def test_the_tool_runs_numpys_linear_algebra_on_one_thread_unless_told(monkeypatch):
    from threadpoolctl import threadpool_info

    def blas():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas()
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with blas_threads(False):
        assert blas() and set(blas()) == {1}
    assert blas() == before  # put back as it was
    with blas_threads(True):
        assert blas() == before
    monkeypatch.setenv("MKL_NUM_THREADS", "4")  # the user said how many: left alone
    with blas_threads(False):
        assert blas() == before
    # and a tool started without the variables answers as any other
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-m", "lambdad.gradbench"], cwd=ROOT, env=env,
                          input='{"id": 7, "kind": "define", "module": "hello"}\n',
                          capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)["success"] is True


MAPPED_BLOCKS = """
import ctypes, ctypes.util, sys
import numpy as np
from lambdad.gradbench import reuse_freed_memory


class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


mallinfo2 = ctypes.CDLL(ctypes.util.find_library("c")).mallinfo2
mallinfo2.restype = Info
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
before = mallinfo2().hblks
array = np.ones(2_500_000)  # 20 MB: more than any block freed before (see below)
print(mallinfo2().hblks - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or
                    os.confstr("CS_GNU_LIBC_VERSION").split()[0] != "glibc",
                    reason="glibc's allocator")
def test_the_tool_has_the_allocator_reuse_the_memory_of_large_arrays():
    # by default glibc maps every block over 128 kB by itself (the threshold rising only to
    # the size of a mapped block freed); after reuse_freed_memory blocks up to 32 MB come
    # from the heap, as the tool's arrays do
    def mapped(mode):
        done = subprocess.run([sys.executable, "-c", MAPPED_BLOCKS, mode], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return int(done.stdout)

    assert mapped("system") == 1
    assert mapped("reuse") == 0
    # the tool's option to leave the allocator alone is accepted
    answers, _, status = session([{"kind": "define", "module": "hello"}],
                                 "--system-allocator")
    assert status == 0 and answers[0]["success"] is True


def test_a_call_of_main_from_python_leaves_the_allocator_alone(monkeypatch):
    # the allocator setting cannot be undone: only the tool's own process makes it
    import io

    from lambdad import gradbench
    made = []
    monkeypatch.setattr(gradbench, "reuse_freed_memory", lambda: made.append(True) or True)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert gradbench.main([]) == 0
    assert made == []
    assert gradbench.main([], own_process=True) == 0
    assert made == [True]


def test_a_module_without_a_program_is_refused_at_define():
    answers, _, status = session([{"kind": "define", "module": "gmm2"}])
    assert status == 0
    assert answers[0]["success"] is False
    assert "no program for the module `gmm2`" in answers[0]["error"]


def test_min_runs_gives_one_evaluate_timing_per_run_after_one_warmup():
    fast = {"kind": "evaluate", "module": "lse", "function": "primal",
            "input": {"x": [1.0, 2.0], "min_runs": 3, "min_seconds": 0}}
    answers, _, _ = session([{"kind": "define", "module": "lse"}, fast, fast])
    first = [t["name"] for t in answers[1]["timings"]]
    again = [t["name"] for t in answers[2]["timings"]]
    assert first == ["convert", "warmup", "evaluate", "evaluate", "evaluate"]
    assert again == ["convert", "evaluate", "evaluate", "evaluate"]
    assert all(isinstance(t["nanoseconds"], int) and t["nanoseconds"] > 0
               for t in answers[1]["timings"])


def test_min_seconds_keeps_running_until_that_much_time_is_spent():
    answers, _, _ = session([
        {"kind": "define", "module": "hello"},
        {"kind": "define", "module": "lse"},
        {"kind": "evaluate", "module": "lse", "function": "gradient",
         "input": {"x": [0.5] * 50, "min_runs": 1, "min_seconds": 0.2}},
    ], "--no-warmup")
    runs = [t["nanoseconds"] for t in answers[2]["timings"] if t["name"] == "evaluate"]
    assert len(runs) > 1
    assert sum(runs) >= 0.2e9
    assert sum(runs[:-1]) < 0.2e9  # it stops as soon as the time is reached


def test_bad_messages_are_errors_in_the_answer_and_the_session_goes_on():
    answers, stderr, status = session([
        {"kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [1.0]}},
        {"kind": "define", "module": "lse"},
        {"kind": "evaluate", "module": "lse", "function": "nope", "input": {"x": [1.0]}},
        {"kind": "evaluate", "module": "lse", "function": "primal", "input": {"y": [1.0]}},
        {"kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": ["a"]}},
        {"kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [[1.0]]}},
        {"kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": []}},
        {"kind": "evaluate", "module": "lse", "function": "primal",
         "input": {"x": [1.0], "min_runs": "many"}},
        {"kind": "define"},
        "this is not JSON",
        "[1, 2]",
        {"kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [2.0]}},
    ])
    errors = {i: answers[i].get("error", "") for i in range(9)
              if answers[i].get("success") is False}
    assert "not defined" in errors[0]
    assert "has no function \"nope\"" in errors[2]
    assert "no field x" in errors[3]
    assert "not a string" in errors[4]
    assert "does not fit `primal`" in errors[5]
    # an error of the program itself is located in its source, with a caret
    assert "runtime error: maximum of an empty array" in errors[6] and "^" in errors[6]
    assert "`min_runs` must be a number" in errors[7]
    assert "`module`" in errors[8]
    assert answers[11]["output"] == 2.0
    assert status == 1
    assert "line 10 is not a message: not JSON" in stderr
    assert "line 11 is not a message: a message must be a JSON object" in stderr


def test_an_invalid_analysis_is_reported_on_stderr():
    _, stderr, status = session([{"kind": "analysis", "of": 7, "valid": False,
                                  "error": "expected 3"}])
    assert status == 0
    assert "message 7 invalid: expected 3" in stderr


def test_programs_can_come_from_another_directory(tmp_path):
    (tmp_path / "hello.lam").write_text("def square (x : R) : R = x * x * 1\n")
    answers, _, _ = session([{"kind": "define", "module": "hello"},
                             {"kind": "define", "module": "lse"}],
                            "--programs", str(tmp_path))
    assert answers[0]["success"] is False
    assert "does not define double" in answers[0]["error"]
    assert answers[1]["success"] is False and "lse.lam" in answers[1]["error"]


# ------------------------------------------------------------ the evals

def test_hello():
    assert run_module("hello", [("square", 3.0), ("double", 9.0), ("square", -1.5)]) \
        == [9.0, 18.0, 2.25]


def llsq_reference(x, n):
    """The objective and its gradient: t_i = -1 + 2 i / (n - 1), s_i = sign t_i, V the
    Vandermonde matrix of t, y = |s - V x|^2 / 2, gradient -V^T (s - V x)."""
    t = -1 + np.arange(n) * 2 / (n - 1)
    vandermonde = t[:, None] ** np.arange(len(x))[None, :]
    residual = np.sign(t) - vandermonde @ np.asarray(x)
    return residual @ residual / 2, -(vandermonde.T @ residual)


def test_llsq():
    x = np.random.default_rng(0).random(5).tolist()
    primal, gradient = run_module("llsq", [("primal", {"x": x, "n": 17} | RUNS),
                                           ("gradient", {"x": x, "n": 17} | RUNS)])
    y, g = llsq_reference(x, 17)
    close(primal, y)
    close(gradient, g)


def test_lse():
    x = (np.random.default_rng(1).random(40) * 200 - 100).tolist()
    primal, gradient = run_module("lse", [("primal", {"x": x} | RUNS),
                                          ("gradient", {"x": x} | RUNS)])
    shifted = np.exp(np.asarray(x) - max(x))
    close(primal, max(x) + np.log(shifted.sum()))
    close(gradient, shifted / shifted.sum())  # softmax


@pytest.mark.parametrize("ell", [1, 2, 3, 4, 5, 6, 9])
def test_det(ell):
    a = np.random.default_rng(ell).random(ell * ell)
    inputs = {"A": a.tolist(), "ell": ell} | RUNS
    primal, gradient = run_module("det", [("primal", inputs), ("gradient", inputs)])
    m = a.reshape(ell, ell)
    close(primal, np.linalg.det(m))
    # Jacobi's formula: the gradient of det is the cofactor matrix, det(M) M^-T
    close(gradient, (np.linalg.det(m) * np.linalg.inv(m).T).ravel())


def ode_reference(x, s):
    """s classical Runge-Kutta steps from 0 to 2 of y_0' = x_0, y_i' = x_i y_(i-1)."""
    h = 2 / s
    y = np.zeros_like(x)

    def rhs(y):
        return np.concatenate([x[:1], x[1:] * y[:-1]])

    for _ in range(s):
        k1 = rhs(y)
        k2 = rhs(y + h * k1 / 2)
        k3 = rhs(y + h * k2 / 2)
        k4 = rhs(y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def test_ode():
    x = np.random.default_rng(2).random(7)
    inputs = {"x": x.tolist(), "s": 4} | RUNS
    primal, gradient = run_module("ode", [("primal", inputs), ("gradient", inputs)])
    close(primal, ode_reference(x, 4))
    # the gradient of the last element by complex steps: exact to rounding for this
    # polynomial in x
    steps = [ode_reference(x + 1e-30j * e, 4)[-1].imag / 1e-30 for e in np.eye(len(x))]
    close(gradient, steps)


# (at 1500 points and 4 centroids the n x k matrices are reduced by the BLAS and by a
# running maximum over the columns, not by NumPy's reductions along an axis)
@pytest.mark.parametrize("n", [30, 1500])
def test_kmeans(n):
    points = np.random.default_rng(3).random((n, 3))
    centroids = points[-4:]  # as the eval makes them: every cluster has a point
    inputs = {"points": points.tolist(), "centroids": centroids.tolist()} | RUNS
    cost, direction = run_module("kmeans", [("cost", inputs), ("dir", inputs)])
    distances = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    close(cost, distances.min(axis=1).sum())
    # cost = sum over clusters of |C_j - P_i|^2: gradient 2 sum (C_j - P_i), Hessian
    # diagonal 2 |cluster j|
    nearest = distances.argmin(axis=1)
    expected = [sum(2 * (centroids[j] - points[i]) for i in np.flatnonzero(nearest == j))
                / (2 * np.count_nonzero(nearest == j)) for j in range(len(centroids))]
    close(direction, expected)


# ------------------------------------------------------------ nested differentiation

class Dual:
    """a + b ε with ε² = 0: forward mode for the references below, independent of lambdad."""

    def __init__(self, a, b=0.0):
        self.a, self.b = a, b

    @staticmethod
    def of(v):
        return v if isinstance(v, Dual) else Dual(v)

    def __add__(self, o):
        o = Dual.of(o)
        return Dual(self.a + o.a, self.b + o.b)

    __radd__ = __add__

    def __sub__(self, o):
        o = Dual.of(o)
        return Dual(self.a - o.a, self.b - o.b)

    def __rsub__(self, o):
        return Dual.of(o) - self

    def __mul__(self, o):
        o = Dual.of(o)
        return Dual(self.a * o.a, self.a * o.b + self.b * o.a)

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = Dual.of(o)
        return Dual(self.a / o.a, (self.b * o.a - self.a * o.b) / (o.a * o.a))

    def __rtruediv__(self, o):
        return Dual.of(o) / self

    def __neg__(self):
        return Dual(-self.a, -self.b)

    def __lt__(self, o):
        return self.a < Dual.of(o).a

    def __gt__(self, o):
        return self.a > Dual.of(o).a

    def __le__(self, o):
        return self.a <= Dual.of(o).a

    def sqrt(self):
        root = self.a ** 0.5
        return Dual(root, self.b / (2 * root))


def sqrt(v):
    return v.sqrt() if isinstance(v, Dual) else v ** 0.5


def argmin(f, g, x0):
    """GradBench's gradient descent for saddle and particle, as its README and solver
    describe it."""
    x, fx, gx, i, eta = list(x0), f(x0), g(x0), 0, 1e-5
    while True:
        if sqrt(sum(v * v for v in gx)) <= 1e-5:
            return x
        if i == 10:
            eta, i = eta * 2, 0
            continue
        x_new = [a - eta * b for a, b in zip(x, gx)]
        if sqrt(sum((a - b) * (a - b) for a, b in zip(x, x_new))) <= 1e-5:
            return x
        f_new = f(x_new)
        if f_new < fx:
            x, fx, gx, i = x_new, f_new, g(x_new), i + 1
        else:
            eta, i = eta / 2, 0


def argmax(f, g, x0):
    return argmin(lambda x: -f(x), lambda x: [-v for v in g(x)], x0)


def saddle_reference(start):
    def f(p1, p2):
        return (p1[0] * p1[0] + p1[1] * p1[1]) - (p2[0] * p2[0] + p2[1] * p2[1])

    def gradient_2(p2):  # of f in p2, by hand
        return [-2 * v for v in p2]

    def r1_cost(p1):
        return f(p1, argmax(lambda p2: f(p1, p2), gradient_2, start))

    def r1_gradient(p1):  # by dual numbers, one direction at a time
        return [r1_cost([Dual(v, float(i == j)) for j, v in enumerate(p1)]).b
                for i in range(len(p1))]

    r1 = argmin(r1_cost, r1_gradient, start)
    return r1 + argmax(lambda p2: f(r1, p2), gradient_2, start)


def particle_reference(w0):
    def euler(w):
        charges = [(10.0, 10.0 - w), (10.0, 0.0)]
        (x, y), (vx, vy), dt = (0.0, 8.0), (0.75, 0.0), 0.1
        while True:
            # the acceleration, minus the gradient of sum 1 / |p - c|, by hand
            ax = ay = 0.0
            for cx, cy in charges:
                r = sqrt((x - cx) * (x - cx) + (y - cy) * (y - cy))
                ax, ay = ax + (x - cx) / (r * r * r), ay + (y - cy) / (r * r * r)
            x_new, y_new = x + dt * vx, y + dt * vy
            if not y_new > 0:
                break
            (x, y), (vx, vy) = (x_new, y_new), (vx + dt * ax, vy + dt * ay)
        x_final = x + (-y / vy) * vx
        return x_final * x_final

    return argmin(lambda w: euler(w[0]), lambda w: [euler(Dual(w[0], 1.0)).b], [w0])[0]


def test_the_references_give_gradbenchs_expected_outputs():
    # the constants GradBench's saddle and particle evals check their defaults against
    close(saddle_reference([1.0, 1.0]), [8.246324826140356e-06] * 4, 1e-12)
    close(particle_reference(0.0), 0.2071918746486116, 1e-12)


def test_saddle_from_its_default_start():
    # one composition here (the others: test_saddle_and_particle_in_all_four_compositions)
    start = {"start": [1.0, 1.0]} | RUNS
    [output] = run_module("saddle", [("rf", start)])
    close(output, saddle_reference([1.0, 1.0]), 1e-12)


def test_particle_near_its_optimum_in_all_four_compositions():
    # from w = 0.207 the descent takes three steps of the simulation (about 700 Euler
    # steps with their nested derivatives)
    outputs = run_module("particle", [(f, {"w": 0.207} | RUNS) for f in ("rr", "ff", "fr", "rf")])
    close(outputs, [particle_reference(0.207)] * 4, 1e-12)


@pytest.mark.long
@pytest.mark.parametrize("module,inputs,reference", [
    ("saddle", {"start": [1.0, 1.0]}, lambda: saddle_reference([1.0, 1.0])),
    ("particle", {"w": 0.0}, lambda: particle_reference(0.0)),
])
def test_saddle_and_particle_in_all_four_compositions(module, inputs, reference):
    # a few seconds to a minute for each composition, as the machine is loaded
    outputs = run_module(module, [(f, inputs | RUNS) for f in ("rr", "ff", "fr", "rf")],
                         timeout=1200)
    for output in outputs:
        close(output, reference(), 1e-12)


def gmm_log_posterior(alpha, mu, q, l, x, m, gamma):
    """The definition of the eval's README, densities and all (not its simplified form):
    log (prod_i sum_k phi_k N(x_i; mu_k, (Q_k^T Q_k)^-1) prod_k Wishart(Q_k^T Q_k))."""
    d, k = x.shape[1], len(alpha)
    phi = np.exp(alpha) / np.exp(alpha).sum()
    below = [(r, c) for c in range(d) for r in range(c + 1, d)]  # filled column by column
    precisions = []
    for j in range(k):
        factor = np.diag(np.exp(q[j]))
        for (r, c), value in zip(below, l[j]):
            factor[r, c] = value
        precisions.append(factor.T @ factor)
    likelihood = 0.0
    for xi in x:
        density = sum(phi[j] * np.exp(-0.5 * (xi - mu[j]) @ precisions[j] @ (xi - mu[j]))
                      / np.sqrt((2 * np.pi) ** d / np.linalg.det(precisions[j]))
                      for j in range(k))
        likelihood += np.log(density)
    n = d + m + 1
    log_gamma_d = d * (d - 1) / 4 * np.log(np.pi) + sum(math.lgamma(n / 2 - j / 2)
                                                       for j in range(d))
    prior = sum((n - d - 1) / 2 * np.log(np.linalg.det(p)) - gamma * gamma * np.trace(p) / 2
                - n * d / 2 * np.log(2) + n * d * np.log(gamma) - log_gamma_d
                for p in precisions)
    return likelihood + prior


def _gmm_run(seed, d, k, n, m, gamma):
    """Random GMM parameters and points of the given sizes, and the module's objective and
    Jacobian there: (parameters, x, objective, jacobian)."""
    rng = np.random.default_rng(seed)
    parameters = {"alpha": rng.normal(size=k), "mu": rng.uniform(size=(k, d)),
                  "q": rng.normal(size=(k, d)) * 0.3,
                  "l": rng.normal(size=(k, d * (d - 1) // 2)) * 0.3}
    x = rng.normal(size=(n, d))
    inputs = {name: value.tolist() for name, value in parameters.items()} \
        | {"x": x.tolist(), "d": d, "k": k, "n": n, "m": m, "gamma": gamma} | RUNS
    objective, jacobian = run_module("gmm", [("objective", inputs), ("jacobian", inputs)])
    return parameters, x, objective, jacobian


def test_gmm_at_a_size_whose_rows_are_reduced_by_the_blas():
    # 1500 points, 3 components of d = 2: the squared norms (4500 rows of 2) and the
    # logsumexp of 1500 rows of 3 go by the BLAS and by a running maximum; the objective
    # against the definition, and one entry of each parameter's derivative against
    # central differences of it
    m, gamma = 0, 1.0
    parameters, x, objective, jacobian = _gmm_run(8, 2, 3, 1500, m, gamma)
    close(objective, gmm_log_posterior(*parameters.values(), x, m, gamma), 1e-12)
    for name, index in (("alpha", (1,)), ("mu", (2, 0)), ("q", (0, 1)), ("l", (1, 0))):
        step = np.zeros_like(parameters[name])
        step[index] = 1e-6
        up = parameters | {name: parameters[name] + step}
        down = parameters | {name: parameters[name] - step}
        expected = (gmm_log_posterior(*up.values(), x, m, gamma)
                    - gmm_log_posterior(*down.values(), x, m, gamma)) / 2e-6
        close(np.asarray(jacobian[name])[index], expected, 1e-6)


def test_gmm():
    m, gamma = 1, 0.8
    parameters, x, objective, jacobian = _gmm_run(5, 5, 2, 6, m, gamma)
    close(objective, gmm_log_posterior(*parameters.values(), x, m, gamma))
    assert set(jacobian) == {"alpha", "mu", "q", "l"}
    for name, value in parameters.items():
        # central differences of the definition, one parameter at a time
        expected = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            step = np.zeros_like(value)
            step[index] = 1e-6
            up = parameters | {name: value + step}
            down = parameters | {name: value - step}
            expected[index] = (gmm_log_posterior(*up.values(), x, m, gamma)
                               - gmm_log_posterior(*down.values(), x, m, gamma)) / 2e-6
        close(jacobian[name], expected, 1e-6)


def lstm_loss(main, extra, state, sequence):
    """ADBench's LSTM loss in NumPy: layers of diagonal LSTM cells, each character's bits
    predicted from the ones before, normalised by log (sum (exp y) + 2)."""
    b = sequence.shape[1]
    layers = len(main) // 2
    hidden = [state[2 * i].copy() for i in range(layers)]
    cell = [state[2 * i + 1].copy() for i in range(layers)]
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    total = 0.0
    for t in range(len(sequence) - 1):
        x = sequence[t] * extra[0]
        for i in range(layers):
            w, c = main[2 * i].reshape(4, b), main[2 * i + 1].reshape(4, b)
            forget = sigmoid(x * w[0] + c[0])
            ingate = sigmoid(hidden[i] * w[1] + c[1])
            outgate = sigmoid(x * w[2] + c[2])
            change = np.tanh(hidden[i] * w[3] + c[3])
            cell[i] = cell[i] * forget + ingate * change
            hidden[i] = outgate * np.tanh(cell[i])
            x = hidden[i]
        y = x * extra[1] + extra[2]
        total += sequence[t + 1] @ (y - np.log(np.exp(y).sum() + 2))
    return -total / ((len(sequence) - 1) * b)


def test_lstm():
    rng = np.random.default_rng(6)
    layers, b, c = 2, 3, 5
    main, extra = rng.random((2 * layers, 4 * b)), rng.random((3, b))
    state, sequence = rng.random((2 * layers, b)), rng.integers(0, 2, (c, b)).astype(float)
    inputs = {"main_params": main.tolist(), "extra_params": extra.tolist(),
              "state": state.tolist(), "sequence": sequence.tolist()} | RUNS
    objective, jacobian = run_module("lstm", [("objective", inputs), ("jacobian", inputs)])
    close(objective, lstm_loss(main, extra, state, sequence))
    flat = np.concatenate([main.ravel(), extra.ravel()])

    def loss_of(v):
        return lstm_loss(v[:main.size].reshape(main.shape), v[main.size:].reshape(extra.shape),
                         state, sequence)

    steps = np.eye(flat.size) * 1e-6
    close(jacobian, [(loss_of(flat + e) - loss_of(flat - e)) / 2e-6 for e in steps], 1e-7)


def test_every_module_of_the_tool_has_a_program_defining_its_functions():
    from lambdad import load
    from lambdad.gradbench import MODULES, PROGRAMS

    for module, functions in MODULES.items():
        names = load(PROGRAMS / f"{module}.lam").names()
        needed = {name for function_name, function in functions.items()
                  for name in (function_name, *function.also)}
        assert needed <= set(names), module


def ba_reprojection(cam, x, w, feat):
    """ADBench's reprojection error of the point x seen by the camera, in NumPy."""
    rot, centre = cam[:3], cam[3:6]
    pt = x - centre
    theta = np.sqrt(rot @ rot)
    axis = rot / theta
    seen = (pt * np.cos(theta) + np.cross(axis, pt) * np.sin(theta)
            + axis * (axis @ pt) * (1 - np.cos(theta)))
    projected = seen[:2] / seen[2]
    rsq = projected @ projected
    projected = projected * (1 + cam[9] * rsq + cam[10] * rsq * rsq)
    return w * (projected * cam[6] + cam[7:9] - feat)


def test_ba():
    rng = np.random.default_rng(7)
    n, m, p = 3, 4, 12
    cam = np.concatenate([rng.normal(size=3), rng.normal(size=3) * 5,
                          [400.0], rng.normal(size=2), rng.normal(size=2) * 0.01])
    x, w, feat = rng.normal(size=3) * 5 + [0, 0, 60], 0.4, rng.normal(size=2) * 100
    inputs = {"n": n, "m": m, "p": p, "cam": cam.tolist(), "x": x.tolist(), "w": w,
              "feat": feat.tolist()} | RUNS
    objective, jacobian = run_module("ba", [("objective", inputs), ("jacobian", inputs)])
    error = ba_reprojection(cam, x, w, feat)
    assert objective["reproj_error"]["repeated"] == p
    close(objective["reproj_error"]["elements"], error)
    assert objective["w_err"] == {"element": 1 - w * w, "repeated": p}
    # the first observation's two rows: its camera's 11 columns, its point's 3, its
    # weight's; the values by central differences
    point = np.concatenate([cam, x, [w]])
    steps = np.eye(15) * 1e-6
    derivatives = np.array([(ba_reprojection(*np.split(point + e, [11, 14]), feat)
                             - ba_reprojection(*np.split(point - e, [11, 14]), feat)) / 2e-6
                            for e in steps]).T  # 2 x 15
    columns = [*range(11), 11 * n, 11 * n + 1, 11 * n + 2, 11 * n + 3 * m]
    assert jacobian["cols"] == columns * 2 + [11 * n + 3 * m + p - 1]
    assert jacobian["rows"] == [15 * i for i in range(2 * p + 1)] + \
        [30 * p + i for i in range(1, 6)] + [31 * p]
    close(jacobian["vals"], [*derivatives[0], *derivatives[1], -2 * w], 1e-6)


def test_a_result_the_eval_cannot_take_is_an_error_in_the_answer(tmp_path):
    # ba's output names the first observation's errors: with none, there is nothing to send
    (tmp_path / "ba.lam").write_text(
        "def objective n m p cam x w feat : [R] * [R] = ([], [])\n"
        "def jacobian n m p cam x w feat : [R] * [R] * [R] = ([], [], [])\n")
    answers, stderr, status = session([
        {"kind": "define", "module": "ba"},
        {"kind": "evaluate", "module": "ba", "function": "objective",
         "input": {"n": 1, "m": 1, "p": 0, "cam": [0.0], "x": [0.0], "w": 1, "feat": [0.0]}},
    ], "--programs", str(tmp_path))
    assert status == 0
    assert answers[1]["success"] is False
    assert "does not have the form the eval expects" in answers[1]["error"]


def ht_reference(theta, us, model, correspondences, points):
    """ADBench's hand-tracking errors in NumPy, for complex theta and us too (so that the
    complex step differentiates it): the vertices skinned by the bones' posed transforms,
    turned by theta's angle-axis rotation and moved by its translation."""
    bones = len(model["parents"])
    angles = np.zeros((bones, 2), dtype=complex)  # (about x, about z) per bone
    for finger in range(5):
        first, t = 2 + 4 * finger, 6 + 4 * finger
        angles[first] = theta[t], theta[t + 1]
        angles[first + 1, 0], angles[first + 2, 0] = theta[t + 2], theta[t + 3]
    absolutes = []
    for bone in range(bones):
        ax, az = angles[bone]
        rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
        rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
        posed = np.eye(4, dtype=complex)
        posed[:3, :3] = rz @ rx
        relative = np.asarray(model["base_relatives"][bone]) @ posed
        parent = model["parents"][bone]
        absolutes.append(relative if parent < 0 else absolutes[parent] @ relative)
    base = np.asarray(model["base_positions"]).T  # 4 x vertices
    weights = np.asarray(model["weights"])  # vertices x bones
    vertices = sum((absolutes[b] @ np.asarray(model["inverse_base_absolutes"][b]) @ base)[:3]
                   * weights[:, b] for b in range(bones))
    if model["is_mirrored"]:
        vertices[0] *= -1
    w = theta[:3]
    norm = np.sqrt(w @ w)
    x, y, z = w / norm
    cross = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    rotation = np.cos(norm) * np.eye(3) + np.sin(norm) * cross \
        + (1 - np.cos(norm)) * np.outer([x, y, z], [x, y, z])
    vertices = rotation @ vertices + theta[3:6, None]
    if len(us) == 0:
        model_points = vertices[:, correspondences].T
    else:
        corners = np.asarray(model["triangles"])[correspondences]  # points x 3
        us = np.asarray(us)
        model_points = (us[:, :1] * vertices[:, corners[:, 0]].T
                        + us[:, 1:] * vertices[:, corners[:, 1]].T
                        + (1 - us[:, :1] - us[:, 1:]) * vertices[:, corners[:, 2]].T)
    return (np.asarray(points) - model_points).reshape(-1)


def ht_input(rng, complicated, mirrored=False):
    """A random hand of 22 bones (the wrist, four for each finger, the forearm) and 7
    vertices, and 5 points on it."""
    parents = [-1] + [b - 1 if (b - 1) % 4 else 0 for b in range(1, 21)] + [0]

    def transform():
        turn, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        affine = np.eye(4)
        affine[:3, :3], affine[:3, 3] = turn, rng.normal(size=3)
        return affine.tolist()

    vertices, points = 7, 5
    weights = rng.uniform(size=(vertices, 22))
    model = {"bone_count": 22, "bone_names": [f"bone{b}" for b in range(22)],
             "parents": parents,
             "base_relatives": [transform() for _ in range(22)],
             "inverse_base_absolutes": [transform() for _ in range(22)],
             "base_positions": np.hstack([rng.normal(size=(vertices, 3)),
                                          np.ones((vertices, 1))]).tolist(),
             "weights": (weights / weights.sum(axis=1, keepdims=True)).tolist(),
             "triangles": [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6, 0, 3]],
             "is_mirrored": mirrored}
    correspondences = [3, 0, 2, 1, 3] if complicated else [6, 0, 4, 4, 1]
    return {"theta": (rng.normal(size=26) * 0.5).tolist(),
            "data": {"model": model, "correspondences": correspondences,
                     "points": rng.normal(size=(points, 3)).tolist()},
            "us": rng.uniform(0, 0.5, size=(points, 2)).tolist() if complicated else []}


@pytest.mark.parametrize("complicated,mirrored", [(False, False), (True, False), (True, True)])
def test_ht(complicated, mirrored):
    rng = np.random.default_rng(11 + complicated + 2 * mirrored)
    inputs = ht_input(rng, complicated, mirrored)
    objective, jacobian = run_module("ht", [("objective", inputs | RUNS),
                                            ("jacobian", inputs | RUNS)])
    theta, us = np.array(inputs["theta"]), np.array(inputs["us"])
    data = inputs["data"]

    def errors(theta, us):
        return ht_reference(theta, us, data["model"], data["correspondences"], data["points"])

    close(objective, errors(theta, us).real)
    # the Jacobian by the complex step, a column per parameter of theta; in the complicated
    # variant first two columns for each point's own u0 and u1 (its rows only)
    step = 1e-20
    by_theta = np.array([errors(theta + 1j * step * e, us).imag / step for e in np.eye(26)]).T
    if complicated:
        by_us = np.zeros((len(objective), 2))
        for point in range(len(us)):
            for k in range(2):
                moved = us.astype(complex)
                moved[point, k] += 1j * step
                by_us[3 * point:3 * point + 3, k] = \
                    errors(theta, moved).imag[3 * point:3 * point + 3] / step
        by_theta = np.hstack([by_us, by_theta])
    assert np.shape(jacobian) == (3 * len(data["points"]), 28 if complicated else 26)
    close(jacobian, by_theta)


def test_ht_input_without_a_field_or_with_a_wrong_one_is_an_error_in_the_answer():
    inputs = ht_input(np.random.default_rng(3), True) | RUNS
    no_points = inputs | {"data": {k: v for k, v in inputs["data"].items() if k != "points"}}
    mirrored = inputs | {"data": inputs["data"] | {
        "model": inputs["data"]["model"] | {"is_mirrored": 1}}}
    answers, _, status = session([
        {"kind": "define", "module": "ht"},
        {"kind": "evaluate", "module": "ht", "function": "objective", "input": no_points},
        {"kind": "evaluate", "module": "ht", "function": "jacobian", "input": mirrored},
    ])
    assert status == 0
    assert answers[1] == {"id": 1, "success": False,
                          "error": "the input has no field `data.points`"}
    assert answers[2]["success"] is False and "is_mirrored` must be a boolean" in answers[2]["error"]
