"""Which instancetype / preference a VM uses (kubevirt-semantics §a).

Input: the VM's ``spec.instancetype`` / ``spec.preference`` matchers, the
catalog and optional pinned revisions. Output: the matcher validated, inferred
(``inferFromVolume``) and resolved to a spec plus the ``RevisionInfo`` it came
from. Raises ``RuleError`` naming the VM field; never edits the catalog.

Where a spec comes from, first match wins:
1. ``revisionName: git:<commit>`` -> the pinned RevisionInfo for that matcher whose
   ``commit`` starts with (or is a prefix of) ``<commit>``; the caller reads the
   object at that commit and passes it in ``pinned`` (see ``git_revisions``).
2. ``revisionName: <name>`` -> the pinned RevisionInfo it names (``revision_name()``:
   ``<object>-<hash[:12]>``, or ``sha256:<hash prefix>``), else the ControllerRevision
   ``<name>`` in the VM's namespace.
3. a pinned RevisionInfo for the same kind/name/namespace, unless ``follow``.
4. the object in the catalog.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.catalog import (
    CLUSTER_INSTANCETYPE,
    CLUSTER_PREFERENCE,
    CONTROLLER_REVISION,
    DATA_SOURCE,
    DATA_VOLUME,
    INSTANCETYPE,
    PREFERENCE,
    PVC,
    VOLUME_SNAPSHOT,
    Catalog,
)
from reconciler.expand.revision import names_revision, replay, revision_info
from reconciler.expand.tree import RuleError, clone, dig, ensure
from reconciler.model import UnreadRevision, units

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.model import Obj, RevisionInfo

INSTANCETYPE_KEY, PREFERENCE_KEY = "instancetype", "preference"
# How a pinned VM moves to the repository's revision (said with every newer revision).
ROLL_FORWARD_HINT = (
    "roll it forward with `reconciler apply --roll-forward vm/NAME`, or in git with annotation "
    'reconciler.kubevirt.io/roll-forward: "true"'
)
GIT_PREFIX = "git:"

KINDS = MappingProxyType(
    {
        INSTANCETYPE_KEY: MappingProxyType(
            {
                "": CLUSTER_INSTANCETYPE,
                "virtualmachineclusterinstancetype": CLUSTER_INSTANCETYPE,
                "virtualmachineclusterinstancetypes": CLUSTER_INSTANCETYPE,
                "virtualmachineinstancetype": INSTANCETYPE,
                "virtualmachineinstancetypes": INSTANCETYPE,
            }
        ),
        PREFERENCE_KEY: MappingProxyType(
            {
                "": CLUSTER_PREFERENCE,
                "virtualmachineclusterpreference": CLUSTER_PREFERENCE,
                "virtualmachineclusterpreferences": CLUSTER_PREFERENCE,
                "virtualmachinepreference": PREFERENCE,
                "virtualmachinepreferences": PREFERENCE,
            }
        ),
    }
)
MATCHER_TYPE = MappingProxyType(
    {INSTANCETYPE_KEY: "InstancetypeMatcher", PREFERENCE_KEY: "PreferenceMatcher"}
)
RESOURCE = MappingProxyType(
    {
        CLUSTER_INSTANCETYPE: "virtualmachineclusterinstancetypes.instancetype.kubevirt.io",
        INSTANCETYPE: "virtualmachineinstancetypes.instancetype.kubevirt.io",
        CLUSTER_PREFERENCE: "virtualmachineclusterpreferences.instancetype.kubevirt.io",
        PREFERENCE: "virtualmachinepreferences.instancetype.kubevirt.io",
        CONTROLLER_REVISION: "controllerrevisions.apps",
        PVC: "persistentvolumeclaims",
        DATA_VOLUME: "datavolumes.cdi.kubevirt.io",
        DATA_SOURCE: "datasources.cdi.kubevirt.io",
        VOLUME_SNAPSHOT: "volumesnapshots.snapshot.storage.k8s.io",
    }
)
FAMILY = MappingProxyType(
    {
        INSTANCETYPE_KEY: (INSTANCETYPE, CLUSTER_INSTANCETYPE),
        PREFERENCE_KEY: (PREFERENCE, CLUSTER_PREFERENCE),
    }
)

DEFAULT_INSTANCETYPE_LABEL = "instancetype.kubevirt.io/default-instancetype"
DEFAULT_INSTANCETYPE_KIND_LABEL = "instancetype.kubevirt.io/default-instancetype-kind"
DEFAULT_PREFERENCE_LABEL = "instancetype.kubevirt.io/default-preference"
DEFAULT_PREFERENCE_KIND_LABEL = "instancetype.kubevirt.io/default-preference-kind"
LABELS = MappingProxyType(
    {
        INSTANCETYPE_KEY: (DEFAULT_INSTANCETYPE_LABEL, DEFAULT_INSTANCETYPE_KIND_LABEL),
        PREFERENCE_KEY: (DEFAULT_PREFERENCE_LABEL, DEFAULT_PREFERENCE_KIND_LABEL),
    }
)


def not_found(kind: str, name: str) -> str:
    return f'{RESOURCE.get(kind, kind)} "{name}" not found'


def missing(catalog: Catalog, kind: str, namespace: str, name: str) -> str:
    """KubeVirt's "not found", and what the repository has instead."""
    ns = "" if kind in (CLUSTER_INSTANCETYPE, CLUSTER_PREFERENCE) else (namespace or "default")
    names = sorted({m.name for m in catalog.of_kind(kind, ns)})
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        hint = f"; did you mean {close[0]}?"
    elif names:
        hint = f" (the repository has {', '.join(names[:8])}{', …' if len(names) > 8 else ''})"
    else:
        hint = f" (the repository has no {kind})"
    return not_found(kind, name) + hint


