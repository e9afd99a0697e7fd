"""One renaming walk and one fresh-name supply, on the syntax tree (STYLE 24): every pass
that renames binders does it through ``syntax.rename_bound`` with names from a
``syntax.NameSupply``, and every pass that renames free variables (the printer's renaming
of a shadowing definition among them) through ``syntax.renamed_free``."""

import ast
from pathlib import Path

from lambdad.parser import parse_expr, parse_module
from lambdad.printer import print_decl, print_term, unshadowed
from lambdad.rules import RESERVED, NameSupply as LanguageNames, rename
from lambdad.syntax import NameSupply, free_vars, names_in, rename_bound, renamed_free


def test_rename_bound_renames_binders_and_their_bound_occurrences_only():
    term = parse_expr("\\x -> let y = x + z in (\\x -> x * y) (x + y)")
    renamed = rename_bound(term, lambda name: name.upper())
    assert print_term(renamed) == "\\X -> let Y = X + z in (\\X -> X * Y) (X + Y)"
    assert free_vars(renamed) == free_vars(term) == {"z"}


def test_rename_bound_keeps_a_binder_it_is_given_back_and_its_shadowing():
    term = parse_expr("\\x -> let (x, y) = (x, x) in x + y")
    renamed = rename_bound(term, lambda name: "w" if name == "x" else name)
    assert print_term(renamed) == "\\w -> let (w, y) = (w, w) in w + y"
    kept = rename_bound(parse_expr("\\x -> (\\y -> x) x"),
                        lambda name: "y" if name == "x" else name)
    assert print_term(kept) == "\\y -> (\\y -> y) y"  # (choose must give fresh names)


def test_rename_bound_asks_once_per_binder_in_pre_order():
    asked = []
    rename_bound(parse_expr("let a = (let b = 1 in b) in let (c, d) = (a, a) in c + d"),
                 lambda name: asked.append(name) or name)
    assert asked == ["a", "b", "c", "d"]


def test_substituting_a_partial_renames_a_binder_that_would_capture():
    renamed = rename(parse_expr("let y = x * 2 in x + y"), {"x": "y"}, None)
    assert print_term(renamed) == "let y1 = y * 2 in y + y1"
    assert print_term(rename(parse_expr("let x = 1 in x"), {"x": "z"}, None)) == "let x = 1 in x"


def test_rename_bound_is_iterative():
    term = parse_expr("let x = 1 in " * 5000 + "x")
    assert len(names_in(rename_bound(term, NameSupply.for_terms(term).renamed))) == 5000


def test_a_name_supply_avoids_what_it_was_given_and_what_it_handed_out():
    names = NameSupply(["v1", "v3"])
    assert [names.fresh("v") for _ in range(3)] == ["v2", "v4", "v5"]
    assert names.renamed("x'2") == "x1" and names.renamed("_") == "v6"
    assert names.fresh("p", suffixes=("_",)) == "p1" and names.is_taken("p1_")


def test_the_language_supply_avoids_keywords_and_built_in_names():
    names = LanguageNames(["x1"])
    assert {"let", "sin", "zero", "_"} <= RESERVED
    assert names.is_taken("sin") and names.is_taken("let") and not NameSupply().is_taken("sin")
    assert names.fresh("x") == "x2"


def test_no_other_module_writes_its_own_binder_renaming_walk():
    """A function that renames binders (calls ``rename_binders``, the node-level step) is
    the one walk of syntax.py, or a pass that renames every binder as it rewrites (fusion,
    the simplifier)."""
    package = Path(__file__).resolve().parent.parent / "lambdad"
    callers = set()
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "rename_binders"):
                callers.add(path.name)
    assert callers <= {"syntax.py", "fuse.py", "simplify.py"}


def test_renamed_free_renames_free_occurrences_only_and_keeps_what_it_does_not_change():
    term = parse_expr("x + (\\x -> x * y) (let y = x in y) + y")
    renamed = renamed_free(term, {"x": "a", "y": "b"})
    assert print_term(renamed) == "a + (\\x -> x * b) (let y = a in y) + b"
    untouched = parse_expr("(\\x -> x) 1 + z")
    same = renamed_free(untouched, {"x": "a"})
    assert same is untouched  # nothing free to rename: the term itself, no copy
    partly = renamed_free(untouched, {"z": "a"})
    assert print_term(partly) == "(\\x -> x) 1 + a" and partly.args[0] is untouched.args[0]


def test_renamed_free_applies_a_rewrite_to_every_other_node():
    term = parse_expr("sin x + (\\x -> sin x) 2")
    seen = []
    renamed = renamed_free(term, {"x": "a"}, lambda t: seen.append(type(t).__name__) or t)
    assert print_term(renamed) == "sin a + (\\x -> sin x) 2"
    assert "Var" not in seen and seen.count("Prim") == 3  # `+` and both `sin`


def test_the_printer_renames_a_shadowing_definition_by_the_one_walk():
    """A definition of a built-in's name that a later program text uses is printed
    renamed, with its free uses; a binder of the same name keeps its own (printer.unshadowed,
    through syntax.renamed_free)."""
    decls = parse_module("def cosh x = x + 1\ndef f y = cosh y + (\\cosh -> cosh) 1\n").decls
    out, renamed = unshadowed(decls, used_after={"cosh"})
    assert renamed == {"cosh": "cosh'1"}
    assert [print_decl(decl) for decl in out] == [
        "def cosh'1 x = x + 1", "def f y = cosh'1 y + (\\cosh -> cosh) 1"]
    printer = ast.parse((Path(__file__).resolve().parent.parent / "lambdad" / "printer.py")
                        .read_text())
    imported = {alias.name for node in ast.walk(printer) if isinstance(node, ast.ImportFrom)
                and node.module == "syntax" for alias in node.names}
    assert "renamed_free" in imported and "binders" not in imported  # no walk of its own
