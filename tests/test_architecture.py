"""The import graph keeps the pipeline's one-way flow (STYLE: errors → syntax → primitives →
stages → pipeline → front ends)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lambdad"

# Stages in order; a module may import only from earlier layers (and its own layer when
# listed as allowed below).
LAYERS = [
    {"iterate", "errors", "persistent", "document", "lalr", "memo"},
    {"sparse"},
    {"arraylib"},
    {"syntax"},
    {"primitive_entry"},
    {"array_primitives"},
    {"primitives"},
    {"printer", "reading", "highlight"},
    {"desugar"},
    {"parser"},
    {"modules"},
    {"rich"},
    {"unify"},
    {"array_typing"},
    {"typecheck", "rules"},
    {"homomorphism"},
    {"spines"},
    {"batching"},
    {"tape"},
    {"forward", "backward", "simplify", "fuse", "values"},
    {"reals"},
    {"guard", "limits"},
    {"pieces"},
    {"generated"},
    {"foldgen", "lineargen", "peephole"},
    {"codegen"},
    {"interpreter", "nesting"},
    {"graph", "calling"},
    {"images"},
    {"differentiate"},
    {"prepared"},
    {"runtime", "results"},
    {"probing"},
    {"trace", "gradcheck", "testing", "plot"},
    {"edge", "sources"},
    {"derivatives", "showing"},
    {"points"},
    {"pipeline"},
    {"cli", "repl", "__main__", "__init__", "notebook", "gradbench"},
]
# The modules of the one primitive table: primitives.py holds it, with the array entries
# of array_primitives.py among its entries.
TABLE = {"primitives", "array_primitives"}
# Imports inside a layer, each allowed one way only (checked below).
SAME_LAYER_ALLOWED = {("cli", "repl"), ("__main__", "cli"),
                      ("__init__", "notebook"), ("testing", "gradcheck"), ("fuse", "backward"),
                      ("rules", "typecheck")}


def layer_of(name):
    for index, layer in enumerate(LAYERS):
        if name in layer:
            return index
    raise AssertionError(f"module {name} is not placed in a layer of this test")


def module_of(path):
    """The module a file is: its stem, or the package it belongs to (``testing``)."""
    return path.stem if path.parent == PACKAGE else path.parent.name


def source_files():
    """Every Python file of the package, subpackages included."""
    return sorted(PACKAGE.rglob("*.py"))


def imports_of(path):
    """The package's modules that the file imports (a subpackage's imports of its own
    modules left out)."""
    tree = ast.parse(path.read_text())
    found = set()
    top = 1 if path.parent == PACKAGE else 2  # the level of ``from .x`` naming lambdad.x
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == top:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("lambdad."):
                    found.add(alias.name.split(".")[1])
    return found - {module_of(path)}


def test_imports_flow_one_way():
    for path in source_files():
        module = module_of(path)
        mine = layer_of(module)
        for imported in imports_of(path):
            theirs = layer_of(imported)
            assert theirs < mine or (theirs == mine and (module, imported) in SAME_LAYER_ALLOWED), (
                f"{module} imports {imported}, against the pipeline's direction")


def test_no_pair_is_allowed_both_ways():
    both = {(a, b) for a, b in SAME_LAYER_ALLOWED if (b, a) in SAME_LAYER_ALLOWED}
    assert not both, f"imports allowed both ways: {sorted(both)}"


def test_no_two_modules_import_each_other():
    """Not even through an import inside a function (the one-way test above reads those
    too; this says which pair it was)."""
    graph = {}
    for path in source_files():
        graph.setdefault(module_of(path), set()).update(imports_of(path))
    both = sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph.get(b, ()))
    assert both == []


def test_transformations_and_interpreter_do_not_know_each_other():
    for transformation in ("forward", "backward", "simplify", "fuse"):
        path = PACKAGE / f"{transformation}.py"
        if path.exists():
            assert not imports_of(path) & {"interpreter", "codegen", "guard", "values", "tape"}
    interpreter = imports_of(PACKAGE / "interpreter.py")
    assert not interpreter & {"forward", "backward", "simplify", "parser", "typecheck"}


TRANSFORMATIONS = {"forward", "backward", "simplify", "fuse", "rules", "homomorphism",
                   "nesting"}


def reachable_from(module, graph):
    """Every module ``module`` imports, directly or through others (itself left out)."""
    seen, pending = set(), [module]
    while pending:
        for imported in graph.get(pending.pop(), ()):
            if imported not in seen:
                seen.add(imported)
                pending.append(imported)
    return seen - {module}


# The run time: the interpreter and what it runs on (code generation and its parts, the
# guard and limits, tapes, values, the reals of values, the batched-fold plan).
RUN_TIME = ("interpreter", "codegen", "foldgen", "lineargen", "peephole", "generated", "pieces",
            "guard", "limits", "tape", "values", "reals", "batching")
# What writes or checks a program: the transformations, the AD glue that transforms a
# closure (hooked into the interpreter by runtime.Runtime, never imported by it), the parser
# and the type checker.
WRITES_PROGRAMS = TRANSFORMATIONS | {"images", "differentiate", "parser", "typecheck"}


def import_graph():
    graph = {}
    for path in source_files():
        graph.setdefault(module_of(path), set()).update(imports_of(path))
    return graph


def test_the_run_time_reaches_no_transformation_even_indirectly():
    """The interpreter and what it runs on do not depend on a transformation (nor on the
    glue that transforms closures, the parser or the type checker), not even through a
    module they import: running a program never needs the code that writes one."""
    graph = import_graph()
    for module in RUN_TIME:
        assert module in graph, f"{module} is no module of the package"
        reached = reachable_from(module, graph) & WRITES_PROGRAMS
        assert not reached, f"{module} reaches {sorted(reached)}"


def test_no_transformation_reaches_the_run_time_even_indirectly():
    """The transformations are pure functions on terms: through no chain of imports do they
    reach the interpreter, code generation, tapes or values (the batched-fold plan, which
    fusion reads too, aside)."""
    graph = import_graph()
    run_time = set(RUN_TIME) - {"batching"} | {"images", "differentiate"}
    for transformation in sorted(TRANSFORMATIONS):
        reached = reachable_from(transformation, graph) & run_time
        assert not reached, f"{transformation} reaches {sorted(reached)}"


def test_the_reachability_check_sees_an_indirect_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"fuse"}}
    assert reachable_from("a", graph) == {"b", "c", "fuse"}


def test_only_the_primitive_table_names_primitives():
    """No module but the table's (primitives.py, array_primitives.py) compares against a
    primitive's name."""
    names = {"sin", "cos", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "pow", "mul", "add"}
    for path in source_files():
        if path.stem in TABLE:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for comparator in [node.left, *node.comparators]:
                    if isinstance(comparator, ast.Constant) and comparator.value in names:
                        raise AssertionError(f"{path.name}:{node.lineno} branches on `{comparator.value}`")



