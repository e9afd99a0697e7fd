"""Compile pieces and shared code objects: how a generated module becomes functions.

Two doors, both used by :mod:`lambdad.codegen` only:

* :func:`cut_into_pieces` cuts the body of a long generated function into functions of at
  most about ``MAX_PIECE_LINES`` statements, called in turn (CPython compiles a very long
  function slowly, and its frame would be too large);
* :func:`define_functions` defines the functions of a generated module in a namespace, as
  ``exec`` of its source would: a small module is compiled at once; a large one in batches
  of bounded size, with functions alike (up to their names, or for pieces up to their
  locals and the numbered globals they read) sharing one compiled code object.

What they produce computes what the uncut body compiled at once computes, bit for bit
(``tests/test_pieces.py``).  They read generated text only, never user text.
"""

from __future__ import annotations

import collections
import itertools
import re
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .guard import PrimSite

__all__ = ["Line", "MAX_PIECE_LINES", "cut_into_pieces", "define_functions"]


# Longest function generated in one piece (in statements): a longer one, the body of a
# long straight-line program, is cut into pieces called one after the other (see cut_into_pieces).
MAX_PIECE_LINES = 250
# The names a statement of generated code may read or bind locally.
# (Written to start with a character class, which the engine looks for before trying a
# match, rather than with `\b`: the lookbehind after it checks what `\b` would.)
# (`_r0` is the steps a batched fold's loop function receives, `_r1` the second list of
# a zip whose steps keep no record, see batched_loop.)
_LOCAL_OR_PARAMETER = re.compile(
    r"[tvc_](?<!\w[tvc_])(?:(?<=[tvc])[0-9]+|(?<=_)(?:c|st|r[01]))\b")
# The names a statement binds: `t1 = ...`, `v2, v3 = ...`, `c4, c5, = _c`, and the targets
# of a loop, `for v6 in ...:`, `for v7, v8 in zip(...):`.
_TARGETS = re.compile(r"^(?:for )?((?:[tvc][0-9]+, ?)*[tvc][0-9]+,?)(?: = | in )",
                      re.MULTILINE)
# A backpropagator body's first statement, unpacking the values it captures (as
# LinearBodies.lin_lam writes it).
_CAPTURED_UNPACK = re.compile(r"((?:c[0-9]+, )+)= _c")

Line = tuple[int, str, "PrimSite | None", tuple[str, ...], tuple[str, ...]]


