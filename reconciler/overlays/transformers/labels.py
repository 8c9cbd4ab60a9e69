"""labels and commonLabels: label pairs set at the field specs each asks for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.overlays.config import METADATA_LABELS, VOLUME_CLAIM_TEMPLATE_LABELS
from reconciler.overlays.kustomization import STR_MAP, frozen_spec
from reconciler.overlays.linked import pair_value
from reconciler.overlays.resource import FieldSpec, split_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching

FIELDS = ("labels", "commonLabels")  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec(
    {
        "labels": [
            "[]",
            {
                "pairs": None,
                "includeSelectors": None,
                "includeTemplates": None,
                "includeVolumeClaimTemplates": None,
                "fields": ["[]", {"group", "version", "kind", "path", "create"}],
            },
        ]
    }
)  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec(
    {
        "commonLabels": STR_MAP,
        "labels": ["[]", {"pairs": STR_MAP}],
    }
)  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    for i, entry in enumerate(kust.list_field("labels")):
        where = ("labels", i)
        if not isinstance(entry, dict):
            raise kust.error("labels entries must be mappings", *where)
        pairs = {str(k): pair_value(v) for k, v in (entry.get("pairs") or {}).items()}
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
        else:
            defaults = (
                *(acc.config.template_labels if entry.get("includeTemplates") else ()),
                *((VOLUME_CLAIM_TEMPLATE_LABELS,) if entry.get("includeVolumeClaimTemplates") else ()),
                METADATA_LABELS,
            )
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
        b.apply_entries(kust, acc, ("labels", i), tuple(specs), pairs)
    common = {str(k): pair_value(v) for k, v in kust.map_field("commonLabels").items()}
    b.apply_entries(kust, acc, "commonLabels", acc.config.common_labels, common)
