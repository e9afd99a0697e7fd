"""Forward mode over a definition that differentiates a function it is given (AD.md
section 9).  →D of ``grad f x`` needs no code of ``f``: ``→D(f)`` is a function on reals
that the target language's own ``vjp``/``jvp`` differentiate, so ``show --forward`` prints
a program that differentiates its argument's image.  Specifications: the printed program
parses, type-checks at the transformed type and, applied to the image of a known
function, runs to the runtime route's derivative and to central differences; the outer
tangent of what the function captured is kept apart from the inner differentiation
(perturbation confusion); forward mode applies to the printed program again.  Reverse mode
has no such program: a located error says why.
"""

import pytest

import lambdad
from lambdad.errors import DifferentiationError
from lambdad.forward import forward_term, forward_type
from lambdad.parser import parse_expr, parse_module
from lambdad.printer import print_module, print_term
from lambdad.rules import NoReverseImageError
from lambdad.backward import backward_term
from lambdad.typecheck import print_scheme

# Each ``d*`` differentiates its argument ``f``; each ``u*`` applies one to a function
# capturing its own input ``x``, so its derivative needs the outer tangent of what ``f``
# captured as well as that of the point.
SOURCE = r"""
def d (f : R -> R) (x : R) : R = grad f x
def dj (f : R -> R) (x : R) (v : R) : R * R = jvp f x v
def dg (f : R * R -> R) (p : R * R) : R * R = grad f p
def dv (f : R -> R * R) (x : R) : (R * R) * (R * R -> R) = vjp f x
def djr (f : R * R -> [R]) (p : R * R) : [R * R] = jacrev f p
def djf (f : R * R -> [R]) (p : R * R) : [R * R] = jacfwd f p
def dl (f : [R] -> R) (xs : [R]) : [R] = grad f xs
def djl (f : R * R -> [R]) (p : R * R) (v : R * R) : [R] * [R] = jvp f p v
def dvl (f : [R] -> R * [R]) (xs : [R]) : (R * [R]) * (R * [R] -> [R]) = vjp f xs
def dd (f : R -> R) (x : R) : R = grad (\z -> grad f z * z) x
def de (f : R -> R) (x : R) : R = d f x + d (\y -> f y * y) x
def total (xs : [R]) : R = fold (\a b -> a + b) 0 xs
def ud x = d (\y -> x * y * y) x
def confused x = d (\y -> x * y) 1
def udj x = let (a, b) = dj (\y -> x * y * sin y) x (x * x) in a + 3 * b
def udg x = let (a, b) = dg (\q -> x * fst q * snd q * snd q) (x, 2 * x) in a * b
def udv x = let (w, back) = dv (\y -> (x * y * y, sin (x * y))) (2 * x) in fst w + back (x, 2 * x)
def udjr x = total (map (\r -> fst r * snd r) (djr (\q -> [x * fst q * snd q, sin (fst q) * x]) (x, 3)))
def udjf x = total (map (\r -> fst r + snd r) (djf (\q -> [x * fst q * snd q, sin (fst q) * x]) (x, 3)))
def udl x = total (dl (\ys -> x * total (map (\y -> y * y * y) ys)) [x, 2 * x, 1])
def ude x = de (\y -> x * y * y) (2 * x)
def udd x = dd (\y -> x * sin y) (x * x)
def udjl x = let (a, b) = djl (\q -> [x * fst q * snd q, sin (snd q) * x]) (x, 2) (x * x, 1) in
  total a + 3 * total b
def udvl x = let (w, back) = dvl (\ys -> (x * total ys, map (\y -> x * y * y) ys)) [x, 1] in
  fst w + total (back (x, [1, x]))
"""

# the definition shown, the function applying it, the point
CASES = [("d", "ud", 0.7), ("d", "confused", 0.7), ("dj", "udj", 0.7), ("dg", "udg", 0.7),
         ("dv", "udv", 0.7), ("djr", "udjr", 0.7), ("djf", "udjf", 0.7), ("dl", "udl", 0.7),
         ("dd", "udd", 0.7), ("djl", "udjl", 0.7), ("dvl", "udvl", 0.7),
         ("de", "ude", 0.7)]


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE, "arguments.lam")


def _value(program, name: str):
    return next(d.value for d in program.module.decls if d.name == name)


def _composed(printed: str, program, user: str, times: int, point: str) -> lambdad.Program:
    """The printed program, ``total`` and ``user`` under →D ``times`` times (its definition
    shown is a free name there, so it is the printed one), and ``main = user point``."""
    definitions = [printed]
    for name in ("total", user):
        term = _value(program, name)
        for _ in range(times):
            term = forward_term(term)
        definitions.append(f"def {name} = {print_term(term)}")
    definitions.append(f"def main = {user} {point}")
    return lambdad.loads("\n".join(definitions), "composed.lam")


def _central(f, x: float, h: float = 1e-5) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("shown, user, x", CASES)
def test_forward_of_a_function_given_as_an_argument(program, shown, user, x):
    text = program.show(shown, forward=True)
    printed = lambdad.loads(text, "shown.lam")                  # it parses and type-checks
    assert printed.scheme(shown).type == forward_type(program.scheme(shown).type)
    comment = []  # the comment above the first definition, its lines joined
    for line in text.splitlines():
        if not line.startswith("-- "):
            break
        comment.append(line[3:].strip())
    header = " ".join(" ".join(comment).split())                 # at the type show prints
    assert header.startswith(f"{shown} : {print_scheme(printed.scheme(shown))} (→D of ")
    module = parse_module(text, "shown.lam")
    assert parse_module(print_module(module)) == module          # parse . print = id
    assert "grad f" not in text                                   # written out
    # →D(user) over the printed →D(shown), at (x, 1): the value and the derivative
    value, derivative = _composed(text, program, user, 1, f"({x}, 1)").run("main")
    runtime = program.jvp(user, x, 1.0)
    assert (value, derivative) == pytest.approx(runtime)
    assert derivative == pytest.approx(_central(lambda r: program.call(user, r), x),
                                       rel=1e-6)


