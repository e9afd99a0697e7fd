"""A repeated call's CPU time on array workloads, lambdad against the hand-written NumPy
floor of benchmarks/array_workloads.py in the same process: the primal (``Program.call``)
or value and gradient (``Program.value_and_grad``), each the fastest of five rounds,
lambdad and the floor alternating.  For comparing two trees, run alternately:

    PYTHONPATH=. python benchmarks/array_primal.py lse 1000 [--vg]
    PYTHONPATH=. python benchmarks/array_primal.py mlp 64 [--vg]
    PYTHONPATH=. python benchmarks/array_primal.py gmm 2,5 [--vg]

(the workload, its size: n for lse, the batch for mlp, d,k for gmm).  One line out:
lambdad's time, the floor's (its primal, or its value and gradient with --vg), the ratio.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import array_workloads as aw  # noqa: E402

import lambdad  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("lse", "mlp", "gmm", "llsq"))
    parser.add_argument("size", help="n (lse, llsq), the batch (mlp), or d,k (gmm)")
    parser.add_argument("--vg", action="store_true", help="value and gradient, not the primal")
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="about how long each round of each side takes")
    args = parser.parse_args()
    size = (tuple(int(s) for s in args.size.split(",")) if args.kind == "gmm"
            else int(float(args.size)))
    w = aw.MAKE[args.kind](size, False)
    program = lambdad.loads(w.source, f"{args.kind}.lam")
    name = w.names[0]
    point = w.point
    if args.vg:
        ours, floor = (lambda: program.value_and_grad(name, point)), aw.numpy_value_and_grad(w)
    else:
        ours, floor = (lambda: program.call(name, point)), aw.numpy_primal(w)
    start = time.process_time()
    ours()
    once = max(time.process_time() - start, 1e-6)
    floor()
    repeat = max(3, int(args.seconds / once))
    best = {"lambdad": float("inf"), "numpy": float("inf")}
    for _ in range(5):
        for label, run in (("lambdad", ours), ("numpy", floor)):
            start = time.process_time()
            for _ in range(repeat):
                run()
            best[label] = min(best[label], (time.process_time() - start) / repeat)
    print(f"{w.label} {'v+g' if args.vg else 'primal'}: lambdad {_time(best['lambdad'])}, "
          f"numpy {_time(best['numpy'])}, ratio {best['lambdad'] / best['numpy']:.2f}")


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
