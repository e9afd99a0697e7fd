"""A process that loads a workload of benchmarks/workloads.py and makes N calls of its value
and gradient (by a strategy) or of its Hessian-vector product along the all-ones
direction, then ends at once: for counting the instructions of one call as the difference
of two such processes.

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/workload_calls.py chain 1000 hvp N

(run with ``OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0``, and ``PYTHONPATH=<checkout>`` to
count another checkout; a call's instructions are the ``I refs`` of the run with N = 120
less that of the run with N = 20, divided by 100).  Ten calls are made first, so that
both runs count the same compilations.  The process ends by ``os._exit`` (see
first_gradient.py).  This is a benchmark, not a test: it asserts nothing.
"""

import argparse
import os
import sys
from pathlib import Path

import lambdad

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads  # noqa: E402  (the benchmarks' own module, beside this file)


def _ones(point):
    """The all-ones direction of a point's shape (reals in tuples and lists)."""
    if isinstance(point, (list, tuple)):
        return type(point)(_ones(item) for item in point)
    return 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("chain", "doubling", "wide", "mlp"))
    parser.add_argument("size", type=int)
    parser.add_argument("what", choices=("factored", "fused", "hvp"))
    parser.add_argument("calls", type=int)
    args = parser.parse_args()
    workload = getattr(workloads, args.workload)(args.size)
    program = lambdad.loads(workload.source, workload.file)
    if args.what == "hvp":
        direction = _ones(workload.point)

        def call():
            program.hvp(workload.name, workload.point, direction)
    else:
        def call():
            program.value_and_grad(workload.name, workload.point, strategy=args.what)
    for _ in range(10 + args.calls):
        call()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
