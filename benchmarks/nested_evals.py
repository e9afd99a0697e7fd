"""GradBench's nested-differentiation evals run in-process: saddle (lambdad/evals/saddle.lam,
from ``[1, 1]``) and particle (lambdad/evals/particle.lam, from ``w = 0``), each in its four
compositions of modes (rr, rf, fr, ff): solvers whose steps take gradients of functions
that take gradients.

    python benchmarks/nested_evals.py [--repeat K] [--evals saddle,particle]

prints each composition's CPU time (process time, best of K runs, default 3; the first
run, which compiles, is left out) and its result.  To compare two checkouts, run it with
each first on the path: ``PYTHONPATH=<checkout> python benchmarks/nested_evals.py``.
"""

import argparse
import time
from pathlib import Path

import lambdad

STARTS = {"saddle": [1.0, 1.0], "particle": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--evals", default="saddle,particle",
                        help="which evals, comma-separated (default: saddle,particle)")
    args = parser.parse_args()
    print(f"lambdad from {Path(lambdad.__file__).parent}")
    for eval_name in args.evals.split(","):
        start_point = STARTS[eval_name]
        program = lambdad.load(str(Path(lambdad.__file__).parent / "evals" / f"{eval_name}.lam"))
        for name in ("rr", "rf", "fr", "ff"):
            result = program.call(name, start_point)  # compiles
            times = []
            for _ in range(args.repeat):
                start = time.process_time()
                program.call(name, start_point)
                times.append(time.process_time() - start)
            shown = result[0] if isinstance(result, list) else result
            print(f"{eval_name} {name}: {min(times):.2f} s  (result {shown:.6g})")


if __name__ == "__main__":
    main()
