"""Backpropagators at run time and the backward phase: records, tapes, strategies.

A backpropagator ``\\a -o e`` of type ``R -o d`` evaluates to a :class:`Backprop`: a small
record of its creation stamp, its lifted body and the values the body captured.  Cotangent
data (type ``d``) is ``None`` (zero), a :class:`Call` or a :class:`Sum`.

Applying a backpropagator never runs it.  Inside a compiled linear body of the usual shape
(a sum of applications, what ←D builds) an application ``g e`` is a call ``stage(g, e)``
of the function the backward phase passes to the body; anywhere else it returns the call
:class:`Call` as data, which the backward phase walks and stages alike.

The backward phase runs the bodies by one of the :data:`STRATEGIES` (the one registry the
command line, the REPL and the API read): ``factored`` runs each backpropagator once, in
decreasing stamp order, with the sum of what was sent to it (BMP's linear factoring:
staging adds into an array indexed by stamp); ``naive`` runs a body once per call.
"""

from __future__ import annotations

import heapq
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from .errors import DifferentiationError, Span, UsageError
from .primitives import FOLD, curried_pair


# --------------------------------------------------------------------------- records


class Backprop:
    """A backpropagator ``\\a -o e`` of type ``R -o d``, with its creation stamp.

    Its body is the lifted function ``function(captured, a, stage)``: ``captured`` is the
    tuple of values the body closes over, ``a`` the cotangent it is run with, and
    ``stage(g, b)`` hands the application ``g b`` to the backward phase.  A body returns
    the cotangent data it did not stage (``None`` when it staged everything).  Seeds
    (``seed i``: :meth:`Tape.seed`) and the zero backpropagator of a tape
    (:meth:`Tape.constant`) have no function.  ``tape`` is the :class:`Tape` that stamped
    it.

    The class has no ``__init__``: generated code makes these with ``Backprop()`` and five
    slot stores, which costs less than a call of ``__init__`` or of ``object.__new__``
    (this runs once per primitive of a reverse-mode program); :meth:`create` is for
    everything else.  Seeds are of this class too, not of a subclass: the backward phase
    reads the same attributes of both, and CPython's specialised attribute reads serve
    one class only (the MLP's gradient, which stages into seeds and other
    backpropagators in turn, ran 2.6% more instructions with a subclass of seeds).
    """

    __slots__ = ("stamp", "function", "captured", "span", "tape")

    @classmethod
    def create(cls, stamp: int, function: Callable[..., Any] | None, captured: Any,
               span: Span | None, tape: "Tape | None" = None) -> "Backprop":
        """A backpropagator of this class with these fields."""
        made = cls()
        made.stamp, made.function, made.captured, made.span, made.tape = \
            stamp, function, captured, span, tape
        return made

    @property
    def seed_index(self) -> int | None:
        """Which input real this backpropagator is the seed of (None if it is no seed).  A
        seed, which has no body, keeps its index where a body's captured values would be:
        the backpropagators made for every operation of a run need no slot for it."""
        captured = self.captured
        return captured if type(captured) is int else None

    def __call__(self, a: float) -> "Call":
        # Applied as a value (outside a staging body) it returns the call as data;
        # :func:`backward` decides when bodies run.
        return Call(self, a)

    def run(self, a: float, stage: Callable[["Backprop", float], None] | None = None) -> Any:
        """The body with ``a`` bound: the cotangent data it returns (calls it stages are
        returned as data too when ``stage`` is not given).  ``None`` for a seed or zero."""
        if self.function is None:
            return None
        if stage is not None:
            return self.function(self.captured, a, stage)
        staged: list[Any] = []
        rest = self.function(self.captured, a, lambda g, b: staged.append(g(b)))
        for call in staged:
            rest = add_cotangents(rest, call)
        return rest

    def __repr__(self) -> str:
        return f"<backpropagator #{self.stamp}>"


class ConstantBackprop(Backprop):
    """``\\a -o zero`` evaluated by an instrumented run: a backpropagator of its own, stamped
    and reported (``BackpropCreated``, and ``BackpropRun`` with what reached it) like any
    other, so traces show the adjoints of constant sub-expressions; it has no body, and like
    :data:`ZERO` it is not counted as created."""

    __slots__ = ()


