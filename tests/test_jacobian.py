"""Jacobians (in the language: jacfwd, jacrev; API and CLI: Program.jacobian, `lambdad
jacobian`) and differentiating with respect to chosen parameters (--wrt, wrt=)."""

import json
import math

import pytest

import lambdad
from lambdad import cli, gradcheck
from lambdad.errors import UsageError

SOURCE = """
def f (a : R) (xs : [R]) : [R] = map (\\x -> a * x * x) xs ++ [sin a]
def g (p : R * R) : R * [R] = let (x, y) = p in (x * y, [x, y, x + y])
def h (x : R) (y : R) (z : R) : R = x * y * y + exp z
def square_all (xs : [R]) : [R] = map (\\x -> x * x) xs
"""


@pytest.fixture(scope="module")
def program():
    return lambdad.loads(SOURCE, "jac.lam")


def expected_f(a, xs):
    """Rows: outputs a x_i^2 and sin a; columns: a, then each x_i."""
    rows = [[x * x] + [2 * a * x if j == i else 0.0 for j in range(len(xs))]
            for i, x in enumerate(xs)]
    return rows + [[math.cos(a)] + [0.0] * len(xs)]


@pytest.mark.parametrize("mode", [None, "forward", "reverse"])
def test_jacobian_of_a_list_valued_function_in_every_mode(program, mode):
    result = program.jacobian("f", (2, [1, 3]), mode=mode)
    assert result.value == pytest.approx([2, 18, math.sin(2)])
    for row, expected in zip(result.matrix, expected_f(2, [1, 3]), strict=True):
        assert row == pytest.approx(expected)
    assert result.jacobian == [(1, [4, 0]), (9, [0, 12]), (pytest.approx(math.cos(2)), [0, 0])]
    assert result.inputs == ["a", "xs[0]", "xs[1]"]
    assert result.outputs == ["f[0]", "f[1]", "f[2]"]
    assert result.mode == (mode or "forward")


def test_the_default_mode_is_the_cheaper_one(program):
    # 2 inputs, 4 outputs: forward (2 runs); 3 inputs, 1 output: reverse (1 backward pass)
    assert program.jacobian("g", (2, 3)).mode == "forward"
    assert program.jacobian("h", (1, 2, 3)).mode == "reverse"
    assert program.jacobian("square_all", [1, 2]).mode == "forward"  # a tie: no tape


def test_jacobian_of_a_structured_result(program):
    result = program.jacobian("g", (2, 3), mode="reverse")
    assert result.value == (6, [2, 3, 5])
    assert result.jacobian == ((3, 2), [(1, 0), (0, 1), (1, 1)])
    assert result.outputs == ["g.0", "g.1[0]", "g.1[1]", "g.1[2]"]


def test_a_real_result_has_its_gradient_as_jacobian(program):
    result = program.jacobian("h", (1, 2, 3))
    assert result.jacobian == program.grad("h", (1, 2, 3))


def test_jacfwd_and_jacrev_in_the_language():
    program = lambdad.loads("""
def f (p : R * R) : [R] = let (x, y) = p in [x * y, x + y, sin x]
def main = (jacfwd f (2, 3), jacrev f (2, 3), jacrev (\\xs -> map (\\x -> x * x) xs) [1, 2])
""")
    fwd, rev, squares = program.run()  # a triple, as written
    expected = [(3, 2), (1, 1), (pytest.approx(math.cos(2)), 0)]
    assert fwd == expected and rev == expected
    assert squares == [[2, 0], [0, 4]]
    assert program.types()[-1] == ("main", "[R * R] * [R * R] * [[R]]")


def test_jacobian_errors(program):
    with pytest.raises(UsageError, match="unknown mode"):
        program.jacobian("f", (2, [1]), mode="sideways")
    bad = lambdad.loads("def b (x : R) : Bool = x > 0")
    with pytest.raises(UsageError, match="a Jacobian needs a result built from R"):
        bad.jacobian("b", 1)


# ---------------------------------------------------------------- --wrt / wrt=


def test_grad_with_respect_to_chosen_parameters(program):
    full = program.grad("h", (1, 2, 3))  # a triple: one gradient per parameter
    assert len(full) == 3
    for mode in ("reverse", "forward"):
        assert program.grad("h", (1, 2, 3), mode=mode, wrt=["y"]) == pytest.approx(full[1])
        assert program.grad("h", (1, 2, 3), mode=mode, wrt=["z", "x"]) == pytest.approx(
            (full[2], full[0]))
    value, gradient = program.value_and_grad("h", (1, 2, 3), wrt=["x"])
    assert value == pytest.approx(4 + math.exp(3)) and gradient == 4