# --- §a.4 matcher validation ----------------------------------------------------------


def validate_matcher(key: str, matcher: Obj) -> None:
    where = ("spec", key)
    if not matcher.get("name") and not matcher.get("inferFromVolume"):
        raise RuleError(
            f"Either Name or InferFromVolume should be provided within the {MATCHER_TYPE[key]}", where
        )
    if matcher.get("inferFromVolume"):
        if matcher.get("name"):
            raise RuleError(
                "Name already set, should be cleared before setting inferFromVolume", (*where, "name")
            )
        if matcher.get("kind"):
            raise RuleError(
                "Kind already set, should be cleared before setting inferFromVolume", (*where, "kind")
            )
    policy = matcher.get("inferFromVolumeFailurePolicy")
    if policy is not None and policy not in ("Reject", "Ignore"):
        raise RuleError(
            f"Invalid value '{policy}' for InferFromVolumeFailurePolicy",
            (*where, "inferFromVolumeFailurePolicy"),
        )


def resolve_kind(key: str, matcher: Obj) -> str:
    raw = str(matcher.get("kind") or "")
    kind = KINDS[key].get(raw.lower())
    if kind is None:
        raise RuleError(f"got unexpected kind in {MATCHER_TYPE[key]}: {raw}", ("spec", key, "kind"))
    return kind


# --- §a.6 inferFromVolume -----------------------------------------------------------


class IgnorableInferenceError(RuleError):
    """An inference failure that policy ``Ignore`` turns into "no matcher"."""


def _from_labels(labels: object, key: str) -> tuple[str, str]:
    name_label, kind_label = LABELS[key]
    labels = labels if isinstance(labels, dict) else {}
    if name_label not in labels:
        raise IgnorableInferenceError(f"unable to find required {name_label} label on the volume")
    return str(labels[name_label]), str(labels.get(kind_label) or "")


def _labels(obj: Obj) -> object:
    meta = obj.get("metadata")
    return meta.get("labels") if isinstance(meta, dict) else None


def _get(catalog: Catalog, kind: str, namespace: str, name: str) -> Obj:
    found = catalog.get(kind, namespace, name)
    if found is None:
        raise RuleError(missing(catalog, kind, namespace, name))
    return found.obj


def _from_pvc(catalog: Catalog, name: str, namespace: str, key: str) -> tuple[str, str]:
    return _from_labels(_labels(_get(catalog, PVC, namespace, name)), key)


