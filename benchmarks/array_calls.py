"""The CPU time of one repeated call of an array workload of ``benchmarks/run.py --only
arrays`` (llsq, lse, mlp, gmm at one size): lambdad's primal and value+gradient, and with
``--peers`` the NumPy floor's and PyTorch's (where installed) and lambdad's ratios to the
floor, for comparing two checkouts.

    python benchmarks/array_calls.py KIND SIZE [--peers] [--budget SECONDS] [--faults]

SIZE is n for llsq and lse, the batch for mlp, ``d,k`` for gmm.  Prints one line of JSON:
the least CPU time (``time.process_time``) of a call over at least five calls and about
``budget`` seconds of them.  To compare two checkouts, run it with each first on the path
(``PYTHONPATH=<checkout>``), alternating, a few times, and read the best of each: on a
loaded machine only figures measured side by side mean anything.  With ``--faults``, each
timed function also gets its page faults and system time per call (``getrusage`` over 20
calls after 3, before the timings, in the order primal, v+g, the floor's): the memory a
call takes fresh from the system.  They depend on what the process did before (glibc
gives memory back by what it freed last), so compare them between runs of one command.  Every library runs on
one thread.  This is a benchmark, not a test: it asserts nothing and no test runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import array_workloads as aw  # noqa: E402
import lambdad  # noqa: E402


def least(function, budget: float, calls: int = 5) -> float:
    """The least CPU time of a call of ``function``, over at least ``calls`` calls and about
    ``budget`` seconds of them (after one call outside)."""
    function()
    times: list[float] = []
    start = time.process_time()
    while len(times) < calls or (time.process_time() - start < budget and len(times) < 500):
        before = time.process_time()
        function()
        times.append(time.process_time() - before)
    return min(times)


def faults(function, calls: int = 20) -> dict:
    """The minor page faults and the system CPU time (ms) of one call of ``function``, the
    mean over ``calls`` calls after three outside."""
    for _ in range(3):
        function()
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(calls):
        function()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"faults": round((after.ru_minflt - before.ru_minflt) / calls),
            "system ms": round((after.ru_stime - before.ru_stime) / calls * 1e3, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(aw.MAKE))
    parser.add_argument("size", help="n (llsq, lse), the batch (mlp), or d,k (gmm)")
    parser.add_argument("--peers", action="store_true",
                        help="also the NumPy floor's primal and value+gradient, and torch's")
    parser.add_argument("--budget", type=float, default=1.5)
    parser.add_argument("--faults", action="store_true",
                        help="also the page faults and system time of each call")
    args = parser.parse_args()
    size = tuple(map(int, args.size.split(","))) if args.kind == "gmm" else int(args.size)
    extra = {"data": aw.digits()} if args.kind == "mlp" else {}
    w = aw.MAKE[args.kind](size, False, **extra)
    program = lambdad.loads(w.source, f"{args.kind}.lam")
    name = w.names[0]
    counted = {}
    if args.faults:  # (first: a process whose allocator has not yet settled, as a script's)
        timed = {"primal": lambda: program.call(name, w.point),
                 "v+g": lambda: program.value_and_grad(name, w.point)}
        if args.peers:
            timed.update({"floor primal": aw.numpy_primal(w),
                          "floor v+g": aw.numpy_value_and_grad(w)})
        counted = {label: faults(f) for label, f in timed.items()}
    out = {"lambdad": lambdad.__file__, "workload": w.label,
           "primal": least(lambda: program.call(name, w.point), args.budget),
           "v+g": least(lambda: program.value_and_grad(name, w.point), args.budget)}
    if args.peers:
        out["floor primal"] = least(aw.numpy_primal(w), args.budget)
        out["floor v+g"] = least(aw.numpy_value_and_grad(w), args.budget)
        if aw.installed("torch"):
            import torch

            torch.set_num_threads(1)
            out["torch"] = least(aw.torch_value_and_grad(w), args.budget)
        # the ratios to the floor, of figures measured in this one process
        out["primal / floor"] = round(out["primal"] / out["floor primal"], 2)
        out["v+g / floor v+g"] = round(out["v+g"] / out["floor v+g"], 2)
    if counted:
        out["faults per call"] = counted
    print(json.dumps(out))


if __name__ == "__main__":
    main()
