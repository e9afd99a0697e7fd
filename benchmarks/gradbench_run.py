"""Run GradBench's evals against lambdad's GradBench tool, and against GradBench's own
``jax``, ``pytorch`` and ``manual`` tools, without GradBench's command line (which needs
Rust, and Docker for the evals' images): this script starts an eval and a tool, forwards
each JSON line of one to the other as GradBench's intermediary does, and records a row
per ``evaluate`` (function, size, valid or not, median ``evaluate`` time).

    python benchmarks/gradbench_run.py --gradbench DIR [--tools lambdad,jax,...]
        [--python PYTHON] [--tool-python PYTHON] [--timeout S] [--memory GB]
        [--json FILE] [--log FILE] EVAL [-- EVAL-ARGS ...]
    python benchmarks/gradbench_run.py --table FILE...

DIR is a copy of github.com/gradbench/gradbench in which the validating tool is built
(``make -C DIR/tools/manual bin/EVAL``, which needs ``DIR/cpp/json.hpp``, nlohmann's JSON
header); the eval runs as ``PYTHON DIR/python/gradbench/gradbench/evals/EVAL/run.py`` with
DIR as its working directory, so that Python (``--python``, default ``python3``) needs
numpy, pydantic, scipy and dataclasses-json.  EVAL-ARGS go to the eval (``-n 1000``,
``--min-seconds 0``; see its ``--help``).

The tools (``--tools``, default ``lambdad``): ``lambdad`` is ``python -m lambdad.gradbench``
in this Python, run from the current directory; ``jax`` and ``pytorch`` are GradBench's
Python tools, run by ``--tool-python`` (default: this Python, which must have jax or
torch, and for pytorch's lstm and ht dataclasses-json; entries of PYTHONPATH are kept
after GradBench's own) from DIR; ``manual`` is GradBench's hand-written C++, run by ``PYTHON
DIR/python/gradbench/gradbench/cpp.py manual`` (it builds each module with make at
``define``), and ``finite`` (finite differences in C++, which also runs saddle and
particle) the same way.  A tool whose ``define`` fails (a module it lacks) is skipped.

A response slower than ``--timeout`` seconds (600, as GradBench's nightly runs) is
recorded as ``timeout``: the tool is stopped, the eval told that the evaluation failed,
and a new tool process (started and defined again) takes the next evaluation.
``--memory GB`` limits lambdad's address space (an evaluation that needs more is
answered ``success: false``, out of memory).  ``--json FILE`` appends the rows as JSON
lines; ``--table`` turns such files into the Markdown table of docs/gradbench.md: per
eval, function and size, lambdad's median beside the other tools', and its ratio to the
faster of jax and pytorch (a time under a tenth of the C++ tool's is marked † and left
out of the ratio: GradBench's jax tool does not wait for JAX's asynchronous dispatch).  Exit status: 0 if every evaluation was valid, 1 otherwise.

This is a benchmark helper, not part of the lambdad package, and no test runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

TOOLS = ("lambdad", "jax", "pytorch", "manual", "finite")
PYTHON_TOOLS = ("jax", "pytorch")


def lines_of(stream: TextIO) -> queue.Queue:
    """A queue receiving each line of ``stream``, then None at its end."""
    found: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            found.put(line)
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return found


class Tool:
    """A tool process, restarted (and sent the session's start and define again) after
    a timeout."""

    def __init__(self, command: list[str], cwd: Path | None, env: dict[str, str],
                 limit: Callable[[], None] | None):
        self.command, self.cwd, self.env, self.limit = command, cwd, env, limit
        self.setup: list[str] = []  # the start and define lines, replayed on a restart
        self.process: subprocess.Popen | None = None
        self.answers: queue.Queue | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, preexec_fn=self.limit)
        self.answers = lines_of(self.process.stdout)
        for line in self.setup:
            self.process.stdin.write(line)
            self.process.stdin.flush()
            self.answers.get(timeout=600)

    def ask(self, line: str, timeout: float) -> str | None:
        """The answer to ``line``; None if the tool exited; queue.Empty on a timeout."""
        self.process.stdin.write(line)
        self.process.stdin.flush()
        return self.answers.get(timeout=timeout)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def tool_for(name: str, gradbench: Path, python: str, tool_python: str,
             memory: float | None) -> Tool:
    env = dict(os.environ)
    if name == "lambdad":
        limit = None
        if memory:
            size = int(memory * 2**30)

            def limit() -> None:
                resource.setrlimit(resource.RLIMIT_AS, (size, size))
        return Tool([sys.executable, "-m", "lambdad.gradbench"], None, env, limit)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(gradbench / "python" / "gradbench"), *filter(None, [env.get("PYTHONPATH")])])
    tools = gradbench / "python" / "gradbench" / "gradbench"
    if name not in PYTHON_TOOLS:  # a C++ tool (manual, finite), built by make at define
        return Tool([python, str(tools / "cpp.py"), name], gradbench, env, None)
    return Tool([tool_python, str(tools / "tools" / name / "run.py")], gradbench, env, None)


def run(gradbench: Path, python: str, eval_name: str, eval_args: list[str], tool: Tool,
        timeout: float, log: TextIO | None) -> tuple[list[dict[str, Any]], str]:
    """The rows of the evaluations and the outcome (``success``, ``undefined ...``, ...)."""
    script = gradbench / "python" / "gradbench" / "gradbench" / "evals" / eval_name / "run.py"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(gradbench / "python" / "gradbench")
    evaluator = subprocess.Popen([python, str(script), *eval_args], cwd=gradbench, env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tool.start()
    rows: dict[Any, dict[str, Any]] = {}
    outcome = "success"
    try:
        for line in evaluator.stdout:
            message = json.loads(line)
            kind = message.get("kind")
            if log:
                log.write(json.dumps({"message": message})[:2000] + "\n")
            start = time.perf_counter()
            try:
                answer = tool.ask(line, timeout)
            except queue.Empty:
                answer = json.dumps({"id": message["id"], "success": False,
                                     "error": f"timeout: no answer within {timeout:g} s"})
                tool.stop()
                tool.start()
            if answer is None:
                outcome = "the tool exited"
                break
            response = json.loads(answer)
            if log:
                log.write(json.dumps({"response": response})[:2000] + "\n")
                log.flush()
            if kind in ("start", "define"):
                tool.setup.append(line)
            if kind == "define" and not response.get("success"):
                outcome = f"undefined: {str(response.get('error'))[:300]}"
            elif kind == "evaluate":
                runs = [t["nanoseconds"] for t in response.get("timings", [])
                        if t["name"] == "evaluate"]
                rows[message["id"]] = {
                    "eval": eval_name, "args": eval_args, "id": message["id"],
                    "function": message["function"],
                    "description": message.get("description"),
                    "success": response.get("success"), "error": response.get("error"),
                    "valid": None, "runs": len(runs),
                    "median": statistics.median(runs) / 1e9 if runs else None,
                    "seconds": time.perf_counter() - start}
            elif kind == "analysis" and message.get("of") in rows:
                rows[message["of"]]["valid"] = message.get("valid")
                if not message.get("valid"):
                    rows[message["of"]]["error"] = message.get("error")
            evaluator.stdin.write(answer if answer.endswith("\n") else answer + "\n")
            evaluator.stdin.flush()
        else:
            if evaluator.wait() != 0:
                outcome = f"the eval failed (exit status {evaluator.returncode})"
    finally:
        tool.stop()
        evaluator.kill()
        evaluator.wait()
    return list(rows.values()), outcome


def print_rows(tool: str, rows: list[dict[str, Any]], outcome: str) -> None:
    print(f"[{tool}] {'function':10} {'size':22} {'valid':8} {'runs':>4} {'median s':>10} "
          f"{'total s':>8}")
    for row in rows:
        valid = "yes" if row["valid"] else "timeout" if str(row["error"]).startswith(
            "timeout") else "failed" if not row["success"] else "NO"
        median = "-" if row["median"] is None else f"{row['median']:.6f}"
        print(f"[{tool}] {row['function']:10} {str(row['description']):22} {valid:8} "
              f"{row['runs']:4} {median:>10} {row['seconds']:8.1f}")
        if row["error"] and not row["valid"]:
            print("    " + str(row["error"]).strip().replace("\n", "\n    ")[:600])
    print(f"[{tool}] outcome: {outcome}", flush=True)


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def table(paths: list[Path]) -> str:
    """The Markdown table of the rows of the JSON-lines files."""
    found: dict[tuple[str, Any], dict[str, dict[str, Any]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)  # the same message of the same eval, for each tool
            # (a later run of the same eval with the same arguments replaces a row)
            args = row.get("args", [])
            if "--variant" in args[:-1]:  # (ht's simple variant, a table of its own)
                row["eval"] += f" ({args[args.index('--variant') + 1]})"
            found.setdefault((row["eval"], row["id"]), {})[row["tool"]] = row
    others = [t for t in TOOLS[1:] if any(t in tools for tools in found.values())]
    lines = ["| eval | function | size | lambdad | valid | "
             + " | ".join(others) + " | lambdad ÷ faster of jax, pytorch |",
             "|---|---|---|---|---|" + "---|" * len(others) + "---|"]

    def cell(row: dict[str, Any] | None) -> str:
        if row is None:
            return "—"
        if row["valid"]:
            return seconds(row["median"])
        if str(row["error"]).startswith("timeout"):
            return "timeout"
        if not row["success"]:
            return "out of memory" if "memory" in str(row["error"]) else "failed"
        return f"{seconds(row['median'])} (invalid)"

    def dispatched(tools: dict[str, dict[str, Any]], name: str) -> bool:
        """Whether ``name``'s time is under a tenth of the C++ tool's: GradBench's jax tool
        does not wait for JAX's asynchronous dispatch, so at large sizes its ``evaluate``
        time is the dispatch's, not the computation's."""
        manual = tools.get("manual")
        return bool(manual and manual["valid"] and tools[name]["median"] is not None
                    and tools[name]["median"] < manual["median"] / 10)

    summaries: dict[str, dict[str, Any]] = {}
    for tools in found.values():
        first = next(iter(tools.values()))
        eval_name, function, size = first["eval"], first["function"], first["description"]
        size = "" if size is None else size
        mine = tools.get("lambdad")
        python_tools = [tools[t]["median"] for t in ("jax", "pytorch")
                        if t in tools and tools[t]["valid"] and not dispatched(tools, t)]
        ratio = (f"{mine['median'] / min(python_tools):.2f}"
                 if mine and mine["valid"] and python_tools else "—")
        valid = "—" if mine is None else "yes" if mine["valid"] else "no"
        peers = [cell(tools.get(t)) + (" †" if t in PYTHON_TOOLS and t in tools
                                       and dispatched(tools, t) else "") for t in others]
        lines.append(f"| {eval_name} | {function} | {size} | {cell(mine)} | {valid} | "
                     + " | ".join(peers) + f" | {ratio} |")
        summary = summaries.setdefault(eval_name, {"rows": 0, "valid": 0, "ratios": [],
                                                   "unfinished": []})
        if mine is not None:
            summary["rows"] += 1
            summary["valid"] += bool(mine["valid"])
            if not mine["valid"]:
                summary["unfinished"].append(f"{function} {size} ({cell(mine)})")
            if ratio != "—":
                summary["ratios"].append(mine["median"] / min(python_tools))
    lines += ["", "| eval | lambdad valid | compared with jax or pytorch | within 3× | "
              "median ratio | worst ratio | not finished |", "|---|---|---|---|---|---|---|"]
    for eval_name, summary in summaries.items():
        ratios = sorted(summary["ratios"])
        within = sum(r <= 3 for r in ratios)
        lines.append(
            f"| {eval_name} | {summary['valid']} of {summary['rows']} | {len(ratios)} | "
            f"{within if ratios else '—'} | "
            f"{f'{statistics.median(ratios):.2f}' if ratios else '—'} | "
            f"{f'{ratios[-1]:.2f}' if ratios else '—'} | "
            f"{'; '.join(summary['unfinished']) or '—'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", nargs="+", type=Path, metavar="FILE",
                        help="print the Markdown table of these --json files and stop")
    parser.add_argument("--gradbench", type=Path, metavar="DIR")
    parser.add_argument("--tools", default="lambdad",
                        help=f"comma-separated, of {', '.join(TOOLS)} (default: lambdad)")
    parser.add_argument("--python", default="python3",
                        help="the Python that runs the eval and the manual tool")
    parser.add_argument("--tool-python", default=sys.executable,
                        help="the Python that runs the jax and pytorch tools")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--memory", type=float, metavar="GB",
                        help="limit lambdad's address space to this many GB")
    parser.add_argument("--json", type=Path, help="append every row here, a JSON line each")
    parser.add_argument("--log", type=Path, help="write every message and response here")
    parser.add_argument("eval", metavar="EVAL", nargs="?")
    parser.add_argument("eval_args", nargs="*", metavar="EVAL-ARGS")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if args.gradbench is None or args.eval is None:
        parser.error("--gradbench DIR and EVAL are needed (or --table FILE...)")
    log = args.log.open("w") if args.log else None
    gradbench = args.gradbench.resolve()
    status = 0
    for name in args.tools.split(","):
        if name not in TOOLS:
            parser.error(f"unknown tool {name!r} (known: {', '.join(TOOLS)})")
        tool = tool_for(name, gradbench, args.python, args.tool_python, args.memory)
        rows, outcome = run(gradbench, args.python, args.eval, args.eval_args, tool,
                            args.timeout, log)
        print_rows(name, rows, outcome)
        if args.json:
            with args.json.open("a") as out:
                for row in rows:
                    out.write(json.dumps({"tool": name} | row) + "\n")
        if name == "lambdad" and not (outcome == "success" and rows
                                      and all(row["valid"] for row in rows)):
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
