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
def collector_paused() -> Iterator[None]:
    """Inside the ``with`` block Python's cyclic garbage collector does not run (it is
    restored as it was after).  Passes that build large acyclic structures (syntax trees,
    types, generated code, tapes) use it: the collector would rescan everything they made
    so far each time it runs, which makes a linear pass quadratic in practice; reference
    counting frees what they drop."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
