"""The texts a program starts from: the prelude (read, parsed and typed once per process, typed
only in the part a program reaches) and source files (read with their limits).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from .errors import FileAccessError
from .parser import parse_module
from .syntax import Module, Term, free_vars
from .typecheck import ModuleTyping, Scheme, TypeEnv, infer_module


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


@functools.cache
def _prelude_names() -> frozenset[str]:
    return frozenset(decl.name for decl in _prelude().decls)


class ProgramTyping:
    """The typing of a program's module, the prelude typed only as far as it is needed: the
    program's own declarations are inferred when it is loaded, in the environment of the
    prelude definitions they may use; any other prelude definition is typed when its
    name is asked for (:meth:`scheme`, :meth:`env_for`) or the whole typing is."""

    def __init__(self, typing: ModuleTyping):
        """A typing that is complete already (the whole module inferred)."""
        self._typing = typing
        self._own: ModuleTyping | None = None
        self._prelude_typed: frozenset[str] | None = None  # None: all of it

    @classmethod
    def of_own(cls, own: Module, words: frozenset[str]) -> "ProgramTyping":
        """The typing of the program's own declarations ``own`` (the prelude unchanged
        before them), with the prelude definitions named in ``words`` (those it may use)
        and those they use; raises TypeCheckError."""
        typing = cls.__new__(cls)
        typing._own = None
        typing._prelude_typed = frozenset()
        typing._typed_with(words, own)
        return typing

    @property
    def whole(self) -> ModuleTyping:
        """The typing of the whole module, the prelude included."""
        if self._prelude_typed is not None:
            self._typed_with(_prelude_names())
        return self._typing

    def scheme(self, name: str) -> Scheme:
        """The scheme of the top-level ``name`` (a prelude definition typed if need be)."""
        scheme = self._typing.schemes.get(name)
        return scheme if scheme is not None else self.whole.schemes[name]

    def env_for(self, term: Term) -> TypeEnv:
        """A typing environment with every top-level name ``term`` uses."""
        if self._prelude_typed is not None:
            self._typed_with(free_vars(term) & _prelude_names())
        return self._typing.env

    def _typed_with(self, names: frozenset[str], user: Module | None = None) -> None:
        """Type the prelude definitions ``names`` too (with those they use): the program's
        own typing is kept, and put in the environment of the prelude typed so far.
        ``user``: the program's own declarations, inferred on the first call."""
        typed = self._prelude_typed
        if user is None and (typed is None or names <= typed):
            return
        reached = _prelude_closure(names | (typed or frozenset()))
        prelude = _prelude_typing(reached)
        if user is not None:
            self._own = infer_module(user, prelude.env)
        own = self._own
        assert own is not None, "the program's own declarations are inferred first"
        self._typing = ModuleTyping({**prelude.schemes, **own.schemes},
                                    {**prelude.types, **own.types},
                                    prelude.env.extend_all(own.schemes))
        self._prelude_typed = reached if len(reached) < len(_prelude_names()) else None


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
