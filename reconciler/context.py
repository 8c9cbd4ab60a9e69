"""The caller-owned context of a run: the clock, the mapper of per-item work, and the
caches that make the next revision cheap.

Input: nothing. Output: ``Clock`` and ``SystemClock``; ``Mapper`` and ``SerialMapper``;
``RevisionCache`` (the one store every cache is made of, with the one eviction rule);
``Context``, which holds a clock, a mapper and the revision-independent caches. The CLI,
the daemon and tests create a context and pass it down explicitly; a stage takes what
it uses (its cache, the mapper). No module of ``reconciler`` keeps state of its own
(``tests/unit/test_no_module_state.py``). This module imports nothing of the project.

The one eviction rule
---------------------
Every cache is made of ``RevisionCache`` stores. A *run* is one use of a store for one
revision: one overlay build, one catalog, one expansion pass, one plan, one listing of a
host's domains; the stage that uses the store ends the run (``end_run``). An entry is kept
while one of the last two runs used it, so two revisions built alternately (a PR diff's
base and head, a revision and the commit a ``revisionName: git:`` pin names) both stay
warm. When a run ends, the entries neither it nor the run before used are dropped, in
one pass over the store made once they are more than an eighth of the entries in use (a
run that changed little walks nothing; a store never holds more than that share of
entries due to go). Besides, a store holds at most ``bound`` entries: reaching it drops
every entry the current run has not used, and everything if the current run alone
fills it.

The identity promise
--------------------
The stores key by content (a blob id and a path, a digest of the text compared or
parsed, a domain name with the very XML compared) or by the identity of an input record
(``same``, ``get_same``/``put_same``: the record is held by the entry, so its ``id`` cannot be
reused while the entry lives, and a hit requires the very same object). Identity keys
rest on two promises:

1. the overlay build hands out the same ``Manifest`` (and the same parsed object inside
   it) for a document whose inputs did not change: the same blob, the same
   kustomizations and transformer inputs on its way (``overlays/cache.py`` keys each
   step by those), and a new object for any other;
2. no stage mutates a record after it was handed out (the project rule: records are
   read-only; a stage that needs a changed object copies it).

Every cached value is the result of a pure function of its key and of the inputs the
cache compares on each use (the catalog's other objects, the host config, the
capabilities and facts, the pins: ``desired.PipelineCache``), so a hit returns exactly
what recomputing would. ``tests/unit/test_context.py`` holds the caches to it: an
unchanged document hits, a changed one misses, a changed catalog, host config or pin
misses, and revisions built alternately give what cold builds give.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K")
V = TypeVar("V")
C = TypeVar("C")


class Clock(Protocol):
    """Time as the daemon reads it: the wall clock for records people read, the monotonic
    clock for every timer, back-off and deadline (a wall-clock step moves neither)."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds of a clock that never steps backwards."""
        ...


