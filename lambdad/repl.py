"""``lambdad repl``: the interactive loop, a thin layer over :mod:`lambdad.pipeline`.

A line at the prompt ``λ> `` is a declaration (``def f x = ...``), a ``let``-less binding
(``x = e``), an expression (printed with its type: ``11.652071455223084 : R``) or a
``:command`` (TOOLS.md, REPL).  A new definition of a name replaces it for what follows;
definitions made before keep seeing the old one, as in an ML toplevel.

Every line read belongs to one growing source text, ``<repl>``: an entry is parsed at its
own line and column in it, so an error is rendered with the line the user typed, caret and
all.  On a terminal, prompt_toolkit gives line editing, completion and a history kept across
runs; from a pipe, lines are read plainly, without prompts, so the REPL is scriptable.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import attrs
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.shortcuts import CompleteStyle

from . import graph, gradcheck, highlight, trace
from .errors import LambdadError, ParseError, UsageError, render
from .parser import is_incomplete, parse_entry
from .pipeline import COMPOSITIONS, DEFAULT_STRATEGY, STRATEGIES, Program, strategy_named
from .results import format_hessian, format_jacobian, format_result
from .sources import PRELUDE_FILE, prelude_text, read_source
from .primitives import NAMED
from .printer import print_type
from .syntax import Decl, Term
from .values import format_value, written

REPL_FILE = "<repl>"
# The longest line read; a longer one (a runaway paste, /dev/zero) is refused unread.
MAX_ENTRY_CHARS = 1_000_000
PROMPT = "λ> "
CONTINUATION = ".. "
HISTORY_VARIABLE = "LAMBDAD_HISTORY"
HISTORY_FILE = ".lambdad_history"
KEYWORDS = ("def", "let", "in", "if", "then", "else", "true", "false",  # LANGUAGE.md §2
            "primitive", "partial")
# An entry of blanks and comments only (LANGUAGE.md §2), which does nothing.
_NOTHING = re.compile(r"(?:\s|--[^\n]*)*")


class Quit(Exception):
    """Raised by ``:quit``: leave the loop."""


@attrs.frozen
class Argument:
    """The text after a ``:command``, and where it starts in ``<repl>`` (1-based)."""

    text: str
    line: int
    column: int


@attrs.frozen
class Command:
    """One ``:command``: how it is written, what it does, and the method running it."""

    names: tuple[str, ...]
    usage: str
    summary: str
    run: Callable[["Session", Argument], str | None]


# ---------------------------------------------------------------- the session


class Session:
    """The state of one REPL: the lines read so far (the source ``<repl>``), the file loaded
    last, the strategy, and the :class:`Program` of the file's and the prompt's definitions."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._sources: dict[str, str] = {PRELUDE_FILE: prelude_text(), REPL_FILE: ""}
        self._joined = 0  # how many lines the text of <repl> in _sources holds
        self.file: str | None = None
        self.strategy = DEFAULT_STRATEGY
        self.program = Program("", REPL_FILE)
        self.colour = False  # printed programs highlighted (a terminal only)

    # ------------------------------------------------------------ reading

    def record(self, line: str) -> int:
        """The 1-based number of ``line`` in ``<repl>``, after appending it there."""
        self.lines.append(line)
        return len(self.lines)

    @property
    def sources(self) -> dict[str, str]:
        """Every source text by file name, ``<repl>`` holding the lines read so far (joined
        when asked for, to render an error or a trace, not at every line)."""
        if self._joined != len(self.lines):
            self._sources[REPL_FILE] = "\n".join(self.lines)
            self._joined = len(self.lines)
        return self._sources

    # ------------------------------------------------------------ the program

    def completions(self) -> list[str]:
        """Every name worth completing: definitions, prelude names, built-ins, keywords."""
        words = set(self.program.names()) | set(self.program.prelude_names)
        return sorted(words | set(NAMED) | set(KEYWORDS))

    def load(self, path: str) -> str:
        """Load the definitions of the file ``path`` and of the files it imports, in place
        of the current ones (those entered at the prompt are forgotten); raises UsageError
        if the file cannot be read and the file's import, parse or type error otherwise,
        leaving the session unchanged.  Every file is read again (``:reload`` sees what
        changed in the files imported too)."""
        text = read_source(path)
        self._sources[path] = text
        program = Program(text, path, sources=self._sources)
        program.set_strategy(self.strategy)
        self.file, self.program = path, program
        count, imported = len(program.names()), len(program.files) - 1
        files = f", {imported} file{'s' if imported != 1 else ''} imported" if imported else ""
        return f"loaded {path} ({count} definition{'s' if count != 1 else ''}{files})"

    def define(self, decl: Decl) -> str:
        """``name : type`` of the new declaration ``decl``, after adding it (replacing an
        older definition of the name for what follows); it is evaluated at once, so its
        type error or runtime error is raised here, leaving the session unchanged."""
        program = self.program.extended([decl])
        self.program = program
        return f"{decl.name} : {program.scheme(decl.name)}"

    # ------------------------------------------------------------ one entry

    def execute(self, text: str, line: int) -> str | None:
        """The output of the entry ``text`` (one or more lines, the first of which is line
        ``line`` of ``<repl>``); None when there is nothing to print.  Raises the entry's
        LambdadError, or Quit."""
        if _NOTHING.fullmatch(text):
            return None
        stripped = text.strip()
        if stripped.startswith(":"):
            return self.command(text, line)
        try:
            entry = parse_entry(text, REPL_FILE, bound=self.bound(),
                                declared=self.program.declared_primitives(), origin=(line, 1))
        except ParseError as error:
            if _OPERATOR_FIRST.match(text):
                error.notes += ("a line starting with an operator continues a definition "
                                "written on several lines (`def f x =`, then its body on "
                                "the lines after it); a definition on one line is complete "
                                "at its end",)
            raise
        if isinstance(entry, Decl):
            return self.define(entry)
        value, type_ = self.program.evaluate_term(entry)
        return f"{format_value(written(value, type_))} : {print_type(type_)}"

    def bound(self) -> Mapping[str, Decl]:
        """The names the parser must read as variables: every top-level definition (a
        mapping the parser reads without copying it)."""
        return self.program.decls

    def command(self, text: str, line: int) -> str | None:
        """The output of the ``:command`` line ``text``; raises UsageError for an unknown
        command or bad arguments."""
        indent = len(text) - len(text.lstrip())
        word, _, rest = text.strip().partition(" ")
        command = find_command(word[1:])
        # Where the argument starts, so that an expression is parsed where it was typed.
        column = indent + len(word) + 1 + (len(rest) - len(rest.lstrip())) + 1
        return command.run(self, Argument(rest.strip(), line, column))

    def parse_expression(self, argument: Argument) -> Term:
        """The term written as ``argument``; raises ParseError, or UsageError if it is a
        declaration."""
        entry = parse_entry(argument.text, REPL_FILE, bound=self.bound(),
                            declared=self.program.declared_primitives(),
                            origin=(argument.line, argument.column))
        if isinstance(entry, Decl):
            raise UsageError("expected an expression, not a definition")
        return entry

    # ------------------------------------------------------------ commands

    def cmd_type(self, argument: Argument) -> str:
        """``:type e``: the type of ``e``, without evaluating it."""
        if not argument.text:
            raise UsageError("usage: :type EXPRESSION")
        term = self.parse_expression(argument)
        # The language has no string literals: `--` always starts a comment.
        shown = argument.text.split("--", 1)[0].rstrip()
        return f"{shown} : {print_type(self.program.type_of_term(term))}"

    def _name_and_point(self, argument: Argument, usage: str, point_needed: bool = True):
        """The function written first in ``argument`` and the point written after it (None
        if absent and not ``point_needed``).  The function is a definition's name, or any
        expression: a name (``sin``) or a parenthesised one (``(\\x -> x * x)``), which
        becomes the definition ``it`` of a program made for this command (``self.program``
        then names that program).  Raises UsageError, or the expression's ParseError or
        TypeCheckError."""
        function, point = _function_and_rest(argument.text)
        if not function or (point_needed and not point.strip()):
            raise UsageError(f"usage: {usage}")
        if function not in self.program.decls:
            column = argument.column + (len(argument.text) - len(argument.text.lstrip()))
            term = self.parse_expression(attrs.evolve(argument, text=function, column=column))
            name = "it" if "it" not in self.program.decls else f"it'{len(self.lines)}"
            self.program = self.program.extended([Decl(name, term)])
            function = name
        return function, (self.program.points.parse_point_for(function, point, "point")
                          if point.strip() else None)

    def _for_expression(self, run: Callable[[], str]) -> str:
        """``run()``, after which the program made for an expression (``it``) is dropped."""
        program = self.program
        try:
            return run()
        finally:
            self.program = program

    def cmd_grad(self, argument: Argument) -> str:
        """``:grad f POINT [--mode reverse|forward|both] [--strategy S]``: value and
        gradient, by backpropagation unless ``--mode`` says otherwise."""
        argument, options = _options(argument, {"mode": ("reverse", "forward", "both"),
                                                "strategy": STRATEGIES})
        if options.get("mode") == "both":
            return self.cmd_grad_both(argument, options)
        return self._for_expression(lambda: self._grad(argument, options))

    def _grad(self, argument: Argument, options: dict[str, str]) -> str:
        name, point = self._name_and_point(argument, ":grad NAME POINT")
        value, gradient = self.program.value_and_grad(
            name, point, mode=options.get("mode", "reverse"),
            strategy=options.get("strategy", self.strategy))
        return f"value: {_show(value)}\ngradient: {_show(gradient)}"

    def cmd_grad_both(self, argument: Argument, options: dict[str, str] | None = None) -> str:
        """``:grad! f POINT``: value and gradient by both modes, side by side."""
        if options is None:
            argument, options = _options(argument, {"strategy": STRATEGIES})
        strategy = options.get("strategy", self.strategy)

        def both() -> str:
            name, point = self._name_and_point(argument, ":grad! NAME POINT")
            value, reverse = self.program.value_and_grad(name, point, strategy=strategy)
            _, forward = self.program.value_and_grad(name, point, mode="forward",
                                                     strategy=strategy)
            rows = [("value:", value), (f"gradient (reverse, {strategy}):", reverse),
                    ("gradient (forward):", forward)]
            width = max(len(label) for label, _ in rows)
            return "\n".join(f"{label:<{width}} {_show(v)}" for label, v in rows)

        return self._for_expression(both)

    def cmd_hessian(self, argument: Argument) -> str:
        """``:hessian f POINT [--mode COMPOSITION] [--wrt NAMES] [--strategy S]``: value,
        gradient and Hessian (forward-over-reverse unless ``--mode`` says otherwise), a row
        per input real, named, as ``lambdad hessian`` prints them."""
        argument, options = _options(argument, {"mode": COMPOSITIONS, "wrt": None,
                                                "strategy": STRATEGIES})
        mode = options.get("mode", COMPOSITIONS[0])

        def run() -> str:
            name, point = self._name_and_point(argument, ":hessian F POINT")
            program = self.program
            if "wrt" in options:
                program, point = program.restricted(name, point, _names(options["wrt"]))
            value, gradient, rows = program.hessian(
                name, point, mode=mode, strategy=options.get("strategy", self.strategy))
            return format_hessian(value, gradient, rows, program.input_names(name, point),
                                  mode)

        return self._for_expression(run)

    def cmd_jvp(self, argument: Argument) -> str:
        """``:jvp f POINT --dir VECTOR``: value and directional derivative, by forward
        mode."""
        def run() -> str:
            name, point, direction = self._point_and_direction(argument,
                                                               ":jvp F POINT --dir VECTOR")
            value, tangent = self.program.jvp(name, point, direction)
            return f"value: {_show(value)}\nderivative: {_show(tangent)}"

        return self._for_expression(run)

    def cmd_hvp(self, argument: Argument) -> str:
        """``:hvp f POINT --dir VECTOR``: value, gradient and Hessian-vector product, by
        forward mode over reverse mode."""
        def run() -> str:
            name, point, direction = self._point_and_direction(argument,
                                                               ":hvp F POINT --dir VECTOR")
            value, gradient, product = self.program.hvp(name, point, direction)
            return (f"value: {_show(value)}\ngradient: {_show(gradient)}\n"
                    f"hessian-vector product: {_show(product)}")

        return self._for_expression(run)

    def _point_and_direction(self, argument: Argument, usage: str) -> tuple[str, Any, Any]:
        """The function, the point and the ``--dir`` vector written in ``argument`` (the
        vector may hold blanks and signs: it is all that follows ``--dir``)."""
        before, flag, direction = argument.text.partition("--dir")
        if not flag or not direction.strip():
            raise UsageError(f"usage: {usage}")
        name, point = self._name_and_point(attrs.evolve(argument, text=before.rstrip()), usage)
        return name, point, self.program.points.parse_point_for(name, direction.strip(), "--dir")

    def cmd_jacobian(self, argument: Argument) -> str:
        """``:jacobian f POINT [--mode forward|reverse] [--wrt NAMES]``: value and Jacobian,
        by the cheaper mode unless told, as ``lambdad jacobian`` prints them."""
        argument, options = _options(argument, {"mode": ("forward", "reverse"), "wrt": None})

        def run() -> str:
            name, point = self._name_and_point(argument, ":jacobian F POINT")
            wrt = _names(options["wrt"]) if "wrt" in options else None
            result = self.program.jacobian(name, point, mode=options.get("mode"), wrt=wrt)
            return format_jacobian(result, chosen="mode" not in options)

        return self._for_expression(run)

    def cmd_graph(self, argument: Argument) -> str:
        """``:graph f POINT [--mode reverse|forward] [-o OUT.dot|.svg|.png]``: the evaluated
        computational graph, as DOT text, or written to OUT (as ``lambdad graph``)."""
        output = None
        found = _OUTPUT.search(argument.text)
        if found is not None:  # before or after --mode
            output = found.group(1)
            text = argument.text[:found.start()] + argument.text[found.end():]
            argument = attrs.evolve(argument, text=text)
        argument, options = _options(argument, {"mode": ("reverse", "forward")})

        def run() -> str:
            name, point = self._name_and_point(argument, ":graph F POINT [-o OUT]")
            table = trace.trace(self.program, name, point,
                                mode=options.get("mode", "reverse"), strategy="factored")
            point_text = _function_and_rest(argument.text)[1].strip()
            drawn = graph.graph_of(table, title=f"{_function_and_rest(argument.text)[0]} "
                                                f"at {point_text}")
            if output is None:
                return drawn.dot().rstrip("\n")
            return graph.write_graph(drawn, output)

        return self._for_expression(run)

    def _transformed(self, argument: Argument, forward: bool) -> str:
        """The transformed program of the named definition (with a ``main`` computing value
        and gradient when a point follows); raises UsageError."""
        usage = f":{'forward' if forward else 'reverse'} NAME [POINT]"
        name, point = self._name_and_point(argument, usage, point_needed=False)
        text = self.program.show(name, forward=forward, reverse=not forward, at=point).rstrip()
        return highlight.ansi(text) if self.colour else text

    def cmd_forward(self, argument: Argument) -> str:
        """``:forward f [POINT]``: the forward-mode program of ``f``."""
        return self._transformed(argument, forward=True)

    def cmd_reverse(self, argument: Argument) -> str:
        """``:reverse f [POINT]``: the reverse-mode (backpropagation) program of ``f``."""
        return self._transformed(argument, forward=False)

    def cmd_trace(self, argument: Argument) -> str:
        """``:trace f POINT [--mode forward|reverse] [--strategy S]``: the evaluation trace,
        one row per primitive, with tangents (forward mode, the default) or adjoints
        (``--mode reverse``, or ``reverse`` alone after the point)."""
        argument, options = _options(argument, {"mode": ("forward", "reverse"),
                                                "strategy": STRATEGIES})
        text, mode = argument.text, options.get("mode", "forward")
        last = text.rsplit(None, 1)
        if len(last) == 2 and last[1] in ("forward", "reverse"):
            text, mode = last

        def run() -> str:
            name, point = self._name_and_point(attrs.evolve(argument, text=text),
                                               ":trace NAME POINT [--mode reverse]")
            # The session's strategy, unless it fuses: a fused region has one adjoint, not
            # one per operation, so the trace runs ←D as the paper writes it (factored).
            session = self.strategy if not strategy_named(self.strategy).fuses else "factored"
            table = trace.trace(self.program, name, point, mode=mode,
                                strategy=options.get("strategy", session))
            return trace.format_trace(table, self.sources)

        return self._for_expression(run)

    def cmd_check(self, argument: Argument) -> str:
        """``:check [f [POINT]]``: forward mode, both reverse strategies and central finite
        differences compared, at POINT or at a few random points (every differentiable
        function without a name)."""
        if not argument.text:
            return gradcheck.check(self.program).render()
        name, _, point = argument.text.partition(" ")
        self.program.require(name)
        return gradcheck.check(self.program, name, point=point.strip() or None).render()

    def cmd_load(self, argument: Argument) -> str:
        """``:load FILE``."""
        if not argument.text:
            raise UsageError("usage: :load FILE")
        return self.load(argument.text)

    def cmd_reload(self, argument: Argument) -> str:
        """``:reload``: load the last file again."""
        if self.file is None:
            raise UsageError("no file loaded yet; use :load FILE")
        return self.load(self.file)

    def cmd_strategy(self, argument: Argument) -> str:
        """``:strategy factored|naive|fused`` (without argument: the current one)."""
        if argument.text:
            strategy_named(argument.text)
            self.strategy = argument.text
            self.program.set_strategy(self.strategy)
        return f"strategy: {self.strategy}"

    def cmd_env(self, argument: Argument) -> str:
        """``:env``: every name defined so far with its type."""
        rows = [f"{name} : {scheme}" for name, scheme in self.program.types()]
        return "\n".join(rows) if rows else "no definitions yet"

    def cmd_help(self, argument: Argument) -> str:
        """``:help``: the commands."""
        width = max(len(c.usage) for c in COMMANDS)
        return "\n".join([
            "Enter a definition (def f x = ..., x = e, or let x = e), an expression, or a command "
            "(F: a name or a parenthesised expression; --strategy S sets the strategy of "
            "one command; a unique prefix of a command will do):",
            *(f"  {c.usage:<{width}}  {c.summary}" for c in COMMANDS),
            "An unfinished line continues on the next (prompt ..); a definition written on "
            "several lines goes on with indented lines and lines starting with an operator, "
            "up to a blank line; Ctrl-C cancels the input or a running evaluation; Ctrl-D "
            "leaves.",
        ])

    def cmd_quit(self, argument: Argument) -> str:
        """``:quit``: leave the REPL."""
        raise Quit()


