"""Arrays (LANGUAGE.md section 9, AD.md section 10): Vec and Mat are ground types, computed
by NumPy, differentiated with one backpropagator per array value."""

import json
import subprocess
import sys

import numpy as np
import pytest

import lambdad
from lambdad.arraylib import Sparse, one_hot
from lambdad.errors import LambdadError

PROGRAM = """
def loss (w : Vec) (x : Mat) (y : Vec) : R =
  let z = x @ w in
  mean (log (1 + exp z) - y * z)

def mlp (w : Mat) (b : Vec) (xs : Mat) : R = mean (tanh (xs @ transpose w + b))
def lse (x : Vec) : R = logsumexp x
def rows_lse (m : Mat) : R = sum (logsumexp_rows m)
def peak (x : Vec) : R = maximum x + sum (maximum_rows (outer x x))
def pick (v : Vec) : R = fold (\\acc i -> acc + v !! i * v !! i) 0 (range (size v))
def convert (v : Vec) : R = sum (array (map (\\x -> x * x) (tolist v)))
def cut (v : Vec) : R = sum (slice v 1 3 * (concatenate v v !! 0))
def shapes (v : Vec) : R = sum (flatten (reshape (concatenate v v) 2 (size v)) * 2)
def powers (t : Vec) (x : Vec) : R =
  let m = stack (map (\\(ti : R) -> ti ^ arange (size x)) (tolist t)) in
  0.5 * sum ((sign t - m @ x) ^ 2)
def mixed (a : R) (v : Vec) : R = sum (a * v + sin v / (2 + cos a)) + dot v v
def piecewise (v : Vec) : R = sum (heaviside v * v + (1 - heaviside v) * 0.1 * v)
def leaky (v : Vec) (w : Vec) : R = sum (where (v > w) (v * w) (0.1 * v)) + sum (v <= 0)
def cubic (x : Vec) : R = sum (x * x * x) + logsumexp x
"""

RNG = np.random.default_rng(7)
POINTS = {
    "loss": (RNG.normal(size=2), RNG.normal(size=(3, 2)), np.array([0.0, 1.0, 1.0])),
    "mlp": (RNG.normal(size=(3, 4)), RNG.normal(size=3), RNG.normal(size=(5, 4))),
    "lse": RNG.normal(size=5),
    "rows_lse": RNG.normal(size=(3, 4)),
    "peak": np.array([0.3, -1.2, 2.5, 0.7]),
    "pick": RNG.normal(size=4),
    "convert": RNG.normal(size=4),
    "cut": RNG.normal(size=4),
    "shapes": RNG.normal(size=3),
    "powers": (np.linspace(-1, 1, 6) + 0.05, RNG.normal(size=4)),
    "mixed": (0.4, RNG.normal(size=4)),
    "piecewise": np.array([0.5, -0.3, 1.5]),
    "leaky": (np.array([0.5, -0.3, 1.5, 2.0]), np.array([0.2, 0.1, 1.7, -1.0])),
    "cubic": RNG.normal(size=3),
}


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(PROGRAM)


def _finite_differences(f, point, eps=1e-6):
    """The gradient of ``f`` at ``point`` (a float, an array or a tuple of them) by central
    differences, in the shape of the point."""
    if isinstance(point, tuple):
        parts = []
        for k in range(len(point)):
            def partial(z, k=k):
                return f(point[:k] + (z,) + point[k + 1:])
            parts.append(_finite_differences(partial, point[k], eps))
        return tuple(parts)
    if isinstance(point, float):
        return (f(point + eps) - f(point - eps)) / (2 * eps)
    grad = np.zeros_like(point)
    for i in np.ndindex(point.shape):
        step = np.zeros_like(point)
        step[i] = eps
        grad[i] = (f(point + step) - f(point - step)) / (2 * eps)
    return grad


def _flat(value):
    """A gradient of several parameters, nested as right-nested pairs, as a flat tuple."""
    items = []
    while isinstance(value, tuple) and len(value) == 2:
        items.append(value[0])
        value = value[1]
    return tuple(items) + (value,) if items else value


def _close(a, b, tol=1e-5):
    a, b = _flat(a), _flat(b)
    if isinstance(a, tuple):
        return all(_close(x, y, tol) for x, y in zip(a, b))
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=tol, rtol=tol)


def test_array_types_are_inferred_and_printed(program):
    assert str(program.scheme("loss")) == "Vec -> Mat -> Vec -> R"
    assert str(program.scheme("mlp")) == "Mat -> Vec -> Mat -> R"
    p = lambdad.loads("def f (m : Mat) (v : Vec) = (m @ v, v @ m, m @ m, v @ v, m !! 0)")
    assert str(p.scheme("f")) == "Mat -> Vec -> Vec * Vec * Mat * R * Vec"


