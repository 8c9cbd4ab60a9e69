"""What the render stage refuses, and how it says so.

Covers: host paths outside the allowed directories (``/etc/shadow``, ``/dev/sda``,
``..`` traversal, relative paths) for hostDisk and image-map entries; fields with
no mapping on a libvirt host (rejected, never dropped); KubeVirt validation the
converter repeats (buses, CD-ROM on virtio, read-only SATA, IDE, boot order, secure
boot without SMM, EFI with BIOS, missing memory, unknown volume/network names);
run strategy conflicts; every error is a ``RenderError`` naming the subject and the
field path. A bad name is refused by the catalog, where the VM's key is made.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.catalog import build_catalog
from reconciler.errors import ManifestError, RenderError
from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig, ImageSource
from reconciler.wording.problems import words

HOST = HostConfig(
    allowed_dirs=("/srv/vms",),
    volume_dir="/srv/vms/generated",
    images={
        "evil/shadow:1": ImageSource("/etc/shadow", "raw"),
        "ok/image:1": ImageSource("/srv/vms/images/ok.qcow2"),
    },
)

BASE: dict[str, Any] = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachine",
    "metadata": {"name": "vm1", "namespace": "default"},
    "spec": {
        "runStrategy": "Always",
        "template": {
            "spec": {
                "domain": {
                    "cpu": {"sockets": 1, "cores": 1, "threads": 1},
                    "memory": {"guest": "1Gi"},
                    "devices": {
                        "disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                        "interfaces": [{"name": "default", "masquerade": {}}],
                    },
                },
                "networks": [{"name": "default", "pod": {}}],
                "volumes": [
                    {
                        "name": "root",
                        "hostDisk": {
                            "path": "/srv/vms/root.qcow2",
                            "type": "DiskOrCreate",
                            "capacity": "1Gi",
                        },
                    }
                ],
            }
        },
    },
}


def vm_with(edit: Any) -> ExpandedVM:
    vm = copy.deepcopy(BASE)
    edit(vm, vm["spec"]["template"]["spec"])
    return ExpandedVM(vm=vm, source=Manifest(vm, "vms/vm1.yaml", 3))


def render(edit: Any, host: HostConfig = HOST) -> Any:
    return render_domain(vm_with(edit), host, HostCaps.default())


def test_base_renders() -> None:
    assert "<name>vm1</name>" in render(lambda vm, s: None).xml


def _host_disk(path: str, kind: str = "Disk") -> Any:
    def edit(vm: Any, s: Any) -> None:
        s["volumes"][0]["hostDisk"] = {"path": path, "type": kind, "capacity": "1Gi"}

    return edit


@pytest.mark.parametrize(
    "path",
    [
        "/etc/shadow",
        "/dev/sda",
        "/srv/vms/../../etc/shadow",
        "/srv/vms/./x/../../../dev/sda",
        "/srv/vmsx/disk.img",
        "/srv/vms",
        "srv/vms/relative.img",
        "//srv/vms/disk.img",
        "/srv/vms/disk\x00.img",
    ],
)
@pytest.mark.parametrize("kind", ["Disk", "DiskOrCreate"])
def test_host_paths_outside_allowed_directories_are_rejected(path: str, kind: str) -> None:
    with pytest.raises(RenderError) as err:
        render(_host_disk(path, kind))
    assert err.value.subject == "vm/vm1"
    assert err.value.field == "spec.template.spec.volumes[0].hostDisk.path"
    assert "outside the allowed directories" in str(err.value)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/srv/vms/generated/other-vm/cloudinit.iso", "inside the volume directory"),
        ("/srv/vms/images/ok.qcow2", "base image of the host config's image map"),
    ],
)
def test_host_disk_cannot_reach_generated_files_or_base_images(path: str, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        render(_host_disk(path))


def test_ports_have_no_effect_but_are_reported() -> None:
    rendered = render(_set("domain.devices.interfaces[0].ports", [{"port": 80}]))
    assert tuple(map(words, rendered.warnings)) == (
        "vm/vm1: spec.template.spec.domain.devices.interfaces[0].ports: "
        "has no effect on a libvirt host (configure the network instead)",
    )


def test_image_map_entry_outside_allowed_directories_is_rejected() -> None:
    def edit(vm: Any, s: Any) -> None:
        s["volumes"][0] = {"name": "root", "containerDisk": {"image": "evil/shadow:1"}}

    with pytest.raises(RenderError, match="outside the allowed directories"):
        render(edit)


def test_volume_directory_outside_allowed_is_caught_per_vm() -> None:
    host = HostConfig(allowed_dirs=("/srv/vms",), volume_dir="/var/tmp/elsewhere")

    def edit(vm: Any, s: Any) -> None:
        s["volumes"][0] = {"name": "root", "emptyDisk": {"capacity": "1Gi"}}

    with pytest.raises(RenderError, match="outside the allowed directories"):
        render(edit, host)


def _set(path: str, value: Any) -> Any:
    """Set a dotted path below spec.template.spec (``[i]`` indexes lists)."""

    def edit(vm: Any, s: Any) -> None:
        node = vm if path.startswith("!") else s
        parts = path.lstrip("!").replace("]", "").replace("[", ".").split(".")
        for p in parts[:-1]:
            node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
        last = parts[-1]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def both(a: Any, b: Any) -> Any:
    def edit(vm: Any, s: Any) -> None:
        a(vm, s)
        b(vm, s)

    return edit


CASES = [
    # Each case: the edit, the field named, the message.
    (_set("domain.devices.clientPassthrough", {}), "domain.devices.clientPassthrough", "USB redirection"),
    (_set("domain.devices.downwardMetrics", {}), "domain.devices.downwardMetrics", "downward metrics"),
    (_set("domain.cpu.realtime", {}), "domain.cpu.realtime", "realtime needs dedicatedCpuPlacement: true"),
    (
        _set("domain.cpu.isolateEmulatorThread", True),
        "domain.cpu.isolateEmulatorThread",
        "isolateEmulatorThread needs dedicatedCpuPlacement: true",
    ),
    (
        _set("!spec.template.metadata.annotations", {"hooks.kubevirt.io/hookSidecars": '[{"image": "x"}]'}),
        "spec.template.metadata.annotations[hooks.kubevirt.io/hookSidecars]",
        "hook sidecars are containers beside KubeVirt's virt-launcher",
    ),
    (
        _set("domain.devices.gpus", [{"name": "g", "deviceName": "nvidia.com/GP"}]),
        "domain.devices.gpus[0].deviceName",
        "device 'nvidia.com/GP' is not in the host config's hostDevices map",
    ),
    (
        _set("domain.devices.filesystems", [{"name": "fs", "virtiofs": {}}]),
        "domain.devices.filesystems",
        "not supported",
    ),
    (_set("domain.launchSecurity", {"sev": {}}), "domain.launchSecurity", "not supported"),
    (_set("domain.chassis", {"serial": "x"}), "domain.chassis", "not supported"),
    (
        _set("domain.cpu.dedicatedCpuPlacement", True),
        "domain.cpu.dedicatedCpuPlacement",
        "dedicates no CPUs: name the ones VMs may have to themselves",
    ),
    (
        _set("domain.cpu.numa", {"guestMappingPassthrough": {}}),
        "domain.cpu.numa",
        "numa needs dedicatedCpuPlacement",
    ),
    (
        _set("domain.firmware.kernelBoot", {"container": {"image": "k", "kernelPath": "/boot/vmlinuz"}}),
        "domain.firmware.kernelBoot.container.image",
        "image 'k' is not in the host config's image map",
    ),
    (
        _set("domain.firmware.kernelBoot", {"kernelArgs": "console=ttyS0"}),
        "domain.firmware.kernelBoot.kernelArgs",
        "kernelArgs need a kernel",
    ),
    (
        _set("domain.devices.disks[0].disk.bus", "ide"),
        "domain.devices.disks[0].disk.bus",
        "IDE bus is not supported",
    ),
    (
        _set("domain.devices.disks[0].disk.bus", "floppy"),
        "domain.devices.disks[0].disk.bus",
        "unrecognized bus",
    ),
    (
        _set("domain.devices.disks[0]", {"name": "root", "cdrom": {"bus": "virtio"}}),
        "domain.devices.disks[0].cdrom.bus",
        "Bus type virtio is invalid for CD-ROM device",
    ),
    (
        _set("domain.devices.disks[0]", {"name": "root", "disk": {"bus": "sata", "readonly": True}}),
        "domain.devices.disks[0].disk.readonly",
        "sata hard-disks do not support read-only.",
    ),
    (
        _set("domain.devices.disks[0]", {"name": "root", "lun": {"bus": "scsi"}}),
        "domain.devices.disks[0].lun",
        "block device",
    ),
    (
        _set("domain.devices.disks[0]", {"name": "root", "disk": {"bus": "sata"}, "dedicatedIOThread": True}),
        "domain.devices.disks[0].dedicatedIOThread",
        "IOThreads are not supported for disks on a sata bus",
    ),
    (_set("domain.devices.disks[0].name", "nope"), "domain.devices.disks[0].name", "'nope' not found."),
    (_set("domain.devices.disks[0].bootOrder", 0), "domain.devices.disks[0].bootOrder", ">= 1"),
    (
        both(_set("domain.devices.disks[0].bootOrder", 1), _set("domain.devices.interfaces[0].bootOrder", 1)),
        "domain.devices.interfaces[0].bootOrder",
        "also used by",
    ),
    (
        both(_set("domain.devices.disks[0].shareable", True), _set("domain.devices.disks[0].cache", "none")),
        "domain.devices.disks[0].shareable",
        "needs a raw image, not qcow2",
    ),
    (_set("domain.devices.disks[0].cache", "unsafe"), "domain.devices.disks[0].cache", "unsupported value"),
    (
        _set("domain.firmware.bootloader", {"efi": {}}),
        "domain.firmware.bootloader.efi.secureBoot",
        "SecureBoot requires SMM",
    ),
    (
        _set("domain.firmware.bootloader", {"efi": {"secureBoot": False}, "bios": {}}),
        "domain.firmware.bootloader",
        "EFI and BIOS",
    ),
    (_set("domain.memory", {}), "domain.memory.guest", "no memory requested"),
    (_set("domain.memory.maxGuest", "512Mi"), "domain.memory.maxGuest", "must not be less"),
    (_set("domain.cpu", {"sockets": 4, "maxSockets": 2}), "domain.cpu.sockets", "exceed maxSockets"),
    (
        _set("domain.devices.interfaces[0].model", "vmxnet3"),
        "domain.devices.interfaces[0].model",
        "unsupported value",
    ),
    (
        _set("domain.devices.interfaces[0].slirp", {}),
        "domain.devices.interfaces[0].slirp",
        "one binding per interface (masquerade, slirp given)",
    ),
    (
        _set("domain.devices.interfaces[0].macvtap", {}),
        "domain.devices.interfaces[0].macvtap",
        "one binding per interface (masquerade, macvtap given)",
    ),
    (
        _set("domain.devices.interfaces[0].name", "other"),
        "domain.devices.interfaces[0].name",
        "'other' not found.",
    ),
    (
        _set("domain.devices.interfaces[0].macAddress", "01:00:5e:00:00:01"),
        "domain.devices.interfaces[0].macAddress",
        "multicast",
    ),
    (
        _set("domain.devices.interfaces[0].macAddress", "zz:00"),
        "domain.devices.interfaces[0].macAddress",
        "not a MAC",
    ),
    (
        _set("networks[0]", {"name": "default", "multus": {"networkName": "unknown-net"}}),
        "networks[0].multus.networkName",
        "not in the host config's network map",
    ),
    (
        _set("volumes[0]", {"name": "root", "configMap": {"name": "c"}}),
        "volumes[0].configMap.name",
        "ConfigMap 'c' is not in the repository",
    ),
    (
        _set("volumes[0]", {"name": "root", "serviceAccount": {"serviceAccountName": "c"}}),
        "volumes[0].serviceAccount",
        "volume source serviceAccount is not supported",
    ),
    (
        _set("volumes[0]", {"name": "root", "cloudInitNoCloud": {"userDataSecretRef": {"name": "s"}}}),
        "volumes[0].cloudInitNoCloud.userDataSecretRef",
        "Secret 's' is not in the repository (namespace default) and the host config sets no secretsDirectory",
    ),
    (
        _set("volumes[0]", {"name": "root", "cloudInitNoCloud": {"userDataBase64": "%%%"}}),
        "volumes[0].cloudInitNoCloud.userDataBase64",
        "base64",
    ),
    (
        _set("volumes[0]", {"name": "root", "emptyDisk": {}}),
        "volumes[0].emptyDisk.capacity",
        "needs a capacity",
    ),
    (
        _set("volumes[0]", {"name": "root", "hostDisk": {"path": "/srv/vms/a.img", "type": "DiskOrCreate"}}),
        "volumes[0].hostDisk.capacity",
        "needs a capacity",
    ),
    (
        lambda vm, s: s["volumes"].append({"name": "orphan", "emptyDisk": {"capacity": "1Gi"}}),
        "volumes[1]",
        "has no disk",
    ),
    (_set("domain.clock", {"utc": {}, "timezone": "UTC"}), "domain.clock", "cannot both be set"),
    (
        _set("domain.clock.timer", {"rtc": {"tickPolicy": "merge"}}),
        "domain.clock.timer.rtc.tickPolicy",
        "unsupported value",
    ),
    (
        _set("domain.features.hyperv", {"synic": {}, "vpindex": {"enabled": False}}),
        "domain.features.hyperv.vpindex",
        "synic requires it",
    ),
    (
        _set("domain.devices.inputs", [{"name": "kbd", "type": "keyboard"}]),
        "domain.devices.inputs[0].type",
        "only tablet",
    ),
    (
        _set("domain.devices.watchdog", {"name": "w", "diag288": {}}),
        "domain.devices.watchdog.diag288",
        "not supported",
    ),
    (_set("domain.devices.watchdog", {"name": "w"}), "domain.devices.watchdog", "only the i6300esb"),
    (_set("architecture", "arm64"), "architecture", "not offered by this host"),
    (_set("domain.somethingNew", {}), "domain.somethingNew", "not supported"),
    (
        _set("accessCredentials", [{"sshPublicKey": {}}]),
        "accessCredentials[0].sshPublicKey.propagationMethod",
        "give noCloud: {} or configDrive: {}",
    ),
    (_set("!spec.running", True), "spec.runStrategy", "mutually exclusive"),
    (_set("!spec.runStrategy", "WaitAsReceiver"), "spec.runStrategy", "unsupported run strategy"),
    (
        _set("!metadata.annotations", {"reconciler.kubevirt.io/rollout": "Later"}),
        "metadata.annotations[reconciler.kubevirt.io/rollout]",
        "Stage or Restart",
    ),
    (
        _set("!metadata.annotations", {"reconciler.kubevirt.io/prune": "no"}),
        "metadata.annotations[reconciler.kubevirt.io/prune]",
        '"true" or "false"',
    ),
]


@pytest.mark.parametrize(("edit", "field", "message"), CASES, ids=[c[1] for c in CASES])
def test_rejected_with_the_field_named(edit: Any, field: str, message: str) -> None:
    with pytest.raises(RenderError) as err:
        render(edit)
    expected = field if field.startswith(("spec.", "metadata.")) else f"spec.template.spec.{field}"
    assert err.value.field == expected
    assert message in str(err.value)
    assert err.value.subject == vm_with(edit).subject
    assert str(err.value).startswith(f"{err.value.subject}: {expected}: ")


def test_a_bad_name_is_refused_where_the_key_is_made() -> None:
    """Render writes the name of the key it is handed: the catalog made that key and
    checked the name there, once (``VMKey.checked``)."""
    vm = vm_with(_set("!metadata.name", "Bad_Name")).vm
    with pytest.raises(ManifestError) as err:
        build_catalog([Manifest(vm, "vms/vm1.yaml", 3)])
    assert err.value.field == "metadata.name"
    assert "metadata.name 'Bad_Name' is not a DNS-1123 subdomain" in str(err.value)


def test_running_false_and_neither_field() -> None:
    assert (
        str(render(_set("!spec", {"running": False, "template": BASE["spec"]["template"]})).run_strategy)
        == "Halted"
    )
    assert str(render(_set("!spec", {"template": BASE["spec"]["template"]})).run_strategy) == "Halted"
    assert (
        str(render(_set("!spec", {"running": True, "template": BASE["spec"]["template"]})).run_strategy)
        == "Always"
    )


def test_an_unmapped_image_offline_is_shown_as_written_and_left_to_the_host() -> None:
    """No host resolved the revision (render, diff): the reference is shown as written,
    with a warning that the host resolves it, and no file to build on."""
    edit = _set("volumes[0]", {"name": "root", "containerDisk": {"image": "not/mapped:1"}})
    rendered = render(edit)
    (vol,) = [v for v in rendered.volumes if v.kind == "overlay"]
    assert (vol.image, vol.backing, vol.digest) == ("not/mapped:1", "", "")
    (warning,) = [w for w in rendered.warnings if "not/mapped:1" in w.message]
    assert warning.field == "spec.template.spec.volumes[0].containerDisk.image"
    assert "resolved by the host" in warning.message


def test_a_resolved_image_is_the_store_file_with_its_digest() -> None:
    digest = "sha256:" + "ab" * 32
    host = HostConfig(
        allowed_dirs=("/srv/vms",),
        volume_dir="/srv/vms/generated",
        images={"reg/disk:1": ImageSource(f"/srv/vms/images/sha256/{'cd' * 32}", "qcow2", digest)},
        images_resolved=True,
    )
    rendered = render(_set("volumes[0]", {"name": "root", "containerDisk": {"image": "reg/disk:1"}}), host)
    (vol,) = [v for v in rendered.volumes if v.kind == "overlay"]
    assert (vol.image, vol.backing, vol.digest) == (
        "reg/disk:1",
        f"/srv/vms/images/sha256/{'cd' * 32}",
        digest,
    )
    assert not [w for w in rendered.warnings if "reg/disk:1" in w.message]
