"""The documentation is tested: every ``lambdad`` command of README.md and docs/*.md runs
verbatim, and prints exactly what the page shows where it shows an output.

Conventions of the pages (docs/index.md explains them to readers too):

- A ```` ```console ```` block holds commands, each on a line starting with ``$ lambdad``,
  followed by its output (stdout and stderr, as a terminal shows them); an output of the
  single line ``…`` is not shown, and the command must only succeed.  The command runs in
  a scratch directory that holds ``programs/`` and ``docs/examples/`` (the repository's
  example files) and an empty ``docs/images/``, so paths read as from the repository root
  and nothing in the repository is written.  ``$ lambdad ... > FILE`` writes the command's
  stdout to FILE there.
- In a ```` ```sh ```` block, a line ``lambdad ...`` (or ``printf '...' | lambdad ...``)
  is a command whose output is not shown: it must succeed.
- Exit status: a shown ``usage error:`` means status 2, another ``error:`` (or a
  ``FAILED:`` / ``NOT CHECKED:`` verdict of ``check`` or ``fuzz``) status 1, otherwise 0.
- ``$ lambdad repl ...`` is followed by a transcript: what the REPL prints before its first
  ``λ> `` prompt appears only on a terminal and is not checked; each entry (a ``λ> `` line
  and its ``.. `` continuation lines) is fed to the REPL through a pipe, and the lines
  between entries are what it must answer.
- A ```` ```lam file=PATH ```` block is the whole of the file PATH, shipped with the
  repository (``docs/examples/`` or a folder of it), which the commands after it name.  A
  ```` ```lam excerpt=PATH ```` block must appear verbatim in PATH.
- In outputs that contain timings, the numbers of ``"seconds"`` are not compared.
- A ```` ```pycon ```` block is a Python session, run as a doctest in the repository root;
  the blocks of a page share their names.

By default commands run in this process through :func:`lambdad.cli.main` (what
``python -m lambdad`` calls), which keeps the test fast; ``LAMBDAD_DOCS_SUBPROCESS=1`` runs
every one as ``python -m lambdad`` instead, and one test always does so for a sample.

The built-in table of docs/language.md is generated from :data:`lambdad.primitives.PRIMITIVES`.
``python tests/test_docs.py --update`` rewrites that table and every console output from
what the commands print now (review the diff before keeping it).
"""

from __future__ import annotations

import contextlib
import doctest
import html
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from conftest import missing_tool
from lambdad import cli, repl
from lambdad.primitives import PRIMITIVES, Primitive
from lambdad.printer import print_type

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLE_FILES = DOCS / "examples"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
# The output shown for a command whose output the page leaves out.
NOT_SHOWN = "…"

PROMPT = "λ> "
CONTINUATION = ".. "
BUILTINS_BEGIN = ("<!-- built-ins: generated from lambdad.primitives.PRIMITIVES by "
                  "`python tests/test_docs.py --update`; do not edit by hand -->")
BUILTINS_END = "<!-- end of built-ins -->"
PRELUDE_BEGIN = ("<!-- prelude: generated from lambdad/prelude.lam by "
                 "`python tests/test_docs.py --update`; do not edit by hand -->")
PRELUDE_END = "<!-- end of prelude -->"
SUBPROCESS = os.environ.get("LAMBDAD_DOCS_SUBPROCESS") == "1"


# ---------------------------------------------------------------- reading the pages


@attrs.frozen
class Entry:
    """One REPL entry of a transcript: its input lines (prompts removed) and the line
    range ``[start, end)`` of the page holding the answer shown for it."""

    text: str
    start: int
    end: int


@attrs.frozen
class Example:
    """``$ lambdad ...`` in a console block of ``page`` (its path from the repository root)
    at 1-based ``line``; the output shown occupies lines ``[start, end)`` (0-based) of the
    page (none when not ``shown``); ``stdin`` is what a ``printf`` pipes into it."""

    page: str
    line: int
    command: str
    expected: str
    start: int
    end: int
    entries: tuple[Entry, ...] = ()
    shown: bool = True
    stdin: str = ""

    @property
    def argv(self) -> list[str]:
        """The arguments after ``lambdad``; fails if the command is not ``lambdad``."""
        words = shlex.split(self.command)
        assert words[0] == "lambdad", f"{self.where}: a console example runs `lambdad`"
        return words[1:]

    @property
    def is_repl(self) -> bool:
        return self.argv[:1] == ["repl"]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@attrs.frozen
