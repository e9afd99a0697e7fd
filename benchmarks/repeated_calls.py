"""The fixed cost of a repeated API gradient (the prepared path) for a few point shapes:
a triple of reals (whose gradient is made the written 3-tuple), a pair, and a real with
the strategy named as a keyword argument.

    python benchmarks/repeated_calls.py

prints the CPU time per ``value_and_grad`` call, best of 7 rounds of 5000.  To compare two
checkouts, run it with each first on the path (``PYTHONPATH=<checkout>``).  This is a
benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

import time
import timeit

import lambdad

SOURCE = """
def f (p : R * R * R) : R = let (a, b, c) = p in a * b * c
def g (p : R * R) : R = let (a, b) = p in a * b
def h (x : R) : R = x * x
"""

CALLS = [("f", (1.0, 2.0, 3.0), {}), ("g", (1.0, 2.0), {}), ("h", 2.0, {"strategy": "fused"})]


def main() -> None:
    program = lambdad.loads(SOURCE)
    for name, point, keywords in CALLS:
        program.value_and_grad(name, point, **keywords)  # the general path, once

        def call():
            program.value_and_grad(name, point, **keywords)
        best = min(timeit.repeat(call, number=5000, repeat=7, timer=time.process_time))
        print(f"{name} at {point} {keywords or ''}: {best / 5000 * 1e6:.2f} us a call")


if __name__ == "__main__":
    main()