def cut_into_pieces(name: str, params: list[str], lines: list[Line], fresh: Callable[[str], str]
            ) -> list[tuple[str, list[str], list[Line]]]:
    """The function ``name(params)`` with body ``lines`` as functions of at most about
    MAX_PIECE_LINES statements each (name, parameters, body): a long body is cut between
    top-level statements into pieces, called in turn by the function itself.  CPython's
    compiler holds the syntax tree of a whole function at once and slows down on very long
    ones; pieces keep both bounded.  Lines keep their sites (errors).

    Frames stay small too, however long the body.  CPython keeps frames in chunks of a
    stack that it maps from the system when a frame does not fit, and unmaps when the
    frame at a chunk's start returns: a piece called where its frame does not fit pays a
    mapping per call, tens of microseconds, and a function holding every value that
    crosses between its pieces has a frame that large programs make too big.  So each
    piece returns the values later pieces read as one tuple, which the function keeps
    (``_o0``, ``_o1``, ...) and passes on, and a later piece takes them out by index (its
    parameters ``_i0``, ``_i1``, ...); the captured values unpacked from ``_c`` reach a
    piece as the slice of ``_c`` it reads.  A value read once, by a statement with no site,
    is read in place (the tuple of a long program's backpropagator, built from all its
    captured values); any other is first loaded into a local of its own name, where an
    error finds it.  Pieces alike stay the same text up to their local names."""
    if len(lines) <= MAX_PIECE_LINES:
        return [(name, params, lines)]
    source: dict[str, tuple[str, int]] = {}  # a value from outside a piece -> (tuple, index)
    body = []
    for line in lines:
        match = _CAPTURED_UNPACK.fullmatch(line[1]) \
            if line[0] == 1 and not source and "_c" in params else None
        if match is not None:
            source.update((local, ("_c", index))
                          for index, local in enumerate(match.group(1).split(", ")[:-1]))
        else:
            body.append(line)
    segments: list[list[Line]] = [[]]
    for line in body:
        if (len(segments[-1]) >= MAX_PIECE_LINES and line[0] == 1
                and not line[1].startswith("else:")):
            segments.append([])
        segments[-1].append(line)
    # Per segment: the names it reads from outside with their number of reads, in order
    # of first appearance, and the names it binds, in order.
    reads: list[dict[str, int]] = []
    binds: list[list[str]] = []
    # An error at a site reads its source primitive's arguments from the frame by name
    # (lambdad.guard; its operands are in its text): those a piece does not read.
    unread: list[tuple[int, str]] = []
    for index, segment in enumerate(segments):
        # (the segment's statements as one text: a regular expression run once, not per line)
        text = "\n".join([line[1] for line in segment])
        targets = dict.fromkeys(_LOCAL_OR_PARAMETER.findall(" ".join(_TARGETS.findall(text))))
        counts = collections.Counter(_LOCAL_OR_PARAMETER.findall(text))
        for line in segment:
            if line[2] is not None and line[2].source_atoms:
                unread.extend((index, atom) for atom in line[2].source_atoms
                              if atom not in counts and atom not in targets
                              and _LOCAL_OR_PARAMETER.fullmatch(atom))
        reads.append({local: count for local, count in counts.items() if local not in targets})
        binds.append(list(targets))
    if unread:
        # Loaded too where bound before the piece whatever runs: a parameter, a captured
        # value, a statement of the body itself (not of a branch).
        bound_in = dict.fromkeys([*params, *source], -1)  # name -> segment binding it
        for index, segment in enumerate(segments):
            bound_in.update(dict.fromkeys(_LOCAL_OR_PARAMETER.findall(" ".join(
                _TARGETS.findall("\n".join([line[1] for line in segment
                                             if line[0] == 1])))), index))
        for index, atom in unread:
            if bound_in.get(atom, index) < index:
                reads[index][atom] = 2  # (loaded, never read in place)
    later: set[str] = set()
    returned: list[list[str]] = [[] for _ in segments]
    for index in range(len(segments) - 1, -1, -1):
        returned[index] = [local for local in binds[index] if local in later]
        later.update(reads[index])
        source.update((local, (f"_o{index}", position))
                      for position, local in enumerate(returned[index]))
    pieces: list[tuple[str, list[str], list[Line]]] = []
    calls: list[Line] = []
    for index, segment in enumerate(segments):
        piece = fresh("_f")
        arguments: list[str] = []
        piece_params: list[str] = []
        # The tuples it reads, in order of first use; a slice of `_c` from the first
        # captured value it reads (so pieces alike read alike).
        tuples: dict[str, str] = {}
        first_captured = min((source[local][1] for local in reads[index]
                              if local in source and source[local][0] == "_c"), default=0)
        last_captured = first_captured
        place: dict[str, str] = {}  # a value read from a tuple -> its expression there
        for local in reads[index]:
            if local not in source:  # a parameter of the function
                arguments.append(local)
                piece_params.append(local)
                continue
            outer, position = source[local]
            if outer not in tuples:
                tuples[outer] = f"_i{len(tuples)}"
            if outer == "_c":
                last_captured = max(last_captured, position)
                position -= first_captured
            place[local] = f"{tuples[outer]}[{position}]"
        for outer, param in tuples.items():
            arguments.append(f"_c[{first_captured}:{last_captured + 1}]" if outer == "_c"
                             else outer)
            piece_params.append(param)
        # Values read once, by a statement with no site that says it uses them, are read
        # in place there; the others are loaded.
        once = {local for local in place if reads[index][local] == 1}
        in_place: set[str] = set()
        if once:
            once.difference_update(itertools.chain.from_iterable(
                [line[4] for line in segment if line[2] is not None]))

            def in_its_tuple(match: re.Match) -> str:
                found = match.group(0)
                if found not in once:
                    return found
                in_place.add(found)
                return place[found]

            segment = [line if line[2] is not None or once.isdisjoint(line[4]) else
                       (line[0], _LOCAL_OR_PARAMETER.sub(in_its_tuple, line[1]), *line[2:])
                       for line in segment]
        loads: list[Line] = [(1, f"{local} = {where}", None, (), ())
                             for local, where in place.items() if local not in in_place]
        call = f"{piece}({', '.join(arguments)})"
        if index == len(segments) - 1:
            calls.append((1, f"return {call}", None, (), ()))
            piece_body = loads + segment
        elif returned[index]:
            calls.append((1, f"_o{index} = {call}", None, (), ()))
            names = "".join(f"{local}, " for local in returned[index])
            piece_body = loads + segment + [(1, f"return ({names})", None, (), ())]
        else:
            calls.append((1, call, None, (), ()))
            piece_body = loads + segment
        pieces.append((piece, piece_params, piece_body))
    return [(name, params, calls), *pieces]


