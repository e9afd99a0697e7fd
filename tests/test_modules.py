"""A program can use the definitions of another `.lam` file (LANGUAGE.md section 10):
`import "FILE"` at the top of a file, FILE relative to the importing file; a file imported
twice is read once; a cycle or a missing file is an error located at the import; a file's
own definition of an imported name shadows it, as a definition of a prelude name does;
printed programs carry the imported definitions they use and parse back."""

from pathlib import Path

import pytest

import lambdad
from lambdad.errors import ModuleError, render
from lambdad.modules import gather
from lambdad.parser import parse_module


def write(root: Path, files: dict[str, str]) -> Path:
    """The files written under ``root``; the first one's path."""
    paths = []
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths[0]


STATS = {
    "main.lam": 'import "lib/stats.lam"\n'
                "def f x = mean [x, square x, 1]\n"
                "def main = f 2\n",
    "lib/stats.lam": 'import "util.lam"\n'  # relative to lib/, not to main.lam
                     "def mean (xs : [R]) : R = sum xs / length xs\n",
    "lib/util.lam": "def square (x : R) : R = x * x\n",
}


def test_imported_definitions_are_usable_and_differentiable(tmp_path):
    program = lambdad.load(write(tmp_path, STATS))
    assert program.run() == pytest.approx((2 + 4 + 1) / 3)
    assert program.grad("f", 2.0) == pytest.approx((1 + 4) / 3)
    assert program.grad("f", 2.0, mode="forward") == pytest.approx((1 + 4) / 3)
    # what the file imports, directly or not, is the program's too
    assert program.names() == ("square", "mean", "f", "main")
    assert program.call("square", 3.0) == 9
    assert dict(program.types())["mean"] == "[R] -> R"


def test_an_imported_file_s_errors_point_into_it(tmp_path):
    main = write(tmp_path, {"main.lam": 'import "lib.lam"\ndef main = g 1\n',
                            "lib.lam": "def g x = x + true\n"})
    sources: dict[str, str] = {}
    with pytest.raises(lambdad.TypeCheckError) as caught:
        lambdad.Program(main.read_text(), str(main), sources=sources)
    shown = render(caught.value, sources)
    assert shown.splitlines() == [
        f"{tmp_path / 'lib.lam'}:1:15: type error: `+` expects R, but this has type Bool",
        "    1 | def g x = x + true",
        "      |               ^^^^"]


def test_the_command_line_shows_an_error_of_an_imported_file_and_runs_the_rest(
        tmp_path, lambdad_cli):
    main = write(tmp_path, {"main.lam": 'import "lib/ops.lam"\ndef main = halve 3\n',
                            "lib/ops.lam": "def halve x = x / 2\ndef broken = log (0 - 1)\n"})
    done = lambdad_cli("run", str(main))
    assert (done.returncode, done.stdout, done.stderr) == (0, "1.5\n", "")
    done = lambdad_cli("run", str(main), "--entry", "broken")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"{tmp_path / 'lib' / 'ops.lam'}:2:14: runtime error: log of a non-positive number (-1)",
        "    2 | def broken = log (0 - 1)",
        "      |              ^^^^^^^^^^^"]
    (tmp_path / "lib" / "ops.lam").write_text("def halve x = x / true\n")
    done = lambdad_cli("check-types", str(main))
    assert done.returncode == 1 and done.stderr.splitlines()[1:] == [
        "    1 | def halve x = x / true", "      |                   ^^^^"]


def test_a_missing_file_is_an_error_at_its_import(tmp_path):
    main = write(tmp_path, {"main.lam": "-- uses a library\n"
                                        'import "lib/nothere.lam"\ndef a = 1\n'})
    with pytest.raises(ModuleError) as caught:
        lambdad.load(main)
    error = caught.value
    assert (error.span.file, error.span.line, error.span.col) == (str(main), 2, 1)
    assert error.message == (f"cannot import `lib/nothere.lam`: no such file: "
                             f"{tmp_path / 'lib' / 'nothere.lam'}")
    assert render(error, {str(main): main.read_text()}).splitlines()[1:] == [
        '    2 | import "lib/nothere.lam"',
        "      | ^^^^^^^^^^^^^^^^^^^^^^^^"]


