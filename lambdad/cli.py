"""The ``lambdad`` command: a thin layer over :mod:`lambdad.pipeline`.

Results go to stdout, diagnostics to stderr.  Exit status: 0 success, 1 an error in the
program (parse, type, runtime), 2 a usage error, 4 a missing optional tool (Graphviz for
PNG, matplotlib for plots).  No Python traceback reaches the user unless
``LAMBDAD_DEBUG=1`` is set.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

from .errors import FileAccessError, LambdadError, UsageError, render
from .limits import default_max_memory, parse_bytes, watching
from .pipeline import COMPOSITIONS, MODES, DEFAULT_STRATEGY, STRATEGIES, Program
from .results import format_hessian, format_jacobian, format_result, json_result
from .sources import PRELUDE_FILE, prelude_text, read_source
from .values import format_value, to_json


class _Session:
    """What the CLI needs to render errors: every source text it has seen, by file name."""

    def __init__(self) -> None:
        self.sources: dict[str, str] = {PRELUDE_FILE: prelude_text()}
        self.max_steps: int | None = None  # --max-steps, for every evaluation of the command

    def load(self, path: str) -> Program:
        text = read_source(path)
        self.sources[path] = text
        program = Program(text, path, sources=self.sources)  # (it adds the files imported)
        program.set_max_steps(self.max_steps)
        return program


def _show(value: Any) -> str:
    """Python data in the language's syntax."""
    return format_result(value)


def _json_value(value: Any) -> Any:
    return json_result(value)


@contextmanager
def _limits(program: Program, args: argparse.Namespace):
    """The step limit the user asked for (--max-steps).  It is set when the program is
    loaded, so points are evaluated under it too; --timeout covers the whole command
    (loading, parsing, type checking, points, running, printing: see :func:`main`)."""
    program.set_max_steps(getattr(args, "max_steps", None))
    yield


# ---------------------------------------------------------------- commands


def cmd_run(session: _Session, args: argparse.Namespace) -> int:
    program = session.load(args.file)
    with _limits(program, args):
        value = program.run_written(args.entry)
    if args.json:
        print(json.dumps({"value": to_json(value)}))
    else:
        print(format_value(value))
    return 0


def cmd_check_types(session: _Session, args: argparse.Namespace) -> int:
    program = session.load(args.file)
    for warning in program.warnings():
        print(render(warning, session.sources), file=sys.stderr)
    listed = program.types()
    if args.prelude:
        listed = program.builtin_types() + program.prelude_types() + listed
    for name, scheme in listed:
        print(f"{name} : {scheme}")
    return 0


def _point(session: _Session, program: Program, text: str, flag: str, name: str | None
           ) -> Any:
    """The point of ``--at`` (or ``--dir``) of the definition ``name``: written in the
    language (``2,5``, ``array [1, 2]``; its tuples nested as ``name``'s parameters), or
    ``@FILE``, read from a JSON, ``.npy`` or ``.npz`` file (for points no one types)."""
    if text.startswith("@"):
        return program.points.point_from_file(text[1:], flag)
    session.sources[flag] = text
    if name is None:  # (a point for several definitions)
        return program.points.parse_point(text, flag)
    return program.points.parse_point_for(name, text, flag)


def _restricted(program: Program, args: argparse.Namespace, point: Any) -> tuple[Program, Any]:
    """The program and point for ``--wrt a,b``: ``args.name`` as a function of those
    parameters only (unchanged without --wrt)."""
    if args.wrt is None:
        return program, point
    return program.restricted(args.name, point, _names(args.wrt))


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def cmd_grad(session: _Session, args: argparse.Namespace) -> int:
    program = session.load(args.file)
    point = _point(session, program, args.at, "--at", args.name)
    program, point = _restricted(program, args, point)
    modes = ("reverse", "forward") if args.mode == "both" else (args.mode,)
    results = {}
    with _limits(program, args):
        for mode in modes:
            started = time.perf_counter()
            value, gradient, stats = program.value_and_grad(
                args.name, point, mode=mode, strategy=args.strategy, stats=True)
            results[mode] = (value, gradient, stats, time.perf_counter() - started)
    first = results[modes[0]]
    if args.json:
        out: dict[str, Any] = {
            "value": _json_value(first[0]),
            "gradient": _json_value(first[1]),
            "mode": args.mode,
            "strategy": args.strategy,
            "seconds": sum(r[3] for r in results.values()),
        }
        if args.mode == "both":
            out["gradient_forward"] = _json_value(results["forward"][1])
        if args.stats and "reverse" in results:
            stats = results["reverse"][2]
            out["backpropagators_created"] = stats.created
            out["backpropagator_bodies_run"] = stats.bodies_run
            if len(stats.levels) > 1:
                out["levels"] = [{"depth": level.depth, "modes": list(level.modes),
                                  "created": level.created, "bodies_run": level.bodies_run}
                                 for level in stats.levels]
        print(json.dumps(out))
        return 0
    print(f"value: {_show(first[0])}")
    if args.mode == "both":
        print(f"gradient (reverse, {args.strategy}): {_show(results['reverse'][1])}")
        print(f"gradient (forward): {_show(results['forward'][1])}")
    else:
        print(f"gradient: {_show(first[1])}")
    if args.stats and "reverse" in results:
        print(results["reverse"][2])
    return 0


