"""``python -m lambdad.gradbench``: lambdad as a tool of GradBench, the shared benchmark of
automatic differentiation tools (github.com/gradbench/gradbench).

A tool is a process that reads one JSON message a line on stdin and answers each with one
JSON line on stdout (GradBench's CONTRIBUTING.md, "Protocol"):

- ``start``: the answer names the tool;
- ``define`` a module: the module's ``.lam`` program (``lambdad/evals/MODULE.lam``, or
  ``--programs DIR``) is read and type-checked, and the time it took is reported as the
  timing ``load``; a module lambdad has no program for is ``success: false`` with an
  ``error``;
- ``evaluate`` a function of a defined module at an ``input``: the input is turned into the
  point of the program's function of that name (the timing ``convert``), the function is
  run at least ``min_runs`` times and until ``min_seconds`` have passed (one timing
  ``evaluate`` a run, the computation only), and the answer carries the last ``output``.
  The first evaluation of each function in a session is preceded by one more run, timed as
  ``warmup``: it compiles the function and its derivatives, which later runs reuse
  (``--no-warmup``: no such run);
- any other message (``analysis``): an answer with its id alone.

The derivatives are the program's: each function of a module is a definition of its
``.lam`` file, the derivatives taken there by ``grad``, ``jvp`` and the rest.  This module
only reads messages, converts inputs and outputs, and times calls of the public API.
Bad input never stops the tool with a traceback: an error in a message is reported in the
answer's ``error`` field (``success: false``), a line that is not a message on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import importlib.metadata
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

import attrs
import numpy as np
from threadpoolctl import threadpool_limits

from .errors import LambdadError, render
from .pipeline import Program, load
from .syntax import ArrayT, FunT, ListT, Type

# Where the programs of the evals are installed (package data).
PROGRAMS = Path(__file__).resolve().parent / "evals"


@attrs.frozen
class Function:
    """How an eval's ``input`` becomes the point of a function of the program, and its
    result the ``output``: the input's fields, in the order of the function's parameters
    (``None``: the input is the point itself); whether the input asks for repeated runs
    (``min_runs``, ``min_seconds``); and the output made of the result (Python data), when
    the eval wants another form than the result's own."""

    fields: tuple[str, ...] | None
    runs: bool = True
    output: Callable[[Any], Any] | None = None
    # for an input that is not its fields in order: the definition to call and its point
    prepare: Callable[[str, Any], tuple[str, Any]] | None = None
    also: tuple[str, ...] = ()  # other definitions ``prepare`` may call

    def shaped(self, result: Any) -> Any:
        """The output for the function's result."""
        return result if self.output is None else self.output(result)


def _functions(names: Iterable[str], fields: tuple[str, ...] | None,
               runs: bool = True) -> Mapping[str, Function]:
    return {name: Function(fields, runs) for name in names}


def _components(result: Any, count: int) -> list[Any]:
    """The ``count`` components of a tuple result (a ``count``-tuple, as written); raises
    ValueError for a result of another form."""
    if not isinstance(result, tuple) or len(result) != count:
        raise ValueError(f"expected a tuple of {count} components")
    return list(result)


def _object(*names: str) -> Callable[[Any], dict[str, Any]]:
    """The output of a tuple result as an object, a field of that name per component."""
    return lambda result: dict(zip(names, _components(result, len(names))))


