"""VirtualMachinePools: the VirtualMachines a pool stands for, as KubeVirt names them.

Input: a pool's document (``Manifest``) and the catalog's way of raising an error at one
of its fields. Output: its replicas (new ``Manifest`` records at the pool's file and line)
and the pool's fields that have no effect on a libvirt host; more than
``limits.MAX_POOL_REPLICAS`` replicas is an error before any is made. Pure: never reads a file,
never mutates the pool's document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.errors import ManifestError
from reconciler.manifests import limits
from reconciler.model import FieldPath, Manifest

POOL = "VirtualMachinePool"
Error = Callable[[Manifest, str, FieldPath], ManifestError]  # the catalog's error at a field

# Pool fields about a cluster's controllers (rollouts, autohealing, scale-in order):
# read, with no effect on a libvirt host; named once per pool.
POOL_NO_EFFECT = (
    "autohealing",
    "maxUnavailable",
    "nameGeneration",
    "paused",
    "scaleInStrategy",
    "updateStrategy",
)


def replicas(pool: Manifest, error: Error) -> tuple[list[Manifest], list[str]]:
    """A VirtualMachinePool's VirtualMachines, named as KubeVirt names them
    (``<pool>-<ordinal>``, ordinals from 0): each holds the template's metadata and spec.
    Scaling the pool down drops the highest ordinals (pruned like any VM leaving git).
    Also the pool's fields set that have no effect here (``POOL_NO_EFFECT``)."""
    spec = pool.obj.get("spec") or {}
    template = spec.get("virtualMachineTemplate") or {}
    meta = template.get("metadata") or {}
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise error(pool, f"{POOL} {pool.name}: spec.replicas must be a count", ("spec", "replicas"))
    if problem := limits.replicas_problem(replicas):  # before any is made: 2^31 would be a MemoryError
        raise error(pool, f"{POOL} {pool.name}: spec.replicas: {problem}", ("spec", "replicas"))
    labels = meta.get("labels") or {}
    wanted = (spec.get("selector") or {}).get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        raise error(
            pool,
            f"{POOL} {pool.name}: spec.selector.matchLabels must match the template's labels "
            "(KubeVirt refuses a pool whose VMs its selector would not select)",
            ("spec", "selector"),
        )
    namespace = pool.metadata.get("namespace")
    out = []
    for i in range(replicas):
        vm_meta: dict[str, Any] = {k: v for k, v in meta.items() if k in ("labels", "annotations")}
        vm_meta["name"] = f"{pool.name}-{i}"
        if namespace is not None:
            vm_meta["namespace"] = namespace
        obj = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": vm_meta,
            "spec": template.get("spec"),
        }
        out.append(Manifest(obj, pool.path, pool.line))
    return out, [k for k in POOL_NO_EFFECT if spec.get(k) is not None]
