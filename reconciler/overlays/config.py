"""Where kustomize's transformers write, for the kinds it knows (its built-in config).

Input: nothing (tables), or a ``configurations`` file's parsed content. Output: a
``TransformerConfig`` of field specs. Pure. The tables describe the Kubernetes API the
same way kustomize 5's defaults do for the kinds a VM repository meets: KubeVirt kinds
are unknown to it, so only ``metadata`` is touched on them unless a ``configurations``
file says more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from reconciler.errors import OverlayError
from reconciler.overlays.resource import FieldSpec, fieldspec, split_path

# Objects that hold a pod template, and where the pod spec sits in them.
_POD_SPECS: tuple[tuple[str, str, str], ...] = (
    ("", "Pod", "spec"),
    ("", "PodTemplate", "template/spec"),
    ("", "ReplicationController", "spec/template/spec"),
    ("apps", "Deployment", "spec/template/spec"),
    ("apps", "ReplicaSet", "spec/template/spec"),
    ("apps", "DaemonSet", "spec/template/spec"),
    ("apps", "StatefulSet", "spec/template/spec"),
    ("batch", "Job", "spec/template/spec"),
    ("batch", "CronJob", "spec/jobTemplate/spec/template/spec"),
)
_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("ReplicationController", "spec/template/metadata"),
    ("Deployment", "spec/template/metadata"),
    ("ReplicaSet", "spec/template/metadata"),
    ("DaemonSet", "spec/template/metadata"),
    ("StatefulSet", "spec/template/metadata"),
    ("Job", "spec/template/metadata"),
    ("CronJob", "spec/jobTemplate/metadata"),
    ("CronJob", "spec/jobTemplate/spec/template/metadata"),
)


def _fs(path: str, kind: str = "", group: str = "", version: str = "", create: bool = False) -> FieldSpec:
    return FieldSpec(group, version, kind, split_path(path), create)


METADATA_LABELS = _fs("metadata/labels", create=True)
# kustomize 5.5's image fields (its transformer also rewrites every containers and
# initContainers list anywhere, so these make a second pass over the usual ones).
IMAGES: tuple[FieldSpec, ...] = tuple(
    _fs(p, create=True)
    for p in (
        "spec/containers[]/image",
        "spec/initContainers[]/image",
        "spec/template/spec/containers[]/image",
        "spec/template/spec/initContainers[]/image",
    )
)
METADATA_ANNOTATIONS = _fs("metadata/annotations", create=True)

# kustomize's volumeClaimTemplateLabels (builtinpluginconsts/volumeclaimmetadatalabels.go)
VOLUME_CLAIM_TEMPLATE_LABELS = FieldSpec(
    "apps", "", "StatefulSet", ("spec", "volumeClaimTemplates", "metadata", "labels"), True, 2
)
TEMPLATE_LABELS: tuple[FieldSpec, ...] = tuple(_fs(f"{p}/labels", k, create=True) for k, p in _TEMPLATES)

COMMON_LABELS: tuple[FieldSpec, ...] = (
    METADATA_LABELS,
    *TEMPLATE_LABELS,
    _fs("spec/selector", "Service", version="v1", create=True),
    _fs("spec/selector", "ReplicationController", version="v1", create=True),
    _fs("spec/selector/matchLabels", "Deployment", create=True),
    _fs("spec/selector/matchLabels", "ReplicaSet", create=True),
    _fs("spec/selector/matchLabels", "DaemonSet", create=True),
    _fs("spec/selector/matchLabels", "StatefulSet", "apps", create=True),
    VOLUME_CLAIM_TEMPLATE_LABELS,
    _fs("spec/selector/matchLabels", "Job", "batch"),
    _fs("spec/jobTemplate/spec/selector/matchLabels", "CronJob", "batch"),
    _fs("spec/selector/matchLabels", "PodDisruptionBudget", "policy"),
    _fs("spec/podSelector/matchLabels", "NetworkPolicy", "networking.k8s.io"),
    _fs("spec/ingress/from/podSelector/matchLabels", "NetworkPolicy", "networking.k8s.io"),
    _fs("spec/egress/to/podSelector/matchLabels", "NetworkPolicy", "networking.k8s.io"),
    *(
        _fs(f"spec/template/spec/{aff}/labelSelector/matchLabels", kind, "apps")
        for kind in ("Deployment", "StatefulSet")
        for aff in (
            "affinity/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm",
            "affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution",
            "affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm",
            "affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
            "topologySpreadConstraints",
        )
    ),
)

COMMON_ANNOTATIONS: tuple[FieldSpec, ...] = (
    METADATA_ANNOTATIONS,
    *(_fs(f"{p}/annotations", k, create=True) for k, p in _TEMPLATES),
)

# kustomize's namespace table (builtinpluginconsts/namespace.go); metadata/namespace is
# the namespace transformer's own
NAMESPACE: tuple[FieldSpec, ...] = (
    _fs("metadata/namespace", create=True),
    _fs("metadata/name", "Namespace", create=True),
    _fs("spec/service/namespace", "APIService", "apiregistration.k8s.io", create=True),
    _fs(
        "spec/conversion/webhook/clientConfig/service/namespace",
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
    ),
)
NAME_PREFIX: tuple[FieldSpec, ...] = (_fs("metadata/name"),)


@dataclass(frozen=True)
class NameRef:
    """Objects of kind ``kind`` are referred to by name at ``specs`` in other objects."""

    group: str
    version: str
    kind: str
    specs: tuple[FieldSpec, ...]


def _pod_refs(suffixes: tuple[str, ...]) -> tuple[FieldSpec, ...]:
    return tuple(_fs(f"{pod}/{s}", kind, group) for group, kind, pod in _POD_SPECS for s in suffixes)


def _name_refs(entries: Any) -> tuple[NameRef, ...]:
    """``nameReference`` entries of a configurations document -> records."""
    refs = []
    for entry in entries or ():
        if not isinstance(entry, dict):
            raise OverlayError("nameReference entries must be mappings")
        specs = tuple(fieldspec(s) for s in entry.get("fieldSpecs") or ())
        refs.append(
            NameRef(
                str(entry.get("group") or ""),
                str(entry.get("version") or ""),
                str(entry.get("kind") or ""),
                specs,
            )
        )
    return tuple(refs)


# kustomize's own default table (api/internal/konfig/builtinpluginconsts/namereference.go),
# pinned with its license by scripts/pin-kustomize-config.
# Read beside this package's files (``importlib.resources`` would import tempfile and
# zipfile into every build's start).
def _pinned(name: str) -> Any:
    return json.loads((Path(__file__).parent.parent / "data" / "kustomize" / f"{name}.json").read_text())


NAME_REFERENCES: tuple[NameRef, ...] = _name_refs(_pinned("namereference")["nameReference"])
# kustomize's varReference table (builtinpluginconsts/varreference.go): where $(VAR) is replaced
VAR_REFERENCE: tuple[FieldSpec, ...] = tuple(fieldspec(s) for s in _pinned("varreference")["varReference"])


@dataclass(frozen=True)
class TransformerConfig:
    """Field specs per transformer, plus name references; merged across a build."""

    common_labels: tuple[FieldSpec, ...] = COMMON_LABELS
    template_labels: tuple[FieldSpec, ...] = TEMPLATE_LABELS
    common_annotations: tuple[FieldSpec, ...] = COMMON_ANNOTATIONS
    namespace: tuple[FieldSpec, ...] = NAMESPACE
    name_prefix: tuple[FieldSpec, ...] = NAME_PREFIX
    name_references: tuple[NameRef, ...] = NAME_REFERENCES
    images: tuple[FieldSpec, ...] = IMAGES
    var_reference: tuple[FieldSpec, ...] = VAR_REFERENCE

    def merge(self, other: TransformerConfig) -> TransformerConfig:
        if other is self:
            return self
        return TransformerConfig(
            _union(self.common_labels, other.common_labels),
            _union(self.template_labels, other.template_labels),
            _union(self.common_annotations, other.common_annotations),
            _union(self.namespace, other.namespace),
            _union(self.name_prefix, other.name_prefix),
            _merge_refs(self.name_references, other.name_references),
            _union(self.images, other.images),
            _union(self.var_reference, other.var_reference),
        )


def _union(a: tuple[FieldSpec, ...], b: tuple[FieldSpec, ...]) -> tuple[FieldSpec, ...]:
    if a == b:
        return a
    seen = set(a)
    return a + tuple(x for x in b if x not in seen and not seen.add(x))  # type: ignore[func-returns-value]


def _merge_refs(a: tuple[NameRef, ...], b: tuple[NameRef, ...]) -> tuple[NameRef, ...]:
    if a == b:
        return a
    out = list(a)
    for ref in b:
        for i, have in enumerate(out):
            if (have.group, have.version, have.kind) == (ref.group, ref.version, ref.kind):
                out[i] = NameRef(have.group, have.version, have.kind, _union(have.specs, ref.specs))
                break
        else:
            out.append(ref)
    return tuple(out)


_CONFIG_FIELDS = MappingProxyType(
    {
        "commonLabels": "common_labels",
        "templateLabels": "template_labels",
        "commonAnnotations": "common_annotations",
        "namespace": "namespace",
        "namePrefix": "name_prefix",
        "nameSuffix": "name_prefix",
        "images": "images",
    }
)
_IGNORED_CONFIG_FIELDS = frozenset({"replicas", "nameSuffix"})


def config_from_file(doc: Any) -> TransformerConfig:
    """A ``configurations`` file -> a config holding only what it declares."""
    if not isinstance(doc, dict):
        raise OverlayError("a configurations file must hold a mapping")
    parts: dict[str, Any] = dict.fromkeys({*_CONFIG_FIELDS.values(), "var_reference"}, ())
    refs: list[NameRef] = []
    for key, value in doc.items():
        if key == "nameReference":
            refs.extend(_name_refs(value))
        elif key == "varReference":
            parts["var_reference"] = tuple(fieldspec(s) for s in value or ())
        elif key in _CONFIG_FIELDS and key != "nameSuffix":
            parts[_CONFIG_FIELDS[key]] = tuple(fieldspec(s) for s in value or ())
        elif key in _IGNORED_CONFIG_FIELDS:
            continue
        else:
            raise OverlayError(f"unsupported configurations field {key!r}")
    return TransformerConfig(
        parts["common_labels"],
        parts["template_labels"],
        parts["common_annotations"],
        parts["namespace"],
        parts["name_prefix"],
        tuple(refs),
        parts["images"],
        parts["var_reference"],
    )


def _merge_list(
    ref: str, key: str, strategy: str = "merge", map_keys: tuple[str, ...] = ()
) -> dict[str, Any]:
    out = {
        "type": "array",
        "items": {"$ref": f"#/definitions/{ref}"},
        "x-kubernetes-patch-merge-key": key,
        "x-kubernetes-patch-strategy": strategy,
    }
    if map_keys:
        out["x-kubernetes-list-map-keys"] = list(map_keys)
        out["x-kubernetes-list-type"] = "map"
    return out


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


def _kind(group: str, version: str, kind: str, spec: str) -> dict[str, Any]:
    return {
        "type": "object",
        "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": kind}],
        "properties": {"spec": _ref(spec)},
    }


def builtin_schema_doc() -> dict[str, Any]:
    """Merge keys of the built-in Kubernetes kinds that carry pod templates, and Services.

    A reduced form of the Kubernetes OpenAPI document kustomize embeds: only the lists
    it merges by key (containers by name, ports by containerPort, ...). A kustomization's
    ``openapi`` schema replaces it, as in kustomize.
    """
    defs: dict[str, Any] = {
        "Container": _obj(
            env=_merge_list("Item", "name"),
            ports=_merge_list("Item", "containerPort", map_keys=("containerPort", "protocol")),
            volumeMounts=_merge_list("Item", "mountPath"),
            volumeDevices=_merge_list("Item", "devicePath"),
        ),
        "Item": {"type": "object"},
        "PodSpec": _obj(
            containers=_merge_list("Container", "name"),
            initContainers=_merge_list("Container", "name"),
            ephemeralContainers=_merge_list("Container", "name"),
            volumes=_merge_list("Item", "name", "merge,retainKeys"),
            imagePullSecrets=_merge_list("Item", "name"),
            hostAliases=_merge_list("Item", "ip"),
        ),
        "PodTemplateSpec": _obj(spec=_ref("PodSpec")),
        "TemplateHolder": _obj(template=_ref("PodTemplateSpec")),
        "JobTemplateSpec": _obj(spec=_ref("TemplateHolder")),
        "CronJobSpec": _obj(jobTemplate=_ref("JobTemplateSpec")),
        "ServiceSpec": _obj(ports=_merge_list("Item", "port")),
        "Pod": _kind("", "v1", "Pod", "PodSpec"),
        "PodTemplate": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "PodTemplate"}],
            "properties": {"template": _ref("PodTemplateSpec")},
        },
        "ReplicationController": _kind("", "v1", "ReplicationController", "TemplateHolder"),
        "Service": _kind("", "v1", "Service", "ServiceSpec"),
        "CronJob": _kind("batch", "v1", "CronJob", "CronJobSpec"),
        "Job": _kind("batch", "v1", "Job", "TemplateHolder"),
    }
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
        defs[kind] = _kind("apps", "v1", kind, "TemplateHolder")
    return {"definitions": defs}
