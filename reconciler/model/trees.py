"""Document trees at rest: a record's object tree kept packed between builds.

Input: records whose ``obj`` slot holds a parsed object tree (``Manifest``, the overlay
engine's ``Res``). Output: ``AtRest`` (the base those records share: where the packed
bytes and the ``Shelf`` live), ``lazy_tree`` (the ``obj`` attribute that unpacks on first
access), ``Shelf`` (what a long-lived cache rests its records with), ``briefly`` and
``doze`` (a tree read once put back to rest at once). Pure, in memory.

A daemon holds every document of its repository between reconciles, as many small
dicts and strings (some 8 KiB per VM, the steps of the overlay build counted). A record
put to rest (``Shelf.rest``) keeps its tree as a pickle deflated against the shelf's
dictionary (a few pickles of the first trees it rested: documents of one repository are
alike, so a VM's tree takes some 40 bytes) and drops the tree; records are immutable,
so the bytes, made once per record, never go stale. The first access to ``obj`` unpacks
the tree and keeps it, so within a build every reader sees one object (steps rely on
identity within a build); the shelf notes the record, and at the build's end
(``Shelf.settle``) the tree is dropped again. A stage that reads each document once
(a check, a fact, a VM's work) puts it back as soon as it is done (``briefly``,
``doze``): a pass over the whole fleet holds one tree at a time, not every tree it read
(a peak whose memory the allocator's arenas would keep). A record never rested behaves as before;
the record's own identity never changes (caches key on it). Only the daemon opts in
(``desired.PipelineCache.keep_expanded``); the CLI's builds keep their trees.

A record a memoised step of the overlay build made (``Shelf.noting``; a ``derivable``
class: the engine's ``Res``) rests *derived*: no bytes of its own, only its input record
and the step's memo key. A build reaches such a record only through that step's memo
(its input found, the step's key the same), so when a build reads its tree (a later step
missing on it: an overlay changed above it) the tree is made again by that build's step
of the same key, from its input (itself resting, packed or derived): the same inputs,
the same tree. The records handed out of a build (``Manifest``) keep their bytes: later
stages read them outside any build. A schema set mid-build would change what the steps
before it make: the derived records found so far get their trees first (``wake``).

Exactness: pickle keeps dicts' order, lists, scalars' types and values, the str
subclasses the YAML reader and the overlay engine make (``ScalarText``, ``SharedText``:
same class, same text, same attributes) and the sharing of nodes inside one tree. Trees
of one build share subtrees between records (a step's output shares what it did not
change); once rested and unpacked each record has its own copy, equal in value. Only
mappings rest; a tree pickle refuses stays as it is.
"""

from __future__ import annotations

import pickle
import zlib
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

T = TypeVar("T")

AT_REST: Any = object()  # the ``obj`` slot of a record whose tree is packed

_WBITS = -15  # raw deflate, a 32 KiB window: the whole dictionary serves
_MEMLEVEL = 4  # small state: copied for each tree from one primed with the dictionary
_LEVEL = 6  # a tree is packed once and kept: some 38 bytes, not 53 at level 1, for 3 us more
_SAMPLES = 16  # pickles the dictionary is taken from, spread over the first rest


class AtRest:
    """The base of a record whose tree can rest: its packed bytes and its shelf (or, for
    a record derived by a step, its input and the step: ``Shelf.noting``)."""

    __slots__ = ("_packed", "_shelf")

    derivable: ClassVar[bool] = False  # a step's output of this class may rest derived (``Shelf.noting``)

    def holds_mapping(self) -> bool:
        """Whether the tree is a mapping (only mappings rest: a resting one is not unpacked)."""
        tree = type(self).obj.slot.__get__(self)  # type: ignore[attr-defined]
        return tree is AT_REST or isinstance(tree, dict)


