"""How loading and the REPL scale with the number of top-level definitions.

    python benchmarks/toplevel.py [--load 10000 20000 100000] [--repl 1000 2000 4000]
                                  [--repl-lines 80000]

``--load N``: the CPU time of ``lambdad check-types`` on a file of N one-line definitions,
each using the one before (``def f3 x = f2 x + 3``), in a child process: parsing and type
checking, which should grow linearly.  ``--repl N``: the CPU time of ``lambdad repl <
script`` for a script of those N definitions (each is parsed, typed against the session's
environment and evaluated as it is entered).  ``--repl-lines N``: a script of N lines that
mixes definitions, redefinitions and expressions.  Each figure also shows the time per
definition (or line), which stays flat when the growth is linear.

This is a benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def definitions(n: int) -> str:
    """N one-line definitions, each using the one before."""
    lines = ["def f0 x = x * 2"] + [f"def f{i} x = f{i - 1} x + {i}" for i in range(1, n)]
    return "\n".join(lines) + "\n"


def mixed_lines(n: int) -> str:
    """N REPL lines: definitions, a redefinition every tenth line, an expression every
    fifth."""
    lines = ["def g0 x = x + 1"]
    defined = 1
    while len(lines) < n:
        k = len(lines)
        if k % 10 == 0:
            lines.append(f"def g{defined - 1} x = x * {k}")  # replaces the last one
        elif k % 5 == 0:
            lines.append(f"g{defined - 1} {k}")
        else:
            lines.append(f"def g{defined} x = g{defined - 1} x - {k}")
            defined += 1
    return "\n".join(lines) + "\n"


def cpu_of(argv: list[str], stdin_text: str | None = None) -> float:
    """CPU seconds (user + system) of the child process running ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, input=stdin_text, text=True, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def lambdad(*args: str) -> list[str]:
    return [sys.executable, "-m", "lambdad", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, nargs="*", default=[10_000, 20_000, 100_000])
    parser.add_argument("--repl", type=int, nargs="*", default=[1000, 2000, 4000])
    parser.add_argument("--repl-lines", type=int, nargs="*", default=[80_000])
    args = parser.parse_args()
    startup = cpu_of(lambdad("--version"))
    print(f"start-up (lambdad --version): {startup:.2f} s CPU")
    with tempfile.TemporaryDirectory() as scratch:
        for n in args.load:
            path = Path(scratch, f"defs{n}.lam")
            path.write_text(definitions(n))
            seconds = cpu_of(lambdad("check-types", str(path)))
            print(f"check-types, {n} definitions: {seconds:.2f} s CPU "
                  f"({1e6 * seconds / n:.0f} µs per definition)")
        for n in args.repl:
            seconds = cpu_of(lambdad("repl"), definitions(n))
            print(f"repl < script, {n} definitions: {seconds:.2f} s CPU "
                  f"({1e6 * seconds / n:.0f} µs per definition)")
        for n in args.repl_lines:
            seconds = cpu_of(lambdad("repl"), mixed_lines(n))
            print(f"repl < script, {n} mixed lines: {seconds:.2f} s CPU "
                  f"({1e6 * seconds / n:.0f} µs per line)")


if __name__ == "__main__":
    os.environ.pop("LAMBDAD_DEBUG", None)
    main()
