"""Comparisons remembered: a domain's desired XML against its live XML, compared once.

Input: a rendered domain and its live domain (and their ``Documents``, parsed at most
once and shared with the final definition). Output: the field changes and the running
diff of the two (``compare``), from the caller's ``CompareCache`` when the same strings
were compared before (then nothing is parsed). The cache is owned by the caller (the
daemon keeps one per host) so every stage stays pure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reconciler import forked
from reconciler.compare.changes import RunningDiff, diff_essences, running_diff
from reconciler.compare.definition import Documents
from reconciler.compare.essence import essence_of
from reconciler.model import FieldChange, LiveDomain, RenderedDomain

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

_Compared = tuple[tuple[FieldChange, ...], RunningDiff | None]


@dataclass(slots=True)
class CompareCache:
    """Comparison results of earlier plans, one per domain name, keyed by the XML compared.

    Owned by the caller (the daemon keeps one per host); ``build_plan`` stays pure: a
    hit returns what the same comparison returned before. Compact, as a daemon keeps it
    for good: per domain, the desired XML (the very string the caller's rendered domain
    holds, so no copy), a digest of the live XML compared, and the result. Essences are
    not kept: a miss parses its two or three XML documents again (well under a
    millisecond). Bounded: ``retain`` forgets domains no longer desired, and the
    whole cache is cleared if names still pile up past ``max_entries``.
    """

    max_entries: int = 50_000
    diffs: dict[str, tuple[str, bytes, _Compared]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, name: str, desired_xml: str, live_key: bytes) -> _Compared | None:
        if not self.holds(name, desired_xml, live_key):
            self.misses += 1
            return None
        self.hits += 1
        return self.diffs[name][2]

    def holds(self, name: str, desired_xml: str, live_key: bytes) -> bool:
        """Whether the comparison of these very definitions is here (not counted)."""
        got = self.diffs.get(name)
        return got is not None and got[1] == live_key and (got[0] is desired_xml or got[0] == desired_xml)

    def put(self, name: str, desired_xml: str, live_key: bytes, result: _Compared) -> None:
        if name not in self.diffs and len(self.diffs) >= self.max_entries:
            self.diffs.clear()
        self.diffs[name] = (desired_xml, live_key, result)

    def put_same(self, d: RenderedDomain, live: LiveDomain) -> None:
        """Record that ``live`` holds ``d``'s very definition (the same string object,
        persistent and running): nothing differs, so the plan need not compare them."""
        if live.persistent_xml is not d.xml or (live.active and live.live_xml is not d.xml):
            return
        running = live.live_xml if live.active else ""
        self.put(
            d.name, d.xml, _live_key(live.persistent_xml, running), ((), RunningDiff() if running else None)
        )

    def retain(self, names: Iterable[str]) -> None:
        """Forget the comparisons of domains not in ``names`` (VMs that left git)."""
        keep = set(names)
        for name in [n for n in self.diffs if n not in keep]:
            del self.diffs[name]


def _live_key(persistent_xml: str, running_xml: str) -> bytes:
    """A digest of the live definitions compared (collision-free in practice)."""
    h = hashlib.blake2b(persistent_xml.encode(), digest_size=20)
    h.update(b"\0running\0")
    h.update(running_xml.encode())
    return h.digest()


def compare(d: RenderedDomain, live: LiveDomain, cache: CompareCache) -> _Compared:
    return compare_parsed(d, live, cache)[0]


def compare_parsed(
    d: RenderedDomain, live: LiveDomain, cache: CompareCache
) -> tuple[_Compared, Documents | None]:
    """The comparison of ``d`` with ``live``, and on a miss the documents it parsed (for
    the final definition to share; ``None`` on a hit: nothing was parsed)."""
    running_xml = live.live_xml if live.active else ""
    key = _live_key(live.persistent_xml, running_xml)
    got = cache.get(d.name, d.xml, key)
    if got is not None:
        return got, None
    docs = Documents(d, live)
    result = _compared(docs)
    cache.put(d.name, d.xml, key, result)
    return result, docs


def prime(cache: CompareCache, pairs: Sequence[tuple[RenderedDomain, LiveDomain]], processes: int) -> None:
    """Compare the pairs ``cache`` does not hold yet, spread over ``processes`` forked
    processes (``forked``: the CLI's cold plan; the daemon never forks), so that the
    plan after it finds every comparison made. The results are ``compare``'s."""
    todo = []
    for d, live in pairs:
        key = _live_key(live.persistent_xml, live.live_xml if live.active else "")
        if not cache.holds(d.name, d.xml, key):
            todo.append((d, live, key))
    if len(todo) < 2 * forked.MIN_SHARE or processes < 2:
        return  # the plan compares them itself, as fast
    cache.misses += len(todo)
    results = forked.map_forked(_compared_or_none, todo, processes)
    for (d, _live, key), result in zip(todo, results, strict=True):
        if result is not None:
            cache.put(d.name, d.xml, key, result)


def _compared_or_none(item: tuple[RenderedDomain, LiveDomain, bytes], _in_child: bool) -> _Compared | None:
    """``None`` where the comparison fails: the plan meets that failure itself, as before."""
    try:
        return _compared(Documents(item[0], item[1]))
    except Exception:
        return None


def _compared(docs: Documents) -> _Compared:
    desired = essence_of(docs.desired())
    live = docs.persistent()
    assert live is not None  # compared with a live domain
    persistent = essence_of(live)
    tree = docs.running()
    running = essence_of(tree) if tree is not None else None
    fields = diff_essences(desired, persistent, running)
    rd: RunningDiff | None = None
    if running is not None:
        rd = running_diff(desired, running, fields)
    return fields, rd