class ConstantZero(Backprop):
    """``\\a -o zero`` belonging to no tape: what every constant of every run shares (AD.md
    section 3), so that a value made constant for one run (a captured value reverse mode
    embeds, AD.md section 6) serves the next.  Every backward phase drops what is sent to
    it (it has no body, and no stamp of any tape: ``stamp`` is -1), and it is never counted
    as created.  There is one, :data:`ZERO`: generated code skips a staging to it by one
    identity test."""

    __slots__ = ()

    def __init__(self) -> None:
        self.stamp, self.function, self.captured = -1, None, ()
        self.span, self.tape = None, None

    def __repr__(self) -> str:
        return "<backpropagator zero>"


ZERO = ConstantZero()
"""The zero backpropagator ``\\a -o zero`` of uninstrumented runs (see :class:`ConstantZero`)."""


# Cotangent data: records with slots, compared by identity (as data they are never equal
# but for being the same; a backpropagator's record is hashed by identity too).
_cotangent_data = attrs.define(eq=False, weakref_slot=False)


@_cotangent_data
class Call:
    """The cotangent ``g a``: backpropagator ``g`` applied to the real ``a`` (as data)."""

    backprop: Backprop
    cotangent: float


@_cotangent_data
class Sum:
    """The cotangent ``e1 <+> e2``; neither side is ``None`` (see :func:`add_cotangents`)."""

    left: Any
    right: Any


def add_cotangents(left: Any, right: Any) -> Any:
    """``left <+> right`` as cotangent data; ``zero`` (``None``) sides are dropped."""
    if left is None:
        return right
    if right is None:
        return left
    return Sum(left, right)


def _run_data_body(captured: tuple, a: float, stage: Any) -> Any:
    """The body of a backpropagator made by :meth:`Tape.backprop` from a Python function."""
    return captured[0](a)


class Tape:
    """The bookkeeping of one differentiation run.

    ``stamps`` is the creation-stamp counter (stamps are dense: ``0 .. stamps - 1``, and only
    increase); ``created`` counts backpropagators with a body (not seeds, not zeros),
    ``bodies_run`` the bodies run by :func:`backward`, ``reached`` how many distinct ones
    each backward phase ran (summed over phases: ``bodies_run`` when factored).  Seeds are made once per index and
    shared.  Constants share :data:`ZERO`, on no tape (AD.md section 3: every constant may
    share one), except that instrumented runs give each constant its own, stamped here
    (:meth:`own_constant`).  ``bodiless`` counts the stamps of seeds and such constants,
    ``ring_phases`` the backward phases in a ring other than the reals (the read-offs of a
    program differentiated again).
    """

    __slots__ = ("stamps", "bodies_run", "reached", "bodiless", "ring_phases", "_seeds",
                 "_restarted_from")

    def __init__(self) -> None:
        self.stamps = 0
        self.bodies_run = 0
        self.reached = 0
        self.bodiless = 0
        self.ring_phases = 0  # backward phases in another ring than the reals' so far
        self._seeds: dict[int, Backprop] = {}
        self._restarted_from: Mapping[int, Backprop] | None = None  # see restart

    @property
    def created(self) -> int:
        """How many backpropagators with a body were stamped (seeds and zeros are not)."""
        # Derived rather than counted, so generated code only bumps ``stamps``.
        return self.stamps - self.bodiless

    def release(self) -> dict[int, Backprop]:
        """Forgets the seeds of a finished run, and returns them: they refer back to the
        tape, and without this cycle reference counting frees them at once.  Counts are
        kept.  A run whose backward phase comes later (a pull-back) keeps what this returns
        and gives it back to the tape for that phase (:meth:`resume`)."""
        seeds, self._seeds = self._seeds, {}
        return seeds

    def resume(self, seeds: dict[int, Backprop]) -> None:
        """Gives back the seeds :meth:`release` returned, for a backward phase of that run
        (released again after it)."""
        self._seeds = seeds

    def next_stamp(self) -> int:
        """A fresh creation stamp, larger than every earlier one."""
        stamp = self.stamps
        self.stamps = stamp + 1
        return stamp

    def backprop(self, body: Callable[[float], Any], span: Span | None = None) -> Backprop:
        """A new backpropagator with the next stamp (counted in ``created``) whose body is
        ``body(a)``, returning cotangent data."""
        stamp = self.stamps
        self.stamps = stamp + 1
        return Backprop.create(stamp, _run_data_body, (body,), span, self)

    def seed(self, index: int, span: Span | None = None) -> Backprop:
        """``seed index``: the backpropagator of the index-th input real, the same object on
        every request."""
        found = self._seeds.get(index)
        if found is None:
            # made as Tape.seeds makes them: one per input real per run
            found = Backprop()
            found.stamp, found.function, found.captured = self.stamps, None, index
            found.span, found.tape = span, self
            self.stamps += 1
            self._seeds[index] = found
            self.bodiless += 1
        return found

    def restart(self, seeds: Mapping[int, Backprop]) -> None:
        """Makes this tape what a new one is once ``seeds`` (``seed 0`` .. ``seed n-1``,
        made on this tape first, in that order) are made on it, for another run of the
        same code: seeds are made once for many runs (given as the same mapping, never
        changed).  Only for runs none of whose backpropagators outlives them, so that
        nothing stamped before reaches the next."""
        count = len(seeds)
        self.stamps = count
        self.bodies_run = 0
        self.reached = 0
        self.bodiless = count
        self.ring_phases = 0
        # A seed the run makes itself is not kept for the next.  (A run only adds seeds:
        # with as many as the last restart left, they are still those.)
        if self._restarted_from is not seeds or len(self._seeds) != count:
            self._seeds = dict(seeds)
            self._restarted_from = seeds

    def seeds(self, first: int, count: int) -> list[Backprop]:
        """``seed first`` ... ``seed (first + count - 1)``, made in that order if new."""
        seeds = self._seeds
        if seeds:
            return [self.seed(first + i) for i in range(count)]
        stamp = self.stamps
        made = []
        for i in range(count):
            seed = Backprop()  # as generated code makes them: one per input real
            seed.stamp, seed.function, seed.captured = stamp + i, None, first + i
            seed.span, seed.tape = None, self
            made.append(seed)
        self.stamps = stamp + count
        self.bodiless += count
        seeds.update(zip(range(first, first + count), made))
        return made

    def own_constant(self, span: Span | None) -> ConstantBackprop:
        """A stamped ``\\a -o zero`` of its own, for instrumented runs (not ``created``)."""
        self.bodiless += 1
        return ConstantBackprop.create(self.next_stamp(), None, (), span, self)

    @staticmethod
    def constant() -> Backprop:
        """``\\a -o zero``, shared by every constant (:data:`ZERO`: its calls are dropped)."""
        return ZERO


