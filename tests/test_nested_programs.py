"""→D and ←D on the target language (AD.md section 9): the linear constructs have rules of
their own, the cotangent type is indexed by its ring (``d<K>``, with D(d<K>) = d<D(K)>), and
so every composition of the transformations is an ordinary target program — printed, parsed
again, type-checked at the transformed type and run.  Specifications: source in, program
and type out; then the numbers, against the run-time route.
"""

import math

import pytest

from lambdad.backward import backward_module, backward_term, backward_type
from lambdad.forward import forward_module, forward_term, forward_type
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr, parse_module, parse_type
from lambdad.printer import print_module, print_term, print_type
from lambdad.syntax import Term
from lambdad.typecheck import check_term, infer_module, infer_term, print_scheme

TRANSFORMS = {"→D": (forward_term, forward_type, forward_module),
              "←D": (backward_term, backward_type, backward_module)}


def assert_program(actual: Term, expected: str) -> None:
    assert actual == parse_expr(expected), (
        f"got:\n{print_term(actual)}\nexpected:\n{expected}")


# ---------------------------------------------------------------- each rule, each mode


@pytest.mark.parametrize("mode, source, expected", [
    # D(\a -o e) = \a -o D(e); D(g e) = D(g) D(e): a linear body is a term like any other
    ("→D", r"\g -> \a -o g a", r"\g -> \a -o g a"),
    ("←D", r"\g -> \a -o g a", r"\g -> \a -o g a"),
    # D(zero) = zero, D(e1 <+> e2) = D(e1) <+> D(e2), D(seed i) = seed i
    ("→D", r"\g -> \a -o g a <+> zero", r"\g -> \a -o g a <+> zero"),
    ("←D", r"\a -> seed 0 a <+> seed 1 a", r"\a -> seed 0 a <+> seed 1 a"),
    # the reals in a linear body get their images: here ∂(sin) * a, the chain rule again
    ("→D", r"\x g -> \a -o g (cos x * a)",
     r"""\x g -> \a -o g (let (v1, v1') = let (x, x') = x in (cos x, -sin x * x') in
                      let (a, a') = a in (v1 * a, a * v1' + v1 * a'))"""),
    ("←D", r"\x g -> \a -o g (2 * a)",
     r"""\x g -> \a -o g (let (v1, v1_) = (2, \a -o zero) in
                      let (a, a_) = a in (v1 * a, \a1 -o a_ (v1 * a1)))"""),
    # D(cotangent x e) = cotangent D(x) D(e)
    ("→D", r"\x -> cotangent (x, seed 0) (seed 0 1)",
     r"\x -> cotangent (x, seed 0) (seed 0 (1, 0))"),
    ("←D", r"\x -> cotangent (x, seed 0) (seed 0 1)",
     r"\x -> cotangent (x, seed 0) (seed 0 (1, \a -o zero))"),
])
def test_rules_of_the_linear_constructs(mode, source, expected):
    transform = TRANSFORMS[mode][0]
    assert_program(transform(parse_expr(source, "test.lam")), expected)


@pytest.mark.parametrize("source, mode, expected", [
    ("d", "→D", "d<R * R>"),
    ("d", "←D", "d<R * (R -o d)>"),
    ("R -o d", "→D", "R * R -o d<R * R>"),
    ("R -o d", "←D", "R * (R -o d) -o d<R * (R -o d)>"),
    ("d<R * R>", "→D", "d<(R * R) * (R * R)>"),
    ("d<R * R>", "←D", "d<(R * (R -o d)) * (R * (R -o d))>"),
])
def test_the_cotangent_type_is_indexed_by_its_ring(source, mode, expected):
    transform_type = TRANSFORMS[mode][1]
    assert print_type(transform_type(parse_type(source))) == expected


@pytest.mark.parametrize("mode", ["→D", "←D"])
def test_each_linear_rule_preserves_types(mode):
    transform, transform_type, _ = TRANSFORMS[mode]
    for source in [r"\g -> \a -o g a <+> zero", r"\x -> cotangent (x, seed 0) (seed 0 1)",
                   r"\x (g : R -o d) -> \a -o g (x * a)"]:
        term = parse_expr(source, "test.lam")
        image = transform(term)
        # the image has the transformed type (it may be more general in the rings)
        check_term(image, transform_type(infer_term(term).type))