class FileBlock:
    """A ```` ```lam file=PATH ```` block: the whole of a file shipped with the repository,
    at ``line`` (1-based) of ``page``."""

    name: str
    text: str
    page: str = ""
    line: int = 0


@attrs.frozen
class Fence:
    """A fenced block: its info string, its body lines and where the body starts (0-based)."""

    info: str
    lines: tuple[str, ...]
    start: int


def fences(text: str) -> Iterator[Fence]:
    """The fenced code blocks of a Markdown page (fences at the start of a line)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = re.match(r"^```(.*)$", lines[i])
        if match is None:
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end] != "```":
            end += 1
        yield Fence(match.group(1).strip(), tuple(lines[start:end]), start)
        i = end + 1


def parse_console(page: str, fence: Fence) -> list[Example]:
    """The examples of one console block."""
    examples = []
    commands = [i for i, line in enumerate(fence.lines) if line.startswith("$ ")]
    for k, i in enumerate(commands):
        end = commands[k + 1] if k + 1 < len(commands) else len(fence.lines)
        body = fence.lines[i + 1:end]
        command = fence.lines[i][2:]
        entries: tuple[Entry, ...] = ()
        if shlex.split(command)[1:2] == ["repl"]:
            entries = tuple(_transcript(body, fence.start + i + 1))
        shown = [line for line in body if line.strip()] != [NOT_SHOWN]
        examples.append(Example(page, fence.start + i + 1, command,
                                "\n".join(body) if shown else "",
                                fence.start + i + 1, fence.start + end, entries, shown))
    return examples


# `printf 'TEXT' | lambdad ...` in a shell block: TEXT (with `\n` escapes) is the input.
_PIPED = re.compile(r"printf '([^']*)' \| (lambdad .*)")


def parse_shell(page: str, fence: Fence) -> list[Example]:
    """The ``lambdad`` commands of a shell block (their output is not shown)."""
    examples = []
    for i, line in enumerate(fence.lines):
        stdin, command = "", " ".join(shlex.split(line, comments=True))
        piped = _PIPED.fullmatch(line.strip())
        if piped is not None:
            stdin, command = piped.group(1).replace("\\n", "\n"), piped.group(2)
        if command.split(" ")[:1] != ["lambdad"]:
            continue
        examples.append(Example(page, fence.start + i + 1, command, "", fence.start + i + 1,
                                fence.start + i + 1, shown=False, stdin=stdin))
    return examples


def _transcript(body: tuple[str, ...], offset: int) -> Iterator[Entry]:
    """The entries of a REPL transcript (see the module docstring)."""
    i = 0
    while i < len(body) and not body[i].startswith(PROMPT):
        i += 1
    while i < len(body):
        lines = [body[i][len(PROMPT):]]
        i += 1
        while i < len(body) and body[i].startswith(CONTINUATION):
            lines.append(body[i][len(CONTINUATION):])
            i += 1
        start = i
        while i < len(body) and not body[i].startswith(PROMPT):
            i += 1
        yield Entry("\n".join(lines), offset + start, offset + i)


def read_page(path: Path) -> list[Example | FileBlock]:
    """The examples and the shipped files of a page, in order."""
    items: list[Example | FileBlock] = []
    page = path.relative_to(ROOT).as_posix()
    for fence in fences(path.read_text(encoding="utf-8")):
        words = fence.info.split()
        if words[:1] == ["console"]:
            items.extend(parse_console(page, fence))
        elif words[:1] == ["sh"]:
            items.extend(parse_shell(page, fence))
        elif words[:1] == ["lam"]:
            for word in words[1:]:
                if word.startswith("file="):
                    items.append(FileBlock(word[len("file="):], "\n".join(fence.lines) + "\n",
                                           page, fence.start))
    return items


def all_examples() -> list[Example]:
    """Every console example of every page, page by page."""
    return [item for page in PAGES for item in read_page(page) if isinstance(item, Example)]


# ---------------------------------------------------------------- running the examples


def _in_process(argv: list[str], stdin: str) -> tuple[int, str]:
    """Exit status and output (stdout and stderr interleaved) of ``lambdad argv``."""
    out = io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = cli.main(argv)
    finally:
        sys.stdin = saved
    return status, out.getvalue()


def _subprocess(argv: list[str], stdin: str) -> tuple[int, str]:
    """The same as :func:`_in_process`, as a separate ``python -m lambdad``."""
    done = subprocess.run([sys.executable, "-m", "lambdad", *argv], input=stdin, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return done.returncode, done.stdout


def run_command(argv: list[str], stdin: str = "", separate: bool = SUBPROCESS
                ) -> tuple[int, str, str]:
    """Exit status, stdout-or-redirected text and shown output of one command line.

    With ``> FILE`` at the end of ``argv``, stdout goes to FILE and only stderr is shown;
    that needs the in-process runner (which cannot separate the streams otherwise)."""
    target = None
    if ">" in argv:
        index = argv.index(">")
        argv, target = argv[:index], argv[index + 1]
    if target is None:
        status, shown = (_subprocess if separate else _in_process)(argv, stdin)
        return status, shown, shown
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = cli.main(argv)
    Path(target).write_text(stdout.getvalue(), encoding="utf-8")
    return status, stdout.getvalue(), stderr.getvalue()


def make_sandbox(directory: Path) -> Path:
    """A scratch directory that looks like the repository root to the examples."""
    (directory / "programs").symlink_to(ROOT / "programs", target_is_directory=True)
    (directory / "docs" / "images").mkdir(parents=True)
    (directory / "docs" / "examples").symlink_to(EXAMPLE_FILES, target_is_directory=True)
    return directory


def run_page(page: Path, directory: Path) -> dict[int, tuple[int, str]]:
    """Runs a page's examples in order in the sandbox ``directory``; the exit status and
    the output of each, by the example's line."""
    results: dict[int, tuple[int, str]] = {}
    with contextlib.chdir(make_sandbox(directory)):
        for item in read_page(page):
            if isinstance(item, FileBlock):
                continue  # shipped: test_file_blocks_are_the_shipped_files
            stdin = "\n".join(entry.text for entry in item.entries)
            stdin += "\n" if stdin else ""
            status, _, shown = run_command(item.argv, stdin or item.stdin)
            results[item.line] = (status, shown)
    return results


