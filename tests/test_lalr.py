"""The fast LALR loop over lark's tables (lambdad.lalr): it reads lark's private parts, so it
lives in one module, for a pinned range of lark versions, and is used only after a
self-check shows it builds what lark's own parser builds; otherwise lark parses."""

import ast
import re
from pathlib import Path

import lark
import pytest

import lambdad
from lambdad import lalr
from lambdad import reading as reading_module
from lambdad.errors import ParseError
from lambdad.parser import parse_module
from lambdad.syntax import walk

ROOT = Path(__file__).resolve().parent.parent
TEXTS = sorted((ROOT / "programs").glob("*.lam")) + [ROOT / "lambdad" / "prelude.lam"]
BAD = ["def f (x : R) : R = x +\n", "def f = (1, \n", "def g = 1 $ 2\n", "def h = 1e+\n",
       "def k (x : R) : R = let in x\n"]


def syntax_and_spans(text, file="t.lam"):
    """The syntax tree of ``text`` (equal up to spans) and every node's span, in order; or
    the parse error's message and span."""
    try:
        module = parse_module(text, file)
    except ParseError as error:
        return ("error", error.message, error.span)
    spans = [node.span for decl in module.decls for node in walk(decl.value)]
    return module, [decl.span for decl in module.decls], spans


@pytest.fixture
def lark_only(monkeypatch, tmp_path):
    """Parsing with the self-check failing: the driver's parse builds a different tree (and
    no earlier process recorded that the check passed)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    real = lalr.Driver.parse

    def wrong(self, text, start):
        tree = real(self, text, start)
        return tree[:-1] if isinstance(tree, list) and tree else tree

    monkeypatch.setattr(lalr.Driver, "parse", wrong)
    reading_module._driver.cache_clear()
    yield
    monkeypatch.undo()
    reading_module._driver.cache_clear()


def test_the_fast_driver_passes_its_self_check_with_the_installed_lark():
    assert isinstance(reading_module._driver(), lalr.Driver)


def test_a_failed_self_check_falls_back_to_larks_parser(lark_only):
    assert reading_module._driver() is None
    assert len(parse_module("def f (x : R) : R = x * 2\ndef g = f 1\n", "t.lam").decls) == 2


def test_a_driver_that_cannot_read_larks_tables_falls_back_to_larks_parser(monkeypatch):
    # as if lark's internals were renamed (a lark outside the pinned range)
    def renamed(self, parser, token):
        raise AttributeError("'LALR_Parser' object has no attribute 'parser'")

    monkeypatch.setattr(lalr.Driver, "__init__", renamed)
    reading_module._driver.cache_clear()
    try:
        assert reading_module._driver() is None
        assert parse_module("def f = 1\n", "t.lam").decls[0].name == "f"
    finally:
        monkeypatch.undo()
        reading_module._driver.cache_clear()
    assert reading_module._driver() is not None


def test_a_passed_self_check_is_recorded_and_not_run_again(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    reading_module._driver.cache_clear()
    try:
        assert reading_module._driver() is not None
        (verdict,) = (tmp_path / "lambdad").glob("*.driver-*")
        reading_module._driver.cache_clear()

        def unused(*args, **kwargs):
            raise AssertionError("lark's parser ran")

        monkeypatch.setattr(lalr.Driver, "parse", unused)  # the check would fail
        assert reading_module._driver() is not None
        verdict.unlink()
        reading_module._driver.cache_clear()
        assert reading_module._driver() is None  # without the record, it runs and fails
    finally:
        monkeypatch.undo()
        reading_module._driver.cache_clear()


@pytest.mark.parametrize("path", TEXTS, ids=[p.name for p in TEXTS])
def test_the_fast_path_and_the_fallback_give_the_same_syntax_trees(path, monkeypatch):
    text = path.read_text(encoding="utf-8")
    fast = syntax_and_spans(text)
    monkeypatch.setattr(reading_module, "_driver", lambda: None)
    assert syntax_and_spans(text) == fast


@pytest.mark.parametrize("text", BAD)
def test_the_fast_path_and_the_fallback_give_the_same_errors(text, monkeypatch):
    fast = syntax_and_spans(text)
    assert fast[0] == "error"
    monkeypatch.setattr(reading_module, "_driver", lambda: None)
    assert syntax_and_spans(text) == fast


def test_the_self_check_covers_every_start_symbol_but_the_repls():
    # (the REPL's entries start with an expression or a declaration: checked through those)
    assert {start for _, start in reading_module._SELF_CHECK} == {"module", "type_entry",
                                                                "expr_entry"}


def test_the_lark_versions_are_pinned_as_the_driver_says():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"lark{lalr.LARK_VERSIONS}"' in pyproject
    low, high = re.fullmatch(r">=([\d.]+),<([\d.]+)", lalr.LARK_VERSIONS).groups()

    def version(text):
        return tuple(int(part) for part in re.findall(r"\d+", text)[:3])

    assert version(low) <= version(lark.__version__) < version(high)


def test_only_the_driver_module_reads_larks_private_parts():
    # the attributes of lark's objects that are not its public API
    private = {"parse_table", "callbacks", "root_lexer", "lexers", "ignore_types",
               "g_regex_flags", "start_states", "end_states"}
    readers = set()
    for path in sorted(Path(lambdad.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # (``gc.callbacks`` is the standard library's public list, not lark's)
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name) and node.value.id == "gc")):
                readers.add(path.name)
    assert readers == {"lalr.py"}


# Texts where the scanner of all terminals, which the driver tries first, finds a terminal
# the parser's state does not accept (a keyword read as a name where only keywords may
# come; a name that starts with one), so that the state's own scanner decides.
SHARED_SCANNER_MISSES = [
    ('import "a.lam"\nimport "b c.lam"\ndef f = 1\n', "module"),
    ("def f (x : R) : R = let inx = x in let in2 = inx in in2 * x\n", "module"),
    ("def g (x : R * [R]) : R -> R = \\y -> if y < 0 then -y else fst x\n", "module"),
    ("\\a -o (a, [1.5, -2])", "expr_entry"),
]


@pytest.mark.parametrize("text,start", SHARED_SCANNER_MISSES)
def test_where_the_shared_scanner_misses_the_states_own_scanner_gives_larks_tokens(text, start):
    driver = lalr.Driver(reading_module._parser(), reading_module._Token)
    fast = reading_module._shape(driver.parse(text, start))
    assert fast == reading_module._shape(reading_module._parser().parse(text, start=start))


def test_the_shared_scanner_spares_compiling_a_scanner_per_state():
    # (each scanner is a regular expression compiled in the process's first parse: one
    # for all terminals, and one of a state's own only where that one finds a terminal the
    # state does not accept: at an import)
    driver = lalr.Driver(reading_module._parser(), reading_module._Token)
    for path in TEXTS:
        driver.parse(path.read_text(encoding="utf-8"), "module")
    assert driver.shared is not None and driver.by_terminals == {}
    driver.parse(SHARED_SCANNER_MISSES[0][0], "module")
    assert 1 <= len(driver.by_terminals) <= 2
