"""benchmarks/first_gradient.py: the process whose instructions count a first gradient,
ended when a stage of the gradient returns.  Nothing here is timed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "first_gradient.py"


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
