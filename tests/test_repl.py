"""The REPL (TOOLS.md, REPL): entries and commands on a session, the scriptable piped mode,
and the real program driven in a pseudo-terminal."""

import contextlib
import io
import os
import subprocess
import sys
import time

import pytest

from lambdad.errors import LambdadError, render
from lambdad.repl import COMMANDS, PlainConsole, Session

from conftest import PROGRAMS, ROOT

BAYDIN = str(PROGRAMS / "baydin.lam")


def run_lines(*lines, file=None):
    """Feed ``lines`` to a session as a pipe would; returns (stdout, stderr, failures)."""
    session = Session()
    if file:
        session.load(file)
    out, err = io.StringIO(), io.StringIO()
    console = PlainConsole(session, io.StringIO("".join(line + "\n" for line in lines)), out, err)
    console.loop()
    return out.getvalue(), err.getvalue(), console.failures


def entry(session, text):
    """The output of one entry typed at the prompt."""
    return session.execute(text, session.record(text))


@pytest.fixture
def baydin():
    session = Session()
    session.load(BAYDIN)
    return session


# ---------------------------------------------------------------- entries


def test_expression_prints_value_and_type(baydin):
    assert entry(baydin, "f 2 5") == "11.652071455223084 : R"
    assert entry(baydin, "(1, [true])") == "(1, [true]) : R * [Bool]"


def test_definition_then_use(baydin):
    assert entry(baydin, "def g (x : R) = f x x") == "g : R -> R"
    assert entry(baydin, "y = g 2") == "y : R"
    assert entry(baydin, "y") == f"{entry(baydin, 'f 2 2').split(' : ')[0]} : R"


def test_redefinition_replaces_for_what_follows(baydin):
    entry(baydin, "def g x = x + 1")
    entry(baydin, "def h x = g x * 2")
    assert entry(baydin, "def g x = [x]") == "g : a -> [a]"
    assert entry(baydin, "g 1") == "[1] : [R]"
    # h was defined with the first g, and keeps it
    assert entry(baydin, "h 1") == "4 : R"
    env = entry(baydin, ":env").splitlines()
    assert env == ["f : R -> R -> R", "main : R * (R * R)", "h : R -> R", "g : a -> [a]"]


def test_redefining_a_file_name_keeps_its_users(baydin):
    entry(baydin, "def f x y = x - y")
    assert entry(baydin, "f 2 5") == "-3 : R"
    assert entry(baydin, "fst main") == "11.652071455223084 : R"


def test_deep_entries_and_redefinition_under_deep_nesting():
    session = Session()
    entry(session, "def g x = x + 1")
    deep = "(" * 5000 + "g x" + ")" * 5000
    assert entry(session, f"def k x = {deep} * 2") == "k : R -> R"
    entry(session, "def g x = x * 10")  # k keeps the old g, 5000 parentheses down
    assert entry(session, "k 1") == "4 : R"
    assert entry(session, "(" * 5000 + "g 1" + ")" * 5000) == "10 : R"


def test_errors_are_rendered_at_the_typed_line_and_leave_the_session_alive(baydin):
    entry(baydin, "def g x = x * 2")
    with pytest.raises(LambdadError) as caught:
        entry(baydin, "g [1, 2]")
    rendered = render(caught.value, baydin.sources)
    lines = rendered.splitlines()
    assert lines[0].startswith("<repl>:2:") and "type error" in lines[0]
    assert lines[1].split() == ["2", "|", "g", "[1,", "2]"]
    assert "^" in lines[2]
    # a failed definition changes nothing
    with pytest.raises(LambdadError):
        entry(baydin, "def g x = x + true")
    assert entry(baydin, "g 4") == "8 : R"


def test_runtime_error_in_a_definition_made_earlier_points_at_it(baydin):
    entry(baydin, "def lg x = log x")
    with pytest.raises(LambdadError) as caught:
        entry(baydin, "lg (0 - 1)")
    rendered = render(caught.value, baydin.sources)
    assert rendered.startswith("<repl>:1:")
    assert "1 | def lg x = log x" in rendered


