"""lambdad in Jupyter: ``%load_ext lambdad`` (needs the ``notebook`` extra: IPython).

A ``%%lambdad`` cell defines (or redefines) top-level names of the notebook's program, as
at the REPL: a redefinition replaces the old definition for what follows.  A cell holding
one expression instead prints its value and type.  Line magics run the REPL's commands on
that program and return rich results — HTML in a notebook, text in a terminal.  A name the
notebook's program does not define is looked for in the programs the notebook's Python
variables hold (``prog = lambdad.load(...)``), if exactly one of them defines it:

    %grad NAME POINT [forward]               value and gradient
    %show NAME [POINT] [forward|raw]         the backpropagation (or forward-mode) program
    %trace NAME POINT [reverse]              the trace table (forward mode by default)
    %graph NAME POINT [forward] [constants]  the computational graph, drawn as SVG
    %plot NAME A B [ORDER]                   NAME and its derivatives over [A, B] (a list
                                             [R]: %plot NAME, against its index)
    %check [NAME [POINT]]                    the gradient check
    %hessian NAME POINT                      value, gradient and Hessian
    %lambdad EXPR                            the value and type of an expression (without
                                             EXPR: the program's definitions)
    %lambdad_load FILE                       the definitions of a .lam file (and of the
                                             files it imports) in place of the notebook's
    %lambdad_reload                          the last file loaded, read again
    %lambdad_use PROGRAM                     a Program made in Python (``lambdad.load``)
                                             becomes the notebook's

Errors show as the command line shows them (``<cell 2>:3:9: type error: ...`` with a
caret), never as a Python traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from . import gradcheck, plot, rich
from .errors import LambdadError, ParseError, UsageError, render
from .graph import Graph, graph_of
from .parser import parse_entry, parse_module
from .plot import Plot
from .pipeline import Program
from .printer import print_type
from .results import format_python
from .sources import read_source
from .syntax import Decl
from .trace import Trace, trace
from .values import written

NOTEBOOK_FILE = "<notebook>"
MODES = ("forward", "reverse")


class NotebookSession:
    """The program a notebook builds cell by cell, and the source texts its errors point
    into (cells are ``<cell 1>``, ``<cell 2>``, …; a magic's arguments ``<%grad>``, …)."""

    def __init__(self, namespace: Mapping[str, Any] | None = None) -> None:
        self.program = Program("", NOTEBOOK_FILE)
        self.cells = 0
        self.file: str | None = None  # the file loaded last
        # The notebook's Python variables (the shell's namespace), where an error looks for
        # a program that defines the name asked for.
        self.namespace: Mapping[str, Any] = namespace if namespace is not None else {}

    @property
    def sources(self) -> dict[str, str]:
        return self.program.sources

    # ------------------------------------------------------------ programs from elsewhere

    def load(self, path: str) -> rich.Source:
        """``%lambdad_load FILE``: the definitions of the file ``path`` and of the files it
        imports, in place of the notebook's (those of the cells run before are forgotten,
        as at the REPL's ``:load``), with their types.  Raises UsageError if the file cannot
        be read, and its import, parse or type error otherwise, leaving the program
        unchanged."""
        path = path.strip()
        if not path:
            raise UsageError("usage: %lambdad_load FILE")
        text = read_source(path)
        self.sources[path] = text
        program = Program(text, path, sources=self.sources)
        self.program, self.file = program, path
        return self._summary(f"-- {path}", program)

    def reload(self, line: str = "") -> rich.Source:
        """``%lambdad_reload``: the file loaded last, read again (with its imports)."""
        if self.file is None:
            raise UsageError("no file loaded yet; use %lambdad_load FILE")
        return self.load(self.file)

    def use(self, program: Any, spelled: str = "the program") -> rich.Source:
        """``%lambdad_use PROGRAM``: the :class:`Program` ``program`` (made in Python, by
        ``lambdad.load`` or ``lambdad.loads``) becomes the notebook's, with its definitions'
        types; cells and magics work on it from now on (``program`` itself is not changed:
        cells make new programs).  Raises UsageError if it is not a Program."""
        if not isinstance(program, Program):
            raise UsageError(f"%lambdad_use needs a lambdad program (lambdad.load(...)); "
                             f"{spelled} is a {type(program).__name__}")
        adopted = program.extended([])
        adopted.sources = dict(program.sources)  # the cells' texts go in the notebook's
        self.program = adopted
        return self._summary(f"-- {spelled}: {program.file}", adopted)

    @staticmethod
    def _summary(title: str, program: Program) -> rich.Source:
        """``title`` over the types of ``program``'s definitions."""
        rows = [f"{name} : {scheme}" for name, scheme in program.types()]
        return rich.Source("\n".join([title, *rows] if rows else [title, "-- no definitions"]))

    def program_for(self, name: str) -> Program:
        """The program a magic asked for ``name`` works on: the notebook's when it defines
        ``name``; otherwise the one program held by a Python variable of the notebook
        (``prog = lambdad.load(...)``) that defines it.  Raises UsageError when none does,
        or when several do (the note says how to choose one: ``%lambdad_use``)."""
        if name in self.program.decls:
            return self.program
        holders = sorted((variable, value) for variable, value in list(self.namespace.items())
                         if isinstance(value, Program) and not variable.startswith("_")
                         and name in value.decls)
        if len({id(program) for _, program in holders}) == 1:
            program = holders[0][1]
            self.sources.update(program.sources)  # to show where its errors are
            return program
        try:
            self.program.require(name)  # raises: the notebook's program does not define it
        except UsageError as error:
            if holders:
                spelled = ", ".join(f"`{variable}`" for variable, _ in holders)
                error.notes += (f"the Python variables {spelled} hold programs that define "
                                f"it: `%lambdad_use {holders[0][0]}` makes one the "
                                "notebook's program",)
            raise
        raise AssertionError(f"the notebook's program defines no `{name}`, yet require passed")

    def run_cell(self, text: str, number: int | None = None) -> rich.Source:
        """Adds the cell's definitions (replacing older ones of the same names) and returns
        their types; a cell that is one expression gives its value and type instead.
        Errors point into ``<cell NUMBER>`` (the shell's execution count; by default the
        number of cells run).  Raises the cell's parse, type or runtime error, leaving the
        program unchanged."""
        self.cells += 1
        file = f"<cell {self.cells if number is None else number}>"
        self.sources[file] = text
        bound = tuple(self.program.decls)
        try:
            decls = list(parse_module(text, file, predefined=bound,
                                      allow_redefinition=True).decls)
        except ParseError as module_error:
            try:
                entry = parse_entry(text, file, bound=bound)
            except ParseError:
                raise module_error from None
            if not isinstance(entry, Decl):
                value, type_ = self.program.evaluate_term(entry)
                return rich.Source(f"{format_python(written(value, type_))} : "
                                   f"{print_type(type_)}")
            decls = [entry]
        if not decls:
            return rich.Source("-- no definitions")
        self.program = self.program.extended(decls)
        return rich.Source("\n".join(f"{d.name} : {self.program.scheme(d.name)}"
                                     for d in decls))

    def evaluate(self, text: str, number: int | None = None) -> rich.Source:
        """The value and type of the expression ``text``; without one, the program's
        definitions as written, each under its type."""
        if not text.strip():
            return rich.Source(self.program.source().rstrip("\n") or "-- no definitions")
        return self.run_cell(text, number)

    # ------------------------------------------------------------ commands

    def _arguments(self, line: str, command: str, usage: str, point_needed: bool = True,
                   words: tuple[str, ...] = ()) -> tuple[Program, str, Any, str | None]:
        """The program to work on (:meth:`program_for`), the name, the point (None if
        absent and not needed) and the trailing word (one of ``words``) of a magic's
        arguments; raises UsageError."""
        text = line.strip()
        word = None
        last = text.rsplit(None, 1)
        if len(last) == 2 and last[1] in words:
            text, word = last
        name, _, point_text = text.partition(" ")
        if not name or (point_needed and not point_text.strip()):
            raise UsageError(f"usage: {usage}")
        program = self.program_for(name)
        point = None
        if point_text.strip():
            where = f"<{command}>"
            self.sources[where] = point_text
            point = program.points.parse_point_for(name, point_text, where)
        return program, name, point, word

    def grad(self, line: str) -> rich.Lines:
        """``%grad NAME POINT [forward]``: value and gradient."""
        program, name, point, word = self._arguments(line, "%grad",
                                                     "%grad NAME POINT [forward]", words=MODES)
        value, gradient = program.value_and_grad(name, point, mode=word or "reverse")
        return rich.Lines([("value", format_python(value)),
                           ("gradient", format_python(gradient))])

    def show(self, line: str) -> rich.Source:
        """``%show NAME [POINT] [forward|backward|raw]``: a transformed program."""
        program, name, point, word = self._arguments(
            line, "%show", "%show NAME [POINT] [forward|backward|raw]", point_needed=False,
            words=("forward", "backward", "raw"))
        forward = word == "forward"
        return rich.Source(program.show(name, forward=forward, backward=not forward,
                                        at=point, raw=word == "raw").rstrip("\n"))

    def trace(self, line: str) -> Trace:
        """``%trace NAME POINT [reverse]``: the trace table."""
        program, name, point, word = self._arguments(line, "%trace",
                                                     "%trace NAME POINT [reverse]", words=MODES)
        return trace(program, name, point, mode=word or "forward")

    def graph(self, line: str) -> Graph:
        """``%graph NAME POINT [forward] [constants]``: the computational graph (adjoints by
        default; ``constants`` also draws the operations that read no input)."""
        words = line.split()
        constants = len(words) > 2 and words[-1] == "constants"
        if constants:
            line = line.rstrip()[:-len("constants")]
        program, name, point, word = self._arguments(
            line, "%graph", "%graph NAME POINT [forward] [constants]", words=MODES)
        point_text = line.strip().partition(" ")[2]
        if word is not None:
            point_text = point_text.rsplit(None, 1)[0]
        return graph_of(trace(program, name, point, mode=word or "reverse"),
                        f"{name} at {point_text.strip()}", constants)

    def plot(self, line: str) -> Plot:
        """``%plot NAME A B [ORDER]``: a function ``R -> R`` and its first ORDER derivatives
        (default 1) over [A, B]; ``%plot NAME``: a list ``[R]`` against its index."""
        words = line.split()
        if len(words) not in (1, 3, 4):
            raise UsageError("usage: %plot NAME A B [ORDER] (a function R -> R), or "
                             "%plot NAME (a list [R])")
        name, bounds = words[0], words[1:3]
        program = self.program_for(name)
        start, stop = (plot.bound_of(program, text, "%plot") for text in bounds) \
            if bounds else (None, None)
        order = None
        if len(words) == 4:
            if not words[3].isdigit():
                raise UsageError(f"%plot: the order is a whole number, not {words[3]!r}")
            order = int(words[3])
        return plot.plot_of(program, name, start, stop, order)

    def check(self, line: str) -> gradcheck.Report:
        """``%check [NAME [POINT]]``: the gradient check (every function without a name)."""
        if not line.strip():
            return gradcheck.check(self.program)
        program, name, point, _ = self._arguments(line, "%check", "%check [NAME [POINT]]",
                                                  point_needed=False)
        return gradcheck.check(program, name, point=point)

    def hessian(self, line: str) -> rich.Matrix:
        """``%hessian NAME POINT``: value, gradient and Hessian (forward over reverse)."""
        program, name, point, _ = self._arguments(line, "%hessian", "%hessian NAME POINT")
        value, gradient, rows = program.hessian(name, point)
        names = program.input_names(name, point)
        return rich.Matrix([("value", format_python(value)),
                            ("gradient", format_python(gradient))], "hessian", names,
                           [[format_python(r) for r in _reals(row)] for row in rows],
                           [format_python(row) for row in rows])


def _reals(data: Any) -> list[float]:
    """The reals of Python data (floats in tuples and lists), left to right."""
    found: list[float] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        else:
            found.append(item)
    return found


@magics_class
class LambdadMagics(Magics):
    """The cell and line magics over one :class:`NotebookSession`."""

    def __init__(self, shell: Any, session: NotebookSession):
        super().__init__(shell)
        self.session = session

    def _cell_number(self) -> int | None:
        """The number of the cell being run (``In [N]``), if the shell tells it."""
        running = getattr(self.shell.displayhook, "exec_result", None)
        return getattr(running, "execution_count", None)

    @cell_magic("lambdad")
    def lambdad_cell(self, line: str, cell: str) -> rich.Source:
        """Define (or redefine) lambdad names; a lone expression is evaluated."""
        return self.session.run_cell(cell, self._cell_number())

    @line_magic("lambdad")
    def lambdad_line(self, line: str) -> rich.Source:
        """The value and type of a lambdad expression."""
        return self.session.evaluate(line, self._cell_number())

    @line_magic("lambdad_load")
    def lambdad_load(self, line: str) -> rich.Source:
        """%lambdad_load FILE: the definitions of a .lam file (following its imports)."""
        return self.session.load(line)

    @line_magic("lambdad_reload")
    def lambdad_reload(self, line: str) -> rich.Source:
        """%lambdad_reload: the file loaded last, read again."""
        return self.session.reload(line)

    @line_magic("lambdad_use")
    def lambdad_use(self, line: str) -> rich.Source:
        """%lambdad_use PROGRAM: a Program made in Python becomes the notebook's."""
        spelled = line.strip()
        if not spelled:
            raise UsageError("usage: %lambdad_use PROGRAM (a Python variable holding "
                             "lambdad.load(...))")
        try:
            value = self.shell.ev(spelled)
        except Exception as exc:  # the user's expression: its own error, said plainly
            raise UsageError(f"%lambdad_use {spelled}: {type(exc).__name__}: {exc}") from None
        return self.session.use(value, f"`{spelled}`")

    @line_magic("grad")
    def grad(self, line: str) -> rich.Lines:
        """%grad NAME POINT [forward]: value and gradient."""
        return self.session.grad(line)

    @line_magic("show")
    def show(self, line: str) -> rich.Source:
        """%show NAME [POINT] [forward|backward|raw]: the transformed program."""
        return self.session.show(line)

    @line_magic("trace")
    def trace(self, line: str) -> Trace:
        """%trace NAME POINT [reverse]: the trace table."""
        return self.session.trace(line)

    @line_magic("graph")
    def graph(self, line: str) -> Graph:
        """%graph NAME POINT [forward] [constants]: the computational graph as SVG."""
        return self.session.graph(line)

    @line_magic("plot")
    def plot(self, line: str) -> Plot:
        """%plot NAME A B [ORDER] | %plot NAME: a function and its derivatives, or a list."""
        return self.session.plot(line)

    @line_magic("check")
    def check(self, line: str) -> gradcheck.Report:
        """%check [NAME [POINT]]: the gradient check."""
        return self.session.check(line)


@magics_class
class HessianMagics(Magics):
    """``%hessian``, for a pipeline that computes Hessians."""

    def __init__(self, shell: Any, session: NotebookSession):
        super().__init__(shell)
        self.session = session

    @line_magic("hessian")
    def hessian(self, line: str) -> rich.Matrix:
        """%hessian NAME POINT: value, gradient and Hessian."""
        return self.session.hessian(line)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lambdad``: a fresh notebook program, the magics, and lambdad's errors
    shown as the command line shows them."""
    session = NotebookSession(ipython.user_ns)
    ipython.register_magics(LambdadMagics(ipython, session))
    if callable(getattr(Program, "hessian", None)):
        ipython.register_magics(HessianMagics(ipython, session))

    def show_error(shell: Any, kind: type, error: LambdadError, tb: Any,
                   tb_offset: int | None = None) -> list[str]:
        # Shown in place of a traceback: printed by a terminal shell, sent by a kernel as
        # the cell's error (so that running all cells stops there).
        message = [render(error, session.sources)]
        shell._showtraceback(kind, error, message)
        return message

    ipython.set_custom_exc((LambdadError,), show_error)
