"""Instancetype application (kubevirt-semantics §b, §c.2).

Covers: the CPU topology table from cpu.guest and the preferred topology (incl.
deprecated names and spread options); float32 memory overcommit; every v1beta1
instancetype field written to the VMI spec; every conflict path; annotation conflicts
only on a different value; fields without effect on libvirt reported as warnings;
alpha API versions; an instancetype without guest CPU or memory rejected; the checks of
one instancetype or preference made once per catalog and met by every VM using it.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ExpansionConflict, ExpansionError, ManifestError
from reconciler.expand import expand_vm
from reconciler.expand.instancetype import overcommit_request
from reconciler.expand.topology import guest_topology
from reconciler.manifests import parse_documents
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from reconciler.model import ExpandedVM


def expand_text(text: str) -> ExpandedVM:
    docs = parse_documents(textwrap.dedent(text).encode(), "vms/test.yaml")
    vm = next(d for d in docs if d.kind == "VirtualMachine")
    return expand_vm(vm, build_catalog(docs))


def instancetype(spec: str, api: str = "v1beta1") -> str:
    return f"""
apiVersion: instancetype.kubevirt.io/{api}
kind: VirtualMachineClusterInstancetype
metadata:
  name: it
spec:
{textwrap.indent(textwrap.dedent(spec).strip(), "  ")}
---
"""


def vm_with(template_spec: str = "domain: {}", metadata: str = "{}") -> str:
    return f"""
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm1
spec:
  runStrategy: Always
  instancetype:
    name: it
  template:
    metadata: {metadata}
    spec:
{textwrap.indent(textwrap.dedent(template_spec).strip(), "      ")}
"""


BASIC = """
cpu:
  guest: 2
memory:
  guest: 1Gi
