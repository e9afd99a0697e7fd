"""The processes whose instructions count a first gradient (benchmarks/first_gradient.py,
ended when a stage of the gradient returns; the collection it leaves), a repeated call
(benchmarks/workload_calls.py), and an array call's page faults (benchmarks/array_calls.py).
Nothing here is timed but the collection, whose time is not checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "first_gradient.py"
CALLS = ROOT / "benchmarks" / "workload_calls.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "chain", "30", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("stage", ["transform", "compile"])
def test_a_stage_of_the_gradient_ends_the_process(stage):
    # (the script fails, saying so, when the gradient ran without reaching the stage: a
    # renamed stage function would leave the count of the whole gradient)
    done = _run("--gradient", "--stop-after", stage)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_the_whole_gradient_runs_without_a_stop():
    done = _run("--gradient")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("workload, what", [("chain", "hvp"), ("wide", "fused"),
                                            ("doubling", "factored")])
def test_the_calls_of_a_workload_run(workload, what):
    done = subprocess.run([sys.executable, str(CALLS), workload, "20", what, "3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_the_bytecodes_of_a_first_gradient_are_counted_by_function(tmp_path):
    out = tmp_path / "counts.json"
    done = _run("--gradient", "--opcodes", str(out))
    assert done.returncode == 0, done.stderr
    counts = json.loads(out.read_text())
    total = int(done.stdout.split()[0])
    assert total == sum(counts.values()) > 0
    # the stages of the gradient are among them: ←D's rules and the code generator
    assert counts.get("homomorphism.py:chain_rule", 0) > 0
    assert counts.get("codegen.py:apply_primitive", 0) > 0


def test_the_collection_a_first_gradient_leaves_is_timed():
    done = _run("--gradient", "--collection")
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[:5] == ["young", "collection", "after", "the", "gradient:"]
    assert float(words[5]) >= 0.0 and int(words[8]) > 0  # (what the call left alive)


def test_the_faults_of_an_array_call_are_counted():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "array_calls.py"), "lse",
                           "1000", "--faults", "--budget", "0.05"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    counted = json.loads(done.stdout)["faults per call"]
    assert set(counted) == {"primal", "v+g"}
    assert all(c["faults"] >= 0 and c["system ms"] >= 0 for c in counted.values())
