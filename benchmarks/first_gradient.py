"""A process that loads a workload of benchmarks/workloads.py, calls it once and, with
``--gradient``, takes its first factored value and gradient, then ends at once: for
counting the first gradient's instructions as the difference of two such processes.

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/first_gradient.py chain 2000 [--gradient]

(run with ``OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0``, and ``PYTHONPATH=<checkout>`` to
count another checkout; the first gradient is the ``I refs`` of the run with
``--gradient`` less that of the run without).  The process ends by ``os._exit``, so that
neither run counts the collection Python makes when it exits, which depends on what the
gradient left alive rather than on its work.
"""

import argparse
import os
import sys
from pathlib import Path

import lambdad

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads  # noqa: E402  (the benchmarks' own module, beside this file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("chain", "doubling", "wide"))
    parser.add_argument("size", type=int)
    parser.add_argument("--gradient", action="store_true")
    args = parser.parse_args()
    workload = getattr(workloads, args.workload)(args.size)
    program = lambdad.loads(workload.source, workload.file)
    program.call(workload.name, workload.point)
    if args.gradient:
        program.value_and_grad(workload.name, workload.point, strategy="factored")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
