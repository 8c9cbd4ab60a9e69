"""The kustomize build: accumulate resources, run generators and transformers per level.

Input: a ``FileView`` of a repository snapshot, an entry directory, an ``OverlayCache``.
Output: ``Res`` records in kustomize's output order. Pure: every byte comes through the
file view; nothing outside the view's root is reachable (``..`` is resolved lexically and
refused above the root; the view refuses symlinks that leave it). No remote bases, no
plugins but kustomize's builtin ones (``plugins``), no exec.

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
fields (non-builtin plugins, helm, replicas, crds) are refused, never ignored; ``vars``
are resolved at the top, after name references (``vars``).

Every per-resource step is memoised in the cache by (step fingerprint, input record);
records are immutable and steps share unchanged subtrees, so a rebuild after a one-file
commit only redoes the work for the objects that changed.

This module holds the accumulation (resources, bases, components, each level's
configurations) and the order of the work; a level's generators run in ``generated``,
and the pieces the transformers share (memoised steps, patches, selectors, targets) are
``patching``'s, the base of ``Builder``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.errors import OverlayError
from reconciler.manifests import parse_yaml_value
from reconciler.overlays.config import config_from_file
from reconciler.overlays.generated import run_generators
from reconciler.overlays.kustomization import KUSTOMIZATION_FILES, Acc, Kust
from reconciler.overlays.loader import REMOTE, missing_reason, within
from reconciler.overlays.metadata import build_metadata, with_origin
from reconciler.overlays.namerefs import fix_name_references
from reconciler.overlays.output import add_hash, sort_resources
from reconciler.overlays.patching import Patching
from reconciler.overlays.plugins import run_plugin_generators, run_plugin_transformers
from reconciler.overlays.resource import LOCAL_CONFIG
from reconciler.overlays.transformers import FIELDS, SHAPES, TRANSFORMERS, TYPES
from reconciler.overlays.vars import add_var, mark_vars, resolve_vars

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from reconciler.overlays.resource import Res


class Builder(Patching):
    """One build: accumulation per kustomization level, generators, the transformers of
    ``transformers.TRANSFORMERS``, and the top level's hashes, references and order."""

    transformer_fields = FIELDS
    transformer_shapes = SHAPES
    transformer_types = TYPES

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

        def each_of(data: str, items: list[Res], fn: Callable[[Res], Res]) -> list[Res]:
            return self.each(top and (*top, "vars", data), items, fn)

        out = resolve_vars(out, acc.vars, acc.config.var_reference, each_of)
        out = [r for r in out if not r.annotated(LOCAL_CONFIG, "true")]
        if "originAnnotations" in build_metadata(kust):
            out = self.each(top and (*top, "origin"), out, lambda r: with_origin(kust, r))
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
        run_generators(self, kust, acc)
        run_plugin_generators(self, self.sub_build, kust, acc)
        for i, entry in enumerate(kust.list_field("components")):
            sub = self.sub_kust(kust, "components", i, str(entry))
            if sub.doc.get("kind") != "Component":
                raise kust.error(f"expected kind 'Component' for path '{sub.dir}'", "components", i)
            self.accumulate(sub, acc, component=True)
        self.run_transformers(kust, acc)
        mark_vars(kust, acc, lambda name, r, fn: self.each(self.fingerprint(kust, "var", name), [r], fn)[0])
        return acc

    def sub_build(self, kust: Kust, field_name: str, i: int, entry: str) -> tuple[Kust, Acc]:
        """The kustomization directory ``entry`` of ``kust``'s ``field_name`` names, built."""
        sub = self.sub_kust(kust, field_name, i, entry)
        return sub, self.accumulate(sub, Acc())

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
            for var in sub_acc.vars.values():
                add_var(kust, acc, var, (field_name, i))
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
            why = missing_reason(self.files, path)
            raise kust.error(f"accumulating resources from '{entry}': {why}", field_name, i)
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

    # -- transformers ----------------------------------------------------------------------------

    def run_transformers(self, kust: Kust, acc: Acc) -> None:
        for transformer in TRANSFORMERS:
            transformer.run(self, kust, acc)
        run_plugin_transformers(self, self.sub_build, kust, acc)


__all__ = ["KUSTOMIZATION_FILES", "Builder"]
