"""Caches that make a rebuild after a small commit cheap.

Input: content ids from the file view (git blob sha + path) and immutable records.
Output: parsed documents and per-record step results of earlier builds. Pure, in
memory. Two ``context.RevisionCache`` stores under the project's one eviction rule, a
run being one build: entries unused by the current and the previous build are dropped
(so alternating between two revisions, as ``diff`` does, stays warm, and memory stays
bounded). Owned by the caller (``context.Context.cache(OverlayCache)``); a lock
serialises builds sharing one cache.

With ``rest_trees()`` (the daemon's), the object trees of the records kept (parsed
documents, each step's output, the built ``Manifest``) rest packed between builds
(``model.trees``): at a build's end the records it made are packed (once each; a step's
new record rests derived, made again from its input by a later build's step of the same
key if that build reads it), and the trees unpacked during it dropped again. A warm build
unpacks only what it reads: the changed documents' records.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from reconciler.context import RevisionCache
from reconciler.model.trees import AtRest, Shelf
from reconciler.overlays.resource import Entries

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
        self.shelf: Shelf | None = None  # None: trees are kept as made
        self._made: list[Any] = []  # what the current build stored (records, tuples of them)

    def rest_trees(self) -> Shelf:
        """From now on keep the records' trees at rest between builds (those held now
        are put to rest here, once); the shelf."""
        if self.shelf is None:
            self.shelf = Shelf()
            self.shelf.rest(_records([*self._docs.values(), *self._memo.values(), *self._memo.held()]))
        return self.shelf

    def begin(self) -> None:
        self.hits = 0
        self.misses = 0

    def end(self) -> None:
        """The build is over (a run of both stores ends; trees rest, with a shelf)."""
        self._docs.end_run()
        self._memo.end_run()
        made, self._made = self._made, []
        if self.shelf is not None:
            self.shelf.rest(_records(made))
            self.shelf.settle()

    def clear(self) -> None:
        self._docs.clear()
        self._memo.clear()

    def docs_get(self, path: str, blob: str | None) -> Any:
        if blob is None:
            return None
        got = self._docs.get((path, blob))
        return (got,) if isinstance(got, AtRest) else got

    def docs_put(self, path: str, blob: str | None, value: Any) -> None:
        """``value`` kept for ``path`` at ``blob``; a file's one record is kept without its
        tuple (most files hold one document: a daemon keeps one per VM), given back in one."""
        if blob is not None:
            if type(value) is list:  # a kustomization's resource entries: one per file, held compact
                value = Entries.of(path, value)
            one = type(value) is tuple and len(value) == 1 and isinstance(value[0], AtRest)
            self._docs.put((path, blob), value[0] if one else value)
            if self.shelf is not None:
                self._made.append(value)

    def memo_each(self, key: Any, items: Iterable[Any], fn: Callable[[Any], Any], deleted: Any) -> list[Any]:
        """``fn`` over ``items`` through the memo (``deleted`` stands for a None result):
        the results that are not None, in order."""
        store = self._memo
        hits, misses = store.hits, store.misses
        if self.shelf is not None:
            fn = self.shelf.noting(key, fn, self._made)  # what it makes rests at the build's end
        out = store.each_same(key, items, fn, deleted if deleted is not None else _NONE)
        self.hits += store.hits - hits
        self.misses += store.misses - misses
        return out

    def steps_change(self) -> None:
        """The current build's steps are about to read other state (an openapi schema set
        mid-build): the derived records found so far get their trees now (``Shelf.wake``)."""
        if self.shelf is not None and self.shelf.steps:
            self.shelf.wake([v for tag in self.shelf.steps for v in self._memo.found(tag)])


def _records(values: Iterable[Any]) -> list[AtRest]:
    """The records among ``values`` and in the tuples among them (a file's objects)."""
    return [r for x in values for r in (x if isinstance(x, tuple) else (x,)) if isinstance(r, AtRest)]
