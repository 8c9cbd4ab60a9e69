"""What building catalogs keeps for the next one, one entry per document.

Input: the ``Manifest`` records of a revision (by identity). Output: ``CatalogCache``
(owned by the caller: ``context.Context.cache(CatalogCache)``) and ``Doc``, what it keeps
of one document. Pure, in memory; the catalog (``catalog``) fills it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.catalog import schema as openapi
from reconciler.context import Holding, RevisionCache
from reconciler.manifests import limits
from reconciler.model import trees

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.model import Manifest, Obj, Problem, VMKey

T = TypeVar("T")

UNCHECKED: Any = object()  # ``Doc.key`` of a document not checked yet
_UNKNOWN: Any = object()  # a fact not derived yet


class Doc(Holding):
    """One document's entry (holding the document: ``Holding``): its size (``limits.object_size``; -1: not sized, a pool's
    replica), what its check found (its warnings, a VM's key, the server-populated fields
    it holds; ``key`` is ``UNCHECKED`` until it is checked) and the facts later stages
    derived from its tree (``Catalog.fact``), in one record: a daemon keeps one per VM."""

    __slots__ = ("exported", "facts", "held", "key", "problems", "size")

    def __init__(self, held: Manifest, size: int = -1) -> None:
        self.held = held
        self.size = size
        self.problems: tuple[Problem, ...] = ()
        self.key: VMKey | None = UNCHECKED
        self.exported: tuple[str, ...] = ()
        self.facts: tuple[Any, ...] = ()  # by the place of its tag (``CatalogCache.tags``)


class CatalogCache:
    """What building catalogs keeps for the next one, under the project's one eviction
    rule, a run being one catalog: each document's ``Doc``, by identity (the overlay build
    hands out the same never-mutated ``Manifest`` for an unchanged document:
    ``context.py``), so a daemon's resync or a diff's second revision sizes and checks only
    what changed and later stages read no unchanged document's tree; the digests of Secret
    values, by content (``SecretData``); and jsonschema's validators, made when a document
    first needs one."""

    __slots__ = ("digests", "docs", "shared", "tags", "validators")

    def __init__(self) -> None:
        self.docs: RevisionCache[Manifest, Doc] = RevisionCache()
        # Documents' facts made of strings and tuples only, held once however many share them.
        self.shared: RevisionCache[tuple[Any, ...], tuple[Any, ...]] = RevisionCache()
        self.tags: dict[str, int] = {}  # each fact's place in a document's facts, by its tag
        # Room for two revisions' Secrets (a diff's), so none is derived twice in a run.
        self.digests: RevisionCache[bytes, str] = RevisionCache(2 * limits.MAX_SECRETS_PER_REVISION)
        self.validators = openapi.Validators()

    def end_run(self) -> None:
        self.docs.end_run()
        self.digests.end_run()
        self.shared.end_run()

    def fact(self, m: Manifest, tag: str, derive: Callable[[Obj], T]) -> T:
        """``derive(m.obj)`` (``tag`` names it), kept for the very document ``m`` (a pool's
        replica, which the catalog did not size, gets its entry here)."""
        doc = self.docs.get_same(m)
        if doc is None:
            doc = Doc(m)
            self.docs.put_same(m, doc)
        at = self.tags.get(tag)
        if at is None:
            at = self.tags[tag] = len(self.tags)
        known = doc.facts
        if at < len(known) and (found := known[at]) is not _UNKNOWN:
            return found  # type: ignore[no-any-return]
        got = trees.briefly(m, lambda: derive(m.obj))
        known += (_UNKNOWN,) * (at + 1 - len(known))
        facts = (*known[:at], got, *known[at + 1 :])
        if _plain(facts):  # equal means the same: one tuple for every document holding them
            shared = self.shared.get(facts)
            if shared is None:
                self.shared.put(facts, facts)
            else:
                facts = shared
        doc.facts = facts
        return facts[at]  # type: ignore[no-any-return]


def _plain(value: object) -> bool:
    """Whether ``value`` is a string or a tuple of plain values (no two unequal-typed
    values compare equal among them)."""
    if type(value) is str or value is _UNKNOWN:
        return True
    return type(value) is tuple and all(_plain(v) for v in value)