@dataclass(frozen=True, slots=True)
class SystemClock:
    """The process's real clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class Mapper(Protocol):
    """Runs a pure function over items: ``map(fn, items)`` returns exactly what
    ``[fn(x) for x in items]`` returns (results in order; an item's exception is raised
    as the loop would raise it). ``fn`` must read nothing but its item and what it
    closes over (no files, no connections): work that needs more is done by the caller
    before or after the map."""

    @property
    def spreads(self) -> bool:
        """Whether ``map`` spreads the items over several workers. Only then does a stage
        gather work it would otherwise do as it goes (and keep what it parsed on the way)
        into one map up front."""
        ...

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


@dataclass(frozen=True, slots=True)
class SerialMapper:
    """The loop itself: the daemon's mapper, and every caller's unless it picks another."""

    @property
    def spreads(self) -> bool:
        return False

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(x) for x in items]


SERIAL = SerialMapper()

DEFAULT_BOUND = 1 << 20  # entries per store: far above a 10k-VM fleet's, far below a runaway's


_CONTENT: Any = object()  # ``RevisionCache._store``'s tag of a content key


_HASH: Any = object.__hash__
_EQ: Any = object.__eq__


def _key(obj: object) -> Any:
    """An identity key's dictionary key: the object itself when its class hashes and
    compares by identity (the overlay engine's records: no key object made), else its
    ``id`` (the entry then holds the object, ``_Held``)."""
    cls = type(obj)
    return obj if cls.__hash__ is _HASH and cls.__eq__ is _EQ else id(obj)


class _Entry:
    """One result held: the value and the run that used it last (a content key's, or an
    identity key's whose object is the dictionary's key)."""

    __slots__ = ("run", "value")

    def __init__(self, value: Any, run: int) -> None:
        self.value = value
        self.run = run


class _Held(_Entry):
    """An identity key's entry under the object's ``id``: the object, held."""

    __slots__ = ("held",)

    def __init__(self, value: Any, run: int, held: object) -> None:
        self.value = value
        self.run = run
        self.held = held


def _entry(key: Any, obj: object, value: Any, run: int) -> _Entry:
    return _Entry(value, run) if key is obj else _Held(value, run, obj)


class RevisionCache(Generic[K, V]):
    """A store of results under the one eviction rule (see the module docstring).

    Content keys: ``get(key)``/``put(key, value)``. Identity keys: ``same(obj, make, tag)``
    (found, else made and stored), ``get_same(obj, tag)``/``put_same(obj, value, tag)`` and
    ``each_same`` hit only for the very object stored (held by the entry).
    Entries are small records updated in place on a hit, so a warm run allocates almost
    nothing that outlives it (little work for Python's cyclic garbage collector); the
    identity entries of one tag sit in one dictionary keyed by the object itself when its
    class hashes by identity, else by its ``id`` (no key tuple per entry, and for the
    overlay engine's records no key object at all: a daemon keeps a dozen entries per VM). How many entries the
    current and the previous run used is counted as they are touched, so ending a run
    walks the store only when enough entries are due to go. ``hits`` and ``misses``
    count lookups since the store was made.
    """

    __slots__ = ("_before", "_entries", "_now", "_run", "_size", "_tagged", "bound", "hits", "misses")

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self._entries: dict[Any, _Entry] = {}  # content keys
        self._tagged: dict[Any, dict[Any, _Entry]] = {}  # identity keys: tag -> obj or id(obj) -> entry
        self._run = 1
        self._now = 0  # entries last used by the current run
        self._before = 0  # entries last used by the previous run
        self._size = 0  # entries held
        self.bound = bound
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return self._size

    def keys(self) -> list[K]:
        """The keys held (for measuring and tests; an identity key as ``(tag, id(obj))``)."""
        out: list[Any] = list(self._entries)
        out += [(tag, i if isinstance(i, int) else id(i)) for tag, d in self._tagged.items() for i in d]
        return out

    def values(self) -> list[V]:
        """The values held (for measuring and tests)."""
        return [e.value for e in self._all()]

    def held(self) -> list[object]:
        """The objects of the identity keys held (for a cache that handles its records)."""
        return [e.held if isinstance(e, _Held) else k for d in self._tagged.values() for k, e in d.items()]

    def _all(self) -> list[_Entry]:
        out = list(self._entries.values())
        for d in self._tagged.values():
            out += d.values()
        return out

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        if entry.run != self._run:  # first use in this run (``_touch``, inlined: a hot path)
            if entry.run == self._run - 1:
                self._before -= 1
            entry.run = self._run
            self._now += 1
        self.hits += 1
        return entry.value  # type: ignore[no-any-return]

    def put(self, key: K, value: V) -> None:
        self._store(_CONTENT, key, _Entry(value, self._run))

    def get_same(self, obj: object, tag: object = None) -> V | None:
        tagged = self._tagged.get(tag)
        key = _key(obj)
        entry = tagged.get(key) if tagged is not None else None
        if entry is None or (key is not obj and entry.held is not obj):  # type: ignore[attr-defined]
            self.misses += 1
            return None
        if entry.run != self._run:  # ``_touch``, inlined
            if entry.run == self._run - 1:
                self._before -= 1
            entry.run = self._run
            self._now += 1
        self.hits += 1
        return entry.value  # type: ignore[no-any-return]

    def put_same(self, obj: object, value: V, tag: object = None) -> None:
        key = _key(obj)
        self._store(tag, key, _entry(key, obj, value, self._run))

    def same(self, obj: object, make: Callable[[], V], tag: object = None) -> V:
        """The value stored for the very object ``obj``, else ``make()`` stored for it: one
        call per input record (the stage hands over its document once, and the store
        hands it back only to ``make``, which the stage wrote). ``make`` raising stores
        nothing."""
        tagged = self._tag(tag)
        key = _key(obj)
        entry = tagged.get(key)
        if entry is not None and (key is obj or entry.held is obj):  # type: ignore[attr-defined]
            if entry.run != self._run:  # ``_touch``, inlined
                if entry.run == self._run - 1:
                    self._before -= 1
                entry.run = self._run
                self._now += 1
            self.hits += 1
            return entry.value  # type: ignore[no-any-return]
        self.misses += 1
        value = make()
        self._store(tag, key, _entry(key, obj, value, self._run))
        return value

    def each_same(
        self, tag: object, items: Iterable[Any], fn: Callable[[Any], V | None], dropped: Any = None
    ) -> list[V]:
        """``fn`` over ``items``, each result through the store by ``(tag, x)`` identity (the
        hot loop of a build: one dictionary lookup per item found). With ``dropped`` (a
        sentinel), a None result is kept as ``dropped`` and both are left out of the list."""
        run = self._run
        tagged = self._tag(tag)
        out: list[V] = []
        hits = misses = now = before = 0
        kind: type | None = None  # the last item's class, and whether it keys by itself
        by_self = False
        for x in items:
            if type(x) is not kind:
                kind = type(x)
                by_self = kind.__hash__ is _HASH and kind.__eq__ is _EQ
            key = x if by_self else id(x)
            entry = tagged.get(key)
            if entry is not None and (by_self or entry.held is x):  # type: ignore[attr-defined]
                if entry.run != run:  # ``_touch``, counted below
                    if entry.run == run - 1:
                        before += 1
                    entry.run = run
                    now += 1
                value = entry.value
                hits += 1
            else:
                value = fn(x)
                if value is None and dropped is not None:
                    value = dropped
                self._now, self._before, now, before = self._now + now, self._before - before, 0, 0
                self._store(tag, key, _Entry(value, run) if by_self else _Held(value, run, x))
                tagged = self._tag(tag)  # a shrink at the bound replaces the dictionaries
                misses += 1
            if dropped is None or value is not dropped:
                out.append(value)
        self._now += now
        self._before -= before
        self.hits += hits
        self.misses += misses
        return out

    def end_run(self) -> None:
        """The current run is over: the entries neither it nor the run before used go (in
        one pass over the store, once they are more than an eighth of those in use)."""
        live = self._now + self._before
        if len(self) - live > live // 8:
            self._keep_from(self._run - 1)
        self._before, self._now = self._now, 0
        self._run += 1

    def clear(self) -> None:
        self._entries = {}
        self._tagged = {}
        self._now = self._before = self._size = 0

    def _tag(self, tag: object) -> dict[Any, _Entry]:
        tagged = self._tagged.get(tag)
        if tagged is None:
            tagged = self._tagged[tag] = {}
        return tagged

    def _keep_from(self, run: int) -> None:
        """Keep only the entries last used by ``run`` or later (new dictionaries)."""
        self._entries = {k: e for k, e in self._entries.items() if e.run >= run}
        tagged = {tag: {k: e for k, e in d.items() if e.run >= run} for tag, d in self._tagged.items()}
        self._tagged = {tag: d for tag, d in tagged.items() if d}
        self._size = len(self._entries) + sum(len(d) for d in self._tagged.values())

    def _touch(self, entry: _Entry) -> None:
        """``entry``, last used by an earlier run, is used by the current one."""
        if entry.run == self._run - 1:
            self._before -= 1
        entry.run = self._run
        self._now += 1

    def _store(self, tag: object, key: Any, entry: _Entry) -> None:
        """``entry`` under ``key``, a content key (``tag`` ``_CONTENT``), an object or an ``id``."""
        where = self._entries if tag is _CONTENT else self._tag(tag)
        old = where.get(key)
        if old is None:
            if self._size >= self.bound:
                self._shrink()
                where = self._entries if tag is _CONTENT else self._tag(tag)
            self._now += 1
            self._size += 1
        elif old.run != self._run:
            self._touch(old)
        where[key] = entry

    def _shrink(self) -> None:
        """At the bound: keep only what the current run used, or nothing if that fills it."""
        self._keep_from(self._run)
        if self._size >= self.bound:
            self._entries, self._tagged, self._size = {}, {}, 0
        self._now = self._size
        self._before = 0


class Context:
    """What one caller keeps across runs: the clock, the mapper and the caches that do
    not depend on a host (the overlay build's, the catalog's). Per-host caches
    (``desired.PipelineCache``) are kept beside it by the caller, one per host.

    ``cache(kind)`` is the context's one instance of a cache class (made on first use;
    ``kind()`` must take no argument)."""

    __slots__ = ("_caches", "clock", "mapper")

    def __init__(self, mapper: Mapper = SERIAL, clock: Clock | None = None) -> None:
        self.mapper = mapper
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._caches: dict[type, object] = {}

    def cache(self, kind: type[C]) -> C:
        got = self._caches.get(kind)
        if got is None:
            got = self._caches[kind] = kind()
        return got  # type: ignore[return-value]

    def with_mapper(self, mapper: Mapper) -> Context:
        """This context's clock and caches with another mapper."""
        other = Context(mapper, self.clock)
        other._caches = self._caches
        return other
