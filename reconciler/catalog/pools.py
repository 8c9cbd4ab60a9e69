"""VirtualMachinePools: the VirtualMachines a pool stands for, as KubeVirt names them.

Input: a pool's document (``Manifest``) and the catalog's way of raising an error at one
of its fields. Output: its replicas (new ``Manifest`` records at the pool's file and line)
and the pool's fields that have no effect on a libvirt host; more than
``limits.MAX_POOL_REPLICAS`` replicas is an error before any is made. Pure: never reads a file,
never mutates the pool's document.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from reconciler.errors import ManifestError
from reconciler.manifests import limits
from reconciler.model import FieldPath, Manifest
from reconciler.model import annotation_names as vm_annotations
from reconciler.model.rollout import (
    MIN_FAILING_TO_START_S,
    POOL_MAX_UNAVAILABLE,
    STARTUP_FAILURE_THRESHOLD,
    UpdateStrategy,
    valid_limit,
)

POOL = "VirtualMachinePool"
Error = Callable[[Manifest, str, FieldPath], ManifestError]  # the catalog's error at a field

# Pool fields about a cluster's controllers (scale-in order, name generation): read, with
# no effect on a libvirt host; named once per pool. ``maxUnavailable`` and
# ``updateStrategy`` pace the replicas' restarts (plan/pace.py), ``autohealing``
# reprovisions a replica that keeps failing to start (plan/autoheal.py), carried on each
# replica by ``_pacing``.
POOL_NO_EFFECT = (
    "nameGeneration",
    "paused",
    "scaleInStrategy",
)
_GO_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(h|ms|m|s))")  # metav1.Duration: 1h30m, 5m0s, 90s
SORT_POLICIES = ("AscendingOrder", "DescendingOrder", "Newest", "Oldest", "Random")


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
    pace = _pacing(pool, spec, replicas, error)
    out = []
    for i in range(replicas):
        vm_meta: dict[str, Any] = {k: v for k, v in meta.items() if k in ("labels", "annotations")}
        vm_meta["annotations"] = {**(vm_meta.get("annotations") or {}), vm_annotations.POOL: pace(i)}
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


def _pacing(pool: Manifest, spec: dict[str, Any], replicas: int, error: Error) -> Callable[[int], str]:
    """The pool's pacing as each replica carries it (annotation ``reconciler.kubevirt.io/pool``):
    its ``maxUnavailable`` (default 100%), ``updateStrategy`` (default proactive) and the
    replica's place in the ``selectionPolicy.sortPolicy`` order (default Random, as
    KubeVirt's: here a stable order from the names). ``selectors`` order nothing here:
    a pool's replicas share its template's labels and this host."""
    raw = spec.get("maxUnavailable", POOL_MAX_UNAVAILABLE)
    limit = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if not isinstance(limit, str) or not valid_limit(limit):
        raise error(
            pool,
            f"{POOL} {pool.name}: spec.maxUnavailable must be a count or a percentage",
            ("spec", "maxUnavailable"),
        )
    strategy = spec.get("updateStrategy") or {}
    kind = next((s for s in UpdateStrategy if s.value in strategy), UpdateStrategy.PROACTIVE)
    policy = ((strategy.get("proactive") or {}).get("selectionPolicy") or {}) if kind == "proactive" else {}
    sort = policy.get("sortPolicy") or "Random"
    if sort not in SORT_POLICIES:
        raise error(
            pool,
            f"{POOL} {pool.name}: sortPolicy {sort!r} is not one of {', '.join(SORT_POLICIES)}",
            ("spec", "updateStrategy", "proactive", "selectionPolicy", "sortPolicy"),
        )
    ranks = {
        "AscendingOrder": list(range(replicas)),
        "Oldest": list(range(replicas)),  # ordinals are made in order: the lowest is the oldest
        "DescendingOrder": [replicas - 1 - i for i in range(replicas)],
        "Newest": [replicas - 1 - i for i in range(replicas)],
    }.get(sort)
    if ranks is None:  # Random: stable across reconciles, so a rollout keeps its order
        digest = sorted(
            range(replicas), key=lambda i: hashlib.sha256(f"{pool.name}-{i}".encode()).hexdigest()
        )
        ranks = [digest.index(i) for i in range(replicas)]
    common: dict[str, Any] = {
        "pool": pool.name,
        "replicas": replicas,
        "maxUnavailable": limit,
        "updateStrategy": str(kind),
    }
    if spec.get("autohealing") is not None:
        common["autohealing"] = _autohealing(pool, spec["autohealing"], error)
    return lambda i: json.dumps({**common, "order": ranks[i]}, sort_keys=True)


def _autohealing(pool: Manifest, value: Any, error: Error) -> dict[str, float]:
    """The pool's ``autohealing`` as its replicas carry it (KubeVirt's defaults: 3 failed
    starts in a row, 5 minutes failing); set at all (``{}`` too), it is on."""
    where = ("spec", "autohealing")
    if not isinstance(value, dict):
        raise error(pool, f"{POOL} {pool.name}: spec.autohealing must be a mapping", where)
    threshold = value.get("startUpFailureThreshold", STARTUP_FAILURE_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise error(
            pool,
            f"{POOL} {pool.name}: spec.autohealing.startUpFailureThreshold must be a count of at least 1",
            (*where, "startUpFailureThreshold"),
        )
    raw = value.get("minFailingToStartDuration")
    seconds = MIN_FAILING_TO_START_S if raw is None else _duration_s(raw)
    if seconds is None:
        raise error(
            pool,
            f"{POOL} {pool.name}: spec.autohealing.minFailingToStartDuration {raw!r} is not a duration "
            "(e.g. 5m, 1h30m, 90s)",
            (*where, "minFailingToStartDuration"),
        )
    return {"startUpFailureThreshold": threshold, "minFailingToStartSeconds": seconds}


def _duration_s(raw: Any) -> float | None:
    """A Kubernetes duration (``metav1.Duration``: ``5m``, ``1h30m``, ``5m0s``) in seconds."""
    if not isinstance(raw, str) or not raw or _GO_DURATION.sub("", raw):
        return None
    unit = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * unit[u] for n, u in _GO_DURATION.findall(raw))
