"""patches: strategic merge or JSON 6902 patches, by id or by a target selector."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import PATCH_TEXT_FIELDS, SELECTOR, STR, Acc, Kust, frozen_spec
from reconciler.overlays.resource import Res, patch_paths, res_id
from reconciler.overlays.transformers.patches_json6902 import json6902

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.overlays.patching import Patching

FIELDS = ("patches",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec(
    {
        "patches": [
            "[]",
            {
                "path": None,
                "patch": None,
                "target": SELECTOR,
                "options": {"allowNameChange", "allowKindChange"},
            },
        ]
    }
)  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec(
    {"patches": ["[]", {"path": STR, "patch": STR, "target": dict.fromkeys(SELECTOR, STR)}]}
)  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    for i, entry in enumerate(kust.list_field("patches")):
        where: tuple[str | int, ...] = ("patches", i)
        if not isinstance(entry, dict):
            raise kust.error("patches entries must be mappings", *where)
        path_rel, inline = entry.get("path"), entry.get("patch")
        if path_rel and inline:
            raise kust.error("a patch takes either path or patch, not both", *where)
        # With a target, kustomize applies the patch through a copy that takes the
        # patch's labels and annotations as strings ("null" included).
        text_fields = PATCH_TEXT_FIELDS if entry.get("target") else ()
        encrypted = False
        if path_rel:
            path = b.kust_file(kust, str(path_rel), (*where, "path"))
            docs = b.patch_file_docs(path, text_fields)
            encrypted = path in b.decrypted
            origin = (path, 0)  # the field's own line in the patch file
            text: str | bytes = b""
        elif inline:
            origin = (kust.path, kust.pos(*where, "patch")[0] + 1)  # the block's first line
            text = str(inline)
            docs = b.load_patch_docs(kust, str(inline), (*where, "patch"), text_fields)
            if len(docs) == 1 and isinstance(docs[0], list):
                docs = b.load_patch_docs(kust, str(inline), (*where, "patch"), yaml11=True)
        else:
            raise kust.error("a patch needs path or patch", *where)
        options = entry.get("options") or {}
        allow_name = bool(options.get("allowNameChange"))
        allow_kind = bool(options.get("allowKindChange"))
        target = entry.get("target")
        selector = b.selector(kust, target, (*where, "target")) if target else None
        if len(docs) == 1 and isinstance(docs[0], list):
            if selector is None:
                raise kust.error("a JSON 6902 patch must specify a target", *where)
            data = text if text else b.files.read(origin[0])
            first = origin[1] or 1
            json6902(b, kust, acc, docs[0], selector, where, ("patches", i), (origin[0], first, _bytes(data)))
            continue
        if selector is not None and not b.select(selector, acc.res):
            b.no_target(kust, where)
        for j, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise kust.error("a patch must be a strategic merge patch or a JSON 6902 list", *where)
            key = b.fingerprint(kust, "patch", i, j, allow_name, allow_kind)
            if selector is None:
                hits = b.smp_targets_by_id(kust, acc, doc, where)
                if len(hits) > 1:
                    raise kust.error(
                        f"multiple matches for Id {res_id(doc)}; failed to find unique target for patch {res_id(doc)}",
                        *where,
                    )
                by_id: Callable[[Res], Res | None] = partial(
                    b.apply_smp,
                    patch=doc,
                    allow_name=allow_name,
                    allow_kind=allow_kind,
                    kust=kust,
                    where=where,
                )
                if encrypted:
                    by_id = b.decrypted_patch(kust, acc, hits, where, by_id)
                sets = (
                    b.lines_in(text, origin[1], patch_paths(doc))
                    if text
                    else tuple((p, 0) for p in patch_paths(doc))
                )
                b.apply_to(acc, hits, key, b.recorded(by_id, *origin, sets))
            else:
                hits = b.select(selector, acc.res)

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
                    return b.apply_smp(r, p, an, ak, kust, w)

                chosen = b.decrypted_patch(kust, acc, hits, where, fn) if encrypted else fn
                sets = (
                    b.lines_in(text, origin[1], patch_paths(doc))
                    if text
                    else tuple((p, 0) for p in patch_paths(doc))
                )
                chosen = b.recorded(chosen, *origin, sets)
                b.apply_to(acc, hits, None if key is None else (*key, selector.key), chosen)


def _bytes(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data
