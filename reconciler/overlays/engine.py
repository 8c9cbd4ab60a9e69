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
name hash suffixes, name-reference fixing, sorting.

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

import functools
import hashlib
import json
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import jsonpatch

from reconciler.errors import ManifestError, OverlayError
from reconciler.manifests import ScalarText, clone, locate, parse_objects, parse_yaml11, parse_yaml_value
from reconciler.model import FileView
from reconciler.overlays.cache import OverlayCache
from reconciler.overlays.config import (
    METADATA_LABELS,
    TransformerConfig,
    builtin_schema_doc,
    config_from_file,
)
from reconciler.overlays.generators import content_hash, generate, merge_options
from reconciler.overlays.merge import CLEAR, MergeError, Schema, strategic_merge
from reconciler.overlays.resource import (
    MISSING,
    FieldSpec,
    Res,
    ResId,
    Selector,
    detach,
    effective_ns,
    id_key,
    is_cluster_scoped,
    key_in,
    propagate,
    res_id,
    set_map_entries,
    split_path,
    update_path,
    values_at,
)

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_KNOWN_FIELDS = {
    "apiVersion",
    "kind",
    "metadata",
    "resources",
    "bases",
    "components",
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
    "replacements",
    "configurations",
    "openapi",
    "sortOptions",
    "buildMetadata",
}
_UNSUPPORTED_FIELDS = {
    "generators": "generator plugins are not supported (no plugins, no exec)",
    "transformers": "transformer plugins are not supported (no plugins, no exec)",
    "validators": "validator plugins are not supported (no plugins, no exec)",
    "helmCharts": "helm charts are not supported",
    "helmGlobals": "helm charts are not supported",
    "helmChartInflationGenerator": "helm charts are not supported",
    "vars": "vars are not supported (use replacements)",
    "crds": "crds are not supported (use configurations or openapi)",
    "images": "images are not supported",
    "replicas": "replicas are not supported",
}
_SELECTOR = {"group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector"}
_GEN_OPTIONS = {"labels": None, "annotations": None, "disableNameSuffixHash": None, "immutable": None}
_GENERATOR = {
    "name": None,
    "namespace": None,
    "behavior": None,
    "literals": None,
    "files": None,
    "envs": None,
    "env": None,
    "options": _GEN_OPTIONS,
}
# Keys each nested structure may hold (kustomize reads kustomizations strictly).
# A dict maps a key to the shape of its value; "[]" marks a list of that shape.
_SHAPES: dict[str, Any] = {
    "patches": [
        "[]",
        {"path": None, "patch": None, "target": _SELECTOR, "options": {"allowNameChange", "allowKindChange"}},
    ],
    "patchesJson6902": ["[]", {"path": None, "patch": None, "target": _SELECTOR}],
    "configMapGenerator": ["[]", _GENERATOR],
    "secretGenerator": ["[]", {**_GENERATOR, "type": None}],
    "generatorOptions": _GEN_OPTIONS,
    "labels": [
        "[]",
        {
            "pairs": None,
            "includeSelectors": None,
            "includeTemplates": None,
            "fields": ["[]", {"group", "version", "kind", "path", "create"}],
        },
    ],
    "replacements": [
        "[]",
        {
            "path": None,
            "source": {
                "group": None,
                "version": None,
                "kind": None,
                "name": None,
                "namespace": None,
                "fieldPath": None,
                "options": {"delimiter", "index", "create"},
            },
            "targets": [
                "[]",
                {
                    "select": _SELECTOR,
                    "reject": ["[]", _SELECTOR],
                    "fieldPaths": None,
                    "options": {"delimiter", "index", "create"},
                },
            ],
        },
    ],
    "openapi": {"path", "version"},
    "sortOptions": {"order": None, "legacySortOptions": {"orderFirst", "orderLast"}},
}


def _check_shape(kust: Kust, value: Any, shape: Any, where: tuple[str | int, ...]) -> None:
    if shape is None or value is None:
        return
    if isinstance(shape, list):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _check_shape(kust, item, shape[1], (*where, i))
        return
    if not isinstance(value, dict):
        return
    allowed = shape if isinstance(shape, dict) else dict.fromkeys(shape)
    for key, item in value.items():
        if key not in allowed:
            raise kust.error(
                f"invalid kustomization: unknown field {key!r} in {'.'.join(map(str, where))}", *where, key
            )
        _check_shape(kust, item, allowed[key], (*where, key))


