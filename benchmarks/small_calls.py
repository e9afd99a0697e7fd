"""The cost of one repeated call on the smallest workloads, where a call's fixed cost shows:
the wide function of 10 inputs and the let chains of 10 and 100 bindings, each as primal,
value+gradient (fused, the default, and factored) and Hessian-vector product along ones.

    python benchmarks/small_calls.py [--rounds 20] [--calls 500]

prints the CPU time (``time.process_time``) per call, best of ``rounds`` rounds of
``calls`` calls.  To compare two checkouts, run it once with each first on the path
(``PYTHONPATH=<checkout> python benchmarks/small_calls.py``), alternating, several times:
on a loaded machine only the best rounds of runs made side by side mean anything.  This is
a benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lambdad  # noqa: E402
import workloads  # noqa: E402


def best_per_call(function, rounds: int, calls: int) -> float:
    """The least CPU time per call of ``function`` over ``rounds`` rounds of ``calls``."""
    function()  # (compiles and prepares once, outside the rounds)
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            function()
        best = min(best, (time.process_time() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    print(f"lambdad from {Path(lambdad.__file__).parent}; CPU µs per call, best of "
          f"{args.rounds} x {args.calls}")
    for workload in (workloads.wide(10), workloads.chain(10), workloads.chain(100)):
        program = lambdad.loads(workload.source)
        name, point = workload.name, workload.point
        direction = [1.0] * len(point) if isinstance(point, list) else 1.0
        # (in this order: a baseline older than 40's fix of the strategy setting keeps the
        # strategy a call names, so what runs after a factored call would run factored)
        kinds = {
            "primal": lambda: program.call(name, point),
            "hvp": lambda: program.hvp(name, point, direction),
            "v+g fused": lambda: program.value_and_grad(name, point, strategy="fused"),
            "v+g factored": lambda: program.value_and_grad(name, point, strategy="factored"),
        }
        cells = [f"{kind} {best_per_call(f, args.rounds, args.calls) * 1e6:8.2f}"
                 for kind, f in kinds.items()]
        print(f"{workload.label:12}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