def expected_status(output: str) -> int:
    """The exit status an output implies: 2 for a usage error, 1 for another error, else 0."""
    if "usage error:" in output:
        return 2
    if re.search(r"\berror:", output) or re.search(r"^(FAILED|NOT CHECKED):", output, re.M):
        return 1
    return 0


def repl_answer(example: Example) -> str:
    """What the REPL must print for the transcript of ``example``: every answer in turn."""
    lines = example.expected.split("\n")
    first = example.entries[0].start - example.start if example.entries else len(lines)
    return "\n".join(line for line in lines[first:]
                     if not line.startswith((PROMPT, CONTINUATION)))


def shown_output(example: Example) -> str:
    """What running ``example`` must print (for a transcript, the REPL's answers only)."""
    return repl_answer(example) if example.is_repl else example.expected


def needs_graphviz(example: Example) -> bool:
    """Whether the command draws a picture only Graphviz makes (`graph -o OUT.png`; SVG is
    drawn without it)."""
    argv = example.argv
    return argv[:1] == ["graph"] and any(a.endswith((".png", ".pdf")) for a in argv)


def has_timings(example: Example) -> bool:
    """Whether the output shown holds timings, which no run reproduces."""
    return '"seconds"' in example.expected


def without_timings(output: str) -> str:
    """``output`` with the number of every ``"seconds"`` field replaced by ``T``: all the
    rest of an output with timings is compared."""
    return re.sub(r'("seconds": )[0-9.e+-]+', r"\1T", output)


# ---------------------------------------------------------------- the built-in table


def _written(prim: Primitive) -> str:
    """How a built-in is applied in source: ``x + y``, ``-x``, ``sin x``, ``map f xs``."""
    symbol, params = prim.spelling.symbol, prim.params
    if prim.spelling.fixity == "infix":
        return f"{params[0]} {symbol} {params[1]}"
    if prim.spelling.fixity == "prefix":
        return f"{symbol}{params[0]}"
    return " ".join((symbol, *params))