"""


def domain(result: ExpandedVM) -> dict[str, Any]:
    return result.vm["spec"]["template"]["spec"]["domain"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("guest", "pref", "topology"),
    [
        (2, None, (2, 1, 1)),
        (2, {"cpu": {"preferredCPUTopology": "sockets"}}, (2, 1, 1)),
        (2, {"cpu": {"preferredCPUTopology": "preferAny"}}, (2, 1, 1)),
        (3, {"cpu": {"preferredCPUTopology": "cores"}}, (1, 3, 1)),
        (2, {"cpu": {"preferredCPUTopology": "preferThreads"}}, (1, 1, 2)),
        (1, {"cpu": {"preferredCPUTopology": "cores"}}, (1, 1, 1)),
        (2, {"cpu": {"preferredCPUTopology": "spread"}}, (1, 2, 1)),
        (4, {"cpu": {"preferredCPUTopology": "preferSpread"}}, (2, 2, 1)),
        (
            6,
            {
                "preferSpreadSocketToCoreRatio": 2,
                "cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"ratio": 3}},
            },
            (2, 3, 1),
        ),
        (6, {"preferSpreadSocketToCoreRatio": 3, "cpu": {"preferredCPUTopology": "spread"}}, (2, 3, 1)),
        (
            8,
            {"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"across": "SocketsCoresThreads"}}},
            (2, 2, 2),
        ),
        (
            12,
            {
                "cpu": {
                    "preferredCPUTopology": "spread",
                    "spreadOptions": {"across": "SocketsCoresThreads", "ratio": 3},
                }
            },
            (2, 3, 2),
        ),
        (
            6,
            {"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"across": "CoresThreads"}}},
            (1, 3, 2),
        ),
    ],
)
def test_guest_vcpus_become_the_preferred_topology(
    guest: int, pref: Any, topology: tuple[int, int, int]
) -> None:
    assert guest_topology(guest, pref) == topology


@pytest.mark.parametrize(
    ("guest", "percent", "requested"),
    [("4Gi", 25, "3Gi"), ("1Gi", 10, "966367616"), ("1Gi", 15, "912680576"), ("2G", 50, "1G")],
)
def test_overcommit_uses_float32_and_the_guest_format(guest: str, percent: int, requested: str) -> None:
    assert overcommit_request(guest, percent) == requested


def test_every_instancetype_field_reaches_the_vmi_spec() -> None:
    result = expand_text(
        instancetype("""
            annotations:
              tier: gold
            nodeSelector:
              kubernetes.io/hostname: host-a
            schedulerName: custom
            cpu:
              guest: 4
              model: Haswell
              dedicatedCPUPlacement: true
              isolateEmulatorThread: true
              numa:
                guestMappingPassthrough: {}
              realtime:
                mask: "0"
              maxSockets: 16
            memory:
              guest: 8Gi
              hugepages:
                pageSize: 2Mi
              maxGuest: 16Gi
            ioThreads:
              supplementalPoolThreadCount: 4
            ioThreadsPolicy: supplementalPool
            launchSecurity:
              sev: {}
            gpus:
            - name: gpu1
              deviceName: nvidia.com/GP100
            hostDevices:
            - name: dev1
              deviceName: example.com/dev
        """)
        + vm_with()
    )
    spec = result.vm["spec"]["template"]["spec"]
    cpu = spec["domain"]["cpu"]
    assert (cpu["sockets"], cpu["cores"], cpu["threads"]) == (4, 1, 1)
    assert cpu["model"] == "Haswell"
    assert cpu["maxSockets"] == 16
    assert cpu["dedicatedCpuPlacement"] is True
    assert cpu["isolateEmulatorThread"] is True
    assert cpu["numa"] == {"guestMappingPassthrough": {}}
    assert cpu["realtime"] == {"mask": "0"}
    assert spec["domain"]["memory"] == {"guest": "8Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "16Gi"}
    assert spec["domain"]["ioThreads"] == {"supplementalPoolThreadCount": 4}
    assert spec["domain"]["ioThreadsPolicy"] == "supplementalPool"
    assert spec["domain"]["launchSecurity"] == {"sev": {}}
    assert spec["domain"]["devices"]["gpus"][0]["name"] == "gpu1"
    assert spec["domain"]["devices"]["hostDevices"][0]["name"] == "dev1"
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "host-a"}
    assert spec["schedulerName"] == "custom"
    assert result.vm["spec"]["template"]["metadata"]["annotations"] == {"tier": "gold"}
    # accepted but reported: nothing silently dropped
    joined = "\n".join(map(words, result.warnings))
    for field in ("schedulerName", "launchSecurity"):
        assert f"{field} is accepted but has no effect on a libvirt host" in joined
    # gpus and hostDevices pass through to the host config's hostDevices map (render)
    assert "gpus" not in joined
    assert "hostDevices" not in joined
    assert "nodeSelector" not in joined  # a hostname selector picks the host


def test_scheduling_node_selector_is_reported() -> None:
    result = expand_text(instancetype(BASIC + "nodeSelector:\n  zone: a\n") + vm_with())
    assert any("nodeSelector is accepted but has no effect" in w for w in map(words, result.warnings))
    assert all(w.startswith("vm/vm1: ") for w in map(words, result.warnings))


@pytest.mark.parametrize(
    ("it_extra", "vm_spec", "path"),
    [
        ("nodeSelector: {a: b}", "nodeSelector: {}\ndomain: {}", "spec.template.spec.nodeSelector"),
        ("schedulerName: s", "schedulerName: mine\ndomain: {}", "spec.template.spec.schedulerName"),
        (
            "",
            "domain:\n  resources:\n    requests:\n      cpu: 1",
            "spec.template.spec.domain.resources.requests.cpu",
        ),
        (
            "",
            "domain:\n  resources:\n    limits:\n      cpu: 1",
            "spec.template.spec.domain.resources.limits.cpu",
        ),
        ("", "domain:\n  cpu:\n    sockets: 1", "spec.template.spec.domain.cpu.sockets"),
        ("", "domain:\n  cpu:\n    cores: 1", "spec.template.spec.domain.cpu.cores"),
        ("", "domain:\n  cpu:\n    threads: 1", "spec.template.spec.domain.cpu.threads"),
        ("", "domain:\n  memory:\n    guest: 1Gi", "spec.template.spec.domain.memory.guest"),
        (
            "",
            "domain:\n  resources:\n    requests:\n      memory: 1Gi",
            "spec.template.spec.domain.resources.requests.memory",
        ),
        (
            "",
            "domain:\n  resources:\n    limits:\n      memory: 1Gi",
            "spec.template.spec.domain.resources.limits.memory",
        ),
        (
            "ioThreadsPolicy: auto",
            "domain:\n  ioThreadsPolicy: shared",
            "spec.template.spec.domain.ioThreadsPolicy",
        ),
        (
            "launchSecurity: {sev: {}}",
            "domain:\n  launchSecurity: {}",
            "spec.template.spec.domain.launchSecurity",
        ),
        (
            "gpus: [{name: g, deviceName: x}]",
            "domain:\n  devices:\n    gpus: [{name: mine, deviceName: y}]",
            "spec.template.spec.domain.devices.gpus",
        ),
        (
            "hostDevices: [{name: h, deviceName: x}]",
            "domain:\n  devices:\n    hostDevices: [{name: mine, deviceName: y}]",
            "spec.template.spec.domain.devices.hostDevices",
        ),
        (
            "ioThreads: {supplementalPoolThreadCount: 2}",
            "domain:\n  ioThreads:\n    supplementalPoolThreadCount: 1",
            "spec.template.spec.domain.ioThreads.supplementalPoolThreadCount",
        ),
    ],
)
def test_a_vm_setting_an_instancetype_field_is_rejected(it_extra: str, vm_spec: str, path: str) -> None:
    with pytest.raises(ExpansionConflict) as info:
        expand_text(instancetype(BASIC + it_extra) + vm_with(vm_spec))
    assert path in info.value.fields
    assert f"VM field(s) {path}" in str(info.value)
    assert "conflicts with selected instance type" in str(info.value)
    assert str(info.value).startswith("vms/test.yaml:")


@pytest.mark.parametrize(
    ("it_cpu", "vm_cpu", "path"),
    [
        ("model: a", "model: b", "spec.template.spec.domain.cpu.model"),
        (
            "dedicatedCPUPlacement: true",
            "dedicatedCpuPlacement: true",
            "spec.template.spec.domain.cpu.dedicatedCPUPlacement",
        ),
        (
            "isolateEmulatorThread: false",
            "isolateEmulatorThread: true",
            "spec.template.spec.domain.cpu.isolateEmulatorThread",
        ),
        ("numa: {guestMappingPassthrough: {}}", "numa: {}", "spec.template.spec.domain.cpu.numa"),
        (
            "realtime: {}",
            "realtime: {}\n    numa: {guestMappingPassthrough: {}}",
            "spec.template.spec.domain.cpu.realtime",
        ),
    ],
)
def test_cpu_detail_conflicts(it_cpu: str, vm_cpu: str, path: str) -> None:
    it = f"cpu:\n  guest: 2\n  {it_cpu}\nmemory:\n  guest: 1Gi\n"
    with pytest.raises(ExpansionConflict) as info:
        expand_text(instancetype(it) + vm_with(f"domain:\n  cpu:\n    {vm_cpu}"))
    assert info.value.fields == (path,)


def test_vm_may_set_what_the_instancetype_leaves_open() -> None:
    result = expand_text(
        instancetype(BASIC)
        + vm_with("domain:\n  cpu:\n    model: host-passthrough\n    dedicatedCpuPlacement: false")
    )
    assert domain(result)["cpu"]["model"] == "host-passthrough"
    assert domain(result)["cpu"]["sockets"] == 2


def test_all_cpu_conflicts_are_reported_together() -> None:
    with pytest.raises(ExpansionConflict) as info:
        expand_text(
            instancetype(BASIC)
            + vm_with(
                "domain:\n  cpu:\n    sockets: 1\n    cores: 2\n    threads: 1\n  memory:\n    guest: 1Gi"
            )
        )
    assert info.value.fields == (
        "spec.template.spec.domain.cpu.sockets",
        "spec.template.spec.domain.cpu.cores",
        "spec.template.spec.domain.cpu.threads",
        "spec.template.spec.domain.memory.guest",
    )


def test_annotation_conflicts_only_on_a_different_value() -> None:
    it = BASIC + "annotations:\n  team: blue\n  tier: gold\n"
    same = expand_text(instancetype(it) + vm_with(metadata="{annotations: {team: blue}}"))
    assert same.vm["spec"]["template"]["metadata"]["annotations"] == {"team": "blue", "tier": "gold"}
    with pytest.raises(ExpansionConflict) as info:
        expand_text(instancetype(it) + vm_with(metadata="{annotations: {team: red}}"))
    assert info.value.fields == ("annotations.team",)


@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2", "v1beta1"])
def test_every_api_version_is_read_with_the_same_fields(api: str) -> None:
    result = expand_text(instancetype(BASIC, api) + vm_with())
    assert domain(result)["memory"]["guest"] == "1Gi"
    assert result.instancetype is not None
    assert result.instancetype.kind == "VirtualMachineClusterInstancetype"


@pytest.mark.parametrize(
    "spec", ["cpu: {guest: 2}", "memory: {guest: 1Gi}", "cpu: {guest: 0}\nmemory: {guest: 1Gi}"]
)
def test_instancetype_needs_guest_cpu_and_memory(spec: str) -> None:
    with pytest.raises(ExpansionError, match="must be a positive"):
        expand_text(instancetype(spec) + vm_with())


def test_unknown_instancetype_fields_are_errors_at_their_line() -> None:
    """KubeVirt's schema, read strictly: a typo is never ignored."""
    with pytest.raises(ManifestError) as err:
        expand_text(instancetype(BASIC).replace("guest: 2", "guest: 2\n    gest: 4") + vm_with())
    assert (
        "VirtualMachineClusterInstancetype it: spec.cpu.gest: unknown field 'gest'; did you mean guest?"
        in str(err.value)
    )
    assert err.value.line > 1


