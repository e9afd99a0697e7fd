"""Run one of GradBench's evals against lambdad's GradBench tool without GradBench's own
command line (which needs Rust, and Docker for the evals' images): this script starts the
eval and the tool, forwards each JSON line of one to the other as GradBench's intermediary
does, and prints a row per ``evaluate`` (function, size, valid or not, median ``evaluate``
time).

    python benchmarks/gradbench_run.py --gradbench DIR EVAL [-- EVAL-ARGS ...]
        [--python PYTHON] [--tool CMD] [--timeout S] [--log FILE]

DIR is a checkout of github.com/gradbench/gradbench in which the validating tool is
built (``make -C DIR/tools/manual bin/EVAL``, which needs ``DIR/cpp/json.hpp``, nlohmann's
JSON header); the eval runs as ``python3 DIR/python/gradbench/gradbench/evals/EVAL/run.py``
with DIR as its working directory, so that Python (``--python``, default ``python3``)
needs numpy and pydantic.  EVAL-ARGS go
to the eval (``-n 1000 10000``, ``--min-seconds 0``; see its ``--help``).  The tool is
``python -m lambdad.gradbench`` in this Python unless ``--tool`` says otherwise.  A
response slower than ``--timeout`` seconds (600, as GradBench's nightly runs) ends the run
with the outcome ``timeout``.  Exit status: 0 if every evaluation was valid, 1 otherwise.

This is a benchmark helper, not part of the lambdad package, and no test runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO


def lines_of(stream: TextIO) -> queue.Queue:
    """A queue receiving each line of ``stream``, then None at its end."""
    found: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            found.put(line)
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return found


def run(gradbench: Path, python: str, eval_name: str, eval_args: list[str], tool: list[str],
        timeout: float, log: TextIO | None) -> tuple[list[dict[str, Any]], str]:
    """The rows of the evaluations and the outcome (``success``, ``timeout ...``, ...)."""
    script = gradbench / "python" / "gradbench" / "gradbench" / "evals" / eval_name / "run.py"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(gradbench / "python" / "gradbench")
    evaluator = subprocess.Popen([python, str(script), *eval_args], cwd=gradbench, env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tool_process = subprocess.Popen(tool, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True)
    answers = lines_of(tool_process.stdout)
    rows: dict[Any, dict[str, Any]] = {}
    outcome = "success"
    try:
        for line in evaluator.stdout:
            message = json.loads(line)
            if log:
                log.write(json.dumps({"message": message}) + "\n")
            tool_process.stdin.write(line)
            tool_process.stdin.flush()
            start = time.perf_counter()
            try:
                answer = answers.get(timeout=timeout)
            except queue.Empty:
                outcome = (f"timeout: no answer within {timeout:g} s to "
                           f"{message.get('function')} {message.get('description')}")
                break
            if answer is None:
                outcome = "the tool exited"
                break
            response = json.loads(answer)
            if log:
                log.write(json.dumps({"response": response}) + "\n")
                log.flush()
            kind = message.get("kind")
            if kind == "define" and not response.get("success"):
                outcome = f"undefined: {response.get('error')}"
            elif kind == "evaluate":
                runs = [t["nanoseconds"] for t in response.get("timings", [])
                        if t["name"] == "evaluate"]
                rows[message["id"]] = {
                    "function": message["function"], "description": message.get("description"),
                    "success": response.get("success"), "error": response.get("error"),
                    "valid": None, "runs": len(runs),
                    "median": statistics.median(runs) / 1e9 if runs else None,
                    "seconds": time.perf_counter() - start}
            elif kind == "analysis" and message.get("of") in rows:
                rows[message["of"]]["valid"] = message.get("valid")
                rows[message["of"]]["error"] = message.get("error")
            evaluator.stdin.write(answer)
            evaluator.stdin.flush()
        else:
            if evaluator.wait() != 0:
                outcome = f"the eval failed (exit status {evaluator.returncode})"
    finally:
        tool_process.kill()
        evaluator.kill()
    return list(rows.values()), outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gradbench", type=Path, required=True, metavar="DIR")
    parser.add_argument("--python", default="python3",
                        help="the Python that runs the eval (with numpy and pydantic)")
    parser.add_argument("--tool", default=f"{shlex.quote(sys.executable)} -m lambdad.gradbench")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--log", type=Path, help="write every message and response here")
    parser.add_argument("eval", metavar="EVAL")
    parser.add_argument("eval_args", nargs="*", metavar="EVAL-ARGS")
    args = parser.parse_args(argv)
    log = args.log.open("w") if args.log else None
    rows, outcome = run(args.gradbench.resolve(), args.python, args.eval, args.eval_args,
                        shlex.split(args.tool), args.timeout, log)
    print(f"{'function':10} {'size':20} {'valid':6} {'runs':>4} {'median s':>10} {'total s':>8}")
    for row in rows:
        valid = "yes" if row["valid"] else "failed" if not row["success"] else "NO"
        median = "-" if row["median"] is None else f"{row['median']:.6f}"
        print(f"{row['function']:10} {str(row['description']):20} {valid:6} {row['runs']:4} "
              f"{median:>10} {row['seconds']:8.1f}")
        if row["error"] and not row["valid"]:
            print("    " + row["error"].strip().replace("\n", "\n    ")[:800])
    print(f"outcome: {outcome}")
    return 0 if outcome == "success" and rows and all(row["valid"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
