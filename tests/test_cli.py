"""The command line: exit codes, error rendering with file:line:col and a caret, JSON."""

import json

import pytest


def write(tmp_path, text, name="prog.lam"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_type_error_is_located_with_caret(lambdad_cli, tmp_path):
    path = write(tmp_path, "def f x = x + 1\n\ndef g x = x + [1, 2]\n")
    result = lambdad_cli("check-types", path)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{path}:3:15: type error:")
    assert "R" in lines[0] and "[R]" in lines[0]
    assert lines[1] == "    3 | def g x = x + [1, 2]"
    assert lines[2] == "      |               ^^^^^^"
    assert "Traceback" not in result.stderr


def test_parse_error_is_located_and_says_what_was_expected(lambdad_cli, tmp_path):
    path = write(tmp_path, "def f x =\n  (x + 1\n")
    result = lambdad_cli("run", path)
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{path}:") and "parse error" in first and "expected" in first
    assert "^" in result.stderr
    assert "Traceback" not in result.stderr


def test_runtime_error_points_at_the_operation(lambdad_cli, tmp_path):
    path = write(tmp_path, "def f x = log x\n\ndef main = f (0 - 1)\n")
    result = lambdad_cli("run", path)
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{path}:1:11: runtime error:")
    assert "log" in first
    assert "^^^^^" in result.stderr


def test_missing_file_is_a_usage_error(lambdad_cli):
    result = lambdad_cli("run", "no/such/file.lam")
    assert result.returncode == 2
    assert "no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_flag_is_a_usage_error(lambdad_cli):
    result = lambdad_cli("grad", "programs/baydin.lam", "f", "--at", "2,5", "--mode", "sideways")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_point_of_wrong_shape_names_expected_type(lambdad_cli):
    result = lambdad_cli("grad", "programs/baydin.lam", "f", "--at", "[1, 2, 3]")
    assert result.returncode == 2
    assert "R" in result.stderr and "expects" in result.stderr


def test_no_main(lambdad_cli, tmp_path):
    path = write(tmp_path, "def f x = x * 2\n")
    result = lambdad_cli("run", path)
    assert result.returncode == 2
    assert "main" in result.stderr
    result = lambdad_cli("run", path, "--entry", "f")
    assert result.returncode == 0
    assert result.stdout.strip() == "<function>"


def test_run_json(lambdad_cli):
    result = lambdad_cli("run", "programs/baydin.lam", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"value": [11.652071455223084,
                                                   [5.5, 1.7163378145367738]]}


def test_check_types_lists_user_names(lambdad_cli):
    result = lambdad_cli("check-types", "programs/baydin.lam")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "f : R -> R -> R",
        "main : R * (R * R)",
    ]


def test_jvp_cli(lambdad_cli):
    result = lambdad_cli("jvp", "programs/baydin.lam", "f", "--at", "2,5", "--dir", "1,0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["value: 11.652071455223084", "derivative: 5.5"]


def test_python_m_lambdad_help(lambdad_cli):
    result = lambdad_cli("--help")
    assert result.returncode == 0
    for command in ("run", "check-types", "grad", "jvp", "show"):
        assert command in result.stdout


@pytest.mark.parametrize("mode", ["--forward", "--backward"])
def test_show_at_gives_a_program_with_the_same_numbers(lambdad_cli, tmp_path, mode):
    for raw in ((), ("--raw",)):
        shown = lambdad_cli("show", "programs/baydin.lam", "f", mode, "--at", "2,5", *raw)
        assert shown.returncode == 0, shown.stderr
        path = write(tmp_path, shown.stdout, "shown.lam")
        result = lambdad_cli("run", path)
        assert result.returncode == 0, result.stderr + shown.stdout
        assert result.stdout.strip() == "(11.652071455223084, (5.5, 1.7163378145367738))"


def test_timeout_stops_cleanly(lambdad_cli, tmp_path):
    path = write(tmp_path, "def main = fold (\\a x -> a + sin x) 0 (range 10000000)\n")
    result = lambdad_cli("run", path, "--timeout", "0.5", timeout=60)
    assert result.returncode == 1
    assert "time limit" in result.stderr
    assert "Traceback" not in result.stderr


def test_point_may_use_the_programs_definitions(lambdad_cli, tmp_path):
    path = write(tmp_path, "def w0 = (1, 2)\ndef f (p : R * R) : R = fst p * snd p\n")
    result = lambdad_cli("grad", path, "f", "--at", "w0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["value: 2", "gradient: (2, 1)"]


def test_every_option_of_every_command_says_what_it_does_and_its_default():
    import argparse

    from lambdad import cli

    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        for action in sub._actions:
            if action.dest == "help" or action.help == argparse.SUPPRESS:
                continue
            label = f"lambdad {name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help and len(action.help) > 10, label
            has_default = action.default not in (None, False, argparse.SUPPRESS)
            if has_default and action.option_strings:
                assert "default" in action.help, label


def test_version(lambdad_cli):
    import lambdad

    result = lambdad_cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"lambdad {lambdad.__version__}\n"


def test_show_speaks_of_reverse_mode_and_still_accepts_backward(lambdad_cli):
    reverse = lambdad_cli("show", "programs/baydin.lam", "f", "--reverse")
    backward = lambdad_cli("show", "programs/baydin.lam", "f", "--backward")
    assert reverse.returncode == 0 and reverse.stdout == backward.stdout
    assert "←D" in reverse.stdout
    assert "--backward" not in lambdad_cli("show", "--help").stdout
