"""A fast loop over lark's LALR(1) tables: the one module that reads lark's private parts.

lark's generic parsing loop costs about 30 µs a token in CPython; :class:`Driver` runs the
same tables and callbacks in a tight loop of its own (see its docstring).  To do so it reads
attributes that are not lark's public API (the parse table, the callbacks, the contextual
lexer's terminals per state).  So:

* the versions of lark it was written and tested against are pinned in ``pyproject.toml``
  (:data:`LARK_VERSIONS`);
* :func:`checked_driver` builds a driver only if it then builds, on sample texts, exactly the
  trees lark's own parser builds; on any failure (lark's parts renamed or changed) it gives
  None, and the caller parses with lark's public ``Lark.parse`` instead (slower, the same
  trees).

Nothing else in lambdad reads lark's private attributes (a test checks it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lark

__all__ = ["LARK_VERSIONS", "Driver", "Refused", "checked_driver", "verdict_file"]

# The lark versions whose internals Driver reads, as pyproject.toml requires them.
LARK_VERSIONS = ">=1.1.9,<1.4"


class Refused(Exception):
    """The driver met something it does not decide itself (a syntax error, a character no
    terminal matches): the caller lets lark parse the text again and report it."""


class _Reduction:
    """A reduction of the fast driver: pop ``size`` values, build with ``build``, go to
    ``origin``."""

    __slots__ = ("size", "build", "origin")

    def __init__(self, size: int, build: Any, origin: str):
        self.size = size
        self.build = build
        self.origin = origin


class _Pass:
    """A one-child reduction whose single value is passed through unchanged (by lark for a
    one-child ``?rule``, or by a callback with a true ``passes_its_child`` attribute), on one terminal
    in one state: only the top state changes.

    ``targets`` maps the state below to the top state after this reduction and the
    one-child reductions the same terminal triggers next, with the action that terminal
    has there (None if none: a syntax error); filled as met: a few entries."""

    __slots__ = ("origin", "targets")

    def __init__(self, origin: str):
        self.origin = origin
        self.targets: dict[int, tuple[int, Any]] = {}


class _Accept:
    """The action on the end of the text in the end state of the start symbol ``start``:
    the parse is done (lark stops when a reduction at the end reaches that state)."""

    __slots__ = ("start",)

    def __init__(self, start: str):
        self.start = start


class Driver:
    """lark's LALR tables and callbacks run by a tight loop of our own.

    lark's generic loop (a token-feeding state object, a token object with eight fields,
    line and column counted for every token) costs about 30 µs a token in CPython; this one
    reads the same tables, so a 10^4-line program parses in a fraction of the time.  It
    builds exactly the tree lark would:

    * a token is matched by one alternation of terminals in lark's order (priority, then
      length): of all of them (one regular expression, compiled once), kept where the
      parser's state accepts the terminal it finds, else of those lark's contextual lexer
      accepts in that state (one per set of terminals, compiled when first needed, and
      used throughout for a text of :attr:`OWN_SCANNERS_FROM` characters or more), so it
      matches what lark's lexer for that state would;
    * reductions call lark's own callbacks (the transformer's methods behind lark's
      wrappers), except those lark would pass a single value through unchanged;
    * tokens are instances of the tuple subclass ``token``, made from ``(kind, text, start,
      end)``, as the transformer's terminal callbacks turn lark's.

    Anything else (a syntax error, an unknown character) raises :class:`Refused`, and
    the caller lets lark parse the text again to report it in its terms.
    """

    # The length of a text from which each state's own scanner reads it (see :meth:`parse`).
    OWN_SCANNERS_FROM = 100_000

    def __init__(self, parser: lark.Lark, token: type[tuple]):
        self.token = token
        frontend = parser.parser
        lalr = frontend.parser.parser
        table = lalr.parse_table
        callbacks = lalr.callbacks
        contextual = frontend.lexer
        root = contextual.root_lexer
        self.flags = root.g_regex_flags
        # the terminals lark's lexer of each state tries, in its order
        self.lexers = {state: lexer.terminals for state, lexer in contextual.lexers.items()}
        self.ignored = frozenset(map(str, root.ignore_types))
        # Blanks and comments (the ignored terminals) are skipped in the same match as the
        # token after them; atomically, so the scanner cannot give back part of a comment
        # (`--`) to match `-`.  This equals lark's lexer because in lark's order no other
        # terminal before them matches where they do (a blank or `--`).
        self.blanks = "(?>(?:" + "|".join(t.pattern.to_regexp() for t in root.terminals
                                          if t.name in self.ignored) + ")*)"
        self.skip = re.compile(self.blanks, self.flags)
        # Every state's lexer tries its terminals in one order, lark's (priority, then
        # length, then name): the same for all, so the scanner of all terminals finds, where
        # it finds a terminal that the state accepts, what that state's own scanner finds
        # (every terminal before it in the state's order is before it in this one, and did
        # not match).  It is the one scanner most texts need; a state's own is made only
        # when the shared one finds a terminal the state does not accept.
        self.terminals = [t for t in root.terminals if t.name not in self.ignored]
        order = {t.name: i for i, t in enumerate(root.terminals)}
        for lexer in {id(lexer): lexer for lexer in contextual.lexers.values()}.values():
            ranks = [order[t.name] for t in lexer.terminals]
            assert ranks == sorted(ranks), "a state's lexer tries terminals in another order"
        self.shared: Any = None  # the match method of the scanner of all terminals, when made
        # lark numbers its states 0, 1, ...: the driver's tables are lists indexed by state.
        count = len(table.states)
        assert set(table.states) == set(range(count))
        # state -> the match method of its own scanner (made when first needed); the same,
        # the shared scanner's where none is made yet (filled when that one is made); and
        # the scanners by the terminals they try (many states accept the same ones)
        self.scanners: list[Any] = [None] * count
        self.first_tried: list[Any] = []
        self.by_terminals: dict[tuple[str, ...], Any] = {}
        sentinel = object()
        reductions: dict[Any, _Reduction] = {}
        # state -> terminal or rule name -> a state to shift or go to, a _Reduction, a _Pass
        # or an _Accept
        self.actions: list[dict[str, Any]] = [{} for _ in range(count)]
        for state, actions in table.states.items():
            row = self.actions[state]
            for symbol, (action, argument) in actions.items():
                # Plain str keys: lark's are Tokens, whose __eq__ is Python code.
                symbol = str(symbol)
                if action.name == "Shift":
                    row[symbol] = argument
                    continue
                rule = argument
                build = callbacks[rule]
                if len(rule.expansion) == 1 and (
                        getattr(build, "passes_its_child", False)
                        or rule.alias is None and rule.options.expand1
                        and build([sentinel]) is sentinel):
                    row[symbol] = _Pass(str(rule.origin.name))
                    continue
                if rule not in reductions:
                    reductions[rule] = _Reduction(len(rule.expansion), build,
                                                  str(rule.origin.name))
                row[symbol] = reductions[rule]
        self.start_states = dict(table.start_states)
        # lark's end states have no action: reaching one at the end of the text accepts
        self.accepts: dict[str, _Accept] = {}
        for start, state in table.end_states.items():
            assert not self.actions[state]
            self.accepts[start] = self.actions[state]["$END"] = _Accept(start)
        # A token of a regular terminal whose text is a string terminal of equal priority
        # is re-typed by lark to that string terminal when the state accepts it (`*` is
        # TIMES in a type and STAR in an expression): regular name -> {text: string name}.
        self.unless: dict[str, dict[str, str]] = {}
        for regular in root.terminals:
            for string in root.terminals:
                if (string.pattern.type == "str" and regular.pattern.type == "re"
                        and string.priority == regular.priority
                        and re.fullmatch(regular.pattern.to_regexp(), string.pattern.value,
                                         self.flags)):
                    self.unless.setdefault(regular.name, {})[string.pattern.value] = string.name
        # Where the shared scanner finds such a text as the regular terminal in a state that
        # does not accept that terminal but accepts the string one, the token is re-typed
        # as in a state that accepts both (`*` is STAR after an operand); the state's own
        # scanner would find the string terminal too if no terminal between the two in
        # lark's order can match there: every one is a string neither a prefix of that
        # text nor beginning with it.  The driver is built only for grammars where it is so.
        names = [t.name for t in root.terminals]
        for regular, strings in self.unless.items():
            for value, string in strings.items():
                first, last = sorted((names.index(regular), names.index(string)))
                assert all(t.pattern.type == "str" and not t.pattern.value.startswith(value)
                           and not value.startswith(t.pattern.value)
                           for t in root.terminals[first + 1:last]), (regular, string)

    def scanner(self, state: int) -> Any:
        """The match method of the scanner of ``state``: blanks and comments, then one of
        the terminals lark's lexer of that state tries, as the named group of its terminal."""
        terminals = [t for t in self.lexers[state] if t.name not in self.ignored]
        key = tuple(t.name for t in terminals)
        match = self.by_terminals.get(key)
        if match is None:
            match = self.by_terminals[key] = self.matcher(terminals)
        self.scanners[state] = match
        if self.first_tried:
            self.first_tried[state] = match
        return match

    def relexed(self, text: str, pos: int, state: int) -> tuple[Any, str, int]:
        """``(token, kind, end)``: the token at ``pos`` by the scanner of ``state`` itself,
        where the shared scanner found one the state has no action for; raises Refused if
        that scanner finds none (the text has a token there, which the state does not
        accept: a syntax error)."""
        scan = self.scanners[state]
        if scan is None:
            scan = self.scanner(state)
        match = scan(text, pos)
        if match is None:
            raise Refused
        kind = match.lastgroup
        first, end = match.end(1), match.end()
        value = text[first:end]
        retyped = self.unless.get(kind, {}).get(value)
        if retyped is not None and retyped in self.actions[state]:
            kind = retyped
        return tuple.__new__(self.token, (kind, value, first, end)), kind, end

    def matcher(self, terminals: list[Any]) -> Any:
        """The match method of one regular expression: blanks and comments (group 1), then
        one of lark's ``terminals``, in their order, as the named group of its terminal."""
        # Each terminal's group is an empty one after its pattern, not one around it: the
        # regular expression engine skips an alternative whose first character cannot
        # match without entering it, which a group opening it would prevent.
        alternatives = "|".join(f"(?:{t.pattern.to_regexp()})(?P<{t.name}>)" for t in terminals)
        return re.compile("(" + self.blanks + ")(?:" + alternatives + ")", self.flags).match

    def parse(self, text: str, start: str) -> Any:
        """What lark's ``parse(text, start=start)`` returns; raises Refused on a syntax
        error and whatever a callback raises."""
        actions = self.actions
        unless = self.unless
        scanners = self.scanners
        if self.shared is None:
            self.shared = self.matcher(self.terminals)
            self.first_tried = [own or self.shared for own in self.scanners]
        # A long text is read by each state's own scanner (compiled when the state is first
        # met), which costs less a token than the shared one but a few milliseconds to make;
        # a short one by the shared scanner, where no text made the state's own.
        scans = scanners if len(text) >= self.OWN_SCANNERS_FROM else self.first_tried
        new = tuple.__new__
        token_class = self.token
        # the parser's states, the top one also in ``state``, and the values above each
        state = self.start_states[start]
        states = [state]
        values: list[Any] = []
        pos = 0
        while True:
            # ---- the next token, lexed in the parser's current state (by a scanner of
            # all terminals, if the state accepts the one it finds)
            scan = scans[state]
            if scan is None:
                scan = self.scanner(state)
            match = scan(text, pos)
            if match is not None:
                kind = match.lastgroup
                first = match.end(1)  # after the blanks and comments
                pos = match.end()
                value = text[first:pos]
                if kind in unless:
                    retyped = unless[kind].get(value)
                    if retyped is not None and retyped in actions[state]:
                        kind = retyped
                token = new(token_class, (kind, value, first, pos))
            elif self.skip.match(text, pos).end() == len(text):
                kind = "$END"
            else:
                raise Refused  # a character no terminal of this state matches
            # ---- fed to the parser: reduce as the table says, then shift
            action = actions[state].get(kind)
            if action is None and match is not None and scan is not scanners[state]:
                token, kind, pos = self.relexed(text, match.start(), state)
                action = actions[state].get(kind)
            while True:
                if action.__class__ is int:
                    state = action
                    states.append(state)
                    values.append(token)
                    break
                if action.__class__ is _Pass:
                    below = states[-2]
                    target = action.targets.get(below)
                    if target is None:
                        target = action.targets[below] = self.passed(below, action, kind)
                    state, action = target
                    states[-1] = state
                    continue
                if action.__class__ is _Reduction:
                    size = action.size
                    if size:
                        children = values[-size:]
                        del states[-size:]
                        del values[-size:]
                    else:
                        children = []
                    values.append(action.build(children))
                    state = actions[states[-1]][action.origin]
                    states.append(state)
                    action = actions[state].get(kind)
                elif action is self.accepts[start]:
                    return values[-1]
                else:  # no action: a syntax error (or another start symbol's end state)
                    raise Refused

    def passed(self, below: int, action: _Pass, kind: str) -> tuple[int, Any]:
        """The top state after the one-child reduction ``action`` over ``below`` and those
        that ``kind`` triggers after it, one after the other (the state below never
        changes), and the action of ``kind`` in that state (None if it has none)."""
        while True:
            top = self.actions[below][action.origin]
            action = self.actions[top].get(kind)
            if action.__class__ is not _Pass:
                return top, action


