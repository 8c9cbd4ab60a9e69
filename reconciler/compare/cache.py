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
    for good: per domain, the desired XML as the caller's rendered domain holds it (the
    very string, or the very blob of the packed record: no copy, and nothing unpacked on a hit), a
    digest of the live XML compared (none for a live domain holding that very string: the
    PR diff's simulated host), and the result (one shared for all where nothing differs). Essences are
    not kept: a miss parses its two or three XML documents again (well under a
    millisecond). One eviction rule (``context.RevisionCache``), a run being one plan: a
    domain no longer planned is forgotten two plans later.
    """

    __slots__ = ("hits", "misses", "store")

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self.store: RevisionCache[str, tuple[str | bytes, bytes, Compared]] = RevisionCache(bound)
        self.hits = 0
        self.misses = 0

    def names(self) -> list[str]:
        """The domains whose comparison is held."""
        return self.store.keys()

    def get(self, name: str, desired_xml: str | bytes, live_key: bytes) -> Compared | None:
        got = self.store.get(name)
        if got is None or got[1] != live_key or (got[0] is not desired_xml and got[0] != desired_xml):
            self.misses += 1
            return None
        self.hits += 1
        return got[2]

    def put(self, name: str, desired_xml: str | bytes, live_key: bytes, result: Compared) -> None:
        self.store.put(name, (desired_xml, live_key, _shared(result)))

    def put_same(self, d: RenderedDomain, live: LiveDomain) -> None:
        """Record that ``live`` holds ``d``'s very definition (the same string object,
        persistent and running): nothing differs, so the plan need not compare them."""
        key = _same_key(d, live)
        if key is not None:
            self.put(d.name, d.xml_data, key, ((), RunningDiff() if live.active else None))

    def end_run(self) -> None:
        """A plan is over."""
        self.store.end_run()


# What most comparisons find, nothing differs (shut off, running): one object held for
# every such domain instead of one per domain.
_NOTHING_OFF: Compared = ((), None)
_NOTHING_RUNNING: Compared = ((), RunningDiff())


def _shared(result: Compared) -> Compared:
    fields, rd = result
    if fields:
        return result
    if rd is None:
        return _NOTHING_OFF
    return _NOTHING_RUNNING if not (rd.live or rd.restart or rd.ops or rd.notes) else result


# The key of a live domain holding the desired definition itself (the very string, as
# the PR diff's simulated host does): no digest needed, none of these is one (20 bytes).
_SAME_RUNNING = b"same definition, running"
_SAME_OFF = b"same definition"


def _same_key(d: RenderedDomain, live: LiveDomain) -> bytes | None:
    if live.persistent_xml is not d.xml_data or (live.active and live.live_xml is not d.xml_data):
        return None
    return _SAME_RUNNING if live.active else _SAME_OFF


def _key_of(d: RenderedDomain, live: LiveDomain) -> bytes:
    same = _same_key(d, live)
    if same is not None:
        return same
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
    key = _key_of(d, live)
    got = cache.get(d.name, d.xml_data, key)
    if got is not None:
        return got, None
    docs = Documents(d, live)
    result = _compared(docs)
    cache.put(d.name, d.xml_data, key, result)
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
        key = _key_of(d, live)
        if cache.get(d.name, d.xml_data, key) is None:
            todo.append((d, live, key))
    for (d, _live, key), result in zip(todo, mapper.map(_compared_or_none, todo), strict=True):
        if result is not None:
            cache.put(d.name, d.xml_data, key, result)


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
