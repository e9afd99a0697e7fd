"""Recursion without the Python stack.

Every pass over syntax (parser desugaring, type inference, printing, the transformations,
code generation) must handle programs nested tens of thousands deep.  Such a pass is written
as a generator function that recurses with ``result = yield child_generator``;
:func:`run` drives it with an explicit stack, so depth costs heap, not Python frames.

    def size(term):
        total = 1
        for child in children(term):
            total += yield size(child)
        return total

    run(size(term))

A step may also yield (or ``run`` be given) a value that is not a generator: a leaf computed
without recursing, which is its own result.  An arm for leaves can then be a plain function,
and the nodes without children (most of a program) cost no generator.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Generator, Iterator
from types import GeneratorType
from typing import Any, TypeVar

T = TypeVar("T")

Step = Generator[Any, Any, T]


def run(root: Step[T] | T) -> T:
    """The return value of the generator ``root``, driving every nested ``yield``-ed generator.

    An exception raised by a child is thrown into its parent at the ``yield``, exactly as a
    recursive call would propagate it.  A yielded value (or a ``root``) that is not a
    generator is its own result.
    """
    if root.__class__ is not GeneratorType:
        return root
    stack: list[Generator] = [root]
    send_value: Any = None
    error: BaseException | None = None
    while True:
        top = stack[-1]
        try:
            if error is not None:
                pending, error = error, None
                try:
                    child = top.throw(pending)
                finally:
                    # (the exception's traceback holds this frame: kept here, it would make
                    # a cycle holding every frame it passed through, and their locals)
                    pending = None
            else:
                child = top.send(send_value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            send_value = stop.value
            continue
        except BaseException as exc:  # propagate to the parent generator
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        if child.__class__ is not GeneratorType:
            send_value = child
            continue
        stack.append(child)
        send_value = None


@contextlib.contextmanager
def collector_paused(frozen: "FreezeRecord | None" = None) -> Iterator[None]:
    """Inside the ``with`` block Python's cyclic garbage collector does not run (it is
    restored as it was after, see :func:`resume_collector`).  Passes that build large
    acyclic structures (syntax trees, types, generated code, tapes) use it: the collector
    would rescan everything they made so far each time it runs, which makes a linear pass
    quadratic in practice; reference counting frees what they drop."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        resume_collector(collecting, frozen)


# New objects left alive by a block run with the collector paused above which they are
# frozen (see resume_collector): a program of some thousand lines, or its compiled code.
FREEZE_ABOVE = 100_000


class FreezeRecord:
    """Whether blocks run for one owner (a program and the programs extended from it, which
    share its runtime) froze objects out of the cyclic collector (see
    :func:`resume_collector`).  Each owner registers :meth:`thaw` as its finalizer through
    :meth:`own`; the record gives its objects back when the last of them is dropped."""

    __slots__ = ("froze", "owners", "__weakref__")

    def __init__(self) -> None:
        self.froze = False
        self.owners = 0

    def own(self, owner: object) -> None:
        """Makes ``owner`` one of the record's owners: :meth:`thaw` runs when it is dropped
        (not at exit: the interpreter's last collection would scan everything for nothing)."""
        self.owners += 1
        weakref.finalize(owner, self.thaw).atexit = False

    def thaw(self) -> None:
        """An owner is dropped.  When it was the last, and the record froze objects, they
        are given back to the collector, so the cyclic garbage they leave (a compiled unit's
        functions and their namespace) is collectable.

        ``gc.unfreeze`` gives back every frozen object, not only this record's: those of
        another program that froze, and those frozen outside lambdad (a server's
        ``gc.freeze`` before forking, a benchmark's), which every full collection would
        scan from then on.  So, while such objects exist, the next block that resumes the
        collector (:func:`resume_collector`) collects the garbage and freezes what is
        still alive again.  (Not here: the owner being dropped still holds what it made.)"""
        self.owners -= 1
        if self.owners > 0 or not self.froze:
            return
        self.froze = False
        _FROZEN.records.discard(self)
        gc.unfreeze()
        if _FROZEN.records or _FROZEN.outside:
            _FROZEN.refreeze = True


class _Frozen:
    """What is frozen out of the cyclic collector: by which live records (weakly held: a
    record is dropped with its owners), whether by anyone else (objects were frozen when
    none of them had frozen any), and whether they are to be frozen again (see
    :meth:`FreezeRecord.thaw`)."""

    def __init__(self) -> None:
        self.records: weakref.WeakSet[FreezeRecord] = weakref.WeakSet()
        self.outside = False
        self.refreeze = False


_FROZEN = _Frozen()


def resume_collector(collecting: bool, frozen: FreezeRecord | None = None) -> None:
    """Switches Python's cyclic collector back on if ``collecting`` (it was on before a
    block that paused it).  When the block, run for the owner of ``frozen``, left more than
    :data:`FREEZE_ABOVE` new objects alive (a large program loaded or compiled:
    long-lived), they are frozen first (``gc.freeze``): else the collector's next
    collection, however young, would scan every one of them (half a second at 10^4
    bindings), and every full collection after it again (over a second).  They stay
    frozen until the owner is dropped (:meth:`FreezeRecord.thaw`); reference counting
    frees them meanwhile when they are dropped, only cyclic garbage waits."""
    if not collecting:
        return
    if _FROZEN.refreeze:  # a frozen program was dropped while other objects were frozen
        _FROZEN.refreeze = False
        gc.collect()
        gc.freeze()
    if frozen is not None and gc.get_count()[0] > FREEZE_ABOVE:
        if not _FROZEN.records:
            _FROZEN.outside = gc.get_freeze_count() > 0
        gc.freeze()
        frozen.froze = True
        _FROZEN.records.add(frozen)
    gc.enable()