# ---------------------------------------------------------------- compositions


# A gradient as a target program: ←D of f, seeded, read off.  Its compositions with →D
# and ←D are Hessian programs.
GRADIENT = r"""
def f x y = x * y * y + sin x
def g p =
  let x = ((fst p, seed 0), (snd p, seed 1)) in
  let (v, v_) = f (fst x) (snd x) in
  cotangent x (v_ 1)
"""

def _hessian(x, y):
    """The exact Hessian of f: [[-sin x, 2y], [2y, 2x]]."""
    return [[-math.sin(x), 2 * y], [2 * y, 2 * x]]


def _with_reverse_f(program: str, f: str = "def f x y = x * y * y + sin x") -> str:
    """``program`` whose definition ``f`` is replaced by its ←D image."""
    reverse_f = print_module(backward_module(parse_module(f)))
    return reverse_f + program.replace(f, "")


def _transformed_gradient(outer: str) -> str:
    """The printed program of the outer transformation of ←D(f) with its gradient g."""
    module = parse_module(_with_reverse_f(GRADIENT), "gradient.lam")
    return print_module(TRANSFORMS[outer][2](module))


@pytest.mark.parametrize("outer", ["→D", "←D"])
def test_compositions_over_reverse_print_parse_check_and_run(outer):
    text = _transformed_gradient(outer)
    module = parse_module(text, "nested.lam")
    assert print_module(module) == text                    # printed programs round-trip
    typing = infer_module(module)
    assert print_scheme(typing.schemes["g"]) == print_type(
        TRANSFORMS[outer][1](parse_type("R * R -> R * R")))
    hessian = _hessian(1.5, 2.0)
    if outer == "→D":
        # forward-over-reverse: one run of the gradient in dual numbers gives H·v
        g = Interpreter().evaluate_module(module)["g"]
        for i, direction in enumerate([(1.0, 0.0), (0.0, 1.0)]):
            (gx, hx), (gy, hy) = g(((1.5, direction[0]), (2.0, direction[1])))
            assert (gx, gy) == pytest.approx((4.0 + math.cos(1.5), 6.0))
            assert [hx, hy] == pytest.approx([hessian[0][i], hessian[1][i]])
    else:
        # reverse-over-reverse: the outer level seeds, reads off the gradient of each
        # component of the inner gradient: the rows of the Hessian
        rows = text + "".join(
            f"\ndef row{i} p = let x = ((fst p, seed 0), (snd p, seed 1)) in "
            f"let (v, v_) = {part} (g x) in cotangent x (v_ 1)\n"
            for i, part in enumerate(["fst", "snd"]))
        module = parse_module(rows, "rows.lam")
        infer_module(module)
        values = Interpreter().evaluate_module(module)
        for i in range(2):
            assert list(values[f"row{i}"]((1.5, 2.0))) == pytest.approx(hessian[i])


@pytest.mark.parametrize("strategy", ["factored", "naive"])
def test_a_ring_of_pairs_accumulates_with_sharing(strategy):
    # y is used three times: its backpropagator receives three dual cotangents, summed in
    # the ring R * R before its body runs once (factored) or run per use (naive)
    source = r"""
def f x = let y = x * x in y * y + y
def g x = let s = (x, seed 0) in let (v, v_) = f s in cotangent s (v_ 1)
"""
    text = print_module(forward_module(parse_module(
        _with_reverse_f(source, "def f x = let y = x * x in y * y + y"))))
    values = Interpreter(strategy=strategy).evaluate_module(parse_module(text))
    gradient, second = values["g"]((3.0, 1.0))
    # f = x^4 + x^2: f' = 4x^3 + 2x = 114, f'' = 12x^2 + 2 = 110
    assert (gradient, second) == pytest.approx((114.0, 110.0))


# ---------------------------------------------------------------- show of nested programs

