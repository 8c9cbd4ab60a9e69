"""Strategic merge patches, the way kustomize (kyaml ``merge2``) applies them.

Input: a target object, a patch object, and an optional ``Schema`` giving merge keys.
Output: a new object; unchanged subtrees are shared with the input, which is never
modified. Pure.

Rules (kustomize 5): maps merge key by key; ``null`` in the patch deletes the field;
``$patch: delete`` removes a map (or a keyed list element), ``$patch: replace`` replaces
a map with the patch's. Lists are replaced whole unless the schema names them
``x-kubernetes-patch-strategy: merge`` with a merge key: then elements are paired by
that key, the patch's elements come first (in patch order), followed by the target's
elements the patch did not mention. Custom kinds have no schema unless one is given
through the kustomization's ``openapi`` field, so their lists are replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconciler.overlays.linked import overwrite, propagate

CLEAR = object()  # "this node is removed"
_DIRECTIVE = "$patch"


class Schema:
    """An OpenAPI v2 document reduced to what merging needs: list strategies and keys."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        defs = doc.get("definitions")
        self.defs: Mapping[str, Any] = defs if isinstance(defs, Mapping) else {}
        self.by_gvk: dict[tuple[str, str, str], str] = {}
        for name, definition in self.defs.items():
            if not isinstance(definition, Mapping):
                continue
            for gvk in definition.get("x-kubernetes-group-version-kind") or ():
                if isinstance(gvk, Mapping):
                    key = (str(gvk.get("group", "")), str(gvk.get("version", "")), str(gvk.get("kind", "")))
                    self.by_gvk.setdefault(key, name)
        self.fingerprint = json.dumps(doc, sort_keys=True, default=str)

    def resolve(self, node: Any) -> Mapping[str, Any] | None:
        seen = 0
        while isinstance(node, Mapping) and "$ref" in node and seen < 50:
            ref = str(node["$ref"])
            name = ref.rsplit("/", 1)[-1]
            node = self.defs.get(name)
            seen += 1
        return node if isinstance(node, Mapping) else None

    def for_type(self, group: str, version: str, kind: str) -> Mapping[str, Any] | None:
        name = self.by_gvk.get((group, version, kind))
        return self.resolve(self.defs.get(name)) if name else None

    def field(self, node: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
        if node is None:
            return None
        props = node.get("properties")
        if isinstance(props, Mapping) and key in props:
            return props[key] if isinstance(props[key], Mapping) else None
        extra = node.get("additionalProperties")
        return extra if isinstance(extra, Mapping) else None

    def items(self, node: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if node is None:
            return None
        return self.resolve(node.get("items"))

    @staticmethod
    def list_keys(node: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]]:
        """("merge", keys) / ("replace", ()) / ("", ()) for a list field's schema."""
        if node is None:
            return ("", ())
        strategy = str(node.get("x-kubernetes-patch-strategy") or "")
        key = node.get("x-kubernetes-patch-merge-key")
        if "merge" in strategy.split(","):
            # kyaml (PatchStrategyAndKeyList): the list-map keys when the schema has them
            map_keys = node.get("x-kubernetes-list-map-keys")
            if map_keys:
                return ("merge", tuple(str(k) for k in map_keys))
            return ("merge", (str(key),) if key else ())
        if node.get("x-kubernetes-list-type") == "map":
            keys = node.get("x-kubernetes-list-map-keys") or ()
            return ("merge", tuple(str(k) for k in keys))
        if strategy:
            return ("replace", ())
        return ("", ())


class _Ctx:
    __slots__ = ("rewrites", "schema")

    def __init__(self, schema: Schema | None) -> None:
        self.schema = schema
        self.rewrites: dict[object, Any] = {}  # in-place writes over linked values


def strategic_merge(
    target: dict[str, Any], patch: dict[str, Any], schema: Schema | None, type_node: Mapping[str, Any] | None
) -> Any:
    """Apply ``patch`` to ``target``; returns the new object or ``CLEAR`` (deleted).

    A scalar written over a linked label/annotation value changes every value linked to
    it, as kustomize's in-place write does (see ``resource.SharedText``).
    """
    ctx = _Ctx(schema)
    if type_node is not None:
        target = _dedup(target, type_node, ctx)
    result = _merge_map(target, patch, ctx, type_node)
    return propagate(result, ctx.rewrites) if result is not CLEAR else result


def _dedup(value: Any, node: Mapping[str, Any] | None, ctx: _Ctx) -> Any:
    """Keyed lists anywhere in the target hold each key once after a merge in kustomize
    (it walks every field, not only the patched ones): the last duplicate's content
    takes the first one's place."""
    if node is None or ctx.schema is None:
        return value
    if isinstance(value, dict):
        out = None
        for k, v in value.items():
            if not isinstance(v, (dict, list)):
                continue
            new = _dedup(v, _field(ctx, node, k), ctx)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        strategy, keys = Schema.list_keys(node)
        items_node = ctx.schema.items(node)
        items = value
        if strategy == "merge" and keys:
            seen: dict[tuple[str, ...], int] = {}
            deduped: list[Any] = []
            for item in value:
                k = _key_of(item, keys)
                if k is None:
                    deduped.append(item)
                elif k in seen:
                    deduped[seen[k]] = item
                else:
                    seen[k] = len(deduped)
                    deduped.append(item)
            if len(deduped) != len(value):
                items = deduped
        if items_node is not None:
            new_items = [_dedup(item, items_node, ctx) for item in items]
            if any(a is not b for a, b in zip(new_items, items, strict=True)):
                items = new_items
        return items
    return value


def _directive(patch: Mapping[str, Any]) -> str:
    value = patch.get(_DIRECTIVE)
    return str(value) if value is not None else ""


class MergeError(ValueError):
    """The patch has a map where the target has a list or a scalar (or the reverse)."""


def _kind(value: Any) -> str:
    return "map" if isinstance(value, dict) else "list" if isinstance(value, list) else "scalar"


def _check_kinds(path: tuple[str, ...], dval: Any, pval: Any, strict: bool) -> None:
    if not strict or dval is None or pval is None or dval == {} or dval == []:
        return
    if _kind(dval) != _kind(pval):
        raise MergeError(
            f"wrong node kind at {'.'.join(path)}: the patch has a {_kind(pval)} where the target has a {_kind(dval)}"
        )


def _merge_map(
    dest: Any,
    patch: Mapping[str, Any],
    ctx: _Ctx,
    node: Mapping[str, Any] | None,
    path: tuple[str, ...] = (),
    strict: bool = True,
) -> Any:
    directive = _directive(patch)
    if not isinstance(dest, dict):
        if directive == "delete":
            return CLEAR
        dest = {}
    elif directive == "delete":
        return CLEAR
    elif directive == "replace":
        dest = {}
    result: dict[str, Any] | None = None  # copy made on the first change
    for key, pval in patch.items():
        if key.startswith("$"):
            continue
        had = key in dest
        dval = dest.get(key)
        here = (*path, str(key))
        _check_kinds(here, dval, pval, strict)
        new: Any
        if pval is None:
            if not had:
                continue
            new = CLEAR
        elif isinstance(pval, dict):
            if dval is None or isinstance(dval, dict):
                new = _merge_map(dval, pval, ctx, _field(ctx, node, key), here, strict)
            else:
                new = _merge_map(None, pval, ctx, _field(ctx, node, key), here, strict)
        elif isinstance(pval, list):
            new = _merge_list(dval, pval, ctx, _field(ctx, node, key))
        elif had and isinstance(dval, str) and isinstance(pval, str) and dval == pval:
            continue
        else:
            new = overwrite(dval, pval, ctx.rewrites)
        if new is CLEAR:
            if had:
                if result is None:
                    result = dict(dest)
                del result[key]
            continue
        if had and new is dval:
            continue
        if result is None:
            result = dict(dest)
        result[key] = new
    return dest if result is None else result


def _field(ctx: _Ctx, node: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    if ctx.schema is None or node is None:
        return None
    return ctx.schema.resolve(ctx.schema.field(node, key))


def _merge_list(dest: Any, patch: list[Any], ctx: _Ctx, node: Mapping[str, Any] | None) -> Any:
    strategy, keys = Schema.list_keys(node)
    if strategy != "merge":
        return patch
    items_node = ctx.schema.items(node) if ctx.schema is not None else None
    dest_list = dest if isinstance(dest, list) else []
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" and len(item) == 1 for item in patch):
        # a `- $patch: replace` element: the patch's other elements replace the list
        return [item for item in patch if not (isinstance(item, dict) and item.get(_DIRECTIVE) == "replace")]
    if not keys:
        return _merge_primitive(dest_list, patch)
    return _merge_keyed(dest_list, patch, keys, ctx, items_node)


def _merge_primitive(dest: list[Any], patch: list[Any]) -> list[Any]:
    out: list[Any] = []
    seen: set[str] = set()
    for item in [*patch, *dest]:
        marker = json.dumps(item, sort_keys=True, default=str)
        if marker in seen:
            continue
        seen.add(marker)
        out.append(item)
    return out


def _key_of(item: Any, keys: tuple[str, ...]) -> tuple[str, ...] | None:
    if not isinstance(item, dict):
        return None
    values = tuple("" if item.get(k) is None else _text(item.get(k)) for k in keys)
    if not any(values):
        return None
    return values


def _text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _matches(item: Any, keys: tuple[str, ...], values: tuple[str, ...]) -> bool:
    if not isinstance(item, dict):
        return False
    return all(not (v and _text(item.get(k, "")) != v) for k, v in zip(keys, values, strict=True))


def _merge_keyed(
    dest: list[Any], patch: list[Any], keys: tuple[str, ...], ctx: _Ctx, items_node: Mapping[str, Any] | None
) -> list[Any]:
    order: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    for source in (patch, dest):
        for item in source:
            k = _key_of(item, keys)
            if k is not None and k not in seen:
                seen.add(k)
                order.append(k)
    merged: list[Any] = []
    merged_keys: list[tuple[str, ...]] = []
    deleted: set[tuple[str, ...]] = set()
    for k in order:
        d = next((item for item in dest if _matches(item, keys, k)), None)
        p = next((item for item in patch if _matches(item, keys, k)), None)
        if p is None:
            value = d
        elif d is not None and _directive(p) == "replace":
            # kustomize (kyaml) keeps the target's element here: the replaced copy it
            # builds is overwritten by the target's element when the list is put together
            value = d
        else:
            value = _merge_map(d, p, ctx, items_node, strict=False)
        if value is CLEAR or value == {}:
            deleted.add(k)
            continue
        if isinstance(value, dict):
            for key, v in zip(keys, k, strict=True):
                if v and key not in value:
                    value = {**value, key: v}
        merged.append(value)
        merged_keys.append(k)
    # a patch element without the key is kept as kyaml keeps it (its key value is empty)
    out = [
        *merged,
        *(p for p in patch if isinstance(p, dict) and _key_of(p, keys) is None and not _directive(p)),
    ]
    for item in dest:
        k = _key_of(item, keys)
        if k is None:
            out.append(item)
        elif k in deleted or k in merged_keys:
            continue
        else:
            out.append(item)
    return out
