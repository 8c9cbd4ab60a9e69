"""A KubeVirt export turned into a repository: ``kubectl get vm,vmpool,... -A -o yaml``.

Input: the bytes of the export (a ``List`` whose ``items`` are the objects, or plain
YAML documents) and its file name (for errors at file:line). Output: an
``ImportResult``: one file per object, ``<namespace>/<kind>-<name>.yaml`` (cluster-wide
objects under ``cluster/``), a ``kustomization.yaml`` per directory and one at the
root listing them; one ``Outcome`` per object. Pure.

What the cluster wrote is removed, so the repository holds what a person writes:
``status``, the server's metadata (``uid``, ``resourceVersion``, ``generation``,
``creationTimestamp``, ``managedFields``, ``selfLink``, ``finalizers``,
``ownerReferences``) and the annotations of kubectl, KubeVirt and kubemacpool
(``SERVER_ANNOTATIONS``). A ``revisionName`` naming a ControllerRevision the export
holds keeps it (the revision is written beside the VM, so the VM expands exactly as
it ran); one naming a revision the export lacks is removed, with a note (unpinned:
the repository's instancetype is used and captured at first apply). Objects of kinds
the repository does not take (Pods, Services, ...) are left out with the reason.
Every VM written is expanded as ``reconciler expand`` would: one that does not expand
is left out with its error.

An object's name and namespace become a file's path, so each is checked as Kubernetes
checks it for that kind (``path_problem``: a DNS-1123 subdomain, a Namespace's name and
every namespace a DNS-1123 label, the file name within 255 bytes) before it names a
file: an object whose name is none (``../../x``) is left out with that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler import catalog as catalog_stage
from reconciler import expand as expand_stage
from reconciler.errors import ManifestError, ReconcilerError
from reconciler.importer import IMPORTED, LEFT_OUT, ImportResult, Outcome, kustomization
from reconciler.manifests import clone, dump_documents, parse_objects
from reconciler.model import Manifest
from reconciler.model.keys import name_problem, namespace_problem
from reconciler.wording.escape import located, printable

if TYPE_CHECKING:
    from collections.abc import Callable

SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "finalizers",
    "ownerReferences",
)
SERVER_ANNOTATIONS = (
    "kubectl.kubernetes.io/last-applied-configuration",
    "kubevirt.io/latest-observed-api-version",
    "kubevirt.io/storage-observed-api-version",
    "kubemacpool.io/transaction-timestamp",
    "deployment.kubernetes.io/revision",
)
REVISION_KEYS = ("instancetype", "preference")
CLUSTER_DIR = "cluster"
MAX_FILE_NAME = 255  # bytes, the longest file name Linux file systems take


def _clean_metadata(meta: Any) -> None:
    if not isinstance(meta, dict):
        return
    for key in SERVER_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in SERVER_ANNOTATIONS:
            annotations.pop(key, None)
        if not annotations:
            del meta["annotations"]


def cleaned(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what the cluster wrote (a new mapping; ``obj`` is not changed):
    ``status`` at the top and in ``dataVolumeTemplates``, and the server's fields in every
    ``metadata`` (the object's, its templates', a pool's VM template's); an emptied
    template ``metadata`` is removed."""
    out: dict[str, Any] = clone({k: v for k, v in obj.items() if k != "status"})
    _clean_metadata(out.get("metadata"))
    _clean_nested(out.get("spec"))
    return out


def _clean_nested(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _clean_nested(item)
        return
    if not isinstance(node, dict):
        return
    meta = node.get("metadata")
    if isinstance(meta, dict):
        _clean_metadata(meta)
        if not meta:
            del node["metadata"]
    if "metadata" in node:
        node.pop("status", None)  # a dataVolumeTemplate's
    for key, value in node.items():
        if key != "metadata":
            _clean_nested(value)


def _objects(data: bytes, path: str) -> list[Manifest]:
    out: list[Manifest] = []
    for m in parse_objects(data, path):
        obj = m.obj
        if obj.get("kind") == "List" and isinstance(obj.get("items"), list):
            out.extend(Manifest(item, path, m.line) for item in obj["items"] if isinstance(item, dict))
        elif obj:
            out.append(m)
    return out


def object_path(obj: dict[str, Any]) -> str:
    kind = str(obj.get("kind") or "object").lower()
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "unnamed")
    if kind in (k.lower() for k in catalog_stage.CLUSTER_KINDS):
        return f"{CLUSTER_DIR}/{kind}-{name}.yaml"
    return f"{meta.get('namespace') or 'default'}/{kind}-{name}.yaml"


