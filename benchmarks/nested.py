"""Nested differentiation benchmarks: what second derivatives cost.

    python benchmarks/nested.py [--quick] [--json OUT]

1. Hessian-vector product time / gradient time, on the wide function (n = 100), the fold
   chain, the MLP and the let-bound sharing chain: an HVP is forward mode over reverse mode (one backpropagation computed
   in dual numbers), so the ratio should be a small constant (target: at most 4).
2. The full Hessian of the wide function for n = 10 ... 100: n Hessian-vector products
   (forward-over-reverse) against forward-over-forward (n² directional derivatives).

Each figure is the median of repeated runs after one warm-up (at least 3 runs, about
``--budget`` seconds each); the ratios are also given for the fastest run of each (the work
itself, when a loaded machine deschedules some runs).  Section 1 runs the gradient and the
product alternately, timed by the process's CPU clock, so each ratio is measured side by
side.  Parsing, type checking and
compilation are not timed.  Second derivatives are forward mode over the written-out
program of the gradient (transformations.md, section 11), compiled once.  This is a
benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lambdad  # noqa: E402

import workloads  # noqa: E402


def median_seconds(run: Callable[[], Any], budget: float) -> float:
    """The median time of ``run`` over enough repetitions to spend about ``budget`` s."""
    return timings(run, budget)[0]


def timings(run: Callable[[], Any], budget: float) -> tuple[float, float]:
    """The median and the shortest time of ``run`` over enough repetitions to spend about
    ``budget`` s.  On a shared machine a run is sometimes descheduled; the shortest time is
    the cost of the work itself, the median what a user waits."""
    started = time.perf_counter()
    run()  # warm-up: compiles what the run needs
    once = max(time.perf_counter() - started, 1e-6)
    count = max(3, min(50, int(budget / once)))
    times = []
    for _ in range(count):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times)


def paired_timings(first: Callable[[], Any], second: Callable[[], Any], budget: float
                   ) -> tuple[tuple[float, float], tuple[float, float]]:
    """The median and the shortest CPU time of ``first`` and of ``second``, run alternately
    (one of each per round, after a warm-up of each) for about ``budget`` s: a ratio of the
    two is measured side by side, so a busy moment of the machine hits both alike."""
    clock = time.process_time
    first()
    second()
    started = clock()
    first()
    second()
    once = max(clock() - started, 1e-6)
    count = max(5, min(400, int(budget / once)))
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(count):
        for run, bucket in ((first, times[0]), (second, times[1])):
            started = clock()
            run()
            bucket.append(clock() - started)
    return ((statistics.median(times[0]), min(times[0])),
            (statistics.median(times[1]), min(times[1])))


def direction_like(point: Any, seed: int = 3) -> Any:
    """A random direction with the point's shape."""
    rng = random.Random(seed)
    if isinstance(point, float):
        return rng.uniform(-1, 1)
    if isinstance(point, tuple):
        return tuple(direction_like(p, rng.random()) for p in point)
    if isinstance(point, list):
        return [direction_like(p, rng.random()) for p in point]
    return point


def hvp_over_gradient(quick: bool, budget: float) -> list[dict]:
    cases = [workloads.wide(100), workloads.fold_chain(100 if quick else 400),
             workloads.mlp(10 if quick else 50), workloads.chain(100 if quick else 400)]
    rows = []
    for workload in cases:
        program = lambdad.loads(workload.source, workload.file)
        point, direction = workload.point, direction_like(workload.point)
        (gradient, gradient_best), (product, product_best) = paired_timings(
            lambda: program.grad(workload.name, point),
            lambda: program.hvp(workload.name, point, direction), 2 * budget)
        rows.append({"workload": workload.label, "gradient_s": gradient, "hvp_s": product,
                     "ratio": product / gradient, "ratio_best": product_best / gradient_best})
    return rows


def full_hessians(quick: bool, budget: float) -> list[dict]:
    sizes = (10, 20, 50) if quick else (10, 20, 50, 100)
    rows = []
    for n in sizes:
        workload = workloads.wide(n)
        program = lambdad.loads(workload.source, workload.file)
        row: dict[str, Any] = {"n": n}
        for mode in ("forward-over-reverse", "forward-over-forward"):
            if mode == "forward-over-forward" and n > (50 if quick else 100):
                continue
            row[mode] = median_seconds(
                lambda: program.hessian(workload.name, workload.point, mode=mode), budget)
        gradient = median_seconds(lambda: program.grad(workload.name, workload.point), budget)
        row["gradient"] = gradient
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter budget")
    parser.add_argument("--budget", type=float, default=None, metavar="S",
                        help="seconds per measured figure (default 1, 0.3 with --quick)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args()
    budget = args.budget if args.budget is not None else (0.3 if args.quick else 1.0)

    ratios = hvp_over_gradient(args.quick, budget)
    print("Hessian-vector product vs gradient (forward-over-reverse)")
    print(f"  {'workload':<16} {'gradient':>11} {'HVP':>11} {'HVP/grad':>9} {'(fastest)':>10}")
    for row in ratios:
        print(f"  {row['workload']:<16} {row['gradient_s'] * 1e3:>9.2f}ms "
              f"{row['hvp_s'] * 1e3:>9.2f}ms {row['ratio']:>9.2f} {row['ratio_best']:>10.2f}")

    hessians = full_hessians(args.quick, budget)
    print("\nFull Hessian of the wide function")
    print(f"  {'n':>4} {'gradient':>11} {'n HVPs (fwd/rev)':>17} {'fwd/fwd':>11} "
          f"{'fwd/fwd ÷ HVPs':>15}")
    for row in hessians:
        fr = row["forward-over-reverse"]
        ff = row.get("forward-over-forward")
        ff_text = f"{ff * 1e3:>9.1f}ms" if ff is not None else f"{'-':>11}"
        ratio = f"{ff / fr:>15.2f}" if ff is not None else f"{'-':>15}"
        print(f"  {row['n']:>4} {row['gradient'] * 1e3:>9.2f}ms {fr * 1e3:>15.1f}ms "
              f"{ff_text} {ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps({"hvp_over_gradient": ratios,
                                               "full_hessian": hessians}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