def test_a_cycle_is_an_error_naming_it_at_the_import_closing_it(tmp_path):
    a = write(tmp_path, {"a.lam": 'import "b.lam"\ndef a = 1\n',
                         "b.lam": 'import "sub/c.lam"\ndef b = 2\n',
                         "sub/c.lam": 'def c = 3\nimport "../a.lam"\n'})
    # imports come first: the last one is a syntax error, not a cycle yet
    with pytest.raises(lambdad.ParseError, match="imports come first"):
        lambdad.load(a)
    (tmp_path / "sub" / "c.lam").write_text('import "../a.lam"\ndef c = 3\n')
    sources: dict[str, str] = {}
    with pytest.raises(ModuleError) as caught:
        lambdad.Program(a.read_text(), str(a), sources=sources)
    error = caught.value
    c = tmp_path / "sub" / "c.lam"
    assert error.message == f"import cycle: {a} imports {tmp_path / 'b.lam'}, which imports " \
                            f"{c}, which imports {a}"
    assert str(error.span) == f"{c}:1:1"
    assert render(error, sources).splitlines()[1] == '    1 | import "../a.lam"'


def test_a_file_importing_itself_is_a_cycle(tmp_path):
    main = write(tmp_path, {"self.lam": 'import "./self.lam"\ndef a = 1\n'})
    with pytest.raises(ModuleError, match=r"import cycle: .*self.lam imports .*self.lam$"):
        lambdad.load(main)


def test_a_file_imported_along_two_paths_is_read_once(tmp_path):
    main = write(tmp_path, {
        "main.lam": 'import "left.lam"\nimport "right.lam"\n'
                    "def main = [l 1, r 1, base 1]\n",
        "left.lam": 'import "base.lam"\ndef l x = base x + 1\n',
        "right.lam": 'import "./base.lam"\ndef r x = base x + 2\n',
        "base.lam": "def base x = 10 * x\n"})
    program = lambdad.load(main)
    assert program.run() == [11, 12, 10]
    assert program.names() == ("base", "l", "r", "main")
    assert [decl.name for decl in program.module.decls].count("base") == 1


def test_gather_reads_each_file_once_and_orders_a_file_after_its_imports(tmp_path):
    main = write(tmp_path, {
        "main.lam": 'import "left.lam"\nimport "right.lam"\nimport "sub/../base.lam"\n',
        "left.lam": 'import "base.lam"\n', "right.lam": 'import "./base.lam"\n',
        "base.lam": "def base = 1\n"})
    reads: list[str] = []

    def read(path: str) -> str:
        reads.append(path)
        return Path(path).read_text()

    sources: dict[str, str] = {}
    units = gather(main.read_text(), str(main), read, sources)
    base, left, right = (str(tmp_path / name) for name in ("base.lam", "left.lam", "right.lam"))
    assert reads == [left, base, right]
    assert [unit.file for unit in units] == [base, left, right, str(main)]
    assert [unit.imports for unit in units] == [(), (0,), (0,), (1, 2, 0)]
    assert sources == {path: Path(path).read_text() for path in reads}


def test_an_own_definition_shadows_an_imported_one_which_keeps_its_meaning_there(tmp_path):
    main = write(tmp_path, {
        "main.lam": 'import "lib.lam"\n'
                    "def before = scale 1\n"
                    "def scale x = 100 * x\n"
                    "def main = [before, scale 1, twice 1]\n",
        "lib.lam": "def scale x = 2 * x\ndef twice x = scale x + scale x\n"})
    program = lambdad.load(main)
    # above the own definition `scale` is the imported one; the library keeps its own
    assert program.run() == [2, 100, 4]
    assert program.names() == ("twice", "before", "scale", "main")
    assert program.grad("twice", 1.0) == 4
    [warning] = program.warnings()
    assert warning.message == (
        f"this definition of `scale` shadows the definition of `scale` in {tmp_path / 'lib.lam'}"
        ", which a definition above uses (`before`, line 2): from here on `scale` means this "
        "definition")
    assert (warning.span.line, warning.span.col) == (3, 5)


def test_the_later_of_two_imports_defining_a_name_is_the_one_seen(tmp_path):
    main = write(tmp_path, {"main.lam": 'import "a.lam"\nimport "b.lam"\ndef main = [k, fa, fb]\n',
                            "a.lam": "def k = 1\ndef fa = k\n",
                            "b.lam": "def k = 2\ndef fb = k\n"})
    assert lambdad.load(main).run() == [2, 1, 2]


def test_an_imported_file_shadowing_a_prelude_name_changes_it_for_its_importers_only(tmp_path):
    main = write(tmp_path, {"main.lam": 'import "mine.lam"\nimport "other.lam"\n'
                                        "def main = (mean [1, 2], other [1, 2])\n",
                            "mine.lam": "def mean (xs : [R]) : R = 42\n",
                            "other.lam": "def other xs = mean xs\n"})
    # other.lam does not import mine.lam: `mean` is the prelude's there
    assert lambdad.load(main).run() == (42, 1.5)


