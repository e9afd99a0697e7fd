"""Bad input never crashes the tool; deep programs run without recursion limits."""

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lambdad
from conftest import PROGRAMS
from lambdad.errors import LambdadError

SEEDS = [p.read_text() for p in sorted(PROGRAMS.glob("*.lam"))]


def load_and_run(text):
    """Load and run ``text``; only located lambdad errors may escape."""
    try:
        prog = lambdad.loads(text, "fuzz.lam")
        if "main" in prog.decls:
            prog.runtime.interpreter.timeout = 2.0
            prog.run()
    except LambdadError as error:
        if error.span is not None:
            assert error.span.line >= 1 and error.span.col >= 1
        return error
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_programs_give_located_errors(data):
    text = data.draw(st.sampled_from(SEEDS))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["delete", "insert", "truncate", "swap"]))
        if action == "delete":
            text = text[:position] + text[position + data.draw(st.integers(1, 5)):]
        elif action == "insert":
            text = text[:position] + data.draw(st.sampled_from(
                ["(", ")", "[", "]", ",", "\\", "->", "let", "in", "1", "x", "+", "^", "true",
                 "if", "then", "grad", "map", "\n", "--", "\u03bb", "\u2295", "@", "\x00"])) + text[position:]
        elif action == "truncate":
            text = text[:position]
        else:
            other = data.draw(st.integers(0, len(text)))
            a, b = sorted((position, other))
            text = text[:a] + text[b:] + text[a:b]
    load_and_run(text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_random_text_gives_located_errors(text):
    load_and_run(text)


def test_errors_inside_every_stage_are_located():
    cases = {
        "def f = (1 +": "parse error",
        "def f = 1 + true": "type error",
        "def main = zip [1] [1, 2]": "runtime error",
        "def main = range (0 - 1)": "runtime error",
        "def main = 1 / (1 - 1)": "runtime error",
        "def f x = x\ndef f y = y": "already defined",
        "def main = undefined_name": "unknown name",
    }
    for text, expected in cases.items():
        error = load_and_run(text)
        assert error is not None, text
        rendered = lambdad.render(error, {"fuzz.lam": text})
        assert expected in rendered, rendered
        assert rendered.startswith("fuzz.lam:"), rendered


def test_nested_parentheses_5000(lambdad_cli, tmp_path):
    path = tmp_path / "deep.lam"
    path.write_text("def main = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    result = lambdad_cli("run", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_deep_nested_arithmetic_and_its_gradient(tmp_path):
    depth = 5000
    text = "def f (x : R) : R = " + "(x + " * depth + "x" + ")" * depth + "\n"
    prog = lambdad.loads(text)
    assert prog.call("f", 1.0) == depth + 1
    assert prog.grad("f", 1.0) == depth + 1
    assert prog.grad("f", 1.0, mode="forward") == depth + 1


def test_let_chain_3000(lambdad_cli, tmp_path):
    lines = ["def main ="] + [f"  let x{k} = x{k - 1} * 1.0001 in" if k else "  let x0 = 1 in"
                              for k in range(3000)] + ["  x2999"]
    path = tmp_path / "chain.lam"
    path.write_text("\n".join(lines) + "\n")
    result = lambdad_cli("run", str(path))
    assert result.returncode == 0, result.stderr
    assert abs(float(result.stdout) - 1.0001 ** 2999) < 1e-9


def test_fold_over_a_million_elements():
    prog = lambdad.loads("def main = fold (\\acc x -> acc + x) 0 (range 1000000)\n")
    assert prog.run() == 999999 * 1000000 / 2


def test_gradient_of_fold_over_a_hundred_thousand_elements():
    prog = lambdad.loads("def f (w : R) : R = fold (\\acc x -> acc + w * x) 0 (range 100000)\n")
    assert prog.grad("f", 1.0) == 99999 * 100000 / 2


def test_chain_of_definitions_calling_each_other():
    lines = ["def f0 (x : R) : R = x + 1"]
    lines += [f"def f{k} (x : R) : R = f{k - 1} x + 1" for k in range(1, 3000)]
    prog = lambdad.loads("\n".join(lines) + "\n")
    assert prog.call("f2999", 0.0) == 3000.0


# Every limit holds in every route (QUALITY.md "Reliability"), checked on the real command:
# the bound 2·S + 1 s includes the start of the process (over a second on a busy machine).
HUGE_LOOP = ("def f (x : R) : R = fold (\\a i -> a + x * i) 0 (range 100000000)\n"
             "def main = length (range 100000000)\n")


@pytest.mark.parametrize("command", [["run"], ["hvp", "f", "--at", "1", "--dir", "1"]])
def test_a_time_limit_stops_the_command_within_twice_it_and_a_second(lambdad_cli, tmp_path,
                                                                     command):
    path = tmp_path / "huge.lam"
    path.write_text(HUGE_LOOP)
    started = time.monotonic()
    result = lambdad_cli(command[0], str(path), *command[1:], "--timeout", "2")
    elapsed = time.monotonic() - started
    assert result.returncode == 1 and result.stdout == ""
    assert "resource error: stopped after the time limit of 2 s (--timeout)" in result.stderr
    assert elapsed < 2 * 2 + 1, elapsed


def test_a_run_that_would_exhaust_memory_stops_with_a_located_error(lambdad_cli, tmp_path):
    # hessian of a fold over `range 1e8` was killed by the kernel at ~80 s (out of memory).
    path = tmp_path / "huge.lam"
    path.write_text(HUGE_LOOP)
    started = time.monotonic()
    result = lambdad_cli("hessian", str(path), "f", "--at", "1", "--max-memory", "300M")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(
        f"{path}:1:49: resource error: stopped at the memory limit of 300 MB (--max-memory)")
    assert time.monotonic() - started < 15
