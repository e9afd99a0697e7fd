"""lambdad: a small simply-typed λ-calculus for differentiable programming.

Programs are parsed, type-checked, and transformed into a forward-mode (dual numbers)
program and a backpropagation program with linear negation (Brunel, Mazza, Pagani, POPL
2020), evaluated with linear factoring so a gradient costs a constant factor of the program.

    import lambdad
    prog = lambdad.load("programs/baydin.lam")
    prog.run()                      # value of main
    prog.grad("f", (2.0, 5.0))      # (5.5, 1.7163378145367738)
"""

from .errors import (
    DifferentiationError,
    DomainError,
    EvalError,
    FileAccessError,
    LambdadError,
    ModuleError,
    ParseError,
    ResourceError,
    ToolError,
    TypeCheckError,
    UsageError,
)
from .edge import checked
from .errors import render as _render
from .pipeline import Program, load, loads

render = checked(_render)

__all__ = [
    "DifferentiationError",
    "EvalError",
    "FileAccessError",
    "LambdadError",
    "ModuleError",
    "ParseError",
    "Program",
    "ResourceError",
    "ToolError",
    "TypeCheckError",
    "UsageError",
    "load",
    "loads",
    "render",
]
__version__ = "0.1.0"


def load_ipython_extension(ipython):  # noqa: ANN001 - IPython's hook
    """``%load_ext lambdad`` in IPython or Jupyter (needs the ``notebook`` extra)."""
    from .notebook import load_ipython_extension as load

    load(ipython)
