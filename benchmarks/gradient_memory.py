"""What GradBench's ode gradient (lambdad/evals/ode.lam) holds and costs: for each size, the
peak memory traced by ``tracemalloc`` over one gradient call made after a first one, and
the CPU time per primal and gradient call (best of three rounds of five calls), with the
C library's allocator as it is or as lambdad's GradBench tool sets it.

    python benchmarks/gradient_memory.py [--sizes 10000:100,10000:20,1000:100] [--reuse]

``--reuse`` sets the allocator as ``python -m lambdad.gradbench`` does (glibc's ``mallopt``:
freed blocks kept for the next arrays), for the rest of this process.  To compare two
checkouts, run it with each first on the path: ``PYTHONPATH=<checkout> python
benchmarks/gradient_memory.py``; the peaks are the same from run to run, the times move
with the machine's load.
"""

import argparse
import resource
import sys
import tracemalloc
from pathlib import Path

import numpy as np

import lambdad

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_calls import best_per_call  # noqa: E402  (the benchmarks' own, beside this file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000:100,10000:20,1000:100",
                        help="n:s pairs, comma-separated (default: 10000:100,10000:20,1000:100)")
    parser.add_argument("--reuse", action="store_true",
                        help="set the allocator as lambdad's GradBench tool does")
    args = parser.parse_args()
    if args.reuse:
        from lambdad.gradbench import reuse_freed_memory
        if not reuse_freed_memory():
            parser.error("--reuse: this C library has no mallopt")
    print(f"lambdad from {Path(lambdad.__file__).parent}; allocator: "
          f"{'as the GradBench tool sets it' if args.reuse else 'the system’s'}")
    program = lambdad.load(str(Path(lambdad.__file__).parent / "evals" / "ode.lam"))
    for size in args.sizes.split(","):
        n, s = (float(part) for part in size.split(":"))
        x = np.random.default_rng(0).random(int(n))
        point = (x, s)
        program.call("gradient", point)  # compiles
        tracemalloc.start()
        try:
            program.call("gradient", point)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        primal = best_per_call(lambda: program.call("primal", point), rounds=3, calls=5)
        gradient = best_per_call(lambda: program.call("gradient", point), rounds=3, calls=5)
        print(f"ode n={int(n)} s={int(s)}: gradient's traced peak {peak / 1e6:.1f} MB, "
              f"primal {primal * 1e3:.1f} ms, gradient {gradient * 1e3:.1f} ms")
    print(f"peak RSS of the process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