# --------------------------------------------------------------------------- batched folds


BATCHED_FOLD_MIN_STEPS = 2
"""A fold of fewer steps (one) runs step by step: for a single step the loop's own records
cost more than they save.  From two steps on batching runs no more instructions, and
fewer as steps grow: for ``acc + x * sin x`` about as many at two steps, 12% fewer at
four, 22% at seven; 3% fewer for the MLP's dot products of two inputs (docs/performance.md,
item 24)."""


def batched_fold(step: Callable, batched_step: Callable, loop: Callable, z: Any, xs: list,
                 paths: tuple[tuple[int, ...], ...], new_backprop: Callable[..., Backprop],
                 span: Span | None) -> Any:
    """``fold step z xs`` for a step that is one fused region (``lambdad.fuse``), its steps'
    backpropagators run as one record.

    ``batched_step`` computes what ``step`` does, except that the backpropagators at the
    accumulator's ``paths`` (its slots: ``(0, 1)`` is the backpropagator of the first
    component) are the tuples of what their bodies capture, also returned beside the
    accumulator; ``loop(steps, a_1 .. a_n, stage)`` runs those bodies for every step,
    latest first (see ``lambdad.codegen``), and returns what reached the slots of ``z``.
    In the result each slot is a backpropagator that adds what it receives into a cell and
    sends to the fold's own, created before them, whose body runs the loop with the cells
    once every slot's body has run (:func:`batched_slot_body`,
    :func:`batched_steps_body`).  The values are those of ``fold step z xs``; each body
    runs once, with the sum of what reached it, as factored evaluation runs them.

    ``step`` runs the fold instead when ``z`` is not a structure of scalars (reals, or the
    pairs of reals of forward mode over reverse mode) paired with backpropagators: the
    code is then evaluated with other values (rings of backpropagators)."""
    if not batches(z, xs):  # (codegen tests the length too)
        return FOLD.evaluate(step, z, xs)
    both = curried_pair(batched_step)
    steps = []
    acc = z
    for x in xs:
        acc, made = both(acc, x)
        steps.append(made)
    return batched_fold_result(acc, steps, loop, z, paths, new_backprop, span)


def batches(z: Any, xs: list) -> bool:
    """Whether ``fold f z xs`` runs batched: ``xs`` is long enough and ``z`` is a structure
    of scalars paired with backpropagators (a reverse-mode run, or forward mode over one)."""
    return len(xs) >= BATCHED_FOLD_MIN_STEPS and _scalars_with_backprops(z)


