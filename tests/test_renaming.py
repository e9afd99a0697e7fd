"""One renaming walk and one fresh-name supply, on the syntax tree (STYLE 24): every pass
that renames binders does it through ``syntax.rename_bound`` with names from a
``syntax.NameSupply``."""

import ast
from pathlib import Path

from lambdad.parser import parse_expr
from lambdad.printer import print_term
from lambdad.rules import RESERVED, NameSupply as LanguageNames, rename
from lambdad.syntax import NameSupply, free_vars, names_in, rename_bound


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