def test_multi_line_input_continues_an_unfinished_entry():
    out, err, failures = run_lines("def g x =", "  x * 2", "g (1 +", "  4)")
    assert (out, err, failures) == ("g : R -> R\n10 : R\n", "", 0)


def test_a_definition_goes_on_with_indented_and_operator_lines():
    out, err, failures = run_lines("def poly (x : R) : R =", "  3 * x ^ 3", "  - 2 * x + 1",
                                   "poly 2",
                                   "def q (x : R) : R =", "3 * x ^ 3", "- 2 * x + 1", "q 2",
                                   "def r x =", "  x * 2", "", "- 3")
    assert (err, failures) == ("", 0)
    assert out.splitlines() == ["poly : R -> R", "21 : R", "q : R -> R", "21 : R",
                                "r : R -> R", "-3 : R"]


def test_an_operator_line_after_a_one_line_definition_says_why_it_stands_alone():
    out, err, failures = run_lines("def f (x : R) : R = 3 * x", "  + 1", "f 1")
    assert out.splitlines() == ["f : R -> R", "3 : R"] and failures == 1
    assert "note: a line starting with an operator continues a definition written on " \
           "several lines" in err


def test_an_expression_runs_as_soon_as_it_is_complete():
    out, err, failures = run_lines("(1 +", "  2)", "- 3")
    assert out.splitlines() == ["3 : R", "-3 : R"]


def test_terminal_let_sections_and_derivative_commands(terminal):
    answer(terminal, "let k = 3", "k : R")
    answer(terminal, "fold (+) 0 (map (* k) [1, 2])", "9 : R")
    answer(terminal, ":jvp f 2,5 --dir 1,0", "derivative: 5.5")
    answer(terminal, ":hvp f 2,5 --dir 1,0", "hessian-vector product: (-0.25, 1)")
    answer(terminal, ":jacobian f 2,5", "jacobian (1 output x 2 inputs")


def test_terminal_definition_continued_by_an_operator_line(terminal):
    terminal.send("def poly (x : R) : R =\r")
    terminal.expect_exact(".. ")
    terminal.send("  3 * x ^ 3\r")
    terminal.expect_exact(".. ")
    terminal.send("  - 2 * x + 1\r")
    terminal.expect_exact(".. ")
    answer(terminal, "", "poly : R -> R")
    answer(terminal, "poly 2", "21 : R")


def test_comments_and_blank_lines_do_nothing():
    out, err, failures = run_lines("-- a comment", "", "   ", "1 -- one", ":t 2 -- two",
                                   "def f x = -- the body follows", "  x * 2", "f 3")
    assert (out, err, failures) == ("1 : R\n2 : R\nf : R -> R\n6 : R\n", "", 0)


def test_blank_line_ends_an_unfinished_entry_with_its_error():
    out, err, failures = run_lines("(1 +", "", "2")
    assert out == "2 : R\n"
    assert "parse error" in err and failures == 1


# ---------------------------------------------------------------- commands


def test_type_command(baydin):
    assert entry(baydin, ":type f") == "f : R -> R -> R"
    assert entry(baydin, ":t map") == "map : (a -> b) -> [a] -> [b]"
    assert entry(baydin, ":t \\x -> (x, x)") == "\\x -> (x, x) : a -> a * a"


def test_type_error_in_a_command_argument_points_into_the_line(baydin):
    with pytest.raises(LambdadError) as caught:
        entry(baydin, ":t   1 + true")
    lines = render(caught.value, baydin.sources).splitlines()
    assert lines[0].startswith("<repl>:1:")
    assert lines[1].endswith("1 | :t   1 + true")
    assert lines[2].index("^") >= lines[1].index("1 + true")