def test_declared_primitives_are_imported(tmp_path):
    main = write(tmp_path, {
        "main.lam": 'import "prims.lam"\ndef f x = softplus (2 * x)\ndef main = f 0\n',
        "prims.lam": "primitive softplus x = log (1 + exp x)\n"
                     "  partial x = 1 / (1 + exp (0 - x))\n"})
    program = lambdad.load(main)
    assert program.run() == pytest.approx(0.6931471805599453)
    assert program.grad("f", 0.0) == pytest.approx(1.0)
    assert [str(p.name) for p in program.declared_primitives()] == ["softplus"]
    assert program.evaluate_text("softplus 0")[0] == pytest.approx(0.6931471805599453)


def test_show_inlines_the_imported_definitions_and_parses_back(tmp_path):
    main = write(tmp_path, {
        "main.lam": 'import "lib.lam"\ndef scale x = 3 * x\n'
                    "def f x = softplus (scale x) + helper x\n",
        "lib.lam": "primitive softplus x = log (1 + exp x)\n"
                   "  partial x = 1 / (1 + exp (0 - x))\n"
                   "def scale x = 2 * x\ndef helper x = scale x * x\n"})
    program = lambdad.load(main)
    value, gradient = program.value_and_grad("f", 0.5)
    for mode in ("forward", "reverse"):
        shown = program.show("f", **{mode: True}, at=0.5)
        assert "import" not in shown
        assert "def scale'1 " in shown  # the library's `scale`, shadowed, under a new name
        again = lambdad.loads(shown, "shown.lam")
        assert again.run() == pytest.approx((value, gradient))


def test_loads_resolves_imports_from_the_current_directory(tmp_path, monkeypatch):
    write(tmp_path, {"lib.lam": "def k = 7\n"})
    monkeypatch.chdir(tmp_path)
    assert lambdad.loads('import "lib.lam"\ndef main = k * 2\n').run() == 14


def test_imports_come_first_and_name_a_file():
    with pytest.raises(lambdad.ParseError) as caught:
        lambdad.loads('def a = 1\nimport "lib.lam"\n')
    assert caught.value.message == "imports come first in a file, before its definitions"
    assert (caught.value.span.line, caught.value.span.col) == (2, 8)
    with pytest.raises(lambdad.ParseError, match="an import names a file"):
        lambdad.loads('import ""\n')
    with pytest.raises(lambdad.ParseError, match="ends with `\"` on its line"):
        lambdad.loads('import "lib\n.lam"\n')


def test_import_is_a_word_only_at_the_top_of_a_file():
    program = lambdad.loads("def import x = x + 1\ndef main = import 1\n")
    assert program.run() == 2


def test_definitions_read_without_a_file_refuse_an_import():
    with pytest.raises(lambdad.ParseError, match="an import is read where a program file "
                                                 "is loaded"):
        parse_module('import "lib.lam"\ndef a = 1\n', "<cell 1>")


PROGRAMS = Path(__file__).resolve().parent.parent / "programs"


@pytest.mark.parametrize("path", sorted(PROGRAMS.glob("*.lam")), ids=lambda path: path.name)
def test_a_program_split_into_a_library_and_an_importer_means_the_same(path, tmp_path):
    """Every program of programs/, cut after each of its declarations into a file of the
    declarations above and a file importing it with the rest, has the same definitions,
    types and value: an import is the imported file's definitions written above."""
    whole = lambdad.load(path)
    text = path.read_text(encoding="utf-8")
    expected = (whole.types(), whole.run() if "main" in whole.decls else None)
    lines = text.split("\n")
    starts = [decl.span.line for decl in whole.module.decls if decl.span is not None
              and decl.span.file == str(path)]
    for cut in starts[1:]:
        (tmp_path / "lib").mkdir(exist_ok=True)
        (tmp_path / "lib" / "above.lam").write_text("\n".join(lines[:cut - 1]) + "\n")
        main = tmp_path / "main.lam"
        main.write_text('import "lib/above.lam"\n' + "\n".join(lines[cut - 1:]))
        split = lambdad.load(main)
        assert (split.types(), split.run() if "main" in split.decls else None) == expected, cut
        assert split.files == (str(tmp_path / "lib" / "above.lam"), str(main))
