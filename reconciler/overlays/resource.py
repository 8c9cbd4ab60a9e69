"""Resources as the overlay engine sees them: identity and field specs.

Input: plain object trees. Output: ``Res`` records (immutable; their ``obj`` is never
modified after creation, every change makes a new tree that shares unchanged parts),
ids, and copy-on-write updates along kustomize "field spec" paths
(``spec/template/metadata/labels``; lists on the way are entered element by element).
Selectors that match resources are in ``selector``; values a transformer links, in
``linked``. Pure.
"""

from __future__ import annotations

import re
import sys
from dataclasses import InitVar, dataclass, field, fields, replace
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple, TypeVar

from reconciler.errors import OverlayError
from reconciler.model import secret_keys
from reconciler.model.trees import AtRest, lazy_tree
from reconciler.overlays.scopes import is_cluster_scoped as is_cluster_scoped

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

MISSING: Any = object()

# kustomize drops objects annotated so from a build's output (``IgnoreLocal``)
LOCAL_CONFIG = "config.kubernetes.io/local-config"


class ResId(NamedTuple):
    group: str
    version: str
    kind: str
    namespace: str
    name: str

    def gvk_text(self) -> str:
        return f"{self.kind}.{self.version or '[noVer]'}.{self.group or '[noGrp]'}"

    def __str__(self) -> str:
        return f"{self.gvk_text()}/{self.name or '[noName]'}.{self.namespace or '[noNs]'}"


def split_api_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return sys.intern(group), sys.intern(version)  # every record of a kind holds them
    return "", api_version


