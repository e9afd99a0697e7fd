"""Messages and excerpts are safe to print: one line-splitting rule everywhere (a line ends
at \\n only, as the parser counts), control characters shown as visible characters, long
messages and lines cut, and every output format escaped."""

import pytest

import lambdad
from lambdad.errors import MAX_MESSAGE_CHARS, printable, render
from lambdad.graph import graph_of, to_dot, to_svg_builtin
from lambdad.trace import format_trace, trace

# Characters str.splitlines() breaks at but the parser does not.
NOT_LINE_ENDS = ["\f", "\v", "\r", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def rendered(source, file="prog.lam"):
    with pytest.raises(lambdad.LambdadError) as info:
        lambdad.loads(source, file).run("main")
    return render(info.value, {file: source})


@pytest.mark.parametrize("separator", NOT_LINE_ENDS, ids=lambda c: f"U+{ord(c):04X}")
def test_the_caret_is_under_the_line_the_parser_counted(separator):
    source = f"-- a comment{separator}with a separator\ndef main = 1 + [2]\n"
    text = rendered(source)
    first, line, caret = text.split("\n")[:3]
    assert first.startswith("prog.lam:2:16: type error")
    assert line == "    2 | def main = 1 + [2]"
    assert caret == "      |                ^^^"


@pytest.mark.parametrize("separator", NOT_LINE_ENDS, ids=lambda c: f"U+{ord(c):04X}")
def test_trace_and_graph_excerpts_follow_the_parser_lines(separator):
    source = (f"-- see{separator}javascript:alert(1) \\\"]\n"
              "def f x = sin x * x\n")
    program = lambdad.loads(source, "prog.lam")
    result = trace(program, "f", 2.0)
    table = format_trace(result, {"prog.lam": source})
    assert "sin x  (2:11)" in table and "javascript" not in table
    graph = graph_of(result, title="f at 2")
    for output in (to_dot(graph), to_svg_builtin(graph)):
        assert "javascript" not in output


def test_terminal_escapes_in_a_file_are_not_echoed():
    source = "def main = 1 +\x1b[2J\x1b]0;title\x07 2\n"
    text = rendered(source)
    assert "\x1b" not in text and "\x07" not in text
    assert "␛[2J" in text  # shown, as a visible character
    lines = text.split("\n")
    assert lines[1].index("␛") == lines[2].index("^")  # the caret still points at it


def test_control_characters_in_messages_are_neutralised():
    error = lambdad.UsageError("no such file: evil\x1b[2J\nforged: line\u202e")
    text = render(error)
    assert text.count("\n") == 0
    assert "\x1b" not in text and "\u202e" not in text
    assert printable("a\tb\x00c\x7f") == "a b␀c␡"


def test_a_huge_identifier_is_not_echoed_in_full():
    name = "a" * 2_000_000
    text = rendered(f"def main = 1 + {name}\n")
    assert len(text) < 2 * MAX_MESSAGE_CHARS
    assert "more characters" in text
    line, caret = text.split("\n")[1:3]
    assert line.startswith("    1 | def main = 1 + aaa") and line.endswith("…")
    assert caret.index("^") == line.index("aaa")


def test_a_long_line_is_shown_around_the_error():
    source = "def main = " + " + ".join(["1"] * 200) + " + [2]\n"
    line, caret = rendered(source).split("\n")[1:3]
    assert line.startswith("    1 | …") and len(line) < 200
    assert line[caret.index("^"):caret.index("^") + 3] == "[2]"


def test_a_cli_error_with_a_control_character_in_the_file_name(lambdad_cli):
    result = lambdad_cli("run", "missing\x1b[2J.lam")
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "␛[2J" in result.stderr


def test_a_declared_primitives_bool_body_and_overflow_are_rendered_at_their_places():
    text = rendered("primitive f x = x > 1\n  partial x = 1\ndef main = f 2\n")
    assert text.split("\n") == [
        "prog.lam:1:17: type error: the body of `f` must be a real (R), but it has type Bool",
        "    1 | primitive f x = x > 1",
        "      |                 ^^^^^"]
    text = rendered("primitive f x = 1 / (x * 1e300 * 1e300)\n  partial x = 1\n"
                    "def main = f 1\n")
    assert text.split("\n") == [
        "prog.lam:3:12: runtime error: `1e+300 * 1e+300` is inf in a declared primitive's "
        "body (at prog.lam:1:22): an overflow (lambdad computes with finite reals only)",
        "    3 | def main = f 1",
        "      |            ^^^"]


def test_a_shadowing_warning_is_rendered_at_the_name_defined():
    source = "def a = cosh 1\ndef cosh x = x\n"
    [warning] = lambdad.loads(source, "prog.lam").warnings()
    assert render(warning, {"prog.lam": source}).split("\n") == [
        "prog.lam:2:5: warning: this definition of `cosh` shadows the built-in `cosh`, which "
        "a definition above uses (`a`, line 1): from here on `cosh` means this definition",
        "    2 | def cosh x = x",
        "      |     ^^^^"]
