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
warm. Entries sit by the run that used them last (the current one, the one before, the
one before that); using one moves it to the current run's, and when a run ends the
oldest go whole (nothing is walked). Besides, a store holds at most ``bound`` entries:
reaching it drops every entry the current run has not used, and everything if the
current run alone fills it.

The identity promise
--------------------
The stores key by content (a blob id and a path, a digest of the text compared or
parsed, a domain name with the very XML compared) or by the identity of an input record
(``same``, ``get_same``/``put_same``: the record is held by the store, so its ``id`` cannot be
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


_CONTENT: Any = object()  # the tag of the content keys
_MISS: Any = object()  # ``dict.get``'s default: not held


def _key(obj: object) -> Any:
    """An identity key's dictionary key: the object itself when its class hashes and
    compares by identity (the overlay engine's records: no key object made), else its
    ``id`` (the value is then held beside the object, ``_Held``)."""
    cls = type(obj)
    return obj if cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__ else id(obj)


class Holding:
    """A value that holds the object it is stored for (its ``held`` slot): under an
    identity key it is kept as it is, with no ``_Held`` beside it (a daemon keeps one per
    document)."""

    __slots__ = ()
    held: object

    @property
    def value(self) -> Any:
        return self


class _Held:
    """An identity key's value under the object's ``id``: the value and the object, held."""

    __slots__ = ("held", "value")

    def __init__(self, value: Any, held: object) -> None:
        self.value = value
        self.held = held


class _Runs:
    """One tag's entries by the run that used them last: this one (``now``), the one
    before (``before``), the one before that (``older``: they go when this run ends).
    A value is held as it is (no entry record): using it moves it to ``now``."""

    __slots__ = ("before", "now", "older")

    def __init__(self) -> None:
        self.now: dict[Any, Any] = {}
        self.before: dict[Any, Any] = {}
        self.older: dict[Any, Any] = {}

    def find(self, key: Any) -> Any:
        """The value under ``key`` (moved to ``now``), else ``_MISS``."""
        value = self.before.pop(key, _MISS)  # a warm run's usual case first
        if value is _MISS:
            value = self.now.get(key, _MISS)
            if value is not _MISS:
                return value
            value = self.older.pop(key, _MISS)
            if value is _MISS:
                return value
        self.now[key] = value
        return value

    def items(self) -> list[tuple[Any, Any]]:
        return [*self.now.items(), *self.before.items(), *self.older.items()]

    def __len__(self) -> int:
        return len(self.now) + len(self.before) + len(self.older)


class RevisionCache(Generic[K, V]):
    """A store of results under the one eviction rule (see the module docstring).

    Content keys: ``get(key)``/``put(key, value)``. Identity keys: ``same(obj, make, tag)``
    (found, else made and stored), ``get_same(obj, tag)``/``put_same(obj, value, tag)`` and
    ``each_same`` hit only for the very object stored (held by the store).
    Each tag's entries sit in three dictionaries, by the run that used them last (``_Runs``);
    a value is held as it is, with no record of its own (a daemon keeps a dozen entries
    per VM), under the object itself when its class hashes by identity (the overlay
    engine's records: no key object either), else under its ``id`` with the object
    (``_Held``). Using an entry moves it to the current run's dictionary; ending a run
    drops the oldest dictionary whole (no walk over the store). ``hits`` and ``misses``
    count lookups since the store was made.
    """

    __slots__ = ("_size", "_tags", "bound", "hits", "misses")

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self._tags: dict[Any, _Runs] = {}  # tag (``_CONTENT`` for content keys) -> its entries
        self._size = 0  # entries held
        self.bound = bound
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return self._size

    def keys(self) -> list[K]:
        """The keys held (for measuring and tests; an identity key as ``(tag, id(obj))``)."""
        out: list[Any] = [k for k, _v in self._tags[_CONTENT].items()] if _CONTENT in self._tags else []
        for tag, runs in self._tags.items():
            if tag is not _CONTENT:
                out += [(tag, k if isinstance(k, int) else id(k)) for k, _v in runs.items()]
        return out

    def values(self) -> list[V]:
        """The values held (for measuring and tests)."""
        return [
            v.value if isinstance(v, (_Held, Holding)) else v
            for runs in self._tags.values()
            for _k, v in runs.items()
        ]

    def found(self, tag: object) -> list[V]:
        """The values of ``tag``'s identity keys the current run used (found or stored)."""
        runs = self._tags.get(tag)
        return (
            [v.value if isinstance(v, (_Held, Holding)) else v for v in runs.now.values()]
            if runs is not None
            else []
        )

    def held(self) -> list[object]:
        """The objects of the identity keys held (for a cache that handles its records)."""
        return [
            v.held if type(k) is int else k  # an ``id``: the object is held by its value
            for tag, runs in self._tags.items()
            if tag is not _CONTENT
            for k, v in runs.items()
        ]

    def get(self, key: K) -> V | None:
        runs = self._tags.get(_CONTENT)
        value = runs.find(key) if runs is not None else _MISS
        if value is _MISS:
            self.misses += 1
            return None
        self.hits += 1
        return value  # type: ignore[no-any-return]

    def put(self, key: K, value: V) -> None:
        self._store(_CONTENT, key, value)

    def get_same(self, obj: object, tag: object = None) -> V | None:
        runs = self._tags.get(tag)
        value = _found(runs.find(key := _key(obj)), key, obj) if runs is not None else _MISS
        if value is _MISS:
            self.misses += 1
            return None
        self.hits += 1
        return value  # type: ignore[no-any-return]

    def put_same(self, obj: object, value: V, tag: object = None) -> None:
        key = _key(obj)
        self._store(tag, key, value if key is obj else _holder(value, obj))

    def same(self, obj: object, make: Callable[[], V], tag: object = None) -> V:
        """The value stored for the very object ``obj``, else ``make()`` stored for it: one
        call per input record (the stage hands over its document once, and the store
        hands it back only to ``make``, which the stage wrote). ``make`` raising stores
        nothing."""
        runs = self._tags.get(tag)
        key = _key(obj)
        if runs is not None:
            value = _found(runs.find(key), key, obj)
            if value is not _MISS:
                self.hits += 1
                return value  # type: ignore[no-any-return]
        self.misses += 1
        value = make()
        self._store(tag, key, value if key is obj else _holder(value, obj))
        return value

    def each_same(
        self, tag: object, items: Iterable[Any], fn: Callable[[Any], V | None], dropped: Any = None
    ) -> list[V]:
        """``fn`` over ``items``, each result through the store by ``(tag, x)`` identity (the
        hot loop of a build: a dictionary lookup or two per item found). With ``dropped``
        (a sentinel), a None result is kept as ``dropped`` and both are left out of the list."""
        runs = self._tag(tag)
        now, before, older = runs.now, runs.before, runs.older
        out: list[V] = []
        hits = misses = 0
        kind: Any = None  # the last item's class, and whether it keys by itself
        by_self = False
        for x in items:
            if type(x) is not kind:
                kind = type(x)
                by_self = kind.__hash__ is object.__hash__ and kind.__eq__ is object.__eq__
            key = x if by_self else id(x)
            value = before.pop(key, _MISS)  # ``_Runs.find``, inlined, a warm run's usual case first
            if value is not _MISS:
                now[key] = value
            else:
                value = now.get(key, _MISS)
                if value is _MISS:
                    value = older.pop(key, _MISS)
                    if value is not _MISS:
                        now[key] = value
            if value is not _MISS and not by_self:
                value = value.value if value.held is x else _MISS
            if value is _MISS:
                value = fn(x)
                if value is None and dropped is not None:
                    value = dropped
                self._store(tag, key, value if by_self else _holder(value, x))
                now, before, older = runs.now, runs.before, runs.older  # a shrink at the bound empties them
                misses += 1
            else:
                hits += 1
            if dropped is None or value is not dropped:
                out.append(value)
        self.hits += hits
        self.misses += misses
        return out

    def end_run(self) -> None:
        """The current run is over: the entries neither it nor the run before used go."""
        gone = []
        for tag, runs in self._tags.items():
            self._size -= len(runs.older)
            before = runs.before
            runs.older = dict(before) if before else {}  # a new dictionary: the room of those used is freed
            runs.before, runs.now = runs.now, {}
            if not runs.before and not runs.older:
                gone.append(tag)
        for tag in gone:
            del self._tags[tag]

    def clear(self) -> None:
        self._tags = {}
        self._size = 0

    def _tag(self, tag: object) -> _Runs:
        runs = self._tags.get(tag)
        if runs is None:
            runs = self._tags[tag] = _Runs()
        return runs

    def _store(self, tag: object, key: Any, value: Any) -> None:
        """``value`` under ``key`` (a content key, an object or an ``id``) in the current run."""
        runs = self._tag(tag)
        if (
            key not in runs.now
            and runs.before.pop(key, _MISS) is _MISS
            and runs.older.pop(key, _MISS) is _MISS
        ):
            if self._size >= self.bound:
                self._shrink()
            self._size += 1
        runs.now[key] = value

    def _shrink(self) -> None:
        """At the bound: keep only what the current run used, or nothing if that fills it."""
        for runs in self._tags.values():
            runs.before, runs.older = {}, {}
        self._size = sum(len(runs.now) for runs in self._tags.values())
        if self._size >= self.bound:
            for runs in self._tags.values():
                runs.now = {}
            self._size = 0


def _holder(value: Any, obj: object) -> Holding | _Held:
    """What an identity key's value is kept as: itself if it holds ``obj``, else a ``_Held``."""
    return value if isinstance(value, Holding) and value.held is obj else _Held(value, obj)


def _found(value: Any, key: Any, obj: object) -> Any:
    """``value`` found under an identity ``key``: itself, or the ``_Held`` value if it holds ``obj``."""
    if value is _MISS or key is obj:
        return value
    return value.value if value.held is obj else _MISS


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