def batched_fold_result(acc: Any, steps: list, loop: Callable, z: Any,
                        paths: tuple[tuple[int, ...], ...],
                        new_backprop: Callable[..., Backprop], span: Span | None) -> Any:
    """The result of a batched fold whose steps ran, giving ``acc`` and the records
    ``steps`` (see :func:`batched_fold`): ``acc`` with a backpropagator for each slot, and
    the fold's own backpropagator, created before them, running ``loop`` (for one slot,
    that slot's backpropagator runs it)."""
    if len(paths) == 1:  # its one slot's backpropagator is the fold's
        (path,) = paths
        return _replaced(acc, path, new_backprop(batched_fold_body,
                                                 (loop, steps, _at(z, path)), span))
    cells: list[Any] = [None] * len(paths)
    starts = tuple(_at(z, path) for path in paths)
    fold = new_backprop(batched_steps_body, (loop, steps, cells, starts), span)
    for slot, path in enumerate(paths):
        acc = _replaced(acc, path, new_backprop(batched_slot_body, (cells, slot, fold), span))
    return acc


def _scalars_with_backprops(value: Any) -> bool:
    """Whether ``value`` is a scalar paired with a backpropagator, or pairs of such: a
    scalar is a real, or a pair of scalars (the dual numbers of forward mode over reverse
    mode), added by :func:`scalar_sum`."""
    work = [value]
    while work:
        v = work.pop()
        if type(v) is not tuple or len(v) != 2:
            return False
        if isinstance(v[1], Backprop):
            if type(v[0]) is not float and not _is_scalar(v[0]):
                return False
        else:
            work.extend(v)
    return True


def _is_scalar(k: Any) -> bool:
    work = [k]
    while work:
        k = work.pop()
        if type(k) is tuple and len(k) == 2:
            work.extend(k)
        elif type(k) is not float:
            return False
    return True


def scalar_sum(x: Any, y: Any) -> Any:
    """``x + y`` for scalars (see :func:`_scalars_with_backprops`): reals add, pairs add
    componentwise.  (Nested only as deep as differentiations are.)"""
    if type(x) is float:
        return x + y
    return (scalar_sum(x[0], y[0]), scalar_sum(x[1], y[1]))


def _at(value: Any, path: tuple[int, ...]) -> Any:
    for index in path:
        value = value[index]
    return value


def _replaced(value: Any, path: tuple[int, ...], new: Any) -> Any:
    """``value`` (nested pairs) with the part at ``path`` replaced by ``new``."""
    if not path:
        return new
    first, second = value
    if path[0] == 0:
        return (_replaced(first, path[1:], new), second)
    return (first, _replaced(second, path[1:], new))


def batched_slot_body(captured: tuple, a: float, stage: Callable) -> None:
    """The body of a slot of a batched fold's result: adds ``a`` into the slot's cell and
    sends to the fold's backpropagator, so that it runs after every slot's body."""
    cells, slot, fold = captured
    cells[slot] = a if cells[slot] is None else scalar_sum(cells[slot], a)
    stage(fold, 0.0)


def batched_fold_body(captured: tuple, a: float, stage: Callable) -> None:
    """The body of the one backpropagator of a batched fold whose accumulator has one
    slot: the loop over the steps with what reached it, then what reached the start's
    slot, sent to it."""
    loop, steps, start = captured
    (b,) = loop(steps, a, stage)
    if b is not None:
        stage(start, b)


def batched_steps_body(captured: tuple, a: float, stage: Callable) -> None:
    """The body of a batched fold's backpropagator: the loop over the steps with what the
    slots' cells hold (taken: a second run adds only what came since), then what reached
    the slots of the start, sent to them."""
    loop, steps, cells, starts = captured
    adjoints = list(cells)
    cells[:] = [None] * len(cells)
    for start, b in zip(starts, loop(steps, *adjoints, stage)):
        if b is not None:
            stage(start, b)


# --------------------------------------------------------------------------- events


@attrs.frozen
class BackpropCreated:
    """A linear abstraction ``\\a -o e`` was evaluated and received ``stamp``."""

    stamp: int
    span: Span | None


@attrs.frozen
class BackpropRun:
    """The backward phase ran the body of backpropagator ``stamp`` with ``cotangent``."""

    stamp: int
    span: Span | None
    cotangent: float


# --------------------------------------------------------------------------- the backward phase


