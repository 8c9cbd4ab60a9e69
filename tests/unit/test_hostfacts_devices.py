"""Host facts of devices and boot files: what a host must offer for SR-IOV interfaces,
mediated devices and a direct kernel boot.

Covers: an ``sriov`` interface on a libvirt network that is not an SR-IOV pool
(forward mode hostdev), and any other binding on such a pool, are one problem each at
the interface's (or network's) field; unknown pools are never checked. kernelBoot: the
kernel and initrd must be regular files of the mapped image directory whose real path
lies inside allowedDirectories (a missing file, a symlink leading out, a FIFO, a
missing directory), read from a real directory and checked offline through a facts
file (``validate --host-facts`` fails at the field's file:line). Node devices: PCI
functions, USB devices and mediated devices (UUID and type, also libvirt's older names)
read from node device XML; a PCI or USB device passed through that the host lacks is
one problem at its gpus/hostDevices deviceName; offline, a vGPU pool whose instance the
facts file lacks fails ``validate`` at the deviceName's file:line. The new facts survive
the JSON file.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

from reconciler import cli
from reconciler.host.hypervisor import image_dir_files
from reconciler.hostfacts import HostFacts, check_domain, facts_from_json, facts_to_json, parse_node_devices

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from tests.helpers.git import GitRepo

IFACES = "spec.template.spec.domain.devices.interfaces"


def spec(*ifaces: dict[str, Any]) -> dict[str, Any]:
    nets = [{"name": i["name"], "multus": {"networkName": i["name"]}} for i in ifaces]
    devices = {"interfaces": list(ifaces)}
    return {"spec": {"template": {"spec": {"domain": {"devices": devices}, "networks": nets}}}}


def domain(devices: str = "", os_extra: str = "") -> ET.Element:
    """A domain's element tree, as rendering hands it to the facts check."""
    return ET.fromstring(
        "<domain type='kvm'><name>x</name><memory unit='KiB'>1048576</memory>"
        f"<vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type>{os_extra}</os>"
        f"<devices>{devices}</devices></domain>"
    )


def network_iface(net: str) -> str:
    return f"<interface type='network'><source network='{net}'/></interface>"


SRIOV_FACTS = HostFacts(
    host="h1", networks=(("default", True), ("vf-pool", True)), hostdev_networks=("vf-pool",)
)


def test_sriov_needs_a_network_pooling_virtual_functions() -> None:
    xml = domain(network_iface("default") + network_iface("vf-pool"))
    ok = spec({"name": "a", "bridge": {}}, {"name": "b", "sriov": {}})
    assert check_domain(xml, ok, SRIOV_FACTS, {}) == ()
    swapped = spec({"name": "a", "sriov": {}}, {"name": "b", "bridge": {}})
    problems = [(p.field, p.message) for p in check_domain(xml, swapped, SRIOV_FACTS, {})]
    assert problems == [
        (
            f"{IFACES}[0].sriov",
            "libvirt network 'default' is not an SR-IOV pool on this host "
            "(it needs <forward mode='hostdev' managed='yes'><pf dev='NIC'/></forward>)",
        ),
        (
            "spec.template.spec.networks[1]",
            "libvirt network 'vf-pool' hands out SR-IOV virtual functions (forward mode hostdev) "
            "on this host: give the interface sriov: {}",
        ),
    ]
    unknown = HostFacts(networks=SRIOV_FACTS.networks)  # which networks pool VFs is not known
    assert check_domain(xml, swapped, unknown, {}) == ()


NODE_DEVICES = [
    """<device><name>pci_0000_65_00_0</name><parent>pci_0000_64_00_0</parent>
    <capability type='pci'><class>0x030200</class><domain>0</domain><bus>101</bus><slot>0</slot>
    <function>0</function><product id='0x2236'>GA102GL [A10]</product><vendor id='0x10de'>NVIDIA</vendor>
    <capability type='mdev_types'><type id='nvidia-222'><name>GRID T4-1Q</name>
    <deviceAPI>vfio-pci</deviceAPI><availableInstances>15</availableInstances></type></capability>
    </capability></device>""",
    """<device><name>usb_1_4</name><parent>usb_usb1</parent><capability type='usb_device'>
    <bus>1</bus><device>4</device><product id='0x0407'>YubiKey</product><vendor id='0x1050'>Yubico</vendor>
    </capability></device>""",
    """<device><name>mdev_9a8c6a4e_2f57_4c3b_9d0c_5d1f3b8e1a01_0000_65_00_0</name>
    <parent>pci_0000_65_00_0</parent><capability type='mdev'><type id='nvidia-222'/>
    <uuid>9a8c6a4e-2f57-4c3b-9d0c-5d1f3b8e1a01</uuid><iommuGroup number='12'/></capability></device>""",
    """<device><name>mdev_4b20d080_1b54_4048_85b3_a6a62d165c01</name><parent>pci_0000_00_02_0</parent>
    <capability type='mdev'><type id='i915-GVTg_V5_8'/><iommuGroup number='0'/></capability></device>""",
    "<device><name>computer</name><capability type='system'/></device>",
]