def test_only_the_primitive_table_builds_primitives_from_literal_names():
    """``Prim("fst", ...)`` and ``NAMED["map"]`` are written only in the table's modules;
    other modules use its named entries (``FST.applied(pair)``)."""
    tables = {"PRIMITIVES", "NAMED", "OPERATORS"}
    for path in source_files():
        if path.stem in TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            literal = None
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("Prim", "Builtin") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                literal = node.args[0].value
            elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                  and node.value.id in tables and not isinstance(node.slice, ast.Name)
                  and all(isinstance(part, ast.Constant) for part in ast.walk(node.slice)
                          if not isinstance(part, (ast.Tuple, ast.Load)))):
                literal = ast.unparse(node.slice)
            if literal is not None:
                raise AssertionError(f"{path.name}:{node.lineno} names the primitive {literal}")




def test_the_runtime_is_wired_in_one_place():
    """Interpreters and differentiators are built, and hooked to each other, by
    runtime.Runtime only (interpreter.py's own one-shot helpers aside)."""
    for path in source_files():
        if path.stem in ("runtime", "interpreter"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            built = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                     and node.func.id in ("Interpreter", "Differentiator"))
            hooked = isinstance(node, ast.Attribute) and node.attr == "ad_hooks" and \
                isinstance(node.ctx, ast.Store)
            assert not (built or hooked), f"{path.name}:{node.lineno} wires the runtime itself"



def test_front_ends_call_only_public_methods():
    """cli.py, repl.py, notebook.py and gradbench.py reach no private attribute of the
    objects they use (their own, their base class's and IPython's ``shell._showtraceback``
    aside)."""
    allowed = {"_get_values", "_showtraceback"}
    for name in ("cli", "repl", "notebook", "gradbench"):
        path = PACKAGE / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in allowed
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
                raise AssertionError(f"{path.name}:{node.lineno} reaches {ast.unparse(node)}")