def test_perturbation_confusion_through_an_argument(program):
    # confused x = d (\y -> x * y) 1 = x: the inner grad's perturbation of y and the outer
    # one of the captured x are different levels; mixing them would give 2
    text = program.show("d", forward=True)
    assert _composed(text, program, "confused", 1, "(1, 1)").run("main") == (1.0, 1.0)
    assert _composed(text, program, "ud", 1, "(3, 1)").run("main") == (18.0, 12.0)


@pytest.mark.parametrize("shown, user, x",
                         [c for c in CASES if c[0] in ("d", "dj", "dv", "dd", "dvl")])
def test_forward_again_over_the_printed_program(program, shown, user, x):
    # →D(→D(shown)): the printed program's vjp/jvp of `chi` differentiate the argument's
    # image, so forward mode writes them out in turn; (x, 1), (1, 0) gives u, u', u', u''
    once = program.show(shown, forward=True)
    twice = lambdad.loads(once, "once.lam").show(shown, forward=True)
    printed = lambdad.loads(twice, "twice.lam")
    assert printed.scheme(shown).type == forward_type(forward_type(
        program.scheme(shown).type))
    (value, first), (first_again, second) = _composed(
        twice, program, user, 2, f"(({x}, 1), (1, 0))").run("main")
    assert (value, first) == pytest.approx(program.jvp(user, x, 1.0))
    assert first_again == pytest.approx(first)
    assert second == pytest.approx(
        _central(lambda r: program.jvp(user, r, 1.0)[1], x), rel=1e-5)


def test_the_rule_on_a_marked_use():
    # the expansion leaves `grad f x` with f's type when f has no image; →D of it is one
    # vjp of chi = \y -> f^ (y, dx), pulled back along (1, 0) and (0, 1)
    term = parse_expr(r"\(f : R -> R) (x : R) -> grad (f : R -> R) x", "marked.lam")
    assert forward_term(term) == parse_expr(r"""
\(f : R * R -> R * R) (x : R * R) ->
  let x1 = fst x in let dx1 = snd x in let chi1 = \y1 -> f (y1, dx1) in
  let (w1, back1) = vjp chi1 x1 in (back1 (1, 0), back1 (0, 1))""")


def test_reverse_mode_refuses_at_the_use():
    source = "def d (f : R -> R) (x : R) : R =\n  3 * grad (\\z -> grad f z * z) x\n"
    program = lambdad.loads(source, "refused.lam")
    with pytest.raises(NoReverseImageError, match="polymorphic in its cotangent type") as caught:
        program.show("d", reverse=True)
    message = str(caught.value)
    assert "a function given as an argument" in message and "--forward" in message
    span = caught.value.span                                      # the inner use, of f
    assert (span.line, span.col) == (2, 19)
    # the marked use under ←D directly: the same error
    with pytest.raises(NoReverseImageError):
        backward_term(parse_expr(r"\(f : R -> R) x -> grad (f : R -> R) x"))


def test_an_unknown_type_is_a_located_error():
    program = lambdad.loads("def k f x = grad f x\n", "open.lam")
    with pytest.raises(DifferentiationError, match="without variables") as caught:
        program.show("k", forward=True)
    assert caught.value.span is not None


def test_an_annotated_use_run_by_forward_mode():
    # a use whose function carries its type is one →D writes out even when the program
    # runs: the numbers are those of the written-out program and of the levels
    program = lambdad.loads(
        "def total (xs : [R]) : R = fold (\\a b -> a + b) 0 xs\n"
        "def a x = grad ((\\y -> x * y * y) : R -> R) x\n"
        "def c (x : R) : R =\n"
        "  total (map (\\(g : R -> R) -> grad (g : R -> R) x) [\\y -> x * y * y, sin])\n",
        "annotated.lam")
    assert program.jvp("a", 3.0, 1.0) == pytest.approx((18.0, 12.0))
    value, derivative = program.jvp("c", 3.0, 1.0)
    assert derivative == pytest.approx(_central(lambda r: program.call("c", r), 3.0), rel=1e-6)


@pytest.mark.parametrize("shown, user, x", CASES)
def test_reverse_mode_at_run_time_specialises_to_the_function_given(shown, user, x,
                                                                    monkeypatch):
    # when the program runs, the closure applying `shown` is written out with `shown`'s λ
    # defined inside it, so the function it is given is known by its term: reverse mode
    # runs that program (no printed ←D exists for `shown` alone, see below)
    from lambdad import nesting

    written = []
    inline = nesting.inline_closures
    monkeypatch.setattr(nesting, "inline_closures",
                        lambda *args: written.append(1) or inline(*args))
    program = lambdad.loads(SOURCE, "arguments.lam")  # nothing written out yet
    gradient = program.grad(user, x)
    assert written
    assert gradient == pytest.approx(_central(lambda r: program.call(user, r), x), rel=1e-6)
