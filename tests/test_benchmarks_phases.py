"""benchmarks/run.py --phases: the setup of a workload split by stage of the pipeline.
Nothing here is timed against a bound; only where the time is counted is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"


def _seconds(cell: str) -> float:
    """A time cell of the table (``12.3 ms``, ``456.7 µs``, ``1.2 s``, ``-``) in seconds."""
    if cell == "-":
        return 0.0
    number, unit = cell.split()
    return float(number) * {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]


def test_loading_counts_reading_the_program_as_parse_not_other():
    # A program's own text is read by a ProgramText (its trees, then its declarations):
    # that is the parse row's, so most of loading a long program is parse, not "other"
    done = subprocess.run([sys.executable, str(RUN), "--phases", "chain:300", "--clock", "cpu"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    load = dict(zip(header, (cell.strip() for cell in
                             next(line for line in lines if line.startswith("| load |"))
                             .strip("|").split("|"))))
    assert _seconds(load["parse"]) > _seconds(load["other"])
    assert _seconds(load["parse"]) + _seconds(load["type inference"]) \
        <= _seconds(load["total"]) * 1.001
