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

# Garbage a user may type by mistake (no huge integers: a count of 10**30 is not an error,
# only a very long run).
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
