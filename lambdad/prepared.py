"""Prepared paths: a repeated gradient or Hessian-vector product of one closure at points of
one shape, with what does not change from call to call found once.

The door is two functions, called after a general run of :mod:`lambdad.differentiate`:
:func:`prepared_gradient` (reverse mode, from the image the run kept) and
:func:`prepared_product` (forward over reverse).  Each gives a callable that takes a point's
reals flat and gives what the general path gives, bit for bit, with the same costs recorded
and the same located errors; or None when the closure has no prepared path.  Nothing else
of lambdad reaches inside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .calling import Shape, shaped
from .differentiate import Differentiator
from .errors import DifferentiationError
from .interpreter import NOT_FINITE
from .tape import Backprop, Tape, strategy_named
from .values import SCALAR_TYPES


def prepared_gradient(differentiator: Differentiator, f: Any, shape: Shape,
                      written_as: Callable[[Any], Any] | None = None
                      ) -> "PreparedGradient | None":
    """:meth:`Differentiator.grad` of the closure ``f`` at points of ``shape`` (see
    :class:`PreparedGradient`) by the strategy set now, once a ``grad`` of ``f`` by that
    strategy kept the image of ``f``; None when it did not (see
    :meth:`Differentiator.kept_image`)."""
    image = differentiator.kept_image(f)
    if image is None:
        return None
    strategy = strategy_named(differentiator.strategy)
    prepared = PreparedGradient(differentiator, image, shape, strategy.name, strategy.run,
                                strategy.run_first_seeds)
    prepared.written_as = written_as
    return prepared


def prepared_product(differentiator: Differentiator, f: Any, x: Any, shape: Shape,
                     written_as: Callable[[Any], Any] | None = None
                     ) -> "PreparedProduct | None":
    """:meth:`Differentiator.hvp` of the closure ``f`` at points of ``shape`` (see
    :class:`PreparedProduct`) like ``x``, by the strategy set now; None when it has no
    prepared form (see :meth:`Differentiator.value_and_gradient_image`)."""
    image = differentiator.value_and_gradient_image(f, x)
    if image is None:
        return None
    prepared = PreparedProduct(differentiator, image, shape)
    prepared.written_as = written_as
    return prepared


class PreparedGradient:
    """Reverse mode of one closure at points of one shape, with what does not change from
    call to call found once (:func:`prepared_gradient`): the closure's image
    under ←D, compiled, and the backward phase of the strategy.  Each call seeds the point,
    runs the image, runs the backward phase and reads the gradient off, by code written
    for the shape, under the restartable guard of the interpreter.

    ``shape`` is 0 for a real, n for an n-tuple of reals (right-nested pairs), -1 for a
    list of reals, or the shape of reals nested in tuples and lists
    (:func:`lambdad.calling.point_shape`); a call takes the point's reals flat (a real, a
    tuple or a list of them) and gives the gradient in the point's runtime shape.  It
    gives what :meth:`Differentiator.grad` gives, bit for bit (the same seeds in the same
    order, the same run, the same backward phase), records the same costs as
    ``last_stats`` and raises the same located errors.  ``strategy`` is the name of the
    strategy it runs.  ``written_as``, when not None, makes a gradient the Python data it is
    written as (a tuple of more than two components; see ``values.written``): the caller
    applies it, so the call itself stays the general path's twin.

    Its runs share one tape, started afresh by each (:meth:`Tape.restart`) with the seeds
    of the last run's number of inputs: nothing of a run outlives it (the gradient is made
    of floats, the image embeds no backpropagator of a tape)."""

    __slots__ = ("differentiator", "image", "shape", "strategy", "run_backward",
                 "run_first_seeds", "written_as", "_tape", "_seeds")

    def __init__(self, differentiator: Differentiator, image: Any, shape: Shape, strategy: str,
                 run_backward: Callable[..., dict[int, Any]],
                 run_first_seeds: Callable[[Tape, Any, int], list[Any]] | None = None):
        self.differentiator = differentiator
        self.image = image
        self.shape = shape
        self.strategy = strategy
        self.run_backward = run_backward
        # the strategy's backward phase giving the seeds' adjoints as a list, if it has one
        self.run_first_seeds = run_first_seeds
        self.written_as: Callable[[Any], Any] | None = None
        self._tape: Tape | None = None
        self._seeds: dict[int, Backprop] = {}  # of the tape, by input index

    def __call__(self, x: Any, tested: Sequence[Any] | None = None) -> tuple[float, Any]:
        """``(f x, ∇f(x))`` for the reals ``x`` of a point of the shape; raises as
        :meth:`Differentiator.grad`.  Given ``tested`` (the point's arrays, not tested
        yet), NOT_FINITE, nothing run, when one of them has an element that is not finite
        (see :meth:`Interpreter.apply_restartable`)."""
        differentiator = self.differentiator
        count = len(x) if self.shape else 1
        tape = self._tape
        if tape is None or len(self._seeds) != count:
            tape = self._tape = Tape()
            self._seeds = dict(enumerate(tape.seeds(0, count)))
        out = differentiator.interpreter.restartable_on(tape, self._run, x, tested)
        if out is NOT_FINITE:
            return out
        differentiator.record_reverse_run(tape)
        return out

    def _run(self, x: Any) -> tuple[float, Any]:
        """One run from the start, on the tape started afresh (so it may be run again)."""
        shape = self.shape
        seeds = self._seeds
        tape = self._tape
        tape.restart(seeds)
        count = len(seeds)
        if type(shape) is not int:
            seeded: Any = shaped(shape, zip(x, seeds.values()))
        elif shape == 0:
            seeded = (x, seeds[0])
        elif shape > 0:
            seeded = (x[-1], seeds[shape - 1])
            for i in range(shape - 2, -1, -1):
                seeded = ((x[i], seeds[i]), seeded)
        else:
            seeded = list(zip(x, seeds.values()))
        # Under the guard of __call__, as a program run: errors located, deep calls
        # allowed.  (First-order code, which this is, does not look at run depths.)
        out = self.image(seeded)
        if not (type(out) is tuple and type(out[0]) in SCALAR_TYPES
                and isinstance(out[1], Backprop)):  # is_reverse_real, inlined
            raise DifferentiationError("grad needs a function whose result is a real")
        value, back = out
        if self.run_first_seeds is not None:  # the seeds are stamps 0 .. count - 1
            flat = self.run_first_seeds(tape, back, count)
        else:
            adjoints = self.run_backward(tape, back(1.0), None, None)
            flat = [adjoints.get(i, 0.0) for i in range(count)]
        if type(shape) is not int:
            return value, shaped(shape, iter(flat))
        if shape < 0:
            return value, flat
        if shape == 0:
            return value, flat[0]
        gradient: Any = flat[shape - 1]
        for i in range(shape - 2, -1, -1):
            gradient = (flat[i], gradient)
        return value, gradient


class PreparedProduct:
    """Forward mode over reverse mode of one closure at points of one shape, with what does
    not change from call to call found once (:func:`prepared_product`): the
    image under →D of ``\\y -> (f y, grad f y)``, compiled from its written-out program
    (AD.md section 9).  Each call pairs the point's reals with the direction's, then runs
    the image on a fresh tape and splits the dual result under the restartable guard of
    the interpreter (:meth:`Differentiator.run_forward_image`).  ``shape`` is as for :class:`PreparedGradient`; a call takes the point
    and the direction flat and gives what :meth:`Differentiator.hvp` gives, bit for bit
    (the same run of the same program).  ``written_as`` is as for
    :class:`PreparedGradient`."""

    __slots__ = ("differentiator", "image", "shape", "written_as")

    def __init__(self, differentiator: Differentiator, image: Any, shape: Shape):
        self.differentiator = differentiator
        self.image = image
        self.shape = shape
        self.written_as: Callable[[Any], Any] | None = None

    def __call__(self, x: Any, v: Any) -> tuple[Any, Any, Any]:
        """``(f x, ∇f(x), H(x)·v)`` for the reals ``x`` and ``v`` of a point and a
        direction of the shape; raises as :meth:`Differentiator.hvp`."""
        # The dual point is made before the guard (pairs in the point's shape, which is
        # as deep as its type): the guarded run, one from the start on a fresh tape, is
        # the image's alone, so it may be run again.
        shape = self.shape
        if type(shape) is not int:
            seeded: Any = shaped(shape, zip(x, v))
        elif shape == 0:
            seeded = (x, v)
        elif shape > 0:
            seeded = (x[-1], v[-1])
            for i in range(shape - 2, -1, -1):
                seeded = ((x[i], v[i]), seeded)
        else:
            seeded = list(zip(x, v))
        differentiator = self.differentiator
        (value, gradient), (_, product) = differentiator.interpreter.restartable(
            differentiator.run_forward_image, self.image, seeded)
        return value, gradient, product