def res_id(obj: dict[str, Any]) -> ResId:
    group, version = split_api_version(str(obj.get("apiVersion") or ""))
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return ResId(
        group,
        version,
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def effective_ns(rid: ResId) -> str:
    if is_cluster_scoped(rid.group, rid.kind):
        return ""
    return rid.namespace or "default"


def id_key(rid: ResId) -> tuple[str, str, str, str, str]:
    """Identity used for equality: namespace "" and "default" are the same."""
    return (rid.group, rid.version, rid.kind, effective_ns(rid), rid.name)


SetBy = tuple[tuple[str | int, ...], str, int]  # (field path, file, line) of what an overlay set


def changed_paths(old: Any, new: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The paths where ``new`` differs from ``old``: leaves of maps, items of lists of the
    same length; a list that changed length, an added or a removed subtree, by its root."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str | int, ...]] = []
        for k, v in new.items():
            if k not in old:
                out.append((*prefix, k))
            elif old[k] is not v and old[k] != v:
                out += changed_paths(old[k], v, (*prefix, k))
        out += [(*prefix, k) for k in old if k not in new]
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            p
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for p in changed_paths(a, b, (*prefix, i))
        ]
    return [prefix] if old != new else []


def patch_paths(patch: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The fields a strategic merge patch sets: its leaves (a list as a whole: it merges by
    key, not by position), without the object's identity (apiVersion, kind, name, namespace)."""
    if not isinstance(patch, dict):
        return [prefix] if prefix else []
    out: list[tuple[str | int, ...]] = []
    identity = _IDENTITY.get(prefix, ())  # the identity's keys at this level (at the top, in metadata)
    for k, v in patch.items():
        if not isinstance(k, str) or k.startswith("$") or k in identity:
            continue
        here = (*prefix, k)
        out += patch_paths(v, here) if isinstance(v, dict) and v else [here]
    return out


_IDENTITY: Mapping[tuple[str | int, ...], tuple[str, ...]] = MappingProxyType(
    {(): ("apiVersion", "kind"), ("metadata",): ("name", "namespace")}
)


def pointer_path(pointer: object) -> tuple[str | int, ...]:
    """A JSON 6902 path (``/spec/template/spec/domain/cpu/cores``) as a field path; an
    item appended (``-``) names its list."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        return ()
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]
    if parts and parts[-1] == "-":
        parts.pop()
    return tuple(int(p) if p.isdigit() else p for p in parts)


class _Noted(AtRest):
    """What a record notes of its tree when first asked (the tree may rest meanwhile)."""

    __slots__ = ("_local",)
    _local: str | None  # the ``LOCAL_CONFIG`` annotation's value (None: none), once asked


if TYPE_CHECKING:
    _T = TypeVar("_T")
    _InMore = Annotated[_T, "kept in _More"]  # to a type checker, a field like any other
else:
    _InMore = InitVar  # an argument of ``__init__`` (and ``replace``) kept in ``more``


@dataclass(frozen=True, slots=True)
class _More:
    """A record's rarely set fields, in one record shared by every record that has the same
    (most have none: one ``_PLAIN`` for all; a step's ``but`` passes its input's on)."""

    prev: tuple[ResId, ...] = ()
    needs_hash: bool = False
    behavior: str = "create"
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    origin: tuple[str, ...] | None = None  # None: (the record's path, "")
    sealed: bool = False
    seal: str = ""
    ref_vars: tuple[str, ...] = ()
    prev_keys: tuple[tuple[str, str, str, str, str], ...] = field(init=False, compare=False)  # id_key of each

    def __post_init__(self) -> None:
        object.__setattr__(self, "prev_keys", tuple(id_key(p) for p in self.prev))


_PLAIN = _More()
_MORE_FIELDS = tuple(f.name for f in fields(_More) if f.init)
_ORIGIN = _MORE_FIELDS.index("origin")
_PLAIN_VALUES = tuple(getattr(_PLAIN, name) for name in _MORE_FIELDS)


@dataclass(frozen=True, slots=True, eq=False)
class Res(_Noted):
    """One resource in a build. Immutable: transformations return new records. Its tree
    may rest packed between builds (``model.trees``: a daemon's cache). The fields
    ``prev`` to ``ref_vars`` are kept in one shared ``_More`` (a daemon keeps every step's
    record: a few slots each, not a dozen)."""

    obj: dict[str, Any]
    path: str  # file it came from (the kustomization for generated objects)
    line: int
    prev: _InMore[tuple[ResId, ...]] = ()  # ids it had before renames, oldest first
    needs_hash: _InMore[bool] = False  # generated; gets the content hash suffix at the end
    behavior: _InMore[str] = "create"  # generators: create | merge | replace
    prefixes: _InMore[tuple[str, ...]] = ()
    suffixes: _InMore[tuple[str, ...]] = ()
    # Where it came from, for buildMetadata's originAnnotations: (file, "") for a file's
    # object; (kustomization file, generator kind) for a generated one ("" until set).
    origin: _InMore[tuple[str, ...]] = ("", "")  # (file, generator kind[, the builtin config's name])
    # A Secret read from SOPS files without keys: its encrypted values are stand-ins
    # derived from their ciphertext (``manifests.sops.values.stand_in``), not values.
    sealed: _InMore[bool] = False
    # A generated Secret with SOPS-encrypted sources: a digest of what they hold as
    # committed (ciphertext) that its name hash is taken from, never a digest of a value.
    seal: _InMore[str] = ""
    ref_vars: _InMore[tuple[str, ...]] = ()  # the kustomize vars this object provides (``vars``)
    # The fields a patch, a replacement or a generator's reference set, each with where
    # that was written: (field path, file, line; 0 when the line is the field's own in a
    # patch file), in the order they were set (``changed_paths``).
    set_by: tuple[SetBy, ...] = field(default=(), compare=False)
    more: _More = field(init=False, compare=False)
    cur: ResId = field(init=False, compare=False)
    key: tuple[str, str, str, str, str] = field(init=False, compare=False)  # id_key(cur)

    derivable: ClassVar[bool] = (
        True  # a step's output rests derived (``Shelf.noting``): built again, not packed
    )

    def __post_init__(self, *more: Any) -> None:
        object.__setattr__(self, "more", _more(more, self.path))
        cur = res_id(self.obj)
        object.__setattr__(self, "cur", cur)
        object.__setattr__(self, "key", id_key(cur))

    @property
    def all_keys(self) -> tuple[tuple[str, str, str, str, str], ...]:
        """``id_key`` of each of its ids, oldest first (``known_as`` asks without a tuple)."""
        return (*self.more.prev_keys, self.key)

    def known_as(self, key: tuple[str, str, str, str, str]) -> bool:
        """Whether ``key`` is the ``id_key`` of its id or of one it had before renames."""
        return key == self.key or key in self.more.prev_keys

    @property
    def org(self) -> ResId:
        return self.prev[0] if self.prev else self.cur

    def all_ids(self) -> tuple[ResId, ...]:
        return (*self.prev, self.cur)

    def labels(self) -> dict[str, Any]:
        meta = self.obj.get("metadata")
        value = meta.get("labels") if isinstance(meta, dict) else None
        return value if isinstance(value, dict) else {}

    def annotations(self) -> dict[str, Any]:
        meta = self.obj.get("metadata")
        value = meta.get("annotations") if isinstance(meta, dict) else None
        return value if isinstance(value, dict) else {}

    def annotated(self, name: str, value: str) -> bool:
        """Whether annotation ``name`` is ``value``; the answer for ``LOCAL_CONFIG`` noted
        on the record (a build asks it of every record at its end)."""
        if name != LOCAL_CONFIG:
            return self.annotations().get(name) == value
        try:
            found: str | None = self._local
        except AttributeError:
            got = self.annotations().get(name)
            found = got if isinstance(got, str) else None
            object.__setattr__(self, "_local", found)
        return found == value

    def __repr__(self) -> str:
        """A Secret's record names its keys, never its values."""
        if self.cur.kind == "Secret":
            return f"Res(Secret {self.cur.name!r} {secret_keys(self.obj)}; values redacted, at {self.path}:{self.line})"
        return f"Res(obj={self.obj!r}, path={self.path!r}, line={self.line!r})"

    def with_obj(self, obj: dict[str, Any], **changes: Any) -> Res:
        """A new record with ``obj``; records the old id when name/namespace/kind changed."""
        old = self.cur
        new_id = res_id(obj)
        prev = self.prev
        if (old.name, old.namespace, old.kind, old.group, old.version) != (
            new_id.name,
            new_id.namespace,
            new_id.kind,
            new_id.group,
            new_id.version,
        ):
            prev = (*prev, old)
            return replace(self, obj=obj, prev=prev, **changes)
        return self.but(obj=obj, **changes)

    def but(self, **changes: Any) -> Res:
        """``replace`` for changes that keep the object's ids (its kind, name, namespace and
        earlier ids): the new record shares this one's id records (a build keeps every
        step's record, so the ids are held once per object, not once per step)."""
        if unknown := changes.keys() - _RES_FIELDS:
            raise TypeError(f"Res has no field {sorted(unknown)[0]!r}")
        if "prev" in changes:
            raise TypeError("Res.but keeps the ids: use with_obj or replace")
        if "path" in changes and "origin" not in changes:
            changes["origin"] = self.origin  # not the new path's
        more = {name: changes.pop(name) for name in _MORE_FIELDS if name in changes}
        new = object.__new__(Res)  # nothing of the tree's noted or packed: it may change
        for name in _RES_SLOTS:  # its fields, ids included, not computed again
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        if more:
            if "origin" not in more:
                more["origin"] = self.origin
            values = tuple(more.get(name, getattr(self.more, name)) for name in _MORE_FIELDS)
            object.__setattr__(new, "more", _more(values, new.path))
        return new


def _more(values: tuple[Any, ...], path: str) -> _More:
    """The ``_More`` of ``values`` (``_MORE_FIELDS``' order, ``origin`` as given) for a
    record of ``path``: ``_PLAIN`` when they are the defaults."""
    if values[_ORIGIN] == (path, ""):
        values = (*values[:_ORIGIN], None, *values[_ORIGIN + 1 :])
    return _PLAIN if values == _PLAIN_VALUES else _More(*values)


def _origin(r: Res) -> tuple[str, ...]:
    origin = r.more.origin
    return (r.path, "") if origin is None else origin


def _read_more(cls: type[Res]) -> None:
    """Each field kept in ``_More`` read through the record (over the InitVar's default)."""
    for name in _MORE_FIELDS:
        get = _origin if name == "origin" else attrgetter(f"more.{name}")  # origin None: its path's
        setattr(cls, name, property(get, doc=f"``{name}`` of the record's ``_More``"))


lazy_tree(Res)
_read_more(Res)
_RES_SLOTS: tuple[str, ...] = Res.__slots__
_RES_FIELDS = frozenset(f.name for f in fields(Res) if f.init) | frozenset(_MORE_FIELDS)


# -- a kustomization's resource entries ----------------------------------------------------------

Entry = tuple[str, int, str, str]  # (field, index in it, the entry as written, the path it names)


@dataclass(frozen=True, slots=True)
class Entries:
    """A kustomization's resource entries as a cache keeps them (one per VM file of a
    fleet's base): the fields' runs, each entry's path, and its text only where it is not
    the path below the kustomization's directory (the usual case); iterated, the entries."""

    directory: str
    runs: tuple[tuple[str, int], ...]
    paths: tuple[str, ...]
    texts: tuple[str | None, ...] | None

    @staticmethod
    def of(kust_path: str, items: list[Entry]) -> Entries | list[Entry]:
        """``items`` (each field's entries in order, indexed from 0) held compact, else as given."""
        directory = kust_path.rpartition("/")[0]
        runs: list[tuple[str, int]] = []
        for item in items:
            if type(item) is not tuple or len(item) != 4:
                return items
            name, i = item[0], item[1]
            if runs and runs[-1][0] == name and runs[-1][1] == i:
                runs[-1] = (name, i + 1)
            elif i == 0 and all(name != seen for seen, _n in runs):
                runs.append((name, 1))
            else:
                return items
        texts = tuple(None if path == _below(directory, entry) else entry for _n, _i, entry, path in items)
        kept = texts if any(t is not None for t in texts) else None
        return Entries(directory, tuple(runs), tuple(path for *_rest, path in items), kept)

    def __iter__(self) -> Iterator[Entry]:
        paths, texts, cut = self.paths, self.texts, len(self.directory) + 1 if self.directory else 0
        k = 0
        for name, count in self.runs:
            for i in range(count):
                path = paths[k]
                text = texts[k] if texts is not None else None
                yield (name, i, path[cut:] if text is None else text, path)
                k += 1


def _below(directory: str, entry: str) -> str:
    return f"{directory}/{entry}" if directory else entry


# -- field specs -----------------------------------------------------------------------------


class FieldSpec(NamedTuple):
    group: str
    version: str
    kind: str
    path: tuple[str, ...]
    create: bool
    keep: int = 0  # the leading segments a create never makes (up to a list, ``a/b[]/c``)

    def applies_to(self, rid: ResId) -> bool:
        return (
            (not self.group or rid.group == self.group)
            and (not self.version or rid.version == self.version)
            and (not self.kind or rid.kind == self.kind)
        )


def split_path(path: str) -> tuple[str, ...]:
    """``a/b\\/c/d[]`` -> ("a", "b/c", "d"); ``[]`` marks a list and is implicit anyway."""
    parts: list[str] = []
    cur = ""
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == "\\" and i + 1 < len(path) and path[i + 1] == "/":
            cur += "/"
            i += 2
            continue
        if ch == "/":
            parts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur)
    return tuple(p[:-2] if p.endswith("[]") else p for p in parts if p)


def fieldspec(spec: dict[str, Any]) -> FieldSpec:
    def text(key: str) -> str:
        v = spec.get(key)
        return "" if v is None else str(v)

    if not text("path"):
        raise OverlayError("field spec without a path")
    return FieldSpec(
        text("group"),
        text("version"),
        text("kind"),
        split_path(text("path")),
        bool(spec.get("create")),
        list_depth(text("path")),
    )


def list_depth(path: str) -> int:
    """How many leading segments of ``path`` reach its last list (``[]``): kustomize
    creates a missing field below a list's elements, never the list."""
    segments = [s for s in re.split(r"(?<!\\)/", path) if s]
    last = max((i for i, s in enumerate(segments) if s.endswith("[]")), default=-1)
    return last + 1


def update_path(
    node: Any, path: tuple[str, ...], create: bool, fn: Callable[[Any], Any], i: int = 0, keep: int = 0
) -> Any:
    """Copy-on-write: ``fn(old_or_MISSING)`` at ``path``; lists on the way are entered.

    ``fn`` returns the new value, or ``MISSING`` to leave the field as it is. Returns
    ``node`` itself when nothing changed.
    """
    if isinstance(node, list):
        out = None
        for idx, item in enumerate(node):
            new = update_path(item, path, create, fn, i, keep)
            if new is not item:
                if out is None:
                    out = list(node)
                out[idx] = new
        return node if out is None else out
    if i == len(path):
        new = fn(node)
        return node if new is MISSING else new
    if not isinstance(node, dict):
        return node
    key = path[i]
    if key in node and node[key] is not None:
        child = node[key]
        new = update_path(child, path, create, fn, i + 1, keep)
        if new is child:
            return node
        return {**node, key: new}
    if not create or i < keep:
        return node
    if i + 1 == len(path):
        new = fn(MISSING)
    else:
        new = update_path({}, path, create, fn, i + 1, keep)
        if new == {}:
            return node
    if new is MISSING:
        return node
    return {**node, key: new}


def values_at(node: Any, path: tuple[str, ...], i: int = 0) -> Iterable[Any]:
    if isinstance(node, list):
        for item in node:
            yield from values_at(item, path, i)
        return
    if i == len(path):
        yield node
        return
    if isinstance(node, dict) and key_in(node, path[i]):
        yield from values_at(node[path[i]], path, i + 1)


def key_in(node: dict[str, Any], key: str) -> bool:
    return key in node and node[key] is not None
