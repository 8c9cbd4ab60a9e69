"""The catalog: objects by kind, namespace and name (reconciler/catalog/), and expand_all over it.

Covers: namespaced documents default to ``default`` and cluster kinds have none; VMs
keep their input order; unknown kinds and API versions are errors at their line
(with a suggestion for a typo); duplicates,
nameless objects, VMs without a template and instancetypes of a foreign API group are
errors naming file and line (the field's line when the file can be read); presets by
namespace; expand_all reports every VM's error without stopping the others and finds
pins by subject or by domain name.
"""

from __future__ import annotations

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ManifestError
from reconciler.expand import expand_all
from reconciler.manifests import parse_documents
from reconciler.model import RevisionInfo, VMKey

OBJECTS = b"""apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: small
  namespace: ignored-for-cluster-kinds
spec:
  cpu: {guest: 1}
  memory: {guest: 1Gi}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: b-second
spec:
  instancetype: {name: small}
  template: {spec: {domain: {devices: {}}}}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: a-first
  namespace: lab
spec:
  template: {spec: {domain: {memory: {guest: 1Gi}, devices: {}}}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: lab
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstancePreset
metadata:
  name: p
  namespace: lab
spec:
  selector: {}
  domain: {devices: {}}
"""


def catalog_of(data: bytes, path: str = "vms/all.yaml"):  # type: ignore[no-untyped-def]
    return build_catalog(parse_documents(data, path), {path: data}.__getitem__)


def test_index_namespaces_order_and_warnings() -> None:
    cat = catalog_of(OBJECTS)
    assert [vm.name for vm in cat.vms] == ["b-second", "a-first"]
    assert cat.get("VirtualMachineClusterInstancetype", "anything", "small") is not None
    assert cat.get("VirtualMachine", "", "b-second") is not None  # no namespace -> default
    assert cat.get("VirtualMachine", "default", "a-first") is None
    assert cat.get("VirtualMachine", "lab", "a-first") is not None
    assert [p.name for p in cat.presets("lab")] == ["p"]
    assert cat.presets("default") == []
    assert cat.warnings == ()  # a Namespace is allowed and has no effect


@pytest.mark.parametrize(
    ("kind", "api_version", "message"),
    [
        ("VirtualMachin", "kubevirt.io/v1", "unknown kind 'VirtualMachin'; did you mean VirtualMachine?"),
        ("Deployment", "apps/v1", "unknown kind 'Deployment' (kinds here: ConfigMap, "),
        ("VirtualMachine", "kubevirt.io/v2", "apiVersion 'kubevirt.io/v2' is not served for this kind"),
        ("ConfigMap", "kubevirt.io/v1", "ConfigMap x: apiVersion 'kubevirt.io/v1' is not served"),
        ("VirtualMachineInstanceReplicaSet", "kubevirt.io/v1", "replica sets are not supported"),
        ("VirtualMachineInstance", "kubevirt.io/v1", "a bare VMI has no run strategy here"),
    ],
)
def test_unknown_kinds_and_api_versions_are_errors_at_their_line(
    kind: str, api_version: str, message: str
) -> None:
    doc = (
        f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: x\nspec:\n  template: {{spec: {{}}}}\n"
    )
    with pytest.raises(ManifestError) as err:
        catalog_of(OBJECTS + b"---\n" + doc.encode())
    assert message in str(err.value)
    assert str(err.value).startswith("vms/all.yaml:")


@pytest.mark.parametrize(
    ("doc", "message", "line"),
    [
        (
            b"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  labels: {}\n",
            "metadata.name is required",
            3,
        ),
        (
            b"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: x\nspec:\n  running: true\n",
            "spec.template is required",
            5,
        ),
        (
            b"apiVersion: example.com/v1\nkind: VirtualMachinePreference\nmetadata:\n  name: x\n",
            "apiVersion 'example.com/v1' is not instancetype.kubevirt.io",
            1,
        ),
        (b"apiVersion: v1\nmetadata:\n  name: x\n", "kind is required", 1),
    ],
)
def test_invalid_objects_name_file_and_line(doc: bytes, message: str, line: int) -> None:
    with pytest.raises(ManifestError) as info:
        catalog_of(b"---\n" + doc)
    assert message in str(info.value)
    assert info.value.path == "vms/all.yaml"
    assert info.value.line == line + 1


def test_duplicates_name_the_first_definition() -> None:
    doc = b"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: a\n"
    with pytest.raises(
        ManifestError, match=r"PersistentVolumeClaim default/a is defined twice \(first at vms/all.yaml:1\)"
    ):
        catalog_of(doc + b"---\n" + doc.replace(b"name: a", b"name: a\n  namespace: default"))


def test_expand_all_keeps_going_after_an_error() -> None:
    bad = OBJECTS.replace(b"instancetype: {name: small}", b"instancetype: {name: missing}")
    expanded, errors = expand_all(catalog_of(bad))
    assert [vm.name for vm in expanded] == ["a-first"]
    assert len(errors) == 1
    assert (
        'vm/b-second: virtualmachineclusterinstancetypes.instancetype.kubevirt.io "missing" not found'
        in str(errors[0])
    )
    assert str(errors[0]).startswith("vms/all.yaml:15:")


def test_expand_all_finds_pins_by_vm_key() -> None:
    key = VMKey("default", "b-second")
    data = '{"apiVersion":"x","kind":"VirtualMachineClusterInstancetype","metadata":{"name":"small"},"spec":{"cpu":{"guest":3},"memory":{"guest":"1Gi"}}}'
    pin = RevisionInfo(kind="VirtualMachineClusterInstancetype", name="small", hash="h", data=data)
    expanded, errors = expand_all(catalog_of(OBJECTS), {key: {"instancetype": pin}})
    assert not errors
    vm = next(e for e in expanded if e.name == "b-second")
    assert vm.vm["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] == 3
    assert vm.subject == "vm/b-second"
    assert next(e for e in expanded if e.name == "a-first").subject == "vm/lab_a-first"


@pytest.mark.parametrize(
    ("template", "message", "line"),
    [
        (
            "volumes:\n      - name: a\n      - containerDisk: {image: x}\n",
            "spec.template.spec.volumes[1].name is required",
            10,
        ),
        (
            "volumes:\n      - name: a\n      - name: a\n",
            "spec.template.spec.volumes[1].name 'a' must be unique",
            10,
        ),
        (
            "domain:\n        devices:\n          disks:\n          - name: d\n          - name: d\n",
            "domain.devices.disks[1].name 'd' must be unique",
            12,
        ),
        ("networks: {name: x}\n", "spec.template.spec.networks must be a list", 8),
    ],
)
def test_named_template_lists(template: str, message: str, line: int) -> None:
    doc = f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: v\nspec:\n  template:\n    spec:\n      {template}"
    with pytest.raises(ManifestError) as info:
        catalog_of(doc.encode())
    assert message in str(info.value)
    assert info.value.line == line
