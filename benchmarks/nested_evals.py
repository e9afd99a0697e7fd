"""GradBench's nested-differentiation evals run in-process: the saddle point of
lambdad/evals/saddle.lam in its four compositions of modes (rr, rf, fr, ff), each a
solver whose steps take gradients of functions that take gradients.

    python benchmarks/nested_evals.py [--repeat K]

prints each composition's CPU time (process time, best of K runs, default 3; the first
run, which compiles, is left out) and its result.  To compare two checkouts, run it with
each first on the path: ``PYTHONPATH=<checkout> python benchmarks/nested_evals.py``.
"""

import argparse
import time
from pathlib import Path

import lambdad

START = [1.0, 1.0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    program = lambdad.load(str(Path(lambdad.__file__).parent / "evals" / "saddle.lam"))
    print(f"lambdad from {Path(lambdad.__file__).parent}")
    for name in ("rr", "rf", "fr", "ff"):
        result = program.call(name, START)  # compiles
        times = []
        for _ in range(args.repeat):
            start = time.process_time()
            program.call(name, START)
            times.append(time.process_time() - start)
        print(f"saddle {name}: {min(times):.2f} s  (result {result[0]:.3g}, ...)")


if __name__ == "__main__":
    main()
