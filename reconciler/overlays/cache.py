"""Caches that make a rebuild after a small commit cheap.

Input: content ids from the file view (git blob sha + path) and immutable records.
Output: parsed documents and per-record step results of earlier builds. Pure, in
memory. Two ``context.RevisionCache`` stores under the project's one eviction rule, a
run being one build: entries unused by the current and the previous build are dropped
(so alternating between two revisions, as ``diff`` does, stays warm, and memory stays
bounded). Owned by the caller (``context.Context.cache(OverlayCache)``); a lock
serialises builds sharing one cache.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from reconciler.context import RevisionCache

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


_NONE: Any = object()  # stands for a None result when the caller names no sentinel


class OverlayCache:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._docs: RevisionCache[tuple[str, str], Any] = RevisionCache()
        self._memo: RevisionCache[Any, Any] = RevisionCache()
        self.hits = 0  # memoised steps of the current build: found, computed
        self.misses = 0

    def begin(self) -> None:
        self.hits = 0
        self.misses = 0

    def end(self) -> None:
        """The build is over (a run of both stores ends)."""
        self._docs.end_run()
        self._memo.end_run()

    def clear(self) -> None:
        self._docs.clear()
        self._memo.clear()

    def docs_get(self, path: str, blob: str | None) -> Any:
        if blob is None:
            return None
        return self._docs.get((path, blob))

    def docs_put(self, path: str, blob: str | None, value: Any) -> None:
        if blob is not None:
            self._docs.put((path, blob), value)

    def memo_each(self, key: Any, items: Iterable[Any], fn: Callable[[Any], Any], deleted: Any) -> list[Any]:
        """``fn`` over ``items`` through the memo (``deleted`` stands for a None result):
        the results that are not None, in order."""
        store = self._memo
        hits, misses = store.hits, store.misses
        out = store.each_same(key, items, fn, deleted if deleted is not None else _NONE)
        self.hits += store.hits - hits
        self.misses += store.misses - misses
        return out