def path_problem(obj: dict[str, Any]) -> str:
    """Why the object's name or namespace cannot name its file ("" when both are
    Kubernetes names for its kind; ``object_path`` is then a path of two plain parts)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") in (None, ""):
        return "metadata.name is missing"
    name = meta["name"]
    if obj.get("kind") == "Namespace":  # a namespace's name is a DNS-1123 label
        why = namespace_problem(name).replace("metadata.namespace", "metadata.name", 1)
    else:
        why = name_problem(name)
    if why:
        return why
    if obj.get("kind") not in catalog_stage.CLUSTER_KINDS:
        why = namespace_problem(meta.get("namespace"))
        if why:
            return why
    file_name = object_path(obj).rpartition("/")[2]
    if len(file_name.encode()) > MAX_FILE_NAME:
        return (
            f"metadata.name is too long for its file name {file_name[:40]}...yaml "
            f"(at most {MAX_FILE_NAME} bytes): shorten it"
        )
    return ""


def _source(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    ns = meta.get("namespace")
    return printable(f"{obj.get('kind')} {f'{ns}/' if ns else ''}{meta.get('name')}")


def _unpin(obj: dict[str, Any], revisions: set[tuple[str, str]], notes: list[str]) -> set[tuple[str, str]]:
    """Drop ``revisionName``s the export does not hold; the (namespace, name) of those it does."""
    used: set[tuple[str, str]] = set()
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return used
    ns = str((obj.get("metadata") or {}).get("namespace") or "default")
    for key in REVISION_KEYS:
        matcher = spec.get(key)
        if not isinstance(matcher, dict) or not matcher.get("revisionName"):
            continue
        rev = str(matcher["revisionName"])
        if (ns, rev) in revisions:
            used.add((ns, rev))
            continue
        del matcher["revisionName"]
        notes.append(
            f"spec.{key}.revisionName {rev}: not in the export, removed (unpinned: the repository's "
            f"{matcher.get('name')} is used and captured at first apply)"
        )
    return used


def import_export(data: bytes, path: str, progress: Callable[[str], None] | None = None) -> ImportResult:
    """Read an export and lay out its repository (see the module's docstring)."""
    objects = _objects(data, path)
    revisions = {
        (str((o.obj.get("metadata") or {}).get("namespace") or "default"), str(o.obj["metadata"].get("name")))
        for o in objects
        if o.kind == catalog_stage.CONTROLLER_REVISION and isinstance(o.obj.get("metadata"), dict)
    }
    outcomes: list[Outcome] = []
    kept: list[tuple[Manifest, dict[str, Any], list[str]]] = []
    used: set[tuple[str, str]] = set()
    for i, m in enumerate(objects, 1):
        obj = cleaned(m.obj)
        source = _source(obj)
        if progress is not None:
            progress(f"[{i}/{len(objects)}] {source}")
        if m.kind in catalog_stage.UNSUPPORTED_KINDS or m.kind not in catalog_stage.KNOWN_KINDS:
            why = catalog_stage.UNSUPPORTED_KINDS.get(
                m.kind, "a kind a repository of this project does not take"
            )
            outcomes.append(Outcome(source, LEFT_OUT, "", (f"{located(m)}: {why}",)))
            continue
        why = path_problem(obj)
        if why:
            outcomes.append(Outcome(source, LEFT_OUT, "", (f"{located(m)}: {why}",)))
            continue
        notes: list[str] = []
        if m.kind in (catalog_stage.VIRTUAL_MACHINE, catalog_stage.POOL):
            used |= _unpin(obj, revisions, notes)
            template = (obj.get("spec") or {}).get("virtualMachineTemplate")  # a pool's VM
            if isinstance(template, dict):
                used |= _unpin(template, revisions, notes)
        kept.append((m, obj, notes))
    # ControllerRevisions no VM pins are left out: they describe the cluster's history.
    written: list[tuple[Manifest, dict[str, Any], list[str]]] = []
    for m, obj, notes in kept:
        if m.kind == catalog_stage.CONTROLLER_REVISION:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
            if key not in used:
                outcomes.append(
                    Outcome(_source(obj), LEFT_OUT, "", ("no VM of the export pins this revision",))
                )
                continue
        written.append((m, obj, notes))
    errors = _expansion_errors([Manifest(obj, object_path(obj), 1) for _, obj, _ in written])
    files: dict[str, str] = {}
    for m, obj, notes in written:
        rel = object_path(obj)
        source = _source(obj)
        if rel in errors:
            outcomes.append(Outcome(source, LEFT_OUT, "", (errors[rel],), tuple(notes)))
        elif rel in files:
            outcomes.append(Outcome(source, LEFT_OUT, "", (f"{located(m)}: a second object of this name",)))
        else:
            files[rel] = dump_documents([obj])
            outcomes.append(Outcome(source, IMPORTED, rel, (), tuple(notes)))
    return ImportResult(_with_kustomizations(files), tuple(outcomes))


def _with_kustomizations(files: dict[str, str]) -> dict[str, str]:
    out = dict(files)
    dirs: dict[str, list[str]] = {}
    for rel in files:
        d, _, name = rel.partition("/")
        dirs.setdefault(d, []).append(name)
    for d, names in dirs.items():
        out[f"{d}/kustomization.yaml"] = kustomization(sorted(names))
    out["kustomization.yaml"] = kustomization(sorted(dirs))
    return out


def _expansion_errors(manifests: list[Manifest]) -> dict[str, str]:
    """Per file, the error that keeps its object out of the repository (schema, expansion)."""
    errors: dict[str, str] = {}
    good: list[Manifest] = []
    for m in manifests:
        try:
            catalog_stage.build_catalog([m])
        except ManifestError as err:  # its own: a catalog of one object checks no reference to another
            errors[m.path] = str(err)
            continue
        good.append(m)
    try:
        cat = catalog_stage.build_catalog(good)
    except ManifestError as err:
        return {**errors, **{m.path: str(err) for m in good}}
    for vm in cat.vms:
        if not vm.path:
            continue
        try:
            expand_stage.expand_vm(vm, cat)
        except ReconcilerError as err:
            errors[vm.path] = str(err)
    return errors