def _foreign(backprop: Backprop) -> DifferentiationError:
    return DifferentiationError(
        "a backpropagator of another differentiation reached this backward phase "
        "(nested differentiation of this kind is not supported)", backprop.span)


def _created_late() -> DifferentiationError:
    return DifferentiationError("a backpropagator was created during the backward phase")


def _calls(data: Any, into: Callable[[Any, float], Any]) -> None:
    """Hands every call ``g a`` of the cotangent data ``data`` to ``into(g, a)``, left to
    right.  Raises TypeError on anything that is not cotangent data."""
    work: list[Any] = []
    while True:
        kind = type(data)
        if kind is Call:
            into(data.backprop, data.cotangent)
        elif kind is Sum:
            work.append(data.right)
            data = data.left
            continue
        elif data is not None:
            raise TypeError(f"not cotangent data: {data!r}")
        if not work:
            return
        data = work.pop()


def _backward_factored(tape: Tape, cotangent: Any, on_event, add=None) -> dict[int, float]:
    adjoints: dict[int, float] = {}
    if add is not None:
        tape.ring_phases += 1
    if add is not None and tape.stamps > _RING_TABLES_MOST and tape.ring_phases > 1:
        reached, late = _factored_ring_phase(tape, cotangent, on_event, add)
        for index, seed in tape._seeds.items():
            s = seed.stamp
            if s in reached:
                adjoints[index] = reached[s]
        adjoints.update(late)
        return adjoints
    acc, pending, late = _factored_phase(tape, cotangent, on_event, 0, add)
    n = len(acc)
    for index, seed in tape._seeds.items():
        s = seed.stamp
        if s < n and pending[s] is not None:
            adjoints[index] = acc[s]
    adjoints.update(late)
    return adjoints


_RING_TABLES_MOST = 4096
"""Up to this many stamps, or in the first phase on a tape (an HVP's own, whose one phase
reaches most of it, however long), a phase in another ring keeps what reached each stamp
in tables as the reals' phase does; above, on a tape with phases in that ring before it,
by stamp with a heap (:func:`_factored_ring_phase`: a tape shared by the read-offs
of an enclosing run, each reaching a few stamps of it)."""


def _backward_factored_first_seeds(tape: Tape, back: Backprop, count: int) -> list[float]:
    """The adjoints of ``seed 0`` .. ``seed (count - 1)``, made first on ``tape`` (stamps
    0 .. count - 1, as :meth:`Tape.restart` keeps them), for the cotangent ``back 1``, as
    a list (0 where nothing reached one): what :func:`_backward_factored` gives for them,
    without looking at their stamps one by one, which have no body."""
    acc, _, _ = _factored_phase(tape, back, None, count)
    return acc[:count]


def _staged_late(late: dict[int, Any], add: Callable[[Any, Any], Any] | None, g: Backprop,
                 a: Any) -> None:
    """Staging ``g a`` for a backpropagator stamped after the backward phase began: fine
    for seeds (their adjoints go to ``late``) and the zero; any other was created late."""
    if g.function is not None:
        raise _created_late() from None
    index = g.seed_index
    if index is not None:
        late[index] = (late.get(index, 0.0) + a if add is None
                       else a if index not in late else add(late[index], a))


def _factored_phase(tape: Tape, cotangent: Any, on_event, floor: int, add=None
                    ) -> tuple[list[Any], list[Any], dict[int, Any]]:
    """The factored backward phase of the cotangent data ``cotangent`` (or of ``g 1`` for a
    backpropagator ``g``), in the reals or in the ring whose addition is ``add``: what
    reached each stamp (``acc``), the backpropagator sent to at each (``pending``, None if
    none was) and the adjoints of seeds made during the phase (``late``), in tables by
    stamp.  Stamps below ``floor`` are known to have no body.  (A phase on a long tape
    that it reaches little of: :func:`_factored_ring_phase`.)"""
    n = tape.stamps
    acc: list[Any] = [0.0] * n  # stamp -> sum of the cotangents sent to it (linear factoring)
    pending: list[Backprop | None] = [None] * n  # stamp -> backpropagator, once sent to
    late: dict[int, float] = {}  # adjoints of seeds made after the phase began

    if add is None:
        def stage(g: Backprop, a: float) -> None:
            # Linear factoring: `g u <+> g v` becomes one run of g's body with u + v.
            try:
                if g.tape is not tape:
                    if g is ZERO:
                        return
                    raise _foreign(g)
                s = g.stamp
                # the first cotangent is the sum so far (`0.0 + a` would copy an array)
                acc[s] = a if pending[s] is None else acc[s] + a
                pending[s] = g
            except AttributeError:
                # Not a backpropagator: a function into d, applied; walk what it returns.
                _calls(g(a), stage)
            except IndexError:
                _staged_late(late, None, g, a)
        lowest = None
    else:
        # In another ring (a program differentiated again, whose one tape serves many
        # read-offs): the smallest stamp with a body that was sent to.  Below it no body
        # waits, so the phase stops there instead of walking the older stamps.
        lowest = [0 if on_event is not None else n]

        def stage(g: Backprop, a: Any) -> None:
            # The same in another ring.
            try:
                if g.tape is not tape:
                    if g is ZERO:
                        return
                    raise _foreign(g)
                s = g.stamp
                if pending[s] is None:
                    acc[s] = a
                    if s < lowest[0] and g.function is not None:
                        lowest[0] = s
                else:
                    acc[s] = add(acc[s], a)
                pending[s] = g
            except AttributeError:
                _calls(g(a), stage)
            except IndexError:
                _staged_late(late, add, g, a)

    try:
        # Largest stamp first.
        _run_bodies(tape, cotangent, range(n - 1, floor - 1, -1), acc, pending, stage,
                    on_event, lowest)
    finally:
        # `stage` refers to itself: unbound, it no longer keeps every backpropagator alive
        # until the cyclic collector runs.
        stage = None
    return acc, pending, late