def _show(value: Any) -> str:
    """Python data in the language's syntax."""
    return format_result(value)


COMMANDS: tuple[Command, ...] = (
    Command(("type", "t"), ":type EXPR, :t EXPR", "the type of an expression",
            Session.cmd_type),
    Command(("grad", "gr"), ":grad F POINT [--mode M]",
            "value and gradient (reverse mode, or --mode forward|both)",
            Session.cmd_grad),
    Command(("grad!",), ":grad! F POINT", "value and gradient by both modes, side by side",
            Session.cmd_grad_both),
    Command(("hessian",), ":hessian F POINT [--mode M]",
            "value, gradient and Hessian (forward mode over reverse mode unless --mode)",
            Session.cmd_hessian),
    Command(("jvp",), ":jvp F POINT --dir V", "value and directional derivative (forward mode)",
            Session.cmd_jvp),
    Command(("hvp",), ":hvp F POINT --dir V", "Hessian-vector product (forward over reverse)",
            Session.cmd_hvp),
    Command(("jacobian",), ":jacobian F POINT [--mode M]",
            "value and Jacobian, a row per output real, by the cheaper mode unless --mode",
            Session.cmd_jacobian),
    Command(("graph",), ":graph F POINT [-o OUT]",
            "the computational graph: DOT text, or a picture written to OUT (.svg, .png)",
            Session.cmd_graph),
    Command(("forward",), ":forward NAME [POINT]", "the forward-mode program of NAME",
            Session.cmd_forward),
    Command(("reverse", "backward"), ":reverse NAME [POINT]",
            "the reverse-mode (backpropagation) program of NAME", Session.cmd_reverse),
    Command(("trace",), ":trace F POINT [--mode M]",
            "the evaluation trace: a row per primitive with tangents (--mode reverse: "
            "adjoints)",
            Session.cmd_trace),
    Command(("check",), ":check [NAME [POINT]]",
            "gradient check: forward, reverse and finite differences agree",
            Session.cmd_check),
    Command(("load", "l"), ":load FILE, :l FILE",
            "load FILE's definitions (replacing the session's)", Session.cmd_load),
    Command(("reload", "r"), ":reload, :r", "load the last file again", Session.cmd_reload),
    Command(("strategy",), ":strategy factored|naive|fused",
            "how backpropagators are evaluated", Session.cmd_strategy),
    Command(("env",), ":env", "the names defined so far with their types", Session.cmd_env),
    Command(("help", "h", "?"), ":help", "this list", Session.cmd_help),
    Command(("quit", "q"), ":quit", "leave (also Ctrl-D)", Session.cmd_quit),
)


