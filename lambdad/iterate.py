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
import functools
import gc
from collections.abc import Callable, Generator, Iterator
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
def collector_paused() -> Iterator[None]:
    """Inside the ``with`` block Python's cyclic garbage collector does not run; after it,
    the collector is on again if it was on before, whatever the block raised (a
    KeyboardInterrupt too).  Passes that build large acyclic structures (syntax trees,
    types, generated code, tapes) use it: the collector would rescan everything they made
    so far each time it runs, which makes a linear pass quadratic in practice; reference
    counting frees what they drop."""
    collecting = gc.isenabled()
    try:
        gc.disable()
        yield
    finally:
        if collecting:
            gc.enable()


def collector_paused_during(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` run with the cyclic collector paused as :func:`collector_paused` pauses
    it: for the public calls of a program (loading, running, differentiating), so that the
    collector does not scan, in the middle of one, the many long-lived objects that loading
    or compiling a large program made before it (half a second at 10^4 bindings).  It runs
    after the call, when the caller's code next allocates."""

    @functools.wraps(function)
    def paused(*args: Any, **kwargs: Any) -> T:
        if not gc.isenabled():
            return function(*args, **kwargs)
        try:
            gc.disable()
            return function(*args, **kwargs)
        finally:
            gc.enable()

    return paused
