"""lambdad benchmarks: cheap gradient, forward vs reverse, sharing, reference programs, MLP,
scale, peers (HIPS autograd, PyTorch, JAX, a minimal tape, plain Python), setup beside
JAX's jit, and array programs (``--only arrays``: lambdad with arrays beside a hand-written
NumPy value+gradient, PyTorch, JAX and lambdad's list versions; benchmarks/array_workloads.py).

    python benchmarks/run.py [--quick] [--json OUT] [--only SECTION ...]
                             [--clock wall|cpu] [--no-gc] [--no-peers] [--budget S]
    python benchmarks/run.py --profile chain:2000     (cProfile of one workload)
    python benchmarks/run.py --phases chain:10000     (setup time by stage of the pipeline)
    python benchmarks/run.py --floor chain:10000      (each stage beside the least it must do)
    python benchmarks/run.py --baseline /tmp/base     (before/after against another tree)

Every figure of a table row is measured in the same run, side by side and interleaved
(so load on the machine hits all of them alike), as the median of repeated runs: each
callable is warmed up once, then run k times, k chosen so it gets about ``--budget``
seconds (at least 3 runs).  Ratios are of those medians.  Setup (parsing, type checking,
transformation, compilation; JAX's jit) is timed apart and never part of a median.

Operation counts are measured: the primal run is repeated once on an interpreter with an
event hook, and every evaluation of a real primitive (``+``, ``*``, ``sin``, ``^`` ...) is
one operation.  Per-operation costs divide value+gradient time by that count, for every
peer alike (they run the same operations).

Scale measurements (and the deepest sharing chains) run in a child process each, which
reports its peak resident memory (``VmHWM``) next to its times.

This is a benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# One thread for each array library of section 10 (NumPy's OpenBLAS, JAX's XLA; torch is
# set to one thread where it is used), unless the environment says otherwise: the machine
# is small and shared, and every tool then runs on the same one core.  Set before NumPy or
# JAX is first imported.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")
for _variable in THREAD_VARIABLES[:3]:
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")

import lambdad  # noqa: E402
from lambdad.interpreter import Interpreter  # noqa: E402
from lambdad.values import PrimEvent  # noqa: E402

import peers as peer_tools  # noqa: E402
import workloads  # noqa: E402
from workloads import Workload  # noqa: E402

SECTIONS = ("cheap-gradient", "forward-vs-reverse", "sharing", "reference", "mlp", "scale",
            "first-gradient", "arrays")

# Peers are skipped above these operation counts (their cost would dominate the benchmark's
# time: JAX eager costs ~0.5 ms per operation here, and jit compiles the unrolled Python
# loops for seconds to a minute).
PEER_OP_LIMITS = {"jax": 5_000, "jax-jit": 2_000}


# ---------------------------------------------------------------- timing


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}

# The label of value+gradient by the `fused` strategy (fused ←D, lambdad.fuse), the default;
# "value+grad" is the `factored` one (←D as the paper writes it), named explicitly since
# the baseline checkouts know no other.
FUSED = "v+g fused"
FACTORED = "factored"


def measure(functions: dict[str, Callable[[], Any]], budget: float = 0.2, min_runs: int = 3,
            max_runs: int = 10_000, clock: str = "wall",
            no_gc: bool = False) -> dict[str, dict[str, float]]:
    """``{label: {"median": s, "runs": k}}`` for each zero-argument callable.

    Each callable is warmed up once, untimed (the first gradient of a strategy compiles
    it), then run for a tenth of ``budget`` to size k (about ``budget`` seconds, at least
    ``min_runs``); then all are run interleaved: in each of R rounds (R = the smallest
    k), callable i runs k_i / R times, each call timed on its own.  ``clock`` is ``wall``
    (time.perf_counter) or ``cpu`` (time.process_time, this process's CPU time: steadier on
    a loaded machine); ``no_gc`` switches Python's cyclic garbage collector off while the
    timed runs go (to see its share).  Each time has the clock's own cost taken off (see
    :func:`clock_cost`): reading the CPU clock is a system call of about 1 µs, which would
    otherwise count in every call of a few µs.
    """
    timer = CLOCKS[clock]
    own_cost = clock_cost(clock)
    gc.collect()
    # k is sized by warm calls: sized by the first call, which compiles, a quick callable
    # got a handful of runs, each right after another callable's batch (cold caches).
    warm = {}
    for label, fn in functions.items():
        fn()
        calls = 0
        start = timer()
        while True:
            fn()
            calls += 1
            elapsed = timer() - start
            if elapsed >= budget / 10 or calls >= max_runs:
                break
        warm[label] = elapsed / calls
    runs = {label: max(min_runs, min(max_runs, math.ceil(budget / max(t, 1e-9))))
            for label, t in warm.items()}
    rounds = min(runs.values())
    per_round = {label: math.ceil(k / rounds) for label, k in runs.items()}
    samples: dict[str, list[float]] = {label: [] for label in functions}
    if no_gc:
        gc.disable()
    try:
        for _ in range(rounds):
            for label, fn in functions.items():
                bucket = samples[label]
                for _ in range(per_round[label]):
                    start = timer()
                    fn()
                    bucket.append(timer() - start)
    finally:
        if no_gc:
            gc.enable()
    return {label: {"median": max(0.0, statistics.median(ts) - own_cost), "runs": len(ts)}
            for label, ts in samples.items()}


@functools.cache
def clock_cost(clock: str) -> float:
    """What a timed call of nothing measures on ``clock``: the median of 2001 differences
    of two readings in a row, the part of each timed call that is the clock itself."""
    timer = CLOCKS[clock]
    differences = []
    for _ in range(2001):
        start = timer()
        differences.append(timer() - start)
    return statistics.median(differences)


def count_ops(program: lambdad.Program, workload: Workload) -> dict[str, int]:
    """Primitive evaluations of one primal run of ``workload``, by primitive kind (``real``
    is the arithmetic: the operations every peer performs too)."""
    kinds: Counter[str] = Counter()

    def on_event(event: Any) -> None:
        if isinstance(event, PrimEvent):
            kinds[event.prim.kind] += 1

    interpreter = Interpreter(on_event=on_event)
    values = interpreter.evaluate_module(program.module, upto=workload.name)
    kinds.clear()
    interpreter.apply(values[workload.name], *workload.args)
    return dict(kinds)


def _agrees(out: Any, value: float, gradient: Any, rtol: float = 1e-9) -> bool:
    """Whether a peer's ``(value, gradient)`` (or bare primal value) matches lambdad's."""
    if not isinstance(out, tuple):
        out = (out, None)
    pairs = [(float(out[0]), value)]
    if out[1] is not None:
        theirs, ours = peer_tools.leaves(out[1]), peer_tools.leaves(gradient)
        if len(theirs) != len(ours):
            return False
        pairs += [(float(a), b) for a, b in zip(theirs, ours)]
    return all(abs(a - b) <= rtol * max(1.0, abs(b)) for a, b in pairs)


# ---------------------------------------------------------------- formatting


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 0.1:
        return f"{x:.3f}"
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_per_op(seconds: float | None, ops: int | None) -> str:
    if seconds is None or not ops:
        return "-"
    per = seconds / ops
    return f"{per * 1e9:.0f} ns" if per < 1e-6 else f"{per * 1e6:.2f} µs"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def print_table(title: str, headers: list[str], rows: list[list[str]], notes: list[str] = ()):
    print(f"\n## {title}\n")
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |")
    for note in notes:
        print(note)
    sys.stdout.flush()


# ---------------------------------------------------------------- one workload, side by side


class Bench:
    """The options of one benchmark run, and the peers it compares against."""

    def __init__(self, args: argparse.Namespace):
        self.quick = args.quick
        self.budget = args.budget
        self.clock = args.clock
        self.no_gc = args.no_gc
        self.use_peers = not args.no_peers
        self.peers = [p for p in peer_tools.PEERS if self.use_peers and p.installed()]
        self.missing = [p.name for p in peer_tools.PEERS if self.use_peers and not p.installed()]
        self.peer_rows: list[dict[str, Any]] = []
        if self.peers:
            # torch and JAX bring ~200,000 objects the cyclic garbage collector would walk
            # on every full collection, of every tool measured here (a lambdad user's
            # process has none of them): import them now and move everything that exists
            # to the permanent generation.
            for peer in self.peers:
                peer.load()
            gc.collect()
            gc.freeze()

    def measure(self, functions: dict[str, Callable[[], Any]],
                budget: float | None = None) -> dict[str, dict[str, float]]:
        return measure(functions, budget=self.budget if budget is None else budget,
                       clock=self.clock, no_gc=self.no_gc)

    def load(self, workload: Workload) -> tuple[lambdad.Program, dict[str, float]]:
        """The workload's program, with the setup times: load (parse + type check), first
        primal call (compiles), first value+gradient (transforms + compiles)."""
        timer = CLOCKS[self.clock]
        setup = {}
        start = timer()
        program = lambdad.loads(workload.source, workload.file)
        setup["load"] = timer() - start
        start = timer()
        program.call(workload.name, workload.point)
        setup["first_call"] = timer() - start
        start = timer()
        program.value_and_grad(workload.name, workload.point, strategy=FACTORED)
        setup["first_grad"] = timer() - start
        return program, setup

    def run(self, workload: Workload, *, with_peers: bool = True, ops: bool = True,
            extra: dict[str, Callable[[], Any]] | None = None,
            program: lambdad.Program | None = None) -> dict[str, Any]:
        """Primal and value+gradient times of ``workload`` (factored reverse mode), measured
        interleaved with ``extra`` callables and, with ``with_peers``, every installed peer."""
        setup: dict[str, float] = {}
        if program is None:
            program, setup = self.load(workload)
        name, point = workload.name, workload.point
        functions: dict[str, Callable[[], Any]] = {
            "primal": lambda: program.call(name, point),
            "value+grad": lambda: program.value_and_grad(name, point, strategy=FACTORED),
            FUSED: lambda: program.value_and_grad(name, point, strategy="fused"),
        }
        functions.update(extra or {})
        record: dict[str, Any] = {"workload": workload.label, "setup": setup}
        if ops:
            kinds = count_ops(program, workload)
            record["ops"] = kinds.get("real", 0)
            record["prim_evals"] = sum(kinds.values())
        compile_times = {}
        value, gradient = program.value_and_grad(name, point, strategy=FACTORED)
        if with_peers:
            for peer in self.peers:
                limit = PEER_OP_LIMITS.get(peer.name)
                if limit is not None and record.get("ops", 0) > limit:
                    continue
                fn, seconds = peer.prepare(workload.python, point)
                if not _agrees(fn(), value, gradient):
                    record.setdefault("disagree", []).append(peer.name)
                functions[peer.name] = fn
                if seconds:
                    compile_times[peer.name] = seconds
        timings = self.measure(functions)
        record["times"] = {label: t["median"] for label, t in timings.items()}
        record["runs"] = {label: t["runs"] for label, t in timings.items()}
        record["compile"] = compile_times
        _, _, stats = program.value_and_grad(name, point, strategy=FACTORED, stats=True)
        record["created"], record["bodies_run"] = stats.created, stats.bodies_run
        _, _, stats = program.value_and_grad(name, point, strategy="fused", stats=True)
        record["created_fused"] = stats.created
        if with_peers:
            self.peer_rows.append(record)
        return record

    # ---- children: one measurement in a fresh process, with its peak memory
    def child(self, spec: dict[str, Any], checkout: str | None = None) -> dict[str, Any]:
        """:func:`child_main` of ``spec`` in a fresh process, on the lambdad of this
        harness or, with ``checkout``, on the package of that source tree."""
        command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec),
                   "--budget", str(self.budget), "--clock", self.clock, "--no-peers"]
        if self.no_gc:
            command.append("--no-gc")
        env = None
        if checkout is not None:
            env = {**os.environ, "PYTHONPATH": str(Path(checkout).resolve())}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1], **spec}
        return json.loads(done.stdout.strip().splitlines()[-1])

    def child_median(self, spec: dict[str, Any], processes: int = 3,
                     up_to: int = 2000, by: str = "value+grad") -> dict[str, Any]:
        """:meth:`child` in ``processes`` fresh processes (one above size ``up_to``): the
        record whose median of ``by`` is the middle one.  Medians differ more from
        process to process than within one (memory layout), so small sizes take three."""
        count = processes if spec["size"] <= up_to else 1
        records = [self.child(spec) for _ in range(count)]
        good = [r for r in records if "error" not in r]
        if not good:
            return records[0]
        good.sort(key=lambda r: r["times"][by])
        return good[len(good) // 2]


def child_main(spec: dict[str, Any], args: argparse.Namespace) -> None:
    """Runs one measurement (``spec``: ``workload`` ∈ wide, chain, doubling, mlp; ``size``;
    ``once``) and prints one JSON line with its times, counters and peak memory.  With
    ``hvp`` (not with ``once``) it also times ``Program.hvp`` along the all-ones direction,
    its first call (which transforms and compiles) in the setup as ``first_hvp``.

    With ``once`` the value+gradient run is too long to repeat: load, then one primal run
    and one value+gradient run, each timed (they include compiling, which is small next to
    them), and the stamps counted on the tape of that run.  That run is by ``strategy``
    (``factored`` unless the spec says ``"strategy": "fused"``); the peak memory after it is
    the first gradient's.

    With ``"peer": "tape"`` it times the minimal hand-written tape and the plain Python
    primal instead, loading no program: a process like lambdad's, for the tape's growth
    with depth beside lambdad's (tables 3a and 3b).  With ``"peer": "jax-jit"`` it times
    JAX's first call of ``jit(value_and_grad)`` (tracing, XLA's compilation and one run,
    JAX imported before the clock starts), then checks its value and gradient against
    lambdad's (table 9).
    """
    make = {"wide": workloads.wide, "chain": workloads.chain, "doubling": workloads.doubling,
            "mlp": workloads.mlp}
    workload = make[spec["workload"]](spec["size"])
    bench = Bench(args)
    name, point = workload.name, workload.point
    if spec.get("peer") == "tape":
        functions = {peer.name: peer.prepare(workload.python, point)[0]
                     for peer in (peer_tools.PlainPython(), peer_tools.MinimalTape())}
        timings = bench.measure(functions)
        print(json.dumps({**spec, "label": workload.label,
                          "times": {label: t["median"] for label, t in timings.items()},
                          "runs": {label: t["runs"] for label, t in timings.items()},
                          "peak_rss_mb": _peak_rss_mb()}))
        return
    if spec.get("peer") == "jax-jit":
        print(json.dumps({**spec, "label": workload.label, **_jit_first_call(workload, args)}))
        return
    if spec.get("once"):
        timer = CLOCKS[args.clock]
        start = timer()
        program = lambdad.loads(workload.source, workload.file)
        setup = {"load": timer() - start}
        rss_setup = _peak_rss_mb()
        start = timer()
        program.call(name, point)
        primal = timer() - start
        first = spec.get("strategy", FACTORED)
        start = timer()
        _, _, stats = program.value_and_grad(name, point, strategy=first, stats=True)
        # (the clock is read before anything is allocated: the collector, paused during
        # the call, runs at the caller's next allocation, which is not the call's time)
        elapsed = timer() - start
        key = "value+grad" if first == FACTORED else FUSED
        timings = {"primal": {"median": primal, "runs": 1}, key: {"median": elapsed, "runs": 1}}
        # Timed right after loading: these runs are the first call and the first gradient.
        setup["first_call"] = primal
        setup["first_grad"] = timings[key]["median"]
        rss_first_grad = _peak_rss_mb()  # before the other strategy's form is compiled too
        fused = spec.get("fused", True) and first == FACTORED
        if fused:
            start = timer()
            _, _, fused_stats = program.value_and_grad(name, point, strategy="fused", stats=True)
            timings[FUSED] = {"median": timer() - start, "runs": 1}
            setup["first_grad_fused"] = timings[FUSED]["median"]
    else:
        program, setup = bench.load(workload)
        rss_first_grad = _peak_rss_mb()
        fused = spec.get("fused", True)
        if fused:
            start = CLOCKS[args.clock]()
            program.value_and_grad(name, point, strategy="fused")
            setup["first_grad_fused"] = CLOCKS[args.clock]() - start
        rss_setup = _peak_rss_mb()
        functions = {"primal": lambda: program.call(name, point),
                     "value+grad": lambda: program.value_and_grad(name, point, strategy=FACTORED)}
        if fused:
            functions[FUSED] = lambda: program.value_and_grad(name, point, strategy="fused")
        if spec.get("hvp"):
            direction = _direction(point)
            start = CLOCKS[args.clock]()
            program.hvp(name, point, direction)
            setup["first_hvp"] = CLOCKS[args.clock]() - start
            functions["hvp"] = lambda: program.hvp(name, point, direction)
        timings = bench.measure(functions)
        _, _, stats = program.value_and_grad(name, point, strategy=FACTORED, stats=True)
        if fused:
            _, _, fused_stats = program.value_and_grad(name, point, strategy="fused", stats=True)
    print(json.dumps({
        **spec,
        "label": workload.label,
        "setup": setup,
        "times": {label: t["median"] for label, t in timings.items()},
        "runs": {label: t["runs"] for label, t in timings.items()},
        "created": stats.created,
        "bodies_run": stats.bodies_run,
        **({"created_fused": fused_stats.created} if fused else {}),
        "rss_after_setup_mb": rss_setup,
        "rss_first_grad_mb": rss_first_grad,
        "peak_rss_mb": _peak_rss_mb(),
    }))


def _direction(point: Any) -> Any:
    """A direction for an HVP at ``point``: its shape, every real 1."""
    if isinstance(point, (list, tuple)):
        return type(point)(_direction(p) for p in point)
    return 1.0


def _jit_first_call(workload: Workload, args: argparse.Namespace) -> dict[str, Any]:
    """JAX's first ``jit(value_and_grad)`` call of ``workload`` (the ``jax-jit`` peer's
    preparation, which makes that call): its time by the clock of ``args``, the process's
    peak memory after it, and whether its value and gradient are lambdad's (computed after
    both are measured)."""
    import importlib

    importlib.import_module("jax")  # imported before the clock starts, as by a user's program

    timer = CLOCKS[args.clock]
    start = timer()
    run, _ = peer_tools.JaxJit().prepare(workload.python, workload.point)
    first_call = timer() - start
    peak = _peak_rss_mb()
    program = lambdad.loads(workload.source, workload.file)
    value, gradient = program.value_and_grad(workload.name, workload.point)
    return {"setup": {"first_grad": first_call}, "peak_rss_mb": peak,
            "agrees": _agrees(run(), value, gradient)}


def _peak_rss_mb() -> float:
    """The process's peak resident set in MB: VmHWM where /proc has it (getrusage's
    ru_maxrss survives exec on Linux, so a child would report its parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    import resource  # POSIX; kilobytes on Linux

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------- the sections