_STR, _STR_LIST, _STR_MAP = "string", "[]string", "map[string]string"
_GEN_TYPES: dict[str, Any] = {
    "name": _STR,
    "namespace": _STR,
    "behavior": _STR,
    "type": _STR,
    "literals": _STR_LIST,
    "files": _STR_LIST,
    "envs": _STR_LIST,
    "env": _STR,
    "options": {"labels": _STR_MAP, "annotations": _STR_MAP},
}
# Fields Go decodes into strings: a YAML 1.1 boolean or a number there is an error in
# kustomize ("cannot unmarshal bool into ... of type string"), so it is here too.
_TYPES: dict[str, Any] = {
    "namePrefix": _STR,
    "nameSuffix": _STR,
    "namespace": _STR,
    "commonLabels": _STR_MAP,
    "commonAnnotations": _STR_MAP,
    "resources": _STR_LIST,
    "bases": _STR_LIST,
    "components": _STR_LIST,
    "configurations": _STR_LIST,
    "patchesStrategicMerge": _STR_LIST,
    "labels": ["[]", {"pairs": _STR_MAP}],
    "generatorOptions": {"labels": _STR_MAP, "annotations": _STR_MAP},
    "configMapGenerator": ["[]", _GEN_TYPES],
    "secretGenerator": ["[]", _GEN_TYPES],
    "patches": ["[]", {"path": _STR, "patch": _STR, "target": dict.fromkeys(_SELECTOR, _STR)}],
    "patchesJson6902": ["[]", {"path": _STR, "patch": _STR, "target": dict.fromkeys(_SELECTOR, _STR)}],
}


def _type_error(kust: Kust, value: Any, field: str, where: tuple[str | int, ...]) -> OverlayError:
    kind = "bool" if isinstance(value, bool) else "number" if isinstance(value, (int, float)) else "object"
    return kust.error(
        f"invalid Kustomization: cannot unmarshal {kind} into field {field} of type string", *where
    )


def _check_types(kust: Kust, doc: Any, spec: Any = None, where: tuple[str | int, ...] = ()) -> None:
    spec = _TYPES if spec is None else spec
    for key, kind in spec.items():
        if not isinstance(doc, dict) or doc.get(key) is None:
            continue
        value, at = doc[key], (*where, key)
        name = ".".join(str(p) for p in at if not isinstance(p, int))
        if kind == _STR:
            if not isinstance(value, str):
                raise _type_error(kust, value, name, at)
        elif kind == _STR_LIST:
            for i, item in enumerate(value if isinstance(value, list) else ()):
                if item is not None and not isinstance(item, str):
                    raise _type_error(kust, item, name, (*at, i))
        elif kind == _STR_MAP:
            for k, item in (value if isinstance(value, dict) else {}).items():
                if item is not None and not isinstance(item, str):
                    raise _type_error(kust, item, name, (*at, k))
        elif isinstance(kind, list):
            for i, item in enumerate(value if isinstance(value, list) else ()):
                _check_types(kust, item, kind[1], (*at, i))
        elif isinstance(kind, dict):
            _check_types(kust, value, kind, at)


_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=|//")
_PREFIX_SKIP = {
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("", "Namespace"),
}
_ORDER_FIRST = (
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
)
_ORDER_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_DELETED: Any = object()
_PATCH_TEXT_FIELDS = ("annotations", "labels")
_BUILTIN_SCHEMA = Schema(builtin_schema_doc())


@functools.lru_cache(maxsize=65536)
def join_path(base: str, rel: str) -> str:
    """Join lexically; refuse absolute paths and anything above the root (memoized: a
    build joins the same few hundred paths tens of thousands of times)."""
    if rel.startswith("/"):
        raise OverlayError(f"absolute path {rel!r} is not allowed: paths are relative to the kustomization")
    joined = posixpath.normpath(posixpath.join(base, rel)) if (base or rel) else "."
    if joined == ".":
        return ""
    if joined == ".." or joined.startswith("../"):
        raise OverlayError(f"path {rel!r} leaves the repository root")
    return joined


def _within(path: str, directory: str) -> bool:
    return not directory or path == directory or path.startswith(directory + "/")


# -- the kustomization file -------------------------------------------------------------------


@dataclass
class Kust:
    dir: str
    path: str
    data: bytes
    doc: dict[str, Any]
    blob: str | None
    reads: list[tuple[str, str | None]] = field(default_factory=list)

    def pos(self, *field_path: str | int) -> tuple[int, int]:
        return locate(self.data, 1, field_path)

    def error(self, message: str, *field_path: str | int) -> OverlayError:
        line, col = self.pos(*field_path) if field_path else (0, 0)
        return OverlayError(message, self.path, line, col)

    def list_field(self, name: str) -> list[Any]:
        value = self.doc.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"{name} must be a list", name)
        return value

    def map_field(self, name: str) -> dict[str, Any]:
        value = self.doc.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(f"{name} must be a mapping", name)
        return value

    def str_field(self, name: str) -> str:
        value = self.doc.get(name)
        if value is None:
            return ""
        if isinstance(value, (dict, list)):
            raise self.error(f"{name} must be a string", name)
        return str(value)


