"""The example programs of programs/: each runs, passes the gradient check, and computes what
its comments say."""

import json
import math

import pytest

import lambdad
from lambdad import cli, gradcheck

from conftest import PROGRAMS

ALL = sorted(PROGRAMS.glob("*.lam"))


def lambdad_main(capsys, *args):
    """``lambdad ARGS`` run in this process; returns (exit status, stdout)."""
    status = cli.main([*args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out


def components(value, n):
    """The ``n`` components of a tuple, written flat in JSON as in text: (a, b, c) is the
    pair (a, (b, c)), so a last component that is itself a tuple continues the array."""
    assert len(value) >= n
    return value[:n - 1] + [value[n - 1] if len(value) == n else value[n - 1:]]


def run_json(capsys, name, n=2):
    """The ``n`` components of the value of ``main`` printed by ``lambdad run --json``."""
    status, out = lambdad_main(capsys, "run", str(PROGRAMS / name), "--json")
    assert status == 0
    return components(json.loads(out)["value"], n)


def test_there_are_examples():
    names = {path.name for path in ALL}
    assert {"combinators.lam", "lists.lam", "mlp.lam", "linear_regression.lam",
            "logistic_regression.lam", "sharing.lam"} <= names


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_example_runs(capsys, path):
    status, out = lambdad_main(capsys, "run", str(path))
    assert status == 0
    assert out.strip()


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_example_passes_the_gradient_check(path):
    report = gradcheck.check(lambdad.load(path))
    assert report.ok, report.render()
    assert report.functions, "no differentiable function was checked"


def test_combinators(capsys):
    quartic, d_quartic, d_wave, d_two_to, d_squared, d_mixed = run_json(capsys,
                                                                       "combinators.lam", 6)
    assert (quartic, d_quartic) == (16, 32)
    assert d_wave == pytest.approx(4 * math.cos(1))
    assert d_two_to == pytest.approx(8 * math.log(2))
    assert d_squared == 6
    a, b = 0.5, 1.5
    sech2 = 1 - math.tanh(a * b) ** 2
    assert d_mixed == pytest.approx([b * sech2 + 4 * a ** 3, a * sech2])


def test_lists(capsys):
    dot, d_dot, d_mean, d_squares, (norm, d_norm), d_variance, (d_lse, softmax) = run_json(
        capsys, "lists.lam", 7)
    assert (dot, d_dot, d_mean, d_squares) == (32, [4, 5, 6], [0.25] * 4, [2, 4, 6])
    assert norm == 5 and d_norm == pytest.approx([0.6, 0.8])
    xs = [1, 2, 3, 6]
    m = sum(xs) / len(xs)
    assert d_variance == pytest.approx([2 * (x - m) / len(xs) for x in xs])
    total = sum(math.exp(x) for x in range(3))
    assert softmax == pytest.approx([math.exp(x) / total for x in range(3)])
    assert d_lse == pytest.approx(softmax)


@pytest.mark.parametrize("name", ["linear_regression.lam", "logistic_regression.lam"])
def test_training_lowers_the_loss(capsys, name):
    before, after = run_json(capsys, name)
    assert after < before / 3


def test_linear_regression_fits_the_line():
    fitted = lambdad.load(PROGRAMS / "linear_regression.lam").run("fitted")
    assert fitted == pytest.approx((2, 1), abs=0.2)


def test_logistic_regression_classifies_most_points():
    program = lambdad.load(PROGRAMS / "logistic_regression.lam")
    before = program.call("accuracy", (0.0, 0.0, 0.0))
    after = program.call("accuracy", program.run("fitted"))
    assert after >= 0.75 > before


def test_mlp_loss_goes_down_and_gradient_has_the_weights_shape(capsys):
    before, after, gradient = run_json(capsys, "mlp.lam", 3)
    assert after < before / 3
    w1, b1, w2, b2 = components(gradient, 4)
    assert [len(row) for row in w1] == [3, 3, 3] and len(b1) == len(w2) == 3
    assert isinstance(b2, float)


@pytest.mark.parametrize("name, point", [("chain", 0.1), ("doubling", 1.0)])
def test_sharing_factored_runs_each_body_once_naive_does_not(name, point):
    program = lambdad.load(PROGRAMS / "sharing.lam")
    _, factored, fast = program.value_and_grad(name, point, strategy="factored", stats=True)
    _, naive, slow = program.value_and_grad(name, point, strategy="naive", stats=True)
    assert factored == pytest.approx(naive, rel=1e-9)
    assert fast.bodies_run <= fast.created
    assert slow.bodies_run > 1000 * fast.bodies_run


def test_sharing_counters_through_the_command_line(capsys):
    counts = {}
    for strategy in ("factored", "naive"):
        status, out = lambdad_main(capsys, "grad", str(PROGRAMS / "sharing.lam"), "doubling",
                                   "--at", "1", "--stats", "--strategy", strategy)
        assert status == 0
        lines = dict(line.split(": ", 1) for line in out.splitlines())
        assert lines["gradient"] == "65536"
        counts[strategy] = int(lines["backpropagator bodies run"])
    assert counts["naive"] == 2 ** 16 - 1
    assert counts["factored"] <= 2 * 16 + 1