def cheap_gradient(bench: Bench) -> list[dict[str, Any]]:
    records = [bench.run(workloads.wide(n)) for n in (10, 100, 1000)]
    records += [bench.run(workloads.fold_chain(d)) for d in (10, 100, 1000)]
    rows = []
    for r in records:
        t = r["times"]
        rows.append([r["workload"], str(r["ops"]), fmt_time(t["primal"]),
                     fmt_time(t["value+grad"]), fmt_ratio(ratio(t["value+grad"], t["primal"])),
                     fmt_time(t[FUSED]), fmt_ratio(ratio(t[FUSED], t["primal"])),
                     fmt_per_op(t["primal"], r["ops"]), fmt_per_op(t["value+grad"], r["ops"]),
                     fmt_ratio(ratio(t["value+grad"], t.get("python")))])
    print_table("1. Cheap gradient: the wide function of n inputs and the fold chain of d "
                "steps (reverse mode)",
                ["workload", "ops", "primal", "value+grad", "grad/primal", "v+g fused",
                 "fused/primal", "primal/op", "v+g/op", "v+g / python primal"], rows,
                ["target: grad/primal <= 3, independent of n and d",
                 "value+grad: --strategy factored (←D as the paper writes it); fused: the "
                 "default strategy"])
    return records


def forward_vs_reverse(bench: Bench, forward_max: int) -> list[dict[str, Any]]:
    sizes = [n for n in (10, 30, 100, 300, 1000) if n <= forward_max]
    records = []
    for n in sizes:
        workload = workloads.wide(n)
        program, setup = bench.load(workload)
        program.value_and_grad(workload.name, workload.point, mode="forward")
        extra = {"forward": lambda p=program, w=workload:
                 p.value_and_grad(w.name, w.point, mode="forward")}
        records.append(bench.run(workload, with_peers=False, ops=False, extra=extra,
                                 program=program))
    rows = []
    for n, r in zip(sizes, records):
        t = r["times"]
        rows.append([str(n), fmt_time(t["primal"]), fmt_time(t["value+grad"]),
                     fmt_time(t["forward"]), fmt_ratio(ratio(t["forward"], t["value+grad"])),
                     fmt_ratio(ratio(t["value+grad"], t["primal"])),
                     fmt_ratio(ratio(t["forward"], t["primal"]))])
    print_table("2. Forward vs reverse: full gradient of the wide function",
                ["n", "primal", "reverse", "forward (n runs)", "fwd/rev", "rev/primal",
                 "fwd/primal"], rows,
                [f"forward mode measured up to n = {sizes[-1]} (each forward gradient is n "
                 "dual-number runs, O(n^2) here)"])
    return records