@dataclass
class Acc:
    """Resources accumulated so far at one level, and the merged transformer config."""

    res: list[Res] = field(default_factory=list)
    config: TransformerConfig = field(default_factory=TransformerConfig)


class Builder:
    def __init__(self, files: FileView, cache: OverlayCache) -> None:
        self.files = files
        self.cache = cache
        self.schema: Schema | None = None  # a kustomization's openapi schema, once one is read
        self.schema_key: str = ""
        self.stack: list[str] = []
        self._kust_files: dict[str, str | None] = {}  # directory -> its kustomization file, per build

    # -- files ------------------------------------------------------------------------------

    def blob(self, path: str) -> str | None:
        try:
            return self.files.blob_id(path)
        except (OSError, ManifestError):
            return None

    def read(self, path: str) -> bytes:
        try:
            return self.files.read(path)
        except ManifestError:
            raise
        except (OSError, KeyError) as err:
            raise OverlayError(f"cannot read {path}: {err}") from err

    def find_kustomization(self, directory: str) -> str | None:
        if directory in self._kust_files:
            return self._kust_files[directory]
        found = [
            join_path(directory, name)
            for name in KUSTOMIZATION_FILES
            if self.files.exists(join_path(directory, name))
            and not self.files.is_dir(join_path(directory, name))
        ]
        if len(found) > 1:
            raise OverlayError(
                f"found more than one kustomization file in {directory or '.'}: {', '.join(found)}"
            )
        self._kust_files[directory] = found[0] if found else None
        return self._kust_files[directory]

    def load_kust(self, directory: str) -> Kust:
        path = self.find_kustomization(directory)
        if path is None:
            raise OverlayError(f"no kustomization file in {directory or '.'}")
        blob = self.blob(path)
        hit = self.cache.docs_get(path, None if blob is None else f"kustomization:{blob}")
        if hit is not None:
            data, docs = hit
        else:
            data = self.read(path)
            docs = parse_yaml11(data, path)
            self.cache.docs_put(path, None if blob is None else f"kustomization:{blob}", (data, docs))
        doc = docs[0] if docs else {}
        if len(docs) > 1 or not isinstance(doc, dict):
            raise OverlayError("a kustomization file holds one mapping", path, 1, 1)
        kust = Kust(directory, path, data, doc, blob)
        kust.reads.append((path, kust.blob))
        if not set(doc) - {"apiVersion", "kind"}:
            raise OverlayError(f"{posixpath.basename(path)} is empty", path, 1, 1)
        for key in doc:
            if key in _UNSUPPORTED_FIELDS:
                raise kust.error(f"{key}: {_UNSUPPORTED_FIELDS[key]}", key)
            if key not in _KNOWN_FIELDS:
                raise kust.error(f"unknown kustomization field {key!r}", key)
            _check_shape(kust, doc[key], _SHAPES.get(key), (key,))
        _check_types(kust, doc)
        return kust

    def kust_file(self, kust: Kust, rel: str, where: tuple[str | int, ...]) -> str:
        """A plain file named by ``kust``: must be in or below the kustomization's directory."""
        if _REMOTE.search(rel):
            raise kust.error(f"remote file {rel!r} is not supported", *where)
        try:
            path = join_path(kust.dir, rel)
        except OverlayError as err:
            raise kust.error(str(err), *where) from err
        if not _within(path, kust.dir):
            raise kust.error(f"security; file '{path}' is not in or below '{kust.dir or '.'}'", *where)
        if not self.files.exists(path) or self.files.is_dir(path):
            raise kust.error(f"file {rel!r} not found", *where)
        kust.reads.append((path, self.blob(path)))
        return path

    def read_kust_file(self, kust: Kust, rel: str, where: tuple[str | int, ...]) -> tuple[str, bytes]:
        path = self.kust_file(kust, rel, where)
        return path, self.read(path)

    def patch_file_docs(self, path: str, text_fields: tuple[str, ...]) -> list[Any]:
        """The documents of a patch file, parsed once per content (a component included
        many times is read once); each caller gets its own copy to merge from."""
        blob = self.blob(path)
        key = None if blob is None else f"patch:{','.join(text_fields)}:{blob}"
        hit = self.cache.docs_get(path, key)
        if hit is None:
            data = self.read(path)
            hit = parse_yaml_value(data, path, text_fields)
            if len(hit) == 1 and isinstance(hit[0], list):
                hit = parse_yaml11(data, path)
            self.cache.docs_put(path, key, hit)
        return [clone(d) for d in hit]

    def parse_file(self, path: str, blob: str | None = None) -> tuple[Res, ...]:
        blob = blob if blob is not None else self.blob(path)
        hit: tuple[Res, ...] | None = self.cache.docs_get(path, blob)
        if hit is not None:
            return hit
        docs = parse_objects(self.read(path), path)
        out: list[Res] = []
        for m in docs:
            out.extend(self.expand_list(m.obj, m.path, m.line))
        result = tuple(out)
        self.cache.docs_put(path, blob, result)
        return result

    @staticmethod
    def expand_list(obj: dict[str, Any], path: str, line: int) -> list[Res]:
        kind = str(obj.get("kind") or "")
        if (kind.endswith("List") and isinstance(obj.get("items"), list) and "metadata" not in obj) or (
            kind == "List" and isinstance(obj.get("items"), list)
        ):
            return [Res(item, path, line) for item in obj["items"] if isinstance(item, dict)]
        if not obj.get("kind"):
            raise OverlayError("missing kind in object", path, line, 1)
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            raise OverlayError("missing metadata.name in object", path, line, 1)
        return [Res(obj, path, line)]

    # -- memo ------------------------------------------------------------------------------------

    def fingerprint(self, kust: Kust, *extra: Any) -> tuple[Any, ...] | None:
        """A step's memo key: every file its kustomization read, the schema, the step's own data.

        Reduced to one digest string (strings cache their hash, tuples do not).
        """
        if any(blob is None for _p, blob in kust.reads):
            return None
        text = repr((tuple(kust.reads), self.schema_key, extra))
        return (hashlib.sha256(text.encode()).hexdigest(),)

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
        out = self.each(None if top is None else (*top, "hash"), acc.res, self.add_hash)
        out = self.fix_name_references(out, acc.config)
        out = self.each(("stringify-annotations",), out, _stringify_annotations)
        return self.sort(kust, out)

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
        for name, i, entry, path in self.resource_entries(kust):
            self.add_resource(kust, name, i, entry, path, acc, index)
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
        if _REMOTE.search(entry):
            raise kust.error(f"remote resource {entry!r} is not supported", field_name, i)
        try:
            path = join_path(kust.dir, entry)
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
                if _REMOTE.search(entry):
                    raise kust.error(f"remote resource {entry!r} is not supported", name, i)
                try:
                    path = join_path(kust.dir, entry)
                except OverlayError as err:
                    raise kust.error(
                        f"accumulating resources from '{entry}': {err.message}", name, i
                    ) from err
                out.append((name, i, entry, path))
        self.cache.docs_put(kust.path, cache_key, out)
        return out

    def add_resource(
        self, kust: Kust, field_name: str, i: int, entry: str, path: str, acc: Acc, index: dict[Any, Res]
    ) -> None:
        blob = self.blob(path)
        known = self.cache.docs_get(path, blob)
        if known is not None and _within(path, kust.dir):
            items: Iterable[Res] = known
        elif self.files.is_dir(path):
            sub = self.sub_kust(kust, field_name, i, entry)
            if sub.doc.get("kind") == "Component":
                raise kust.error(f"expected kind != 'Component' for path '{sub.dir}'", field_name, i)
            sub_acc = self.accumulate(sub, Acc())
            acc.config = acc.config.merge(sub_acc.config)
            items = sub_acc.res
        elif self.files.exists(path):
            if not _within(path, kust.dir):
                raise kust.error(
                    f"accumulating resources from '{entry}': security; file '{path}' is not in or below "
                    f"'{kust.dir or '.'}'",
                    field_name,
                    i,
                )
            items = self.parse_file(path, blob)
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

                def reader(rel: str, i: int = i, field_name: str = field_name) -> bytes:
                    return self.read_kust_file(kust, rel, (field_name, i))[1]

                try:
                    obj, needs_hash = generate(kind, args, options, reader)
                except OverlayError as err:
                    if err.path:
                        raise
                    raise kust.error(err.message, field_name, i) from err
                except UnicodeDecodeError as err:
                    raise kust.error(f"env file is not valid UTF-8: {err}", field_name, i) from err
                line = kust.pos(field_name, i)[0]
                behavior = str(args.get("behavior") or "create")
                if behavior not in ("create", "merge", "replace"):
                    raise kust.error(f"unknown generator behavior {behavior!r}", field_name, i, "behavior")
                new = Res(obj, kust.path, line, needs_hash=needs_hash, behavior=behavior)
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
        )

    # -- transformers ----------------------------------------------------------------------------

    def run_transformers(self, kust: Kust, acc: Acc) -> None:
        self.patches_strategic_merge(kust, acc)
        self.patches(kust, acc)
        self.namespace(kust, acc)
        self.prefix_suffix(kust, acc)
        self.labels(kust, acc)
        self.annotations(kust, acc)
        self.patches_json6902(kust, acc)
        self.replacements(kust, acc)

    @property
    def active_schema(self) -> Schema:
        return self.schema if self.schema is not None else _BUILTIN_SCHEMA

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

    def patches_strategic_merge(self, kust: Kust, acc: Acc) -> None:
        for i, entry in enumerate(kust.list_field("patchesStrategicMerge")):
            where: tuple[str | int, ...] = ("patchesStrategicMerge", i)
            text = str(entry)
            docs: list[Any]
            if "\n" not in text and self.files.exists(join_path(kust.dir, text)):
                path, data = self.read_kust_file(kust, text, where)
                docs = parse_yaml_value(data, path, _PATCH_TEXT_FIELDS)
            else:
                docs = self.load_patch_docs(kust, text, where, _PATCH_TEXT_FIELDS)
            for j, doc in enumerate(docs):
                if not isinstance(doc, dict):
                    raise kust.error("a strategic merge patch must be a mapping", *where)
                hits = self.smp_targets_by_id(kust, acc, doc, where)
                if len(hits) > 1:
                    raise kust.error(f"multiple resources match patch {res_id(doc)}", *where)
                self.apply_to(
                    acc,
                    hits,
                    self.fingerprint(kust, "psm", i, j),
                    partial(
                        self.apply_smp, patch=doc, allow_name=False, allow_kind=False, kust=kust, where=where
                    ),
                )

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

    def patches(self, kust: Kust, acc: Acc) -> None:
        for i, entry in enumerate(kust.list_field("patches")):
            where: tuple[str | int, ...] = ("patches", i)
            if not isinstance(entry, dict):
                raise kust.error("patches entries must be mappings", *where)
            path_rel, inline = entry.get("path"), entry.get("patch")
            if path_rel and inline:
                raise kust.error("a patch takes either path or patch, not both", *where)
            # With a target, kustomize applies the patch through a copy that takes the
            # patch's labels and annotations as strings ("null" included).
            text_fields = _PATCH_TEXT_FIELDS if entry.get("target") else ()
            if path_rel:
                path = self.kust_file(kust, str(path_rel), (*where, "path"))
                docs = self.patch_file_docs(path, text_fields)
            elif inline:
                docs = self.load_patch_docs(kust, str(inline), (*where, "patch"), text_fields)
                if len(docs) == 1 and isinstance(docs[0], list):
                    docs = self.load_patch_docs(kust, str(inline), (*where, "patch"), yaml11=True)
            else:
                raise kust.error("a patch needs path or patch", *where)
            options = entry.get("options") or {}
            allow_name = bool(options.get("allowNameChange"))
            allow_kind = bool(options.get("allowKindChange"))
            target = entry.get("target")
            selector = self.selector(kust, target, (*where, "target")) if target else None
            if len(docs) == 1 and isinstance(docs[0], list):
                if selector is None:
                    raise kust.error("a JSON 6902 patch must specify a target", *where)
                self.json6902(kust, acc, docs[0], selector, where, ("patches", i))
                continue
            for j, doc in enumerate(docs):
                if not isinstance(doc, dict):
                    raise kust.error("a patch must be a strategic merge patch or a JSON 6902 list", *where)
                key = self.fingerprint(kust, "patch", i, j, allow_name, allow_kind)
                if selector is None:
                    hits = self.smp_targets_by_id(kust, acc, doc, where)
                    if len(hits) > 1:
                        raise kust.error(f"multiple resources match patch {res_id(doc)}", *where)
                    self.apply_to(
                        acc,
                        hits,
                        key,
                        partial(
                            self.apply_smp,
                            patch=doc,
                            allow_name=allow_name,
                            allow_kind=allow_kind,
                            kust=kust,
                            where=where,
                        ),
                    )
                else:
                    hits = self.select(selector, acc.res)

                    def fn(
                        r: Res,
                        d: dict[str, Any] = doc,
                        an: bool = allow_name,
                        ak: bool = allow_kind,
                        w: tuple[str | int, ...] = where,
                    ) -> Res | None:
                        cur = r.cur
                        meta = dict(d.get("metadata") or {}) if isinstance(d.get("metadata"), dict) else {}
                        if not (an and meta.get("name")):
                            meta["name"] = cur.name
                        if cur.namespace:
                            meta["namespace"] = cur.namespace
                        else:
                            meta.pop("namespace", None)
                        p = {**d, "metadata": meta}
                        if not (ak and d.get("kind")):
                            p["kind"] = cur.kind
                            p["apiVersion"] = f"{cur.group}/{cur.version}" if cur.group else cur.version
                        return self.apply_smp(r, p, an, ak, kust, w)

                    self.apply_to(acc, hits, None if key is None else (*key, selector.key), fn)

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

    def json6902(
        self,
        kust: Kust,
        acc: Acc,
        ops: list[Any],
        selector: Selector,
        where: tuple[str | int, ...],
        key_parts: tuple[Any, ...],
    ) -> None:
        try:
            steps = [jsonpatch.JsonPatch([op]) for op in ops]
        except (jsonpatch.JsonPatchException, TypeError, KeyError, AttributeError) as err:
            raise kust.error(f"invalid JSON 6902 patch: {err}", *where) from err
        hits = self.select(selector, acc.res)

        def fn(r: Res) -> Res | None:
            doc = clone(r.obj)
            meta: Any = doc.get("metadata")
            # kustomize's resources always carry (internal) annotations while patches run,
            # so a patch may add below /metadata/annotations even when the file had none.
            added_annotations = isinstance(meta, dict) and "annotations" not in meta
            if added_annotations:
                meta["annotations"] = {}
            elif isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
                # kustomize patches a JSON copy: annotation values are typed again (0x10 -> 16)
                meta["annotations"] = {
                    k: v.typed if isinstance(v, ScalarText) else v for k, v in meta["annotations"].items()
                }
            try:
                for op, step in zip(ops, steps, strict=True):
                    if isinstance(op, dict) and op.get("op") == "replace":
                        step = _replace_as_add(doc, op, step)
                    doc = step.apply(doc, in_place=True)
            except (
                jsonpatch.JsonPatchException,
                jsonpatch.JsonPointerException,
                TypeError,
                KeyError,
                IndexError,
            ) as err:
                raise kust.error(
                    f"JSON 6902 patch failed on {r.cur} ({r.path}:{r.line}): {err}", *where
                ) from err
            if not isinstance(doc, dict):
                raise kust.error(f"JSON 6902 patch made {r.cur} something other than an object", *where)
            meta = doc.get("metadata")
            if added_annotations and isinstance(meta, dict) and meta.get("annotations") == {}:
                del meta["annotations"]
            return r.with_obj(detach(doc))  # kustomize patches a JSON copy: node links are cut

        key = self.fingerprint(kust, "json6902", *key_parts, selector.key)
        self.apply_to(acc, hits, key, fn)

    def patches_json6902(self, kust: Kust, acc: Acc) -> None:
        for i, entry in enumerate(kust.list_field("patchesJson6902")):
            where: tuple[str | int, ...] = ("patchesJson6902", i)
            if not isinstance(entry, dict) or not isinstance(entry.get("target"), dict):
                raise kust.error("patchesJson6902 entries need a target", *where)
            if entry.get("path"):
                path, data = self.read_kust_file(kust, str(entry["path"]), (*where, "path"))
                docs = parse_yaml11(data, path)
            elif entry.get("patch"):
                docs = self.load_patch_docs(kust, str(entry["patch"]), (*where, "patch"), yaml11=True)
            else:
                raise kust.error("patchesJson6902 entries need path or patch", *where)
            if len(docs) != 1 or not isinstance(docs[0], list):
                raise kust.error("a JSON 6902 patch must be a list of operations", *where)
            selector = self.selector(kust, entry["target"], (*where, "target"))
            self.json6902(kust, acc, docs[0], selector, where, ("patchesJson6902", i))

    def namespace(self, kust: Kust, acc: Acc) -> None:
        ns = kust.str_field("namespace")
        if not ns:
            return
        specs = acc.config.namespace

        def fn(r: Res) -> Res | None:
            cur = r.cur
            obj = r.obj
            for fs in specs:
                if not fs.applies_to(cur):
                    continue
                if fs.path == ("metadata", "namespace") and is_cluster_scoped(cur.group, cur.kind):
                    continue
                obj = update_path(obj, fs.path, fs.create, lambda old: MISSING if old == ns else ns)
            if cur.kind in ("RoleBinding", "ClusterRoleBinding") and isinstance(obj.get("subjects"), list):
                subjects = [
                    {**s, "namespace": ns} if isinstance(s, dict) and s.get("namespace") == "default" else s
                    for s in obj["subjects"]
                ]
                if subjects != obj["subjects"]:
                    obj = {**obj, "subjects": subjects}
            return r if obj is r.obj else r.with_obj(obj)

        acc.res = self.each(self.fingerprint(kust, "namespace", specs), acc.res, fn)

    def prefix_suffix(self, kust: Kust, acc: Acc) -> None:
        prefix, suffix = kust.str_field("namePrefix"), kust.str_field("nameSuffix")
        if not prefix and not suffix:
            return
        specs = acc.config.name_prefix

        def fn(r: Res) -> Res | None:
            cur = r.cur
            if (cur.group, cur.kind) in _PREFIX_SKIP:
                return r
            obj = r.obj
            for fs in specs:
                if fs.applies_to(cur):
                    obj = update_path(
                        obj,
                        fs.path,
                        fs.create,
                        lambda old: f"{prefix}{old}{suffix}" if isinstance(old, str) else MISSING,
                    )
            if obj is r.obj:
                return r
            new = r.with_obj(obj)
            return replace(
                new,
                prefixes=(*new.prefixes, prefix) if prefix else new.prefixes,
                suffixes=(*new.suffixes, suffix) if suffix else new.suffixes,
            )

        acc.res = self.each(self.fingerprint(kust, "prefix", specs), acc.res, fn)

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

    def labels(self, kust: Kust, acc: Acc) -> None:
        for i, entry in enumerate(kust.list_field("labels")):
            where = ("labels", i)
            if not isinstance(entry, dict):
                raise kust.error("labels entries must be mappings", *where)
            pairs = {str(k): _pair_value(v) for k, v in (entry.get("pairs") or {}).items()}
            custom: list[FieldSpec] = []
            for j, spec in enumerate(entry.get("fields") or ()):
                if not isinstance(spec, dict) or not spec.get("path"):
                    raise kust.error("labels fields entries need a path", *where, "fields", j)
                custom.append(
                    FieldSpec(
                        str(spec.get("group") or ""),
                        str(spec.get("version") or ""),
                        str(spec.get("kind") or ""),
                        split_path(str(spec["path"])),
                        bool(spec.get("create")),
                    )
                )
            if entry.get("includeSelectors"):
                defaults: tuple[FieldSpec, ...] = acc.config.common_labels
            elif entry.get("includeTemplates"):
                defaults = (*acc.config.template_labels, METADATA_LABELS)
            else:
                defaults = (METADATA_LABELS,)
            specs = list(custom)
            for fs in defaults:
                # kustomize: "effectively equal" when the path matches and fs's GVK selects s's
                same = [
                    s
                    for s in specs
                    if s.path == fs.path
                    and (not fs.group or s.group == fs.group)
                    and (not fs.version or s.version == fs.version)
                    and (not fs.kind or s.kind == fs.kind)
                ]
                if any(s.create != fs.create for s in same):
                    raise kust.error(
                        f"failed to merge labels: conflicting fieldspecs for {'/'.join(fs.path)}", *where
                    )
                if not same:
                    specs.append(fs)
            self.apply_entries(kust, acc, ("labels", i), tuple(specs), pairs)
        common = {str(k): _pair_value(v) for k, v in kust.map_field("commonLabels").items()}
        self.apply_entries(kust, acc, "commonLabels", acc.config.common_labels, common)

    def annotations(self, kust: Kust, acc: Acc) -> None:
        common = {str(k): _pair_value(v) for k, v in kust.map_field("commonAnnotations").items()}
        self.apply_entries(kust, acc, "commonAnnotations", acc.config.common_annotations, common)

    def replacements(self, kust: Kust, acc: Acc) -> None:
        from reconciler.overlays.replacements import apply_replacement

        for i, entry in enumerate(kust.list_field("replacements")):
            where: tuple[str | int, ...] = ("replacements", i)
            if not isinstance(entry, dict):
                raise kust.error("replacements entries must be mappings", *where)
            specs: list[dict[str, Any]]
            if entry.get("path"):
                path, data = self.read_kust_file(kust, str(entry["path"]), (*where, "path"))
                specs = []
                for doc in parse_yaml_value(data, path):
                    specs.extend(doc if isinstance(doc, list) else [doc])
            else:
                specs = [entry]
            for j, spec in enumerate(specs):
                try:
                    acc.res = apply_replacement(
                        spec, acc.res, self.each, self.fingerprint(kust, "replacement", i, j)
                    )
                except OverlayError as err:
                    if err.path:
                        raise
                    raise kust.error(err.message, *where) from err

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

    @staticmethod
    def add_hash(r: Res) -> Res | None:
        if not r.needs_hash:
            return r
        suffix = content_hash(r.obj)
        meta = dict(r.obj.get("metadata") or {})
        meta["name"] = f"{meta.get('name', '')}-{suffix}"
        return replace(r.with_obj({**r.obj, "metadata": meta}), needs_hash=False)

    def fix_name_references(self, items: list[Res], config: TransformerConfig) -> list[Res]:
        by_kind: dict[str, list[tuple[Any, FieldSpec]]] = {}
        for ref in config.name_references:
            for fs in ref.specs:
                by_kind.setdefault(fs.kind, []).append((ref, fs))
        if not by_kind:
            return items
        renamed = [r for r in items if r.prev]
        if not renamed:
            return items
        out = []
        for r in items:
            cur = r.cur
            specs = [*by_kind.get(cur.kind, ()), *by_kind.get("", ())]
            obj = r.obj
            for ref, fs in specs:
                if not fs.applies_to(cur):
                    continue
                obj = update_path(obj, fs.path, False, _NameFixer(ref, r, renamed).fix)
            out.append(r if obj is r.obj else replace(r, obj=obj))
        return out

    @staticmethod
    def sort(kust: Kust, items: list[Res]) -> list[Res]:
        options = kust.map_field("sortOptions")
        order = str(options.get("order") or "legacy")
        if order == "fifo":
            return items
        if order != "legacy":
            raise kust.error("sortOptions.order must be one of [fifo, legacy]", "sortOptions", "order")
        legacy = options.get("legacySortOptions") or {}
        first = tuple(legacy.get("orderFirst") or _ORDER_FIRST)
        last = tuple(legacy.get("orderLast") or _ORDER_LAST)
        ranks = {k: i - len(first) for i, k in enumerate(first)}
        ranks.update({k: i + 1 for i, k in enumerate(last)})

        def key(r: Res) -> tuple[int, str, str]:
            rid = r.cur
            gvk = f"{rid.group or '~G'}_{rid.version or '~V'}_{rid.kind or '~K'}"
            return (
                ranks.get(rid.kind, 0),
                gvk,
                f"{rid.gvk_text()}|{rid.namespace or '~X'}|{rid.name or '~N'}",
            )

        return sorted(items, key=key)