class Shelf:
    """Where one cache's records rest: the deflate dictionary (fixed by the first rest),
    the records unpacked since the last ``settle``, and counts of the trees packed and
    unpacked (for tests and measuring)."""

    __slots__ = ("_made_by", "awake", "derived", "packed", "steps", "unpacked", "zdict")

    def __init__(self) -> None:
        self.zdict: bytes | None = None
        self.awake: list[AtRest] = []
        self.packed = 0
        self.unpacked = 0
        self.derived = 0  # trees made again by their step
        self.steps: dict[Any, Callable[[Any], Any]] = {}  # this build's steps, by memo key
        self._made_by: dict[Any, _Step] = {}  # this build's, by memo key: what its records rest with

    def noting(self, tag: Any, fn: Callable[[Any], Any], made: list[Any]) -> Callable[[Any], Any]:
        """``fn``, a step memoised under ``tag`` in the current build, noting what it is
        given and makes in ``made`` (to rest at the build's end). A new record it makes of
        a ``derivable`` class rests *derived*: no bytes of its own, its input and the step
        kept instead; when a later build reads its tree (a step after it missing on it),
        the tree is made again by this build's step of the same key, which the record was
        found through in that build (the same key: the same inputs, the same tree)."""
        self.steps[tag] = fn
        step = self._made_by.get(tag)
        if step is None:
            step = self._made_by[tag] = _Step(self, tag)

        def noted(x: Any) -> Any:
            made.append(x)  # the input too: a record made by a step not memoised
            value = fn(x)
            if (
                value is not x
                and getattr(type(value), "derivable", False)
                and getattr(value, "_packed", None) is None
            ):
                object.__setattr__(value, "_packed", x)
                object.__setattr__(value, "_shelf", step)
            made.append(value)
            return value

        return noted

    def rest(self, records: list[Any]) -> None:
        """Put ``records`` to rest (a tree shared by records is packed once, one tree at a
        time); those already resting are left as they are."""
        todo: list[tuple[Any, Any, Any]] = []  # (record, its slot, its tree) to rest
        for r in records:
            slot = type(r).obj.slot
            tree = slot.__get__(r)
            if tree is not AT_REST and isinstance(tree, dict):
                todo.append((r, slot, tree))
        if not todo:
            return
        if self.zdict is None:
            self.zdict = _dictionary([tree for _r, _slot, tree in todo])
        primed = zlib.compressobj(
            _LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL, zlib.Z_DEFAULT_STRATEGY, self.zdict
        )
        packed: dict[int, bytes | None] = {}  # by the tree's id: the trees are held meanwhile
        for r, slot, tree in todo:
            if getattr(r, "_packed", None) is None:
                if id(tree) not in packed:
                    packed[id(tree)] = self._pack(tree, primed)
                data = packed[id(tree)]
                if data is None:
                    continue  # not plain data: kept as it is
                object.__setattr__(r, "_packed", data)
                object.__setattr__(r, "_shelf", self)
            slot.__set__(r, AT_REST)

    def _pack(self, tree: object, primed: Any) -> bytes | None:
        try:
            data = pickle.dumps(tree, pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        self.packed += 1
        deflate = primed.copy()  # the dictionary's state, not set up again for each tree
        return bytes(deflate.compress(data) + deflate.flush())

    def wake(self, records: Iterable[Any]) -> None:
        """The current build's steps are about to read other state (a schema set mid-build):
        the trees of the derived records among ``records`` (those found so far) are made
        now, by the steps as they were, and those steps are forgotten (a derivation that
        would need one again fails loudly rather than making another tree)."""
        for r in records:
            if isinstance(getattr(r, "_shelf", None), _Step) and type(r).obj.slot.__get__(r) is AT_REST:
                r.obj  # noqa: B018 - read to be made
        self.steps = {}

    def settle(self) -> None:
        """The build is over: every tree unpacked since the last ``settle`` is dropped (and
        the build's steps are forgotten)."""
        self.steps = {}
        self._made_by = {}
        awake, self.awake = self.awake, []
        for r in awake:
            type(r).obj.slot.__set__(r, AT_REST)  # type: ignore[attr-defined]

    def unpack(self, data: bytes) -> Any:
        self.unpacked += 1
        inflate = zlib.decompressobj(_WBITS, self.zdict or b"")  # made by the rest that packed it
        return pickle.loads(inflate.decompress(data) + inflate.flush())


class _Step:
    """What a derived record rests with: the shelf and the memo key of the step that made
    it (shared by the records one build's step made)."""

    __slots__ = ("shelf", "tag")

    def __init__(self, shelf: Shelf, tag: Any) -> None:
        self.shelf = shelf
        self.tag = tag

    @property
    def awake(self) -> list[AtRest]:
        return self.shelf.awake

    def unpack(self, given: Any) -> Any:
        """The tree of the record the step made of ``given``: made again by the current
        build's step of the same key."""
        fn = self.shelf.steps.get(self.tag)
        if fn is None:
            raise RuntimeError("a derived record's tree is read outside a build that ran its step")
        self.shelf.derived += 1
        return fn(given).obj


def briefly(record: AtRest, read: Callable[[], T]) -> T:
    """``read()``, which reads ``record``'s tree: a tree it unpacks rests again after it
    (a pass over many documents holds one tree at a time, not every one it read)."""
    resting = type(record).obj.slot.__get__(record) is AT_REST  # type: ignore[attr-defined]
    try:
        return read()
    finally:
        if resting:
            doze(record)


def doze(record: AtRest) -> None:
    """``record``'s tree, if it rests between builds, is dropped again now (its bytes
    kept): for a stage done with one document before the build ends, so that the next
    one unpacked reuses its memory rather than piling up beside it."""
    if getattr(record, "_packed", None) is not None:
        type(record).obj.slot.__set__(record, AT_REST)  # type: ignore[attr-defined]


def _dictionary(trees: list[Any]) -> bytes:
    """The deflate dictionary: pickles of a few trees spread over the first rest."""
    sample = []
    for tree in trees[:: max(1, len(trees) // _SAMPLES)]:
        try:
            sample.append(pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError):
            continue
    return b"".join(sample)[-(1 << -_WBITS) :]


class _LazyTree:
    """``obj``: the slot's tree, unpacked on first access after a rest."""

    __slots__ = ("slot",)

    def __init__(self, slot: Any) -> None:
        self.slot = slot

    def __get__(self, record: Any, owner: type | None = None) -> Any:
        if record is None:
            return self
        tree = self.slot.__get__(record, owner)
        if tree is AT_REST:
            shelf: Shelf | _Step = record._shelf
            tree = shelf.unpack(record._packed)
            self.slot.__set__(record, tree)
            shelf.awake.append(record)
        return tree

    def __set__(self, record: Any, value: Any) -> None:
        self.slot.__set__(record, value)


def lazy_tree(cls: type) -> None:
    """Make ``cls.obj`` (a slot of a record class based on ``AtRest``) unpack on access."""
    setattr(cls, "obj", _LazyTree(cls.__dict__["obj"]))  # noqa: B010 - over the slot's own descriptor