def test_jacobian_with_respect_to_one_parameter(program):
    result = program.jacobian("f", (2, [1, 3]), wrt=["xs"])
    assert result.inputs == ["xs[0]", "xs[1]"]
    assert result.matrix == [[4, 0], [0, 12], [0, 0]]


def test_check_with_respect_to_one_parameter(program):
    report = gradcheck.check(program, ["h"], point=(1, 2, 3), wrt=["y"])
    assert report.ok
    rows = report.functions[0].checks[0].rows
    assert [row.path for row in rows] == ["y"]


@pytest.mark.parametrize("wrt, message", [
    (["w"], "`w` is not a parameter of `h`"), (["x", "x"], "`x` is given twice")])
def test_wrt_errors(program, wrt, message):
    with pytest.raises(UsageError, match=message):
        program.grad("h", (1, 2, 3), wrt=wrt)


def test_wrt_needs_a_point_for_check(program):
    with pytest.raises(UsageError, match="--wrt needs one function and a point"):
        gradcheck.check(program, ["h"], wrt=["y"])


# ---------------------------------------------------------------- the command line


def lambdad_main(capsys, *args):
    status = cli.main([*args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out


@pytest.fixture
def source_file(tmp_path):
    path = tmp_path / "jac.lam"
    path.write_text(SOURCE, encoding="utf-8")
    return str(path)


def test_cli_jacobian_table(capsys, source_file):
    status, out = lambdad_main(capsys, "jacobian", source_file, "f", "--at", "2, [1, 3]")
    assert status == 0
    assert out.splitlines() == [
        "value: [2, 18, 0.9092974268256817]",
        "jacobian (3 outputs x 3 inputs, forward mode, the cheaper for these sizes):",
        "                          a  xs[0]  xs[1]",
        "  f[0]                    1      4      0",
        "  f[1]                    9      0     12",
        "  f[2]  -0.4161468365471424      0      0",
    ]


def test_cli_jacobian_json_mode_and_wrt(capsys, source_file):
    status, out = lambdad_main(capsys, "jacobian", source_file, "f", "--at", "2, [1, 3]",
                               "--mode", "reverse", "--wrt", "a", "--json")
    assert status == 0
    data = json.loads(out)
    assert data["mode"] == "reverse" and data["inputs"] == ["a"]
    assert data["matrix"] == [[1], [9], [pytest.approx(math.cos(2))]]
    assert data["jacobian"] == [1, 9, pytest.approx(math.cos(2))]


def test_cli_grad_and_check_with_wrt(capsys, source_file):
    status, out = lambdad_main(capsys, "grad", source_file, "h", "--at", "1,2,3", "--wrt",
                               "z,y", "--mode", "both")
    assert status == 0
    lines = out.splitlines()
    assert lines[1].endswith(f"({math.exp(3)!r}, 4)") and lines[2].endswith(
        f"({math.exp(3)!r}, 4)")
    status, out = lambdad_main(capsys, "check", source_file, "h", "--at", "1,2,3", "--wrt", "y")
    assert status == 0 and out.strip().endswith("agree (error <= rtol 1e-05)")


def test_hessian_with_respect_to_one_parameter(program):
    value, gradient, rows = program.hessian("h", (1, 2, 3), wrt=["y"])
    assert gradient == 4 and rows == [2]  # d2/dy2 of x y^2 at x = 1
    value, gradient, rows = program.hessian("h", (1, 2, 3), wrt=["x", "z"])
    assert rows == [(0, 0), (0, pytest.approx(math.exp(3)))]


def test_jacobians_in_the_language_can_be_differentiated():
    program = lambdad.loads("""
def f (p : R * R) : [R] = let (x, y) = p in [x * x * y, sin x]
def by_rev (x : R) : R = fst (head (jacrev f (x, 2)))
def by_fwd (x : R) : R = fst (head (jacfwd f (x, 2)))
""")
    for name in ("by_rev", "by_fwd"):  # d/dx of 2 x y at y = 2
        for mode in ("reverse", "forward"):
            assert program.value_and_grad(name, 3, mode=mode) == (12, 4)