def _factored_ring_phase(tape: Tape, cotangent: Any, on_event, add: Callable[[Any, Any], Any]
                         ) -> tuple[dict[int, Any], dict[int, Any]]:
    """:func:`_factored_phase` in a ring other than the reals (``add`` its addition): what
    reached each stamp that was sent to (by stamp), and the adjoints of seeds made during
    the phase.  Such a phase is the read-off of a program differentiated again, on a tape
    that serves every read-off of the enclosing run: it reaches a few recent stamps of
    many, so it keeps what reached them by stamp and takes the largest pending stamp from
    a heap, and costs what it reaches, not the tape's length (which would make a run of k
    read-offs quadratic in k).  For a tape of more than :data:`_RING_TABLES_MOST` stamps
    with ring phases before this one."""
    n = tape.stamps
    acc: dict[int, Any] = {}  # stamp -> sum of the cotangents sent to it (linear factoring)
    pending: dict[int, Backprop] = {}  # stamp -> backpropagator sent to
    order: list[int] = []  # the pending stamps, negated: a heap gives the largest first
    late: dict[int, Any] = {}

    def stage(g: Backprop, a: Any) -> None:
        # Linear factoring, as in _factored_phase: the first cotangent sent is the sum so far.
        try:
            if g.tape is not tape:
                if g is ZERO:
                    return
                raise _foreign(g)
            s = g.stamp
        except AttributeError:
            # Not a backpropagator: a function into d, applied; walk what it returns.
            _calls(g(a), stage)
            return
        if s >= n:
            _staged_late(late, add, g, a)
        elif s in pending:
            acc[s] = add(acc[s], a)
        else:
            acc[s] = a
            pending[s] = g
            heapq.heappush(order, -s)

    def largest_first() -> Iterator[int]:
        # (a stamp staged by a body is older than the body's own: popped in its turn)
        while order:
            yield -heapq.heappop(order)

    try:
        _run_bodies(tape, cotangent, largest_first(), acc, pending, stage, on_event, None)
    finally:
        stage = None  # (it refers to itself: see _factored_phase)
    return acc, late


def _run_bodies(tape: Tape, cotangent: Any, stamps: Iterable[int], acc: Any, pending: Any,
                stage: Callable[[Backprop, Any], None], on_event,
                lowest: list[int] | None) -> None:
    """The factored phase's one loop: stages the cotangent data ``cotangent`` (or ``g 1``
    for a backpropagator ``g``), then runs, for each of ``stamps`` in turn (largest first)
    that was sent to (``pending``), its backpropagator's body once on the sum that reached
    it (``acc``), the body staging what it sends through ``stage``.  A body only sends to
    older backpropagators, so nothing is added to a backpropagator once it has run.  Seeds
    and the zero have no body; what reaches a seed is read off by the caller.  Counts the
    bodies run on ``tape``.  With ``lowest`` (the smallest stamp with a body sent to so
    far, kept by ``stage``), the walk stops below it."""
    ran = 0
    try:
        if isinstance(cotangent, Backprop):  # the result's own backpropagator, sent 1
            stage(cotangent, 1.0)
        else:
            _calls(cotangent, stage)
        for s in stamps:
            g = pending[s]
            if g is None:
                if lowest is not None and s < lowest[0]:
                    break
                continue
            function = g.function
            if function is None:
                if on_event is not None and type(g) is ConstantBackprop:
                    on_event(BackpropRun(s, g.span, acc[s]))
                continue
            ran += 1
            a = acc[s]
            acc[s] = None  # (read once: a cotangent array is freed after its body runs)
            if on_event is not None:
                on_event(BackpropRun(s, g.span, a))
            rest = function(g.captured, a, stage)
            if rest is not None:
                _calls(rest, stage)
    finally:
        tape.bodies_run += ran
        tape.reached += ran


