"""Matcher validation and inferFromVolume (kubevirt-semantics §a.3, §a.4, §a.6).

Covers: matcher validation messages; kind spellings and unexpected kinds; inference
through a PVC, a DataVolume (labels, then its source), a garbage-collected DataVolume
(its PVC), a dataVolumeTemplate, DataSource labels and its source PVC / snapshot;
ignorable failures (unsupported volume type, DataVolume source, sourceRef kind,
missing label) under Reject and Ignore; missing objects are plain errors; the
inferred matcher keeps the optional kind label.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ExpansionError
from reconciler.expand import expand_vm
from reconciler.manifests import parse_documents

if TYPE_CHECKING:
    from reconciler.model import ExpandedVM

OBJECTS = """
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {name: cluster-it}
spec:
  cpu: {guest: 2}
  memory: {guest: 2Gi}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: ns-it}
spec:
  cpu: {guest: 4}
  memory: {guest: 4Gi}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: cluster-pref}
spec:
  devices: {preferredDiskBus: virtio}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: labelled
  labels:
    instancetype.kubevirt.io/default-instancetype: ns-it
    instancetype.kubevirt.io/default-instancetype-kind: VirtualMachineInstancetype
    instancetype.kubevirt.io/default-preference: cluster-pref
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bare}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: collected-dv
  labels:
    instancetype.kubevirt.io/default-instancetype: cluster-it
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: dv-labelled
  labels:
    instancetype.kubevirt.io/default-instancetype: cluster-it
spec:
  source: {http: {url: "http://example.org/img"}}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: dv-from-pvc}
spec:
  source: {pvc: {name: labelled, namespace: default}}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: dv-http}
spec:
  source: {http: {url: "http://example.org/img"}}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata: {name: dv-snapshot}
spec:
  source: {snapshot: {name: snap, namespace: default}}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: snap
  labels:
    instancetype.kubevirt.io/default-instancetype: cluster-it
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata: {name: ds-unlabelled}
spec:
  source: {pvc: {name: labelled, namespace: default}}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata: {name: ds-empty}
spec:
  source: {}
