"""Programs of several files: following a file's imports, and linking the files' declarations
into one module in which every name is defined once.

``import "lib/stats.lam"`` at the top of a file (docs/language.md, "Modules") gives the file
every definition of ``lib/stats.lam`` (named relative to the importing file), those it
imports included.  A file imported along several paths is read once, where it is first
imported; an import cycle and a file that cannot be read are :class:`ModuleError` located at
the import.

A file sees, in this order, the prelude, the files it imports (directly or not, in the order
they were first imported) and its own definitions above.  A definition of a name seen
before shadows it for what follows, as a definition of a prelude name does; what each file's
definitions mean is fixed where they are written.  So :func:`link` renames: a definition that
the program's own file does not see in the end (shadowed) is renamed ``name'1`` (with the
uses that mean it), so that the linked module defines every name once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import attrs

from .errors import FileAccessError, ModuleError
from .parser import Import, ProgramText
from .primitives import Primitive, declared_by
from .syntax import Decl, Module, free_vars, names_used, numbered, renamed_free

__all__ = ["Linked", "Unit", "gather", "link"]


@attrs.frozen
class Unit:
    """One file of a program: its name in messages, its text read, and the units (by index
    in :func:`gather`'s answer) that its imports name, in the order written."""

    file: str
    read: ProgramText = attrs.field(eq=False, repr=False)
    imports: tuple[int, ...]


@attrs.define
class _Reading:
    """A file being read by :func:`gather`: its imports are followed one by one."""

    file: str
    key: str
    read: ProgramText
    through: int = 0  # how many of its imports are followed
    imports: list[int] = attrs.Factory(list)


def imported_path(importer: str, path: str) -> str:
    """The file an ``import "path"`` in the file ``importer`` names: ``path`` relative to
    the directory of ``importer`` (the current directory for a text that is no file,
    ``<string>``, ``<repl>``)."""
    folder = "" if importer.startswith("<") else os.path.dirname(importer)
    return os.path.normpath(os.path.join(folder, path))


def _key(file: str) -> str:
    """What makes two names of a file the same file: the path resolved (a name that is no
    path, with a NUL, as it is: reading it fails)."""
    try:
        return os.path.realpath(file)
    except (OSError, ValueError):
        return file


def gather(text: str, file: str, read: Callable[[str], str],
           sources: dict[str, str]) -> tuple[Unit, ...]:
    """Every file of the program ``text`` (the file ``file``), each once, a file after those
    it imports, ``file`` last.  ``read`` gives a file's text (raising FileAccessError);
    each text read is put in ``sources`` at once, so that an error in it can be shown.
    Raises ModuleError at an import of a file that cannot be read or that closes a cycle,
    and ParseError for a file's syntax error.  Iterative."""
    done: dict[str, int] = {}
    units: list[Unit] = []
    stack = [_Reading(file, _key(file), ProgramText(text, file))]
    while stack:
        top = stack[-1]
        if top.through < len(top.read.imports):
            found: Import = top.read.imports[top.through]
            top.through += 1
            path = imported_path(top.file, found.path)
            key = _key(path)
            if key in done:  # a diamond: read once
                top.imports.append(done[key])
                continue
            cycle = [reading.key for reading in stack]
            if key in cycle:
                chain = [reading.file for reading in stack[cycle.index(key):]]
                steps = ", which imports ".join(chain[1:] + [path])
                raise ModuleError(f"import cycle: {chain[0]} imports {steps}", found.span)
            try:
                imported = read(path)
            except FileAccessError as error:
                raise ModuleError(f"cannot import `{found.path}`: {error.message}",
                                  found.span) from None
            sources[path] = imported
            stack.append(_Reading(path, key, ProgramText(imported, path)))
            continue
        stack.pop()
        done[top.key] = len(units)
        units.append(Unit(top.file, top.read, tuple(top.imports)))
        if stack:
            stack[-1].imports.append(done[top.key])
    return tuple(units)


@attrs.frozen
class Linked:
    """The declarations of a program of several files, every name defined once: the
    prelude's (the very declarations given when none is renamed) and the files', in order.

    ``hidden`` maps each renamed definition's new name to its name as written and the file
    it is in (``origin``: a unit's file, or the prelude's)."""

    prelude: tuple[Decl, ...]
    decls: tuple[Decl, ...]
    hidden: Mapping[str, tuple[str, str]]


def link(prelude: Sequence[Decl], prelude_file: str, units: Sequence[Unit]) -> Linked:
    """The units' declarations (parsed here, each file in the scope of what it sees) and the
    prelude's, linked: see the module's docstring.  Raises ParseError, or TypeCheckError for
    a use of a later definition."""
    prelude_names = [decl.name for decl in prelude]
    # what each unit sees: the units it imports, directly or not
    reached: list[frozenset[int]] = []
    for unit in units:
        seen: set[int] = set()
        for index in unit.imports:
            seen |= reached[index] | {index}
        reached.append(frozenset(seen))
    modules: list[Module] = []
    for index, unit in enumerate(units):
        names = list(prelude_names)
        declared: dict[str, Primitive] = {}
        for before in sorted(reached[index]):
            for decl in modules[before].decls:
                names.append(decl.name)
                entry = declared_by(decl.name, decl.value)
                if entry is not None:
                    declared[decl.name] = entry
                else:
                    declared.pop(decl.name, None)
        modules.append(unit.read.declarations(names, allow_redefinition=True,
                                              declared=declared.values()))

    # The declarations by layer: 0 the prelude, then the units in order.
    layers = [tuple(prelude), *(module.decls for module in modules)]
    last = {decl.name: layer for layer, decls in enumerate(layers) for decl in decls}
    taken: set[str] | None = None  # every name the layers use, once a name is hidden
    renamed: list[dict[str, str]] = []  # per layer: a name hidden, its new name
    hidden: dict[str, tuple[str, str]] = {}
    for layer, decls in enumerate(layers):
        here: dict[str, str] = {}
        for decl in decls:
            if last[decl.name] != layer:
                if taken is None:
                    taken = names_used([decl for decls in layers for decl in decls])
                new = numbered(f"{decl.name}'", taken)
                taken.add(new)
                here[decl.name] = new
                hidden[new] = (decl.name, prelude_file if layer == 0 else units[layer - 1].file)
        renamed.append(here)

    def scoped(layer: int, decls: Sequence[Decl], scope: dict[str, str]) -> tuple[Decl, ...]:
        """``decls`` of ``layer`` with their uses of the names ``scope`` renames (to the
        names their meanings have in the linked module) renamed, each declaration then
        updating ``scope``.  Nothing is walked while nothing is renamed."""
        out = []
        for decl in decls:
            written = decl.name
            new = renamed[layer].get(written, written)
            changed = {name: scope[name] for name in free_vars(decl.value) if name in scope} \
                if scope else {}
            if changed or new != written:
                decl = attrs.evolve(decl, name=new, value=renamed_free(decl.value, changed))
            out.append(decl)
            _see(scope, written, new)
        return tuple(out)

    prelude_scope: dict[str, str] = {}
    linked_prelude = scoped(0, prelude, prelude_scope)
    linked: list[Decl] = []
    for index in range(len(units)):
        scope = dict(prelude_scope)
        for before in sorted(reached[index]):
            for decl in modules[before].decls:
                _see(scope, decl.name, renamed[before + 1].get(decl.name, decl.name))
        linked.extend(scoped(index + 1, modules[index].decls, scope))
    return Linked(linked_prelude, tuple(linked), hidden)


def _see(scope: dict[str, str], name: str, new: str) -> None:
    """``scope`` after a definition of ``name`` that the linked module calls ``new``: it
    holds the names renamed only."""
    if new != name:
        scope[name] = new
    else:
        scope.pop(name, None)
