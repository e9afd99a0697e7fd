"""The limits a timer watches while a command runs: time and memory.

A repeating timer (``SIGALRM``, every :data:`INTERVAL` seconds) checks the clock against
the time limit and the process's resident memory against the memory limit; when one is
exceeded its handler raises :class:`~lambdad.errors.ResourceError`, located at the
operation of generated code running at that moment (when one is).  The handler runs
between two Python bytecodes, so work done in one long step of C code (building a list of
10^8 elements) is built in pieces by the primitives (see ``lambdad.primitives``) for the
watch to stop it in time.  :func:`watching` puts back the signal handler and the timer it
found when it returns, however it returns (an error, Ctrl-C).

The step limit (``--max-steps``) is counted by the interpreter itself, in every route;
the time limit is also polled there when a program sets one through the API.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from .errors import ResourceError, Span

__all__ = ["INTERVAL", "Stopped", "default_max_memory", "format_bytes", "parse_bytes",
           "resident_bytes", "stopped", "watch_forked", "watching"]

# How often the watch looks at the clock and the memory, in seconds.
INTERVAL = 0.05
# How long after stopping a run the watch raises its error again, if the error was dropped
# (raised inside a finaliser) and is no longer on its way out.
AGAIN = 0.5

# The default memory limit: this fraction of the machine's memory (or of the memory the
# process's control group may use, when less).
DEFAULT_MEMORY_FRACTION = 0.5


class Stopped(ResourceError):
    """The ResourceError the watch raises: the command's time or memory is up (code that
    runs many programs, ``lambdad fuzz``, stops at it rather than count it a program's)."""


