"""``gather x idx`` (LANGUAGE.md section 9): elements (rows) of an array read at a Vec of
whole-number indices, differentiated as JAX's ``take`` — the tangent is gathered the same
way, the cotangent scattered back and added up where an index repeats (``scatter``)."""

import subprocess
import sys

import numpy as np
import pytest

import lambdad
from lambdad.errors import LambdadError

PROGRAM = """
def picks (v : Vec) : Vec = gather v (array [2, 0, 2, 1])
def weighted (v : Vec) : R = sum (gather v (array [2, 0, 2, 1]) * array [1, 2, 3, 4])
def cubes (v : Vec) : R = sum (gather (v * v * v) (array [1, 1, 0, 3]))
def rowwise (m : Mat) : R = sum (tanh (gather m (array [1, 1, 0])) * array [1, 2])
def twice (v : Vec) : R = sum (sin (gather (gather v (arange 3 + 1)) (array [2, 2, 0])))
def hv (v : Vec) (u : Vec) : Vec = hvp cubes v u
def back (v : Vec) (c : Vec) : Vec = scatter v (array [1, 1, 0, 3]) c
"""

POINTS = {
    "weighted": np.array([0.5, -1.25, 2.0]),
    "cubes": np.array([0.3, -0.7, 1.1, 0.9]),
    "rowwise": np.array([[0.2, -0.4], [0.6, 0.1]]),
    "twice": np.array([0.1, 0.7, -0.3, 1.2]),
}


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(PROGRAM)


def _finite_differences(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


def test_gather_reads_elements_and_rows_in_the_order_given(program):
    assert str(program.scheme("picks")) == "Vec -> Vec"
    assert program.call("picks", np.array([10.0, 20.0, 30.0])).tolist() == [30, 10, 30, 20]
    rows = lambdad.loads("def f (m : Mat) : Mat = gather m (array [1, 0, 1])")
    assert str(rows.scheme("f")) == "Mat -> Mat"
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert rows.call("f", m).tolist() == [[3, 4], [1, 2], [3, 4]]


@pytest.mark.parametrize("name", sorted(POINTS))
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_gradients_agree_with_finite_differences(program, name, mode):
    x = POINTS[name]
    value, gradient = program.value_and_grad(name, x, mode=mode)
    assert value == pytest.approx(program.call(name, x))
    expected = _finite_differences(lambda z: program.call(name, z), x)
    assert np.allclose(gradient, expected, atol=1e-6), (gradient, expected)


def test_a_repeated_index_sums_its_cotangents(program):
    # elements 2, 0, 2, 1 weighted 1, 2, 3, 4: element 2 is read twice, with 1 and 3
    _, gradient = program.value_and_grad("weighted", np.array([0.5, -1.25, 2.0]))
    assert gradient.tolist() == [2.0, 4.0, 1.0 + 3.0]
    assert program.call("back", (np.zeros(4), np.array([1.0, 2.0, 4.0, 8.0]))).tolist() == [
        4.0, 3.0, 0.0, 8.0]


def test_hessian_vector_products_go_through_gather_and_scatter(program):
    v, u = np.array([0.3, -0.7, 1.1, 0.9]), np.array([1.0, 0.5, -2.0, 0.25])
    # cubes v = 2 v1^3 + v0^3 + v3^3: the Hessian is diagonal
    hessian = np.diag([6 * v[0], 12 * v[1], 0.0, 6 * v[3]])
    assert np.allclose(program.call("hv", (v, u)), hessian @ u)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_printed_derivative_programs_load_and_run(program, mode):
    shown = program.show("weighted", forward=mode == "forward", reverse=mode == "reverse",
                         at="array [0.5, -1.25, 2]")
    assert "gather" in shown and ("scatter" in shown) == (mode == "reverse")
    value, gradient = lambdad.loads(shown).run()
    assert value == pytest.approx(2.0 + 2 * 0.5 + 3 * 2.0 + 4 * -1.25)
    assert np.allclose(gradient, [2.0, 4.0, 4.0])


@pytest.mark.parametrize("indices, words", [
    ("array [0, 1.5]", "whole numbers, but element [1] is 1.5"),
    ("array [0, 3]", "out of range for Vec[3] (indices count from 0), element [1] is 3.0"),
    ("array [-1]", "out of range for Vec[3] (indices count from 0), element [0] is -1.0"),
])
def test_bad_indices_are_located_errors(indices, words):
    p = lambdad.loads(f"def f (v : Vec) : R =\n  sum (gather v ({indices}))\n")
    with pytest.raises(LambdadError) as caught:
        p.value_and_grad("f", np.array([1.0, 2.0, 3.0]))
    assert words in caught.value.message
    assert caught.value.span is not None and caught.value.span.line == 2


def test_indices_must_be_a_vec():
    with pytest.raises(LambdadError) as caught:
        lambdad.loads("def f (v : Vec) (m : Mat) : Vec = gather v m")
    assert "`gather`" in caught.value.message


def test_the_cli_shows_a_bad_index_with_a_caret(tmp_path):
    source = tmp_path / "bad.lam"
    source.write_text("def f (v : Vec) : R =\n  sum (gather v (array [0, 1.5]))\n")
    done = subprocess.run([sys.executable, "-m", "lambdad", "grad", str(source), "f", "--at",
                           "array [1, 2, 3]"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "bad.lam:2:8: runtime error: gather: the indices must be whole numbers" in done.stderr
    assert "^^^^" in done.stderr and "Traceback" not in done.stderr
