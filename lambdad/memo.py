"""Bounded memo tables: what the runtime works out once and keeps for the next call.

A :class:`Memo` holds at most ``size`` entries of one kind, the least recently used
forgotten first.  Its keys name objects by ``id`` where that is cheaper than comparing
them (a λ-term, a function value), so every entry keeps the object its key names alive:
while the entry exists, no other object can have that ``id``; once it is forgotten, its
key is gone too.  An entry forgotten is recomputed when asked for again, never wrong.

Each cache of compiled units lives in one of these, one table per kind of entry, its key
made by one function of the owner from the settings that affect what is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["Memo"]


class Memo:
    """At most ``size`` kept values by key, the least recently used forgotten first."""

    __slots__ = ("_entries", "size")

    def __init__(self, size: int):
        if size < 1:
            raise ValueError("a memo keeps at least one entry")
        self.size = size
        self._entries: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def get(self, key: Hashable) -> Any | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        entries = self._entries
        value = entries.pop(key, None)
        if value is not None:
            entries[key] = value
        return value

    def put(self, key: Hashable, value: Any) -> Any:
        """Keeps ``value`` (not None) for ``key``, forgetting the least recently used entry
        when full; returns ``value``."""
        entries = self._entries
        entries.pop(key, None)
        if len(entries) >= self.size:
            del entries[next(iter(entries))]
        entries[key] = value
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept for ``key``, made by ``make()`` and kept first if there is none."""
        value = self.get(key)
        return self.put(key, make()) if value is None else value

    def clear(self) -> None:
        self._entries.clear()