def find_command(word: str) -> Command:
    """The command spelt ``word`` (without the colon), or the one command that a name
    starting with ``word`` names (``:env`` as ``:en``), as in ghci.  Raises UsageError for an
    unknown or ambiguous word."""
    for command in COMMANDS:
        if word in command.names:
            return command
    matches = [command for command in COMMANDS
               if word and any(name.startswith(word) for name in command.names)]
    # A command whose name begins every other match's wins (`:grad` over `:grad!`).
    for command in matches:
        if all(any(name.startswith(command.names[0]) for name in other.names)
               for other in matches):
            return command
    if matches:
        spelled = ", ".join(f":{command.names[0]}" for command in matches)
        raise UsageError(f"ambiguous command :{word}: {spelled}")
    raise UsageError(f"unknown command :{word}; :help lists the commands")


# An option after a command's arguments, as on the command line: `--mode reverse`.
_OPTION_AT_END = re.compile(r"(?s)(.*?)\s+--([a-z][a-z-]*)(?:=|\s+)([^\s-][^\s]*)\s*$")


# `-o FILE` (or `--output FILE`) among `:graph`'s options.
_OUTPUT = re.compile(r"\s(?:-o|--output)(?:=|\s+)(\S+)")


def _names(text: str) -> list[str]:
    """The names of ``--wrt a,b``."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _options(argument: Argument, allowed: dict[str, tuple[str, ...] | None]
             ) -> tuple[Argument, dict[str, str]]:
    """``argument`` without the ``--name value`` options written after it, and those options
    (``allowed`` gives each option's values, None for any); raises UsageError for an
    unknown option or value."""
    text, options = argument.text, {}
    while (match := _OPTION_AT_END.fullmatch(text)) is not None:
        text, name, value = match.group(1), match.group(2), match.group(3)
        if name not in allowed:
            known = ", ".join(f"--{option}" for option in allowed) or "none"
            raise UsageError(f"unknown option --{name} (options here: {known})")
        if allowed[name] is not None and value not in allowed[name]:
            raise UsageError(f"--{name} takes {' or '.join(allowed[name])}, not `{value}`")
        options.setdefault(name, value)
    return attrs.evolve(argument, text=text.rstrip()), options


def _function_and_rest(text: str) -> tuple[str, str]:
    """The function written first in ``text`` (a word, or a parenthesised expression) and
    the text after it."""
    text = text.strip()
    if not text.startswith("("):
        function, _, rest = text.partition(" ")
        return function, rest
    depth = 0
    for index, char in enumerate(text):
        depth += char in "(["
        depth -= char in ")]"
        if depth == 0:
            return text[:index + 1], text[index + 1:]
    return text, ""


def command_words() -> list[str]:
    """Every spelling of every command (``:type``, ``:t``, ...), for completion."""
    return [":" + name for command in COMMANDS for name in command.names]


# ---------------------------------------------------------------- the loop


class Console:
    """Where entries are read from and results written to; one entry at a time."""

    def __init__(self, session: Session, out: TextIO, err: TextIO):
        self.session = session
        self.out = out
        self.err = err
        self.failures = 0

    def entries(self) -> Iterator[tuple[str, int]]:
        """Each entry read, with the number of its first line in ``<repl>``."""
        raise NotImplementedError

    def evaluate(self, text: str, line: int) -> None:
        """Run one entry and print its output or its error; raises Quit."""
        debug = os.environ.get("LAMBDAD_DEBUG") == "1"
        try:
            output = self.session.execute(text, line)
        except Quit:
            raise
        except LambdadError as error:
            self.failures += 1
            print(render(error, self.session.sources), file=self.err, flush=True)
            return
        except KeyboardInterrupt:
            # The interpreter restores its state on the way out, so the session goes on.
            self.failures += 1
            print("interrupted", file=self.err, flush=True)
            return
        except Exception as exc:  # an internal error must not end the session
            if debug:
                raise
            self.failures += 1
            print(f"internal error: {type(exc).__name__}: {exc}\n"
                  "(this is a bug in lambdad; run with LAMBDAD_DEBUG=1 for a traceback)",
                  file=self.err, flush=True)
            return
        if output:
            print(output, file=self.out, flush=True)

    def loop(self) -> None:
        """Run every entry until the input ends or ``:quit``."""
        try:
            for text, line in self.entries():
                self.evaluate(text, line)
        except Quit:
            pass


class PlainConsole(Console):
    """Lines from a pipe or a file: no prompts, no editing."""

    def __init__(self, session: Session, stream: TextIO, out: TextIO, err: TextIO):
        super().__init__(session, out, err)
        self.stream = stream

    def entries(self) -> Iterator[tuple[str, int]]:
        """Each entry of the stream (see :class:`EntrySplitter`)."""
        splitter = EntrySplitter(self.session)
        for raw in _lines(self.stream):
            if isinstance(raw, int):
                number = self.session.record("")
                self.failures += 1
                error = UsageError(f"line {number} has {raw} characters, more than the "
                                   f"{MAX_ENTRY_CHARS} an entry may have; it was not read")
                print(render(error), file=self.err, flush=True)
                continue
            yield from splitter.feed(raw.rstrip("\n").rstrip("\r"))
        yield from splitter.rest()


class TerminalConsole(Console):
    """A terminal: prompt_toolkit for editing, history, completion; Ctrl-C cancels."""

    def __init__(self, session: Session, out: TextIO, err: TextIO):
        super().__init__(session, out, err)
        session.colour = highlight.wants_color(out)
        self.history = EntryHistory(open_history())
        self.prompt = PromptSession(
            history=self.history,
            lexer=PygmentsLexer(highlight.LambdadLexer) if session.colour else None,
            completer=NameCompleter(session),
            complete_style=CompleteStyle.READLINE_LIKE,
            complete_while_typing=False,
            enable_history_search=False,
        )

    def entries(self) -> Iterator[tuple[str, int]]:
        """Each entry typed or pasted.  What one prompt returns may hold several lines (a
        bracketed paste, a multi-line entry recalled from the history): it is split into
        entries as a piped script is (:func:`split_entries`), and an unfinished last entry
        continues at the prompt ``.. ``.  Everything read for one prompt is one history
        entry.  Ctrl-C drops what was typed; Ctrl-D ends the input."""
        while True:
            try:
                text = self.prompt.prompt(PROMPT)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
            typed = [text]
            splitter = EntrySplitter(self.session)
            try:
                yield from splitter.feed(text)
                while splitter.pending:
                    line = self.prompt.prompt(CONTINUATION)
                    typed.append(line)
                    yield from splitter.feed(line)
            except KeyboardInterrupt:
                continue
            except EOFError:
                if splitter.waiting:  # a complete definition: Ctrl-D runs it, then leaves
                    yield from splitter.rest()
                return
            finally:
                self.history.append_entry("\n".join(typed))


class EntrySplitter:
    """Joins lines into entries: a line, or lines joined while the entry is unfinished (an
    open bracket, a trailing operator or ``=``).  A definition written on several lines
    goes on, as in Haskell, with every line that is indented or starts with an infix
    operator (``- 2 * x + 1``), and ends at a blank line or at a line that is neither.  A
    blank line ends an unfinished entry anyway (its error is reported instead of
    swallowing what follows), and a ``:command`` line ends it and runs.  Every line is
    recorded in the session's ``<repl>`` source."""

    def __init__(self, session: Session):
        self.session = session
        self.pending: list[str] = []
        self.first = 0
        # Whether the pending entry is a complete definition that later lines may continue.
        self.waiting = False

    def feed(self, text: str) -> Iterator[tuple[str, int]]:
        """The entries that the lines of ``text`` complete, with the number of the first
        line of each in ``<repl>``."""
        for line in text.split("\n"):
            line = line.rstrip("\r")
            stripped = line.strip()
            if self.pending and (stripped.startswith(":") or (
                    self.waiting and stripped and not continues(line))):
                yield from self.rest()
            number = self.session.record(line)
            if not self.pending:
                self.first = number
            self.pending.append(line)
            joined = "\n".join(self.pending)
            if stripped and is_incomplete(joined):
                self.waiting = False
                continue
            if stripped and len(self.pending) > 1 and _DEFINITION.match(joined):
                self.waiting = True
                continue
            yield from self.rest()

    def rest(self) -> Iterator[tuple[str, int]]:
        """The entry pending, unfinished or waiting for more lines, if any."""
        if self.pending:
            yield "\n".join(self.pending), self.first
            self.pending = []
            self.waiting = False


# An entry that defines a name: `def`, `let` (at the prompt: a definition), `primitive`, or
# `NAME [: type] =`.
_DEFINITION = re.compile(r"\s*(?:(?:def|let|primitive)(?![A-Za-z0-9_'])"
                         r"|[A-Za-z_][A-Za-z0-9_']*\s*(?::[^=]*)?=(?!=))")
# A line that starts with an infix operator (not a comment's `--`).
_OPERATOR_FIRST = re.compile(r"\s*(?:\+\+|<\+>|[+*/^]|-(?!-)|==|!=|<=|>=|<|>|&&|\|\||!!|⊕)")


def continues(line: str) -> bool:
    """Whether ``line`` continues a definition written on the lines before it: it is
    indented or starts with an infix operator."""
    return line[:1] in (" ", "\t") or _OPERATOR_FIRST.match(line) is not None


def _lines(stream: TextIO) -> Iterator[str | int]:
    """The lines of ``stream``; a line longer than MAX_ENTRY_CHARS is read in pieces and
    skipped, its length given in its place, so an endless line cannot exhaust memory."""
    while True:
        line = stream.readline(MAX_ENTRY_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_ENTRY_CHARS and not line.endswith("\n"):
            skipped = len(line)
            while (rest := stream.readline(MAX_ENTRY_CHARS)) and not rest.endswith("\n"):
                skipped += len(rest)
            skipped += len(rest)
            yield skipped
            continue
        yield line


class EntryHistory(History):
    """The history of whole entries: what was read for one prompt, continuation lines and
    pasted lines included, is one item (recalled whole by Up), not one item per line."""

    def __init__(self, backing: History):
        super().__init__()
        self.backing = backing

    def load_history_strings(self) -> Iterable[str]:
        return self.backing.load_history_strings()

    def append_string(self, string: str) -> None:
        """Lines accepted at a prompt are not entries: :meth:`append_entry` stores them."""

    def store_string(self, string: str) -> None:
        self.backing.store_string(string)

    def append_entry(self, text: str) -> None:
        """Add the entry ``text`` (of one or more lines), unless blank or a repeat of the
        last one."""
        if not text.strip():
            return
        strings = self.get_strings()
        if not strings or strings[-1] != text:
            super().append_string(text)


def open_history() -> History:
    """The history kept across runs: ``$LAMBDAD_HISTORY``, or ``~/.lambdad_history``;
    kept in memory only if that file cannot be written."""
    location = os.environ.get(HISTORY_VARIABLE) or str(Path.home() / HISTORY_FILE)
    try:
        with open(location, "a", encoding="utf-8"):
            pass
    except OSError:
        return InMemoryHistory()
    return FileHistory(location)


class NameCompleter(Completer):
    """Tab completion: ``:commands`` at the start of a line, file names after ``:load``,
    otherwise the names in scope (definitions, prelude, built-ins, keywords)."""

    def __init__(self, session: Session):
        self.session = session
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event) -> Iterable[Completion]:
        """The completions of the word before the cursor; never fails."""
        before = document.text_before_cursor
        stripped = before.lstrip()
        if stripped.startswith(":") and " " not in stripped:
            for word in command_words():
                if word.startswith(stripped):
                    yield Completion(word, start_position=-len(stripped))
            return
        if stripped.startswith(":load "):
            argument = stripped.partition(" ")[2].lstrip()
            yield from self.paths.get_completions(Document(argument), complete_event)
            return
        word = _word_before(before)
        if not word:
            return
        for name in self.session.completions():
            if name.startswith(word):
                yield Completion(name, start_position=-len(word))


def _word_before(text: str) -> str:
    """The identifier being typed at the end of ``text`` (letters, digits, ``_``, ``'``)."""
    end = len(text)
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_'"):
        start -= 1
    word = text[start:end]
    return word if word and not word[0].isdigit() else ""


def main(file: str | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run the REPL (with ``file``'s definitions loaded) until ``:quit`` or end of input.
    Returns the exit status: 0, or, when reading from a pipe, 1 if some entry failed."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    session = Session()
    interactive = stdin.isatty() and out.isatty()
    console: Console
    if interactive:
        console = TerminalConsole(session, out, err)
        print("lambdad: :help lists the commands, :quit or Ctrl-D leaves", file=out)
    else:
        console = PlainConsole(session, stdin, out, err)
    if file is not None:
        try:
            message = session.load(file)
        except LambdadError as error:
            console.failures += 1
            print(render(error, session.sources), file=err, flush=True)
        else:
            if interactive:
                print(message, file=out)
    try:
        console.loop()
    except KeyboardInterrupt:
        # Ctrl-C while a pipe is being read: stop like the other commands do.
        print("interrupted", file=err)
        return 130
    return 1 if console.failures and not interactive else 0