import lambdad  # noqa: E402
from lambdad.errors import DifferentiationError  # noqa: E402

NESTED = r"""
def cube (x : R) : R = x * x * x
def second x = grad (\y -> x * y * y) x
def confusion x = x * grad (\y -> x + y) 1
def rof (p : R * R) : R = snd (jvp (\q -> let (x, y) = q in x * x * y + sin y) p (1, 0))
def fof x = snd (jvp (\y -> snd (jvp cube y 1)) x 1)
def pulled x = snd (vjp (\y -> (y * y, sin y)) x) (1, 2)
def captured x = let k = 3 * x in grad (\y -> k * y * y + cube y) x
def hv (p : R * R) : R = let (x, y) = p in fst (hvp (\q -> let (a, b) = q in a * a * b) (x, y) (1, 1))
def outs (p : R * R) : [R] = let (x, y) = p in [x * y, sin x, y * y * x]
def jr (p : R * R) : R = sum (map (\r -> fst r * snd r) (jacrev outs p))
def jf (p : R * R) : R = sum (map (\r -> fst r + 2 * snd r) (jacfwd outs p))
def listed (p : [R] * R) : [R] = let (xs, c) = p in [c * sum (map (\x -> x * x) xs), head xs * c]
def jfl (p : [R] * R) : R = sum (map (\r -> let (xs, c) = r in sum xs * c) (jacfwd listed p))
def tangentf x = snd (jvp (\a -> \y -> a * y * sin y) x 1) 3
def tangentg x = let t = snd (jvp (\a -> \y -> a * a * sin y) 2 1) in grad t x + t x
def localk x = let k = \g -> grad g x in k (\y -> x * sin y) + k (\y -> y * y)
def tangentp (x : R) : R =
  let (h, k) = snd (jvp (\a -> (\y -> a * a * y, [\z -> z * a])) x 1) in h 2 + head k 3
"""

# name, point, the composition it prints under --forward / --reverse
CASES = [("second", 3.0), ("confusion", 1.0), ("rof", (1.0, 2.0)), ("fof", 2.0),
         ("pulled", 0.5), ("captured", 2.0), ("hv", (1.0, 2.0)), ("jr", (1.5, 2.0)),
         ("jf", (1.5, 2.0)), ("jfl", ([1.0, 2.0, 3.0], 0.5)), ("tangentf", 2.0),
         ("tangentg", 0.5), ("tangentp", 1.5), ("localk", 1.0)]


def _flat(value):
    """The reals of a nest of tuples, left to right."""
    if isinstance(value, (tuple, list)):
        return [r for item in value for r in _flat(item)]
    return [value]


@pytest.fixture(scope="module")
def nested_program():
    return lambdad.loads(NESTED, "nested.lam")


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name, point", CASES)
def test_show_prints_nested_programs_that_parse_check_and_run(nested_program, name, point,
                                                              mode):
    program = nested_program
    text = program.show(name, forward=mode == "forward", reverse=mode == "reverse",
                        at=point)
    printed = lambdad.loads(text, "shown.lam")          # it parses and type-checks
    transform_type = forward_type if mode == "forward" else backward_type
    assert print_scheme(printed.scheme(name)) == print_type(
        transform_type(program.scheme(name).type))      # at the transformed type
    module = parse_module(text, "shown.lam")
    assert parse_module(print_module(module)) == module  # parse . print = id
    value, gradient = printed.run("main")
    expected = program.value_and_grad(name, point, mode=mode)
    assert _flat((value, gradient)) == pytest.approx(_flat(expected))  # the run-time route's


def test_show_of_second_derivative_golden(nested_program):
    # ←D over ←D: the inner level's reals are the outer level's, so its ring is ←D(R)
    text = nested_program.show("second", reverse=True)
    assert text.splitlines()[0] == "-- second : R * (R -o d) -> R * (R -o d)    (←D of R -> R)"
    assert "cotangent x1 (v2_ (1, \\a -o zero))" in text
    forward = nested_program.show("second", forward=True)
    assert "cotangent x1 (v2_ (1, 0))" in forward


