"""Compile pieces and shared code objects are a fast path with one door each (STYLE 22):
``pieces.cut_into_pieces`` and ``pieces.define_functions``, called by the code generator
only.  A program cut into pieces and compiled in batches with shared code computes, bit
for bit, what the same program compiled whole and at once computes."""

import pytest

import lambdad
from lambdad import pieces


def chain(depth):
    lines = ["def chain (x0 : R) : R ="]
    for k in range(depth):
        lines.append(f"  let x{k + 1} = x{k} * x{k} * 0.25 + sin (x{k} + {k % 7}) in")
    lines.append(f"  x{depth} * x0")
    return "\n".join(lines) + "\n"


def results(source):
    program = lambdad.loads(source)
    out = [program.call("chain", -0.5)]
    functions = program.value_of("chain").__globals__["__lambdad_source__"].count("\ndef ")
    for strategy in ("fused", "factored"):
        out.append(program.value_and_grad("chain", -0.5, strategy=strategy))
    return out, functions


def test_pieces_and_shared_code_compute_what_the_whole_program_computes(monkeypatch):
    source = chain(120)
    with monkeypatch.context() as patch:
        patch.setattr(pieces, "MAX_PIECE_LINES", 30)
        patch.setattr(pieces, "_LINES_PER_COMPILE", 100)  # batches, shared code objects
        with_pieces, cut = results(source)
    with monkeypatch.context() as patch:
        patch.setattr(pieces, "MAX_PIECE_LINES", 10 ** 9)
        patch.setattr(pieces, "_LINES_PER_COMPILE", 10 ** 9)
        whole, uncut = results(source)
    assert cut > uncut  # (it was cut)
    assert repr(with_pieces) == repr(whole)


def test_the_code_generator_reaches_pieces_through_its_doors_only():
    import ast
    from pathlib import Path
    tree = ast.parse(Path(lambdad.__file__).with_name("codegen.py").read_text())
    imported = {alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "pieces"
                for alias in node.names}
    assert imported == {"Line", "cut_into_pieces", "define_functions"}