def _from_data_source(catalog: Catalog, name: str, namespace: str, key: str) -> tuple[str, str]:
    ds = _get(catalog, DATA_SOURCE, namespace, name)
    try:
        return _from_labels(_labels(ds), key)
    except IgnorableInferenceError:
        pass
    source = dig(ds, "spec", "source")
    if not isinstance(source, dict):  # ``source: [x]``: no PVC nor snapshot to infer from
        source = {}
    if isinstance(source.get("pvc"), dict):
        return _from_pvc(
            catalog,
            str(source["pvc"].get("name") or ""),
            str(source["pvc"].get("namespace") or namespace),
            key,
        )
    if isinstance(source.get("snapshot"), dict):
        snap = source["snapshot"]
        ns = str(snap.get("namespace") or namespace)
        return _from_labels(_labels(_get(catalog, VOLUME_SNAPSHOT, ns, str(snap.get("name") or ""))), key)
    raise IgnorableInferenceError(
        "unable to infer defaults from DataSource that doesn't provide DataVolumeSourcePVC"
    )


def _from_dv_spec(catalog: Catalog, spec: object, namespace: str, key: str) -> tuple[str, str]:
    spec = spec if isinstance(spec, dict) else {}
    pvc = dig(spec, "source", "pvc")
    if isinstance(pvc, dict):
        return _from_pvc(catalog, str(pvc.get("name") or ""), str(pvc.get("namespace") or namespace), key)
    snap = dig(spec, "source", "snapshot")
    if isinstance(snap, dict):
        ns = str(snap.get("namespace") or namespace)
        return _from_labels(_labels(_get(catalog, VOLUME_SNAPSHOT, ns, str(snap.get("name") or ""))), key)
    ref = spec.get("sourceRef")
    if isinstance(ref, dict):
        if ref.get("kind") != "DataSource":
            raise IgnorableInferenceError(
                f"unable to infer defaults from DataVolumeSourceRef as Kind {ref.get('kind')} is not supported"
            )
        return _from_data_source(
            catalog, str(ref.get("name") or ""), str(ref.get("namespace") or namespace), key
        )
    raise IgnorableInferenceError(
        "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported"
    )


def _from_data_volume(catalog: Catalog, vm_spec: Obj, name: str, namespace: str, key: str) -> tuple[str, str]:
    for dvt in vm_spec.get("dataVolumeTemplates") or []:
        if isinstance(dvt, dict) and dig(dvt, "metadata", "name") == name:
            return _from_dv_spec(catalog, dvt.get("spec"), namespace, key)
    dv = catalog.get(DATA_VOLUME, namespace, name)
    if dv is None:  # a garbage-collected DataVolume leaves its PVC of the same name
        return _from_pvc(catalog, name, namespace, key)
    try:
        return _from_labels(_labels(dv.obj), key)
    except IgnorableInferenceError:
        return _from_dv_spec(catalog, dv.obj.get("spec"), namespace, key)


def infer_from_volume(
    catalog: Catalog, vm_spec: Obj, namespace: str, volume: str, key: str
) -> tuple[str, str]:
    """(name, kind) from the labels of ``volume``'s backing object."""
    for vol in dig(vm_spec, "template", "spec", "volumes") or []:
        if not isinstance(vol, dict) or vol.get("name") != volume:
            continue
        if isinstance(vol.get("persistentVolumeClaim"), dict):
            return _from_pvc(
                catalog, str(vol["persistentVolumeClaim"].get("claimName") or ""), namespace, key
            )
        if isinstance(vol.get("dataVolume"), dict):
            return _from_data_volume(
                catalog, vm_spec, str(vol["dataVolume"].get("name") or ""), namespace, key
            )
        raise IgnorableInferenceError(
            f"unable to infer defaults from volume {volume} as type is not supported"
        )
    raise RuleError(f"unable to find volume {volume} to infer defaults", ("spec", key, "inferFromVolume"))


def apply_inference(catalog: Catalog, vm_spec: Obj, namespace: str, key: str) -> None:
    """Replace ``vm_spec[key]`` by the inferred matcher (or drop it under policy Ignore)."""
    matcher = vm_spec.get(key)
    if not isinstance(matcher, dict) or not matcher.get("inferFromVolume"):
        return
    ignore = matcher.get("inferFromVolumeFailurePolicy") == "Ignore"
    try:
        name, kind = infer_from_volume(catalog, vm_spec, namespace, str(matcher["inferFromVolume"]), key)
    except IgnorableInferenceError as err:
        if ignore:
            del vm_spec[key]
            return
        err.field = err.field or ("spec", key, "inferFromVolume")
        raise
    except RuleError as err:
        if not err.field:
            err.field = ("spec", key, "inferFromVolume")
        raise
    if ignore and key == INSTANCETYPE_KEY:
        domain = dig(vm_spec, "template", "spec", "domain")
        if isinstance(domain, dict):
            domain.pop("memory", None)
    vm_spec[key] = {"name": name, "kind": kind} if kind else {"name": name}