def test_scalar_definitions_keep_their_types():
    p = lambdad.loads("def f x = x * 2 + sin x\ndef g (xs : [R]) = sum xs")
    assert str(p.scheme("f")) == "R -> R"
    assert str(p.scheme("g")) == "[R] -> R"
    assert p.call("g", [1.0, 2.0]) == 3.0


@pytest.mark.parametrize("name", sorted(POINTS))
def test_reverse_gradient_agrees_with_finite_differences(program, name):
    point = POINTS[name]
    value, gradient = program.value_and_grad(name, point)
    assert value == pytest.approx(program.call(name, point))
    expected = _finite_differences(lambda z: program.call(name, z), point)
    assert _close(gradient, expected), (gradient, expected)


@pytest.mark.parametrize("name", sorted(POINTS))
def test_forward_gradient_agrees_with_reverse(program, name):
    point = POINTS[name]
    _, reverse = program.value_and_grad(name, point)
    _, forward = program.value_and_grad(name, point, mode="forward")
    assert _close(forward, reverse, 1e-9)


def test_gradients_are_numpy_arrays_of_the_inputs_shapes(program):
    w, x, y = POINTS["loss"]
    _, gradient = program.value_and_grad("loss", (w, x, y))
    gw, gx, gy = _flat(gradient)
    assert isinstance(gw, np.ndarray) and gw.shape == w.shape
    assert gx.shape == x.shape and gy.shape == y.shape


def test_points_may_be_lists_fitted_to_array_types(program):
    assert program.call("lse", [1.0, 2.0, 3.0]) == pytest.approx(
        float(np.log(np.exp([1.0, 2.0, 3.0]).sum())))
    value = program.call("loss", ([0.5, -0.25], [[1, 2], [3, 4]], [0, 1]))
    assert value == pytest.approx(program.call(
        "loss", (np.array([0.5, -0.25]), np.array([[1.0, 2], [3, 4]]), np.array([0.0, 1]))))


def test_hessian_vector_products_of_array_programs():
    p = lambdad.loads(PROGRAM + "def hv (x : Vec) (v : Vec) : Vec = hvp cubic x v\n")
    x, v = np.array([1.0, 2.0, 0.5]), np.array([1.0, -1.0, 0.5])
    s = np.exp(x) / np.exp(x).sum()
    hessian = np.diag(6 * x) + np.diag(s) - np.outer(s, s)
    assert np.allclose(p.call("hv", (x, v)), hessian @ v)


def test_the_maximum_shares_its_derivative_among_ties():
    p = lambdad.loads("def f (x : Vec) : R = maximum x")
    _, g = p.value_and_grad("f", np.array([1.0, 3.0, 3.0, 0.0]))
    assert g.tolist() == [0.0, 0.5, 0.5, 0.0]


def test_elements_read_in_a_loop_send_sparse_cotangents():
    # (a !! i inside a fold: each read sends a one-hot cotangent kept as (position, value))
    x = np.zeros(1000)
    total = one_hot(x, 3.0, 2.0)
    for i in range(5):
        total = total + one_hot(x, float(i), 1.0)
    assert isinstance(total, Sparse) and len(total.entries()[0]) == 6
    dense = total + np.zeros(1000)
    assert dense[3] == 3.0 and dense[0] == 1.0 and dense.sum() == 7.0


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_printed_array_programs_parse_type_check_and_run(program, tmp_path, mode):
    shown = program.show("loss", forward=mode == "forward", reverse=mode == "reverse")
    again = lambdad.loads(shown)
    w, x, y = POINTS["loss"]
    if mode == "forward":
        dw = np.array([1.0, 0.0])
        value, tangent = again.call("loss", ((w, dw), (x, np.zeros_like(x)),
                                            (y, np.zeros_like(y))))
        assert value == pytest.approx(program.call("loss", (w, x, y)))
        assert tangent == pytest.approx(_flat(program.value_and_grad("loss", (w, x, y))[1])[0][0])
    else:
        assert "Vec -o d" in shown and "Mat -o d" in shown


def test_shape_mismatches_are_located_errors_naming_both_shapes():
    p = lambdad.loads("def f (m : Mat) (v : Vec) : Vec = m @ v\n"
                      "def g (u : Vec) (v : Vec) : Vec = u + v\n")
    with pytest.raises(LambdadError) as caught:
        p.call("f", (np.ones((2, 3)), np.ones(2)))
    assert "Mat[2x3]" in caught.value.message and "Vec[2]" in caught.value.message
    assert caught.value.span is not None and caught.value.span.line == 1
    with pytest.raises(LambdadError) as caught:
        p.call("g", (np.ones(3), np.ones(2)))
    assert "Vec[3] and Vec[2]" in caught.value.message


