"""Ordinary bad input never reaches an internal error (exit 3): every option of every command
given garbage exits 0, 1 or 2 with a message, never a traceback.  A fast subset runs by
default; ``python -m pytest --long`` runs the whole sweep."""

import io
import subprocess
import sys

import pytest

from conftest import PROGRAMS, ROOT
from lambdad import cli

PROGRAM = str(PROGRAMS / "baydin.lam")

# A valid command line for each command, to which one option at a time is given garbage.
VALID = {
    "run": [PROGRAM],
    "check-types": [PROGRAM],
    "grad": [PROGRAM, "f", "--at", "2,5"],
    "jvp": [PROGRAM, "f", "--at", "2,5", "--dir", "1,0"],
    "hessian": [PROGRAM, "f", "--at", "2,5"],
    "hvp": [PROGRAM, "f", "--at", "2,5", "--dir", "1,0"],
    "show": [PROGRAM, "f", "--backward"],
    "repl": [PROGRAM],
    "trace": [PROGRAM, "f", "--at", "2,5"],
    "graph": [PROGRAM, "f", "--at", "2,5"],
    "check": [PROGRAM, "f", "--at", "2,5"],
    "jacobian": [PROGRAM, "f", "--at", "2,5"],
    "plot": [str(PROGRAMS / "combinators.lam"), "wave", "--from", "-1", "--to", "1",
             "--samples", "5"],
    "fuzz": ["--programs", "1"],
}

# Garbage a user may type by mistake (huge and extreme numbers: see EXTREME below).
GARBAGE = ["", "--", "-", "-1", "0", "nan", "inf", "-inf", "1e309", "1e300", "x", "\x00",
           "\x1b[2J", "é", "(", "1,", ",", "[", "10^400", "1e308*10", " ", "'", "\\", "/",
           "/dev/null", "/dev/zero", "--at", "2,5,", "0x10", "1" * 5000]


def subcommands():
    """Each command's name and argparse parser."""
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices.items())


def option_cases():
    """(command, option or positional index, whether it takes a value) for every argument."""
    cases = []
    for name, parser in subcommands():
        for action in parser._actions:
            if action.dest in ("help", "handler"):
                continue
            if action.option_strings:
                cases.append((name, action.option_strings[-1], action.nargs != 0))
            else:
                cases.append((name, action.dest, True))
    return cases


def command_line(command, option, value):
    """The valid command line of ``command`` with ``option`` (a flag, or the dest of a
    positional) given ``value``."""
    argv = list(VALID[command])
    positionals = [a.dest for a in dict(subcommands())[command]._actions
                   if not a.option_strings and a.dest not in ("help",)]
    if option.startswith("-"):
        if option in argv:
            index = argv.index(option)
            del argv[index:index + 2]
        return [command, *argv, option, value] if value is not None else [command, *argv, option]
    index = positionals.index(option)
    if index < len(argv) and not argv[index].startswith("-"):
        argv[index] = value
    else:
        argv.insert(index, value)
    return [command, *argv]


def run_in_process(argv, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(":quit\n"))
    monkeypatch.delenv("LAMBDAD_DEBUG", raising=False)
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.err