def cmd_jvp(session: _Session, args: argparse.Namespace) -> int:
    program, point, direction = _point_and_direction(session, args)
    with _limits(program, args):
        value, tangent = program.jvp(args.name, point, direction)
    return _print_results(args, [("value", "value", value),
                                 ("derivative", "derivative", tangent)])


def _point_and_direction(session: _Session, args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The program of FILE, its point --at and the direction --dir."""
    program = session.load(args.file)
    return (program, _point(session, program, args.at, "--at", args.name),
            _point(session, program, args.dir, "--dir", args.name))


def _print_results(args: argparse.Namespace, results: list[tuple[str, str, Any]]) -> int:
    """Prints ``results`` (JSON key, label, value): one JSON object with --json, else a
    line ``label: value`` each; returns the exit status 0."""
    if args.json:
        print(json.dumps({key: _json_value(value) for key, _, value in results}))
    else:
        for _, label, value in results:
            print(f"{label}: {_show(value)}")
    return 0


def cmd_hessian(session: _Session, args: argparse.Namespace) -> int:
    program = session.load(args.file)
    point = _point(session, program, args.at, "--at", args.name)
    program, point = _restricted(program, args, point)
    with _limits(program, args):
        value, gradient, rows = program.hessian(args.name, point, mode=args.mode,
                                                strategy=args.strategy)
    names = program.input_names(args.name, point)
    if args.json:
        print(json.dumps({"value": _json_value(value), "gradient": _json_value(gradient),
                          "inputs": names, "hessian": [_json_value(row) for row in rows],
                          "mode": args.mode}))
        return 0
    print(format_hessian(value, gradient, rows, names, args.mode))
    return 0


def cmd_hvp(session: _Session, args: argparse.Namespace) -> int:
    program, point, direction = _point_and_direction(session, args)
    with _limits(program, args):
        value, gradient, product = program.hvp(args.name, point, direction)
    return _print_results(args, [("value", "value", value), ("gradient", "gradient", gradient),
                                 ("hvp", "hessian-vector product", product)])


def cmd_jacobian(session: _Session, args: argparse.Namespace) -> int:
    program = session.load(args.file)
    point = _point(session, program, args.at, "--at", args.name)
    with _limits(program, args):
        result = program.jacobian(args.name, point, mode=args.mode,
                                  wrt=_names(args.wrt) if args.wrt is not None else None)
    if args.json:
        print(json.dumps({"value": _json_value(result.value),
                          "jacobian": _json_value(result.jacobian), "matrix": result.matrix,
                          "inputs": result.inputs, "outputs": result.outputs,
                          "mode": result.mode}))
        return 0
    print(format_jacobian(result, chosen=not args.mode))
    return 0


def cmd_show(session: _Session, args: argparse.Namespace) -> int:
    from . import highlight  # colours for a terminal only

    program = session.load(args.file)
    point = _point(session, program, args.at, "--at", args.name) if args.at is not None else None
    text = program.show(args.name, forward=args.forward, reverse=args.reverse, at=point,
                        raw=args.raw, fused=args.fused)
    sys.stdout.write(highlight.for_terminal(text, sys.stdout))
    return 0


def cmd_repl(session: _Session, args: argparse.Namespace) -> int:
    # Imported here: the REPL's line editor is only needed by this command.
    from . import repl

    return repl.main(args.file)


def cmd_trace(session: _Session, args: argparse.Namespace) -> int:
    from .trace import format_trace, trace

    program = session.load(args.file)
    point = _point(session, program, args.at, "--at", args.name)
    with _limits(program, args):
        result = trace(program, args.name, point, mode=args.mode, strategy=args.strategy)
    print(format_trace(result, session.sources))
    return 0


def cmd_graph(session: _Session, args: argparse.Namespace) -> int:
    from .graph import graph_of, write_graph
    from .trace import trace

    program = session.load(args.file)
    point = _point(session, program, args.at, "--at", args.name)
    with _limits(program, args):
        result = trace(program, args.name, point, mode=args.mode, strategy="factored")
    graph = graph_of(result, title=f"{args.name} at {args.at}", constants=args.constants)
    if args.output is None:
        sys.stdout.write(graph.dot())
    else:
        try:
            note = write_graph(graph, args.output)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the file name
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise FileAccessError(f"cannot write {args.output!r}: {reason}") from None
        print(note, file=sys.stderr)
    return 0


def cmd_plot(session: _Session, args: argparse.Namespace) -> int:
    from . import plot

    program = session.load(args.file)
    start, stop = ((None if text is None else plot.bound_of(program, text, flag))
                   for flag, text in (("--from", args.start), ("--to", args.stop)))
    with _limits(program, args):
        drawn = plot.plot_of(program, args.name, start, stop, args.order, args.samples)
    if args.output is None:
        print(drawn.text())
    else:
        print(plot.write_plot(drawn, args.output), file=sys.stderr)
    for note in drawn.notes():
        print(f"note: {note}", file=sys.stderr)
    return 0


def cmd_check(session: _Session, args: argparse.Namespace) -> int:
    from . import gradcheck

    program = session.load(args.file)
    point = _point(session, program, args.at, "--at",
                   args.names[0] if len(args.names) == 1 else None) \
        if args.at is not None else None
    if args.order == 2:
        with _limits(program, args):
            second = gradcheck.check_second_order(program, args.names or None, point=point,
                                                  samples=args.samples or 3, seed=args.seed,
                                                  eps=args.eps, rtol=args.rtol)
        print(second.render())
        for mismatch in second.mismatches():
            print(f"mismatch: {mismatch}", file=sys.stderr)
        return 0 if second.ok else 1
    with _limits(program, args):
        report = gradcheck.check(program, args.names or None, point=point,
                                 samples=args.samples or 3, seed=args.seed, eps=args.eps,
                                 rtol=args.rtol, jobs=args.jobs or gradcheck.default_jobs(),
                                 wrt=_names(args.wrt) if args.wrt is not None else None)
    print(report.render())
    for mismatch in report.mismatches():
        print(f"mismatch: {mismatch}", file=sys.stderr)
    return 0 if report.ok else 1


def cmd_fuzz(session: _Session, args: argparse.Namespace) -> int:
    # Imported here: hypothesis is slow to import and only this command needs it.
    from . import testing

    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            print(f"fuzz: {done}/{total} programs", file=sys.stderr, flush=True)

    from .gradcheck import default_jobs

    declared = session.load(args.primitives).declared_primitives() if args.primitives else ()
    report = testing.fuzz(lambda text: Program(text, "<fuzz>"), count=args.programs,
                          seed=args.seed, progress=progress, jobs=args.jobs or default_jobs(),
                          declared=declared)
    print(report.render())
    return 0 if report.ok else 1


# ---------------------------------------------------------------- argument parsing


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as UsageError (exit 2, no traceback)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.print_usage(sys.stderr)
        raise UsageError(message)

    def _get_values(self, action, arg_strings):
        # Python 3.11 reads `--at=--` as an empty list; an option taking one value wants one.
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="lambdad",
        description="Run and differentiate lambdad programs (.lam): forward mode and "
                    "backpropagation as program transformations.")
    parser.add_argument("--version", action="version", version=f"lambdad {_version()}",
                        help="print lambdad's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add(name: str, handler: Callable, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    def wrt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--wrt", metavar="NAME[,NAME...]",
                       help="differentiate with respect to these parameters only; the others "
                            "are held at their values in --at")

    def program_file(p: argparse.ArgumentParser) -> None:
        p.add_argument("file", metavar="FILE", help="the .lam program")

    def file_and_name(p: argparse.ArgumentParser) -> None:
        program_file(p)
        p.add_argument("name", metavar="NAME", help="a top-level function of FILE")

    def strategy(p: argparse.ArgumentParser, when: str = "",
                 default: str = DEFAULT_STRATEGY) -> None:
        p.add_argument("--strategy", choices=STRATEGIES, default=default,
                       help=f"how backpropagators are evaluated{when} (default: {default})")

    def point(p: argparse.ArgumentParser, **extra: Any) -> None:
        p.add_argument("--at", metavar="POINT", **{
            "help": "the point, in lambdad syntax: 2,5 or '(2, 5)' or '[1, 2, 3]' (one value "
                    "per curried argument, or the first argument alone)", **extra})

    def timeout(p: argparse.ArgumentParser, steps: bool = True,
                what: str = "the run") -> None:
        p.add_argument("--timeout", type=_seconds, metavar="S",
                       help=f"stop {what} cleanly after S seconds (default: no limit)")
        if steps:
            p.add_argument("--max-steps", type=_positive, metavar="N",
                           help="stop the run cleanly after N steps: primitive "
                                "operations, and a step per element of each list a "
                                "primitive makes (default: no limit)")
        p.add_argument("--max-memory", type=_memory, metavar="SIZE",
                       help="stop the run cleanly when the process uses more than SIZE of "
                            "memory: 500M, 2G, ... (default: half of the machine's memory)")

    def at_point(name: str, handler: Callable, help_text: str) -> argparse.ArgumentParser:
        """A command on the function NAME of FILE at the point --at."""
        p = add(name, handler, help_text)
        file_and_name(p)
        point(p, required=True)
        return p

    def json_output(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--json", action="store_true", help=what)

    def direction(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--dir", required=True, metavar="VECTOR",
                       help=f"{what}, shaped like POINT, in lambdad syntax")

    p = add("run", cmd_run, "type-check FILE and print the value of main (or --entry NAME)")
    program_file(p)
    p.add_argument("--entry", default="main", metavar="NAME",
                   help="the definition to evaluate (default: main)")
    json_output(p, "print {\"value\": ...} as JSON")
    timeout(p)

    p = add("check-types", cmd_check_types, "print every top-level name with its inferred type")
    program_file(p)
    p.add_argument("--prelude", action="store_true",
                   help="first list the built-ins written as names and the prelude's "
                        "definitions, with their types")
    timeout(p)

    p = at_point("grad", cmd_grad, "value and gradient of a top-level function at a point")
    p.add_argument("--mode", choices=MODES, default="reverse",
                   help="reverse (backpropagation, default), forward (one run per input "
                        "real), or both side by side")
    strategy(p)
    p.add_argument("--stats", action="store_true",
                   help="also report backpropagators created and bodies run (reverse mode)")
    json_output(p, "print one JSON object (value, gradient, mode, strategy, seconds)")
    wrt(p)
    timeout(p)

    p = at_point("jacobian", cmd_jacobian, "value and Jacobian of a top-level function at a "
                                           "point, for any result built from reals, pairs and "
                                           "lists")
    p.add_argument("--mode", choices=("forward", "reverse"), default=None,
                   help="forward (one run per input real) or reverse (one backward pass per "
                        "output real); default: the cheaper, forward unless there are more "
                        "inputs than outputs")
    json_output(p, "print one JSON object")
    wrt(p)
    timeout(p)

    p = at_point("jvp", cmd_jvp, "forward-mode value and directional derivative")
    direction(p, "the direction")
    json_output(p, "print {\"value\": ..., \"derivative\": ...} as JSON")
    timeout(p)

    p = at_point("hessian", cmd_hessian, "value, gradient and Hessian of a top-level function "
                                         "at a point (nested differentiation)")
    p.add_argument("--mode", choices=COMPOSITIONS, default=COMPOSITIONS[0],
                   help="outer mode over inner mode (default forward-over-reverse: one "
                        "Hessian-vector product per input)")
    strategy(p)
    json_output(p, "print one JSON object (value, gradient, inputs, hessian)")
    wrt(p)
    timeout(p)

    p = at_point("hvp", cmd_hvp, "Hessian-vector product H·v of a top-level function "
                                 "(forward mode over reverse mode)")
    direction(p, "the vector v")
    json_output(p, "print one JSON object (value, gradient, hvp)")
    timeout(p)

    p = add("show", cmd_show, "print the transformed program of a function as lambdad source")
    file_and_name(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--forward", action="store_true", help="forward mode (dual numbers)")
    which.add_argument("--reverse", action="store_true",
                       help="reverse mode: backpropagation (linear negation)")
    # The earlier spelling, still accepted: reverse mode is what every other option calls it.
    which.add_argument("--backward", dest="reverse", action="store_true",
                       help=argparse.SUPPRESS)
    point(p, help="also print a main computing the value and the gradient at POINT")
    p.add_argument("--raw", action="store_true",
                   help="the rules' literal output, without simplification")
    p.add_argument("--fused", action="store_true",
                   help="reverse mode as the fused strategy runs it: the backpropagators of "
                        "each straight-line region fused (not simplified)")
    timeout(p)

    p = add("repl", cmd_repl, "the interactive loop, with FILE's definitions loaded")
    p.add_argument("file", metavar="FILE", nargs="?", help="a .lam file to load first")

    p = at_point("trace", cmd_trace, "the evaluation trace: one row per primitive operation "
                                     "with its value and tangents (forward) or adjoint "
                                     "(reverse)")
    p.add_argument("--mode", choices=("forward", "reverse"), default="forward",
                   help="forward: a tangent column per input real (default); reverse: the "
                        "adjoint of every operation")
    # The trace shows one backpropagator per operation, as the paper evaluates ←D.
    strategy(p, " in reverse mode", default="factored")
    timeout(p)

    p = at_point("graph", cmd_graph, "the computational graph of one evaluation (DOT text, or "
                                     "an SVG picture; PNG/PDF with Graphviz), nodes labelled "
                                     "with values and adjoints")
    p.add_argument("--mode", choices=("reverse", "forward"), default="reverse",
                   help="label nodes with adjoints (reverse, default) or tangents (forward)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="OUT.dot, OUT.svg (no Graphviz needed), OUT.png or OUT.pdf (Graphviz)")
    p.add_argument("--constants", action="store_true",
                   help="also draw the operations that read no input (`1 - 0`) as nodes with "
                        "their adjoints (default: their values are written where they are used)")
    timeout(p)

    p = add("plot", cmd_plot, "draw a function of one real and its derivatives over an "
                              "interval, or a list of reals (a loss per step) against its "
                              "index (pictures need matplotlib: the plot extra)")
    file_and_name(p)
    p.add_argument("--from", dest="start", metavar="A",
                   help="the interval's left end (a function R -> R)")
    p.add_argument("--to", dest="stop", metavar="B", help="the interval's right end")
    p.add_argument("--order", type=int, default=None, metavar="K",
                   help="also draw the first K derivatives, by nested forward mode "
                        "(default 1; 0 draws the function alone)")
    p.add_argument("--samples", type=_positive, default=None, metavar="N",
                   help="evaluate at N evenly spaced points (default 401)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="OUT.svg, OUT.png or OUT.pdf (default: print the points as a table)")
    timeout(p)

    p = add("check", cmd_check, "gradient check: forward mode, both reverse strategies and "
                                "central finite differences must agree")
    program_file(p)
    p.add_argument("names", metavar="NAME", nargs="*",
                   help="functions to check (default: every function of reals, pairs and "
                        "lists returning R)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--at", metavar="POINT",
                       help="check at this point only, in lambdad syntax (default: sampled "
                            "points, see --samples)")
    # No default here: argparse could not tell `--samples 3` from the default otherwise.
    where.add_argument("--samples", type=_count, metavar="N",
                       help="check at N random points away from kinks (default 3, at most 100000)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the random points (default 0)")
    p.add_argument("--eps", type=_step, default=None, metavar="E",
                   help="relative finite-difference step (default cbrt(machine epsilon))")
    p.add_argument("--rtol", type=float, default=None, metavar="R",
                   help="relative tolerance against finite differences, in (0, 1) "
                        "(default 1e-5)")
    p.add_argument("--order", type=int, choices=(1, 2), default=1,
                   help="1: first derivatives (default); 2: second derivatives (every "
                        "composition of the modes) against central differences of the gradient")
    p.add_argument("--jobs", type=_positive, default=None, metavar="N",
                   help="check the sampled points in N processes (default: all cores); the "
                        "report is the same for every N")
    wrt(p)
    timeout(p)

    p = add("fuzz", cmd_fuzz, "run the property tests on random well-typed programs; report a "
                              "minimal failing program")
    p.add_argument("--programs", type=_count, default=100, metavar="N",
                   help="how many random programs (default 100, at most 100000)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the random programs (default 0)")
    p.add_argument("--jobs", type=_positive, default=None, metavar="N",
                   help="run the programs in N processes (default: all cores); the report is "
                        "the same for every N")
    p.add_argument("--primitives", metavar="FILE",
                   help="also use the primitives FILE declares (`primitive f x = ...`)")
    timeout(p, steps=False, what="the whole fuzz run (all the programs)")
    return parser


def _version() -> str:
    """The installed version of lambdad."""
    try:
        return importlib.metadata.version("lambdad")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {_quoted(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {_quoted(text)}")
    return value


# The most random points (--samples) or programs (--fuzz --programs) one command takes:
# already hours of work; a larger count is a typing mistake, not a longer run.
MAX_COUNT = 100_000


def _count(text: str) -> int:
    """argparse type: an integer from 1 to MAX_COUNT."""
    value = _positive(text)
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"at most {MAX_COUNT}: {_quoted(text)}")
    return value


# The longest --timeout accepted (30 days): beyond it the system timer overflows.
MAX_TIMEOUT_SECONDS = 30 * 24 * 3600.0
# The shortest (1 ms): a shorter one would stop every command before it starts.
MIN_TIMEOUT_SECONDS = 0.001


def _positive_real(text: str) -> float:
    """argparse type: a finite real > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_quoted(text)}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0: {_quoted(text)}")
    return value