def test_rank_errors_are_type_errors():
    with pytest.raises(LambdadError) as caught:
        lambdad.loads("def f (m : Mat) : R = dot m m")
    assert "Mat" in caught.value.message
    with pytest.raises(LambdadError) as caught:
        lambdad.loads("def f (u : Vec) : R = sum (u @ u @ u)")
    assert "`@`" in caught.value.message


def test_overflows_are_located_errors_with_numpys_warnings_left_as_they_were():
    # A run of array operations turns NumPy's floating-point warnings off once (the
    # operations check their results) and puts them back after, also after an error.
    p = lambdad.loads("def f (v : Vec) : R = sum (1 / exp (exp v))")
    before = np.geterr()
    with np.errstate(all="raise"):
        with pytest.raises(LambdadError) as caught:
            p.call("f", np.array([1.0, 800.0]))
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise",
                               "invalid": "raise"}
        value, gradient = p.value_and_grad("f", np.array([1.0, 2.0]))
        assert np.geterr()["over"] == "raise"
    assert "exp gave a result that is not finite" in caught.value.message
    assert caught.value.span is not None and caught.value.span.col == 37  # (exp 800)
    assert np.geterr() == before
    assert value == pytest.approx(np.sum(1 / np.exp(np.exp([1.0, 2.0]))))
    assert gradient.shape == (2,)


def test_domain_errors_name_the_element():
    p = lambdad.loads("def f (v : Vec) : Vec = log v")
    with pytest.raises(LambdadError) as caught:
        p.call("f", np.array([1.0, -2.0]))
    assert "log needs positive numbers" in caught.value.message
    assert "element [1] is -2.0" in caught.value.message


def test_values_print_in_the_language_syntax(program):
    p = lambdad.loads("def main = (array [1, 2.5], matrix [[1, 2], [3, 4]])")
    from lambdad.values import format_value
    shown = format_value(p.value_of("main"))
    assert shown == "(array [1, 2.5], matrix [[1, 2], [3, 4]])"


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "lambdad", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_cli_points_in_the_language_syntax_and_json(tmp_path):
    source = tmp_path / "reg.lam"
    source.write_text(PROGRAM)
    done = _cli("grad", str(source), "lse", "--at", "array [1, 2, 3]")
    assert done.returncode == 0, done.stderr
    assert "gradient: array [" in done.stdout
    done = _cli("grad", str(source), "loss", "--at", "([0.5, -0.25], [[1, 2], [3, 4]], [0, 1])",
                "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert len(result["gradient"]) == 3 and len(result["gradient"][1]) == 2
    assert len(result["gradient"][1][0]) == 2


def test_cli_shape_error_has_a_caret(tmp_path):
    source = tmp_path / "bad.lam"
    source.write_text("def f (u : Vec) (v : Vec) : R = sum (u * v)\n")
    done = _cli("grad", str(source), "f", "--at", "(array [1, 2], array [1, 2, 3])")
    assert done.returncode == 1
    assert "Vec[2] and Vec[3]" in done.stderr and "^" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_tutorial_classifier_trains_on_the_breast_cancer_data():
    """docs/examples/breast_cancer.py (the tutorial's section on arrays) runs and prints the
    accuracy the tutorial shows."""
    pytest.importorskip("sklearn", reason="scikit-learn (the `data` extra) is not installed")
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "docs/examples/breast_cancer.py"], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    from pathlib import Path
    tutorial = (Path(root) / "docs" / "tutorial.md").read_text(encoding="utf-8")
    assert done.stdout in tutorial, done.stdout
    assert "test accuracy 0.9" in done.stdout


