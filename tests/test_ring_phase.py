"""The factored backward phase in a ring other than the reals (a program differentiated
again) stops below the oldest backpropagator with a body that was sent to, and still runs
a body an older one sends to during the phase."""

from lambdad.tape import Call, Tape, backward


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
