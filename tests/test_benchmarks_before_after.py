"""The fresh-process measurement of benchmarks/run.py that table 8 (``--baseline``) sets
side by side: with ``hvp`` it times Hessian-vector products too, at a direction of the
point's shape.  Nothing here is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import run as bench_run  # noqa: E402

import lambdad  # noqa: E402


def child(spec: dict) -> dict:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), "--child", json.dumps(spec),
                           "--budget", "0.01", "--no-peers", "--clock", "cpu"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_direction_has_the_points_shape_with_every_real_one():
    point = [0.5, (2.0, [3.0, -1.0]), []]
    assert bench_run._direction(point) == [1.0, (1.0, [1.0, 1.0]), []]


def test_a_child_with_hvp_times_the_product_and_its_first_call():
    record = child({"workload": "wide", "size": 10, "hvp": True})
    assert record["times"]["hvp"] > 0 and record["setup"]["first_hvp"] > 0
    assert {"primal", "value+grad", "v+g fused"} <= set(record["times"])


def test_a_child_without_hvp_times_no_product():
    record = child({"workload": "chain", "size": 10})
    assert "hvp" not in record["times"] and "first_hvp" not in record["setup"]


def test_the_direction_is_one_the_program_takes():
    import workloads

    workload = workloads.mlp(4)
    program = lambdad.loads(workload.source, workload.file)
    value, gradient, product = program.hvp(workload.name, workload.point,
                                           bench_run._direction(workload.point))
    assert value == program.call(workload.name, workload.point)
    assert len(product) == len(gradient)


def test_the_best_of_rounds_takes_each_figure_least_and_keeps_an_error():
    first = {"label": "w", "times": {"primal": 2.0, "value+grad": 5.0},
             "setup": {"load": 0.3, "first_grad": 0.1}, "peak_rss_mb": 40.0}
    second = {"label": "w", "times": {"primal": 3.0, "value+grad": 4.0},
              "setup": {"load": 0.2, "first_grad": 0.4}, "peak_rss_mb": 41.0}
    best = bench_run._best_of([first, second])
    assert best["times"] == {"primal": 2.0, "value+grad": 4.0}
    assert best["setup"] == {"load": 0.2, "first_grad": 0.1}
    assert best["peak_rss_mb"] == 40.0
    assert first["times"]["value+grad"] == 5.0  # the records themselves are left alone
    failed = {"error": "boom", "workload": "w"}
    assert bench_run._best_of([first, failed]) is failed
