"""The kustomize build: accumulate resources, run generators and transformers per level.

Input: a ``FileView`` of a repository snapshot, an entry directory, an ``OverlayCache``.
Output: ``Res`` records in kustomize's output order. Pure: every byte comes through the
file view; nothing outside the view's root is reachable (``..`` is resolved lexically and
refused above the root; the view refuses symlinks that leave it). No remote bases, no
plugins, no exec.

Order of work follows kustomize 5 (``KustTarget.accumulateTarget``): resources, then
configurations, generators, components, then transformers in this order:
patchesStrategicMerge, patches, namespace, namePrefix/nameSuffix, labels and
commonLabels, commonAnnotations, patchesJson6902, replacements. At the top level only:
name hash suffixes, name-reference fixing, sorting (``output``, ``namerefs``).

Kustomize's own rules are kept where a VM repository can meet them: plain files must sit
in or below the kustomization that names them (bases may be anywhere in the root);
kustomization files are read strictly (unknown fields, and YAML 1.1 booleans or numbers
in string fields, are errors); annotation values are strings (their source text);
custom kinds get no merge keys unless an ``openapi`` schema gives them; unsupported
fields (plugins, helm, vars, images, replicas, crds) are refused, never ignored.

Every per-resource step is memoised in the cache by (step fingerprint, input record);
records are immutable and steps share unchanged subtrees, so a rebuild after a one-file
commit only redoes the work for the objects that changed.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.context import SERIAL
from reconciler.errors import ManifestError, OverlayError
from reconciler.manifests import locate, parse_yaml11, parse_yaml_value
from reconciler.manifests.paths import join_path
from reconciler.manifests.sops.files import file_format
from reconciler.overlays.config import (
    builtin_schema_doc,
    config_from_file,
)
from reconciler.overlays.generators import generate, merge_options
from reconciler.overlays.kustomization import KUSTOMIZATION_FILES, Acc, Kust
from reconciler.overlays.loader import REMOTE, Loader, within
from reconciler.overlays.merge import CLEAR, MergeError, Schema, strategic_merge
from reconciler.overlays.metadata import build_metadata, with_origin
from reconciler.overlays.namerefs import fix_name_references
from reconciler.overlays.output import add_hash, sort_resources
from reconciler.overlays.resource import (
    FieldSpec,
    Res,
    ResId,
    changed_paths,
    id_key,
    key_in,
    propagate,
    res_id,
    set_map_entries,
    update_path,
    values_at,
)
from reconciler.overlays.selector import Selector
from reconciler.overlays.transformers import TRANSFORMERS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from reconciler.context import Mapper
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import FieldPath, FileView
    from reconciler.overlays.cache import OverlayCache

# Keys each nested structure may hold (kustomize reads kustomizations strictly).
# A dict maps a key to the shape of its value; "[]" marks a list of that shape.


# Fields Go decodes into strings: a YAML 1.1 boolean or a number there is an error in
# kustomize ("cannot unmarshal bool into ... of type string"), so it is here too.


_DELETED: Any = object()


# -- the kustomization file -------------------------------------------------------------------


class Builder(Loader):
    """One build: accumulation per kustomization level, generators, the transformers of
    ``transformers.TRANSFORMERS``, and the top level's hashes, references and order."""

    def __init__(
        self, files: FileView, cache: OverlayCache, keys: Keys | None = None, mapper: Mapper = SERIAL
    ) -> None:
        super().__init__(files, cache, keys, mapper)
        self.schema: Schema | None = None  # a kustomization's openapi schema, once one is read
        self._builtin: Schema | None = None  # the built-in kinds' merge keys, made on first use
        self.schema_key: str = ""
        self.stack: list[str] = []

    def fingerprint(self, kust: Kust, *extra: Any) -> tuple[Any, ...] | None:
        """A step's memo key: every file its kustomization read, the schema, the step's own data.

        Reduced to one digest string (strings cache their hash, tuples do not).
        """
        if any(blob is None for _p, blob in kust.reads):
            return None
        text = repr((tuple(kust.reads), self.schema_key, extra))
        return (hashlib.sha256(text.encode()).hexdigest(),)

    def recorded(
        self,
        fn: Callable[[Res], Res | None],
        file: str,
        line: int,
        sets: tuple[tuple[tuple[str | int, ...], int], ...] = (),
    ) -> Callable[[Res], Res | None]:
        """``fn`` (a patch, a replacement) with the fields it sets recorded on the record it
        returns as set in ``file`` (``Res.set_by``: provenance names them): the fields it
        names (``sets``: path and line, 0 for ``line``), even where the value stays the
        same, and any other it changes, at ``line``."""

        def with_set_by(r: Res) -> Res | None:
            new = fn(r)
            if new is None:
                return new
            named = {p: at or line for p, at in sets}
            changed = changed_paths(r.obj, new.obj) if new is not r else []
            paths = list(dict.fromkeys([*named, *changed]))
            if not paths:
                return new
            return replace(new, set_by=(*new.set_by, *((p, file, named.get(p, line)) for p in paths)))

        return with_set_by

    @staticmethod
    def lines_in(
        text: str | bytes,
        first: int,
        paths: Sequence[tuple[str | int, ...]],
        lookup: Sequence[FieldPath] = (),
    ) -> tuple[tuple[tuple[str | int, ...], int], ...]:
        """Each of ``paths`` with the line where ``text`` (starting at line ``first`` of its
        file: an inline patch's block, or 1 for a file) writes it; ``lookup[i]``: where to
        find ``paths[i]`` in ``text`` when that differs (a JSON 6902 operation)."""
        data = text.encode() if isinstance(text, str) else text
        out = []
        for i, p in enumerate(paths):
            at = lookup[i] if i < len(lookup) else p
            try:
                line = locate(data, 1, at)[0]
            except (ValueError, KeyError, ManifestError):
                line = 1
            out.append((p, first + line - 1))
        return tuple(out)

    def each(
        self, key: tuple[Any, ...] | None, items: Iterable[Res], fn: Callable[[Res], Res | None]
    ) -> list[Res]:
        if key is None:
            return [new for new in map(fn, items) if new is not None]
        return self.cache.memo_each(key, items, fn, _DELETED)

    # -- accumulation ----------------------------------------------------------------------------

    def build(self, entry: str) -> list[Res]:
        kust = self.load_kust(entry)
        openapi = kust.map_field("openapi")
        if openapi:
            self.set_schema(kust, openapi)
        acc = self.accumulate(kust, Acc())
        top = self.fingerprint(kust, acc.config)
        hashed = iter(self.each(top and (*top, "hash"), [r for r in acc.res if r.needs_hash], add_hash))
        out = [next(hashed) if r.needs_hash else r for r in acc.res]  # only generated ones hash names
        out = fix_name_references(out, acc.config)
        if "originAnnotations" in build_metadata(kust):
            out = [with_origin(kust, r) for r in out]
        return sort_resources(kust, out)

    def accumulate(self, kust: Kust, acc: Acc, component: bool = False) -> Acc:
        if kust.dir in self.stack:
            raise kust.error(f"cycle in kustomizations: {' -> '.join([*self.stack, kust.dir])}")
        self.stack.append(kust.dir)
        try:
            return self._accumulate(kust, acc)
        finally:
            self.stack.pop()

    def _accumulate(self, kust: Kust, acc: Acc) -> Acc:
        index = {r.key: r for r in acc.res}
        entries = self.resource_entries(kust)
        parsed = self.parsed_resources(kust, entries)
        for name, i, entry, path in entries:
            self.add_resource(kust, name, i, entry, path, acc, index, parsed.get(path))
        for i, entry in enumerate(kust.list_field("configurations")):
            path, data = self.read_kust_file(kust, str(entry), ("configurations", i))
            for doc in parse_yaml_value(data, path):
                try:
                    acc.config = acc.config.merge(config_from_file(doc))
                except OverlayError as err:
                    raise OverlayError(err.message, path, 1, 1) from err
        self.run_generators(kust, acc)
        for i, entry in enumerate(kust.list_field("components")):
            sub = self.sub_kust(kust, "components", i, str(entry))
            if sub.doc.get("kind") != "Component":
                raise kust.error(f"expected kind 'Component' for path '{sub.dir}'", "components", i)
            self.accumulate(sub, acc, component=True)
        self.run_transformers(kust, acc)
        return acc

    def sub_kust(self, kust: Kust, field_name: str, i: int, entry: str) -> Kust:
        if REMOTE.search(entry):
            raise kust.error(f"remote resource {entry!r} is not supported", field_name, i)
        try:
            path = self.join(kust.dir, entry)
        except OverlayError as err:
            raise kust.error(str(err), field_name, i) from err
        if not self.files.is_dir(path):
            raise kust.error(f"accumulating resources from '{entry}': directory not found", field_name, i)
        if self.find_kustomization(path) is None:
            raise kust.error(
                f"accumulating resources from '{entry}': no kustomization file in '{path}'", field_name, i
            )
        sub = self.load_kust(path)
        openapi = sub.map_field("openapi")
        if openapi and self.schema is None:
            self.set_schema(sub, openapi)
        return sub

    def resource_entries(self, kust: Kust) -> list[tuple[str, int, str, str]]:
        """(field, index, entry, path) of every resource; checked once per kustomization content."""
        cache_key = None if kust.blob is None else f"entries:{kust.blob}"
        hit = self.cache.docs_get(kust.path, cache_key)
        if hit is not None:
            return list(hit)
        out = []
        for name in ("resources", "bases"):
            for i, raw in enumerate(kust.list_field(name)):
                entry = str(raw)
                if REMOTE.search(entry):
                    raise kust.error(f"remote resource {entry!r} is not supported", name, i)
                try:
                    path = self.join(kust.dir, entry)
                except OverlayError as err:
                    raise kust.error(
                        f"accumulating resources from '{entry}': {err.message}", name, i
                    ) from err
                out.append((name, i, entry, path))
        self.cache.docs_put(kust.path, cache_key, out)
        return out

    def parsed_resources(
        self, kust: Kust, entries: list[tuple[str, int, str, str]]
    ) -> dict[str, tuple[Res, ...]]:
        """The objects of each resource file among ``entries``, by path: from the cache,
        and those not parsed yet parsed together (``parse_files``); a file missing here
        is left to ``add_resource``, which meets its problem in order."""
        found: dict[str, tuple[Res, ...]] = {}
        todo = []
        for _name, _i, _entry, path in entries:
            if not within(path, kust.dir):
                continue
            blob = self.blob(path)
            hit = self.cache.docs_get(path, blob)
            if hit is not None:
                found[path] = hit
            elif blob is not None:
                todo.append(path)
        if len(todo) > 1:
            found.update(self.parse_files([p for p in todo if not self.files.is_dir(p)]))
        return found

    def add_resource(
        self,
        kust: Kust,
        field_name: str,
        i: int,
        entry: str,
        path: str,
        acc: Acc,
        index: dict[Any, Res],
        parsed: tuple[Res, ...] | None = None,
    ) -> None:
        """``parsed``: the file's objects when ``parsed_resources`` found them."""
        if parsed is not None:
            items: Iterable[Res] = parsed
        elif self.files.is_dir(path):
            sub = self.sub_kust(kust, field_name, i, entry)
            if sub.doc.get("kind") == "Component":
                raise kust.error(f"expected kind != 'Component' for path '{sub.dir}'", field_name, i)
            sub_acc = self.accumulate(sub, Acc())
            acc.config = acc.config.merge(sub_acc.config)
            items = sub_acc.res
        elif self.files.exists(path):
            if not within(path, kust.dir):
                raise kust.error(
                    f"accumulating resources from '{entry}': security; file '{path}' is not in or below "
                    f"'{kust.dir or '.'}'",
                    field_name,
                    i,
                )
            items = self.parse_file(path)
        else:
            raise kust.error(
                f"accumulating resources from '{entry}': file or directory not found", field_name, i
            )
        for r in items:
            key = r.key
            if key in index:
                raise kust.error(
                    f"accumulating resources from '{entry}': may not add resource with an already registered "
                    f"id: {r.cur} (from {r.path}:{r.line} and {index[key].path}:{index[key].line})",
                    field_name,
                    i,
                )
            index[key] = r
            acc.res.append(r)

    # -- generators ------------------------------------------------------------------------------

    def run_generators(self, kust: Kust, acc: Acc) -> None:
        global_options = kust.map_field("generatorOptions")
        for field_name, kind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
            for i, args in enumerate(kust.list_field(field_name)):
                if not isinstance(args, dict):
                    raise kust.error(f"{field_name} entries must be mappings", field_name, i)
                options = merge_options(args.get("options"), global_options)
                committed: list[bytes] = []  # the sources as committed: a name hash's basis
                encrypted: list[str] = []

                def reader(
                    rel: str,
                    i: int = i,
                    field_name: str = field_name,
                    committed: list[bytes] = committed,
                    encrypted: list[str] = encrypted,
                ) -> bytes:
                    path, data = self.read_kust_file(kust, rel, (field_name, i))
                    committed.append(data)
                    if file_format(data, rel) is None:
                        return data
                    if field_name != "secretGenerator":
                        raise kust.error(
                            f"{rel} is encrypted with SOPS: only a secretGenerator decrypts a file "
                            "(a ConfigMap's values are shown in plans and domain XML)",
                            field_name,
                            i,
                        )
                    encrypted.append(path)
                    opened = self.open_file(data, path, posixpath.basename(rel))
                    return data if opened is None else opened

                try:
                    obj, needs_hash = generate(kind, args, options, reader)
                except OverlayError as err:
                    if err.path:
                        raise
                    raise kust.error(err.message, field_name, i) from err
                except UnicodeDecodeError as err:
                    raise kust.error("env file is not valid UTF-8", field_name, i) from err
                line = kust.pos(field_name, i)[0]
                behavior = str(args.get("behavior") or "create")
                if behavior not in ("create", "merge", "replace"):
                    raise kust.error(f"unknown generator behavior {behavior!r}", field_name, i, "behavior")
                seal = ""
                if encrypted:
                    literals = [str(lit).encode() for lit in args.get("literals") or ()]
                    seal = hashlib.sha256(b"\0".join([*committed, *literals])).hexdigest()
                new = Res(
                    obj,
                    kust.path,
                    line,
                    needs_hash=needs_hash,
                    behavior=behavior,
                    origin=(kust.path, f"{kind}Generator"),
                    sealed=bool(encrypted) and self.keys is not None and self.keys.sealed,
                    seal=seal,
                )
                self.absorb_generated(kust, field_name, i, acc, new)

    def absorb_generated(self, kust: Kust, field_name: str, i: int, acc: Acc, new: Res) -> None:
        key = id_key(new.cur)
        matches = [idx for idx, r in enumerate(acc.res) if key in r.all_keys]
        if not matches:
            if new.behavior in ("merge", "replace"):
                raise kust.error(f"id {new.cur} does not exist; cannot merge or replace", field_name, i)
            acc.res.append(new)
            return
        if len(matches) > 1:
            raise kust.error(f"found multiple objects that could accept merge of {new.cur}", field_name, i)
        idx = matches[0]
        old = acc.res[idx]
        if new.behavior == "create":
            raise kust.error(
                f"may not add resource with an already registered id: {new.cur}; behavior must be merge or replace",
                field_name,
                i,
            )
        old_meta = old.obj.get("metadata") or {}
        new_meta = dict(new.obj.get("metadata") or {})
        for key_name in ("labels", "annotations"):
            merged = {**(old_meta.get(key_name) or {}), **(new_meta.get(key_name) or {})}
            if merged:
                new_meta[key_name] = merged
        new_meta["name"] = old_meta.get("name")
        if old_meta.get("namespace"):
            new_meta["namespace"] = old_meta["namespace"]
        else:
            new_meta.pop("namespace", None)
        obj = {**new.obj, "metadata": new_meta}
        if new.behavior == "merge":
            for data_key in ("data", "binaryData"):
                merged = {**(old.obj.get(data_key) or {}), **(new.obj.get(data_key) or {})}
                if merged:
                    obj[data_key] = merged
        acc.res[idx] = replace(
            new,
            obj=obj,
            prev=old.prev,
            prefixes=old.prefixes,
            suffixes=old.suffixes,
            behavior="create",
            needs_hash=old.needs_hash and new.needs_hash,
            origin=old.origin,
        )

    # -- transformers ----------------------------------------------------------------------------

    def run_transformers(self, kust: Kust, acc: Acc) -> None:
        for transformer in TRANSFORMERS:
            transformer.run(self, kust, acc)

    @property
    def active_schema(self) -> Schema:
        if self.schema is not None:
            return self.schema
        if self._builtin is None:
            self._builtin = Schema(builtin_schema_doc())
        return self._builtin

    def type_node(self, rid: ResId) -> Any:
        return self.active_schema.for_type(rid.group, rid.version, rid.kind)

    def apply_smp(
        self,
        r: Res,
        patch: dict[str, Any],
        allow_name: bool,
        allow_kind: bool,
        kust: Kust,
        where: tuple[str | int, ...],
    ) -> Res | None:
        cur = r.cur
        try:
            result = strategic_merge(r.obj, patch, self.active_schema, self.type_node(cur))
        except MergeError as err:
            raise kust.error(f"cannot patch {cur} ({r.path}:{r.line}): {err}", *where) from err
        if result is CLEAR or not result:
            return None
        if not isinstance(result, dict):
            return None
        if result is r.obj:
            return r
        meta = result.get("metadata")
        meta = dict(meta) if isinstance(meta, dict) else {}
        if not allow_name:
            meta["name"] = cur.name
        if cur.namespace:
            meta["namespace"] = cur.namespace
        else:
            meta.pop("namespace", None)
        result = {**result, "metadata": meta}
        if not allow_kind:
            result["kind"] = cur.kind
        return r.with_obj(result)

    def load_patch_docs(
        self,
        kust: Kust,
        text: str,
        where: tuple[str | int, ...],
        text_fields: tuple[str, ...] = (),
        yaml11: bool = False,
    ) -> list[Any]:
        """An inline patch. JSON 6902 operations are read with YAML 1.1 booleans, as
        kustomize reads them (``value: y`` is true); strategic merge patches are not."""
        try:
            if yaml11:
                return parse_yaml11(text.encode(), kust.path)
            return parse_yaml_value(text, kust.path, text_fields)
        except ManifestError as err:
            line, _col = kust.pos(*where)
            raise OverlayError(
                f"invalid patch: {err.message}", kust.path, line + max(err.line - 1, 0), 1
            ) from err

    def smp_targets_by_id(
        self, kust: Kust, acc: Acc, patch: dict[str, Any], where: tuple[str | int, ...]
    ) -> list[int]:
        pid = res_id(patch)
        want = id_key(pid)
        hits = [i for i, r in enumerate(acc.res) if want in r.all_keys]
        if not hits:
            raise kust.error(f'no resource matches strategic merge patch "{pid}"', *where)
        return hits

    def decrypted_patch(
        self,
        kust: Kust,
        acc: Acc,
        hits: list[int],
        where: tuple[str | int, ...],
        fn: Callable[[Res], Res | None],
    ) -> Callable[[Res], Res | None]:
        """``fn`` for a patch read from a SOPS-encrypted file: it may change Secrets only
        (nothing else keeps its values out of words), which read without keys are sealed."""
        for idx in hits:
            r = acc.res[idx]
            if r.cur.kind != "Secret":
                raise kust.error(
                    f"a SOPS-encrypted patch may change Secrets only, not {r.cur} ({r.path}:{r.line}): "
                    "its decrypted values would show in plans, diffs and domain XML",
                    *where,
                )
        if self.keys is None or not self.keys.sealed:
            return fn

        def sealed(r: Res) -> Res | None:
            out = fn(r)
            return None if out is None else replace(out, sealed=True)

        return sealed

    def apply_to(
        self, acc: Acc, indexes: list[int], key: tuple[Any, ...] | None, fn: Callable[[Res], Res | None]
    ) -> None:
        chosen = set(indexes)
        out: list[Res] = []
        for idx, r in enumerate(acc.res):
            if idx in chosen:
                out.extend(self.each(key, [r], fn))
            else:
                out.append(r)
        acc.res = out

    def select(self, selector: Selector, items: list[Res]) -> list[int]:
        """Indexes of the records ``selector`` matches (memoised per record)."""
        key = ("select", repr(selector.key))
        chosen = {
            id(r)
            for r in self.cache.memo_each(key, items, lambda r: r if selector.matches(r) else None, _DELETED)
        }
        return [idx for idx, r in enumerate(items) if id(r) in chosen]

    def selector(self, kust: Kust, spec: Any, where: tuple[str | int, ...]) -> Selector:
        if not isinstance(spec, dict):
            raise kust.error("target must be a mapping", *where)
        try:
            return Selector(spec)
        except OverlayError as err:
            raise kust.error(err.message, *where) from err

    def apply_entries(
        self, kust: Kust, acc: Acc, tag: Any, specs: tuple[FieldSpec, ...], entries: dict[str, str]
    ) -> None:
        if not entries:
            return

        def fn(r: Res) -> Res | None:
            cur = r.cur
            obj = r.obj
            rewrites: dict[object, Any] = {}
            setter = set_map_entries(entries, rewrites)  # one node per key, per resource
            for fs in specs:
                if fs.applies_to(cur):
                    obj = update_path(obj, fs.path, fs.create, setter)
            obj = propagate(obj, rewrites)
            return r if obj is r.obj else r.with_obj(obj)

        acc.res = self.each(self.fingerprint(kust, tag, specs), acc.res, fn)

    # -- top level -------------------------------------------------------------------------------

    def set_schema(self, kust: Kust, openapi: dict[str, Any]) -> None:
        if "path" not in openapi:
            return  # a named built-in Kubernetes version: our built-in tables stand for it
        path, data = self.read_kust_file(kust, str(openapi["path"]), ("openapi", "path"))
        try:
            doc = json.loads(data) if path.endswith(".json") else (parse_yaml_value(data, path) or [{}])[0]
        except ValueError as err:
            raise kust.error(f"openapi schema {path} is not valid JSON: {err}", "openapi", "path") from err
        except RecursionError as err:
            raise kust.error(f"openapi schema {path} is nested too deeply", "openapi", "path") from err
        if not isinstance(doc, dict):
            raise kust.error(f"openapi schema {path} must hold a mapping", "openapi", "path")
        self.schema = Schema(doc)
        self.schema_key = self.schema.fingerprint


__all__ = ["KUSTOMIZATION_FILES", "Builder", "join_path", "key_in", "values_at"]