def _ba_errors(result: Any) -> dict[str, Any]:
    """ba's objective as GradBench's validator compares it (every copy of the input gives
    the same errors): the first observation's two reprojection errors and the first
    weight error, each with the number of them."""
    reprojection, weights = _components(result, 2)
    return {"reproj_error": {"elements": [*reprojection[:2]],
                             "repeated": len(reprojection) // 2},
            "w_err": {"element": weights[0], "repeated": len(weights)}}


def _ba_sparse(result: Any) -> dict[str, Any]:
    """ba's Jacobian as GradBench's validator compares it: the first 30 and the last of
    the row starts, columns and values (the first observation's two rows of 15 entries,
    and the last weight error's)."""
    rows, cols, vals = _components(result, 3)  # (lists, or arrays)
    return {"rows": [*rows[:30], *rows[-1:]], "cols": [*cols[:30], *cols[-1:]],
            "vals": [*vals[:30], *vals[-1:]]}


def _field(data: Any, path: str) -> Any:
    """The field at the dotted ``path`` of the input ``data``; MessageError if missing."""
    value = data
    for name in path.split("."):
        if not isinstance(value, dict) or name not in value:
            raise MessageError(f"the input has no field `{path}`")
        value = value[name]
    return value


HT_MODEL = ("data.model.parents", "data.model.base_relatives",
            "data.model.inverse_base_absolutes", "data.model.base_positions",
            "data.model.weights")


def _ht_point(name: str, data: Any) -> tuple[str, Any]:
    """ht's input as the point of its program's function: theta, the barycentric
    coordinates (when there are any), the model's arrays, whether it is mirrored (1 or 0),
    the triangles, the correspondences and the points.  An empty ``us`` is the simple
    variant, whose definitions are NAME_simple."""
    if not isinstance(data, dict):
        raise MessageError(f"the input must be an object, not {_json_kind(data)}")
    us = reals(_field(data, "us"), "the input's `us`")
    mirrored = _field(data, "data.model.is_mirrored")
    if not isinstance(mirrored, bool):
        raise MessageError("the input's `data.model.is_mirrored` must be a boolean, "
                           f"not {_json_kind(mirrored)}")
    model = tuple(reals(_field(data, path), f"the input's `{path}`") for path in HT_MODEL)
    rest = tuple(reals(_field(data, path), f"the input's `{path}`")
                 for path in ("data.model.triangles", "data.correspondences", "data.points"))
    theta = reals(_field(data, "theta"), "the input's `theta`")
    if us:
        return name, (theta, us, *model, 1.0 if mirrored else 0.0, *rest)
    return f"{name}_simple", (theta, *model, 1.0 if mirrored else 0.0, *rest)


GMM_PARAMETERS = ("alpha", "mu", "q", "l")
BA_INPUT = ("n", "m", "p", "cam", "x", "w", "feat")

# The modules lambdad has programs for, with their functions, as each eval's README
# specifies them.
MODULES: Mapping[str, Mapping[str, Function]] = MappingProxyType({
    "hello": MappingProxyType(_functions(("square", "double"), None, runs=False)),
    "llsq": MappingProxyType(_functions(("primal", "gradient"), ("x", "n"))),
    "lse": MappingProxyType(_functions(("primal", "gradient"), ("x",))),
    "det": MappingProxyType(_functions(("primal", "gradient"), ("A", "ell"))),
    "ode": MappingProxyType(_functions(("primal", "gradient"), ("x", "s"))),
    "kmeans": MappingProxyType(_functions(("cost", "dir"), ("points", "centroids"))),
    "saddle": MappingProxyType(_functions(("rr", "ff", "fr", "rf"), ("start",))),
    "particle": MappingProxyType(_functions(("rr", "ff", "fr", "rf"), ("w",))),
    "gmm": MappingProxyType({
        "objective": Function((*GMM_PARAMETERS, "x", "m", "gamma")),
        "jacobian": Function((*GMM_PARAMETERS, "x", "m", "gamma"),
                             output=_object(*GMM_PARAMETERS))}),
    "lstm": MappingProxyType(_functions(("objective", "jacobian"),
                                        ("main_params", "extra_params", "state", "sequence"))),
    "ba": MappingProxyType({"objective": Function(BA_INPUT, output=_ba_errors),
                            "jacobian": Function(BA_INPUT, output=_ba_sparse)}),
    "ht": MappingProxyType({name: Function(None, prepare=_ht_point, also=(f"{name}_simple",))
                            for name in ("objective", "jacobian")}),
})


class MessageError(Exception):
    """A message, or the input of one, that the tool cannot act on; the text says why."""


def _timing(name: str, nanoseconds: int) -> dict[str, Any]:
    return {"name": name, "nanoseconds": nanoseconds}


def reals(value: Any, where: str) -> Any:
    """``value`` (decoded JSON) with every number a float, lists kept: the data of a
    point.  Raises MessageError naming ``where`` for anything else (strings, objects,
    booleans, non-finite numbers)."""
    if not isinstance(value, list):
        return _real(value, where)
    # lists converted with a work stack, so nesting depth costs no recursion
    result: list[Any] = []
    pending: list[tuple[list[Any], list[Any]]] = [(value, result)]
    while pending:
        source, target = pending.pop()
        if all(type(item) is float for item in source):  # the common case, in one pass
            if not all(map(math.isfinite, source)):
                _real(next(r for r in source if not math.isfinite(r)), f"an element of {where}")
            target.extend(source)
            continue
        for item in source:
            if isinstance(item, list):
                inner: list[Any] = []
                target.append(inner)
                pending.append((item, inner))
            else:
                target.append(_real(item, f"an element of {where}"))
    return result


def _real(value: Any, where: str) -> float:
    """The number ``value`` as a float; MessageError naming ``where`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MessageError(f"{where} must be a number or a list of numbers, "
                           f"not {_json_kind(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise MessageError(f"{where} is too large for a real") from None
    if not math.isfinite(number):
        raise MessageError(f"{where} must be finite, not {number}")
    return number


# How a message names a JSON value of the wrong kind, by its Python type (in this order).
_JSON_KINDS = ((type(None), "null"), (bool, "a boolean"), (str, "a string"), (dict, "an object"),
               (list, "a list"))


def _json_kind(value: Any) -> str:
    """The kind of the decoded JSON value ``value``: ``a list``, ``null``... (``a number``
    for anything else)."""
    return next((kind for python_type, kind in _JSON_KINDS if isinstance(value, python_type)),
                "a number")


def _count(data: Mapping[str, Any], field: str, at_least: float) -> float:
    """The number ``data[field]`` (missing: ``at_least``); MessageError if it is not a
    number of at least ``at_least``."""
    value = data.get(field, at_least)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < at_least:
        raise MessageError(f"the input's `{field}` must be a number >= {at_least:g}, "
                           f"not {json.dumps(value)[:40]}")
    return value


class Session:
    """One run of the protocol: the modules defined so far and the functions already
    warmed up.  ``clock`` gives nanoseconds (``time.perf_counter_ns``)."""

    def __init__(self, programs: Path = PROGRAMS, warmup: bool = True,
                 clock: Callable[[], int] = time.perf_counter_ns):
        self.programs = programs
        self.clock = clock
        self.defined: dict[str, Program] = {}
        # the functions run once already (none to warm up when ``warmup`` is false)
        self.warm: set[tuple[str, str]] | None = set() if warmup else None
        self.invalid: list[tuple[Any, str]] = []  # evaluations an analysis judged invalid

    # ------------------------------------------------------------ messages
    def answer(self, message: Any) -> dict[str, Any]:
        """The response to one decoded message.  Raises MessageError for a message
        without an id (nothing can answer it)."""
        if not isinstance(message, dict):
            raise MessageError(f"a message must be a JSON object, not {_json_kind(message)}")
        if "id" not in message:
            raise MessageError("the message has no `id`")
        ident = message["id"]
        kind = message.get("kind")
        try:
            if kind == "start":
                return {"id": ident, "tool": "lambdad",
                        "config": {"version": _version(), "programs": str(self.programs)}}
            if kind == "define":
                return {"id": ident, **self.define(message.get("module"))}
            if kind == "evaluate":
                return {"id": ident, **self.evaluate(message)}
        except MessageError as error:
            return {"id": ident, "success": False, "error": str(error)}
        except MemoryError:
            return {"id": ident, "success": False, "error": "out of memory"}
        except Exception as exc:  # an internal error: said in the answer, no traceback
            return {"id": ident, "success": False,
                    "error": f"internal error: {type(exc).__name__}: {exc} (a bug in lambdad)"}
        if kind == "analysis" and message.get("valid") is False:
            self.invalid.append((message.get("of"), str(message.get("error", ""))))
        return {"id": ident}

    def define(self, module: Any) -> dict[str, Any]:
        """Load and type-check the module's program: ``success`` and the ``load`` timing,
        or ``success: false`` with an ``error``."""
        if not isinstance(module, str):
            raise MessageError("a define message needs the `module`'s name, a string")
        functions = MODULES.get(module)
        if functions is None:
            raise MessageError(f"lambdad has no program for the module `{module}` "
                               f"(it has: {', '.join(MODULES)})")
        path = self.programs / f"{module}.lam"
        start = self.clock()
        try:
            program = load(path)
        except LambdadError as error:
            raise MessageError(render(error, _sources(path))) from None
        loaded = self.clock() - start
        missing = [name for function_name, function in functions.items()
                   for name in (function_name, *function.also)
                   if name not in program.names()]
        if missing:
            raise MessageError(f"{path} does not define {', '.join(missing)}, which the "
                               f"module `{module}` needs")
        self.defined[module] = program
        return {"success": True, "timings": [_timing("load", loaded)]}

    def evaluate(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Run the function at the input: ``success``, the ``output`` and the timings."""
        module, name = message.get("module"), message.get("function")
        program = self.defined.get(module) if isinstance(module, str) else None
        if program is None:
            raise MessageError(f"the module {json.dumps(module)[:60]} is not defined "
                               "(a define message must come first)")
        function = MODULES[module].get(name) if isinstance(name, str) else None
        if function is None:
            raise MessageError(f"the module `{module}` has no function "
                               f"{json.dumps(name)[:60]} (it has: {', '.join(MODULES[module])})")
        if "input" not in message:
            raise MessageError("an evaluate message needs an `input`")
        data = message["input"]
        start = self.clock()
        if function.prepare is None:
            point = self.point(function, data)
        else:
            name, point = function.prepare(name, data)
        point = as_arrays(point, program.scheme(name).type)
        timings = [_timing("convert", self.clock() - start)]
        if function.runs:
            min_runs = _count(data, "min_runs", 1)
            min_seconds = _count(data, "min_seconds", 0)
        else:
            min_runs, min_seconds = 1, 0
        try:
            if self.warm is not None and (module, name) not in self.warm:
                start = self.clock()
                program.call(name, point)
                timings.append(_timing("warmup", self.clock() - start))
                self.warm.add((module, name))
            runs, elapsed = 0, 0
            while runs < min_runs or elapsed < min_seconds * 1e9:
                start = self.clock()
                result = program.call(name, point)
                spent = self.clock() - start
                timings.append(_timing("evaluate", spent))
                runs, elapsed = runs + 1, elapsed + spent
        except LambdadError as error:
            raise MessageError(render(error, program.sources)) from None
        try:
            output = function.shaped(result)
        except (IndexError, ValueError, TypeError) as error:
            raise MessageError(f"the result of `{name}` does not have the form the eval "
                               f"expects ({error})") from None
        return {"success": True, "output": output, "timings": timings}

    @staticmethod
    def point(function: Function, data: Any) -> Any:
        """The point of the function for the eval's input (a tuple for several fields)."""
        if function.fields is None:
            return reals(data, "the input")
        if not isinstance(data, dict):
            raise MessageError(f"the input must be an object with the fields "
                               f"{', '.join(function.fields)}, not {_json_kind(data)}")
        missing = [field for field in function.fields if field not in data]
        if missing:
            raise MessageError(f"the input has no field {', '.join(missing)}")
        values = tuple(reals(data[field], f"the input's `{field}`")
                       for field in function.fields)
        return values[0] if len(values) == 1 else values


def as_arrays(point: Any, function_type: Type) -> Any:
    """``point`` with the lists its function takes as ``Vec`` or ``Mat`` (or lists of
    them) made NumPy arrays, once, so that a run does not convert them again: a part of
    the input's conversion.  A list of the wrong shape is left as it is (the call then
    says what is wrong with it)."""
    parameters = []
    while isinstance(function_type, FunT):
        parameters.append(function_type.arg)
        function_type = function_type.result
    if len(parameters) == 1:
        return _as_array(point, parameters[0])
    if not isinstance(point, tuple) or len(point) != len(parameters):
        return point
    return tuple(_as_array(value, kind) for value, kind in zip(point, parameters))


def _as_array(value: Any, kind: Type) -> Any:
    if isinstance(kind, ArrayT) and isinstance(value, list):
        array = np.asarray(value, dtype=float) if value else None
        return array if array is not None and array.ndim == kind.rank \
            and array.size else value
    if isinstance(kind, ListT) and isinstance(kind.item, (ArrayT, ListT)) \
            and isinstance(value, list):
        return [_as_array(item, kind.item) for item in value]
    return value


def _version() -> str:
    """lambdad's version as installed (``unknown`` when it runs from a source tree only)."""
    try:
        return importlib.metadata.version("lambdad")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _sources(path: Path) -> dict[str, str] | None:
    """The text of ``path`` for an error's excerpt (None if it cannot be read)."""
    try:
        return {str(path): path.read_text(encoding="utf-8")}
    except (OSError, UnicodeDecodeError):
        return None


def serve(session: Session, lines: Iterable[str], out: TextIO, err: TextIO) -> int:
    """Answer every message of ``lines`` on ``out``; returns the exit status: 0, or 1 if
    some line was not a message (each reported on ``err``, and left unanswered)."""
    status = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            response = session.answer(json.loads(line))
        except (json.JSONDecodeError, MessageError) as error:
            reason = f"not JSON ({error.msg})" if isinstance(error, json.JSONDecodeError) \
                else str(error)
            print(f"lambdad.gradbench: line {number} is not a message: {reason}", file=err)
            err.flush()
            status = 1
            continue
        try:
            text = json.dumps(response, allow_nan=False, default=_listed)
        except (ValueError, TypeError) as error:  # a result JSON cannot hold
            text = json.dumps({"id": response["id"], "success": False,
                               "error": f"the output cannot be written as JSON: {error}"})
        out.write(text + "\n")
        out.flush()
    for of, error in session.invalid:
        print(f"lambdad.gradbench: the eval judged the output of message {of} invalid: "
              f"{error}", file=err)
    return status


def _listed(value: Any) -> Any:
    """An array of a result (a NumPy array has ``tolist``) as JSON lists; TypeError for
    anything else, as json.dumps expects."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON data")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lambdad.gradbench",
        description="lambdad as a GradBench tool: reads the protocol's JSON messages on "
                    "stdin and answers on stdout. Modules: " + ", ".join(MODULES) + ".")
    parser.add_argument("--programs", metavar="DIR", type=Path, default=PROGRAMS,
                        help="read MODULE.lam from DIR instead of the installed programs")
    parser.add_argument("--multithreaded", action="store_true",
                        help="let NumPy's linear algebra use as many threads as it likes "
                             "(by default one, as GradBench's other tools run, unless "
                             "OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or MKL_NUM_THREADS "
                             "say otherwise)")
    parser.add_argument("--system-allocator", dest="reuse_memory", action="store_false",
                        help="leave the C library's allocator as it is (by default the tool "
                             "has glibc keep the memory of freed arrays for the next ones "
                             "instead of mapping each large array afresh)")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="no extra first run of each function (timed as `warmup`): its "
                             "first `evaluate` timing then includes compiling it and its "
                             "derivatives")
    return parser


# The variables by which a user sets the number of threads of the BLAS under NumPy: when
# one is set, the tool leaves the BLAS as it is.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_threads(multithreaded: bool) -> contextlib.AbstractContextManager[Any]:
    """The BLAS under NumPy limited to one thread while the tool runs (threadpoolctl, and
    put back as it was afterwards), unless ``multithreaded`` or a variable of
    THREAD_VARIABLES says how many threads to use.  On a machine shared with other work,
    the BLAS's threads wait for each other between a program's many small products and
    can make it several times slower."""
    if multithreaded or any(name in os.environ for name in THREAD_VARIABLES):
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


# glibc's mallopt parameters (malloc.h), and the values the tool sets: blocks up to 32 MB
# (its largest threshold on 64-bit systems) come from the heap, whose freed memory is
# returned to the system only above 512 MB at its top.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 512 << 20


def reuse_freed_memory() -> bool:
    """Has the C library's allocator keep the memory of freed arrays for the next ones
    (glibc's ``mallopt``), for the rest of the process; returns whether it could (not
    where the C library is not glibc).  By default glibc maps each block over 128 kB
    afresh and unmaps it when freed (the threshold rising only with the sizes freed so
    far), so a program whose arrays have more than 16 384 reals pays page faults on every
    array it makes: with the arrays taken from the heap and reused, lse's gradient at
    n = 80 000 ran in a third of the time here."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) \
        and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Run the tool on stdin and stdout; returns the exit status.  The allocator setting
    (:func:`reuse_freed_memory`) cannot be undone, so it is made only when the process is
    the tool's own (``own_process``: ``python -m lambdad.gradbench``), never by a call from
    other Python code, which finds its process as it left it."""
    args = build_parser().parse_args(argv)
    if args.reuse_memory and own_process:
        reuse_freed_memory()
    try:
        with blas_threads(args.multithreaded):
            return serve(Session(args.programs, args.warmup), sys.stdin, sys.stdout,
                         sys.stderr)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the eval went away: nothing left to answer
        return 0


if __name__ == "__main__":
    raise SystemExit(main(own_process=True))
