"""Preference application, admission and requirements (kubevirt-semantics §c).

Covers: each preferred value only fills an unset VM field (disks per target kind,
dedicated IO thread only on virtio, interfaces incl. masquerade on binding-less pod
interfaces, inputs, panic devices, sound, rng, tpm, video, device booleans, autoattach);
the two overwriting fields (preferredAcpi, preferredDisableHotplug); CPU features;
Hyper-V sub-features (and the passthrough exception); firmware BIOS/EFI rules; clock;
machine type, subdomain, grace period, architecture, annotations, launch security,
storage class of dataVolumeTemplates; a preference without instancetype leaves the
topology alone; preference admission errors and deprecation warnings; requirements
with and without instancetype.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ExpansionError, ManifestError
from reconciler.expand import expand_vm
from reconciler.expand.preference import apply_preference
from reconciler.manifests import parse_documents
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from reconciler.model import ExpandedVM


def expand_with(
    pref: str, template_spec: str, instancetype: str | None = None, metadata: str = "{}"
) -> ExpandedVM:
    it_doc = ""
    it_ref = ""
    if instancetype is not None:
        it_doc = f"""
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: it
spec:
{textwrap.indent(textwrap.dedent(instancetype).strip(), "  ")}
---
"""
        it_ref = "  instancetype:\n    name: it\n"
    text = f"""{it_doc}
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: pref
spec:
{textwrap.indent(textwrap.dedent(pref).strip(), "  ")}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm1
spec:
  runStrategy: Always
{it_ref}  preference:
    name: pref
  dataVolumeTemplates:
  - metadata: {{name: dv1}}
    spec:
      storage: {{}}
  - metadata: {{name: dv2}}
    spec:
      pvc: {{storageClassName: mine}}
  template:
    metadata: {metadata}
    spec:
{textwrap.indent(textwrap.dedent(template_spec).strip(), "      ")}
"""
    docs = parse_documents(text.encode(), "vms/pref.yaml")
    vm = next(d for d in docs if d.kind == "VirtualMachine")
    return expand_vm(vm, build_catalog(docs))


def tspec(result: ExpandedVM) -> dict[str, Any]:
    return result.vm["spec"]["template"]["spec"]  # type: ignore[no-any-return]


MEM = "domain:\n  memory:\n    guest: 1Gi\n"


def test_disk_preferences_fill_only_unset_fields_per_target() -> None:
    pref = """
    devices:
      preferredDiskBus: virtio
      preferredDiskCache: none
      preferredDiskIO: native
      preferredDiskDedicatedIoThread: true
      preferredDiskBlockSize: {matchVolume: {enabled: true}}
      preferredCdromBus: sata
      preferredLunBus: scsi
    """
    spec = """
    domain:
      memory: {guest: 1Gi}
      devices:
        disks:
        - name: a
        - name: b
          cache: writeback
          io: threads
          dedicatedIOThread: false
          blockSize: {custom: {logical: 512, physical: 512}}
          disk: {bus: sata}
        - name: c
          cdrom: {}
        - name: d
          lun: {bus: virtio}
        - name: e
          cdrom: {bus: scsi}
    """
    disks = tspec(expand_with(pref, spec))["domain"]["devices"]["disks"]
    assert disks[0] == {
        "name": "a",
        "disk": {"bus": "virtio"},
        "cache": "none",
        "io": "native",
        "dedicatedIOThread": True,
        "blockSize": {"matchVolume": {"enabled": True}},
    }
    assert disks[1] == {
        "name": "b",
        "cache": "writeback",
        "io": "threads",
        "dedicatedIOThread": False,
        "blockSize": {"custom": {"logical": 512, "physical": 512}},
        "disk": {"bus": "sata"},
    }
    assert disks[2] == {"name": "c", "cdrom": {"bus": "sata"}}
    assert disks[3] == {"name": "d", "lun": {"bus": "virtio"}}
    assert disks[4] == {"name": "e", "cdrom": {"bus": "scsi"}}


def test_dedicated_io_thread_only_on_virtio_disks() -> None:
    pref = "devices:\n  preferredDiskBus: sata\n  preferredDiskDedicatedIoThread: true\n"
    spec = "domain:\n  memory: {guest: 1Gi}\n  devices:\n    disks:\n    - name: a\n    - name: b\n      disk: {bus: virtio}\n"
    disks = tspec(expand_with(pref, spec))["domain"]["devices"]["disks"]
    assert "dedicatedIOThread" not in disks[0]
    assert disks[1]["dedicatedIOThread"] is True


def test_interface_preferences() -> None:
    pref = "devices:\n  preferredInterfaceModel: e1000e\n  preferredInterfaceMasquerade: {}\n"
    spec = """
    domain:
      memory: {guest: 1Gi}
      devices:
        interfaces:
        - name: podnet
        - name: bridged
          bridge: {}
        - name: secondary
          model: virtio
        - name: plugin
          binding: {name: passt}
    networks:
    - name: podnet
      pod: {}
    - name: bridged
      multus: {networkName: br0}
    - name: secondary
      multus: {networkName: br1}
    - name: plugin
      multus: {networkName: br2}
    """
    ifaces = tspec(expand_with(pref, spec))["domain"]["devices"]["interfaces"]
    assert ifaces[0] == {"name": "podnet", "model": "e1000e", "masquerade": {}}
    assert ifaces[1] == {"name": "bridged", "bridge": {}, "model": "e1000e"}
    assert ifaces[2] == {"name": "secondary", "model": "virtio"}
    assert ifaces[3] == {"name": "plugin", "binding": {"name": "passt"}, "model": "e1000e"}


def test_device_preferences_and_the_overwriting_disable_hotplug() -> None:
    pref = """
    devices:
      preferredUseVirtioTransitional: true
      preferredBlockMultiQueue: true
      preferredNetworkInterfaceMultiQueue: false
      preferredDisableHotplug: true
      preferredSoundModel: ich9
      preferredRng: {}
      preferredTPM: {persistent: true}
      preferredVideoType: virtio
      preferredInputBus: virtio
      preferredInputType: tablet
      preferredPanicDeviceModel: hyperv
      preferredAutoattachGraphicsDevice: false
      preferredAutoattachMemBalloon: false
      preferredAutoattachSerialConsole: false
    """
    spec = """
    domain:
      memory: {guest: 1Gi}
      devices:
        blockMultiQueue: false
        disableHotplug: false
        autoattachSerialConsole: true
        sound: {name: s1}
        tpm: {}
        inputs:
        - name: i1
          bus: usb
    """
    devices = tspec(expand_with(pref, spec))["domain"]["devices"]
    assert devices["useVirtioTransitional"] is True
    assert devices["blockMultiQueue"] is False
    assert devices["networkInterfaceMultiqueue"] is False
    assert devices["disableHotplug"] is True  # KubeVirt cannot tell false from unset
    assert devices["sound"] == {"name": "s1", "model": "ich9"}
    assert devices["rng"] == {}
    assert devices["tpm"] == {}
    assert devices["video"] == {"type": "virtio"}
    assert devices["inputs"] == [{"name": "i1", "bus": "usb", "type": "tablet"}]
    assert devices["panicDevices"] == [{"model": "hyperv"}]
    assert devices["autoattachGraphicsDevice"] is False
    assert devices["autoattachMemBalloon"] is False
    assert devices["autoattachSerialConsole"] is True


def test_panic_device_models_fill_existing_devices() -> None:
    pref = "devices:\n  preferredPanicDeviceModel: isa\n"
    spec = "domain:\n  memory: {guest: 1Gi}\n  devices:\n    panicDevices:\n    - {}\n    - model: hyperv\n"
    assert tspec(expand_with(pref, spec))["domain"]["devices"]["panicDevices"] == [
        {"model": "isa"},
        {"model": "hyperv"},
    ]


def test_preferred_input_device_reaches_the_autoattached_input() -> None:
    pref = "devices:\n  preferredAutoattachInputDevice: true\n  preferredInputBus: virtio\n  preferredInputType: tablet\n"
    devices = tspec(expand_with(pref, MEM))["domain"]["devices"]
    assert devices["inputs"] == [{"name": "default-0", "bus": "virtio", "type": "tablet"}]


def test_cpu_features_are_added_unless_named() -> None:
    pref = "cpu:\n  preferredCPUFeatures:\n  - {name: vmx, policy: require}\n  - {name: pcid, policy: optional}\n"
    spec = "domain:\n  memory: {guest: 1Gi}\n  cpu:\n    features:\n    - {name: vmx, policy: disable}\n"
    features = tspec(expand_with(pref, spec))["domain"]["cpu"]["features"]
    assert features == [{"name": "vmx", "policy": "disable"}, {"name": "pcid", "policy": "optional"}]


def test_feature_preferences() -> None:
    pref = """
    features:
      preferredAcpi: {}
      preferredApic: {endOfInterrupt: true}
      preferredKvm: {hidden: true}
      preferredPvspinlock: {enabled: false}
      preferredSmm: {}
      preferredHyperv:
        relaxed: {}
        vapic: {}
        spinlocks: {spinlocks: 8191}
        vendorid: {vendorid: kvm}
    """
    spec = """
    domain:
      memory: {guest: 1Gi}
      features:
        acpi: {enabled: false}
        apic: {enabled: false}
        hyperv:
          relaxed: {enabled: false}
    """
    features = tspec(expand_with(pref, spec))["domain"]["features"]
    assert features == {
        "acpi": {},
        "apic": {"enabled": False},
        "kvm": {"hidden": True},
        "pvspinlock": {"enabled": False},
        "smm": {},
        "hyperv": {
            "relaxed": {"enabled": False},
            "vapic": {},
            "spinlocks": {"spinlocks": 8191},
            "vendorid": {"vendorid": "kvm"},
        },
    }


def test_hyperv_preferences_skip_passthrough() -> None:
    pref = "features:\n  preferredHyperv:\n    relaxed: {}\n"
    spec = "domain:\n  memory: {guest: 1Gi}\n  features:\n    hypervPassthrough: {enabled: true}\n"
    assert "hyperv" not in tspec(expand_with(pref, spec))["domain"]["features"]


@pytest.mark.parametrize(
    ("firmware", "vm_bootloader", "expected"),
    [
        ("preferredUseBios: true\npreferredUseBiosSerial: true", None, {"bios": {"useSerial": True}}),
        ("preferredUseBiosSerial: true", {"bios": {"useSerial": False}}, {"bios": {"useSerial": False}}),
        ("preferredUseEfi: true\npreferredUseSecureBoot: false", None, {"efi": {"secureBoot": False}}),
        (
            "preferredUseEfi: true\npreferredUseSecureBoot: false",
            {"efi": {"secureBoot": True}},
            {"efi": {"secureBoot": True}},
        ),
        (
            "preferredEfi: {persistent: true}\npreferredUseSecureBoot: false",
            None,
            {"efi": {"persistent": True}},
        ),
        ("preferredEfi: {persistent: true}", {"bios": {}}, {"bios": {}}),
        ("preferredUseBios: true", {"efi": {}}, {"efi": {}}),
        ("preferredUseSecureBoot: true", None, {}),
    ],
)
def test_firmware_preferences(firmware: str, vm_bootloader: Any, expected: dict[str, Any]) -> None:
    import json

    spec = (
        MEM if vm_bootloader is None else MEM + f"  firmware:\n    bootloader: {json.dumps(vm_bootloader)}\n"
    )
    pref = "firmware:\n" + textwrap.indent(firmware, "  ")
    assert tspec(expand_with(pref, spec))["domain"]["firmware"]["bootloader"] == expected


def test_clock_offset_only_when_none_is_set_and_timer_as_a_whole() -> None:
    pref = "clock:\n  preferredClockOffset: {utc: {offsetSeconds: 10}}\n  preferredTimer: {hpet: {present: false}}\n"
    kept = tspec(expand_with(pref, MEM + "  clock:\n    timezone: Europe/Prague\n    timer: {rtc: {}}\n"))
    assert kept["domain"]["clock"] == {"timezone": "Europe/Prague", "timer": {"rtc": {}}}
    filled = tspec(expand_with(pref, MEM))
    assert filled["domain"]["clock"] == {"utc": {"offsetSeconds": 10}, "timer": {"hpet": {"present": False}}}


def test_misc_preferences_fill_unset_fields() -> None:
    pref = """
    machine: {preferredMachineType: pc-q35-9.0}
    preferredSubdomain: lab
    preferredTerminationGracePeriodSeconds: 90
    preferredArchitecture: arm64
    annotations: {os: linux, team: pref}
    preferredLaunchSecurity: {sev: {}}
    volumes: {preferredStorageClassName: fast}
    """
    result = expand_with(pref, MEM, metadata="{annotations: {team: vm}}")
    spec = tspec(result)
    assert spec["domain"]["machine"] == {"type": "pc-q35-9.0"}
    assert spec["subdomain"] == "lab"
    assert spec["terminationGracePeriodSeconds"] == 90
    assert spec["architecture"] == "arm64"
    assert spec["domain"]["launchSecurity"] == {"sev": {}}
    assert result.vm["spec"]["template"]["metadata"]["annotations"] == {"team": "vm", "os": "linux"}
    dvts = result.vm["spec"]["dataVolumeTemplates"]
    assert dvts[0]["spec"]["storage"] == {"storageClassName": "fast"}
    assert dvts[1]["spec"]["pvc"] == {"storageClassName": "mine"}
    assert any(
        "preferredLaunchSecurity is accepted but has no effect" in w for w in map(words, result.warnings)
    )
    user = tspec(
        expand_with(
            pref,
            MEM
            + "  machine: {type: q35}\nsubdomain: mine\nterminationGracePeriodSeconds: 0\narchitecture: amd64\n",
        )
    )
    assert (user["domain"]["machine"]["type"], user["subdomain"], user["terminationGracePeriodSeconds"]) == (
        "q35",
        "mine",
        0,
    )
    assert user["architecture"] == "amd64"


def test_arm64_preference_gets_the_arm_machine_type() -> None:
    assert tspec(expand_with("preferredArchitecture: arm64", MEM))["domain"]["machine"] == {"type": "virt"}


def test_preference_without_instancetype_keeps_the_vm_topology() -> None:
    pref = "cpu:\n  preferredCPUTopology: spread\n"
    spec = tspec(expand_with(pref, MEM + "  cpu: {cores: 4}\n"))
    assert spec["domain"]["cpu"] == {"cores": 4}


def test_apply_preference_without_preference_changes_nothing() -> None:
    spec: dict[str, Any] = {"domain": {}}
    apply_preference(None, spec, {})
    assert spec == {"domain": {}}


@pytest.mark.parametrize(
    ("cpu", "message"),
    [
        ("preferredCPUTopology: diagonal", "unknown preferredCPUTopology diagonal"),
        (
            "preferredCPUTopology: spread\nspreadOptions: {across: Sideways}",
            "across Sideways is not supported",
        ),
        (
            "preferredCPUTopology: spread\nspreadOptions: {across: CoresThreads, ratio: 4}",
            "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads",
        ),
    ],
)
def test_invalid_preferences_are_rejected(cpu: str, message: str) -> None:
    with pytest.raises(ExpansionError) as info:
        expand_with("cpu:\n" + textwrap.indent(cpu, "  "), MEM)
    assert message in str(info.value)
    assert "preference pref" in str(info.value)


def test_deprecated_topology_names_warn() -> None:
    result = expand_with("cpu:\n  preferredCPUTopology: preferCores\n", MEM)
    assert any(
        "PreferredCPUTopology preferCores is deprecated for removal in a future release, please use cores instead"
        in w
        for w in map(words, result.warnings)
    )


@pytest.mark.parametrize(
    ("across", "ratio", "guest", "message"),
    [
        (
            "SocketsCores",
            3,
            4,
            "4 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio",
        ),
        (
            "CoresThreads",
            2,
            3,
            "3 vCPUs provided by the instance type are not divisible by the number of threads per core 2",
        ),
        (
            "SocketsCoresThreads",
            2,
            6,
            "6 vCPUs provided by the instance type are not divisible by the number of threads per core 2 and "
            "Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2",
        ),
    ],
)
def test_spread_divisibility(across: str, ratio: int, guest: int, message: str) -> None:
    pref = f"cpu:\n  preferredCPUTopology: spread\n  spreadOptions: {{across: {across}, ratio: {ratio}}}\n"
    with pytest.raises(ExpansionError) as info:
        expand_with(pref, "domain: {}", instancetype=f"cpu: {{guest: {guest}}}\nmemory: {{guest: 1Gi}}")
    assert message in str(info.value)


def test_spread_of_one_vcpu_is_rejected_by_the_default_ratio() -> None:
    with pytest.raises(ExpansionError, match="1 vCPUs provided by the instance type are not divisible"):
        expand_with(
            "cpu:\n  preferredCPUTopology: spread\n",
            "domain: {}",
            instancetype="cpu: {guest: 1}\nmemory: {guest: 1Gi}",
        )


@pytest.mark.parametrize(
    ("topology", "cpu", "message"),
    [
        (
            "sockets",
            "sockets: 1\ncores: 4",
            "insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as sockets",
        ),
        (
            "cores",
            "sockets: 4",
            "of 0 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as cores",
        ),
        (
            "threads",
            "threads: 1",
            "of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as threads",
        ),
        (
            "any",
            "sockets: 1\ncores: 2",
            "of 0 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as cores, sockets and threads",
        ),
        (
            "spread",
            "sockets: 1\ncores: 1\nthreads: 2",
            "of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as SocketsCores",
        ),
    ],
)
def test_cpu_requirements_without_instancetype(topology: str, cpu: str, message: str) -> None:
    pref = f"cpu:\n  preferredCPUTopology: {topology}\nrequirements:\n  cpu:\n    guest: 2\n"
    with pytest.raises(ExpansionError) as info:
        expand_with(pref, MEM + "  cpu:\n" + textwrap.indent(cpu, "    "))
    assert "failure checking preference requirements: " in str(info.value)
    assert message in str(info.value)


def test_cpu_requirements_met_by_the_default_topology_from_requests() -> None:
    pref = "requirements:\n  cpu:\n    guest: 2\n"
    spec = tspec(expand_with(pref, "domain:\n  resources:\n    requests: {cpu: '2', memory: 1Gi}\n"))
    assert spec["domain"]["cpu"] == {"sockets": 2, "cores": 1, "threads": 1}


def test_memory_requirement_with_instancetype() -> None:
    with pytest.raises(ExpansionError) as info:
        expand_with(
            "requirements:\n  memory:\n    guest: 2Gi\n",
            "domain: {}",
            instancetype="cpu: {guest: 1}\nmemory: {guest: 1024Mi}",
        )
    assert "insufficient Memory resources of 1Gi provided by instance type, preference requires 2Gi" in str(
        info.value
    )


def test_architecture_requirement() -> None:
    with pytest.raises(
        ExpansionError, match="preference requires architecture arm64 but amd64 is being requested"
    ):
        expand_with("requirements:\n  architecture: arm64\n", MEM)
    met = expand_with("preferredArchitecture: arm64\nrequirements:\n  architecture: arm64\n", MEM)
    assert tspec(met)["architecture"] == "arm64"


def test_unknown_preference_fields_are_errors_and_unapplied_ones_reported() -> None:
    with pytest.raises(
        ManifestError,
        match=r"spec\.devices\.preferredDiskBuss: unknown field 'preferredDiskBuss'; did you mean preferredDiskBus",
    ):
        expand_with("devices:\n  preferredDiskBuss: virtio\n", MEM)
    with pytest.raises(ManifestError, match="did you mean preferredArchitecture"):
        expand_with("preferedArchitecture: arm64\n", MEM)
    result = expand_with("devices:\n  preferredVirtualGPUOptions: {display: {enabled: true}}\n", MEM)
    assert "spec.devices.preferredVirtualGPUOptions has no effect" in "\n".join(map(words, result.warnings))
    assert tspec(result)["architecture"] == "amd64"
