"""Every phase of a command runs under its limits (--timeout: loading, parsing, type checking,
evaluating points, running, printing; --max-steps: every evaluation, points included), and
what grows exponentially -- types and values that share structure -- prints in bounded size,
abbreviated, saying so."""

import time

import pytest

import lambdad
from lambdad import cli

def powers(n: int) -> str:
    """Definitions p0 ... p{n-1}, each type the square of the one before: p_i's type has
    2^(2^i) leaves written out, shared in memory."""
    return "".join(["def p0 x = (x, x)\n"]
                   + [f"def p{i} x = p{i - 1} (p{i - 1} x)\n" for i in range(1, n)])


POWERS = powers(5)  # p4's type has 2^16 leaves: within the type checker's bound


def run_cli(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def big_list_program(tmp_path, items: int):
    file = tmp_path / "big.lam"
    file.write_text("def main = [" + ", ".join(str(i) for i in range(items)) + "]\n"
                    "def f (x : R) : R = x * x\n")
    return str(file)


@pytest.mark.parametrize("command", [["run"], ["check-types"], ["grad", "f", "--at", "1"],
                                     ["check"]])
def test_the_time_limit_covers_parsing_and_type_checking(tmp_path, capsys, command):
    file = big_list_program(tmp_path, 100_000)
    started = time.monotonic()
    status, out, err = run_cli(capsys, command[0], file, *command[1:], "--timeout", "0.2")
    assert status == 1, (out, err)
    assert "time limit of 0.2 s" in err and out == ""
    assert time.monotonic() - started < 5


@pytest.mark.long
def test_a_million_element_list_stops_at_its_time_limit(tmp_path, capsys):
    file = big_list_program(tmp_path, 1_000_000)
    started = time.monotonic()
    status, _, err = run_cli(capsys, "run", file, "--timeout", "2")
    assert status == 1 and "time limit" in err
    assert time.monotonic() - started < 6


def test_the_step_limit_covers_the_evaluation_of_points(tmp_path, capsys):
    file = tmp_path / "f.lam"
    file.write_text("def f (x : R) : R = x * x\n")
    point = "fold (\\a i -> a + i) 0 (range 10000)"
    for command in (["grad", str(file), "f", "--at", point],
                    ["jvp", str(file), "f", "--at", point, "--dir", "1"],
                    ["check", str(file), "f", "--at", point]):
        status, out, err = run_cli(capsys, *command, "--max-steps", "100")
        assert status != 0 and "stopped after 100 steps" in err, (command, out, err)
        assert "ok" not in out


def test_exponentially_large_types_print_abbreviated(tmp_path, capsys):
    file = tmp_path / "powers.lam"
    file.write_text(POWERS)
    started = time.monotonic()
    status, out, err = run_cli(capsys, "check-types", str(file))
    assert status == 0, err
    assert time.monotonic() - started < 10
    lines = out.splitlines()
    assert lines[0] == "p0 : a -> a * a"
    assert len(out) < 20_000
    assert lines[-1].startswith("p4 : a -> (((") and lines[-1].endswith(
        "… [type abbreviated: it has 131073 parts]")


@pytest.mark.parametrize("count", [6, 40])
def test_a_type_beyond_the_type_checkers_bound_is_a_located_error(tmp_path, capsys, count):
    file = tmp_path / "powers.lam"
    file.write_text(powers(count))
    started = time.monotonic()
    status, out, err = run_cli(capsys, "check-types", str(file))
    assert time.monotonic() - started < 10
    assert status == 1 and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"{file}:6:12: type error: this expression's type is too large")
    assert "more than 1,000,000 parts" in first and len(err) < 2_000


def test_a_type_error_about_an_exponential_type_is_bounded(tmp_path, capsys):
    file = tmp_path / "powers.lam"
    file.write_text(POWERS + "def main = p4 1 + 1\n")
    status, out, err = run_cli(capsys, "run", str(file))
    assert status == 1 and "type error" in err and "type abbreviated" in err
    assert len(err) < 10_000


def test_an_exponentially_large_value_prints_abbreviated(tmp_path, capsys):
    file = tmp_path / "powers.lam"
    file.write_text(POWERS + "def main = p4 1\n")
    status, out, err = run_cli(capsys, "run", str(file))
    assert status == 0, err
    assert out.startswith("((((((") and out.rstrip().endswith("… [value abbreviated]")
    assert len(out) < 200_000


def test_small_types_and_values_print_in_full():
    program = lambdad.loads("def main = ([1, 2, 3], (true, 4))\ndef f x = (x, [x])")
    assert program.types() == [("main", "[R] * Bool * R"), ("f", "a -> a * [a]")]
    assert lambdad.values.format_value(program.run_raw()) == "([1, 2, 3], true, 4)"