def test_points_read_from_json_npy_and_npz_files(tmp_path):
    source = tmp_path / "reg.lam"
    source.write_text(PROGRAM)
    w, x, y = [0.5, -0.25], [[1.0, 2.0], [3.0, 4.0]], [0.0, 1.0]
    (tmp_path / "point.json").write_text(json.dumps({"w": w, "x": x, "y": y}))
    np.savez(tmp_path / "point.npz", w=np.array(w), x=np.array(x), y=np.array(y))
    np.save(tmp_path / "v.npy", np.array([1.0, 2.0, 3.0]))
    written = _cli("grad", str(source), "loss", "--at", f"({w}, {x}, {y})", "--json")
    for name in ("point.json", "point.npz"):
        done = _cli("grad", str(source), "loss", "--at", f"@{tmp_path / name}", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["gradient"] == json.loads(written.stdout)["gradient"]
    done = _cli("grad", str(source), "lse", "--at", f"@{tmp_path / 'v.npy'}")
    assert done.returncode == 0 and "gradient: array [" in done.stdout


def test_a_point_file_that_cannot_be_read_is_a_usage_error(tmp_path):
    source = tmp_path / "reg.lam"
    source.write_text(PROGRAM)
    (tmp_path / "bad.json").write_text('{"w": [1, 2,')
    done = _cli("grad", str(source), "lse", "--at", f"@{tmp_path / 'bad.json'}")
    assert done.returncode == 2 and "bad.json:1:13: not JSON" in done.stderr
    done = _cli("grad", str(source), "lse", "--at", f"@{tmp_path / 'none.json'}")
    assert done.returncode == 2 and "no file" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_samples_points_of_the_shapes_of_the_programs_weights():
    """A function of arrays fits the shapes of its data: `check` draws points shaped like
    the program's own definition of the function's input type (its initial weights)."""
    from lambdad import gradcheck
    p = lambdad.loads("def data : Mat = reshape (arange 12) 4 3\n"
                      "def initial : Vec = zeros 3\n"
                      "def loss (w : Vec) : R = sum (tanh (data @ w))\n")
    report = gradcheck.check(p, "loss", samples=2, seed=0)
    assert report.ok, report.render()
    assert len(report.functions[0].checks) == 2


def test_repeated_calls_with_list_points_make_them_arrays_each_time(program):
    # (the second call takes the cached plan of the first)
    for _ in range(3):
        assert program.call("lse", [1.0, 2.0]) == pytest.approx(
            float(np.log(np.exp(1.0) + np.exp(2.0))))
        value, gradient = program.value_and_grad("lse", [1.0, 2.0])
        assert isinstance(gradient, np.ndarray) and gradient.shape == (2,)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_show_at_an_array_point_prints_a_program_computing_the_gradient(program, mode):
    shown = program.show("loss", forward=mode == "forward", reverse=mode == "reverse",
                         at="([0.5, -0.25], [[1, 2], [3, 4]], [0, 1])")
    value, gradient = lambdad.loads(shown).run()
    expected_value, expected = program.value_and_grad(
        "loss", ([0.5, -0.25], [[1.0, 2.0], [3.0, 4.0]], [0.0, 1.0]))
    assert value == pytest.approx(expected_value)
    assert _close(gradient, expected, 1e-12)
    if mode == "reverse":
        assert "(array [0.5, -0.25], seed 0)" in shown  # one seed per array


def test_one_hot_is_a_dense_array_in_a_program_and_a_direction_for_jvp():
    # (in a backpropagator's body it stays sparse: reads in loops cost one element each)
    program = lambdad.loads(
        "def f (t : Vec) : Vec = t * t\n"
        "def b (theta : Vec) : Vec = snd (jvp f theta (one_hot theta 1 1))\n"
        "def main = one_hot (array [1, 2, 3]) 1 5\n")
    value = program.run()
    assert isinstance(value, np.ndarray) and value.tolist() == [0.0, 5.0, 0.0]
    assert program.call("b", np.array([1.0, 2.0, 3.0])).tolist() == [0.0, 4.0, 0.0]


def test_an_array_taken_twice_with_one_partial_receives_its_cotangent_doubled():
    # ←D(z * z) sends z one cotangent, doubled, not two equal ones summed; the real `x * x`
    # and operands with different partials keep the rule's two terms
    program = lambdad.loads(
        "def sq (z : Vec) : R = sum (z * z)\n"
        "def cube (z : Mat) : R = sum (z * z * z)\n"
        "def real (x : R) : R = x * x\n"
        "def ratio (x : Vec) : R = sum (x / x + exp x * x)\n")
    assert "z_ (2 * sum_to z (z * a))" in program.show("sq", reverse=True)
    assert "x_ (x * a) <+> x_ (x * a)" in program.show("real", reverse=True)
    assert "x_ (sum_to x (1 / x * a)) <+> x_ (sum_to x (-x / (x * x) * a))" in program.show(
        "ratio", reverse=True)
    z = np.array([0.5, -1.5, 2.0])
    m = np.array([[1.0, -2.0], [0.25, 3.0]])
    assert np.allclose(program.grad("sq", z), 2 * z)
    assert np.allclose(program.grad("cube", m), 3 * m * m)
    assert np.allclose(program.grad("ratio", z), np.exp(z) * (1 + z))
    for name, point in (("sq", z), ("cube", m), ("ratio", z)):
        # the strategies, forward mode and the tape agree
        reverse = program.grad(name, point)
        assert np.allclose(program.grad(name, point, mode="forward"), reverse)
        assert np.allclose(program.grad(name, point, strategy="naive"), reverse)


def test_powers_of_negative_bases_by_whole_exponents_and_the_domain_errors():
    # whole exponents >= 0 are defined at every base (told by the exponents alone, as for
    # llsq's matrix of powers); a fractional one of a negative base, or a negative one of
    # 0, is a located error naming the element
    program = lambdad.loads(
        "def p (t : Vec) (e : Vec) : R = sum (outer t (ones (size e)) ^ e)\n")
    t = np.array([-1.5, 0.0, 2.0])
    assert program.call("p", (t, np.arange(4.0))) == pytest.approx(
        float(np.sum(t[:, None] ** np.arange(4.0))))
    with pytest.raises(LambdadError, match=r"negative base needs a whole exponent.*"
                                           r"element \[0, 1\] is -1.5 with exponent 0.5"):
        program.call("p", (t, np.array([0.0, 0.5])))
    with pytest.raises(LambdadError, match=r"element \[1, 0\] is 0.0 with exponent -1.0"):
        program.call("p", (t, np.array([-1.0, 2.0])))


def test_softmax_weights_below_the_smallest_normal_float_are_zero_in_gradients():
    # logsumexp's derivative exp (x - r), computed in the backpropagator: a weight of
    # exp (-721.3), subnormal, is 0 there (arithmetic on subnormals is slow); the others
    # are the softmax's to the last bit
    program = lambdad.loads("def lse (x : Vec) : R = logsumexp x\n"
                            "def rows (m : Mat) : R = sum (logsumexp_rows m)\n")
    x = np.array([0.0, -720.0, 1.0, -30.0])
    weights = np.exp(x - np.logaddexp.reduce(x))
    assert 0.0 < weights[1] < np.finfo(float).tiny
    expected = np.where(weights < np.finfo(float).tiny, 0.0, weights)
    assert program.grad("lse", x).tobytes() == expected.tobytes()
    m = np.stack([x, x[::-1]])
    assert program.grad("rows", m).tobytes() == np.stack([expected, expected[::-1]]).tobytes()
    # forward mode computes the weight, subnormal, in the tangent
    assert np.allclose(program.grad("lse", x, mode="forward"), expected, rtol=0, atol=1e-300)


def test_a_cotangent_summed_down_the_rows_is_the_column_sums_of_any_layout():
    from lambdad.arraylib import sum_to

    c = RNG.normal(size=(7, 3))
    for layout in (c, np.asfortranarray(c), c.T.copy().T, np.broadcast_to(c[0], (7, 3))):
        assert np.allclose(sum_to(np.zeros(3), layout), layout.sum(axis=0), rtol=1e-14)
    assert sum_to(np.zeros(3), np.zeros((0, 3))).tolist() == [0.0, 0.0, 0.0]
    # a bias added to every row: its gradient is the column sums of the cotangent
    program = lambdad.loads("def f (m : Mat) (b : Vec) : R = sum (tanh (m + b))\n")
    m, b = RNG.normal(size=(50, 4)), RNG.normal(size=4)
    _, (_, gb) = program.value_and_grad("f", (m, b))
    assert np.allclose(gb, (1 - np.tanh(m + b) ** 2).sum(axis=0), rtol=1e-13)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_printed_second_order_array_programs_parse_type_check_and_run(mode):
    # `jvp (grad ...)` of matrices inside a definition, written out and transformed again:
    # the printed program's backpropagators take pairs of matrices over a ring of pairs of
    # reals (AD.md section 10), and `sum p` of a Mat is the array primitive elaborated
    # when the program was typed, typed again
    program = lambdad.loads(
        "def c (n : R) (p : Mat) (x : Mat) : R = n - sum (maximum_rows (p @ transpose x))\n"
        "def d (p : Mat) (x : Mat) : R = sum (fst (jvp (grad (c (sum p) p)) x x))\n")
    shown = program.show("d", forward=mode == "forward", reverse=mode == "reverse",
                         at="([[1, 2], [3, 4]], [[0.5, 1], [2, -1]])")
    value, gradient = lambdad.loads(shown).run()
    p, x = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.5, 1.0], [2.0, -1.0]])
    expected_value, expected = program.value_and_grad("d", (p, x))
    assert value == pytest.approx(expected_value)
    assert _close(gradient, expected, 1e-12)