def _seconds(text: str) -> float:
    """argparse type: a time limit in seconds, above 0 and at most MAX_TIMEOUT_SECONDS
    (``--timeout 0`` is refused rather than read as "no limit": omit the option for that)."""
    value = _positive_real(text)
    if value < MIN_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"at least {MIN_TIMEOUT_SECONDS:g} seconds: {_quoted(text)}")
    if value > MAX_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_TIMEOUT_SECONDS:.0f} seconds (30 days); omit --timeout for no limit")
    return value


def _memory(text: str) -> int:
    """argparse type: a memory size above 0 (``500M``, ``2G``, ``1.5GB``, bytes)."""
    value = parse_bytes(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"not a size (a number of bytes, or with K, M, G, T): {_quoted(text)}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {_quoted(text)}")
    return value


def _memory_limit(args: argparse.Namespace) -> int | None:
    """The memory limit of a command taking --max-memory (its default if not given); None
    for a command without it (the REPL: a session, not a run)."""
    if not hasattr(args, "max_memory"):
        return None
    return args.max_memory if args.max_memory is not None else default_max_memory()


def _step(text: str) -> float:
    """argparse type: a relative finite-difference step, strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_quoted(text)}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {_quoted(text)}")
    return value


def _quoted(text: str) -> str:
    """``text`` for a message: repr-quoted, control characters escaped, shortened."""
    shown = repr(text[:40])
    return shown if len(text) <= 40 else shown[:-1] + "..." + shown[-1]


def _attach_negative_values(argv: list[str]) -> list[str]:
    """``--at -1,2`` as ``--at=-1,2``: argparse would read ``-1,2`` as an option."""
    out: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if (arg in ("--at", "--dir", "--from", "--to") and index + 1 < len(argv) and argv[index + 1] != "--"
                and argv[index + 1].startswith("-")):
            out.append(f"{arg}={argv[index + 1]}")
            index += 2
            continue
        out.append(arg)
        index += 1
    return out


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of what could not be
    written raises nothing more."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    session = _Session()
    debug = os.environ.get("LAMBDAD_DEBUG") == "1"
    try:
        args = build_parser().parse_args(_attach_negative_values(
            list(sys.argv[1:] if argv is None else argv)))
        session.max_steps = getattr(args, "max_steps", None)
        with watching(getattr(args, "timeout", None), _memory_limit(args)):
            status = args.handler(session, args)
            sys.stdout.flush()  # a full disk or a closed pipe is reported here, not at exit
        return status
    except LambdadError as error:
        print(render(error, session.sources), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # writing the results failed (a full disk, a lost terminal)
        _silence_stdout()
        print(f"I/O error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        return int(exit_.code or 0)
    except Exception as exc:  # an internal error: say so, without a traceback
        if debug:
            raise
        print(f"internal error: {type(exc).__name__}: {exc}\n"
              "(this is a bug in lambdad; run with LAMBDAD_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 3