class _NameFixer:
    """Rewrites one reference (a name string) to the referral's current name."""

    def __init__(self, ref: Any, referrer: Res, candidates: list[Res]) -> None:
        self.ref = ref
        self.referrer = referrer
        self.candidates = candidates

    def _gvk_ok(self, rid: ResId) -> bool:
        ref = self.ref
        return (
            (not ref.group or rid.group == ref.group)
            and (not ref.version or rid.version == ref.version)
            and (not ref.kind or rid.kind == ref.kind)
        )

    def resolve(self, old: str) -> str | None:
        me = self.referrer.cur
        me_cluster = is_cluster_scoped(me.group, me.kind)
        found = []
        for c in self.candidates:
            if not any(p.name == old for p in c.prev):
                continue
            if not any(self._gvk_ok(p) for p in c.prev):
                continue
            cur = c.cur
            if (
                not me_cluster
                and not is_cluster_scoped(cur.group, cur.kind)
                and cur.kind != "ServiceAccount"
                and effective_ns(cur) != effective_ns(me)
            ):
                continue
            found.append(c)
        if len(found) > 1:
            same = [
                c
                for c in found
                if c.prefixes == self.referrer.prefixes and c.suffixes == self.referrer.suffixes
            ]
            if same:
                found = same
        if not found:
            return None
        names = {c.cur.name for c in found}
        if len(names) > 1:
            raise OverlayError(
                f"{self.referrer.cur}: found multiple possible referrals for {old!r}: "
                + ", ".join(str(c.cur) for c in found),
                self.referrer.path,
                self.referrer.line,
            )
        return found[0].cur.name

    def fix(self, old: Any) -> Any:
        if isinstance(old, str):
            new = self.resolve(old)
            return MISSING if new is None or new == old else new
        if isinstance(old, list):
            changed = False
            out = []
            for item in old:
                if isinstance(item, str):
                    new = self.resolve(item)
                    if new is not None and new != item:
                        changed = True
                        out.append(new)
                        continue
                out.append(item)
            return out if changed else MISSING
        if isinstance(old, dict) and isinstance(old.get("name"), str):
            if old.get("kind") and old.get("kind") != self.ref.kind:
                return MISSING
            new = self.resolve(old["name"])
            return MISSING if new is None or new == old["name"] else {**old, "name": new}
        return MISSING