def _backward_naive(tape: Tape, cotangent: Any, on_event, add=None) -> dict[int, float]:
    adjoints: dict[int, float] = {}
    staged: list[tuple[Backprop, float]] = []

    def stage(g: Backprop, a: float) -> None:
        if isinstance(g, Backprop):
            staged.append((g, a))
        else:  # a function into d, applied: stage the calls it returns
            _calls(g(a), stage)

    # Calls still to run, the next one last: each body's calls run right after it, left to
    # right, so a backpropagator sent to k times runs k times.
    work: list[tuple[Backprop, float]] = []
    ran = 0
    reached: set[int] = set()  # the stamps whose bodies ran
    try:
        _calls(cotangent, stage)
        work.extend(reversed(staged))
        staged.clear()
        while work:
            g, a = work.pop()
            if g.tape is not tape:
                if g is ZERO:
                    continue
                raise _foreign(g)
            function = g.function
            if function is None:
                index = g.seed_index
                if index is not None:
                    adjoints[index] = (adjoints.get(index, 0.0) + a if add is None
                                       else a if index not in adjoints
                                       else add(adjoints[index], a))
                elif on_event is not None and type(g) is ConstantBackprop:
                    on_event(BackpropRun(g.stamp, g.span, a))
                continue
            ran += 1
            reached.add(g.stamp)
            if on_event is not None:
                on_event(BackpropRun(g.stamp, g.span, a))
            rest = function(g.captured, a, stage)
            if rest is not None:
                _calls(rest, stage)
            if staged:
                work.extend(reversed(staged))
                staged.clear()
    finally:
        tape.bodies_run += ran
        tape.reached += len(reached)
        stage = None  # it refers to itself (see _backward_factored)
    return adjoints


# --------------------------------------------------------------------------- the registry


@attrs.frozen
class Strategy:
    """A way to run the backward phase: ``factored`` strategies run each backpropagator
    (or tape node) once with the sum of what reached it; the others once per call."""

    name: str
    factored: bool
    # (tape, cotangent data, event hook, the ring's addition or None for the reals)
    run: Callable[..., dict[int, float]]
    summary: str
    # Whether reverse mode runs ←D with the backpropagators of each straight-line region
    # fused (lambdad.fuse): a fused region is one backpropagator, created once, run once.
    fuses: bool = False
    # (tape, the result's backpropagator g, n): the adjoints of seeds 0 .. n-1, made first
    # on the tape, for the cotangent g 1 as a list, in a run without events in the reals;
    # None: read them from ``run``.
    run_first_seeds: Callable[[Any, Any, int], list[float]] | None = None


STRATEGIES: Mapping[str, Strategy] = types.MappingProxyType({
    "factored": Strategy("factored", True, _backward_factored,
                         "each backpropagator runs once, with the sum of its cotangents "
                         "(linear factoring)", run_first_seeds=_backward_factored_first_seeds),
    "naive": Strategy("naive", False, _backward_naive,
                      "each backpropagator runs once per call (exponential on shared values)"),
    "fused": Strategy("fused", True, _backward_factored,
                      "factored, on ←D with the backpropagators of each straight-line region "
                      "fused at compile time (one per region)", fuses=True,
                      run_first_seeds=_backward_factored_first_seeds),
})


# What reverse mode runs unless told otherwise: the fused form, where a straight-line region
# costs one backpropagator; `factored` is ←D as the paper writes it, factored at run time.
DEFAULT_STRATEGY = "fused"


def strategy_named(name: str) -> Strategy:
    """The strategy called ``name``; UsageError naming the known ones if there is none."""
    found = STRATEGIES.get(name)
    if found is None:
        *others, last = STRATEGIES
        raise UsageError(f"unknown strategy `{name}`; use {', '.join(others)} or {last}")
    return found