def test_node_devices_are_read_from_their_xml() -> None:
    assert parse_node_devices(NODE_DEVICES) == {
        "pci_devices": ("0000:65:00.0",),
        "usb_devices": ("1050:0407",),
        "mdevs": (
            ("4b20d080-1b54-4048-85b3-a6a62d165c01", "i915-GVTg_V5_8"),
            ("9a8c6a4e-2f57-4c3b-9d0c-5d1f3b8e1a01", "nvidia-222"),
        ),
    }


def test_pci_and_usb_devices_must_be_on_the_host() -> None:
    pci = "<hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x65' slot='0x00' function='0x1'/></source></hostdev>"
    usb = "<hostdev mode='subsystem' type='usb'><source><vendor id='0x1050'/><product id='0x0407'/></source></hostdev>"
    devices = {"gpus": [{"name": "g", "deviceName": "a"}], "hostDevices": [{"name": "k", "deviceName": "b"}]}
    vm = {"spec": {"template": {"spec": {"domain": {"devices": devices}}}}}
    facts = HostFacts(**parse_node_devices(NODE_DEVICES))
    problems = [(p.field, p.message) for p in check_domain(domain(pci + usb), vm, facts, {})]
    assert problems == [
        (
            "spec.template.spec.domain.devices.gpus[0].deviceName",
            "PCI device 0000:65:00.1 does not exist on this host",
        )
    ]
    unplugged = HostFacts(pci_devices=("0000:65:00.1",), usb_devices=())
    problems = [(p.field, p.message) for p in check_domain(domain(pci + usb), vm, unplugged, {})]
    assert problems == [
        (
            "spec.template.spec.domain.devices.hostDevices[0].deviceName",
            "USB device 1050:0407 is not plugged into this host",
        )
    ]
    assert check_domain(domain(pci + usb), vm, HostFacts(), {}) == ()  # not known: not checked


def test_device_facts_survive_the_facts_file() -> None:
    assert facts_from_json(facts_to_json(SRIOV_FACTS), "f.json") == SRIOV_FACTS
    devices = HostFacts(**parse_node_devices(NODE_DEVICES))
    assert facts_from_json(facts_to_json(devices), "f.json") == devices
    dirs = HostFacts(image_dirs=((KERNEL_DIR, ("boot/vmlinuz",)),))
    assert facts_from_json(facts_to_json(dirs), "f.json") == dirs


KERNEL_DIR = "/srv/kernels/fedora-41"
KERNEL_BOOT = f"<kernel>{KERNEL_DIR}/boot/vmlinuz</kernel><initrd>{KERNEL_DIR}/boot/initramfs.img</initrd>"
BOOT_FIELD = "spec.template.spec.domain.firmware.kernelBoot.container"


def test_kernel_boot_files_must_be_regular_files_of_the_image_directory() -> None:
    xml = domain(os_extra=KERNEL_BOOT)
    both = HostFacts(
        images=((KERNEL_DIR, True),), image_dirs=((KERNEL_DIR, ("boot/initramfs.img", "boot/vmlinuz")),)
    )
    assert check_domain(xml, {}, both, {}) == ()
    no_kernel = HostFacts(images=((KERNEL_DIR, True),), image_dirs=((KERNEL_DIR, ("boot/initramfs.img",)),))
    assert [(p.field, p.message) for p in check_domain(xml, {}, no_kernel, {})] == [
        (
            f"{BOOT_FIELD}.kernelPath",
            f"kernel {KERNEL_DIR}/boot/vmlinuz is not a regular file inside allowedDirectories on this host",
        )
    ]
    gone = HostFacts(images=((KERNEL_DIR, False),), image_dirs=())
    problems = [(p.field, p.message) for p in check_domain(xml, {}, gone, {})]
    assert (
        problems == [(f"{BOOT_FIELD}.image", f"image directory {KERNEL_DIR} does not exist on this host")] * 2
    )
    assert check_domain(xml, {}, HostFacts(), {}) == ()  # nothing known: nothing checked
    unlisted = HostFacts(images=((KERNEL_DIR, True),), image_dirs=())  # too big to list: unknown
    assert check_domain(xml, {}, unlisted, {}) == ()


