"""Syntax back to source text that parses to the same syntax.

Printing is iterative (see :mod:`lambdad.iterate`) so very deep terms print too.
"""

from __future__ import annotations

from .syntax import BoolT, CotangentT, FunT, ListT, PairT, RealT, Type, VarT


def print_type(t: Type) -> str:
    """Source text of ``t``: ``*`` binds tighter than ``->``, both associate to the right;
    a function into ``d`` is a backpropagator and prints as ``R -o d``."""
    # Work stack of either types to print (with the context's binding level) or literal text.
    # Levels: 0 = any (function position), 1 = operand of '*', 2 = atom.
    out: list[str] = []
    stack: list[tuple[Type, int] | str] = [(t, 0)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        current, level = item
        if isinstance(current, RealT):
            out.append("R")
        elif isinstance(current, BoolT):
            out.append("Bool")
        elif isinstance(current, CotangentT):
            out.append("d")
        elif isinstance(current, VarT):
            out.append(current.name)
        elif isinstance(current, ListT):
            stack.extend(["]", (current.item, 0)])
            out.append("[")
        elif isinstance(current, PairT):
            parts: list = [(current.first, 2), " * ", (current.second, 1)]
            if level > 1:
                parts = ["("] + parts + [")"]
            stack.extend(reversed(parts))
        elif isinstance(current, FunT):
            arrow = " -o " if isinstance(current.result, CotangentT) else " -> "
            parts = [(current.arg, 1), arrow, (current.result, 0)]
            if level > 0:
                parts = ["("] + parts + [")"]
            stack.extend(reversed(parts))
        else:  # pragma: no cover - every type class is handled above
            raise TypeError(f"cannot print type {current!r}")
    return "".join(out)