def _partials(prim: Primitive) -> str:
    """The partial derivatives of a real primitive as a table cell ("" for other kinds)."""
    if prim.kind == "array":
        shared = "".join(f"`{name}` = `{text}`; " for name, text in prim.rule.shared)
        return f"{shared}tangent: `{prim.rule.tangent}`; cotangent: `{prim.rule.cotangent}`"
    if prim.kind != "real":
        return ""
    parts = [f"∂{param}: `{text}`" for param, text in zip(prim.params, prim.partials)]
    text = "; ".join(parts)
    if prim.result is not None:
        text += f" (`{prim.result}` = the result)"
    return text


KIND_NOTES = {
    "real": "real function",
    "test": "comparison",
    "logic": "logic",
    "structural": "structure",
    "constant": "locally constant",
    "ad": "differentiation",
    "array": "array (rule as terms)",
}


def builtins_table() -> str:
    """The Markdown table of every primitive, in the table's order."""
    rows = ["| written | type | kind | partial derivatives | description |",
            "|---|---|---|---|---|"]
    for prim in PRIMITIVES.values():
        if prim.kind == "elementwise":
            continue  # (each real primitive on arrays: said once, above the table)
        cells = [f"`{_written(prim)}`", f"`{print_type(prim.type)}`"
                 + (" (other ranks: see its description)" if prim.result_type else ""),
                 KIND_NOTES.get(prim.kind, prim.kind), _partials(prim), prim.doc]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def builtins_region(text: str) -> re.Match | None:
    """Where the generated table sits in a page: group 1, between the two markers."""
    return generated_region(text, BUILTINS_BEGIN, BUILTINS_END)


def generated_region(text: str, begin: str, end: str) -> re.Match | None:
    """Where a generated table sits in a page: group 1, between the two markers."""
    return re.search(re.escape(begin) + r"\n(.*?)\n?" + re.escape(end), text, re.S)


def prelude_table() -> str:
    """The Markdown table of the prelude's definitions, in order: each name with its
    inferred type and the comment above its definition."""
    from lambdad import loads

    text = (ROOT / "lambdad" / "prelude.lam").read_text(encoding="utf-8")
    schemes = loads("").typing.schemes
    rows = ["| name | type | description |", "|---|---|---|"]
    comment: list[str] = []
    for line in text.split("\n"):
        if line.startswith("-- ") and not line.startswith("-- ---"):
            comment.append(line[3:].strip())
        elif line.startswith("def "):
            name = line.split()[1]
            cells = [f"`{name}`", f"`{schemes[name]}`", " ".join(comment)]
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            comment = []
        elif not line.strip():
            comment = []
    return "\n".join(rows)


# ---------------------------------------------------------------- the tests

EXAMPLES = all_examples()


@pytest.fixture(scope="module")
def page_results(tmp_path_factory):
    cache: dict[str, dict[int, tuple[int, str]]] = {}

    def results(page: str) -> dict[int, tuple[int, str]]:
        if page not in cache:
            cache[page] = run_page(ROOT / page, tmp_path_factory.mktemp(Path(page).stem))
        return cache[page]

    return results


def test_the_pages_have_console_examples():
    pages = {example.page for example in EXAMPLES}
    assert {"README.md", "docs/tutorial.md", "docs/transformations.md", "docs/cli.md",
            "docs/language.md", "docs/index.md"} <= pages


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_console_example(example, page_results):
    if needs_graphviz(example) and shutil.which("dot") is None:
        missing_tool("drawing a graph needs Graphviz's `dot` (`apt-get install graphviz`)")
    status, output = page_results(example.page)[example.line]
    if not example.shown:
        assert status == 0, f"{example.where}: `{example.command}` failed:\n{output}"
        return
    expected = shown_output(example)
    if has_timings(example):
        output, expected = without_timings(output), without_timings(expected)
    assert output.rstrip("\n") == expected.rstrip("\n"), (
        f"{example.where}: `{example.command}` printed\n{output}")
    assert status == expected_status(expected), f"{example.where}: exit status {status}"


