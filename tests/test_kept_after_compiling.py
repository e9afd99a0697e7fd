"""What a program keeps alive once its derivatives are compiled: the code, the lines that
locate its errors, and the terms of the program itself, but not the terms of the images
that ←D made and compiled.  Every object kept alive is one the cyclic collector scans at
each full collection, long after the gradient returned (a 10^4-binding chain made about a
million of them), so a large program's images must not keep their terms."""

import gc

import pytest

import lambdad
from lambdad.syntax import Term
from lambdad.trace import trace


def chain(depth):
    lines = ["def chain (x : R) : R =", "  let x1 = sin x * 1.0001 in"]
    lines += [f"  let x{i} = sin x{i - 1} * 1.0001 in" for i in range(2, depth + 1)]
    return "\n".join(lines + [f"  x{depth}\n"])


def terms_alive():
    gc.collect()
    return sum(isinstance(found, Term) for found in gc.get_objects())


@pytest.mark.parametrize("strategy", ["factored", "fused", "naive"])
def test_a_gradient_keeps_no_term_of_the_image_it_compiled(strategy):
    program = lambdad.loads(chain(200))
    program.call("chain", 0.5)
    before = terms_alive()
    value, gradient = program.value_and_grad("chain", 0.5, strategy=strategy)
    after = terms_alive()
    # ←D of the chain is several times the chain (each binding's pair, backpropagator and
    # its body): kept, it would be thousands of terms more than the program's own
    assert after - before < 200, (before, after)
    # the repeated gradient, by the code kept, gives the same result
    assert program.value_and_grad("chain", 0.5, strategy=strategy) == (value, gradient)


def test_errors_of_a_gradient_are_located_by_its_lines_without_terms():
    program = lambdad.loads("def f (x : R) : R = let y = x * 2 in log (y - 2) + y\n")
    program.grad("f", 3.0)
    with pytest.raises(lambdad.EvalError) as caught:
        program.grad("f", 1.0)
    assert (caught.value.span.line, caught.value.span.col) == (1, 38)
    assert "log" in caught.value.message


def test_a_trace_after_a_gradient_still_reports_each_operation_with_its_adjoint():
    # (instrumented code, which reports events, keeps the terms its events name)
    program = lambdad.loads("def f (x : R) : R = sin x * x\n")
    program.grad("f", 2.0)
    rows = trace(program, "f", 2.0, mode="reverse").rows
    assert [row.primitive for row in rows] == ["sin", "mul"]
    assert rows[-1].derivatives == [1.0]
    assert rows[0].derivatives == [pytest.approx(2.0)]
