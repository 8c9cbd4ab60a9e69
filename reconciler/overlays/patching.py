"""What the transformers share: memoised steps, patches, selectors and targets.

Input: the build's ``Loader`` (its file view, cache and keys) and the records a
transformer works on. Output: ``Patching``, the base of the build (``engine``) that
every transformer of ``transformers.TRANSFORMERS`` is given: a step's memo key
(``fingerprint``: every file its kustomization read, the openapi schema, the step's
data) and its application per record (``each``, ``apply_to``), the fields a patch sets
recorded for provenance (``recorded``, ``lines_in``), strategic merge patches with the
schema's merge keys (``apply_smp``: built-in kinds, or the kustomization's ``openapi``
schema), inline patch documents, the targets of a patch (by id or by ``selector``), a
SOPS-encrypted patch kept to Secrets, and field specs applied (``apply_entries``); a
document given a resource's name, namespace and kind (``retargeted``: a patch by
selector, a patched resource).

Pure: every byte comes through the loader's file view; errors name the
kustomization's file and line, never a value.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.context import SERIAL
from reconciler.errors import ManifestError, OverlayError
from reconciler.manifests import clone, parse_yaml11, parse_yaml_value
from reconciler.manifests.positions import Positions
from reconciler.model import Problem, Severity
from reconciler.overlays.config import builtin_schema_doc
from reconciler.overlays.linked import propagate, set_map_entries
from reconciler.overlays.loader import Loader
from reconciler.overlays.merge import CLEAR, MergeError, Schema, strategic_merge
from reconciler.overlays.resource import (
    FieldSpec,
    Res,
    ResId,
    changed_paths,
    id_key,
    res_id,
    update_path,
)
from reconciler.overlays.selector import Selector

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from reconciler.context import Mapper
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import FieldPath, FileView
    from reconciler.overlays.cache import OverlayCache
    from reconciler.overlays.kustomization import Acc, Kust

_DELETED: Any = object()


BUILTIN_OPENAPI = "v1.21.2"  # the one Kubernetes schema kustomize compiles in


class Patching(Loader):
    """A build's shared steps: memo keys, patches, targets and field specs, and the
    openapi schema that gives custom kinds their merge keys."""

    def __init__(
        self, files: FileView, cache: OverlayCache, keys: Keys | None = None, mapper: Mapper = SERIAL
    ) -> None:
        super().__init__(files, cache, keys, mapper)
        self.schema: Schema | None = None  # a kustomization's openapi schema, once one is read
        self._builtin: Schema | None = None  # the built-in kinds' merge keys, made on first use
        self.schema_key: str = ""
        self.stack: list[str] = []
        self._inline: dict[tuple[str, tuple[str, ...], bool], list[Any]] = {}  # parsed inline patches
        self._texts: dict[bytes, Positions] = {}  # where patch texts write their fields
        self._set_by: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # equal provenances held once

    def no_target(self, kust: Kust, where: tuple[str | int, ...]) -> None:
        """A patch whose target selects no resource: kustomize applies it to nothing and
        says nothing (its build succeeds); the build here is the same, with a warning at
        the target's line, as a patch that does nothing is most likely a mistake."""
        line, col = kust.pos(*where, "target")
        shown = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in where).replace(".[", "[")
        self.warnings[
            Problem(
                f"{shown}.target matches no resource: the patch changes nothing",
                path=kust.path,
                line=line,
                column=col,
                severity=Severity.WARNING,
            )
        ] = None

    def fingerprint(self, kust: Kust, *extra: Any) -> tuple[Any, ...] | None:
        """A step's memo key: every file its kustomization read, the schema, the step's own data.

        Reduced to one digest string (strings cache their hash, tuples do not); the files'
        part digested once per state of ``kust.reads`` (which only grows).
        """
        reads = kust.reads
        known = kust.reads_digest
        if known is None or known[0] != len(reads):
            digest = None
            if all(blob is not None for _p, blob in reads):
                digest = hashlib.sha256(repr(tuple(reads)).encode()).hexdigest()
            kust.reads_digest = known = (len(reads), digest)
        if known[1] is None:
            return None
        text = repr((known[1], self.schema_key, extra))
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
            set_by = (*new.set_by, *((p, file, named.get(p, line)) for p in paths))
            return new.but(set_by=self._set_by.setdefault(set_by, set_by))  # a fleet's VMs share one

        return with_set_by

    def lines_in(
        self,
        text: str | bytes,
        first: int,
        paths: Sequence[tuple[str | int, ...]],
        lookup: Sequence[FieldPath] = (),
    ) -> tuple[tuple[tuple[str | int, ...], int], ...]:
        """Each of ``paths`` with the line where ``text`` (starting at line ``first`` of its
        file: an inline patch's block, or 1 for a file) writes it; ``lookup[i]``: where to
        find ``paths[i]`` in ``text`` when that differs (a JSON 6902 operation). A text is
        composed once per build (a component's patch is met at every inclusion)."""
        data = text.encode() if isinstance(text, str) else text
        positions = self._texts.get(data)
        if positions is None:
            positions = self._texts[data] = Positions(data)
        out = []
        for i, p in enumerate(paths):
            at = lookup[i] if i < len(lookup) else p
            try:
                line = positions.of(at)[0]  # ``locate(data, 1, at)``, its document composed once
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
        return r.with_obj(retargeted(result, cur, allow_name, allow_kind))

    def load_patch_docs(
        self,
        kust: Kust,
        text: str,
        where: tuple[str | int, ...],
        text_fields: tuple[str, ...] = (),
        yaml11: bool = False,
    ) -> list[Any]:
        """An inline patch. JSON 6902 operations are read with YAML 1.1 booleans, as
        kustomize reads them (``value: y`` is true); strategic merge patches are not.
        Parsed once per text in a build (a component included many times is read
        once); each caller gets its own copy to merge from."""
        key = (text, text_fields, yaml11)
        docs = self._inline.get(key)
        if docs is None:
            try:
                if yaml11:
                    docs = parse_yaml11(text.encode(), kust.path)
                else:
                    docs = parse_yaml_value(text, kust.path, text_fields)
            except ManifestError as err:
                line, _col = kust.pos(*where)
                raise OverlayError(
                    f"invalid patch: {err.message}", kust.path, line + max(err.line - 1, 0), 1
                ) from err
            self._inline[key] = docs
        return [clone(d) for d in docs]

    def smp_targets_by_id(
        self, kust: Kust, acc: Acc, patch: dict[str, Any], where: tuple[str | int, ...]
    ) -> list[int]:
        pid = res_id(patch)
        want = id_key(pid)
        hits = [i for i, r in enumerate(acc.res) if r.known_as(want)]
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
                    obj = update_path(obj, fs.path, fs.create, setter, keep=fs.keep)
            obj = propagate(obj, rewrites)
            return r if obj is r.obj else r.with_obj(obj)

        acc.res = self.each(self.fingerprint(kust, tag, specs), acc.res, fn)

    def set_schema(self, kust: Kust, openapi: dict[str, Any]) -> None:
        if "path" in openapi and "version" in openapi:
            raise kust.error(
                "openapi: builtin version and custom schema provided, cannot use both", "openapi"
            )
        if "path" not in openapi:
            version = openapi.get("version")
            if version not in (None, "", BUILTIN_OPENAPI):
                raise kust.error(
                    f"openapi: the specified OpenAPI version {version!r} is not built in "
                    f"(kustomize has {BUILTIN_OPENAPI})",
                    "openapi",
                    "version",
                )
            return  # kustomize's built-in Kubernetes version: our built-in tables stand for it
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


def retargeted(
    doc: dict[str, Any], cur: ResId, keep_name: bool, keep_kind: bool, api_version: bool = False
) -> dict[str, Any]:
    """``doc`` naming ``cur``: its name (unless ``keep_name``), its namespace (or none when
    ``cur`` has none) and its kind (unless ``keep_kind``; with ``api_version``, its
    apiVersion too). A patch is given its target's identity so, and a patched resource
    keeps its own unless the patch may change it."""
    meta = doc.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    if not keep_name:
        meta["name"] = cur.name
    if cur.namespace:
        meta["namespace"] = cur.namespace
    else:
        meta.pop("namespace", None)
    out = {**doc, "metadata": meta}
    if not keep_kind:
        out["kind"] = cur.kind
        if api_version:
            out["apiVersion"] = f"{cur.group}/{cur.version}" if cur.group else cur.version
    return out
