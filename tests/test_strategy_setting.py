"""The backward strategy a derivative runs by: the one `set_strategy` set, unless a call
names its own, which holds for that call only.  Which one ran is seen in the counts of
`stats=True`: the factored strategy creates one backpropagator per operation, the fused
one a single one for a straight-line function."""

import pytest

import lambdad
from lambdad import UsageError

SOURCE = "def f (x : R) (y : R) : R = x * sin y + x * x\n"
POINT = (0.5, 2.0)


def created(program, **options):
    """Backpropagators created by a gradient of ``f`` (twice: the general run, then the
    prepared one), both the same."""
    counts = {program.value_and_grad("f", POINT, stats=True, **options)[2].created
              for _ in range(2)}
    assert len(counts) == 1
    return counts.pop()


def test_the_strategies_create_different_numbers_of_backpropagators():
    program = lambdad.loads(SOURCE)
    assert created(program, strategy="fused") == 1
    assert created(program, strategy="factored") > 1


@pytest.mark.parametrize("strategy", ["factored", "naive", "fused"])
def test_a_gradient_runs_by_the_strategy_set(strategy):
    program = lambdad.loads(SOURCE)
    program.set_strategy(strategy)
    ran = created(program)
    assert ran == created(lambdad.loads(SOURCE), strategy=strategy)
    assert program.strategy == strategy  # the gradient did not reset it
    assert program.grad("f", POINT, stats=True)[1].created == ran


def test_a_strategy_named_by_a_call_holds_for_that_call_only():
    program = lambdad.loads(SOURCE)
    program.set_strategy("factored")
    assert created(program, strategy="fused") == 1
    assert program.strategy == "factored"
    assert created(program) > 1
    program.hessian("f", POINT, strategy="naive")
    assert program.strategy == "factored"


def test_an_unknown_strategy_changes_nothing():
    program = lambdad.loads(SOURCE)
    program.set_strategy("naive")
    with pytest.raises(UsageError):
        program.grad("f", POINT, strategy="quick")
    assert program.strategy == "naive"