# --- §a.3 / §a.5 resolution ----------------------------------------------------------


@dataclass
class Resolution:
    spec: Obj
    info: RevisionInfo
    newer: RevisionInfo | None = None
    warnings: list[str] = field(default_factory=list)
    newer_note: str = ""  # the warning that ``newer`` is not used (the VM keeps its captured revision)


def git_commit(matcher: Obj | None) -> str:
    rev = str((matcher or {}).get("revisionName") or "")
    return rev[len(GIT_PREFIX) :] if rev.startswith(GIT_PREFIX) else ""


def _same_object(pin: RevisionInfo, kind: str, name: str, namespace: str) -> bool:
    return pin.kind == kind and pin.name == name and (pin.namespace or "") == namespace


def _from_revision(catalog: Catalog, key: str, rev: str, namespace: str) -> tuple[Obj, RevisionInfo]:
    cr = catalog.get(CONTROLLER_REVISION, namespace, rev)
    if cr is None:
        raise RuleError(not_found(CONTROLLER_REVISION, rev), ("spec", key, "revisionName"))
    data = cr.obj.get("data")
    parsed = isinstance(data, str)
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, RecursionError):  # nested deeper than Python's stack
            data = None
    if (
        not isinstance(data, dict)
        or data.get("kind") not in FAMILY[key]
        or not isinstance(data.get("spec", {}), dict)
    ):
        raise RuleError(
            f"controllerrevision {rev} does not hold a {' or '.join(FAMILY[key])}",
            ("spec", key, "revisionName"),
        )
    ns = "" if data["kind"] in (CLUSTER_INSTANCETYPE, CLUSTER_PREFERENCE) else namespace
    info = revision_info(data, ns, memo=None if parsed else catalog.revisions)
    if key == INSTANCETYPE_KEY and str(data.get("apiVersion") or "").endswith(("/v1alpha1", "/v1alpha2")):
        data = _converted_alpha_instancetype(data)
    return data, info


def _converted_alpha_instancetype(data: Obj) -> Obj:
    """KubeVirt's generated alpha -> v1beta1 conversion of a revision's instancetype.

    It turns an absent ``cpu.model`` into ``""`` and absent ``dedicatedCPUPlacement`` /
    ``isolateEmulatorThread`` into ``false``, so a VM setting those fields conflicts
    (kubevirt-semantics §a.1). Objects read directly do not have this quirk.
    """
    converted: Obj = clone(data)
    spec = ensure(converted, "spec")
    cpu = ensure(spec, "cpu")
    cpu.setdefault("model", "")
    cpu.setdefault("dedicatedCPUPlacement", False)
    cpu.setdefault("isolateEmulatorThread", False)
    return converted


def resolve(
    catalog: Catalog,
    key: str,
    matcher: Obj,
    namespace: str,
    pinned: Mapping[str, RevisionInfo] | None,
    follow: bool,
) -> Resolution:
    kind = resolve_kind(key, matcher)
    name = str(matcher.get("name") or "")
    ns = "" if kind in (CLUSTER_INSTANCETYPE, CLUSTER_PREFERENCE) else namespace
    pin = (pinned or {}).get(key)
    rev = str(matcher.get("revisionName") or "")
    current = catalog.get(kind, ns, name)
    current_info = revision_info(current.obj, ns, memo=catalog.revisions) if current is not None else None
    label = f"{key} {name}"

    if rev.startswith(GIT_PREFIX):
        commit = rev[len(GIT_PREFIX) :]
        if isinstance(pin, UnreadRevision):
            raise RuleError(f"{label}: revision {rev}: {pin.cause}", ("spec", key, "revisionName"))
        if (
            pin is None
            or not pin.commit
            or not commit
            or not (pin.commit.startswith(commit) or commit.startswith(pin.commit))
            or not _same_object(pin, kind, name, ns)
            or not pin.data
        ):
            raise RuleError(
                f"{label}: revision {rev} was not supplied (expand with the repository, e.g. --repo, so that "
                "commit can be read)",
                ("spec", key, "revisionName"),
            )
        return _checked(catalog, key, _replay(pin, key), pin, current_info)
    unresolved = ""
    if rev:
        if pin is not None and pin.data and _same_object(pin, kind, name, ns) and names_revision(rev, pin):
            return _checked(catalog, key, _replay(pin, key), pin, current_info)
        if catalog.get(CONTROLLER_REVISION, namespace, rev) is not None:
            obj, info = _from_revision(catalog, key, rev, namespace)
            return _checked(catalog, key, obj, info, None)
        # Not in the repository: a cluster's ControllerRevision, as a `kubectl get vm -o yaml`
        # export carries. KubeVirt would fail (NotFound); here the VM is taken as unpinned.
        unresolved = (
            f"{label}: revisionName {rev} is not in the repository (a cluster's ControllerRevision, as in "
            f"an export); treated as unpinned: the repository's {kind} is used and captured at first apply"
        )
    if pin is not None and not follow and pin.data and _same_object(pin, kind, name, ns):
        res = _checked(catalog, key, _replay(pin, key), pin, current_info)
        if current_info is None:
            res.warnings.append(f"{label} is no longer in the repository; the captured revision is used")
    elif current is None or current_info is None:
        raise RuleError(missing(catalog, kind, ns, name), ("spec", key, "name"))
    else:
        res = _checked(catalog, key, current.obj, current_info, None)
    if unresolved:
        res.warnings.append(unresolved)
    return res


