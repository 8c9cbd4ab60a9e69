"""Caches that make a rebuild after a small commit cheap.

Input: content ids from the file view (git blob sha + path) and immutable records.
Output: parsed documents and per-record step results of earlier builds. Pure, in
memory. An entry survives while a build uses it: entries unused by the current and the
previous build are dropped once they outnumber the live ones (so alternating between
two revisions, as ``diff`` does, stays warm, and memory stays bounded). Entries are
updated in place on a hit, so a warm build allocates almost nothing that outlives it
(little work for Python's cyclic garbage collector). A lock serialises builds sharing
one cache.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from reconciler.overlays.resource import MISSING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_MIN_SWEEP = 4096


class OverlayCache:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._docs: dict[tuple[str, str], list[Any]] = {}  # -> [value, generation]
        self._memo: dict[tuple[Any, int], list[Any]] = {}  # -> [record, result, generation]
        self.generation = 0
        self.hits = 0
        self.misses = 0

    def begin(self) -> None:
        self.generation += 1
        self.hits = 0
        self.misses = 0

    def end(self) -> None:
        """Drop entries neither this build nor the one before used, when they pile up."""
        live = self.hits + self.misses
        keep_from = self.generation - 1
        if len(self._memo) > 2 * live + _MIN_SWEEP:
            self._memo = {k: e for k, e in self._memo.items() if e[2] >= keep_from}
        if len(self._docs) > _MIN_SWEEP:
            fresh = {k: e for k, e in self._docs.items() if e[1] >= keep_from}
            if 2 * len(fresh) < len(self._docs):
                self._docs = fresh

    def clear(self) -> None:
        self._docs.clear()
        self._memo.clear()

    def docs_get(self, path: str, blob: str | None) -> Any:
        if blob is None:
            return None
        entry = self._docs.get((path, blob))
        if entry is None:
            return None
        entry[1] = self.generation
        return entry[0]

    def docs_put(self, path: str, blob: str | None, value: Any) -> None:
        if blob is not None:
            self._docs[(path, blob)] = [value, self.generation]

    def memo_get(self, key: Any, res: Any) -> Any:
        """The stored result of step ``key`` on ``res``, or ``MISSING``."""
        entry = self._memo.get((key, id(res)))
        if entry is None or entry[0] is not res:
            self.misses += 1
            return MISSING
        entry[2] = self.generation
        self.hits += 1
        return entry[1]

    def memo_put(self, key: Any, res: Any, result: Any) -> None:
        self._memo[(key, id(res))] = [res, result, self.generation]

    def memo_each(self, key: Any, items: Iterable[Any], fn: Callable[[Any], Any], deleted: Any) -> list[Any]:
        """``fn`` over ``items`` through the memo (``deleted`` stands for a None result)."""
        memo, gen = self._memo, self.generation
        out = []
        hits = misses = 0
        for r in items:
            k = (key, id(r))
            entry = memo.get(k)
            if entry is not None and entry[0] is r:
                entry[2] = gen
                value = entry[1]
                hits += 1
            else:
                value = fn(r)
                memo[k] = [r, deleted if value is None else value, gen]
                misses += 1
            if value is not None and value is not deleted:
                out.append(value)
        self.hits += hits
        self.misses += misses
        return out