def _naive_records(bench: Bench, make: Callable[[int], Workload], depths: list[int],
                   limit: float) -> list[dict[str, Any]]:
    """Naive-strategy runs at growing depths, stopping after one takes ``limit`` seconds."""
    out = []
    for depth in depths:
        workload = make(depth)
        program = lambdad.loads(workload.source)
        program.value_and_grad(workload.name, workload.point, strategy=FACTORED)
        functions = {
            "factored": lambda p=program, w=workload: p.value_and_grad(w.name, w.point,
                                                                        strategy=FACTORED),
            "naive": lambda p=program, w=workload: p.value_and_grad(w.name, w.point,
                                                                     strategy="naive"),
        }
        timings = bench.measure(functions, budget=0.1)
        _, _, naive = program.value_and_grad(workload.name, workload.point, strategy="naive",
                                             stats=True)
        _, _, factored = program.value_and_grad(workload.name, workload.point,
                                                 strategy=FACTORED, stats=True)
        out.append({"workload": workload.label, "depth": depth,
                    "times": {k: v["median"] for k, v in timings.items()},
                    "factored_bodies": factored.bodies_run, "naive_bodies": naive.bodies_run,
                    "created": factored.created})
        if timings["naive"]["median"] > limit:
            break
    return out


def _per_step(before: dict[str, Any], after: dict[str, Any]) -> float:
    """How many times the naive bodies-run count multiplies per +1 depth."""
    steps = after["depth"] - before["depth"]
    return (after["naive_bodies"] / before["naive_bodies"]) ** (1.0 / steps)


