"""patches: strategic merge or JSON 6902 patches, by id or by a target selector."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import PATCH_TEXT_FIELDS, SELECTOR, STR, Acc, Kust, frozen_spec
from reconciler.overlays.patching import retargeted
from reconciler.overlays.resource import Res, patch_paths, res_id
from reconciler.overlays.transformers.patches_json6902 import json6902
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.overlays.patching import Patching
    from reconciler.overlays.selector import Selector

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


@dataclass(frozen=True, slots=True)
class _Patch:
    """One entry of ``patches``: its documents, where they were written, and its options."""

    where: tuple[str | int, ...]  # the entry in the kustomization
    docs: list[Any]
    text: str | bytes  # an inline patch's text ("" for a patch file)
    origin: tuple[str, int]  # (file, line) the patch is written at (0: the field's own line)
    encrypted: bool  # a patch file that was decrypted
    allow_name: bool
    allow_kind: bool


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    for i, entry in enumerate(kust.list_field("patches")):
        where: tuple[str | int, ...] = ("patches", i)
        if not isinstance(entry, dict):
            raise kust.error("patches entries must be mappings", *where)
        patch = _read_patch(b, kust, entry, where)
        target = entry.get("target")
        selector = b.selector(kust, target, (*where, "target")) if target else None
        docs = patch.docs
        if len(docs) == 1 and isinstance(docs[0], list):
            if selector is None:
                raise kust.error("a JSON 6902 patch must specify a target", *where)
            data = patch.text if patch.text else b.files.read(patch.origin[0])
            origin = (patch.origin[0], patch.origin[1] or 1, _bytes(data))
            json6902(b, kust, acc, docs[0], selector, where, ("patches", i), origin)
            continue
        if selector is not None and not b.select(selector, acc.res):
            b.no_target(kust, where)
        for j, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise kust.error("a patch must be a strategic merge patch or a JSON 6902 list", *where)
            key = b.fingerprint(kust, "patch", i, j, patch.allow_name, patch.allow_kind)
            if selector is None:
                _patch_by_id(b, kust, acc, patch, doc, key)
            else:
                _patch_targets(
                    b, kust, acc, patch, doc, None if key is None else (*key, selector.key), selector
                )


def _read_patch(b: Patching, kust: Kust, entry: dict[str, Any], where: tuple[str | int, ...]) -> _Patch:
    """The documents of a patch file (``path``) or of an inline patch (``patch``)."""
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
    return _Patch(where, docs, text, origin, encrypted, allow_name, allow_kind)


def _patch_by_id(
    b: Patching, kust: Kust, acc: Acc, patch: _Patch, doc: dict[str, Any], key: tuple[Any, ...] | None
) -> None:
    """A strategic merge patch applied to the one resource of its own id."""
    where = patch.where
    hits = b.smp_targets_by_id(kust, acc, doc, where)
    if len(hits) > 1:
        raise kust.error(
            f"multiple matches for Id {res_id(doc)}; failed to find unique target for patch {res_id(doc)}",
            *where,
        )
    by_id: Callable[[Res], Res | None] = partial(
        b.apply_smp,
        patch=doc,
        allow_name=patch.allow_name,
        allow_kind=patch.allow_kind,
        kust=kust,
        where=where,
    )
    if patch.encrypted:
        by_id = b.decrypted_patch(kust, acc, hits, where, by_id)
    b.apply_to(acc, hits, key, b.recorded(by_id, *patch.origin, _sets(b, patch, doc)))


def _patch_targets(
    b: Patching,
    kust: Kust,
    acc: Acc,
    patch: _Patch,
    doc: dict[str, Any],
    key: tuple[Any, ...] | None,
    selector: Selector,
) -> None:
    """A strategic merge patch applied to each resource ``selector`` matches, as if it
    named that resource."""
    hits = b.select(selector, acc.res)
    fn: Callable[[Res], Res | None] = partial(_retargeted, b=b, kust=kust, patch=patch, doc=doc)
    chosen = b.decrypted_patch(kust, acc, hits, patch.where, fn) if patch.encrypted else fn
    b.apply_to(acc, hits, key, b.recorded(chosen, *patch.origin, _sets(b, patch, doc)))


def _retargeted(r: Res, b: Patching, kust: Kust, patch: _Patch, doc: dict[str, Any]) -> Res | None:
    """``r`` patched with ``doc`` given ``r``'s name, namespace and kind (unless the patch
    may change them and sets them)."""
    meta = doc.get("metadata")
    named = bool(patch.allow_name and isinstance(meta, dict) and meta.get("name"))
    kinded = bool(patch.allow_kind and doc.get("kind"))
    p = retargeted(doc, r.cur, keep_name=named, keep_kind=kinded, api_version=True)
    return b.apply_smp(r, p, patch.allow_name, patch.allow_kind, kust, patch.where)


def _sets(b: Patching, patch: _Patch, doc: dict[str, Any]) -> tuple[tuple[tuple[str | int, ...], int], ...]:
    """The fields ``doc`` sets, each with the line of the patch text that sets it."""
    if patch.text:
        return b.lines_in(patch.text, patch.origin[1], patch_paths(doc))
    return tuple((p, 0) for p in patch_paths(doc))


def _bytes(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data