# Names local to a generated function (parameters and temporaries; `_c` and `_st` are the
# same in every function) and the numbered globals (functions `_f3`, constants `_k4`): what
# differs between two pieces of long functions that compute alike.
_LOCAL_OR_NUMBERED_NAME = re.compile(  # `\b([tvc][0-9]+|_[fk][0-9]+)\b`, as above
    r"([tvc_](?<!\w[tvc_])(?:(?<=[tvc])[0-9]+|(?<=_)[fk][0-9]+))\b")
# Lines of generated code compiled at once: CPython's compiler holds the syntax tree of
# what it compiles (kilobytes a line), so a bounded batch keeps memory bounded.
_LINES_PER_COMPILE = 4000


def _canonical_names(count: int, prefix: str, known: list[str]) -> list[str]:
    """``known`` extended to at least ``count`` names ``prefix0``, ``prefix1``, ..."""
    while len(known) < count:
        known.append(f"{prefix}{len(known)}")
    return known


def _canonical_piece(body: str, local_names: list[str], global_names: list[str]
                     ) -> tuple[str, dict[str, str]]:
    """The text of a piece's ``body`` (from its parameters on) with its locals renamed
    ``a0``, ``a1``, ... and its numbered globals ``g0``, ``g1``, ... in order of first
    appearance, the globals made keyword-only parameters; and the renaming, from new names
    to old.  (``local_names`` and ``global_names`` cache the new names.)"""
    # Split at the names: the odd parts are the names, in order of appearance.
    parts = _LOCAL_OR_NUMBERED_NAME.split(body)
    names = parts[1::2]
    seen = list(dict.fromkeys(names))
    local = [n for n in seen if n[0] != "_"]
    numbered = [n for n in seen if n[0] == "_"]
    canonical = dict(zip(local, _canonical_names(len(local), "a", local_names)))
    canonical.update(zip(numbered, _canonical_names(len(numbered), "g", global_names)))
    parts[1::2] = [canonical[n] for n in names]
    text = "".join(parts)
    if numbered:  # (the parameters end at the header's first `):`)
        end = text.index("):")
        keywords = ", ".join(canonical[n] for n in numbered)
        text = f"{text[:end]}{', ' if end else ''}*, {keywords}{text[end:]}"
    return text, {new: old for old, new in canonical.items()}