def backward(tape: Tape, cotangent: Any, strategy: str = DEFAULT_STRATEGY,
             on_event: Callable[[Any], None] | None = None,
             add: Callable[[Any, Any], Any] | None = None) -> dict[int, float]:
    """The adjoint of every seed reached by the cotangent data ``cotangent``, by seed index.

    ``factored`` runs each pending backpropagator's body once, largest stamp first, with the
    sum of what was sent to it (BMP linear factoring); ``naive`` runs a body per call.
    Bodies stage the applications they make through the ``stage`` function they are given
    (compiled linear bodies), or return them as cotangent data (any other body), which is
    walked and staged alike.  Counts bodies in ``tape.bodies_run`` and reports each as a
    :class:`BackpropRun` event.  Raises UsageError for an unknown strategy,
    DifferentiationError if a backpropagator of another tape is reached or one is created
    while bodies run.  No recursion: work stacks and stamp-indexed arrays.

    ``add`` is the addition of the ring the cotangents' scalars live in when it is not the
    reals' ``+`` (a program differentiated again sends pairs, see :func:`ring_adder`).
    """
    return strategy_named(strategy).run(tape, cotangent, on_event, add)


# --------------------------------------------------------------------------- other rings
# The rings of a program differentiated again are built from R, pairs and backpropagators
# (D(R) is R * R or R * (R -o d)): their values add componentwise, and two linear maps add
# pointwise, f + g = \a -o f a <+> g a.  The zero is 0, (0, 0), \a -o zero.  Ring types
# nest only as deep as transformations do, so the recursion below is bounded by that (not
# by the input).


def ring_adder(tape: Tape) -> Callable[[Any, Any], Any]:
    """The addition of ring values (floats, pairs, backpropagators), a sum of
    backpropagators being a new one stamped on ``tape``.  (It refers to ``tape`` only, not
    to itself: no reference cycle keeps the tape alive after a read-off until the cyclic
    collector runs.)"""

    def add(x: Any, y: Any) -> Any:
        if type(x) is tuple:
            x0, x1 = x
            y0, y1 = y
            if type(x0) is type(x1) is type(y0) is type(y1) is float:  # dual reals, mostly
                return (x0 + y0, x1 + y1)
        return _ring_sum(x, y, tape)

    return add


def _ring_sum(x: Any, y: Any, tape: Tape) -> Any:
    """``x + y`` in the ring of ``x`` (see :func:`ring_adder`)."""
    if type(x) is tuple:
        return (_ring_sum(x[0], y[0], tape), _ring_sum(x[1], y[1], tape))
    if isinstance(x, Backprop):
        if x.function is None and x.seed_index is None:  # a zero backpropagator
            return y
        if isinstance(y, Backprop) and y.function is None and y.seed_index is None:
            return x
        return Backprop.create(tape.next_stamp(), _run_sum_body, (x, y), None, tape)
    return x + y


def _run_sum_body(captured: tuple, a: Any, stage: Any) -> None:
    """The body of ``\\a -o f a <+> g a`` (the sum of two backpropagators in a ring)."""
    stage(captured[0], a)
    stage(captured[1], a)


def ring_zero(sample: Any, tape: "Tape | None") -> Any:
    """The zero of the ring of ``sample`` (a value of it): 0.0, pairs of zeros, and the zero
    backpropagator of ``tape``."""
    if type(sample) is tuple:
        return (ring_zero(sample[0], tape), ring_zero(sample[1], tape))
    if isinstance(sample, Backprop):
        assert tape is not None, "a ring of backpropagators needs its tape"
        return tape.constant()
    return 0.0


# --------------------------------------------------------------------------- costs


@attrs.frozen
class LevelStats:
    """What the differentiations at one nesting depth cost (depth 1 is the outermost):
    their modes, backpropagators (or tape nodes) created and bodies run."""

    depth: int
    modes: tuple[str, ...]
    created: int
    bodies_run: int

    def __str__(self) -> str:
        return (f"level {self.depth} ({'/'.join(self.modes)}): created {self.created}, "
                f"bodies run {self.bodies_run}")


@attrs.frozen
class Stats:
    """What a reverse-mode run cost: backpropagators created and bodies run, in total
    and (for nested differentiation) per level."""

    created: int
    bodies_run: int
    levels: tuple[LevelStats, ...] = ()

    def __str__(self) -> str:
        text = (f"backpropagators created: {self.created}\n"
                f"backpropagator bodies run: {self.bodies_run}")
        if len(self.levels) > 1:
            text += "".join(f"\n  {level}" for level in self.levels)
        return text