def test_repl_greetings_say_what_was_loaded():
    """The lines a transcript shows before its first prompt (printed on a terminal only)
    report the file loaded as the REPL does."""
    for example in (e for e in EXAMPLES if e.is_repl and e.entries):
        lines = example.expected.split("\n")
        greeting = lines[:next(i for i, line in enumerate(lines) if line.startswith(PROMPT))]
        loaded = [line for line in greeting if line.startswith("loaded ")]
        files = example.argv[1:]
        if loaded or greeting:
            assert files, f"{example.where}: a greeting without a file loaded"
            with contextlib.chdir(ROOT):
                assert loaded == [repl.Session().load(files[0])], example.where


def test_python_m_lambdad_prints_what_the_in_process_runner_shows(tmp_path):
    """The in-process runner stands for `python -m lambdad`: a sample agrees."""
    sample = [e for e in EXAMPLES if not e.is_repl and not has_timings(e)
              and ">" not in e.argv and e.argv[1:2] and e.argv[1].startswith("programs/")][:2]
    with contextlib.chdir(make_sandbox(tmp_path)):
        for example in sample:
            assert (_subprocess(example.argv, "")[1].rstrip("\n")
                    == example.expected.rstrip("\n")), example.where


@pytest.mark.parametrize("page", [p for p in PAGES if "```pycon" in p.read_text(encoding="utf-8")],
                         ids=lambda p: p.name)
def test_python_sessions_print_what_the_page_shows(page):
    parser, out = doctest.DocTestParser(), io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    names: dict = {}
    with contextlib.chdir(ROOT):
        for fence in fences(page.read_text(encoding="utf-8")):
            if fence.info == "pycon":
                test = parser.get_doctest("\n".join(fence.lines), names, page.name,
                                          str(page), fence.start)
                runner.run(test, out=out.write, clear_globs=False)
                names.update(test.globs)  # a DocTest runs in a copy of ``names``
    assert runner.failures == 0, out.getvalue()


def test_file_blocks_are_the_shipped_files():
    """A `lam file=PATH` block shows the whole of PATH, a file of docs/examples/ (so the
    commands after it run as written from the repository root); every file there is shown
    by some page."""
    blocks = [item for page in PAGES for item in read_page(page) if isinstance(item, FileBlock)]
    assert blocks
    for block in blocks:
        path = ROOT / block.name
        assert EXAMPLE_FILES in path.parents, f"{block.page}:{block.line}: not in docs/examples/"
        assert path.exists() and path.read_text(encoding="utf-8") == block.text, (
            f"{block.page}:{block.line}: differs from {block.name}")
    # (a file that another imports may lie in a folder of docs/examples/)
    assert {path.relative_to(EXAMPLE_FILES) for path in EXAMPLE_FILES.rglob("*.lam")} == {
        (ROOT / block.name).relative_to(EXAMPLE_FILES) for block in blocks}


def test_every_lambdad_command_of_the_pages_is_run():
    """No page shows a `lambdad` command in a block the tests do not read (a plain fence,
    ```text```): only usage lines (FILE, NAME, [options]) and the walk-through of adding a
    primitive to the table, whose commands need that change made first."""
    for page in PAGES:
        if page.name == "adding-a-primitive.md":
            continue
        for fence in fences(page.read_text(encoding="utf-8")):
            if fence.info.split()[:1] in (["console"], ["sh"]):
                continue
            for line in fence.lines:
                command = line.strip().removeprefix("$ ")
                if command.startswith("lambdad ") and not re.search(r"\b[A-Z][A-Z_]*\b|\[",
                                                                    command):
                    raise AssertionError(f"{page.name}:{fence.start}: `{command}` is not run")