def test_grad_commands(baydin):
    assert entry(baydin, ":grad f 2,5").splitlines() == [
        "value: 11.652071455223084",
        "gradient: (5.5, 1.7163378145367738)",
    ]
    both = entry(baydin, ":grad! f (2, 5)").splitlines()
    assert both[0].split() == ["value:", "11.652071455223084"]
    assert both[1].split(":", 1)[0] == "gradient (reverse, fused)"
    assert both[1].endswith("(5.5, 1.7163378145367738)")
    assert both[2].split(":", 1)[0] == "gradient (forward)"
    assert both[2].endswith("(5.5, 1.7163378145367738)")


def test_grad_of_a_definition_made_at_the_prompt(baydin):
    entry(baydin, "def sq (x : R) = x * x")
    assert entry(baydin, ":grad sq 3").splitlines()[1] == "gradient: 6"


def test_strategy_command(baydin):
    assert entry(baydin, ":strategy") == "strategy: fused"
    assert entry(baydin, ":strategy naive") == "strategy: naive"
    assert "(reverse, naive)" in entry(baydin, ":grad! f 2,5")
    assert entry(baydin, ":grad f 2,5").endswith("(5.5, 1.7163378145367738)")
    entry(baydin, "def g x = x")  # a new definition keeps the strategy
    assert baydin.program.strategy == "naive"
    with pytest.raises(LambdadError, match="unknown strategy `lazy`; use factored, naive or fused"):
        entry(baydin, ":strategy lazy")


def test_forward_and_backward_commands(baydin):
    forward = entry(baydin, ":forward f")
    backward = entry(baydin, ":backward f")
    assert "def f" in forward and "def f" in backward
    assert forward != backward
    assert "main" in entry(baydin, ":backward f 2,5")


def test_trace_command_is_baydins_table(baydin):
    rows = entry(baydin, ":trace f 2,5").splitlines()
    assert rows[0].split() == ["var", "operation", "source", "value", "∂/∂x1", "∂/∂x2"]
    last = rows[-1].split()
    assert last[0] == "v5" and last[-3:] == ["11.652071455223084", "5.5", "1.7163378145367738"]
    adjoints = entry(baydin, ":trace f 2,5 reverse").splitlines()
    assert adjoints[0].split()[-1] == "adjoint"
    assert adjoints[2].split()[-1] == "5.5"


def test_check_command(baydin):
    entry(baydin, "def sq (x : R) = x * x")
    report = entry(baydin, ":check sq 3")
    assert report.splitlines()[0] == "sq at 3: value 9"
    assert report.splitlines()[-1].startswith("ok: 1 function(s), 1 point(s)")
    assert entry(baydin, ":check f").splitlines()[-1].startswith("ok: 1 function(s), 3 point(s)")
    assert entry(baydin, ":check").splitlines()[-1].startswith("ok: 2 function(s)")


def test_load_and_reload(tmp_path):
    path = tmp_path / "lib.lam"
    path.write_text("def k = 1\n")
    session = Session()
    assert entry(session, f":load {path}") == f"loaded {path} (1 definition)"
    assert entry(session, "k") == "1 : R"
    path.write_text("def k = 2\n\ndef k2 = k * k\n")
    assert entry(session, ":reload") == f"loaded {path} (2 definitions)"
    assert entry(session, "k2") == "4 : R"
    path.write_text("def k = \n")
    with pytest.raises(LambdadError) as caught:
        entry(session, ":reload")
    assert render(caught.value, session.sources).startswith(f"{path}:")
    assert entry(session, "k2") == "4 : R"  # the failed load changed nothing
    with pytest.raises(LambdadError, match="no such file"):
        entry(session, ":load no/such/file.lam")


