"""kustomize's builtin generators and transformers named by their config, under
``generators:`` and ``transformers:`` (``apiVersion: builtin``), as ``kubectl kustomize``
runs them with no plugin flags.

Input: the builder, a ``Kust`` and its ``Acc``. Each entry of the two fields is an
inline config (a string holding a newline), a file of configs, or a directory whose
kustomization builds the configs. Output: ``acc`` with each config run, in order, by
the very code that runs the kustomization field it mirrors: a config becomes a
kustomization of that one field (``Kust`` standing for the config's file) and, where it
lists ``fieldSpecs``, the transformer's field specs are those. Generators run after the
level's configMapGenerator and secretGenerator; transformers after the level's field
transformers, as kustomize orders them. A config of another apiVersion is a plugin this
build does not run: an error at its line. Pure.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.manifests import parse_yaml_value
from reconciler.overlays.config import TransformerConfig
from reconciler.overlays.generated import run_generators
from reconciler.overlays.kustomization import Acc, Kust
from reconciler.overlays.resource import Res, fieldspec
from reconciler.overlays.transformers import (
    common_annotations,
    images,
    labels,
    namespace,
    patches,
    patches_json6902,
    patches_strategic_merge,
    prefix_suffix,
    replacements,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType

    from reconciler.overlays.patching import Patching

    # A kustomization directory an entry names (kust, field, index, entry), built: the
    # engine's ``Builder.sub_build``.
    SubBuild = Callable[[Kust, str, int, str], tuple[Kust, Acc]]


def _patch(doc: dict[str, Any]) -> dict[str, Any]:
    entry = {k: doc[k] for k in ("path", "patch", "target", "options") if doc.get(k) is not None}
    return {"patches": [entry]}


def _smp(doc: dict[str, Any]) -> dict[str, Any]:
    entries = [*(doc.get("paths") or ())]
    if doc.get("patches"):
        entries.append(doc["patches"])
    return {"patchesStrategicMerge": entries}


def _json6902(doc: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"target": doc.get("target")}
    if doc.get("jsonOp") is not None:
        entry["patch"] = doc["jsonOp"]
    else:
        entry["path"] = doc.get("path")
    return {"patchesJson6902": [entry]}


def _meta(doc: dict[str, Any], key: str) -> str:
    meta = doc.get("metadata")
    return str(meta.get(key) or "") if isinstance(meta, dict) else ""


# kind -> (transformer module, the kustomization fields its config stands for, the
# TransformerConfig field its fieldSpecs replace)
_TRANSFORMERS: MappingProxyType[str, tuple[ModuleType, Callable[[dict[str, Any]], dict[str, Any]], str]] = (
    MappingProxyType(
        {
            "PrefixSuffixTransformer": (
                prefix_suffix,
                lambda d: {"namePrefix": d.get("prefix"), "nameSuffix": d.get("suffix")},
                "name_prefix",
            ),
            "PrefixTransformer": (prefix_suffix, lambda d: {"namePrefix": d.get("prefix")}, "name_prefix"),
            "SuffixTransformer": (prefix_suffix, lambda d: {"nameSuffix": d.get("suffix")}, "name_prefix"),
            "AnnotationsTransformer": (
                common_annotations,
                lambda d: {"commonAnnotations": d.get("annotations")},
                "common_annotations",
            ),
            "LabelTransformer": (labels, lambda d: {"commonLabels": d.get("labels")}, "common_labels"),
            "NamespaceTransformer": (
                namespace,
                lambda d: {
                    "namespace": _meta(d, "namespace"),
                    "unsetOnly": d.get("unsetOnly"),
                    "setRoleBindingSubjects": d.get("setRoleBindingSubjects"),
                },
                "namespace",
            ),
            "ImageTagTransformer": (images, lambda d: {"images": [d.get("imageTag") or {}]}, "images"),
            "PatchTransformer": (patches, _patch, ""),
            "PatchStrategicMergeTransformer": (patches_strategic_merge, _smp, ""),
            "PatchJson6902Transformer": (patches_json6902, _json6902, ""),
            "ReplacementTransformer": (replacements, lambda d: {"replacements": d.get("replacements")}, ""),
        }
    )
)
_GENERATORS = MappingProxyType(
    {"ConfigMapGenerator": "configMapGenerator", "SecretGenerator": "secretGenerator"}
)


def run_plugin_generators(b: Patching, sub_build: SubBuild, kust: Kust, acc: Acc) -> None:
    for vkust, doc in _configs(b, sub_build, kust, "generators"):
        kind = str(doc.get("kind") or "")
        if kind == "IAMPolicyGenerator":
            acc.res.append(_iam_service_account(vkust, doc))
            continue
        field_name = _GENERATORS.get(kind)
        if field_name is None:
            raise vkust.error(
                f"generators: unable to load builtin {kind}.builtin.[noGrp]: not a generator", "kind"
            )
        args = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
        args.setdefault("name", _meta(doc, "name"))
        if _meta(doc, "namespace"):
            args.setdefault("namespace", _meta(doc, "namespace"))
        vkust.doc = {field_name: [args]}
        run_generators(b, vkust, acc)


def run_plugin_transformers(b: Patching, sub_build: SubBuild, kust: Kust, acc: Acc) -> None:
    for vkust, doc in _configs(b, sub_build, kust, "transformers"):
        kind = str(doc.get("kind") or "")
        known = _TRANSFORMERS.get(kind)
        if known is None:
            raise vkust.error(f"transformers: unable to load builtin {kind}.builtin.[noGrp]", "kind")
        module, fields, config_field = known
        vkust.doc = {k: v for k, v in fields(doc).items() if v is not None}
        saved = acc.config
        if config_field and "fieldSpecs" in doc:
            specs = tuple(fieldspec(s) for s in doc.get("fieldSpecs") or ())
            current: dict[str, Any] = {f.name: getattr(saved, f.name) for f in dataclasses.fields(saved)}
            current[config_field] = specs
            acc.config = TransformerConfig(**current)
        try:
            module.run(b, vkust, acc)
        finally:
            acc.config = saved


def _configs(
    b: Patching, sub_build: SubBuild, kust: Kust, field_name: str
) -> Iterator[tuple[Kust, dict[str, Any]]]:
    """Each builtin config an entry of ``field_name`` names, with a ``Kust`` standing for
    the file it is in (the kustomization for an inline one): paths in it are relative to
    the kustomization's directory, as kustomize reads them."""
    for i, raw in enumerate(kust.list_field(field_name)):
        entry = str(raw)
        if "\n" in entry:
            path, data, docs = kust.path, kust.data, parse_yaml_value(entry, kust.path)
        elif b.files.is_dir(b.join(kust.dir, entry)):
            sub, built = sub_build(kust, field_name, i, entry)
            path, data = sub.path, sub.data
            docs = [r.obj for r in built.res]
        else:
            path, data = b.read_kust_file(kust, entry, (field_name, i))
            docs = parse_yaml_value(data, path)
        for doc in docs:
            vkust = Kust(kust.dir, path, data, {}, None, [(path, None)], plugin=_meta(doc, "name"))
            if not isinstance(doc, dict) or doc.get("apiVersion") != "builtin":
                what = f"{doc.get('apiVersion')}/{doc.get('kind')}" if isinstance(doc, dict) else "an entry"
                where = "" if path == kust.path else f" (in {path})"
                raise kust.error(
                    f"{field_name}: {what}{where} is not a builtin plugin (apiVersion: builtin): "
                    "plugins are not run here (no plugins, no exec)",
                    field_name,
                    i,
                )
            yield vkust, doc


def _iam_service_account(vkust: Kust, doc: dict[str, Any]) -> Res:
    """kustomize's IAMPolicyGenerator (cloud: gke): a ServiceAccount bound to a Google
    service account by annotation."""
    if doc.get("cloud") != "gke":
        raise vkust.error("IAMPolicyGenerator: only cloud: gke is supported, as in kustomize", "cloud")
    k8s = doc.get("kubernetesService") or {}
    gsa = doc.get("serviceAccount") or {}
    meta: dict[str, Any] = {
        "annotations": {
            "iam.gke.io/gcp-service-account": f"{gsa.get('name')}@{gsa.get('projectId')}.iam.gserviceaccount.com"
        },
        "name": k8s.get("name"),
    }
    if k8s.get("namespace"):
        meta["namespace"] = k8s["namespace"]
    obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    return Res(obj, vkust.path, 1, origin=(vkust.path, "IAMPolicyGenerator", vkust.plugin))