def test_perturbation_confusion_printed_is_one(nested_program):
    # the inner level's x is a constant (x, \a -o zero): its derivative does not leak
    text = nested_program.show("confusion", reverse=True, at=1.0)
    assert lambdad.loads(text).run("main") == (1.0, 1.0)


@pytest.mark.parametrize("source, message", [
    ("def f (g : R -> R) x = grad g x", "a function given as an argument"),
    ("def f (x : R) = fst (vjp (\\y -> \\z -> y * z) x) 2", "cotangent of a function type"),
    ("def f (x : R) = snd (jvp (\\y -> \\(g : R -> R) -> g y) x 1) sin",
     "argument holds functions"),
])
def test_what_show_refuses_is_a_located_error(source, message):
    program = lambdad.loads(source, "refused.lam")
    with pytest.raises(DifferentiationError, match=message) as caught:
        program.show("f", reverse=True)
    assert caught.value.span is not None


def test_a_function_typed_input_is_a_located_error():
    program = lambdad.loads("def f (x : R) = grad (\\g -> g x) sin", "fun.lam")
    with pytest.raises(lambdad.LambdadError, match="function-typed input") as caught:
        program.show("f", reverse=True)
    assert caught.value.span is not None


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_lists_are_seeded_when_the_program_runs(mode):
    # seed (k + i): the reals of a list are numbered by their position, after the reals
    # before the list; here the prelude's hessian (hvp of grad, inlined) over a list
    program = lambdad.loads("def f (xs : [R]) : R = sum (map (\\x -> x * x * x) xs)\n"
                            "def g (p : R * [R * R]) : R =\n"
                            "  let (a, ys) = grad (\\q -> let (b, zs) = q in\n"
                            "    b * sum (map (\\z -> fst z * snd z) zs)) p in\n"
                            "  a * sum (map (\\z -> fst z + snd z) ys)\n"
                            "def h xs = sum (map sum (hessian f xs))\n"
                            "def k (p : [[R]] * [R * [R]]) : R =\n"
                            "  let (m, n) = grad (\\q -> let (a, b) = q in\n"
                            "    sum (map (\\r -> sum (map (\\x -> x * x * x) r)) a)\n"
                            "    * sum (map (\\z -> fst z * sum (snd z)) b)) p in\n"
                            "  sum (map sum m) + sum (map (\\z -> fst z * sum (snd z)) n)",
                            "lists.lam")
    for name, point in [("g", (2.0, [(1.0, 2.0), (3.0, 4.0)])), ("h", [1.0, 2.0, 3.0]),
                        ("k", ([[1.0, 2.0], [], [3.0]], [(0.5, [1.0]), (2.0, [2.0, 0.5])]))]:
        text = program.show(name, forward=mode == "forward", reverse=mode == "reverse",
                            at=point)
        assert "seed (" in text
        value, gradient = lambdad.loads(text).run("main")
        expected = program.value_and_grad(name, point, mode=mode)
        assert _flat((value, gradient)) == pytest.approx(_flat(expected))


def test_forward_over_reverse_golden():
    # source in, printed program and type out: →D of the expanded `grad` — the inner
    # level's backpropagator y_ now takes dual numbers (a, a'), and the outer tangent of
    # y * y appears inside the inner linear body
    program = lambdad.loads("def twice x = grad (\\y -> y * y) x\n", "twice.lam")
    assert program.show("twice", forward=True) == """\
-- twice : R * R -> R * R    (→D of R -> R)
def twice x =
  let x1 = (x, seed 0) in
  let (_, v1_) =
    (\\y ->
       let (y, y_) = y in
       let (y, y') = y in
       ((y * y, y * y' + y * y'),
        \\a -o
          let (a, a') = a in
          y_ (y * a, a * y' + y * a') <+> y_ (y * a, a * y' + y * a')))
      x1 in
  cotangent x1 (v1_ (1, 0))
"""
    shown = lambdad.loads(program.show("twice", forward=True, at=3.0))
    assert print_scheme(shown.scheme("twice")) == "R * R -> R * R"
    assert shown.run("main") == (6.0, 2.0)
