"""The last steps of a kustomize build, at the top level only: hashes, order, output.

Input: the built ``Res`` records and the top kustomization (its ``sortOptions``).
Output: new records with content-hash name suffixes (generated ConfigMaps and Secrets
that ask for one), the records in kustomize's output order (legacy kind ranks, or
fifo), and each one's ``Manifest`` with its annotation values as strings, in one step
(``manifest``). Pure; records are never modified.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.manifests.sops.values import stand_in
from reconciler.model import Manifest
from reconciler.overlays.generators import content_hash
from reconciler.overlays.linked import label_value

if TYPE_CHECKING:
    from reconciler.overlays.kustomization import Kust
    from reconciler.overlays.resource import Res

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


def add_hash(r: Res) -> Res | None:
    """A generated ConfigMap or Secret with its content hash appended to its name."""
    if not r.needs_hash:
        return r
    suffix = content_hash(_hash_basis(r))
    meta = dict(r.obj.get("metadata") or {})
    meta["name"] = f"{meta.get('name', '')}-{suffix}"
    return replace(r.with_obj({**r.obj, "metadata": meta}), needs_hash=False)


def _hash_basis(r: Res) -> dict[str, Any]:
    """What the name hash is taken from: the object, or for a Secret generated from
    SOPS-encrypted files stand-ins derived from its ``seal`` (the files as committed),
    the same with keys and without, and never a digest of a decrypted value."""
    if not r.seal:
        return r.obj
    data = r.obj.get("data")
    data = data if isinstance(data, dict) else {}
    stand_ins = {str(k): stand_in(f"{r.seal}:{k}") for k in data}
    return {k: v for k, v in r.obj.items() if k != "stringData"} | {"data": stand_ins}


def sort_resources(kust: Kust, items: list[Res]) -> list[Res]:
    """kustomize's output order: ``sortOptions`` (legacy by kind rank, or fifo)."""
    options = kust.map_field("sortOptions")
    given = "sortOptions" in kust.doc
    order = str(options.get("order") or ("" if given else "legacy"))
    if order not in ("fifo", "legacy"):
        raise kust.error("the field 'sortOptions.order' must be one of [fifo, legacy]", "sortOptions")
    if order == "fifo":
        if "legacySortOptions" in options:
            raise kust.error(
                "the field 'sortOptions.legacySortOptions' is set but the selected sort order is 'fifo', "
                "not 'legacy'",
                "sortOptions",
                "legacySortOptions",
            )
        return items
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


def manifest(r: Res) -> Manifest:
    """The build's output of one record: its object with annotation values as strings
    (``stringify_annotations``), where it came from and whether it was sealed."""
    out = stringify_annotations(r)  # the same ids: its kind, name, namespace (shared, not read again)
    return Manifest(out.obj, out.path, out.line, out.sealed, out.set_by, r.cur)


def stringify_annotations(r: Res) -> Res:
    """Annotation values as kustomize prints them: strings, no empty map."""
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
        k: v if isinstance(v, str) else label_value(v) if not isinstance(v, (dict, list)) else json.dumps(v)
        for k, v in ann.items()
    }
    return replace(r, obj={**r.obj, "metadata": {**meta, "annotations": fixed}})