def _compiled_functions(lines: Sequence[str], placed: Sequence[tuple[str, int, int]],
                        namespace: dict[str, Any], filename: str,
                        pieces: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """The functions of the generated module of ``lines`` (each at its place in ``placed``),
    as ``exec`` of the module would define them, compiled in batches of bounded size.

    Functions of the same text but for their name (locals are numbered per function, and
    the backpropagators of a long straight-line program come in a handful of shapes) are
    compiled once: each one is that code with its own name and its own first line (an
    error finds its site in the module's line table by line number; the line table of a
    code object counts from its first line).

    The ``pieces`` of a long function (see :func:`cut_into_pieces`) differ in the numbers of their
    locals and in the numbered globals they read (the backpropagator bodies and spans of
    their own statements): such a piece is compiled with its names renamed in order of
    appearance and those globals as keyword-only parameters, which its function receives
    as defaults (the values of the globals, bound once every function exists); its code
    gets back its own local names (an error reads operands from the frame by name, and the
    parameters standing for globals are named as the globals).  So pieces alike share one
    compilation too.
    """
    shapes: dict[str, types.CodeType] = {}  # canonical text -> its code
    waiting: dict[str, None] = {}  # canonical texts not compiled yet, in order
    made: list[tuple[str, int, str, dict[str, str]]] = []
    functions: dict[str, Any] = {}
    # Pieces whose keyword-only parameters (globals) get their values at the end.
    bound_later: list[Any] = []
    local_names: list[str] = []
    global_names: list[str] = []

    def compile_waiting() -> None:
        texts = list(waiting)
        module = compile("".join(text.replace("def _shape(", f"def _shape{index}(", 1)
                                 for index, text in enumerate(texts)), filename, "exec")
        codes = {code.co_name: code for code in module.co_consts
                 if isinstance(code, types.CodeType)}
        for index, text in enumerate(texts):
            shapes[text] = codes[f"_shape{index}"]
        waiting.clear()

    def define_made() -> None:
        compile_waiting()
        for name, first, text, renaming in made:
            code = shapes[text]
            if renaming:
                code = code.replace(co_name=name, co_qualname=name, co_firstlineno=first,
                                    co_varnames=tuple(renaming.get(local, local)
                                                      for local in code.co_varnames))
            else:
                code = code.replace(co_name=name, co_qualname=name, co_firstlineno=first)
            function = types.FunctionType(code, namespace, name)
            functions[name] = function
            if code.co_kwonlyargcount:
                bound_later.append(function)
        made.clear()

    waiting_lines = 0
    for name, first, count in placed:
        header = lines[first - 1]
        body = "\n".join(lines[first - 1:first - 1 + count])[header.index("(") + 1:]
        if name in pieces:
            text, renaming = _canonical_piece(body, local_names, global_names)
        else:
            # Locals are numbered per function (see _Function): alike is the same text.
            text, renaming = body, {}
        text = "def _shape(" + text + "\n"
        made.append((name, first, text, renaming))
        if text not in shapes and text not in waiting:
            waiting[text] = None
            waiting_lines += count
            if waiting_lines > _LINES_PER_COMPILE:
                define_made()
                waiting_lines = 0
    define_made()
    for function in bound_later:
        code = function.__code__
        keywords = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
        function.__kwdefaults__ = {keyword: functions[keyword] if keyword in functions
                                   else namespace[keyword] for keyword in keywords}
    return functions


def define_functions(source: str, lines: Sequence[str], placed: Sequence[tuple[str, int, int]],
                     namespace: dict[str, Any], filename: str,
                     pieces: frozenset[str] | set[str] = frozenset()) -> None:
    """Defines in ``namespace`` the functions of the generated module ``source`` (its
    ``lines``, each function at its place in ``placed``; ``pieces`` names the pieces of
    long functions): ``exec`` of the source when it is small, else
    :func:`_compiled_functions`.  Raises what ``compile`` raises (RecursionError and
    MemoryError for a module too large)."""
    if source.count("\n") <= _LINES_PER_COMPILE:  # small: compiled at once
        exec(compile(source, filename, "exec"), namespace)
    else:
        namespace.update(_compiled_functions(lines, placed, namespace, filename, pieces))