@pytest.mark.parametrize("requirements", [False, True])
def test_a_conflict_reads_alike_with_or_without_preference_requirements(requirements: bool) -> None:
    """Admission checks a preference's requirements on a scratch copy, made only when there
    are some; without, the expansion itself finds the conflict: same fields, same place."""
    preference = """
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: pref
spec:
  cpu:
    preferredCPUTopology: cores
"""
    if requirements:
        preference += "  requirements:\n    cpu: {guest: 1}\n"
    vm = vm_with("domain:\n  cpu:\n    sockets: 1").replace(
        "  template:", "  preference:\n    name: pref\n  template:"
    )
    text = instancetype(BASIC) + preference + "---\n" + vm
    with pytest.raises(ExpansionConflict) as info:
        expand_text(text)
    assert info.value.fields == ("spec.template.spec.domain.cpu.sockets",)
    lines = textwrap.dedent(text).splitlines()
    line = next(n for n, t in enumerate(lines, 1) if t == "apiVersion: kubevirt.io/v1")
    assert (info.value.path, info.value.line) == ("vms/test.yaml", line)  # the VM's document


def test_every_vm_of_one_instancetype_is_refused_and_warned_alike() -> None:
    """An instancetype's and a preference's own checks are made once per catalog
    (``Catalog.resolved``), and every VM resolving to them still meets them: each VM of
    an invalid instancetype is refused, each VM of a preference with a deprecated
    topology carries the warning."""
    preference = """
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: pref
spec:
  cpu:
    preferredCPUTopology: preferCores
---
"""
    vm = vm_with().replace("  template:", "  preference:\n    name: pref\n  template:")
    vms = "---\n".join(vm.replace("name: vm1", f"name: vm{i}") for i in (1, 2, 3))
    docs = parse_documents(textwrap.dedent(instancetype(BASIC) + preference + vms).encode(), "vms/test.yaml")
    cat = build_catalog(docs)
    assert len(cat.vms) == 3
    for vm_doc in cat.vms:
        warned = [words(w) for w in expand_vm(vm_doc, cat).warnings]
        assert any("PreferredCPUTopology preferCores is deprecated" in w for w in warned), warned
    broken = instancetype("cpu: {guest: 0}\nmemory: {guest: 1Gi}") + vms.replace(
        "  preference:\n    name: pref\n", ""
    )
    docs = parse_documents(textwrap.dedent(broken).encode(), "vms/test.yaml")
    cat = build_catalog(docs)
    for vm_doc in cat.vms:
        with pytest.raises(ExpansionError, match=r"spec\.cpu\.guest must be a positive integer"):
            expand_vm(vm_doc, cat)