# ------------------------------------------------------------ every construct has its arms

import pytest

from lambdad import syntax
from lambdad.backward import backward_term
from lambdad.errors import DifferentiationError
from lambdad.forward import forward_term
from lambdad.interpreter import Interpreter
from lambdad.parser import parse_expr
from lambdad.printer import print_term
from lambdad.simplify import simplify
from lambdad.typecheck import infer_term

# A program using each construct (a target-only construct: a transformed program's piece).
EXAMPLES = {
    syntax.Const: "1.5",
    syntax.BoolLit: "if true then 1.0 else 2.0",
    syntax.Var: "let x = 1.0 in x",
    syntax.Builtin: "map sin [1.0, 2.0]",
    syntax.Prim: "1.0 + 2.0 * 3.0",
    syntax.Lam: "(\\x -> x * x) 3.0",
    syntax.App: "(\\x -> x) 3.0",
    syntax.Let: "let y = 2.0 in y * y",
    syntax.LetPair: "let (a, b) = (1.0, 2.0) in a + b",
    syntax.Pair: "(1.0, true)",
    syntax.If: "if 1.0 < 2.0 then 1.0 else 2.0",
    syntax.ListLit: "[1.0, 2.0]",
    syntax.Annot: "(\\(x : R) -> (x : R)) 1.0",
    syntax.LinLam: "cotangent (2.0, seed 0) ((\\a -o seed 0 a) 1.0)",
    syntax.Zero: "cotangent (2.0, seed 0) zero",
    syntax.Plus: "cotangent (2.0, seed 0) (seed 0 1.0 <+> seed 0 2.0)",
    syntax.Seed: "cotangent (2.0, seed 0) (seed 0 1.0)",
    syntax.ReadOff: "cotangent ((2.0, seed 0), (3.0, seed 1)) (seed 1 1.0)",
}


def _transform_both(term):
    forward_term(term)
    backward_term(term)


# Each pass over terms, applied to a term.  A pass without an arm for a construct raises
# (its last arm refuses what it does not know).
PASSES = {
    "traversal": lambda term: [syntax.with_children(t, syntax.children(t))
                               for t in syntax.walk(term)],
    "type checker": infer_term,
    "printer": print_term,
    "interpreter": lambda term: Interpreter().evaluate(term),
    "simplifier": simplify,
    "transformations": _transform_both,
}


def term_classes():
    """Every concrete Term class of the package."""
    found, pending = [], [syntax.Term]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not syntax.Term and cls.__module__.startswith("lambdad."):
            found.append(cls)
    return found


def missing_arms(examples):
    """(pass, construct) for every pass that fails on a construct's example (the
    transformations included: they are total on the target language, AD.md section 9)."""
    missing = []
    for cls, term in examples.items():
        assert any(type(t) is cls for t in syntax.walk(term)), f"{cls.__name__}: bad example"
        for name, apply in PASSES.items():
            try:
                apply(term)
            except Exception:
                missing.append((name, cls.__name__))
    return missing


def test_every_construct_has_an_arm_in_every_pass():
    classes = term_classes()
    assert set(classes) == set(EXAMPLES), "give each Term class an example in EXAMPLES"
    examples = {cls: parse_expr(text) for cls, text in EXAMPLES.items()}
    assert missing_arms(examples) == []


@syntax.node(children=("expr",))
class Forgotten(syntax.Term):
    """A construct no pass knows: what adding a class to syntax.py without arms gives."""

    expr: syntax.Term
    span: object = None


def test_a_construct_without_arms_is_caught_by_every_pass():
    term = syntax.Pair(syntax.Const(1.0), Forgotten(syntax.Const(2.0)))
    assert Forgotten not in term_classes()  # the check above reads the package only
    assert sorted(missing_arms({Forgotten: term})) == sorted(
        (name, "Forgotten") for name in PASSES if name != "traversal")
    with pytest.raises(AttributeError):  # a class not declared with @node has no shape
        syntax.children(type("Undeclared", (syntax.Term,), {"__slots__": ()})())


def test_no_module_is_over_a_thousand_lines():
    # STYLE 24: small modules, split by job; a module outgrowing this is split, not waived.
    long = {module_of(path): count for path in source_files()
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > 1000}
    assert not long, f"modules over 1000 lines: {long}"