def _physical_memory() -> int | None:
    """The bytes of memory this process may use: the machine's, or its control group's
    limit when lower; None when unknown."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as file:
                text = file.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
        break
    return total


def default_max_memory() -> int | None:
    """The memory limit of a command without ``--max-memory``: half of the memory this
    process may use (:func:`_physical_memory`); None when that is unknown."""
    total = _physical_memory()
    return None if total is None else int(total * DEFAULT_MEMORY_FRACTION)


def resident_bytes() -> int | None:
    """The resident memory of this process in bytes, read from ``/proc/self/statm`` (one
    small read); None where there is no such file."""
    try:
        with open("/proc/self/statm", "rb") as file:
            fields = file.read().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None


_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int | None:
    """A size in bytes written ``500M``, ``2G``, ``1.5GB``, ``4096`` (K, M, G, T are powers
    of 1024); None if ``text`` is not one."""
    match = _SIZE.fullmatch(text)
    if match is None:
        return None
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit.lower()])


def format_bytes(count: int) -> str:
    """``count`` bytes for a message: ``512 MB``, ``1.5 GB``."""
    for unit, size in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} bytes"


def _running_site(frame: Any) -> Span | None:
    """The span of the operation of generated code that ``frame`` (or a frame calling it)
    runs: the innermost frame of a generated module whose line has a recorded site."""
    while frame is not None:
        table = frame.f_globals.get("__lambdad_lines__")
        if table is not None:
            site = table.get(frame.f_lineno)
            if site is not None:
                return site.span
        frame = frame.f_back
    return None


class _Watch:
    """The SIGALRM handler of :func:`watching`: checks the limits, raises :class:`Stopped`."""

    def __init__(self, deadline: float | None, timeout: float | None,
                 max_memory: int | None, timeout_option: str, memory_option: str):
        self.deadline, self.timeout, self.max_memory = deadline, timeout, max_memory
        self.options = (timeout_option, memory_option)
        self.active = True  # whether a check may still stop the run
        self.raised: Stopped | None = None  # the error a check raised, and when
        self.raised_at = 0.0

    def __call__(self, signum: int, frame: Any) -> None:
        if not self.active:
            return
        now = time.monotonic()
        if self.raised is not None:
            # The run is stopping: while the error is on its way out, its clean-up (the
            # `finally` blocks putting back limits, freeing values) runs undisturbed; if it
            # was dropped (raised inside a finaliser), it is raised again.
            if now - self.raised_at >= AGAIN and not _handling(self.raised) \
                    and not _in_collector_callback(frame):
                self.raised_at = now
                raise self.raised
            return
        error = None
        if self.deadline is not None and now >= self.deadline:
            error = Stopped(f"stopped after the time limit of {self.timeout:g} s "
                            f"({self.options[0]})", _running_site(frame))
        elif self.max_memory is not None:
            used = resident_bytes()
            if used is not None and used > self.max_memory:
                error = Stopped(
                    f"stopped at the memory limit of {format_bytes(self.max_memory)} "
                    f"({self.options[1]}): the run uses {format_bytes(used)}",
                    _running_site(frame))
        if error is not None:
            if _in_collector_callback(frame):
                return  # where an exception is dropped (and reported): the next check
            self.raised, self.raised_at = error, now
            raise error


def _handling(error: BaseException) -> bool:
    """Whether ``error``, or an exception raised while handling it, is the exception being
    handled now (in an ``except`` or ``finally`` block): on its way out."""
    current = sys.exc_info()[1]
    seen = 0
    while current is not None and seen < 100:
        if current is error:
            return True
        current, seen = current.__context__, seen + 1
    return False


def _in_collector_callback(frame: Any) -> bool:
    """Whether ``frame`` runs inside a callback of the garbage collector (``gc.callbacks``,
    as hypothesis installs), where an exception raised is dropped with a warning."""
    codes = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def watching(timeout: float | None = None, max_memory: int | None = None,
             timeout_option: str = "--timeout",
             memory_option: str = "--max-memory") -> Iterator[None]:
    """Inside the ``with`` block, stops the run with a ResourceError (:class:`Stopped`) once
    ``timeout`` seconds have passed or the process's resident memory exceeds
    ``max_memory`` bytes (None: no such limit); the messages name the options that set
    them.  Only the main thread can be watched (elsewhere the block runs unwatched).  The
    signal handler and the timer in place before are put back when the block ends."""
    if (timeout is None and max_memory is None) or not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread():
        yield
        return
    started = time.monotonic()
    watch = _Watch(None if timeout is None else started + timeout, timeout, max_memory,
                   timeout_option, memory_option)
    previous = signal.signal(signal.SIGALRM, watch)
    # The first check comes at the deadline when only time is watched; then the timer
    # repeats until it is disarmed: an exception raised while Python runs a garbage-
    # collector callback or a finaliser is dropped, and the next check stops the run.
    first = INTERVAL if max_memory is not None else timeout
    previous_timer = signal.setitimer(signal.ITIMER_REAL, first, INTERVAL)
    consequence: Stopped | None = None
    try:
        yield
    except Exception as exc:
        watch.active = False  # (as below)
        if watch.raised is None or exc is watch.raised:
            raise
        # Raised after the watch stopped the run, by code its error interrupted (a
        # library's state left half changed): the limit is what to report.
        consequence = watch.raised
    finally:
        # First, with no call before it (a pending check runs only at a call): from here
        # on a check raises nothing, so what follows always runs.
        watch.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
        delay, repeat = previous_timer
        if delay > 0:  # a timer armed before: it goes on, less the time spent here
            elapsed = time.monotonic() - started
            signal.setitimer(signal.ITIMER_REAL, max(delay - elapsed, 1e-6), repeat)
    if consequence is not None:
        raise consequence


def stopped() -> Stopped | None:
    """The error the watch in force raised, if it has stopped the run: code that catches
    errors of the programs it runs (``lambdad fuzz``) asks, so as not to take the limit for
    a program's failure.  None outside a watch, or before it stops the run."""
    handler = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    return handler.raised if isinstance(handler, _Watch) else None


def watch_forked() -> None:
    """In a process forked inside :func:`watching` (a worker of ``check --jobs``), watches
    the same limits (the same deadline, the memory limit for this process's own resident
    size): a forked process inherits the signal handler but not the timer.  Does nothing
    in a process forked outside a watch."""
    if hasattr(signal, "setitimer") and isinstance(signal.getsignal(signal.SIGALRM), _Watch):
        signal.setitimer(signal.ITIMER_REAL, INTERVAL, INTERVAL)
