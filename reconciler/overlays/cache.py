"""Caches that make a rebuild after a small commit cheap.

Input: content ids from the file view (git blob shas) and immutable records. Output:
parsed documents and per-resource step results from the previous builds. Pure, in
memory. Two generations are kept: entries used by the current build and by the one
before it (so alternating between two revisions, as ``diff`` does, stays warm); older
entries are dropped when a build ends. A lock serialises builds sharing one cache.
"""

from __future__ import annotations

import threading
from typing import Any

from reconciler.overlays.resource import MISSING


class OverlayCache:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._docs: dict[tuple[str, str], Any] = {}
        self._docs_old: dict[tuple[str, str], Any] = {}
        self._memo: dict[tuple[Any, int], tuple[Any, Any]] = {}
        self._memo_old: dict[tuple[Any, int], tuple[Any, Any]] = {}
        self.hits = 0
        self.misses = 0

    def begin(self) -> None:
        self.hits = 0
        self.misses = 0

    def end(self) -> None:
        """Drop the generation before the previous build."""
        self._docs_old = self._docs
        self._docs = {}
        self._memo_old = self._memo
        self._memo = {}

    def clear(self) -> None:
        self._docs.clear()
        self._docs_old.clear()
        self._memo.clear()
        self._memo_old.clear()

    def docs_get(self, path: str, blob: str | None) -> Any:
        if blob is None:
            return None
        key = (path, blob)
        hit = self._docs.get(key)
        if hit is None:
            hit = self._docs_old.get(key)
            if hit is not None:
                self._docs[key] = hit
        return hit

    def docs_put(self, path: str, blob: str | None, value: Any) -> None:
        if blob is not None:
            self._docs[(path, blob)] = value

    def memo_get(self, key: Any, res: Any) -> Any:
        """The stored result of step ``key`` on ``res``, or ``MISSING``."""
        k = (key, id(res))
        entry = self._memo.get(k)
        if entry is None:
            entry = self._memo_old.get(k)
            if entry is not None:
                self._memo[k] = entry
        if entry is None or entry[0] is not res:
            self.misses += 1
            return MISSING
        self.hits += 1
        return entry[1]

    def memo_each(self, key: Any, items: Any, fn: Any, deleted: Any) -> list[Any]:
        """``fn`` over ``items`` through the memo (``deleted`` stands for a None result)."""
        new_gen, old_gen = self._memo, self._memo_old
        out = []
        hits = 0
        for r in items:
            k = (key, id(r))
            entry = new_gen.get(k)
            if entry is None:
                entry = old_gen.get(k)
                if entry is not None:
                    new_gen[k] = entry
            if entry is not None and entry[0] is r:
                hits += 1
                value = entry[1]
            else:
                value = fn(r)
                new_gen[k] = (r, deleted if value is None else value)
            if value is not None and value is not deleted:
                out.append(value)
        self.hits += hits
        self.misses += len(out) - hits if len(out) > hits else 0
        return out

    def memo_put(self, key: Any, res: Any, result: Any) -> None:
        self._memo[(key, id(res))] = (res, result)
