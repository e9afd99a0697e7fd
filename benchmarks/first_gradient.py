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

With ``--gradient``, ``--stop-after transform`` (or ``compile``) ends the process as soon
as ←D (or the code generator, compilation included) returns in the gradient: the stages of
the first gradient are then the differences of the runs stopped at each.  ``--opcodes
FILE`` (without valgrind) counts instead the bytecodes the gradient runs, by function
(``file:function``), and writes them to FILE as JSON, their total printed: a count that
does not depend on the machine, and says where two checkouts differ.  ``--collection``
(without valgrind) prints instead the CPU time of the young collection the gradient leaves
to the next allocation, and how many objects it scans: what the call left alive since the
collector last ran.
"""

import argparse
import collections
import functools
import gc
import importlib
import json
import os
import sys
import time
from pathlib import Path

import lambdad

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads  # noqa: E402  (the benchmarks' own module, beside this file)


# A stage of the gradient: the module and the function that does it.
_STAGES = {"transform": ("lambdad.backward", "backward_term"),
           "compile": ("lambdad.codegen", "compile_term")}


def _end_after(module_name: str, function_name: str) -> None:
    """Makes every module's reference to the stage's function end the process when the
    function returns."""
    stage = getattr(importlib.import_module(module_name), function_name)

    @functools.wraps(stage)
    def then_end(*args, **kwargs):
        stage(*args, **kwargs)
        sys.stdout.flush()
        os._exit(0)

    for module in list(sys.modules.values()):
        for name, value in list(vars(module).items()):
            if value is stage:
                setattr(module, name, then_end)


def _counting(counts: collections.Counter):
    """A trace function counting the bytecodes run, by function, into ``counts``."""

    def count(frame, event, _):
        if event == "opcode":
            code = frame.f_code
            counts[f"{os.path.basename(code.co_filename)}:{code.co_name}"] += 1
        return count

    def enter(frame, event, _):
        frame.f_trace_opcodes = True
        return count

    return enter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("chain", "doubling", "wide"))
    parser.add_argument("size", type=int)
    parser.add_argument("--gradient", action="store_true")
    parser.add_argument("--stop-after", choices=tuple(_STAGES),
                        help="with --gradient: end the process when this stage returns")
    parser.add_argument("--opcodes", metavar="FILE",
                        help="with --gradient: count its bytecodes by function into FILE")
    parser.add_argument("--collection", action="store_true",
                        help="with --gradient: time the young collection it leaves")
    args = parser.parse_args()
    workload = getattr(workloads, args.workload)(args.size)
    program = lambdad.loads(workload.source, workload.file)
    program.call(workload.name, workload.point)
    if args.gradient:
        if args.stop_after:  # (after loading and the first call, which compile too)
            _end_after(*_STAGES[args.stop_after])
        counts: collections.Counter = collections.Counter()
        if args.opcodes:
            sys.settrace(_counting(counts))
        program.value_and_grad(workload.name, workload.point, strategy="factored")
        if args.opcodes:
            sys.settrace(None)
            Path(args.opcodes).write_text(json.dumps(counts, indent=0, sort_keys=True))
            print(f"{sum(counts.values())} bytecodes")
        if args.stop_after:  # (the stage ends the process: it did not run)
            sys.exit(f"first_gradient.py: the gradient ran no {args.stop_after} stage")
        if args.collection:
            young = len(gc.get_objects(0))
            start = time.process_time()
            gc.collect(0)
            print(f"young collection after the gradient: {time.process_time() - start:.3f} s "
                  f"over {young} objects")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
