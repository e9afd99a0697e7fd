"""The texts a program starts from: the prelude (read, parsed and typed once per process, typed
only in the part a program reaches) and source files (read with their limits).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from .errors import FileAccessError
from .parser import parse_module
from .syntax import Module, free_vars
from .typecheck import ModuleTyping, infer_module


PRELUDE_FILE = "<prelude>"

@functools.cache
def prelude_text() -> str:
    """The source of the prelude, the definitions every program starts with (read once).
    Installed as files, it is read beside this module: finding it as a package resource
    costs a fresh process some milliseconds, the resource lookup is for other installs
    (a zip archive)."""
    beside = Path(__file__).with_name("prelude.lam")
    if beside.is_file():
        return beside.read_text(encoding="utf-8")
    return resources.files("lambdad").joinpath("prelude.lam").read_text(encoding="utf-8")


@functools.cache
def _prelude() -> Module:
    """The prelude's declarations, parsed once (they are immutable: every program shares
    these very nodes)."""
    return parse_module(prelude_text(), PRELUDE_FILE)


@functools.cache
def _prelude_uses(name: str) -> frozenset[str]:
    """The prelude definitions that the prelude's definition ``name`` uses directly."""
    decls = {decl.name: decl for decl in _prelude().decls}
    return free_vars(decls[name].value) & decls.keys()


def _prelude_closure(names: frozenset[str]) -> frozenset[str]:
    """``names`` (prelude definitions) with every prelude definition they use, transitively."""
    reached = set(names)
    pending = list(names)
    while pending:
        for used in _prelude_uses(pending.pop()):
            if used not in reached:
                reached.add(used)
                pending.append(used)
    return frozenset(reached)


@functools.lru_cache(maxsize=64)
def _prelude_typing(names: frozenset[str]) -> ModuleTyping:
    """The typing of the prelude's definitions ``names`` (closed under use), made once per
    set (of the few sets programs reach).  A program types only the part of the prelude it reaches: the prelude is tested,
    so putting the rest off changes no message, and a small program loads without typing
    all of it (the typing's node-keyed types stay valid: these very nodes are reused)."""
    return infer_module(Module(tuple(d for d in _prelude().decls if d.name in names)))


# Larger sources are refused before parsing: far beyond any program written by hand or
# generated for a benchmark, and a guard against endless inputs such as /dev/zero.
MAX_SOURCE_BYTES = 64 * 1024 * 1024


def read_source(path: str | Path) -> str:
    """The text of the file ``path``; raises FileAccessError (a UsageError) if it cannot be
    read, is not UTF-8, or is larger than MAX_SOURCE_BYTES."""
    path = Path(path)
    if "\0" in str(path):
        raise FileAccessError(f"no such file: {str(path)!r} (a file name has no NUL character)")
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_SOURCE_BYTES + 1)
    except FileNotFoundError:
        raise FileAccessError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise FileAccessError(f"{path} is a directory, not a .lam file") from None
    except OSError as exc:
        raise FileAccessError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise FileAccessError(f"{path} is larger than {MAX_SOURCE_BYTES // 2**20} MiB; "
                              "lambdad reads source files up to that size")
    try:
        # Windows line ends read as \n; a line ends at \n only, in the parser and every message.
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise FileAccessError(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None
