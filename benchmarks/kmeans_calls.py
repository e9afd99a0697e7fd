"""The cost of one call of GradBench's kmeans functions (``cost`` and ``dir`` of
lambdad/evals/kmeans.lam) at the eval's default sizes, in-process, as the tool runs them.

    python benchmarks/kmeans_calls.py [--budget 0.8] [--functions dir,cost] [--sizes 10,1000,8 ...]

prints the CPU time (``time.process_time``) of one call, the best of the calls made in
``budget`` seconds (five at least), for each size k (centroids), n (points), d
(dimensions): the points random in [0, 1), the centroids the last k of them (as the eval
makes them, so that no centroid is without points), NumPy's BLAS on one thread and the
C library's allocator keeping freed memory (the tool's settings).  ``dir`` at k x n of
10^7 (over a second a call) is left out.  To compare two checkouts, run it once with each
first on the path (``PYTHONPATH=<checkout> python benchmarks/kmeans_calls.py``),
alternating, several times: on a loaded machine only the best of runs made side by side
mean anything.  This is a benchmark, not a test: it asserts nothing and is never run by
the test suite.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import lambdad
from lambdad.gradbench import PROGRAMS, reuse_freed_memory

SIZES = [(k, n, d) for k in (10, 100, 1000) for n in (1000, 10000) for d in (8, 16)]


def best_call(call, budget: float) -> float:
    """The least CPU time of one ``call()`` over the calls made in ``budget`` seconds."""
    call()  # (compiles once, outside the timing, as the tool's warm-up run)
    best, spent, calls = float("inf"), 0.0, 0
    while spent < budget or calls < 5:
        start = time.process_time()
        call()
        took = time.process_time() - start
        best, spent, calls = min(best, took), spent + took, calls + 1
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=0.8)
    parser.add_argument("--functions", default="dir,cost")
    parser.add_argument("--sizes", nargs="*", default=None, help="k,n,d ...")
    args = parser.parse_args()
    sizes = SIZES if not args.sizes else [tuple(map(int, s.split(","))) for s in args.sizes]
    reuse_freed_memory()
    program = lambdad.load(PROGRAMS / "kmeans.lam")
    print(f"lambdad from {Path(lambdad.__file__).parent}; CPU µs per call")
    with threadpool_limits(limits=1, user_api="blas"):
        for k, n, d in sorted(sizes, key=lambda s: s[0] * s[1] * s[2]):
            points = np.random.default_rng(0).random((n, d))
            centroids = points[-k:].copy()
            for name in args.functions.split(","):
                if name == "dir" and k * n >= 10 ** 7:
                    continue
                took = best_call(lambda: program.call(name, (points, centroids)), args.budget)
                print(f"{name:5} k={k},n={n},d={d}: {took * 1e6:10.0f}", flush=True)


if __name__ == "__main__":
    main()
