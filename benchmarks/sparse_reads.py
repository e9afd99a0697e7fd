"""Reading the elements of an array one by one in a loop (``v !! i`` inside a ``fold``):
value+gradient must grow linearly with the array's size (AD.md section 10: each read sends
a sparse cotangent, and the array's backpropagator scatters them once), not with its square.

    python benchmarks/sparse_reads.py

prints, for n = 1000, 4000, 16000, the primal and value+gradient times (CPU time of the
process, best of 5) and the growth of value+gradient from one size to the next (4 for a
linear cost, 16 for a quadratic one).
"""

import time

import numpy as np

import lambdad

PROGRAM = "def pick (v : Vec) : R = fold (\\acc i -> acc + v !! i * v !! i) 0 (range (size v))"


def best(run, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    program = lambdad.loads(PROGRAM)
    print("| n | primal | value+gradient | v+g / primal | growth of v+g |")
    print("|---|---|---|---|---|")
    previous = None
    for n in (1000, 4000, 16000):
        v = np.linspace(0.0, 1.0, n)
        program.value_and_grad("pick", v)  # compiled once, outside the timings
        primal = best(lambda: program.call("pick", v))
        both = best(lambda: program.value_and_grad("pick", v))
        growth = "" if previous is None else f"{both / previous:.2f}"
        print(f"| {n} | {primal * 1e3:.1f} ms | {both * 1e3:.1f} ms | {both / primal:.2f} "
              f"| {growth} |")
        previous = both


if __name__ == "__main__":
    main()
