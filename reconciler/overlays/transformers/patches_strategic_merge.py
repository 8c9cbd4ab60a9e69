"""patchesStrategicMerge: strategic merge patches, each naming its target by id."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import PATCH_TEXT_FIELDS, STR_LIST, Acc, Kust, frozen_spec
from reconciler.overlays.resource import patch_paths, res_id

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.overlays.patching import Patching
    from reconciler.overlays.resource import Res

FIELDS = ("patchesStrategicMerge",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec({})  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec(
    {"patchesStrategicMerge": STR_LIST}
)  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    entries = kust.list_field("patchesStrategicMerge")
    found = 0
    for i, entry in enumerate(entries):
        where: tuple[str | int, ...] = ("patchesStrategicMerge", i)
        text = str(entry)
        docs: list[Any]
        encrypted = False
        if "\n" not in text and b.files.exists(b.join(kust.dir, text)):
            path = b.kust_file(kust, text, where)
            docs = b.patch_file_docs(path, PATCH_TEXT_FIELDS)
            encrypted = path in b.decrypted
            origin = (path, 0)  # the field's own line in the patch file
            inline = ""
        else:
            docs = b.load_patch_docs(kust, text, where, PATCH_TEXT_FIELDS)
            origin = (kust.path, kust.pos(*where)[0] + 1)  # the block's first line
            inline = text
        found += len(docs)
        for j, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise kust.error("a strategic merge patch must be a mapping", *where)
            hits = b.smp_targets_by_id(kust, acc, doc, where)
            if len(hits) > 1:
                raise kust.error(
                    f"multiple matches for Id {res_id(doc)}; failed to find unique target for patch {res_id(doc)}",
                    *where,
                )
            fn: Callable[[Res], Res | None] = partial(
                b.apply_smp, patch=doc, allow_name=False, allow_kind=False, kust=kust, where=where
            )
            if encrypted:
                fn = b.decrypted_patch(kust, acc, hits, where, fn)
            paths = patch_paths(doc)
            sets = b.lines_in(inline, origin[1], paths) if inline else tuple((p, 0) for p in paths)
            fn = b.recorded(fn, *origin, sets)
            b.apply_to(acc, hits, b.fingerprint(kust, "psm", i, j), fn)
    if entries and not found:
        raise kust.error(
            f"patch appears to be empty; files={[str(e) for e in entries]}", "patchesStrategicMerge"
        )