def _replay(pin: RevisionInfo, key: str) -> Obj:
    try:
        return replay(pin)
    except ValueError as err:
        raise RuleError(f"{key} {pin.name}: {err}", ("spec", key)) from err


def _checked(
    catalog: Catalog, key: str, obj: Obj, info: RevisionInfo, current: RevisionInfo | None
) -> Resolution:
    spec = obj.get("spec") or {}
    got = catalog.resolved.get((VALID, id(info))) if key == INSTANCETYPE_KEY else (info, ())
    if got is None or got[0] is not info:  # once per record, held: its spec is one function of it
        _validate_instancetype(spec, info)
        catalog.resolved[(VALID, id(info))] = (info, ())
    res = Resolution(spec=spec, info=info)
    if current is not None and current.hash != info.hash:
        res.newer = current
        res.newer_note = (
            f"{key} {info.name}: a newer revision is in the repository ({current.hash[:12]}); "
            f"the VM keeps its captured revision ({info.hash[:12]}); {ROLL_FORWARD_HINT}"
        )
    return res


# ``Catalog.resolved``'s key of an instancetype revision found valid (the catalog object it
# was made of, by identity, or the captured data it holds: checked once per record).
VALID = "valid instancetype"


def _validate_instancetype(spec: Obj, info: RevisionInfo) -> None:
    guest = dig(spec, "cpu", "guest")
    if isinstance(guest, bool) or not isinstance(guest, int) or guest < 1:
        raise RuleError(f"{info.kind} {info.name}: spec.cpu.guest must be a positive integer, got {guest!r}")
    mem = dig(spec, "memory", "guest")
    if mem is None or not _positive(mem):
        raise RuleError(
            f"{info.kind} {info.name}: spec.memory.guest must be a positive quantity, got {mem!r}"
        )
    pct = dig(spec, "memory", "overcommitPercent")
    if pct is not None and (isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100):
        raise RuleError(f"{info.kind} {info.name}: spec.memory.overcommitPercent must be 0-100, got {pct!r}")


def _positive(quantity: object) -> bool:
    """A quantity above zero (its ceiling is: read once, no fraction made)."""
    try:
        return units.quantity_ceil(quantity) > 0
    except units.QuantityError:
        return False


def git_revisions(vm: Obj) -> dict[str, str]:
    """``{"instancetype": commit, ...}`` for each matcher using ``revisionName: git:<commit>``.

    The caller reads the repository at each commit, finds the object the matcher
    names there and passes ``revision_info(obj, namespace, commit)`` in ``pinned``.
    """
    return git_commits(vm.get("spec"))


def git_commits(spec: object) -> dict[str, str]:
    """``git_revisions`` of a VM's ``spec`` (its matchers are all it reads)."""
    spec = spec if isinstance(spec, dict) else {}
    out = {}
    for key in (INSTANCETYPE_KEY, PREFERENCE_KEY):
        commit = git_commit(spec.get(key) if isinstance(spec.get(key), dict) else None)
        if commit:
            out[key] = commit
    return out
