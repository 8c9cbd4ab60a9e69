"""Comparisons remembered: a domain's desired XML against its live XML, compared once.

Input: rendered domains and their live domains, the caller's ``CompareCache`` and a
mapper (``context.Mapper``). Output: the field changes and the running diff of each
pair (``compare``, ``compare_all``), from the cache when the same strings were compared
before, else made through the mapper. The cache is owned by the caller (the daemon
keeps one per host) so every stage stays pure.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.compare.changes import RunningDiff, diff_essences, running_diff
from reconciler.compare.essence import essence
from reconciler.context import DEFAULT_BOUND, SERIAL, RevisionCache
from reconciler.model import FieldChange, LiveDomain, RenderedDomain

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.context import Mapper

Compared = tuple[tuple[FieldChange, ...], RunningDiff | None]  # field changes, running diff


class CompareCache:
    """Comparison results of earlier plans, one per domain name, keyed by the XML compared.

    Owned by the caller (the daemon keeps one per host); ``build_plan`` stays pure: a
    hit returns what the same comparison returned before. Compact, as a daemon keeps it
    for good: per domain, the desired XML (the very string the caller's rendered domain
    holds, so no copy), a digest of the live XML compared, and the result. Essences are
    not kept: a miss parses its two or three XML documents again (well under a
    millisecond). One eviction rule (``context.RevisionCache``), a run being one plan: a
    domain no longer planned is forgotten two plans later.
    """

    __slots__ = ("hits", "misses", "store")

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self.store: RevisionCache[str, tuple[str, bytes, Compared]] = RevisionCache(bound)
        self.hits = 0
        self.misses = 0

    def names(self) -> list[str]:
        """The domains whose comparison is held."""
        return self.store.keys()

    def get(self, name: str, desired_xml: str, live_key: bytes) -> Compared | None:
        got = self.store.get(name)
        if got is None or got[1] != live_key or (got[0] is not desired_xml and got[0] != desired_xml):
            self.misses += 1
            return None
        self.hits += 1
        return got[2]

    def put(self, name: str, desired_xml: str, live_key: bytes, result: Compared) -> None:
        self.store.put(name, (desired_xml, live_key, result))

    def put_same(self, d: RenderedDomain, live: LiveDomain) -> None:
        """Record that ``live`` holds ``d``'s very definition (the same string object,
        persistent and running): nothing differs, so the plan need not compare them."""
        if live.persistent_xml is not d.xml or (live.active and live.live_xml is not d.xml):
            return
        running = live.live_xml if live.active else ""
        self.put(
            d.name, d.xml, _live_key(live.persistent_xml, running), ((), RunningDiff() if running else None)
        )

    def end_run(self) -> None:
        """A plan is over."""
        self.store.end_run()


def _live_key(persistent_xml: str, running_xml: str) -> bytes:
    """A digest of the live definitions compared (collision-free in practice)."""
    h = hashlib.blake2b(persistent_xml.encode(), digest_size=20)
    h.update(b"\0running\0")
    h.update(running_xml.encode())
    return h.digest()


def compare(d: RenderedDomain, live: LiveDomain, cache: CompareCache) -> Compared:
    running_xml = live.live_xml if live.active else ""
    key = _live_key(live.persistent_xml, running_xml)
    got = cache.get(d.name, d.xml, key)
    if got is not None:
        return got
    result = _compared(d, live)
    cache.put(d.name, d.xml, key, result)
    return result


def compare_all(
    cache: CompareCache, pairs: Sequence[tuple[RenderedDomain, LiveDomain]], mapper: Mapper = SERIAL
) -> dict[str, Compared]:
    """The comparison of each pair by domain name: from ``cache``, or made through
    ``mapper`` (and kept in ``cache``). A pair whose comparison fails is left out: the
    plan meets that failure itself (``compare``), as it would without this."""
    out: dict[str, Compared] = {}
    todo = []
    for d, live in pairs:
        key = _live_key(live.persistent_xml, live.live_xml if live.active else "")
        got = cache.get(d.name, d.xml, key)
        if got is not None:
            out[d.name] = got
        else:
            todo.append((d, live, key))
    for (d, _live, key), result in zip(todo, mapper.map(_compared_or_none, todo), strict=True):
        if result is not None:
            cache.put(d.name, d.xml, key, result)
            out[d.name] = result
    return out


def _compared_or_none(item: tuple[RenderedDomain, LiveDomain, bytes]) -> Compared | None:
    """``None`` where the comparison fails as the plan expects a bad definition to fail."""
    try:
        return _compared(item[0], item[1])
    except (ValueError, ET.ParseError):
        return None


def _compared(d: RenderedDomain, live: LiveDomain) -> Compared:
    running_xml = live.live_xml if live.active else ""
    desired = essence(d.xml)
    persistent = essence(live.persistent_xml)
    running = essence(running_xml) if running_xml else None
    fields = diff_essences(desired, persistent, running)
    rd: RunningDiff | None = None
    if running is not None:
        rd = running_diff(desired, running, fields)
    return fields, rd