def test_image_directories_list_regular_files_inside_the_allowed_directories(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    image = allowed / "kernels" / "fedora-41"
    (image / "boot").mkdir(parents=True)
    (image / "boot" / "vmlinuz-6.11").write_bytes(b"kernel")
    (image / "boot" / "vmlinuz").symlink_to("vmlinuz-6.11")  # a link inside: the file it names
    (tmp_path / "shadow").write_text("secret")
    (image / "boot" / "initramfs.img").symlink_to(tmp_path / "shadow")  # leads out: refused
    os.mkfifo(image / "boot" / "fifo")
    (image / "boot" / "dangling").symlink_to(image / "nosuch")
    (allowed / "disk.qcow2").write_bytes(b"")
    got = image_dir_files([str(image), str(allowed / "disk.qcow2"), str(allowed / "nosuch")], [str(allowed)])
    assert got == {str(image): ("boot/vmlinuz", "boot/vmlinuz-6.11")}


KERNEL_VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: netboot
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {guest: 512Mi}
        firmware:
          kernelBoot:
            container:
              image: example/kernel
              kernelPath: /boot/vmlinuz
              initrdPath: /boot/initramfs.img
"""


def test_validate_offline_refuses_a_missing_kernel(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("vms/netboot.yaml", KERNEL_VM)
    git_repo.commit("a kernelBoot VM")
    host = tmp_path / "host.yaml"
    host.write_text(
        f"name: h1\nallowedDirectories: [/srv]\nvolumeDirectory: /srv/volumes\nimages:\n  example/kernel: {KERNEL_DIR}\n"
    )
    facts = tmp_path / "h1.json"
    listed = HostFacts(
        host="h1", images=((KERNEL_DIR, True),), image_dirs=((KERNEL_DIR, ("boot/initramfs.img",)),)
    )
    facts.write_text(facts_to_json(listed))
    args = ["validate", "--repo", str(git_repo.path), "--host-config", str(host), "--host-facts", str(facts)]
    assert cli.main(args) == 1
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert (
        "vms/netboot.yaml:15:15: vm/netboot: spec.template.spec.domain.firmware.kernelBoot.container.kernelPath: "
        f"cannot run on host h1: kernel {KERNEL_DIR}/boot/vmlinuz is not a regular file" in out
    )
    facts.write_text(
        facts_to_json(
            HostFacts(host="h1", image_dirs=((KERNEL_DIR, ("boot/initramfs.img", "boot/vmlinuz")),))
        )
    )
    assert cli.main(args) == 0


VGPU_VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: cad
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {guest: 512Mi}
        devices:
          gpus:
            - name: vgpu
              deviceName: nvidia.com/GRID_T4-1Q
"""
VGPU = "9a8c6a4e-2f57-4c3b-9d0c-5d1f3b8e1a01"


def test_validate_offline_refuses_a_vgpu_the_host_lacks(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("vms/cad.yaml", VGPU_VM)
    git_repo.commit("a vGPU VM")
    host = tmp_path / "host.yaml"
    host.write_text(
        f"name: h1\nhostDevices:\n  nvidia.com/GRID_T4-1Q: {{mdev: {{type: nvidia-222, uuids: [{VGPU}]}}}}\n"
    )
    facts = tmp_path / "h1.json"
    facts.write_text(facts_to_json(HostFacts(host="h1", mdevs=())))
    args = ["validate", "--repo", str(git_repo.path), "--host-config", str(host), "--host-facts", str(facts)]
    assert cli.main(args) == 1
    captured = capsys.readouterr()
    assert (
        "vms/cad.yaml:14:15: vm/cad: spec.template.spec.domain.devices.gpus[0].deviceName: cannot run on host h1: "
        f"needs 1 of host h1's mediated devices 'nvidia.com/GRID_T4-1Q' (1 in its pool); 0 are free; "
        f"not on this host: {VGPU}" in captured.out + captured.err
    )
    facts.write_text(facts_to_json(HostFacts(host="h1", mdevs=((VGPU, "nvidia-222"),))))
    assert cli.main(args) == 0
