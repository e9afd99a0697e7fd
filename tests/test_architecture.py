"""The import graph keeps the pipeline's one-way flow (STYLE: errors → syntax → primitives →
stages → pipeline → front ends)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lambdad"

# Stages in order; a module may import only from earlier layers (and its own layer when
# listed as allowed below).
LAYERS = [
    {"iterate", "errors"},
    {"syntax"},
    {"primitives"},
    {"printer", "parser", "highlight"},
    {"rich"},
    {"typecheck", "rules"},
    {"forward", "backward", "simplify", "values"},
    {"interpreter"},
    {"differentiate", "trace", "gradcheck", "testing", "graph"},
    {"pipeline"},
    {"cli", "repl", "__main__", "__init__", "notebook"},
]
SAME_LAYER_ALLOWED = {("parser", "printer"), ("backward", "forward"), ("simplify", "forward"),
                      ("simplify", "backward"), ("forward", "simplify"), ("backward", "simplify"),
                      ("cli", "repl"), ("repl", "cli"), ("__main__", "cli"), ("__init__", "pipeline"), ("__init__", "notebook"), ("gradcheck", "testing"),
                      ("testing", "gradcheck"), ("trace", "differentiate"), ("graph", "trace"), ("trace", "graph"),
                      ("gradcheck", "differentiate")}


def layer_of(name):
    for index, layer in enumerate(LAYERS):
        if name in layer:
            return index
    raise AssertionError(f"module {name} is not placed in a layer of this test")


def imports_of(path):
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("lambdad."):
                    found.add(alias.name.split(".")[1])
    return found


def test_imports_flow_one_way():
    for path in sorted(PACKAGE.glob("*.py")):
        module = path.stem
        mine = layer_of(module)
        for imported in imports_of(path):
            theirs = layer_of(imported)
            assert theirs < mine or (theirs == mine and (module, imported) in SAME_LAYER_ALLOWED), (
                f"{module} imports {imported}, against the pipeline's direction")


def test_transformations_and_interpreter_do_not_know_each_other():
    for transformation in ("forward", "backward", "simplify"):
        path = PACKAGE / f"{transformation}.py"
        if path.exists():
            assert "interpreter" not in imports_of(path) and "values" not in imports_of(path)
    interpreter = imports_of(PACKAGE / "interpreter.py")
    assert not interpreter & {"forward", "backward", "simplify", "parser", "typecheck"}


def test_only_the_primitive_table_names_primitives():
    """No module but primitives.py compares against a primitive's name."""
    names = {"sin", "cos", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "pow", "mul", "add"}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "primitives":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for comparator in [node.left, *node.comparators]:
                    if isinstance(comparator, ast.Constant) and comparator.value in names:
                        raise AssertionError(f"{path.name}:{node.lineno} branches on `{comparator.value}`")