def checked_driver(parser: lark.Lark, token: type[tuple], samples: Sequence[tuple[str, str]],
                   shape: Callable[[Any], Any], passed: str | None = None) -> Driver | None:
    """A :class:`Driver` over ``parser``'s tables, making tokens of class ``token``, if on
    every ``(text, start)`` of ``samples`` it builds what ``parser.parse(text, start=start)``
    builds (compared as ``shape`` of each); None if it does not, or cannot be built.

    The samples are valid input: on them neither parser raises.  Any exception here means
    lark's internals are not what :class:`Driver` reads (a lark outside
    :data:`LARK_VERSIONS`): it is not propagated, lark's own parser is used instead.

    lark's first parse compiles its lexers (some 15 ms a process): with ``passed`` (see
    :func:`verdict_file`) the check runs once, and that file, written when it passes, says
    so to later processes.
    """
    try:
        driver = Driver(parser, token)
        if passed is not None and os.path.exists(passed):
            return driver
        for text, start in samples:
            if shape(driver.parse(text, start)) != shape(parser.parse(text, start=start)):
                return None
    except Exception:  # noqa: BLE001 - whatever lark's changed parts raise: not usable
        return None
    if passed is not None:
        with contextlib.suppress(OSError):
            with open(passed, "x", encoding="utf-8"):
                pass
    return driver


def verdict_file(cache_file: str, samples: Sequence[tuple[str, str]]) -> str:
    """The file recording that :func:`checked_driver` passed on ``samples`` for the parser
    whose analysis lark keeps in ``cache_file``: named after that file, this module's source
    and the samples."""
    digest = hashlib.sha256(Path(__file__).read_bytes() + repr(samples).encode())
    return f"{cache_file}.driver-{digest.hexdigest()[:16]}"
