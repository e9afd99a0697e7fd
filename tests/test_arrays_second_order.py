"""Second derivatives of array programs: every composition of the modes (forward over
reverse, reverse over reverse, reverse over forward, forward over forward) gives the Hessian
a formula gives, and `check --order 2` compares them with finite differences of the
gradient."""

import subprocess
import sys

import numpy as np
import pytest

import lambdad
from lambdad import gradcheck
from lambdad.differentiate import COMPOSITIONS

SOURCE = """
def cube (x : Vec) : R = sum (x * x * x)
def lse (x : Vec) : R = logsumexp x
def inputs : Mat = matrix [[0.5, -1], [1.5, 0.25], [-0.75, 2]]
def targets : Vec = array [1, -1, 0.5]
def mlp (w : Mat) (v : Vec) : R =
  let h = tanh (inputs @ transpose w) in mean ((h @ v - targets) ^ 2)
def start : Mat * Vec = (matrix [[0.3, -0.2], [0.1, 0.4]], array [0.7, -1.1])
def along (y : Vec) : R = snd (jvp cube y (array [1, 0, 2]))
"""

X = np.array([1.0, 2.0, -0.5])
W = np.array([[0.3, -0.2], [0.1, 0.4]])
V = np.array([0.7, -1.1])


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE)


def _lse_hessian(x):
    p = np.exp(x - x.max())
    p /= p.sum()
    return np.diag(p) - np.outer(p, p)


@pytest.mark.parametrize("mode", COMPOSITIONS)
@pytest.mark.parametrize("name, expected", [
    ("cube", lambda x: np.diag(6 * x)),
    ("lse", _lse_hessian),
])
def test_every_composition_gives_the_hessian_of_a_function_of_a_vector(program, mode, name,
                                                                       expected):
    value, gradient, rows = program.hessian(name, X, mode=mode)
    assert all(type(row) is np.ndarray and row.shape == X.shape for row in rows)
    assert np.allclose(np.array(rows), expected(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", COMPOSITIONS)
def test_every_composition_gives_the_same_hessian_of_a_small_network(program, mode):
    reference = np.array([np.concatenate([a.ravel(), b])
                          for a, b in program.hessian("mlp", (W, V))[2]])
    _, _, rows = program.hessian("mlp", (W, V), mode=mode)
    assert all(a.shape == W.shape and b.shape == V.shape for a, b in rows)
    flat = np.array([np.concatenate([a.ravel(), b]) for a, b in rows])
    assert flat.shape == (6, 6) and np.allclose(flat, flat.T)
    assert np.allclose(flat, reference, rtol=1e-10, atol=1e-12)
    assert abs(flat[0, 0]) > 1e-3  # the loss really curves in the first weight


def test_hessian_vector_products_match_the_hessian(program):
    direction = np.array([0.5, -1.0, 2.0])
    _, _, product = program.hvp("lse", X, direction)
    assert np.allclose(product, _lse_hessian(X) @ direction)


def test_a_jvp_along_an_array_inside_a_program_is_differentiated_again(program):
    # d/dy of (3 y0^2 + 2 * 3 y2^2) is (6 y0, 0, 12 y2)
    assert program.call("along", X) == pytest.approx(3 * 1.0 + 2 * 3 * 0.25)
    _, gradient = program.value_and_grad("along", X)
    assert np.allclose(gradient, [6.0, 0.0, -6.0])
    for mode in COMPOSITIONS:
        assert np.allclose(np.array(program.hessian("along", X, mode=mode)[2]),
                           np.diag([6.0, 0.0, 12.0]))


def test_reverse_over_reverse_reads_off_a_dense_gradient_of_elements_put_in_an_array():
    # the inner gradient is a lazy sum of one-element cotangents; the outer level needs it
    # as an array
    program = lambdad.loads(
        "def h (y : Vec) : R = sum (array [y !! 0, 1] * array [y !! 1, y !! 2])")
    for mode in COMPOSITIONS:
        rows = program.hessian("h", X, mode=mode)[2]
        assert np.allclose(np.array(rows), [[0, 1, 0], [1, 0, 0], [0, 0, 0]]), mode


def test_a_program_takes_a_hessian_diagonal_of_a_reduction_of_a_whole_matrix():
    # `sum`, `mean` and `maximum` take a Vec or a Mat: a closure of one, differentiated
    # inside `jvp (grad ...)`, is typed by the Mat it is differentiated at
    program = lambdad.loads("""
def f (p : Mat) (c : Mat) : R = sum (p * c * c) + mean (c * c * c)
def diagonal (p : Mat) (c : Mat) : Mat = snd (jvp (grad (f p)) c (c * 0 + 1))
""")
    p, c = np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([[0.5, -2.0], [1.0, 4.0]])
    # d²/dc² of p c² + c³ / 4 elementwise, summed along the ones: 2 p + 6 c / 4
    assert np.allclose(program.call("diagonal", (p, c)), 2 * p + 1.5 * c)


@pytest.mark.parametrize("name", ["cube", "lse", "mlp"])
def test_second_order_check_passes_at_sampled_points(program, name):
    report = gradcheck.check_second_order(program, name, samples=2, seed=3)
    assert report.ok, report.render()
    assert len(report.checks) == 2
    inputs = report.checks[0].inputs
    assert len(inputs) == (3 if name != "mlp" else 4 + 2)  # mlp: the shapes of `start`


def test_second_order_check_names_each_entry_by_array_elements(program):
    report = gradcheck.check_second_order(program, "mlp", point=(W, V))
    assert report.ok, report.render()
    assert report.checks[0].inputs == ("w[0][0]", "w[0][1]", "w[1][0]", "w[1][1]", "v[0]",
                                       "v[1]")
    assert "w[1][0], v[1]" in report.render()


def test_second_order_check_catches_a_wrong_second_derivative(program, monkeypatch):
    original = lambdad.Program.hessian

    def skewed(self, name, point, mode="forward-over-reverse"):
        value, gradient, rows = original(self, name, point, mode=mode)
        if mode == "reverse-over-forward":
            rows = [row * 1.01 for row in rows]
        return value, gradient, rows

    monkeypatch.setattr(lambdad.Program, "hessian", skewed)
    report = gradcheck.check_second_order(program, "cube", point=X)
    assert not report.ok
    assert any("reverse-over-forward gives" in m for m in report.mismatches())


def test_check_cli_second_order_on_the_array_mlp():
    done = subprocess.run([sys.executable, "-m", "lambdad", "check", "programs/mlp_arrays.lam",
                           "loss", "--order", "2", "--at", "initial"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "second derivatives by every composition agree" in done.stdout
    assert "p.0[15][1], p.3" in done.stdout