def test_load_follows_imports_and_reload_reads_every_file_again(tmp_path):
    main, lib = tmp_path / "main.lam", tmp_path / "lib" / "scale.lam"
    lib.parent.mkdir()
    main.write_text('import "lib/scale.lam"\ndef f x = scale x + 1\n')
    lib.write_text("def scale x = 2 * x\n")
    session = Session()
    assert entry(session, f":load {main}") == f"loaded {main} (2 definitions, 1 file imported)"
    assert entry(session, "f 3") == "7 : R"
    assert entry(session, ":grad scale 1").splitlines()[-1] == "gradient: 2"
    lib.write_text("def scale x = 10 * x\n")
    assert entry(session, ":reload") == f"loaded {main} (2 definitions, 1 file imported)"
    assert entry(session, "f 3") == "31 : R"
    lib.write_text("def scale x = x + true\n")
    with pytest.raises(LambdadError) as caught:
        entry(session, ":reload")
    assert render(caught.value, session.sources).splitlines() == [
        f"{lib}:1:19: type error: `+` expects R, but this has type Bool",
        "    1 | def scale x = x + true",
        "      |                   ^^^^"]
    assert entry(session, "f 3") == "31 : R"  # the failed load changed nothing
    lib.unlink()
    with pytest.raises(LambdadError) as caught:
        entry(session, ":reload")
    assert render(caught.value, session.sources).splitlines()[0] == (
        f"{main}:1:1: import error: cannot import `lib/scale.lam`: no such file: {lib}")


def test_an_import_at_the_prompt_points_at_load():
    with pytest.raises(LambdadError) as caught:
        entry(Session(), 'import "lib.lam"')
    assert caught.value.message == ("`import` is for the top of a file; at the REPL "
                                    "`:load FILE` loads a file with its imports")


def test_env_help_and_unknown_commands(baydin):
    assert entry(Session(), ":env") == "no definitions yet"
    help_text = entry(baydin, ":help")
    for command in COMMANDS:
        assert command.usage in help_text
    for word in (":type", ":t ", ":grad", ":grad!", ":forward", ":reverse", ":trace", ":check",
                 ":load", ":reload", ":strategy", ":env", ":help", ":quit"):
        assert word in help_text
    with pytest.raises(LambdadError, match="unknown command"):
        entry(baydin, ":frobnicate")
    with pytest.raises(LambdadError, match="usage"):
        entry(baydin, ":grad f")


def test_quit_stops_reading():
    out, err, failures = run_lines("1", ":quit", "2")
    assert out == "1 : R\n" and failures == 0


def test_completion_words(baydin):
    entry(baydin, "def quadruple (x : R) = 4 * x")
    words = baydin.completions()
    for name in ("quadruple", "f", "main", "sum", "sin", "map", "grad", "let"):
        assert name in words


# ---------------------------------------------------------------- the program, piped