def test_lam_excerpts_are_verbatim_from_their_files():
    for page in PAGES:
        for fence in fences(page.read_text(encoding="utf-8")):
            words = fence.info.split()
            for word in words[1:]:
                if words[0] == "lam" and word.startswith("excerpt="):
                    path = ROOT / word[len("excerpt="):]
                    assert "\n".join(fence.lines) in path.read_text(encoding="utf-8"), (
                        f"docs/{page.name}:{fence.start}: not an excerpt of {path.name}")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    found = set()
    for heading in re.findall(r"^#+ (.*)$", _without_fences(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def _without_fences(text: str) -> str:
    return re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)


def test_links_point_at_files_and_headings():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            assert path.exists(), f"{page.name}: broken link {target}"
            if anchor:
                assert anchor in anchors(path.read_text(encoding="utf-8")), (
                    f"docs/{page.name}: no heading for {target}")


def test_builtin_table_is_generated_from_the_primitive_table():
    text = (DOCS / "language.md").read_text(encoding="utf-8")
    region = builtins_region(text)
    assert region is not None and region.group(1) == builtins_table(), (
        "docs/language.md's built-in table is stale: run `python tests/test_docs.py --update`")


def test_prelude_table_is_generated_from_the_prelude():
    text = (DOCS / "language.md").read_text(encoding="utf-8")
    region = generated_region(text, PRELUDE_BEGIN, PRELUDE_END)
    assert region is not None and region.group(1) == prelude_table(), (
        "docs/language.md's prelude table is stale: run `python tests/test_docs.py --update`")


def test_cli_reference_covers_every_command():
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    reference = (DOCS / "cli.md").read_text(encoding="utf-8")
    for name in commands.choices:
        assert f"## `lambdad {name}" in reference, f"docs/cli.md does not document `{name}`"
    for command in repl.COMMANDS:
        for name in command.names:
            assert f"`:{name}" in reference, f"docs/cli.md does not document `:{name}`"


def test_the_graph_picture_of_the_tutorial_shows_the_current_graph():
    """docs/images/baydin-graph.svg is what `lambdad graph` draws now: every line of every
    label of the DOT text appears in the picture (regenerate it with the tutorial's
    command otherwise)."""
    assert "images/baydin-graph.svg" in (DOCS / "tutorial.md").read_text(encoding="utf-8")
    svg = (DOCS / "images" / "baydin-graph.svg").read_text(encoding="utf-8")
    texts = {html.unescape(text) for text in re.findall(r"<text[^>]*>([^<]*)</text>", svg)}
    with contextlib.chdir(ROOT):
        _, dot = _in_process(["graph", "programs/baydin.lam", "f", "--at", "2,5"], "")
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)
    assert labels
    for label in labels:
        for line in label.split("\\n"):
            assert line in texts, f"the picture lacks {line!r}"


# ---------------------------------------------------------------- updating the pages


def _repl_outputs(example: Example) -> list[str]:
    """The answer to each entry of a transcript, found by running growing prefixes."""
    answers, before = [], ""
    for k in range(len(example.entries)):
        stdin = "\n".join(e.text for e in example.entries[:k + 1]) + "\n"
        _, output = _in_process(example.argv, stdin)
        answers.append(output[len(before):].rstrip("\n"))
        before = output if output.endswith("\n") or not output else output + "\n"
    return answers


def update(page: Path) -> None:
    """Rewrites the outputs of ``page``'s console examples (and the built-in table)."""
    text = page.read_text(encoding="utf-8")
    for begin, end, table in ((BUILTINS_BEGIN, BUILTINS_END, builtins_table),
                              (PRELUDE_BEGIN, PRELUDE_END, prelude_table)):
        region = generated_region(text, begin, end)
        if region is not None:
            text = text[:region.start(1)] + table() + "\n" + text[region.end(0) - len(end):]
            page.write_text(text, encoding="utf-8")
    with tempfile.TemporaryDirectory() as scratch:
        results = run_page(page, Path(scratch))
        lines = text.split("\n")
        for example in reversed([e for e in read_page(page) if isinstance(e, Example)]):
            if has_timings(example) or not example.shown:
                continue
            if example.is_repl:
                with contextlib.chdir(scratch):
                    answers = _repl_outputs(example)
                for entry, answer in reversed(list(zip(example.entries, answers))):
                    lines[entry.start:entry.end] = answer.split("\n") if answer else []
                continue
            output = results[example.line][1].rstrip("\n")
            lines[example.start:example.end] = output.split("\n") if output else []
    page.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"]:
        raise SystemExit("usage: python tests/test_docs.py --update [PAGE.md ...]")
    chosen = [ROOT / name if (ROOT / name).exists() else DOCS / name
              for name in sys.argv[2:]] or PAGES
    for path in chosen:
        update(path)
        print(f"updated {path.relative_to(ROOT)}")