def check_garbage(command, option, takes_value, values, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    for value in values if takes_value else [None]:
        argv = command_line(command, option, value)
        status, err = run_in_process(argv, monkeypatch, capsys)
        assert status in (0, 1, 2), (argv, err)
        assert "internal error" not in err and "Traceback" not in err, (argv, err)


CASES = option_cases()


@pytest.mark.parametrize("command, option, takes_value", CASES,
                         ids=[f"{c}-{o}" for c, o, _ in CASES])
def test_garbage_in_every_option_fast(command, option, takes_value, monkeypatch, capsys,
                                      tmp_path):
    # A different pair of garbage values for each argument keeps the default run short
    # while the sweep as a whole still uses every value.
    start = CASES.index((command, option, takes_value)) * 2 % len(GARBAGE)
    values = [GARBAGE[start], GARBAGE[(start + 1) % len(GARBAGE)], "--", "nan"]
    check_garbage(command, option, takes_value, values, monkeypatch, capsys, tmp_path)


@pytest.mark.long
@pytest.mark.parametrize("command, option, takes_value", CASES,
                         ids=[f"{c}-{o}" for c, o, _ in CASES])
def test_garbage_in_every_option_long(command, option, takes_value, monkeypatch, capsys,
                                      tmp_path):
    check_garbage(command, option, takes_value, GARBAGE, monkeypatch, capsys, tmp_path)


# ---------------------------------------------------------------- the reported inputs

@pytest.mark.parametrize("argv", [
    ["grad", PROGRAM, "f", "--at", "--"],
    ["grad", PROGRAM, "f", "--at=--"],
    ["jvp", PROGRAM, "f", "--at", "2,5", "--dir", "--"],
    *(["grad", PROGRAM, "f", "--at", "2,5", "--timeout", t]
      for t in ("inf", "1e300", "-1", "nan", "0")),
    ["check", PROGRAM, "f", "--eps", "0"],
    ["check", PROGRAM, "f", "--at", "2,5", "--eps", "1e-300"],
    ["graph", PROGRAM, "f", "--at", "2"],
    ["trace", PROGRAM, "f", "--at", "2", "--mode", "reverse"],
    ["check", PROGRAM, "f", "--rtol", "nan"],
    ["show", PROGRAM, "f", "--backward", "--at", "1e308*10,1"],
    ["grad", PROGRAM, "f", "--at", "1e308*10,1"],
    ["run", "/dev/zero"],
    ["run", "bad\x00name.lam"],
], ids=lambda argv: " ".join(argv[2:] if len(argv) > 2 else argv))
def test_reported_bad_inputs_are_usage_errors(argv, monkeypatch, capsys):
    status, err = run_in_process(argv, monkeypatch, capsys)
    assert status == 2, err
    assert "error" in err and "internal error" not in err


@pytest.mark.parametrize("command", ["graph", "trace"])
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_trace_of_a_partial_application_says_what_is_missing(command, mode, monkeypatch,
                                                              capsys):
    # `f` takes two reals: at one, its result is a function (before: an unlocated
    # "differentiation error" in reverse mode, a table of nothing in forward mode)
    status, err = run_in_process([command, PROGRAM, "f", "--at", "2", "--mode", mode],
                                 monkeypatch, capsys)
    assert status == 2
    assert err == ("usage error: a trace needs a function returning reals (R, pairs and lists "
                   "of them); `f` returns R -> R: give it every argument\n")


@pytest.mark.parametrize("output, reason", [
    ("missing/graph.dot", "No such file or directory"),
    ("folder.dot", "Is a directory"),
])
def test_graph_output_that_cannot_be_written_is_an_io_error(output, reason, monkeypatch, capsys,
                                                           tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.dot").mkdir()
    status, err = run_in_process(["graph", PROGRAM, "f", "--at", "2,5", "-o", output],
                                 monkeypatch, capsys)
    assert status == 2
    assert err.startswith("I/O error: cannot write") and output in err and reason in err


@pytest.mark.parametrize("argv", [["run", PROGRAM], ["graph", PROGRAM, "f", "--at", "2,5"]])
def test_a_full_disk_on_stdout_is_an_io_error(argv):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "lambdad", *argv], stdout=full,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 2
    assert result.stderr == "I/O error: cannot write the output: No space left on device\n"


# ---------------------------------------------------------------- deep and long points

DEEP_POINTS = {
    "1000 nested lists": "[" * 1000 + "1" + "]" * 1000,
    "1000 nested pairs": "(1, " * 1000 + "1" + ")" * 1000,
    "a 1000-tuple": ",".join(["1"] * 1000),
    "a 1000-tuple in parentheses": "(" + ", ".join(["1"] * 1000) + ")",
}

# Every command that reads a point, and the option that gets the deep one.
POINT_COMMANDS = [
    (["grad", PROGRAM, "f"], "--at"),
    (["jvp", PROGRAM, "f", "--dir", "1,0"], "--at"),
    (["jvp", PROGRAM, "f", "--at", "2,5"], "--dir"),
    (["hessian", PROGRAM, "f"], "--at"),
    (["hvp", PROGRAM, "f", "--at", "2,5"], "--dir"),
    (["jacobian", PROGRAM, "f"], "--at"),
    (["show", PROGRAM, "f", "--backward"], "--at"),
    (["trace", PROGRAM, "f"], "--at"),
    (["graph", PROGRAM, "f"], "--at"),
    (["check", PROGRAM, "f"], "--at"),
]


@pytest.mark.parametrize("point", list(DEEP_POINTS.values()), ids=list(DEEP_POINTS))
@pytest.mark.parametrize("head, option", POINT_COMMANDS,
                         ids=[f"{h[0]}{o}" for h, o in POINT_COMMANDS])
def test_a_deep_or_long_point_is_a_located_usage_error(head, option, point, monkeypatch,
                                                       capsys):
    status, err = run_in_process([*head, f"{option}={point}"], monkeypatch, capsys)
    assert status == 2, err
    first, line, caret = err.split("\n")[:3]
    assert first.startswith(f"{option}:1:") and "more than 200 deep" in first, first
    column = int(first.split(":")[2])
    assert point[column - 1] in "[(1"  # where the 201st pair or list opens
    assert caret.count("^") == 1 and line[caret.index("^")] == point[column - 1]


def test_the_reported_long_point_is_refused_where_it_gets_too_deep(monkeypatch, capsys):
    point = ",".join(["1"] * 100_000)  # 100,000 commas (a RecursionError, exit 3, before)
    status, err = run_in_process(["grad", PROGRAM, "f", "--at", point], monkeypatch, capsys)
    assert status == 2
    # the 201st item opens the 201st pair, one too many
    assert err.startswith("--at:1:401: usage error: --at nests pairs and lists more than 200 "
                          "deep")
    assert err.split("\n")[2].endswith("^")


def test_a_point_at_the_depth_limit_is_accepted(monkeypatch, capsys, tmp_path):
    source = tmp_path / "deep.lam"
    source.write_text("def f (xs : " + "[" * 200 + "R" + "]" * 200 + ") = 1\n"
                      "def g (p : " + " * ".join(["R"] * 201) + ") =\n"
                      "  let (a, b" + ", _" * 199 + ") = p in a * b\n")
    point = "[" * 200 + "2" + "]" * 200
    status, err = run_in_process(["grad", str(source), "f", "--at", point], monkeypatch, capsys)
    assert status == 0, err
    status, err = run_in_process(["grad", str(source), "g", "--at", ",".join(["3"] * 201)],
                                 monkeypatch, capsys)
    assert status == 0, err
    status, err = run_in_process(["grad", str(source), "f", "--at", "[" + point + "]"],
                                 monkeypatch, capsys)
    assert status == 2 and err.startswith("--at:1:201: usage error")


# ---------------------------------------------------------------- extreme option values

EXTREME = ["0", "-1", "nan", "inf", "-inf", "1e-300", "1e300", "1e309", str(10**30),
           str(-10**30), "2.5"]
CHECK = ["check", PROGRAM, "f", "--at", "2,5"]
SAMPLED = ["check", PROGRAM, "f", "--samples", "1"]
FUZZ = ["fuzz", "--programs", "1", "--jobs", "1"]

# The exit status of each extreme value of each numeric option: a value that is no setting
# at all (a NaN, an infinity, a step that vanishes, a count or time beyond any run) is a
# usage error; a seed may be any integer and a step limit any positive one.
ALL_REFUSED = dict.fromkeys(EXTREME, 2)
COUNT = {**ALL_REFUSED}
INTEGER = {**ALL_REFUSED, "0": 0, "-1": 0, str(10**30): 0, str(-10**30): 0}
LIMIT = {**ALL_REFUSED, str(10**30): 0}
OPTIONS = [
    (CHECK, "--eps", ALL_REFUSED),
    (CHECK, "--rtol", {**ALL_REFUSED, "1e-300": 1}),  # nothing can be judged: "not checked"
    (SAMPLED, "--samples", COUNT),
    (SAMPLED, "--seed", INTEGER),
    (CHECK, "--max-steps", LIMIT),
    (CHECK, "--timeout", {**ALL_REFUSED, "2.5": 0}),
    (CHECK, "--jobs", LIMIT),
    (["grad", PROGRAM, "f", "--at", "2,5"], "--max-steps", LIMIT),
    (["run", PROGRAM], "--timeout", {**ALL_REFUSED, "2.5": 0}),
    (FUZZ, "--programs", COUNT),
    (FUZZ, "--seed", INTEGER),
]


@pytest.mark.parametrize("argv, option, expected", OPTIONS,
                         ids=[f"{a[0]}{o}" for a, o, _ in OPTIONS])
def test_extreme_option_values_are_usage_errors(argv, option, expected, monkeypatch, capsys):
    for value, status in expected.items():
        line = [a for a in argv if a != option] if option not in argv else \
            argv[:argv.index(option)] + argv[argv.index(option) + 2:]
        got, err = run_in_process([*line, f"{option}={value}"], monkeypatch, capsys)
        assert got == status, (option, value, err)
        if status == 2:
            assert "usage error" in err and option.lstrip("-") in err, (option, value, err)


def test_a_count_or_time_beyond_any_run_says_the_bound(monkeypatch, capsys):
    status, err = run_in_process([*SAMPLED[:-2], "--samples", str(10**30)], monkeypatch,
                                 capsys)
    assert status == 2 and "--samples: at most 100000" in err
    status, err = run_in_process([*CHECK, "--timeout", "1e-300"], monkeypatch, capsys)
    assert status == 2 and "--timeout: at least 0.001 seconds" in err
    status, err = run_in_process([*CHECK, "--eps", "1e-300"], monkeypatch, capsys)
    assert status == 2 and "--eps must be at least 8.9e-16" in err  # ZeroDivisionError before