def lambdad_repl(*args, input, timeout=60):
    env = dict(os.environ)
    env.pop("LAMBDAD_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "lambdad", "repl", *args], input=input,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def test_piped_mode_is_scriptable():
    script = "f 2 5\n:grad f 2,5\ndef g x =\n  f x 1\ng 2\n"
    result = lambdad_repl("programs/baydin.lam", input=script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "11.652071455223084 : R",
        "value: 11.652071455223084",
        "gradient: (5.5, 1.7163378145367738)",
        "g : R -> R",
        f"{2 + 0.6931471805599453 - 0.8414709848078965!r} : R",
    ]
    assert result.stderr == ""


def test_piped_mode_reports_errors_and_goes_on():
    result = lambdad_repl(input="1 + true\n2 * 3\n")
    assert result.returncode == 1
    assert result.stdout == "6 : R\n"
    assert result.stderr.startswith("<repl>:1:") and "Traceback" not in result.stderr


def test_piped_mode_with_a_missing_file():
    result = lambdad_repl("no/such.lam", input="1\n")
    assert result.returncode == 1
    assert "no such file" in result.stderr
    assert result.stdout == "1 : R\n"


# ---------------------------------------------------------------- the program, in a terminal

pexpect = pytest.importorskip("pexpect")

# prompt_toolkit draws a plain prompt on a dumb terminal (and does not ask for the cursor
# position), so the output can be matched as text; editing keys still work.
TERMINAL_ENV = {"TERM": "dumb", "PROMPT_TOOLKIT_NO_CPR": "1"}


def spawn(history, *args):
    env = dict(os.environ, LAMBDAD_HISTORY=str(history), **TERMINAL_ENV)
    env.pop("LAMBDAD_DEBUG", None)
    child = pexpect.spawn(sys.executable, ["-m", "lambdad", "repl", *args], cwd=str(ROOT),
                          env=env, encoding="utf-8", timeout=20, dimensions=(50, 200))
    child.expect_exact("λ> ")
    return child


@pytest.fixture
def history(tmp_path):
    return tmp_path / "history"


@pytest.fixture
def terminal(history):
    """``lambdad repl programs/baydin.lam`` in a pseudo-terminal."""
    child = spawn(history, "programs/baydin.lam")
    yield child
    child.close(force=True)


def settle():
    """On a dumb terminal prompt_toolkit prints the prompt before it switches the terminal
    to raw mode; a control key sent in between would be taken by the terminal driver.  A
    person is never that fast; the tests wait a moment before Ctrl-C or Ctrl-D."""
    time.sleep(0.3)


def answer(child, line, expected):
    """Type ``line`` and Enter; wait for ``expected`` and the next prompt."""
    child.send(line + "\r")
    child.expect_exact(expected)
    child.expect_exact("λ> ")


def test_terminal_expression_type_and_grad(terminal):
    answer(terminal, "f 2 5", "11.652071455223084 : R")
    answer(terminal, ":type f", "f : R -> R -> R")
    answer(terminal, ":grad f 2,5", "gradient: (5.5, 1.7163378145367738)")


def test_terminal_definitions_errors_and_multi_line(terminal):
    answer(terminal, "def g x = x * 3", "g : R -> R")
    answer(terminal, "g 2", "6 : R")
    answer(terminal, "def g x = x * 4", "g : R -> R")
    answer(terminal, "g 2", "8 : R")
    answer(terminal, "g true", "type error")
    terminal.send("g (1 +\r")
    terminal.expect_exact(".. ")
    answer(terminal, "  1)", "8 : R")


def test_terminal_tab_completion(terminal):
    answer(terminal, "def quadruple (x : R) = 4 * x", "quadruple : R -> R")
    # only the completed name can be a defined function of a real
    answer(terminal, "quadr\t 2", "8 : R")
    # only the completed command can type the expression
    answer(terminal, ":ty\t 1", "1 : R")


def test_terminal_load_and_reload_of_a_file_with_imports(history, tmp_path):
    main, lib = tmp_path / "main.lam", tmp_path / "lib.lam"
    main.write_text('import "lib.lam"\ndef f x = scale x * x\n')
    lib.write_text("def scale x = 2 * x\n")
    child = spawn(history)
    try:
        answer(child, f":load {main}", f"loaded {main} (2 definitions, 1 file imported)")
        answer(child, "f 3", "18 : R")
        answer(child, ":grad f 3", "gradient: 12")
        lib.write_text("def scale x = 3 * x\n")
        answer(child, ":reload", f"loaded {main} (2 definitions, 1 file imported)")
        answer(child, "f 3", "27 : R")
        main.write_text('import "main.lam"\n')
        answer(child, ":reload", f"import error: import cycle: {main} imports {main}")
        answer(child, "f 1", "3 : R")
    finally:
        child.close(force=True)


def test_terminal_line_editing(terminal):
    left, backspace = "\x1b[D", "\x7f"
    answer(terminal, "1 + 2" + left * 4 + backspace + "7", "9 : R")


def test_terminal_ctrl_c_cancels_evaluation_and_input(terminal):
    terminal.send("fold (\\a x -> a + sin x) 0 (range 10000000)\r")
    terminal.expect_exact("range 10000000)")
    time.sleep(0.5)
    terminal.sendintr()
    terminal.expect_exact("interrupted")
    terminal.expect_exact("λ> ")
    answer(terminal, "1 + 1", "2 : R")
    # Ctrl-C on a half-typed line throws the line away
    settle()
    terminal.send("1 + 4")
    terminal.sendintr()
    terminal.expect_exact("λ> ")
    answer(terminal, "3 + 3", "6 : R")


def test_terminal_history_is_kept_across_runs_and_quit(history):
    first = spawn(history, "programs/baydin.lam")
    answer(first, "40 + 2", "42 : R")
    first.send(":quit\r")
    first.expect(pexpect.EOF)
    first.close()
    assert first.exitstatus == 0
    assert "40 + 2" in history.read_text()
    second = spawn(history)
    time.sleep(0.5)  # prompt_toolkit loads the history file in the background
    up = "\x1b[A"
    answer(second, up + up, "42 : R")  # the line before `:quit`
    settle()
    second.sendeof()
    second.expect(pexpect.EOF)
    second.close()
    assert second.exitstatus == 0


# ---------------------------------------------------------------- as in ghci and utop


def test_grad_and_trace_take_expressions_as_well_as_names(baydin):
    assert entry(baydin, r":grad (\x -> x*x) 3") == "value: 9\ngradient: 6"
    assert entry(baydin, ":grad sin 0") == "value: 0\ngradient: 1"
    assert "x * x" in entry(baydin, r":trace (\x -> x * x) 2")
    assert "it" not in baydin.program.decls  # the expression's definition is not kept


def test_commands_take_options_as_on_the_command_line(baydin):
    assert entry(baydin, ":grad f 2,5 --mode forward") == \
        "value: 11.652071455223084\ngradient: (5.5, 1.7163378145367738)"
    assert "gradient (forward)" in entry(baydin, ":grad f 2,5 --mode both")
    assert "adjoint" in entry(baydin, ":trace f 2,5 --mode reverse")
    assert "adjoint" in entry(baydin, ":trace f 2,5 --mode reverse --strategy naive")
    with pytest.raises(LambdadError, match="--mode takes"):
        entry(baydin, ":grad f 2,5 --mode sideways")
    with pytest.raises(LambdadError, match="unknown option --colour"):
        entry(baydin, ":grad f 2,5 --colour red")


def test_derivative_commands_print_what_the_command_line_prints(baydin):
    from lambdad import cli

    def command_line(*argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(list(argv)) == 0
        return out.getvalue().rstrip("\n")

    for repl_line, argv in [
        (":jvp f 2,5 --dir 1,0", ["jvp", BAYDIN, "f", "--at", "2,5", "--dir", "1,0"]),
        (":hvp f 2,5 --dir (0, -1)", ["hvp", BAYDIN, "f", "--at", "2,5", "--dir", "(0, -1)"]),
        (":hessian f 2,5", ["hessian", BAYDIN, "f", "--at", "2,5"]),
        (":hessian f 2,5 --mode reverse-over-forward --wrt x2",
         ["hessian", BAYDIN, "f", "--at", "2,5", "--mode", "reverse-over-forward", "--wrt", "x2"]),
        (":jacobian f 2,5", ["jacobian", BAYDIN, "f", "--at", "2,5"]),
        (":jacobian f 2,5 --mode forward --wrt x1",
         ["jacobian", BAYDIN, "f", "--at", "2,5", "--mode", "forward", "--wrt", "x1"]),
        (":graph f 2,5", ["graph", BAYDIN, "f", "--at", "2,5"]),
        (":graph f 2,5 --mode forward", ["graph", BAYDIN, "f", "--at", "2,5", "--mode", "forward"]),
    ]:
        assert entry(baydin, repl_line) == command_line(*argv), repl_line


def test_derivative_commands_take_expressions_and_check_their_arguments(baydin, tmp_path):
    assert entry(baydin, ":jvp (\\x -> x * x) 3 --dir 1") == "value: 9\nderivative: 6"
    assert entry(baydin, ":jacobian (\\x -> (x, x * x)) 3").splitlines()[-1] == "  it.1  6"
    picture = tmp_path / "f.svg"
    assert entry(baydin, f":graph f 2,5 -o {picture}") == f"wrote {picture}"
    assert picture.read_text().startswith("<?xml") or "<svg" in picture.read_text()
    with pytest.raises(LambdadError, match="usage: :jvp F POINT --dir VECTOR"):
        entry(baydin, ":jvp f 2,5")
    with pytest.raises(LambdadError, match="--mode takes forward or reverse"):
        entry(baydin, ":jacobian f 2,5 --mode sideways")
    with pytest.raises(LambdadError, match="unknown graph format"):
        entry(baydin, f":graph f 2,5 -o {tmp_path / 'f.xyz'}")
    assert "it" not in baydin.program.decls  # the expression's program is dropped


def test_ghci_short_commands_and_unique_prefixes(baydin):
    assert entry(baydin, f":l {BAYDIN}").startswith("loaded")
    assert entry(baydin, ":r").startswith("loaded")
    assert entry(baydin, ":en").startswith("f : R -> R -> R")
    assert entry(baydin, ":gr f 2,5").startswith("value:")  # :grad, not :grad!
    with pytest.raises(LambdadError, match="ambiguous command :re: :reverse, :reload"):
        entry(baydin, ":re")
    with pytest.raises(LambdadError, match="unknown command :frob"):
        entry(baydin, ":frob")


def test_let_without_in_defines_the_name_as_in_ghci():
    out, err, failures = run_lines("let x = 5", "x + 1", "let g (y : R) = y * x", "g 2",
                                   "let z = 1 in z + x")
    assert (err, failures) == ("", 0)
    assert out.splitlines() == ["x : R", "6 : R", "g : R -> R", "10 : R", "6 : R"]


def test_let_with_a_pattern_at_the_prompt_needs_in():
    out, err, failures = run_lines("let (a, b) = (1, 2)", "1 + 1")
    assert failures == 1 and "at the prompt `let` defines one name" in err
    assert out == "2 : R\n"  # the entry after it is not swallowed


def test_piped_quit_after_an_unfinished_line_is_honoured():
    out, err, failures = run_lines("def f x =", ":quit", "1 + 1")
    assert failures == 1 and "parse error" in err  # the unfinished entry is reported
    assert "2" not in out  # and nothing after :quit runs


def test_a_line_longer_than_the_limit_is_refused_unread():
    from lambdad.repl import MAX_ENTRY_CHARS

    session = Session()
    out, err = io.StringIO(), io.StringIO()
    stream = io.StringIO("1" * (3 * MAX_ENTRY_CHARS) + "\n1 + 1\n")
    console = PlainConsole(session, stream, out, err)
    console.loop()
    assert console.failures == 1
    assert f"{3 * MAX_ENTRY_CHARS + 1} characters" in err.getvalue() and len(err.getvalue()) < 300
    assert out.getvalue() == "2 : R\n"
    assert session.lines == ["", "1 + 1"]  # the lines keep their numbers


# ---------------------------------------------------------------- long sessions


def test_each_definition_is_typed_once_not_the_whole_session_again(monkeypatch):
    """A session of n definitions types n declarations (not 1 + 2 + ... + n): a script of
    n definitions takes time linear in n."""
    import lambdad.pipeline as pipeline

    typed = []
    infer = pipeline.infer_module

    def counting(module, *args, **kwargs):
        typed.extend(decl.name for decl in module.decls)
        return infer(module, *args, **kwargs)

    Session()  # the prelude is typed once per process, before
    monkeypatch.setattr(pipeline, "infer_module", counting)
    lines = ["def f0 x = x"] + [f"def f{i} x = f{i - 1} x + {i}" for i in range(1, 60)]
    out, err, failures = run_lines(*lines, "f59 1")
    assert failures == 0 and out.splitlines()[-1] == f"{1 + sum(range(60))} : R"
    assert typed == [f"f{i}" for i in range(60)]


def test_extending_leaves_the_program_as_it_was_and_keeps_old_definitions_hidden():
    session = Session()
    entry(session, "def f x = x * 2")
    entry(session, "def g x = f x + 1")
    before = session.program
    entry(session, "def f x = x + 100")
    after = session.program
    assert before.names() == ("f", "g") and after.names() == ("g", "f")
    assert before.value_of("f")(1.0) == 2 and after.value_of("f")(1.0) == 101
    assert after.value_of("g")(1.0) == 3  # g keeps the f it was defined with
    # as one module, the replaced f is hidden as f'1, and g refers to it
    module = {decl.name: decl for decl in after.module.decls}
    assert "f'1" in module and "f'1" not in after.names()
    assert "f'1" in after.show("g", reverse=True)
    assert [decl.name for decl in before.module.decls][-2:] == ["f", "g"]
    assert after.scheme("f'1") == before.scheme("f")


def test_a_definition_using_its_own_name_is_no_recursion_at_the_use():
    session = Session()
    entry(session, "def f x = x")
    with pytest.raises(LambdadError) as caught:
        entry(session, "def f x = let y = f x in y")
    rendered = render(caught.value, session.sources)
    assert rendered.startswith("<repl>:2:19:") and "no recursion" in rendered
    assert entry(session, "def f y = let f = y in f + 1") == "f : R -> R"


# ---------------------------------------------------------------- pasting, history, locations

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


def test_terminal_bracketed_paste_of_several_definitions(history):
    child = spawn(history)
    child.send(PASTE_START + "def a x = x + 1\ndef b x =\n  a x * 2\n" + PASTE_END + "\r")
    child.expect_exact("a : R -> R")
    child.expect_exact("b : R -> R")
    child.expect_exact("λ> ")
    answer(child, "b 1", "4 : R")
    child.close(force=True)


def test_terminal_history_recalls_a_multi_line_entry_whole(history):
    child = spawn(history)
    child.send("def g x =\r")
    child.expect_exact(".. ")
    child.send("  x * 3\r")
    child.expect_exact(".. ")  # a definition may go on until a blank line
    answer(child, "", "g : R -> R")
    answer(child, "g 2", "6 : R")
    up = "\x1b[A"
    # Up twice: the two-line definition, whole; Enter defines g again
    answer(child, up + up, "g : R -> R")
    child.close(force=True)
    stored = history.read_text()
    assert "+def g x =\n+  x * 3\n" in stored and "\n+  x * 3\n+g 2" not in stored


def test_terminal_errors_point_at_the_right_line_after_multi_line_entries(history):
    child = spawn(history)
    child.send("def g x =\r")
    child.expect_exact(".. ")
    child.send("  x * 3\r")
    child.expect_exact(".. ")
    answer(child, "", "g : R -> R")                                           # lines 1-3
    child.send(PASTE_START + "def h x = g x\ndef k x = h x\n" + PASTE_END + "\r")  # 4-6
    child.expect_exact("k : R -> R")
    child.expect_exact("λ> ")
    child.send("k [1]\r")                                                     # line 7
    child.expect_exact("<repl>:7:3: type error")
    child.expect_exact("7 | k [1]")
    child.expect(r"\|   \^\^\^")
    child.expect_exact("λ> ")
    child.close(force=True)


def test_a_definition_needing_a_loaded_definition_not_run_yet_keeps_the_module_whole(tmp_path):
    """Running a file's definition for the first time (to define a new one with it) makes
    the module of the program extended; the definitions added before are in it once."""
    file = tmp_path / "m.lam"
    file.write_text("def base x = x + 1\ndef other x = x * 2\n")
    session = Session()
    session.load(str(file))
    entry(session, "def a x = base x")  # runs base only
    entry(session, "def a x = x - 1")
    entry(session, "def b x = other (a x)")  # runs other now
    names = [decl.name for decl in session.program.module.decls]
    assert names[-5:] == ["base", "other", "a'1", "a", "b"]
    assert entry(session, "b 5") == "8 : R"
