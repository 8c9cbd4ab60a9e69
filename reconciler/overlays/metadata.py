"""buildMetadata: where each built object came from, as kustomize records it.

Input: the top kustomization (only its ``buildMetadata`` counts, as in kustomize) and
the built records. Output: with ``originAnnotations``, each object annotated
``config.kubernetes.io/origin`` with its file (relative to the top kustomization), or
for a generated one the kustomization and generator that made it. The other options
are refused with why: ``transformerAnnotations`` and ``managedByLabel`` describe
kustomize's own build (its transformer plugins, its version), not the repository.
"""

from __future__ import annotations

import posixpath
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.overlays.kustomization import Kust
    from reconciler.overlays.resource import Res

ORIGIN = "config.kubernetes.io/origin"
_REFUSED = MappingProxyType(
    {
        "transformerAnnotations": "it lists kustomize's transformer plugins, which a build here does not run",
        "managedByLabel": "its value names the kustomize release that built the objects; set the label with labels",
    }
)


def build_metadata(kust: Kust) -> frozenset[str]:
    """The options of ``kust``'s buildMetadata (an unknown or refused one is an error)."""
    options = kust.list_field("buildMetadata")
    for i, option in enumerate(options):
        if option in _REFUSED:
            raise kust.error(
                f"buildMetadata: {option} is not supported: {_REFUSED[option]}", "buildMetadata", i
            )
        if option != "originAnnotations":
            raise kust.error(
                f"buildMetadata: unknown option {option!r} (supported: originAnnotations)", "buildMetadata", i
            )
    return frozenset(str(o) for o in options)


def _relative(path: str, top: str) -> str:
    return posixpath.relpath(path, top or ".")


def with_origin(kust: Kust, r: Res) -> Res:
    """``r`` annotated with where it came from (relative to the top kustomization)."""
    path, generator, *named = r.origin
    if not path:
        return r
    if generator:
        text = (
            f"configuredIn: {_relative(path, kust.dir)}\n"
            f"configuredBy:\n  apiVersion: builtin\n  kind: {generator}\n"
        )
        if named and named[0]:
            text += f"  name: {named[0]}\n"
    else:
        text = f"path: {_relative(path, kust.dir)}\n"
    meta = r.obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    annotations = meta.get("annotations")
    annotations = dict(annotations) if isinstance(annotations, dict) else {}
    if ORIGIN in annotations:
        raise kust.error(
            f"{r.cur}: annotation {ORIGIN} is written by buildMetadata: originAnnotations; remove one of them",
            "buildMetadata",
        )
    annotations[ORIGIN] = text
    meta["annotations"] = annotations
    return r.with_obj({**r.obj, "metadata": meta})
