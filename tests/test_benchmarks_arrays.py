"""The array section of benchmarks/run.py: its hand-written NumPy gradients (the floor every
row is measured against) agree with finite differences, lambdad's list versions and the
peers compute the same functions, and the section runs end to end in a tiny configuration.
Nothing here is timed."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import array_workloads as aw  # noqa: E402

import lambdad  # noqa: E402


@functools.cache
def digits() -> tuple:
    return aw.digits()


def small_workloads(with_lists: bool = True) -> list:
    """One small size of each workload; two for the GMM (d = 2 has one entry in each lower
    triangle, d = 4 tests the packing column after column)."""
    return [aw.llsq(8, with_lists), aw.lse(50, with_lists), aw.mlp(12, with_lists, digits()),
            aw.gmm((2, 3), with_lists, n=20), aw.gmm((4, 3), with_lists, n=15)]


@pytest.mark.parametrize("index", range(5))
def test_floor_gradient_matches_finite_differences(index):
    w = small_workloads(with_lists=False)[index]
    assert aw.finite_difference_check(w, samples=6) < 1e-6, w.label


def test_floor_primal_is_the_value_of_its_value_and_gradient():
    for w in small_workloads(with_lists=False):
        value, gradient = aw.numpy_value_and_grad(w)()
        assert aw.numpy_primal(w)() == value
        assert [g.shape for g in gradient] == [p.shape for p in w.params], w.label


def test_a_wrong_gradient_is_caught_by_the_check():
    # The check can fail: the GMM's floor with its prior's derivative left out of q.
    w = aw.gmm((3, 2), with_lists=False, n=10)
    value, (d_alpha, d_mu, d_q, d_l) = aw.numpy_value_and_grad(w)()
    assert not aw.agrees((value, (d_alpha, d_mu, d_q + np.exp(2 * w.params[2]), d_l)),
                         value, (d_alpha, d_mu, d_q, d_l))
    assert aw.agrees((value, (d_alpha, d_mu, d_q, d_l)), value, (d_alpha, d_mu, d_q, d_l))


def test_gmm_constant_is_gradbench_normalisation():
    # d = 1, m = 0: n_p = 2, Gamma_1(1) = 1, so the prior's constant is k * 2 log(1 / sqrt 2).
    import math

    assert aw.gmm_constant(10, 1, 3) == pytest.approx(
        -10 * 0.5 * math.log(2 * math.pi) + 3 * 2 * math.log(1 / math.sqrt(2)))


@pytest.mark.parametrize("index", range(5))
def test_list_versions_compute_the_floors_function(index):
    w = small_workloads()[index]
    program = lambdad.loads(w.list_source, "<list version>")
    value, gradient = program.value_and_grad(w.list_name, w.list_point)
    floor_value, floor_gradient = aw.numpy_value_and_grad(w)()
    assert aw.agrees((value, w.list_gradient(gradient)), floor_value, floor_gradient), w.label
    assert program.call(w.list_name, w.list_point) == pytest.approx(floor_value, rel=1e-10)


def test_digits_fall_back_to_random_data_of_the_same_shape(monkeypatch):
    monkeypatch.setattr(aw, "installed", lambda module: module != "sklearn")
    images, labels, where = aw.digits()
    assert "random" in where and "scikit-learn is not installed" in where
    assert images.shape == (aw.DIGITS_ROWS, aw.MLP_INPUTS)
    assert labels.shape == (aw.DIGITS_ROWS, aw.MLP_CLASSES)
    assert np.all(labels.sum(axis=1) == 1.0)
    assert np.all((images * 16) == np.round(images * 16)) and images.max() <= 1.0


def test_peers_compute_the_floors_function():
    pytest.importorskip("torch")
    for w in small_workloads(with_lists=False):
        value, gradient = aw.numpy_value_and_grad(w)()
        assert aw.agrees(aw.torch_value_and_grad(w)(), value, gradient), w.label


TINY = """
import sys; sys.path.insert(0, 'benchmarks')
import array_workloads as aw
aw.SIZES['quick'] = {'llsq': [8], 'lse': [100], 'mlp': [6], 'gmm': [(3, 2)]}
aw.LIST_SIZES['quick'] = {'llsq': {8}, 'lse': set(), 'mlp': {6}, 'gmm': {(3, 2)}}
aw.GMM_POINTS = 12
installed = aw.installed  # (the digits' stand-in: importing scikit-learn takes seconds)
aw.installed = lambda module: module != 'sklearn' and installed(module)
"""

# A stand-in for a lambdad that runs the array programs: each program made by the section
# is "loaded" as an object computing its workload by the NumPy floor, so the section's
# rows, ratios and targets for lambdad with arrays run as they will once arrays exist.
STAND_IN = """
import lambdad
aw.LIST_SIZES['quick'] = {kind: set() for kind in aw.LIST_SIZES['quick']}
made = {}
for kind, make in list(aw.MAKE.items()):
    def making(*args, make=make, **kwargs):
        w = make(*args, **kwargs)
        made[w.source] = w
        return w
    aw.MAKE[kind] = making

