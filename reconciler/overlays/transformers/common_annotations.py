"""commonAnnotations: annotation pairs set at the common annotation field specs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import STR_MAP, frozen_spec
from reconciler.overlays.linked import pair_value

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching

FIELDS = ("commonAnnotations",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec({})  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec(
    {"commonAnnotations": STR_MAP}
)  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    common = {str(k): pair_value(v) for k, v in kust.map_field("commonAnnotations").items()}
    b.apply_entries(kust, acc, "commonAnnotations", acc.config.common_annotations, common)