def _replace_as_add(doc: Any, op: dict[str, Any], step: jsonpatch.JsonPatch) -> jsonpatch.JsonPatch:
    """kustomize's JSON patch library lets ``replace`` create a missing key of an existing map."""
    try:
        parent, last = jsonpatch.JsonPointer(str(op.get("path", ""))).to_last(doc)
    except (jsonpatch.JsonPointerException, TypeError, KeyError, IndexError):
        return step
    if isinstance(parent, dict) and last not in parent:
        return jsonpatch.JsonPatch([{**op, "op": "add"}])
    return step


def _pair_value(value: Any) -> str:
    """A value of a kustomization's string map (``commonLabels: {a: }`` gives "")."""
    return "" if value is None else _label_value(value)


def _label_value(value: Any) -> str:
    """A scalar as kustomize prints it inside a string map."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _stringify_annotations(r: Res) -> Res | None:
    meta = r.obj.get("metadata")
    if not isinstance(meta, dict):
        return r
    ann = meta.get("annotations")
    if ann == {} or (ann is None and "annotations" in meta):
        # kustomize never prints an empty annotations map
        return replace(r, obj={**r.obj, "metadata": {k: v for k, v in meta.items() if k != "annotations"}})
    if not isinstance(ann, dict) or all(isinstance(v, str) for v in ann.values()):
        return r
    fixed = {
        k: v if isinstance(v, str) else _label_value(v) if not isinstance(v, (dict, list)) else json.dumps(v)
        for k, v in ann.items()
    }
    return replace(r, obj={**r.obj, "metadata": {**meta, "annotations": fixed}})


__all__ = ["KUSTOMIZATION_FILES", "Builder", "join_path", "key_in", "values_at"]