---
"""


def expand_vm_text(matchers: str, volumes: str, extra_spec: str = "", memory: bool = True) -> ExpandedVM:
    domain = "domain:\n  memory: {guest: 1Gi}" if memory else "domain: {}"
    text = f"""{OBJECTS}
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm1
spec:
  runStrategy: Always
{textwrap.indent(textwrap.dedent(matchers).strip(), "  ")}
{textwrap.indent(textwrap.dedent(extra_spec).strip(), "  ")}
  template:
    spec:
{textwrap.indent(domain, "      ")}
      volumes:
{textwrap.indent(textwrap.dedent(volumes).strip(), "      ")}
"""
    docs = parse_documents(text.encode(), "vms/infer.yaml")
    vm = next(d for d in docs if d.kind == "VirtualMachine")
    return expand_vm(vm, build_catalog(docs))


def it_name(result: ExpandedVM) -> str | None:
    return result.instancetype.name if result.instancetype else None


@pytest.mark.parametrize(
    ("matcher", "message"),
    [
        (
            "instancetype: {}",
            "Either Name or InferFromVolume should be provided within the InstancetypeMatcher",
        ),
        (
            "preference: {kind: VirtualMachinePreference}",
            "Either Name or InferFromVolume should be provided within the PreferenceMatcher",
        ),
        (
            "instancetype: {name: a, inferFromVolume: root}",
            "Name already set, should be cleared before setting inferFromVolume",
        ),
        (
            "preference: {kind: x, inferFromVolume: root}",
            "Kind already set, should be cleared before setting inferFromVolume",
        ),
        (
            "instancetype: {inferFromVolume: root, inferFromVolumeFailurePolicy: Maybe}",
            "Invalid value 'Maybe' for InferFromVolumeFailurePolicy",
        ),
        (
            "preference: {name: cluster-pref, kind: Deployment}",
            "got unexpected kind in PreferenceMatcher: Deployment",
        ),
    ],
)
def test_matcher_validation(matcher: str, message: str) -> None:
    with pytest.raises(ExpansionError) as info:
        expand_vm_text(matcher, "- {name: root, persistentVolumeClaim: {claimName: labelled}}")
    assert message in str(info.value)
    assert str(info.value).startswith("vms/infer.yaml:")


@pytest.mark.parametrize(
    "kind",
    [
        "virtualmachineinstancetype",
        "VirtualMachineInstancetypes",
        "virtualMachineInstancetype",
        "VIRTUALMACHINEINSTANCETYPE",
    ],
)
def test_kind_spellings(kind: str) -> None:
    result = expand_vm_text(
        f"instancetype: {{name: ns-it, kind: {kind}}}",
        "- {name: root, persistentVolumeClaim: {claimName: bare}}",
        memory=False,
    )
    assert result.instancetype is not None
    assert result.instancetype.kind == "VirtualMachineInstancetype"
    assert result.instancetype.namespace == "default"


@pytest.mark.parametrize(
    ("volume", "extra", "expected"),
    [
        ("persistentVolumeClaim: {claimName: labelled}", "", "ns-it"),
        ("dataVolume: {name: dv-labelled}", "", "cluster-it"),
        ("dataVolume: {name: dv-from-pvc}", "", "ns-it"),
        ("dataVolume: {name: dv-snapshot}", "", "cluster-it"),
        ("dataVolume: {name: collected-dv}", "", "cluster-it"),
        (
            "dataVolume: {name: tmpl}",
            "dataVolumeTemplates:\n- metadata: {name: tmpl}\n  spec: {sourceRef: {kind: DataSource, name: ds-unlabelled}}",
            "ns-it",
        ),
    ],
)
def test_inference_chain(volume: str, extra: str, expected: str) -> None:
    result = expand_vm_text(
        "instancetype: {inferFromVolume: root}", f"- name: root\n  {volume}", extra, memory=False
    )
    assert it_name(result) == expected


def test_both_matchers_inferred_from_one_pvc() -> None:
    result = expand_vm_text(
        "instancetype: {inferFromVolume: root}\npreference: {inferFromVolume: root}",
        "- {name: root, persistentVolumeClaim: {claimName: labelled}}",
        memory=False,
    )
    assert (it_name(result), result.preference and result.preference.name) == ("ns-it", "cluster-pref")
    disks = result.vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"]
    assert disks == [{"name": "root", "disk": {"bus": "virtio"}}]


@pytest.mark.parametrize(
    ("volume", "extra", "message"),
    [
        (
            "containerDisk: {image: 'x:1'}",
            "",
            "unable to infer defaults from volume root as type is not supported",
        ),
        (
            "dataVolume: {name: dv-http}",
            "",
            "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported",
        ),
        (
            "persistentVolumeClaim: {claimName: bare}",
            "",
            "unable to find required instancetype.kubevirt.io/default-instancetype label on the volume",
        ),
        (
            "dataVolume: {name: tmpl}",
            "dataVolumeTemplates:\n- metadata: {name: tmpl}\n  spec: {sourceRef: {kind: VolumeImportSource, name: x}}",
            "unable to infer defaults from DataVolumeSourceRef as Kind VolumeImportSource is not supported",
        ),
        (
            "dataVolume: {name: tmpl}",
            "dataVolumeTemplates:\n- metadata: {name: tmpl}\n  spec: {sourceRef: {kind: DataSource, name: ds-empty}}",
            "unable to infer defaults from DataSource that doesn't provide DataVolumeSourcePVC",
        ),
    ],
)
def test_ignorable_failures(volume: str, extra: str, message: str) -> None:
    with pytest.raises(ExpansionError) as info:
        expand_vm_text("instancetype: {inferFromVolume: root}", f"- name: root\n  {volume}", extra)
    assert message in str(info.value)
    ignored = expand_vm_text(
        "instancetype: {inferFromVolume: root, inferFromVolumeFailurePolicy: Ignore}",
        f"- name: root\n  {volume}",
        extra,
    )
    assert ignored.instancetype is None
    assert ignored.vm["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "1Gi"}


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        ("persistentVolumeClaim: {claimName: nowhere}", 'persistentvolumeclaims "nowhere" not found'),
        ("dataVolume: {name: ghost}", 'persistentvolumeclaims "ghost" not found'),
    ],
)
def test_missing_objects_are_errors_even_with_ignore(volume: str, message: str) -> None:
    with pytest.raises(ExpansionError) as info:
        expand_vm_text(
            "preference: {inferFromVolume: root, inferFromVolumeFailurePolicy: Ignore}",
            f"- name: root\n  {volume}",
        )
    assert message in str(info.value)


def test_ignore_policy_success_drops_memory_only_for_instancetype() -> None:
    result = expand_vm_text(
        "preference: {inferFromVolume: root, inferFromVolumeFailurePolicy: Ignore}",
        "- {name: root, persistentVolumeClaim: {claimName: labelled}}",
    )
    assert result.vm["spec"]["template"]["spec"]["domain"]["memory"] == {"guest": "1Gi"}
    assert result.preference is not None
    assert result.preference.name == "cluster-pref"
