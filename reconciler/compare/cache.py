"""Comparisons remembered: a domain's desired XML against its live XML, compared once.

Input: rendered domains and their live domains (and their ``Documents``, parsed at most
once and shared with the final definition), the caller's ``CompareCache`` and a mapper
(``context.Mapper``). Output: the field changes and the running diff of each pair
(``compare``, ``compare_parsed``, ``compare_all``), from the cache when the same strings
were compared before (then nothing is parsed), else made through the mapper. The cache
is owned by the caller (the daemon keeps one per host) so every stage stays pure.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.compare.capacity import capacity, within_capacity
from reconciler.compare.changes import RunningDiff, diff_essences, running_diff
from reconciler.compare.definition import Documents
from reconciler.compare.essence import essence_of
from reconciler.context import DEFAULT_BOUND, SERIAL, RevisionCache
from reconciler.model.changes import FieldChange

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.context import Mapper
    from reconciler.model import LiveDomain, RenderedDomain

Compared = tuple[tuple[FieldChange, ...], RunningDiff | None]  # field changes, running diff


class CompareCache:
    """Comparison results of earlier plans, one per domain name, keyed by the XML compared.

    Owned by the caller (the daemon keeps one per host); ``build_plan`` stays pure: a
    hit returns what the same comparison returned before. Compact, as a daemon keeps it
    for good: per domain, the desired XML packed (the very bytes the caller's rendered
    domain holds, so no copy, and nothing unpacked on a hit), a digest of the live XML
    compared, and the result. Essences are
    not kept: a miss parses its two or three XML documents again (well under a
    millisecond). One eviction rule (``context.RevisionCache``), a run being one plan: a
    domain no longer planned is forgotten two plans later.
    """

    __slots__ = ("hits", "misses", "store")

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self.store: RevisionCache[str, tuple[bytes, bytes, Compared]] = RevisionCache(bound)
        self.hits = 0
        self.misses = 0

    def names(self) -> list[str]:
        """The domains whose comparison is held."""
        return self.store.keys()

    def get(self, name: str, desired: bytes, live_key: bytes) -> Compared | None:
        """The comparison of domain ``name`` held for its packed desired XML ``desired``."""
        got = self.store.get(name)
        if got is None or got[1] != live_key or (got[0] is not desired and got[0] != desired):
            self.misses += 1
            return None
        self.hits += 1
        return got[2]

    def put(self, name: str, desired: bytes, live_key: bytes, result: Compared) -> None:
        self.store.put(name, (desired, live_key, _shared(result)))

    def put_same(self, d: RenderedDomain, live: LiveDomain) -> None:
        """Record that ``live`` holds ``d``'s very definition, persistent and running (the
        caller knows: the PR diff's simulated host): nothing differs, so the plan need not
        compare them."""
        self.put(d.name, d.packed_xml, _key_of(live), ((), RunningDiff() if live.active else None))

    def end_run(self) -> None:
        """A plan is over."""
        self.store.end_run()


# What most comparisons find, nothing differs (shut off, running): one object held for
# every such domain instead of one per domain.
_SAME_OFF: Compared = ((), None)
_SAME_RUNNING: Compared = ((), RunningDiff())


def _shared(result: Compared) -> Compared:
    fields, rd = result
    if fields:
        return result
    if rd is None:
        return _SAME_OFF
    return _SAME_RUNNING if not (rd.live or rd.restart or rd.ops or rd.notes) else result


def _key_of(live: LiveDomain) -> bytes:
    return _live_key(live.persistent_xml, live.live_xml if live.active else "")


def _live_key(persistent_xml: str, running_xml: str) -> bytes:
    """A digest of the live definitions compared (collision-free in practice)."""
    h = hashlib.blake2b(persistent_xml.encode(), digest_size=20)
    h.update(b"\0running\0")
    h.update(running_xml.encode())
    return h.digest()


def compare(d: RenderedDomain, live: LiveDomain, cache: CompareCache) -> Compared:
    return compare_parsed(d, live, cache)[0]


def compare_parsed(
    d: RenderedDomain, live: LiveDomain, cache: CompareCache
) -> tuple[Compared, Documents | None]:
    """The comparison of ``d`` with ``live``, and on a miss the documents it parsed (for
    the final definition to share; ``None`` on a hit: nothing was parsed)."""
    key = _key_of(live)
    got = cache.get(d.name, d.packed_xml, key)
    if got is not None:
        return got, None
    docs = Documents(d, live)
    result = _compared(docs)
    cache.put(d.name, d.packed_xml, key, result)
    return result, docs


def compare_all(
    cache: CompareCache, pairs: Sequence[tuple[RenderedDomain, LiveDomain]], mapper: Mapper = SERIAL
) -> None:
    """Make the comparisons of ``pairs`` that ``cache`` lacks through ``mapper`` (kept in
    ``cache``), so that the plan after it finds them made: worth it for a mapper that
    spreads its work (``Mapper.spreads``); with the loop, the plan compares as it goes and
    keeps the documents it parsed for the final definitions. A pair whose comparison
    fails is left to the plan, which meets that failure itself (``compare_parsed``)."""
    todo = []
    for d, live in pairs:
        key = _key_of(live)
        if cache.get(d.name, d.packed_xml, key) is None:
            todo.append((d, live, key))
    for (d, _live, key), result in zip(todo, mapper.map(_compared_or_none, todo), strict=True):
        if result is not None:
            cache.put(d.name, d.packed_xml, key, result)


def _compared_or_none(item: tuple[RenderedDomain, LiveDomain, bytes]) -> Compared | None:
    """``None`` where the comparison fails as the plan expects a bad definition to fail."""
    try:
        return _compared(Documents(item[0], item[1]))
    except (ValueError, ET.ParseError):
        return None


def _compared(docs: Documents) -> Compared:
    desired = essence_of(docs.desired())
    live = docs.persistent()
    assert live is not None  # compared with a live domain
    persistent = essence_of(live)
    tree = docs.running()
    running = essence_of(tree) if tree is not None else None
    fields = diff_essences(desired, persistent, running)
    rd: RunningDiff | None = None
    if running is not None and tree is not None:
        rd = within_capacity(running_diff(desired, running, fields), desired, running, capacity(tree))
    return fields, rd
