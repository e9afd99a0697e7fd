"""``PersistentMap``: an immutable mapping whose updated copies cost O(log n), not O(n).

A program's environments (names to schemes, values, declarations) grow one definition at a
time at the REPL, and every version stays usable (an entry that fails leaves the session as
it was).  Copying a dictionary per definition makes a session of n definitions cost O(n²);
these maps make it O(n log n).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

Value = TypeVar("Value")

_ABSENT = object()


class PersistentMap(Mapping[str, Value]):
    """A mapping from names, never changed once made: :meth:`set` and :meth:`update` return
    new maps that share most of their storage with this one.

    The storage is a stack of dictionaries, newest first, none changed once shared: an
    update pushes a layer and merges the top layers while the newer is at least half the
    size of the older (as a binary counter carries), so over n updates each entry is copied
    O(log n) times and a look-up reads O(log n) layers.  Iteration follows the order in
    which names were first bound, as a dictionary's does.
    """

    __slots__ = ("_layers", "_merged")

    def __init__(self, entries: Mapping[str, Value] | None = None):
        layer = dict(entries or {})
        self._layers: tuple[dict[str, Value], ...] = (layer,) if layer else ()
        self._merged: dict[str, Value] | None = layer

    def set(self, name: str, value: Value) -> "PersistentMap[Value]":
        """This map with ``name`` bound (or rebound) to ``value``."""
        return self.update({name: value})

    def update(self, entries: Mapping[str, Value]) -> "PersistentMap[Value]":
        """This map with every name of ``entries`` bound (or rebound) to its value."""
        if not entries:
            return self
        layers = [dict(entries), *self._layers]
        while len(layers) > 1 and 2 * len(layers[0]) >= len(layers[1]):
            newer = layers.pop(0)
            layers[0] = {**layers[0], **newer}
        made = object.__new__(type(self))
        made._layers = tuple(layers)
        made._merged = None
        return made

    def __getitem__(self, name: str) -> Value:
        for layer in self._layers:
            found = layer.get(name, _ABSENT)
            if found is not _ABSENT:
                return found  # type: ignore[return-value]
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        for layer in self._layers:
            found = layer.get(name, _ABSENT)
            if found is not _ABSENT:
                return found
        return default

    def __contains__(self, name: object) -> bool:
        return any(name in layer for layer in self._layers)

    def _all(self) -> dict[str, Value]:
        """Every entry in one dictionary (made once, on the first iteration)."""
        if self._merged is None:
            merged: dict[str, Value] = {}
            for layer in reversed(self._layers):
                merged.update(layer)
            self._merged = merged
        return self._merged

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:
        # Without it, truth-testing (``values or {}``) would merge every layer (__len__).
        return any(self._layers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._all()!r})"
