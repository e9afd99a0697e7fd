"""The factored backward phase in a ring other than the reals (a program differentiated
again): a body sent to during the phase runs however old it is, each body runs once on
the sum of what reached it, and a phase on a long tape costs what it reaches."""

import pytest

from lambdad.tape import Call, Sum, Tape, backward


def _pairs(x, y):
    return (x[0] + y[0], x[1] + y[1])


def test_a_body_sent_to_during_the_phase_runs_however_old_it_is():
    tape = Tape()
    seed = tape.seed(0)
    # stamp 1: its body sends twice what reaches it to the seed
    old = tape.backprop(lambda a: Call(seed, (2 * a[0], 2 * a[1])))
    # stamps 2 .. 1001: never reached
    for _ in range(1000):
        tape.backprop(lambda a: Call(seed, (100.0, 100.0)))
    # the newest: sends to the old one only
    newest = tape.backprop(lambda a: Call(old, (3 * a[0], 3 * a[1])))
    adjoints = backward(tape, Call(newest, (1.0, 10.0)), "factored", None, _pairs)
    assert adjoints == {0: (6.0, 60.0)}


def test_the_phase_costs_what_it_reaches_not_the_length_of_the_tape():
    # A read-off inside a program differentiated again shares the enclosing run's tape,
    # which grows with every read-off: a phase sized by the tape would make k read-offs
    # cost O(k^2).  Here the tape is 5 million stamps long and the phase reaches three.
    import tracemalloc

    tape = Tape()
    seed = tape.seed(0)
    # an earlier read-off on the shared tape, when it was short
    first = tape.backprop(lambda a: Call(seed, a))
    assert backward(tape, Call(first, (1.0, 0.0)), "factored", None, _pairs) == {0: (1.0, 0.0)}
    tape.stamps = 5_000_000  # (stamps of the enclosing run, none of them reached)
    middle = tape.backprop(lambda a: Call(seed, (a[0] + a[1], a[1])))
    newest = tape.backprop(lambda a: Call(middle, (2 * a[0], a[1])))
    tracemalloc.start()
    try:
        adjoints = backward(tape, Call(newest, (1.0, 10.0)), "factored", None, _pairs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert adjoints == {0: (12.0, 10.0)}
    assert peak < 100_000  # (a table per stamp would take 80 MB)


def test_a_backpropagator_reached_twice_runs_once_with_the_sum():
    tape = Tape()
    seed = tape.seed(0)
    runs = []

    def body(a):
        runs.append(a)
        return Call(seed, a)

    shared = tape.backprop(body)
    left = tape.backprop(lambda a: Call(shared, (a[0], 0.0)))
    right = tape.backprop(lambda a: Call(shared, (0.0, a[1])))
    adjoints = backward(tape, Sum(Call(left, (1.0, 2.0)), Call(right, (3.0, 4.0))),
                        "factored", None, _pairs)
    assert runs == [(1.0, 4.0)]
    assert adjoints == {0: (1.0, 4.0)}


@pytest.mark.parametrize("older_stamps", [0, 10_000])
def test_tables_and_heap_give_the_same_adjoints(older_stamps):
    # A short tape's phase keeps tables by stamp; a long one's, after earlier phases, a
    # heap: the same sends, bodies run once each on the sums, the same adjoints either way.
    tape = Tape()
    x, y = tape.seed(0), tape.seed(1)
    if older_stamps:
        earlier = tape.backprop(lambda a: None)
        assert backward(tape, Call(earlier, (1.0, 1.0)), "factored", None, _pairs) == {}
    tape.stamps += older_stamps
    runs = []

    def body(name, *sends):
        def run(a):
            runs.append(name)
            data = None
            for target, scale in sends:
                call = Call(target, (scale * a[0], scale * a[1]))
                data = call if data is None else Sum(data, call)
            return data
        return run

    u = tape.backprop(body("u", (x, 2.0), (y, 1.0)))
    v = tape.backprop(body("v", (u, 3.0), (x, 1.0)))
    w = tape.backprop(body("w", (u, 1.0), (v, 1.0)))
    adjoints = backward(tape, Sum(Call(w, (1.0, 0.5)), Call(v, (2.0, 0.0))), "factored", None,
                        _pairs)
    assert runs == ["w", "v", "u"]
    # w sends (1, .5) to u and v; v gets (3, .5): sends (9, 1.5) to u and (3, .5) to x;
    # u gets (10, 2): sends (20, 4) to x and (10, 2) to y
    assert adjoints == {0: (23.0, 4.5), 1: (10.0, 2.0)}


def test_the_first_phase_on_a_long_tape_keeps_tables(monkeypatch):
    # An HVP's own tape, however long, has one phase, which reaches most of it: tables by
    # stamp cost less there than a heap (a fifth of a 256-point MLP's HVP, in instructions).
    import lambdad.tape as tapes

    def heap(*args):
        raise AssertionError("the heap's phase ran")

    monkeypatch.setattr(tapes, "_factored_ring_phase", heap)
    tape = Tape()
    seed = tape.seed(0)
    last = seed
    for _ in range(10_000):
        last = tape.backprop(lambda a, to=last: Call(to, a))
    assert backward(tape, Call(last, (1.0, 2.0)), "factored", None, _pairs) == {0: (1.0, 2.0)}
