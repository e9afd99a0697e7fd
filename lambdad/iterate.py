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
                child = top.throw(pending)
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
    """Whether blocks run for one owner (a program) froze objects out of the cyclic
    collector (see :func:`resume_collector`); :meth:`thaw` is the owner's finalizer."""

    __slots__ = ("froze",)

    def __init__(self) -> None:
        self.froze = False

    def thaw(self) -> None:
        """Gives every frozen object back to the collector (its oldest generation), if
        this record's owner froze some: the owner is dropped, and the cyclic garbage it
        leaves (a compiled unit's functions and their namespace) must be collectable."""
        if self.froze:
            self.froze = False
            gc.unfreeze()


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
    if frozen is not None and gc.get_count()[0] > FREEZE_ABOVE:
        gc.freeze()
        frozen.froze = True
    gc.enable()
