"""What `lambdad fuzz` runs: random programs checked against every property, in shards
with a time budget."""

from __future__ import annotations

import hashlib
import math
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .. import gradcheck
from ..limits import Stopped, stopped
from ..primitives import Primitive
from .generate import GeneratedProgram
from .properties import (PROPERTIES, PointRejected, PropertyViolation, cases,
                         check_properties, has_arrays)


# --------------------------------------------------------------------------- fuzzing


@attrs.frozen
class FuzzFailure:
    """The minimal failing case hypothesis found: the property, the program, the point."""

    prop: str
    message: str
    source: str
    name: str
    point: Any


@attrs.frozen
class FuzzReport:
    """What :func:`fuzz` did: programs that ran every property (``arrays`` of them array
    programs), points skipped (the source program failed there), and the failure if any."""

    ran: int
    skipped: int
    failure: FuzzFailure | None
    arrays: int = 0

    @property
    def ok(self) -> bool:
        return self.failure is None

    def render(self) -> str:
        """What ``lambdad fuzz`` prints: a verdict, and the minimal failing program if any."""
        skipped = (f" ({self.skipped} point(s) skipped where the source program fails)"
                   if self.skipped else "")
        if self.failure is None:
            among = (f"; {self.arrays} of them array programs (which skip `nested "
                     "programs`)" if self.arrays else "")
            return (f"ok: {self.ran} random program(s), every property holds{skipped}: "
                    + ", ".join(PROPERTIES) + among)
        f = self.failure
        return "\n".join([
            f"FAILED: property `{f.prop}` after {self.ran} passing program(s){skipped}",
            f.message,
            f"minimal failing program (`{f.name}` at {f.point!r}):",
            "",
            f.source.rstrip(),
        ])


class _OutOfTime(BaseException):
    """Stops hypothesis's shrinking (a BaseException, so it is not taken for a failure)."""


class _Stopping(BaseException):
    """Carries the command's time or memory limit (:class:`~lambdad.limits.Stopped`) out of
    hypothesis (a BaseException, so it is not taken for a failure of the program)."""

    def __init__(self, error: Stopped):
        super().__init__(error)
        self.error = error


# Programs per shard of a fuzz run: shards are independent hypothesis runs, so they can run
# in parallel, and a run's report depends on the seed and count only, not on the jobs.
FUZZ_SHARD = 10


def fuzz(load: Callable[[str], Any], count: int = 100, seed: int = 0, max_depth: int = 4,
         progress: Callable[[int, int], None] | None = None,
         shrink_seconds: float = 60.0, jobs: int = 1,
         shard_size: int = FUZZ_SHARD, declared: Sequence[Primitive] = (),
         arrays: bool = True) -> FuzzReport:
    """Runs every property on ``count`` random programs and returns a :class:`FuzzReport`.

    The programs are drawn in shards of ``shard_size``, each a hypothesis run seeded by
    ``seed`` and its index, run by up to ``jobs`` forked processes; the report is that of
    the shards in order up to the first that fails, so it is the same for every ``jobs``.
    A failure is shrunk to a smaller program, for at most ``shrink_seconds``.  An internal
    error of a stage (an exception that is not a LambdadError) is a failure too.
    ``progress(done, count)`` is called as shards complete.  ``declared`` primitives are
    used in the programs like the table's (see :func:`programs`).  With ``arrays`` (the
    default), one program in four is an array program
    (:func:`~lambdad.testing.arrays.array_programs`)."""
    shards = [(index, min(shard_size, count - start))
              for index, start in enumerate(range(0, count, shard_size))]

    def run_shard(shard: tuple[int, int]) -> FuzzReport:
        index, size = shard
        shard_seed = int(hashlib.sha256(f"{seed}/{index}".encode()).hexdigest()[:15], 16)
        return _fuzz_shard(load, size, shard_seed, max_depth, shrink_seconds,
                           declared=declared, arrays=arrays)

    ran = skipped = done = arrays_ran = 0
    # A serial run stops at the first failing shard (results come lazily); a parallel one
    # stops its workers when this loop returns.
    for (index, size), report in zip(shards, gradcheck.in_parallel(run_shard, shards, jobs)):
        ran += report.ran
        skipped += report.skipped
        arrays_ran += report.arrays
        if report.failure is not None:
            return FuzzReport(ran, skipped, report.failure, arrays_ran)
        done += size
        if progress is not None:
            progress(done, count)
    return FuzzReport(ran, skipped, None, arrays_ran)


def _fuzz_shard(load: Callable[[str], Any], count: int, seed: int, max_depth: int,
                shrink_seconds: float,
                progress: Callable[[int, int], None] | None = None,
                declared: Sequence[Primitive] = (), arrays: bool = True) -> FuzzReport:
    """Every property on ``count`` random programs of one hypothesis run seeded with
    ``seed``, as :func:`fuzz` describes."""
    from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
    from hypothesis import seed as seeded

    state: dict[str, Any] = {"ran": 0, "skipped": 0, "failure": None, "deadline": math.inf,
                             "arrays": 0}

    def examine(generated: GeneratedProgram, point: Any) -> PropertyViolation | None:
        """The violation at this case, recording it; None if every property holds."""
        if stopped() is not None:  # the command's limit, swallowed by the last case
            raise _Stopping(stopped())
        failing: FuzzFailure | None = state["failure"]
        if failing is not None and time.monotonic() > state["deadline"]:
            raise _OutOfTime()  # the smallest failure found so far is the answer
        # While shrinking a failure, only its property matters: checking the others would
        # only slow the search for the smallest program that still fails.
        wanted = (failing.prop,) if failing is not None and failing.prop in PROPERTIES \
            else PROPERTIES
        try:
            check_properties(generated, point, load, wanted)
            return None
        except Stopped as error:
            raise _Stopping(error) from None
        except PointRejected:
            if stopped() is not None:  # the limit, taken by a property for the program's
                raise _Stopping(stopped()) from None
            if failing is None:
                state["skipped"] += 1
            assume(False)
            return None
        except PropertyViolation as exc:
            violation = exc
        except Exception as exc:  # a crash of a stage is a bug to report, not to hide
            where = traceback.extract_tb(exc.__traceback__)[-1]
            violation = PropertyViolation(
                "no crash", f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:"
                f"{where.lineno})")
        if stopped() is not None:  # the limit, taken by a property for a violation
            raise _Stopping(stopped()) from None
        if failing is None:
            state["deadline"] = time.monotonic() + shrink_seconds
        state["failure"] = FuzzFailure(violation.prop, violation.message, generated.source(),
                                       generated.name, point)
        return violation

    @settings(max_examples=count, database=None, deadline=None, verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), print_blob=False,
              phases=(Phase.generate, Phase.shrink))
    @seeded(seed)
    @given(cases(max_depth=max_depth, declared=declared, arrays=arrays))
    def run_case(case):
        generated, point = case
        violation = examine(generated, point)
        if violation is not None:
            raise violation
        if state["failure"] is None:
            state["ran"] += 1
            state["arrays"] += has_arrays(generated)
            if progress is not None:
                progress(state["ran"], count)

    try:
        run_case()
    except _OutOfTime:
        pass
    except _Stopping as stopping:
        # (not located: the random program it stopped in is not shown)
        raise Stopped(stopping.error.message) from None
    except Exception:
        if state["failure"] is None and stopped() is None:
            raise
    if stopped() is not None:  # the limit, swallowed by hypothesis or a property
        raise Stopped(stopped().message) from None
    return FuzzReport(state["ran"], state["skipped"], state["failure"], state["arrays"])
