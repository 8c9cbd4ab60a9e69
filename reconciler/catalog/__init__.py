"""The object set one expansion works on, indexed by kind, namespace and name.

Input: parsed manifests (after overlays). Output: a ``Catalog`` holding the
VirtualMachines in input order, every other known object by
``(kind, namespace, name)``; an unknown kind or API version is an error at its line.
Namespaced documents without ``metadata.namespace`` live in ``default``; cluster
kinds have namespace ``""``. Pure: never reads files, never mutates a manifest.
Raises ``ManifestError`` (file:line) for what later stages rely on: objects
with a kind and a name, a VM with a ``spec.template`` mapping, no duplicates, and a
revision within ``limits``' budgets (objects and their bytes, pool replicas counted
before they are made, Secrets).
What one catalog learns that the next can use (each document's size, check and facts in
one entry, Secret digests, schema validators) is kept in the caller's ``CatalogCache``
(``catalog.cache``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler import manifests
from reconciler.catalog import admission, pools, shapes
from reconciler.catalog import schema as openapi
from reconciler.catalog.cache import UNCHECKED, Doc
from reconciler.catalog.cache import CatalogCache as CatalogCache
from reconciler.errors import ManifestError, ReconcilerError
from reconciler.manifests import limits
from reconciler.model import (
    NAMESPACED_DEFAULT,
    FieldPath,
    Manifest,
    Obj,
    Problem,
    RevisionInfo,
    Severity,
    VMKey,
    format_path,
    trees,
)
from reconciler.model.keys import InvalidKey
from reconciler.records import dataclass
from reconciler.wording.escape import located, printable

if TYPE_CHECKING:
    from reconciler.context import RevisionCache

T = TypeVar("T")

VIRTUAL_MACHINE = "VirtualMachine"
PRESET = "VirtualMachineInstancePreset"
POOL = "VirtualMachinePool"
INSTANCETYPE = "VirtualMachineInstancetype"
CLUSTER_INSTANCETYPE = "VirtualMachineClusterInstancetype"
PREFERENCE = "VirtualMachinePreference"
CLUSTER_PREFERENCE = "VirtualMachineClusterPreference"
CONTROLLER_REVISION = "ControllerRevision"
PVC = "PersistentVolumeClaim"
DATA_VOLUME = "DataVolume"
DATA_SOURCE = "DataSource"
VOLUME_SNAPSHOT = "VolumeSnapshot"
SECRET = "Secret"

INSTANCETYPE_GROUP = "instancetype.kubevirt.io"
INSTANCETYPE_VERSIONS = ("v1alpha1", "v1alpha2", "v1beta1", "v1")

CLUSTER_KINDS = frozenset({CLUSTER_INSTANCETYPE, CLUSTER_PREFERENCE, "Namespace"})
INSTANCETYPE_KINDS = frozenset({INSTANCETYPE, CLUSTER_INSTANCETYPE, PREFERENCE, CLUSTER_PREFERENCE})

KUBEVIRT_VERSIONS = ("kubevirt.io/v1", "kubevirt.io/v1alpha3")
# The kinds a VM repository may hold, with the API versions each is served in. Every
# other kind or version is an error naming file:line: a typo in `kind:` must never
# silently drop a VM (and, with pruning on, delete its domain). Namespace is allowed
# and has no effect here (namespaces need not be created on a libvirt host).
API_VERSIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        VIRTUAL_MACHINE: KUBEVIRT_VERSIONS,
        PRESET: KUBEVIRT_VERSIONS,
        **{k: tuple(f"{INSTANCETYPE_GROUP}/{v}" for v in INSTANCETYPE_VERSIONS) for k in INSTANCETYPE_KINDS},
        CONTROLLER_REVISION: ("apps/v1",),
        PVC: ("v1",),
        DATA_VOLUME: ("cdi.kubevirt.io/v1beta1", "cdi.kubevirt.io/v1alpha1"),
        DATA_SOURCE: ("cdi.kubevirt.io/v1beta1",),
        VOLUME_SNAPSHOT: ("snapshot.storage.k8s.io/v1", "snapshot.storage.k8s.io/v1beta1"),
        "Secret": ("v1",),  # cloud-init userDataSecretRef / networkDataSecretRef
        "ConfigMap": ("v1",),
        "Namespace": ("v1",),
        POOL: ("pool.kubevirt.io/v1beta1", "pool.kubevirt.io/v1alpha1"),
    }
)
KNOWN_KINDS = frozenset(API_VERSIONS)
# KubeVirt kinds a libvirt host cannot run as such (yet): named in the error.
UNSUPPORTED_KINDS = MappingProxyType(
    {
        "VirtualMachineInstance": "a bare VMI has no run strategy here: write a VirtualMachine",
        "VirtualMachineInstanceReplicaSet": "replica sets are not supported on libvirt hosts",
    }
)

Key = tuple[str, str, str]  # (kind, namespace, name)


Reader = Callable[[str], bytes]  # a FileView's ``read``: file bytes by repository path


def locate(manifest: Manifest, path: FieldPath, read: Reader | None = None) -> tuple[int, int]:
    """(line, column) of ``path`` inside ``manifest``; the document line when the file cannot be read."""
    if read is None or not manifest.path or not path:
        return manifest.line, 0
    try:
        data = read(manifest.path)
        line, column = manifests.locate(data, manifest.line, path)
    except (OSError, KeyError, ValueError, ReconcilerError):
        return manifest.line, 0
    return (line or manifest.line), column


def manifest_error(
    manifest: Manifest, message: str, path: FieldPath = (), read: Reader | None = None
) -> ManifestError:
    """An error at the field ``path`` of ``manifest``: where it was written (a field an
    overlay set: in that overlay's file, see ``manifests.field_position``)."""
    if manifest.set_by and path:
        file, line, column = manifests.field_position(manifest, path, read)
        return ManifestError(message, path=file, line=line, column=column, field=format_path(path) or None)
    line, column = locate(manifest, path, read)
    return ManifestError(
        message, path=manifest.path, line=line, column=column, field=format_path(path) or None
    )


def object_namespace(manifest: Manifest) -> str:
    if manifest.kind in CLUSTER_KINDS:
        return ""
    return manifest.namespace or NAMESPACED_DEFAULT


@dataclass(frozen=True, slots=True)
class Catalog:
    """VMs in input order (with their keys) plus every other known object by (kind,
    namespace, name)."""

    vms: tuple[Manifest, ...] = ()
    objects: Mapping[Key, Manifest] = field(default_factory=dict)
    # Each VM's key, in the order of ``vms``: made (and checked) once, here.
    keys: tuple[VMKey, ...] = ()
    warnings: tuple[Problem, ...] = ()
    read: Reader | None = None  # for error locations only
    # Presets by namespace, built on first use: one pass over the objects, not one per VM.
    _presets: dict[str, tuple[Manifest, ...]] = field(default_factory=dict, compare=False, repr=False)
    # The revision of each instancetype or preference object asked for, by identity
    # (``expand.revision_info``): every VM using one shares one record and its JSON.
    revisions: dict[tuple[int, str, str], tuple[object, RevisionInfo]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # What expansion found of each instancetype or preference revision a VM resolved to
    # (its warnings, that it is valid), by the identity of its record, held: found once
    # however many VMs use it (``expand``).
    resolved: dict[tuple[str, int], tuple[RevisionInfo, tuple[str, ...]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # Digests of Secret values by content (``SecretData.digest``): the catalog cache's.
    digests: RevisionCache[bytes, str] | None = field(default=None, compare=False, repr=False)
    # What later stages derive from a document's tree, by its identity (``fact``): the cache's.
    facts: CatalogCache | None = field(default=None, compare=False, repr=False)

    def fact(self, m: Manifest, tag: str, derive: Callable[[Obj], T]) -> T:
        """``derive(m.obj)`` (``tag`` names it), kept by the catalog cache for the very
        document ``m``: a rebuild reads no unchanged document's tree (``model.trees``)."""
        if self.facts is None:
            return derive(m.obj)
        return self.facts.fact(m, tag, derive)

    def locate(self, manifest: Manifest, path: FieldPath) -> tuple[int, int]:
        return locate(manifest, path, self.read)

    def keyed_vms(self) -> Iterator[tuple[VMKey, Manifest]]:
        """Each VM with its key, in input order."""
        return zip(self.keys, self.vms, strict=True)

    def get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        ns = "" if kind in CLUSTER_KINDS else (namespace or NAMESPACED_DEFAULT)
        return self.objects.get((kind, ns, name))

    def of_kind(self, kind: str, namespace: str | None = None) -> Iterator[Manifest]:
        """Objects of ``kind`` (in one namespace if given), in input order."""
        for (k, ns, _), m in self.objects.items():
            if k == kind and (namespace is None or ns == namespace):
                yield m

    def presets(self, namespace: str) -> list[Manifest]:
        if not self._presets:
            index: dict[str, list[Manifest]] = {}
            for (k, ns, _), m in self.objects.items():
                if k == PRESET:
                    index.setdefault(ns, []).append(m)
            self._presets.update({ns: tuple(ms) for ns, ms in index.items()})
            self._presets.setdefault("", ())  # marks the index as built
        return list(self._presets.get(namespace or NAMESPACED_DEFAULT, ()))


def _warning(m: Manifest, message: str, field: str = "") -> Problem:
    """A warning about document ``m`` (at its first line)."""
    return Problem(
        message,
        subject=f"{m.kind} {m.name}",
        path=m.path,
        line=m.line if m.path else 0,
        field=field,
        severity=Severity.WARNING,
    )


def _check_schema(m: Manifest, read: Reader | None, validators: openapi.Validators) -> list[Problem]:
    """KubeVirt's schema (``openapi``): an unknown or mistyped field is an error at its
    line; a field only KubeVirt requires is a warning."""
    found, capped = openapi.problems_capped(m.kind, m.obj, validators, limits.MAX_SCHEMA_ERRORS)
    errors = [p for p in found if not p.only_kubevirt]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        if capped:
            more = f" (and more than {len(errors) - 1} more)"
        message = f"{m.kind} {m.name}: {format_path(first.path)}: {first.message}{more}"
        raise _manifest_error(m, message, first.path, read)
    return [_warning(m, p.message, format_path(p.path)) for p in found]


def _check_admission(m: Manifest, read: Reader | None) -> list[Problem]:
    """KubeVirt's admission rules (``admission.RULES``): a refusal is an error at its
    line; what a libvirt host honours though KubeVirt refuses it is a warning."""
    found = admission.review(m.kind, m.obj)
    for f in found:
        if f.error:
            raise _manifest_error(m, f"{m.kind} {m.name}: {format_path(f.path)}: {f.message}", f.path, read)
    return [_warning(m, f.message, format_path(f.path)) for f in found]


def _validate(m: Manifest, read: Reader | None) -> VMKey | None:
    """Check one document's names and shape; a VirtualMachine's key, made here (once)."""

    def manifest_error(m: Manifest, message: str, path: FieldPath = ()) -> ManifestError:
        return _manifest_error(m, message, path, read)

    raw_name = m.metadata.get("name")
    if raw_name is not None and not isinstance(raw_name, str):
        raise manifest_error(m, f"{m.kind}: {limits.name_problem(raw_name)}", ("metadata", "name"))
    if not m.name:
        raise manifest_error(m, f"{m.kind}: metadata.name is required", ("metadata",))
    shapes.check_metadata_maps(m, manifest_error)
    kind = m.kind
    vm_key = None
    if kind in INSTANCETYPE_KINDS:
        group, _, version = m.api_version.partition("/")
        if group != INSTANCETYPE_GROUP or version not in INSTANCETYPE_VERSIONS:
            raise manifest_error(
                m,
                f"{kind} {m.name}: apiVersion {m.api_version!r} is not "
                f"{INSTANCETYPE_GROUP}/{{{','.join(INSTANCETYPE_VERSIONS)}}}",
                ("apiVersion",),
            )
        spec = m.obj.get("spec")
        if spec is not None and not isinstance(spec, dict):
            raise manifest_error(m, f"{kind} {m.name}: spec must be a mapping", ("spec",))
    elif kind == VIRTUAL_MACHINE:
        vm_key = _vm_key(m, manifest_error)
        spec = m.obj.get("spec")
        if not isinstance(spec, dict):
            raise manifest_error(
                m, f"VirtualMachine {m.name}: spec is required and must be a mapping", ("spec",)
            )
        template = spec.get("template")
        if not isinstance(template, dict):
            raise manifest_error(
                m,
                f"VirtualMachine {m.name}: spec.template is required and must be a mapping",
                ("spec", "template"),
            )
        for key in ("metadata", "spec"):
            if template.get(key) is not None and not isinstance(template.get(key), dict):
                raise manifest_error(
                    m,
                    f"VirtualMachine {m.name}: spec.template.{key} must be a mapping",
                    ("spec", "template", key),
                )
        for key in ("instancetype", "preference"):
            if spec.get(key) is not None and not isinstance(spec.get(key), dict):
                raise manifest_error(
                    m, f"VirtualMachine {m.name}: spec.{key} must be a mapping", ("spec", key)
                )
        shapes.check_named_lists(m, template.get("spec") or {}, manifest_error)
    elif kind in shapes.DATA_BLOCKS:
        shapes.check_data_blocks(m, manifest_error)
    elif kind == PRESET:
        spec = m.obj.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("selector", {}), dict):
            raise manifest_error(m, f"{kind} {m.name}: spec.selector is required", ("spec",))
    return vm_key


_manifest_error = manifest_error


def _vm_key(m: Manifest, error: Callable[[Manifest, str, FieldPath], ManifestError]) -> VMKey:
    """The VM's key, made once here and carried by every later stage: KubeVirt's name
    rules and the host's file-name limit are checked where it is made (``VMKey.checked``)."""
    try:
        return VMKey.checked(m.metadata.get("namespace"), m.name)
    except InvalidKey as err:
        who = f"VirtualMachine {m.name}" if err.named else "VirtualMachine"
        raise error(m, f"{who}: {err.message}", tuple(err.field.split("."))) from None


def _check_kind(m: Manifest, read: Reader | None) -> None:
    """An unknown kind or API version is an error at its line (never a VM silently dropped)."""
    kind = m.kind
    if kind in UNSUPPORTED_KINDS:
        raise _manifest_error(m, f"{kind} {m.name or '?'}: {UNSUPPORTED_KINDS[kind]}", ("kind",), read)
    versions = API_VERSIONS.get(kind)
    if versions is None:
        close = difflib.get_close_matches(kind, API_VERSIONS, n=1)
        hint = f"; did you mean {close[0]}?" if close else f" (kinds here: {', '.join(sorted(API_VERSIONS))})"
        raise _manifest_error(m, f"unknown kind {kind!r}{hint}", ("kind",), read)
    if m.api_version not in versions and kind not in INSTANCETYPE_KINDS:  # those say more below
        raise _manifest_error(
            m,
            f"{kind} {m.name or '?'}: apiVersion {m.api_version or '(none)'!r} is not served for this kind "
            f"(use {' or '.join(versions)})",
            ("apiVersion",),
            read,
        )


# What the API server writes into an object (a `kubectl get -o yaml` export carries them):
# never part of the desired state, ignored with one notice per object.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def server_populated(obj: Mapping[str, Any]) -> list[str]:
    """The server-populated fields ``obj`` carries, by path."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    found = [f"metadata.{k}" for k in SERVER_METADATA if k in meta]
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        found.append(f"metadata.annotations[{LAST_APPLIED}]")
    if "status" in obj:
        found.append("status")
    return found


_Checked = tuple[tuple[Problem, ...], VMKey | None, tuple[str, ...]]  # warnings, key, server fields


def _doc(m: Manifest, read: Reader | None, cache: CatalogCache, budget: limits.RevisionBudget) -> Doc:
    """One document sized (its size spent from ``budget``) and checked (kind, names,
    KubeVirt's schema), through the cache (by the document's identity)."""
    doc = cache.docs.same(m, lambda: Doc(m, trees.briefly(m, lambda: limits.object_size(m.obj))))
    if over := budget.spend(1, doc.size):
        raise manifest_error(m, over, (), read)
    if doc.key is UNCHECKED:
        doc.problems, doc.key, doc.exported = trees.briefly(m, lambda: _check(m, read, cache.validators))
    return doc


def _check(m: Manifest, read: Reader | None, validators: openapi.Validators) -> _Checked:
    if not m.kind:
        raise manifest_error(m, "kind is required", (), read)
    _check_kind(m, read)
    key = _validate(m, read)
    problems = tuple(_check_schema(m, read, validators) + _check_admission(m, read))
    return problems, key, tuple(server_populated(m.obj))


def build_catalog(
    documents: Sequence[Manifest], read: Reader | None = None, cache: CatalogCache | None = None
) -> Catalog:
    """Index ``documents``; VMs keep their order. Raises ManifestError on the first invalid object.

    ``read`` (a FileView's ``read``) is used only to point errors at a field's line.
    ``cache``: the caller's (``CatalogCache``); without it nothing is kept.
    """
    cache = cache if cache is not None else CatalogCache()
    try:
        return _build_catalog(documents, read, cache)
    finally:
        cache.end_run()


def _build_catalog(documents: Sequence[Manifest], read: Reader | None, cache: CatalogCache) -> Catalog:
    vms: list[Manifest] = []
    keys: list[VMKey] = []
    objects: dict[Key, Manifest] = {}
    warnings: list[Problem] = []
    budget = limits.RevisionBudget()
    for m in documents:
        if not m.holds_mapping():
            raise ManifestError("document is not a mapping", path=m.path, line=m.line)
        kind = m.kind
        doc = _doc(m, read, cache, budget)
        if kind == SECRET and (over := budget.secret()):
            raise manifest_error(m, over, (), read)
        vm_key, exported = doc.key, doc.exported
        warnings += doc.problems
        key = (kind, object_namespace(m), m.name)
        if key in objects:
            first = objects[key]
            ns = f"{key[1]}/" if key[1] else ""
            raise manifest_error(
                m,
                f"{printable(f'{kind} {ns}{m.name}')} is defined twice (first at {located(first)})",
                ("metadata", "name"),
                read,
            )
        objects[key] = m
        if vm_key is not None:
            vms.append(m)
            keys.append(vm_key)
        if kind == POOL:
            for vm, replica_key in _pool_replicas(m, read, budget, objects, warnings):
                vms.append(vm)
                keys.append(replica_key)
        if exported:
            warnings.append(
                _warning(
                    m, f"server-populated fields ignored ({', '.join(exported)}): an export from a cluster"
                )
            )
    return Catalog(
        vms=tuple(vms),
        objects=objects,
        keys=tuple(keys),
        warnings=tuple(warnings),
        read=read,
        digests=cache.digests,
        facts=cache,
    )


def _pool_replicas(
    m: Manifest,
    read: Reader | None,
    budget: limits.RevisionBudget,
    objects: dict[Key, Manifest],
    warnings: list[Problem],
) -> list[tuple[Manifest, VMKey]]:
    """A VirtualMachinePool's VirtualMachines, each checked and put into ``objects`` (its
    replicas counted in ``budget`` before they are made; what it ignores in ``warnings``)."""
    replicas, unused = pools.replicas(m, lambda d, msg, at: _manifest_error(d, msg, at, read))
    if unused:
        warnings.append(_warning(m, f"{', '.join(unused)} has no effect on a libvirt host"))
    template = (m.obj.get("spec") or {}).get("virtualMachineTemplate")
    if over := budget.spend(len(replicas), len(replicas) * limits.object_size(template)):
        raise manifest_error(m, f"{POOL} {m.name}: {over}", ("spec", "replicas"), read)
    out = []
    for vm in replicas:
        replica_key = _validate(vm, read)
        assert replica_key is not None
        vkey = (VIRTUAL_MACHINE, object_namespace(vm), vm.name)
        if vkey in objects:
            raise manifest_error(
                m,
                f"{POOL} {m.name}: replica {vm.name} is also defined at {located(objects[vkey])}",
                ("metadata", "name"),
                read,
            )
        objects[vkey] = vm
        out.append((vm, replica_key))
    return out