class Floor:
    def __init__(self, w):
        self.f, self.data = aw.numpy_function(w.kind), w.data
    def params(self, point):
        return point if isinstance(point, tuple) else (point,)
    def call(self, name, point):
        return self.f(self.params(point), self.data, False)
    def value_and_grad(self, name, point):
        value, gradient = self.f(self.params(point), self.data, True)
        return value, gradient if len(gradient) > 1 else gradient[0]

loads = lambdad.loads
lambdad.loads = lambda text, file='<string>': Floor(made[text]) if text in made else loads(text, file)
"""


def run_tiny(out: Path, prelude: str = "") -> str:
    script = (TINY + prelude + "import run\n"
              f"sys.exit(run.main(['--only', 'arrays', '--quick', '--no-peers', '--budget',"
              f" '0.002', '--json', {str(out)!r}]))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_array_section_runs_in_a_tiny_configuration(tmp_path):
    out = tmp_path / "arrays.json"
    text = run_tiny(out)
    for title in ("10a. Arrays", "10b. Arrays", "10c. Arrays", "10d. Arrays", "10e. Arrays"):
        assert title in text
    assert "WARNING" not in text
    assert "peers off" in text and "data: a seeded random data set" in text
    records = json.loads(out.read_text())["arrays"]
    assert sorted(records) == ["gmm", "llsq", "lse", "mlp"]
    for kind, rows in records.items():
        (row,) = rows
        assert row["times"]["numpy v+g"] > 0
        # lambdad with arrays either ran (and agreed with the floor) or says why it could not
        assert row["lambdad"] == ["lambdad"] or kind == "lse" or "lambdad" in row["unavailable"]
        assert bool(row["lambdad"]) != ("lambdad" in row["unavailable"])
        assert ("lists v+g" in row["times"]) == (kind != "lse")
        assert not row["disagree"]
    for line in text[text.index("10e. Arrays"):].splitlines()[2:6]:
        assert (" met," in line or "not met," in line or "not measured" in line), line


def test_array_section_measures_lambdad_once_it_runs_array_programs(tmp_path):
    out = tmp_path / "arrays.json"
    text = run_tiny(out, STAND_IN)
    assert "not available" not in text and "WARNING" not in text
    records = json.loads(out.read_text())["arrays"]
    assert records["lse"][0]["lambdad"] == ["lambdad", "lambdad lse_builtin"]
    for rows in records.values():
        (row,) = rows
        assert row["lambdad"][0] == "lambdad" and not row["unavailable"]
        assert {"lambdad primal", "lambdad v+g"} <= set(row["times"])
    targets = text[text.index("10e. Arrays"):].splitlines()[2:6]
    for line in targets[:2]:
        assert re.search(r": (met|not met), worst [0-9.]+ \(", line), line
    for line in targets[2:]:
        assert "not measured" in line and "peers off (--no-peers)" in line, line
