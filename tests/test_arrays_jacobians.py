"""Jacobians of functions of arrays by forward mode (a run per element of each input
array) agree with reverse mode (a backward pass per output real), through the API, the
CLI, and `jacfwd` in a program, also when that program is differentiated again."""

import subprocess
import sys

import numpy as np
import pytest

import lambdad

SOURCE = """
def cubes (x : Vec) : [R] = tolist (x * x * x)
def mixed (p : R * Mat) : [R] = let (c, m) = p in [c * sum (m * m), sum (m * m * m)]
def squares (m : Mat) : Mat = m * m + transpose m
def total (acc : R) (r : Vec) : R = acc + sum r
def traced (x : Vec) : R = fold total 0 (jacfwd cubes x)
def weigh (acc : R) (r : R * Mat) : R = let (a, b) = r in acc + a * a + sum b
def folded (p : R * Mat) : R = fold weigh 0 (jacfwd mixed p)
def main = jacfwd cubes (array [1, 2, 3])
"""

X = np.array([1.0, 2.0, 3.0])
M = np.array([[1.0, 2.0], [3.0, 4.0]])


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE)


@pytest.mark.parametrize("name, point, expected", [
    ("cubes", X, np.diag(3 * X ** 2)),
    ("mixed", (2.0, M), np.array([[np.sum(M * M), *(4 * M).ravel()],
                                  [0.0, *(3 * M ** 2).ravel()]])),
    ("squares", M, np.diag(2 * M.ravel()) + np.eye(4)[[0, 2, 1, 3]]),
])
def test_forward_and_reverse_jacobians_of_array_inputs_agree(program, name, point, expected):
    forward = program.jacobian(name, point, mode="forward")
    reverse = program.jacobian(name, point, mode="reverse")
    assert np.allclose(np.array(forward.matrix), expected)
    assert np.allclose(np.array(reverse.matrix), expected)
    assert forward.inputs == reverse.inputs and forward.outputs == reverse.outputs


def test_jacobian_names_array_elements_on_both_sides(program):
    result = program.jacobian("squares", M, mode="forward")
    assert result.inputs == ["m[0][0]", "m[0][1]", "m[1][0]", "m[1][1]"]
    assert result.outputs == ["squares[0][0]", "squares[0][1]", "squares[1][0]",
                              "squares[1][1]"]
    # the gradient of each output element, in the shape of the input, by element
    assert np.allclose(result.jacobian[0][1], [[0, 4], [1, 0]])


def test_forward_rows_keep_the_point_shape(program):
    result = program.jacobian("mixed", (2.0, M), mode="forward")
    c, m = result.jacobian[1]
    assert c == 0.0 and np.allclose(m, 3 * M ** 2)


def test_jacfwd_in_a_program_runs_along_each_element(program):
    rows = program.run()
    assert [list(row) for row in rows] == [[3, 0, 0], [0, 12, 0], [0, 0, 27]]


def test_jacfwd_of_an_array_differentiated_again(program):
    # traced x = sum 3 x^2: gradient 6 x; the directional derivative along ones is sum 6 x
    _, gradient = program.value_and_grad("traced", X)
    assert np.allclose(gradient, 6 * X)
    _, along = program.jvp("traced", X, np.ones(3))
    assert along == pytest.approx(36.0)
    # folded (c, m) = (sum m^2)^2 + sum (2 c m) + sum (3 m^2)
    _, (gc, gm) = program.value_and_grad("folded", (2.0, M))
    assert gc == pytest.approx(2 * M.sum())
    assert np.allclose(gm, 4 * np.sum(M * M) * M + 2 * 2.0 + 6 * M)


def test_jacobian_cli_forward_mode_on_a_matrix(tmp_path):
    source = tmp_path / "squares.lam"
    source.write_text(SOURCE)
    done = subprocess.run([sys.executable, "-m", "lambdad", "jacobian", str(source), "squares",
                           "--at", "[[1, 2], [3, 4]]", "--mode", "forward"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "4 outputs x 4 inputs, forward mode" in done.stdout
    assert "squares[1][0]" in done.stdout and "m[0][1]" in done.stdout
