"""The Pygments lexer for lambdad, and colours only where a person reads a terminal."""

import os
import sys

import pytest
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, Operator

from conftest import PROGRAMS, ROOT
from lambdad import highlight, repl

SOURCES = sorted(PROGRAMS.glob("*.lam")) + [ROOT / "lambdad" / "prelude.lam"]


def test_registered_with_pygments_for_lam_files():
    assert isinstance(get_lexer_for_filename("model.lam"), highlight.LambdadLexer)
    assert isinstance(get_lexer_by_name("lambdad"), highlight.LambdadLexer)


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_every_program_lexes_without_errors_and_keeps_its_text(path):
    text = path.read_text(encoding="utf-8")
    tokens = list(highlight.LambdadLexer().get_tokens(text))
    assert not [value for kind, value in tokens if kind in Error]
    assert "".join(value for _, value in tokens) == text.rstrip("\n") + "\n"


def test_token_kinds():
    text = "def f x = let inner = sin x in if true then inner ^ 2.5e1 else zero -- done\n"
    kinds = {value: kind for kind, value in highlight.LambdadLexer().get_tokens(text)
             if value.strip()}
    assert kinds["def"] in Keyword and kinds["f"] in Name.Function
    assert kinds["let"] in Keyword and kinds["inner"] is Name  # not the keyword `in`
    assert kinds["sin"] in Name.Builtin and kinds["zero"] in Name.Builtin
    assert kinds["true"] in Keyword.Constant and kinds["2.5e1"] in Number
    assert kinds["-- done"] in Comment
    operators = [value for kind, value in highlight.LambdadLexer().get_tokens(
        "xs ++ ys !! 0 <+> \\a -o a") if kind in Operator]
    assert operators == ["++", "!!", "<+>", "\\", "-o"]


def test_html_is_self_contained_and_terminal_colours_strip_back():
    text = "def f (x : R) : R = sin x -- c\n"
    html = highlight.to_html(text)
    assert html.startswith("<pre") and "style=" in html and "class=" in html
    coloured = highlight.ansi(text)
    assert "\x1b[" in coloured and highlight.strip_ansi(coloured) == text


class Tty:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty


def test_colours_only_for_a_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert highlight.for_terminal("def x = 1", Tty(False)) == "def x = 1"  # a pipe or file
    assert "\x1b[" in highlight.for_terminal("def x = 1", Tty(True))
    monkeypatch.setenv("NO_COLOR", "1")
    assert highlight.for_terminal("def x = 1", Tty(True)) == "def x = 1"


def test_repl_programs_are_coloured_only_on_a_terminal():
    session = repl.Session()
    session.load(str(PROGRAMS / "baydin.lam"))
    plain = session.execute(":backward f", 1)
    assert "\x1b[" not in plain  # the default: a pipe
    session.colour = True
    coloured = session.execute(":backward f", 2)
    assert "\x1b[" in coloured and highlight.strip_ansi(coloured) == plain


def test_show_colours_a_terminal_and_never_a_pipe(lambdad_cli):
    pexpect = pytest.importorskip("pexpect")
    piped = lambdad_cli("show", "programs/baydin.lam", "f", "--backward")
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout
    env = dict(os.environ, TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    shown = pexpect.run(f"{sys.executable} -m lambdad show programs/baydin.lam f --backward",
                        cwd=str(ROOT), env=env, encoding="utf-8", timeout=30)
    assert "\x1b[" in shown
    assert highlight.strip_ansi(shown).replace("\r\n", "\n") == piped.stdout