def sharing(bench: Bench) -> dict[str, Any]:
    if bench.quick:
        chain_depths = [10, 20, 100, 200, 500, 1000]
    else:
        chain_depths = [10, 20, 100, 200, 1000, 2000, 5000, 10000]
    doubling_depths = [10, 20, 100, 200, 500, 1000]
    # Each depth in a fresh process, so every row sees the same interpreter state (the
    # collector's work grows with what else is alive) and reports its own peak memory.
    chain_records = [bench.child_median({"workload": "chain", "size": d})
                     for d in chain_depths]
    doubling_records = [bench.child_median({"workload": "doubling", "size": d})
                        for d in doubling_depths]
    # The minimal hand-written tape (a record per operation, as `factored` makes) in
    # processes of its own at the same depths: how such records grow in CPython.
    tape_records = {kind: [bench.child_median({"workload": kind, "size": d, "peer": "tape"},
                                              by="tape") for d in depths]
                    for kind, depths in (("chain", chain_depths),
                                         ("doubling", doubling_depths))}
    if bench.peers:
        # The peers' rows (table 7) for the chains, measured here side by side.
        for make in (workloads.chain, workloads.doubling):
            for depth in (100, 1000):
                bench.run(make(depth))
    for title, depths, records, tapes in (
            ("3a. Sharing: chain x_{k+1} = x_k * x_k * 0.5 + sin x_k (let-bound), factored",
             chain_depths, chain_records, tape_records["chain"]),
            ("3b. Sharing: doubling chain x_{k+1} = x_k + x_k (let-bound), factored",
             doubling_depths, doubling_records, tape_records["doubling"])):
        by_depth = dict(zip(depths, records))
        tape_by_depth = dict(zip(depths, tapes))
        rows = []
        for d, r in zip(depths, records):
            tape, tape_before = tape_by_depth[d], tape_by_depth.get(d // 2)
            tape_growth = (ratio(tape["times"]["tape"], tape_before["times"]["tape"])
                           if d % 2 == 0 and tape_before and "times" in tape_before
                           and "times" in tape else None)
            if "error" in r:
                rows.append([str(d)] + ["error: " + r["error"]] + [""] * 14)
                continue
            t = r["times"]
            previous = by_depth.get(d // 2) if d % 2 == 0 else None
            growth = (ratio(t["value+grad"], previous["times"]["value+grad"])
                      if previous and "times" in previous else None)
            setup = r.get("setup", {})
            fused_growth = (ratio(t.get(FUSED), previous["times"].get(FUSED))
                            if previous and "times" in previous else None)
            rows.append([str(d), fmt_time(t["primal"]), fmt_time(t["value+grad"]),
                         fmt_ratio(ratio(t["value+grad"], t["primal"])),
                         fmt_ratio(growth) if growth else "",
                         fmt_ratio(ratio(t.get(FUSED), t["primal"])),
                         fmt_ratio(fused_growth) if fused_growth else "",
                         fmt_ratio(tape_growth) if tape_growth else "",
                         str(r["created"]), str(r["bodies_run"]), str(r.get("created_fused", "")),
                         fmt_time(setup.get("load")), fmt_time(setup.get("first_call")),
                         fmt_time(setup.get("first_grad")),
                         fmt_time(setup.get("first_grad_fused")), f"{r['peak_rss_mb']:.0f} MB"])
        print_table(title, ["depth", "primal", "value+grad", "grad/primal", "t(d)/t(d/2)",
                            "fused/primal", "fused t(d)/t(d/2)", "tape t(d)/t(d/2)",
                            "created", "bodies run",
                            "created (fused)", "load", "1st call", "1st grad",
                            "1st grad (fused)", "peak RSS"], rows,
                    ["target: t(2d)/t(d) <= 2.3; bodies run <= created",
                     "tape: the minimal hand-written Python tape (a record per operation) "
                     "in processes of its own",
                     "each depth in fresh processes (the middle of 3 up to depth 2000); "
                     "load = parse + type check; 1st call / "
                     "1st grad include compiling (and transforming) the program, not part of "
                     "the medians"])
    limit = 0.5 if bench.quick else 2.0
    naive_chain = _naive_records(bench, workloads.chain, list(range(1, 15)), limit)
    naive_doubling = _naive_records(bench, workloads.doubling, [2, 4, 6, 8, 10, 12, 14, 16, 18, 20],
                                    limit)
    for title, records in (("3c. Naive strategy on the chain (every value used 3 times)",
                            naive_chain),
                           ("3d. Naive strategy on the doubling chain", naive_doubling)):
        rows = []
        for i, r in enumerate(records):
            t = r["times"]
            rows.append([str(r["depth"]), fmt_time(t["factored"]), fmt_time(t["naive"]),
                         fmt_ratio(ratio(t["naive"], t["factored"])), str(r["created"]),
                         str(r["factored_bodies"]), str(r["naive_bodies"]),
                         fmt_ratio(_per_step(records[i - 1], r)) if i else ""])
        print_table(title, ["depth", "factored", "naive", "naive/factored", "created",
                            "bodies (factored)", "bodies (naive)", "naive growth per step"],
                    rows, [f"naive stops after the first depth whose run takes over {limit} s"])
    return {"chain": chain_records, "doubling": doubling_records,
            "tape_chain": tape_records["chain"], "tape_doubling": tape_records["doubling"],
            "naive_chain": naive_chain, "naive_doubling": naive_doubling}


def reference(bench: Bench) -> list[dict[str, Any]]:
    records = [bench.run(w) for w in [workloads.identity(), *workloads.reference_programs()]]
    rows = []
    for r in records:
        t = r["times"]
        rows.append([r["workload"], str(r["ops"]), fmt_time(t["primal"]),
                     fmt_time(t["value+grad"]), fmt_ratio(ratio(t["value+grad"], t["primal"])),
                     fmt_ratio(ratio(t[FUSED], t["primal"])),
                     fmt_per_op(t["value+grad"], r["ops"])])
    print_table("4. Reference programs (programs/*.lam, LANGUAGE.md section 8)",
                ["program", "ops", "primal", "value+grad", "grad/primal", "fused/primal",
                 "v+g/op"], rows,
                ["times include the Python API's conversions of the point and result; "
                 "identity (`def f (x : R) : R = x`, no operation) is the fixed cost of a call",
                 "value+grad: the factored strategy; fused: the default strategy"])
    return records


def mlp(bench: Bench) -> list[dict[str, Any]]:
    sizes = (64, 256)
    records = [bench.run(workloads.mlp(n)) for n in sizes]
    rows = []
    for r in records:
        t = r["times"]
        rows.append([r["workload"], str(r["ops"]), fmt_time(t["primal"]),
                     fmt_time(t["value+grad"]), fmt_ratio(ratio(t["value+grad"], t["primal"])),
                     fmt_ratio(ratio(t[FUSED], t["primal"])),
                     fmt_per_op(t["value+grad"], r["ops"]), str(r["created"]),
                     str(r["bodies_run"]), str(r["created_fused"])])
    print_table(f"5. MLP loss ({workloads.MLP_INPUTS} inputs, {workloads.MLP_HIDDEN} tanh "
                "units, 1 output) over a data set, map/fold/zip",
                ["workload", "ops", "primal", "value+grad", "grad/primal", "fused/primal",
                 "v+g/op", "created", "bodies run", "created (fused)"], rows)
    return records


def scale(bench: Bench, sharing_records: dict[str, Any] | None) -> list[dict[str, Any]]:
    specs = [{"workload": "wide", "size": 10**4 if bench.quick else 10**5}]
    if not bench.quick:
        specs.append({"workload": "wide", "size": 10**6, "once": True})
    deep = None
    if sharing_records:
        deep = next((r for r in sharing_records["chain"]
                     if r.get("size") == 10**4 and "error" not in r), None)
    if deep is None:
        specs.append({"workload": "chain", "size": 2000 if bench.quick else 10**4})
    specs.append({"workload": "mlp", "size": 64 if bench.quick else 256})
    records = [bench.child(spec) for spec in specs]
    if deep is not None:
        records.insert(len(records) - 1, deep)
    rows = []
    for r in records:
        if "error" in r:
            rows.append([f"{r['workload']} {r['size']}", "error: " + r["error"]] + [""] * 10)
            continue
        t, s = r["times"], r["setup"]
        rows.append([r["label"], fmt_time(s.get("load")), fmt_time(s.get("first_call")),
                     fmt_time(s.get("first_grad")), fmt_time(s.get("first_grad_fused")),
                     fmt_time(t["primal"]), fmt_time(t["value+grad"]),
                     fmt_ratio(ratio(t["value+grad"], t["primal"])),
                     fmt_ratio(ratio(t.get(FUSED), t["primal"])) if not r.get("once") else "",
                     f"{r['rss_after_setup_mb']:.0f} MB", f"{r['peak_rss_mb']:.0f} MB",
                     "1" if r.get("once") else str(min(r["runs"].values()))])
    print_table("6. Scale (each in a fresh process)",
                ["workload", "load", "1st call", "1st grad", "1st grad (fused)", "primal",
                 "value+grad", "grad/primal", "fused/primal", "peak RSS after setup",
                 "peak RSS", "runs"], rows,
                ["peak RSS is the process's maximum resident set (VmHWM), Python and "
                 "lambdad included; 'after setup' is the peak after loading and the first "
                 "gradients (factored, then fused) and before the timed runs",
                 "a row with 1 run (wide n=10^6) is timed once, right after loading: its "
                 "primal and value+grad times include compiling"])
    return records


# The let chains whose first gradient is set beside JAX's first jit call (table 9).  JAX
# compiles the unrolled chain for several seconds at 1000 bindings, and its time grows
# faster than the chain's (docs/performance.md), so larger chains are not run.
JIT_CHAIN_DEPTHS = (100, 1000)


def first_gradient(bench: Bench) -> list[dict[str, Any]]:
    """The setup of a let chain beside JAX's: lambdad's load and first gradient (default
    strategy) and JAX's first ``jit(value_and_grad)`` call, each in a fresh process,
    alternating.  Runs only when the ``jax-jit`` peer is installed and peers are on (else
    says why it did not)."""
    if not any(peer.name == "jax-jit" for peer in bench.peers):
        why = ("peers are off (--no-peers)" if not bench.use_peers
               else "JAX is not installed: pip install -e '.[bench]'")
        print(f"\n## 9. Setup beside JAX's jit: not run, {why}")
        return []
    rows, records = [], []
    for depth in JIT_CHAIN_DEPTHS:
        spec = {"workload": "chain", "size": depth, "once": True}
        ours = bench.child({**spec, "strategy": "fused"})
        jit = bench.child({**spec, "peer": "jax-jit"})
        records.append({"lambdad": ours, "jax-jit": jit})
        if "error" in ours or "error" in jit:
            rows.append([f"chain d={depth}", "error: " + (ours.get("error")
                                                          or jit.get("error"))] + [""] * 6)
            continue
        load, first = ours["setup"]["load"], ours["setup"]["first_grad"]
        rows.append([ours["label"], fmt_time(load), fmt_time(first), fmt_time(load + first),
                     f"{ours['rss_first_grad_mb']:.0f} MB",
                     fmt_time(jit["setup"]["first_grad"]) + ("" if jit["agrees"] else " (!)"),
                     f"{jit['peak_rss_mb']:.0f} MB",
                     fmt_ratio(ratio(jit["setup"]["first_grad"], load + first))])
    print_table("9. Setup beside JAX's jit: the let chain's first gradient (fresh processes, "
                "alternating)",
                ["workload", "load", "1st grad", "load + 1st grad", "peak RSS",
                 "jax-jit 1st call", "peak RSS jax-jit", "jax-jit / (load + 1st grad)"], rows,
                ["load: parsing and type checking; 1st grad: ←D, fusion, code generation and "
                 "one run (the default strategy)",
                 "jax-jit 1st call: tracing the Python function, XLA's compilation of "
                 "value_and_grad and one run (JAX imported before); (!) marks a value or "
                 "gradient that is not lambdad's"])
    return records


# ---------------------------------------------------------------- 10: arrays


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def array_row(bench: Bench, w: Any, peers: list[str]) -> dict[str, Any]:
    """One row of section 10: the NumPy floor's primal and value+gradient, lambdad's
    arrays (each function of ``w.names``), lambdad's lists (where ``w`` has them) and the
    peers named in ``peers``, all measured side by side; each checked against the floor's
    value and gradient first.  A version that cannot load or run says why in
    ``record["unavailable"]`` instead of failing."""
    import array_workloads as aw

    timer = CLOCKS[bench.clock]
    floor = aw.numpy_value_and_grad(w)
    value, gradient = floor()
    functions: dict[str, Callable[[], Any]] = {"numpy primal": aw.numpy_primal(w),
                                               "numpy v+g": floor}
    record: dict[str, Any] = {"workload": w.label, "kind": w.kind, "size": w.size,
                              "elements": w.elements, "lambdad": [], "setup": {},
                              "compile": {}, "unavailable": {}, "disagree": []}

    def load(key: str, source: str, file: str, names: list[tuple[str, str]], point: Any,
             as_arrays: Callable[[Any], tuple]) -> None:
        # (any exception: an array program this lambdad cannot load or run says why)
        try:
            start = timer()
            program = lambdad.loads(source, file)
            record["setup"][f"{key} load"] = timer() - start
        except Exception as error:
            record["unavailable"].update((label, _first_line(error)) for label, _ in names)
            return
        for label, name in names:
            try:
                start = timer()
                program.call(name, point)
                record["setup"][f"{label} 1st call"] = timer() - start
                start = timer()
                got, grad = program.value_and_grad(name, point)
                record["setup"][f"{label} 1st grad"] = timer() - start
                if not aw.agrees((got, as_arrays(grad)), value, gradient):
                    record["disagree"].append(label)
            except Exception as error:
                record["unavailable"][label] = _first_line(error)
                continue
            functions[f"{label} primal"] = lambda p=program, n=name: p.call(n, point)
            functions[f"{label} v+g"] = lambda p=program, n=name: p.value_and_grad(n, point)
            if key == "lambdad":
                record["lambdad"].append(label)

    names = [("lambdad" if i == 0 else f"lambdad {name}", name) for i, name in enumerate(w.names)]
    record["lambdad_labels"] = [label for label, _ in names]
    load("lambdad", w.source, str(HERE / f"{'digits_mlp' if w.kind == 'mlp' else w.kind}.lam"),
         names, w.point, lambda g: aw.parts(g, len(w.params)) if isinstance(g, tuple) else (g,))
    if w.list_source is not None:
        load("lists", w.list_source, "<list version>", [("lists", w.list_name)], w.list_point,
             w.list_gradient)
    for peer in peers:
        try:
            if peer == "torch":
                fn, first = aw.torch_value_and_grad(w), 0.0
            else:
                fn, first = aw.jax_value_and_grad(w, jit=peer == "jax-jit")
            if first:
                record["compile"][peer] = first
            if not aw.agrees(fn(), value, gradient):
                record["disagree"].append(peer)
            functions[peer] = fn
        except Exception as error:
            record["unavailable"][peer] = _first_line(error)
    timings = bench.measure(functions)
    record["times"] = {label: t["median"] for label, t in timings.items()}
    record["runs"] = {label: t["runs"] for label, t in timings.items()}
    return record


# The targets of QUALITY.md for array programs: (what, numerator, denominator, limit,
# least number of elements).
ARRAY_TARGETS = (
    ("value+gradient <= 3 x primal", "v+g", "primal", 3.0, 0),
    ("primal <= 1.5 x the NumPy floor's primal", "primal", "numpy primal", 1.5, 0),
    ("gradient <= 1 x PyTorch eager at >= 10^4 elements", "v+g", "torch", 1.0, 10**4),
    ("gradient <= 3 x JAX-jit at >= 10^5 elements", "v+g", "jax-jit", 3.0, 10**5),
)


def arrays(bench: Bench) -> dict[str, Any]:
    """Section 10: array programs (llsq, logsumexp, an MLP on the digits, GradBench's gmm),
    lambdad with arrays beside a hand-written NumPy value+gradient (the floor), PyTorch
    eager, JAX eager and jit, and lambdad's own list version; then the targets of
    QUALITY.md for array programs, each met or not with its number."""
    import array_workloads as aw

    if not aw.installed("numpy"):
        print("\n## 10. Arrays: not run, NumPy is not installed (every row's floor)")
        return {}
    mode = "quick" if bench.quick else "full"
    wanted = [("torch", "torch"), ("jax", "jax"), ("jax-jit", "jax")]
    peers = [name for name, module in wanted if bench.use_peers and aw.installed(module)]
    absent = [name for name, module in wanted if bench.use_peers and not aw.installed(module)]
    print("\n## 10. Arrays\n")
    print("threads: " + ", ".join(f"{var}={os.environ.get(var, '-')}" for var in THREAD_VARIABLES)
          + "; torch.set_num_threads(1)")
    print("peers: " + (", ".join(peers) or "none")
          + (" (peers off: --no-peers)" if not bench.use_peers else "")
          + (f" (not installed: {', '.join(absent)}; pip install -e '.[bench]')" if absent
             else ""))
    extra = {"mlp": {"data": aw.digits()}} if "mlp" in aw.SIZES[mode] else {}
    records: dict[str, list[dict[str, Any]]] = {}
    for letter, kind in zip("abcd", aw.SIZES[mode]):
        out = records[kind] = []
        for size in aw.SIZES[mode][kind]:
            with_lists = size in aw.LIST_SIZES[mode][kind]
            w = aw.MAKE[kind](size, with_lists, **extra.get(kind, {}))
            record = array_row(bench, w, peers)
            record["notes"] = w.notes
            out.append(record)
        _array_table(f"10{letter}", kind, out, aw)
    _array_targets(records)
    return records


def _array_table(number: str, kind: str, records: list[dict[str, Any]], aw: Any) -> None:
    rows, notes = [], []
    unavailable: dict[str, list[str]] = {}
    for r in records:
        t = r["times"]
        for i, label in enumerate(r["lambdad_labels"]):
            primal, vg = t.get(f"{label} primal"), t.get(f"{label} v+g")
            cells = [r["workload"] + ("" if i == 0 else f" [{label.split(' ', 1)[1]}]"),
                     str(r["elements"]) if i == 0 else "",
                     fmt_time(t["numpy primal"]) if i == 0 else "",
                     fmt_time(t["numpy v+g"]) if i == 0 else ""]
            if label in r["unavailable"]:
                cells += ["not available", "-", "-", "-", "-"]
            else:
                setup = r["setup"]
                first = (setup.get("lambdad load", 0.0) + setup.get(f"{label} 1st call", 0.0)
                         + setup.get(f"{label} 1st grad", 0.0))
                cells += [fmt_time(primal), fmt_time(vg), fmt_ratio(ratio(vg, primal)),
                          fmt_ratio(ratio(primal, t["numpy primal"])), fmt_time(first)]
            for peer in ("torch", "jax", "jax-jit"):
                cells.append(fmt_time(t.get(peer)) if i == 0 else "")
            cells.append(fmt_time(r["compile"].get("jax-jit")) if i == 0 else "")
            cells += [fmt_ratio(ratio(vg, t.get("torch"))), fmt_ratio(ratio(vg, t.get("jax-jit")))]
            if i == 0:
                state = ("not available" if "lists" in r["unavailable"]
                         else None if "lists v+g" in t else "skipped")
                cells += [state or fmt_time(t.get("lists primal")),
                          state or fmt_time(t.get("lists v+g")),
                          fmt_ratio(ratio(t.get("lists v+g"), t.get("lists primal"))),
                          fmt_ratio(ratio(t.get("lists v+g"), t["numpy v+g"]))]
                cells += [fmt_ratio(ratio(t.get(peer), t["numpy v+g"]))
                          for peer in ("torch", "jax-jit")]
            else:
                cells += [""] * 6
            rows.append(cells)
        for key, why in r["unavailable"].items():
            keys = unavailable.setdefault(why, [])
            if key not in keys:
                keys.append(key)
        notes += [n for n in r.get("notes", []) if n not in notes]
        if r["disagree"]:
            notes.append(f"WARNING: {', '.join(r['disagree'])} disagree with the NumPy floor "
                         f"on {r['workload']} (value or gradient beyond 1e-8 relative)")
    notes = [f"{', '.join(keys)}: not available ({why})"
             for why, keys in unavailable.items()] + notes
    print_table(f"{number}. Arrays: {aw.TITLES[kind]}",
                ["workload", "elements", "numpy primal", "numpy v+g", "lambdad primal",
                 "lambdad v+g", "v+g/primal", "primal/numpy", "lambdad setup", "torch v+g",
                 "jax v+g",
                 "jax-jit v+g", "jit compile", "lambdad/torch", "lambdad/jax-jit",
                 "lists primal", "lists v+g", "lists v+g/primal", "lists/numpy v+g",
                 "torch/numpy v+g", "jax-jit/numpy v+g"], rows,
                [f"elements: {aw.ELEMENTS[kind]}; numpy: hand-written primal and "
                 "value+gradient (benchmarks/array_workloads.py), the floor",
                 "lambdad: arrays, the default strategy; lambdad setup: loading the "
                 "program (data included), its first call and first gradient, not in the "
                 "medians; lists: lambdad's list version (map/fold), skipped at the larger "
                 "sizes; jit compile: JAX's first jit call, not in its median"] + notes)


def _array_targets(records: dict[str, list[dict[str, Any]]]) -> None:
    every = [r for rs in records.values() for r in rs]
    lines = []
    for what, top, bottom, limit, least in ARRAY_TARGETS:
        found = []
        for r in every:
            t = r["times"]
            if r["elements"] < least:
                continue
            for label in r["lambdad"]:
                den = t.get(f"{label} {bottom}") if bottom == "primal" else t.get(bottom)
                value = ratio(t.get(f"{label} {top}"), den)
                if value is not None:
                    found.append((value, r["workload"] + ("" if label == "lambdad"
                                                          else f" [{label.split(' ', 1)[1]}]")))
        if not found:
            if not any(r["lambdad"] for r in every):
                why = "lambdad cannot load the array programs"
            elif not any(bottom in r["times"] for r in every):
                why = f"{bottom} not measured: peers off (--no-peers) or not installed"
            else:
                why = f"no row of >= {least} elements has lambdad and {bottom}"
            lines.append(f"- {what}: not measured ({why})")
            continue
        worst, where = max(found)
        over = sum(1 for v, _ in found if v > limit)
        verdict = "met" if over == 0 else "not met"
        lines.append(f"- {what}: {verdict}, worst {fmt_ratio(worst)} ({where}), best "
                     f"{fmt_ratio(min(found)[0])}; {len(found) - over} of {len(found)} rows "
                     "within")
    listed = [r for r in every if "lists v+g" in r["times"]]
    if listed:
        per_primal = [ratio(r["times"]["lists v+g"], r["times"]["lists primal"]) for r in listed]
        per_floor = [ratio(r["times"]["lists v+g"], r["times"]["numpy v+g"]) for r in listed]
        lines.append(f"- for comparison, lambdad's list version ({len(listed)} rows): "
                     f"v+g/primal {fmt_ratio(min(per_primal))}-{fmt_ratio(max(per_primal))}, "
                     f"v+g / the floor's v+g {fmt_ratio(min(per_floor))}-"
                     f"{fmt_ratio(max(per_floor))}")
    print("\n## 10e. Arrays: the targets of QUALITY.md (next release), lambdad with arrays\n")
    print("\n".join(lines))
    sys.stdout.flush()


# Workloads compared with a baseline checkout (--baseline): (workload, size, once).
BEFORE_AFTER = [("wide", 10, False), ("wide", 100, False), ("wide", 1000, False),
                ("chain", 10, False), ("chain", 100, False), ("chain", 1000, False),
                ("doubling", 1000, False), ("mlp", 64, False), ("mlp", 256, False),
                ("chain", 10**4, True)]


def _best_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record of several fresh processes' records of the same measurement: each time
    (medians and setup times) and each peak memory the least of them, the figure least
    disturbed by other work on the machine.  An error in any of them is the result."""
    for r in records:
        if "error" in r:
            return r
    best = {**records[0], "times": dict(records[0]["times"]),
            "setup": dict(records[0].get("setup", {}))}
    for r in records[1:]:
        for part in ("times", "setup"):
            for key, value in r.get(part, {}).items():
                if isinstance(value, (int, float)) and isinstance(best[part].get(key),
                                                                  (int, float)):
                    best[part][key] = min(best[part][key], value)
        for key in ("peak_rss_mb", "rss_first_grad_mb"):
            if key in r and key in best:
                best[key] = min(best[key], r[key])
    return best


def before_after(bench: Bench, checkout: str, rounds: int = 3) -> list[dict[str, Any]]:
    """Each workload of :data:`BEFORE_AFTER` measured on the baseline ``checkout`` and on
    this lambdad in ``rounds`` fresh processes each, alternating the trees (so load on the
    machine hits both alike), each figure the best of its rounds: grad/primal,
    value+gradient time (factored; fused too when the baseline has that strategy), HVP
    time, setup times and peak memory side by side."""
    rows, records = [], []
    for kind, size, once in BEFORE_AFTER:
        spec = {"workload": kind, "size": size, **({"once": True} if once else {"hvp": True})}
        befores, afters, alones = [], [], []
        for round_ in range(rounds):
            # Alternate which tree goes first, so a drift of the machine's load within a
            # round hits both alike.
            for side in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
                if side == "before":
                    before = bench.child(spec, checkout)
                    if "error" in before:  # a baseline older than the fused strategy
                        before = bench.child({**spec, "fused": False}, checkout)
                    befores.append(before)
                else:
                    afters.append(bench.child(spec))
                    # A once-run's first fused gradient follows the factored one, whose
                    # memory it adds to: the default strategy's first gradient is also
                    # measured alone.
                    if once:
                        alones.append(bench.child({**spec, "strategy": "fused"}))
        before, after = _best_of(befores), _best_of(afters)
        alone = _best_of(alones) if once else None
        records.append({"spec": spec, "before": before, "after": after, "fused alone": alone})
        if "error" in before or "error" in after:
            rows.append([f"{kind} {size}", "error: " + (before.get("error")
                                                         or after.get("error"))] + [""] * 17)
            continue
        cells = [after["label"] + (" (once)" if once else "")]
        fused = after["times"].get(FUSED)
        cells.append(fmt_ratio(ratio(fused, after["times"]["primal"])) if not once else "")
        for key in ("grad/primal", "value+grad", "load", "first_grad", "peak_rss_mb"):
            pair = []
            for r in (before, after):
                t, s = r["times"], r["setup"]
                pair.append({"grad/primal": ratio(t["value+grad"], t["primal"]),
                             "value+grad": t["value+grad"], "load": s.get("load"),
                             "first_grad": s.get("first_grad"),
                             "peak_rss_mb": r.get("rss_first_grad_mb", r["peak_rss_mb"])}[key])
            if key == "grad/primal":
                cells += [fmt_ratio(pair[0]), fmt_ratio(pair[1])]
            elif key == "peak_rss_mb":
                cells += [f"{pair[0]:.0f} MB", f"{pair[1]:.0f} MB"]
            else:
                cells += [fmt_time(pair[0]), fmt_time(pair[1])]
                if key == "value+grad":
                    cells.append(fmt_ratio(ratio(pair[0], pair[1])))
        cells.append(fmt_ratio(ratio(before["times"].get(FUSED, before["times"]["value+grad"]),
                                     fused)) if not once else "")
        cells += [fmt_time(before["times"].get("hvp")), fmt_time(after["times"].get("hvp")),
                  fmt_ratio(ratio(before["times"].get("hvp"), after["times"].get("hvp")))]
        if alone is not None and "error" not in alone:
            cells += [fmt_time(alone["setup"]["first_grad"]),
                      f"{alone['rss_first_grad_mb']:.0f} MB"]
        else:
            cells += [fmt_time(after["setup"].get("first_grad_fused")), ""]
        rows.append(cells)
    print_table(f"8. Before and after: baseline {checkout} vs this lambdad (fresh processes, "
                f"alternating, each figure the best of {rounds})",
                ["workload", "fused/primal after", "grad/primal before", "after",
                 "v+g before", "after", "speed-up", "load before", "after",
                 "1st grad before", "after", "peak RSS before", "after", "speed-up fused",
                 "HVP before", "after", "speed-up", "1st grad fused", "peak RSS fused"], rows,
                ["peak RSS: the process's peak after loading and its first (factored) "
                 "gradient",
                 "v+g: the factored strategy, before and after; fused/primal and speed-up "
                 "fused: the default (fused) strategy, speed-up fused = the baseline's fused "
                 "v+g (its factored one when it has no fused strategy) / fused v+g here",
                 "HVP: Program.hvp along the all-ones direction (not for once-runs); "
                 "speed-up = before / after",
                 "(once): timed once right after loading, so value+gradient includes "
                 "compiling; its 1st grad is that run; its 1st grad fused and peak RSS "
                 "fused are those of the default strategy's first gradient in a process of "
                 "its own (no factored gradient before it)"])
    return records


def peers_table(bench: Bench) -> None:
    names = [p.name for p in bench.peers if p.name != "python"]
    per_op, ratios = [], []
    for r in bench.peer_rows:
        t, ops = r["times"], r.get("ops")
        per_op.append([r["workload"], str(ops), fmt_per_op(t.get("python"), ops),
                       fmt_per_op(t[FUSED], ops)]
                      + [fmt_per_op(t.get(name), ops) for name in names])
        ratios.append([r["workload"], fmt_time(t[FUSED])]
                      + [fmt_ratio(ratio(t[FUSED], t.get(name))) for name in names])
    print_table("7a. Peers: value+gradient time per primitive operation",
                ["workload", "ops", "python primal", "lambdad"] + names, per_op,
                ["ops: real primitive evaluations counted from lambdad's primal run "
                 "(event hook); every peer runs the same operations, checked to give the "
                 "same value and gradient (to 1e-9)",
                 "python primal: the computation on floats with math, no gradient (the floor)",
                 "lambdad: the default strategy (fused); per operation, so a 0-operation "
                 "function has none ('-')",
                 f"jax eager skipped above {PEER_OP_LIMITS['jax']} ops, jax-jit above "
                 f"{PEER_OP_LIMITS['jax-jit']} ops ('-')"]
                + ([f"peers not installed: {', '.join(bench.missing)} "
                    "(pip install -e '.[bench]')"] if bench.missing else []))
    compile_notes = [f"jax-jit compile (first call) for {r['workload']}: "
                     f"{fmt_time(r['compile']['jax-jit'])}"
                     for r in bench.peer_rows if "jax-jit" in r.get("compile", {})]
    print_table("7b. Peers: lambdad value+gradient time / peer value+gradient time",
                ["workload", "lambdad v+g"] + [f"/ {n}" for n in names], ratios,
                ["targets: lambdad <= 0.5 x tape (the minimal hand-written Python tape), "
                 "<= 0.2 x autograd, <= 1 x torch; stretch <= 1 µs/op",
                 "lambdad: the default strategy (fused)"]
                + compile_notes
                + [f"WARNING: {', '.join(r['disagree'])} disagree with lambdad on {r['workload']}"
                   for r in bench.peer_rows if r.get("disagree")])


# ---------------------------------------------------------------- profiling


def profile_main(target: str, args: argparse.Namespace) -> None:
    """Profiles value+gradient of one workload (``wide:1000``, ``chain:2000``,
    ``doubling:1000``, ``mlp:256``) with cProfile, after a warm-up run, and reports the
    share of the time spent in Python's cyclic garbage collector."""
    import cProfile
    import pstats

    workload = _workload_of(target, "--profile")
    program = lambdad.loads(workload.source, workload.file)
    name, point = workload.name, workload.point
    program.call(name, point)
    program.value_and_grad(name, point)
    timer = CLOCKS[args.clock]
    in_gc = [0.0, 0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            in_gc[1] = timer()
        else:
            in_gc[0] += timer() - in_gc[1]

    repeats = 5
    gc.callbacks.append(on_gc)
    start = timer()
    for _ in range(repeats):
        program.value_and_grad(name, point)
    total = timer() - start
    gc.callbacks.remove(on_gc)
    primal = measure({"primal": lambda: program.call(name, point)}, clock=args.clock)
    print(f"{workload.label}: value+grad {fmt_time(total / repeats)} per run, of which "
          f"{fmt_time(in_gc[0] / repeats)} ({100 * in_gc[0] / total:.0f}%) in the cyclic "
          f"garbage collector; primal {fmt_time(primal['primal']['median'])}")
    profiler = cProfile.Profile(timer)
    profiler.enable()
    for _ in range(repeats):
        program.value_and_grad(name, point)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)


# ---------------------------------------------------------------- setup phases


# The stages of lambdad's pipeline timed by --phases: (label, module, function name, or
# ``Class.method`` for a method).  A stage run inside another is counted in its own row
# only.  A program's text (and each file it imports) is read by a ProgramText: its
# concrete trees made when it is made, its declarations desugared by ``declarations``.
PHASES = (
    ("parse", "lambdad.parser", "parse_module"),
    ("parse", "lambdad.parser", "ProgramText.__init__"),
    ("parse", "lambdad.parser", "ProgramText.declarations"),
    ("type inference", "lambdad.typecheck", "infer_module"),
    ("type inference", "lambdad.typecheck", "infer_term"),
    ("←D", "lambdad.backward", "backward_term"),
    ("fusion", "lambdad.fuse", "fused_backward_term"),
    ("code generation", "lambdad.codegen", "compile_term"),
    ("Python compile", "lambdad.pieces", "_compiled_functions"),
)


class StageClock:
    """Times lambdad's pipeline by stage: every module of lambdad that holds a function of
    :data:`PHASES` gets a wrapper that adds the function's own time (without the stages it
    runs) to ``spent[label]``.  With ``keep``, ``kept[function name]`` also lists the
    arguments and the result of each of the function's calls, for :func:`floor_main`."""

    def __init__(self, timer: Callable[[], float], keep: bool = False):
        import importlib

        self.spent: Counter[str] = Counter()
        self.kept: dict[str, list[tuple[tuple, Any]]] = {}
        running: list[float] = []  # time of the stages run inside the current one, per level

        def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(function)
            def wrapper(*a: Any, **k: Any) -> Any:
                running.append(0.0)
                start = timer()
                try:
                    result = function(*a, **k)
                    if keep:
                        self.kept.setdefault(function.__name__, []).append((a, result))
                    return result
                finally:
                    elapsed = timer() - start
                    inner = running.pop()
                    self.spent[label] += elapsed - inner
                    if running:
                        running[-1] += elapsed
            return wrapper

        modules = [module for name, module in list(sys.modules.items())
                   if name == "lambdad" or name.startswith("lambdad.")]
        for label, module_name, function_name in PHASES:
            module = importlib.import_module(module_name)
            if "." in function_name:  # a method: replaced on its class
                class_name, method_name = function_name.split(".")
                owner = getattr(module, class_name)
                setattr(owner, method_name, timed(label, getattr(owner, method_name)))
                continue
            original = getattr(module, function_name)
            replacement = timed(label, original)
            for module in modules:
                for attribute, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attribute, replacement)

    @staticmethod
    def labels() -> list[str]:
        return list(dict.fromkeys(label for label, _, _ in PHASES))


def phases_main(target: str, args: argparse.Namespace) -> None:
    """Times the setup of one workload by stage of the pipeline: loading, the first call
    and the first gradient (``factored``, then ``fused``), each split into the time spent
    in each stage of :data:`PHASES` (its own time, without the stages it runs) and the
    rest ("other": the API's conversions, running the code, freeing what a stage built)."""
    workload = _workload_of(target, "--phases")
    timer = CLOCKS[args.clock]
    stages = StageClock(timer)
    name, point = workload.name, workload.point
    steps = (("load", lambda: lambdad.loads(workload.source, workload.file)),
             ("first call", lambda: program.call(name, point)),
             ("first gradient (factored)",
              lambda: program.value_and_grad(name, point, strategy=FACTORED)),
             ("first gradient (fused)",
              lambda: program.value_and_grad(name, point, strategy="fused")))
    labels = stages.labels()
    print(f"{workload.label}: setup by stage ({args.clock} time)\n")
    print(f"| step | total | {' | '.join(labels)} | other | peak RSS |")
    print("|---|" + "---|" * (len(labels) + 3))
    program = None
    for step, run_step in steps:
        stages.spent.clear()
        start = timer()
        result = run_step()
        total = timer() - start
        if program is None:
            program = result
        cells = [fmt_time(stages.spent[label]) if stages.spent[label] else "-"
                 for label in labels]
        other = total - sum(stages.spent.values())
        print(f"| {step} | {fmt_time(total)} | {' | '.join(cells)} | {fmt_time(other)} "
              f"| {_peak_rss_mb():.0f} MB |")


# ---------------------------------------------------------------- the floor under setup


def floor_main(target: str, args: argparse.Namespace) -> None:
    """Sets each stage of one workload's setup beside the least work a stage of its kind
    must do on the same terms, in one process.

    Loading: lambdad's parse and type inference beside their floors, and beside lark's own
    lexer and LALR parser reading the same text with lambdad's grammar (lambdad drives
    lark's tables with its own scanner and callbacks).  Parsing must *scan* the text (each
    token matched once, by one regular expression of every terminal of the grammar, and
    made a tuple of its kind, text and offsets) and build the core terms; type inference
    must walk them.  The first gradient (default strategy): each stage beside its floor,
    made of three operations timed on the terms the stage really read and built, each the
    best of three runs:

    - *build* the nodes of a term: every node's constructor called once with the node's
      own fields (nothing decided, nothing looked up);
    - *walk* a term: every node visited once through :func:`lambdad.syntax.children`;
    - *emit* a term: a walk that appends one string per node, then joins them.

    ←D must walk the source and build ←D's output; fusion must walk ←D's output and build
    the fused program; code generation must emit the fused program; Python's compile is
    counted as lambdad does it (its own time).  The last two rows are the floors of a
    pipeline that would build the fused program straight from the source, skipping ←D's
    output, and then compile it, or run it by one walk (an interpreter of it visits every
    node at least once).  Keeping the terms for the floors holds ←D's output alive through
    fusion, which otherwise lets go of it as it goes; ``--phases`` times the stages without
    that."""
    import attrs

    from lambdad import syntax

    workload = _workload_of(target, "--floor")
    timer = CLOCKS[args.clock]
    name, point = workload.name, workload.point
    stages = StageClock(timer, keep=True)
    start = timer()
    program = lambdad.loads(workload.source, workload.file)
    load_time = timer() - start
    load_split = dict(stages.spent)
    core = [program.require(declared).value for declared in program.user_names]
    lark_lex, lark_parse = _lark_floor(workload.source, timer)
    program.call(name, point)
    stages.spent.clear()
    start = timer()
    program.value_and_grad(name, point)
    gradient_time = timer() - start
    spent = dict(stages.spent)
    sources = [call[0][0] for call in stages.kept.get("backward_term", [])]
    backward = [call[1] for call in stages.kept.get("backward_term", [])]
    fused = [call[1] for call in stages.kept.get("fused_backward_term", [])]
    stages.kept.clear()
    if not fused:
        raise SystemExit(f"{workload.label}: its first gradient fused nothing; no floor to show")

    def best(operation: Callable[[], Any]) -> float:
        times = []
        for _ in range(3):
            begin = timer()
            operation()
            times.append(timer() - begin)
        return min(times)

    def nodes(terms: list[Any]) -> list[Any]:
        found, work = [], list(terms)
        while work:
            node = work.pop()
            found.append(node)
            work.extend(syntax.children(node))
        return found

    def build(terms: list[Any]) -> float:
        calls = []
        for node in nodes(terms):
            fields = attrs.fields(type(node))
            calls.append((type(node), tuple(getattr(node, f.name) for f in fields if not f.kw_only),
                          {f.name: getattr(node, f.name) for f in fields if f.kw_only}))

        def run() -> None:
            for cls, positional, keywords in calls:
                cls(*positional, **keywords)
        return best(run)

    def walk(terms: list[Any]) -> float:
        def run() -> None:
            work = list(terms)
            while work:
                work.extend(syntax.children(work.pop()))
        return best(run)

    def emit(terms: list[Any]) -> float:
        def run() -> None:
            out, work = [], list(terms)
            while work:
                node = work.pop()
                out.append(type(node).__name__)
                work.extend(syntax.children(node))
            "\n".join(out)
        return best(run)

    counts = {what: len(nodes(terms)) for what, terms in
              (("source", sources), ("←D", backward), ("fused", fused))}
    was_enabled = gc.isenabled()
    gc.disable()  # (the floors allocate and drop a million nodes; lambdad's stages are
    try:          # timed as they ran, with the collector as lambdad sets it)
        scan = _scanner(workload.source)
        scan_text, build_core, walk_core = best(scan), build(core), walk(core)
        tokens = len(scan())
        walk_source, walk_backward, walk_fused = walk(sources), walk(backward), walk(fused)
        build_backward, build_fused, emit_fused = build(backward), build(fused), emit(fused)
    finally:
        if was_enabled:
            gc.enable()
    compile_time = spent.get("Python compile", 0.0)
    rows = [("←D", spent.get("←D", 0.0), walk_source + build_backward,
             "walk the source, build ←D's output"),
            ("fusion", spent.get("fusion", 0.0), walk_backward + build_fused,
             "walk ←D's output, build the fused program"),
            ("code generation", spent.get("code generation", 0.0), emit_fused,
             "emit the fused program"),
            ("Python compile", compile_time, compile_time, "lambdad's own (shapes compiled once)")]
    print(f"{workload.label}: the floor under setup ({args.clock} time, one process)\n")
    print(f"nodes: source {counts['source']}, ←D's output {counts['←D']}, fused program "
          f"{counts['fused']} ({counts['←D'] / counts['source']:.1f} and "
          f"{counts['fused'] / counts['source']:.1f} a source node); tokens {tokens}, "
          f"scanned in {fmt_time(scan_text)}\n")
    parse_time, inference_time = load_split.get("parse", 0.0), load_split.get("type inference", 0.0)
    load_floor = scan_text + build_core + walk_core
    print("| load | lambdad | floor | lambdad / floor | the floor's work | lark alone |")
    print("|---|---|---|---|---|---|")
    print(f"| parse | {fmt_time(parse_time)} | {fmt_time(scan_text + build_core)} "
          f"| {parse_time / (scan_text + build_core):.1f} | scan the text, build the core terms "
          f"| lexing alone: {fmt_time(lark_lex)} |")
    print(f"| type inference | {fmt_time(inference_time)} | {fmt_time(walk_core)} "
          f"| {inference_time / walk_core:.1f} | walk the core terms | - |")
    print(f"| other | {fmt_time(load_time - parse_time - inference_time)} | - | - | - | - |")
    print(f"| **total** | {fmt_time(load_time)} | {fmt_time(load_floor)} "
          f"| {load_time / load_floor:.1f} | the two floors above "
          f"| {fmt_time(lark_parse)} (parse to a tree) |\n")
    print("| first gradient | lambdad | floor | lambdad / floor | the floor's work |")
    print("|---|---|---|---|---|")
    for label, actual, floor, work in rows:
        ratio = f"{actual / floor:.1f}" if floor > 0 else "-"
        print(f"| {label} | {fmt_time(actual)} | {fmt_time(floor)} | {ratio} | {work} |")
    other = gradient_time - sum(actual for _, actual, _, _ in rows)
    total_floor = sum(floor for _, _, floor, _ in rows)
    print(f"| other (running it, the API) | {fmt_time(other)} | - | - | - |")
    print(f"| **total** | {fmt_time(gradient_time)} | {fmt_time(total_floor)} | "
          f"{gradient_time / total_floor:.1f} | the four floors above |")
    print(f"| without ←D's output | - | {fmt_time(walk_source + build_fused + emit_fused + compile_time)} "
          f"| - | walk the source, build and emit the fused program, compile |")
    print(f"| … nor compiling | - | {fmt_time(walk_source + build_fused + walk_fused)} "
          f"| - | walk the source, build the fused program, walk it once to run it |")


def _scanner(text: str) -> Callable[[], list[tuple[str, str, int, int]]]:
    """The floor of scanning ``text``: a function that matches each of its tokens once, by
    one regular expression of every terminal of lambdad's grammar (blanks and comments
    skipped in the same match, as lambdad's scanner of a parser state does), and makes each
    a tuple of its kind, text and offsets."""
    from lambdad.reading import _driver, _parser

    driver = _driver()
    match = driver.matcher([terminal for terminal in _parser().parser.lexer.root_lexer.terminals
                            if terminal.name not in driver.ignored])

    def scan() -> list[tuple[str, str, int, int]]:
        tokens, found = [], match(text, 0)
        while found is not None:
            first, after = found.end(1), found.end()
            tokens.append((found.lastgroup, text[first:after], first, after))
            found = match(text, after)
        return tokens
    return scan


def _lark_floor(text: str, timer: Callable[[], float]) -> tuple[float, float]:
    """lark's own time over ``text`` with lambdad's grammar: (lexing alone, by lark's
    basic lexer; lexing and parsing to a tree, by its LALR parser with the contextual
    lexer the grammar is written for)."""
    import lark

    grammar = (Path(lambdad.__file__).parent / "grammar.lark").read_text()
    lexer, parser = (lark.Lark(grammar, parser="lalr", lexer=kind, start="module",
                               maybe_placeholders=False) for kind in ("basic", "contextual"))
    start = timer()
    for _ in lexer.lex(text):
        pass
    lexing = timer() - start
    start = timer()
    parser.parse(text)
    return lexing, timer() - start


def _workload_of(target: str, option: str) -> Workload:
    make = {"wide": workloads.wide, "chain": workloads.chain, "doubling": workloads.doubling,
            "mlp": workloads.mlp}
    kind, _, size = target.partition(":")
    if kind not in make or not size.isdigit():
        raise SystemExit(f"{option} wants KIND:SIZE with KIND in {', '.join(make)}")
    return make[kind](int(size))


# ---------------------------------------------------------------- main


def machine() -> dict[str, Any]:
    info = {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "cpus": os.cpu_count(),
            "lambdad": getattr(lambdad, "__version__", "?")}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        info["load_average"] = os.getloadavg()
    except OSError:
        pass
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and fewer depths (about a minute)")
    parser.add_argument("--json", metavar="OUT", help="also write every figure to OUT as JSON")
    parser.add_argument("--only", action="append", choices=SECTIONS, metavar="SECTION",
                        help=f"run only this section (repeatable): {', '.join(SECTIONS)}")
    parser.add_argument("--budget", type=float, default=0.2,
                        help="seconds of repeated runs per measurement (default 0.2)")
    parser.add_argument("--forward-max", type=int, default=None,
                        help="largest n for forward mode (default 300, 100 with --quick)")
    parser.add_argument("--no-peers", action="store_true", help="skip the peer tools")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="wall: time.perf_counter (default); cpu: time.process_time, "
                             "steadier when other processes load the machine")
    parser.add_argument("--no-gc", action="store_true",
                        help="switch Python's cyclic garbage collector off during timed runs")
    parser.add_argument("--profile", metavar="KIND:SIZE",
                        help="instead of the tables, profile value+gradient of one workload "
                             "(wide:1000, chain:2000, doubling:1000, mlp:256) with cProfile")
    parser.add_argument("--phases", metavar="KIND:SIZE",
                        help="instead of the tables, time the setup of one workload (load, "
                             "first call, first gradients) by stage of the pipeline")
    parser.add_argument("--floor", metavar="KIND:SIZE",
                        help="instead of the tables, set each stage of one workload's setup "
                             "beside the least work a stage of its kind must do")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also compare with the lambdad of another source tree (e.g. "
                             "`git worktree add /tmp/base 54fd1ad`), in fresh processes")
    parser.add_argument("--rounds", type=int, default=3, metavar="N",
                        help="with --baseline: fresh processes per tree and workload, "
                             "alternating; each figure is the best of them (default 3)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child), args)
        return 0
    if args.profile:
        profile_main(args.profile, args)
        return 0
    if args.phases:
        phases_main(args.phases, args)
        return 0
    if args.floor:
        floor_main(args.floor, args)
        return 0
    bench = Bench(args)
    only = set(args.only or SECTIONS)
    info = machine()
    print("# lambdad benchmarks")
    print(f"\ncommand: python {' '.join(['benchmarks/run.py'] + (argv or sys.argv[1:]))}")
    print(f"machine: {info.get('cpu', '?')}, {info['cpus']} CPUs, {info['platform']}, "
          f"Python {info['python']}")
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in info.get('load_average', ()))}")
    print(f"peers: {', '.join(p.name for p in bench.peers) or 'none'}"
          + (f" (not installed: {', '.join(bench.missing)})" if bench.missing else ""))
    print(f"medians of repeated runs, ~{args.budget} s of runs per figure (at least 3); "
          f"clock: {args.clock} ({CLOCKS[args.clock].__name__}); garbage collector "
          f"{'off' if args.no_gc else 'on'} during timed runs")
    results: dict[str, Any] = {"machine": info, "argv": argv or sys.argv[1:]}
    start = time.perf_counter()
    if "cheap-gradient" in only:
        results["cheap-gradient"] = cheap_gradient(bench)
    if "forward-vs-reverse" in only:
        forward_max = args.forward_max or (100 if args.quick else 300)
        results["forward-vs-reverse"] = forward_vs_reverse(bench, forward_max)
    if "sharing" in only:
        results["sharing"] = sharing(bench)
    if "reference" in only:
        results["reference"] = reference(bench)
    if "mlp" in only:
        results["mlp"] = mlp(bench)
    if "scale" in only:
        results["scale"] = scale(bench, results.get("sharing"))
    if bench.peer_rows:
        peers_table(bench)
    if args.baseline:
        results["before-after"] = before_after(bench, args.baseline, args.rounds)
    if "first-gradient" in only:
        results["first-gradient"] = first_gradient(bench)
    if "arrays" in only:
        results["arrays"] = arrays(bench)
    elapsed = time.perf_counter() - start
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    print(f"\ntotal {elapsed:.0f} s; load average at end: {', '.join(f'{x:.2f}' for x in load)}")
    if args.json:
        results["seconds"] = elapsed
        Path(args.json).write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
