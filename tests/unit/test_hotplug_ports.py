"""Hotplug ports reserved as KubeVirt reserves them (``render.ports``), and a domain without them.

Covers: the free ``pcie-root-port`` count of KubeVirt's ``allocateHotplugPorts`` for a
q35 VM with N interfaces (small and large memory), the ports libvirt fills rendered
before the free ones, the cap at bus index 31, no ports on i440fx, on s390x or with
``placePCIDevicesOnRootComplex``; a running domain defined without the ports: its
persistent definition gains them with no restart-class change and the running diff
says they come at the next boot, in one plan line, no drift; a PCI bridge libvirt numbered keeps its index; the
ports of placed devices but NICs sealed (``hotplug='off'``) as KubeVirt seals them, in
the definition when the live addresses are known, else after the define.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from reconciler import ownership
from reconciler.compare.cache import CompareCache
from reconciler.compare.changes import diff_essences, running_diff
from reconciler.compare.definition import Documents
from reconciler.compare.essence import carry_addresses, essence
from reconciler.model.changes import Action, ChangeClass
from reconciler.model.reasons import Note, Noted
from reconciler.plan.build import build_plan
from reconciler.plan.text import format_plan
from reconciler.render.ports import (
    ANNOTATION_ROOT_COMPLEX,
    held_ports,
    hotplug_ports,
    render_hotplug_ports,
    seal_occupied_ports,
    sealed_ports,
    seals_pending,
)
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import note, said
from tests.helpers.plans import REV, live_of, rendered


def domain(nics: int, memory_mib: int = 128, machine: str = "q35", arch: str = "x86_64") -> ET.Element:
    ifaces = "".join(
        f'<interface type="user"><mac address="52:54:00:00:00:{i:02x}"/><model type="virtio"/></interface>'
        for i in range(nics)
    )
    return ET.fromstring(
        f'<domain type="qemu"><name>vm</name><memory unit="b">{memory_mib * 1024 * 1024}</memory>'
        f'<os><type arch="{arch}" machine="{machine}">hvm</type></os><devices>'
        '<disk type="file" device="disk"><source file="/x"/><target dev="vda" bus="virtio"/></disk>'
        f'{ifaces}<serial type="pty"><target port="0"/></serial>'
        '<channel type="unix"><target type="virtio" name="org.qemu.guest_agent.0"/></channel>'
        "</devices></domain>"
    )


# KubeVirt: in use = interfaces + virtio disk + usb, scsi, virtio-serial controllers + balloon;
# free = max(4 - interfaces (with some), max(8 - in use, 3)) (16 and 6 above 2 GiB).
@pytest.mark.parametrize(
    ("nics", "memory_mib", "free"),
    [(0, 128, 3), (1, 128, 3), (2, 128, 3), (4, 128, 3), (1, 4096, 10), (3, 4096, 8), (10, 4096, 6)],
)
def test_a_vm_with_n_interfaces_gets_kubevirts_count_of_free_ports(
    nics: int, memory_mib: int, free: int
) -> None:
    tree = domain(nics, memory_mib)
    ports = render_hotplug_ports(tree, {}, {})
    assert ports is not None
    assert ports.free == free
    # libvirt fills one port per interface, the disk, qemu-xhci, virtio-serial and the balloon
    assert ports.occupied == nics + 4
    indices = [int(c.get("index", "")) for c in tree.iter("controller") if c.get("model") == "pcie-root-port"]
    assert indices == list(range(1, nics + 4 + free + 1))


def test_kubevirts_scsi_controller_counts_unless_hotplug_is_disabled() -> None:
    ports = hotplug_ports(domain(0), {"disableHotplug": True}, {})
    assert ports is not None
    assert ports.free == 4  # 8 - (disk, usb, serial, balloon): no SCSI controller


def test_ports_stop_at_bus_index_31() -> None:
    ports = hotplug_ports(domain(26, 4096), {}, {})
    assert ports is not None
    assert ports.occupied + ports.free == 31


@pytest.mark.parametrize(
    ("machine", "arch", "annotations"),
    [
        ("pc-i440fx-8.2", "x86_64", {}),
        ("s390-ccw-virtio", "s390x", {}),
        ("q35", "x86_64", {ANNOTATION_ROOT_COMPLEX: "true"}),
    ],
)
def test_no_ports_without_pcie_hotplug(machine: str, arch: str, annotations: dict[str, str]) -> None:
    tree = domain(1, machine=machine, arch=arch)
    assert render_hotplug_ports(tree, {}, annotations) is None
    assert not list(tree.iter("controller"))


def test_a_running_domain_without_the_ports_gets_them_at_its_next_boot() -> None:
    old = domain(1)
    new = domain(1)
    render_hotplug_ports(new, {}, {})
    live = ET.tostring(old, encoding="unicode")
    desired = essence(ET.tostring(new, encoding="unicode"))
    rd = running_diff(desired, essence(live))
    assert rd.empty  # nothing live, nothing restart-class
    assert rd.notes == (Note(Noted.PORTS_RESERVED, count=8),)
    assert [note(n) for n in rd.notes] == ["8 hotplug ports reserved at next boot"]
    fields = diff_essences(desired, essence(live), essence(live))
    assert fields
    assert all(f.change_class == ChangeClass.LIVE for f in fields)


def test_a_bridge_libvirt_numbered_keeps_its_index() -> None:
    new = domain(1)
    render_hotplug_ports(new, {}, {})
    live = domain(1)
    devices = live.find("devices")
    assert devices is not None
    bridge = ET.SubElement(
        devices, "controller", {"type": "pci", "index": "2", "model": "pcie-to-pci-bridge"}
    )
    ET.SubElement(bridge, "address", {"type": "pci", "bus": "0x01", "slot": "0x00"})
    live_xml = ET.tostring(live, encoding="unicode")
    final = ET.fromstring(carry_addresses(ET.tostring(new, encoding="unicode"), live_xml))
    kept = [c for c in final.iter("controller") if c.get("index") == "2"]
    assert [c.get("model") for c in kept] == ["pcie-to-pci-bridge"]
    assert running_diff(essence(ET.tostring(new, encoding="unicode")), essence(live_xml)).restart == ()


def placed(tree: ET.Element) -> ET.Element:
    """``tree`` as libvirt places it on q35: each PCIe device in the next root port."""
    devices = tree.find("devices")
    assert devices is not None
    bus = 1
    for el in devices:
        if el.tag in ("disk", "interface", "memballoon") or (
            el.tag == "controller" and el.get("type") in ("usb", "virtio-serial")
        ):
            ET.SubElement(
                el, "address", {"type": "pci", "domain": "0x0000", "bus": f"0x{bus:02x}", "slot": "0x00"}
            )
            bus += 1
    return tree


def port_targets(tree: ET.Element) -> dict[int, str | None]:
    return {
        int(c.get("index", "")): (t.get("hotplug") if (t := c.find("target")) is not None else None)
        for c in tree.iter("controller")
        if c.get("model") == "pcie-root-port"
    }


def test_the_ports_of_placed_devices_but_nics_are_sealed_as_kubevirt_seals_them() -> None:
    tree = domain(1)
    render_hotplug_ports(tree, {}, {})
    devices = tree.find("devices")
    assert devices is not None
    ET.SubElement(devices, "controller", {"type": "usb", "index": "0", "model": "qemu-xhci"})
    ET.SubElement(devices, "memballoon", {"model": "virtio"})
    assert seals_pending(tree, new=True)  # a new domain: libvirt places and adds devices
    assert not seals_pending(tree, new=False)  # no address at all: a host that places nothing
    assert seal_occupied_ports(tree) == 0
    placed(tree)  # disk on 1, interface on 2, usb on 3, balloon on 4
    assert not seals_pending(tree, new=False)
    added = ET.fromstring(ET.tostring(tree))
    added_devices = added.find("devices")
    assert added_devices is not None
    ET.SubElement(ET.SubElement(added_devices, "disk"), "target", {"dev": "vdb", "bus": "virtio"})
    assert seals_pending(added, new=False)  # an added disk libvirt has yet to place
    assert seal_occupied_ports(tree) == 3
    targets = port_targets(tree)
    assert [i for i, hotplug in targets.items() if hotplug == "off"] == [1, 3, 4]
    assert targets[2] is None  # the NIC's port stays hotpluggable (NIC hot-unplug)
    assert seal_occupied_ports(tree) == 0  # once


def _define(new: ET.Element, live: ET.Element | None):  # type: ignore[no-untyped-def]
    lived = live_of(rendered("vm", ET.tostring(live, encoding="unicode"))) if live is not None else None
    docs = Documents(rendered("vm", ET.tostring(new, encoding="unicode")), lived)
    return docs.definition(ownership.mark_for(docs.domain, "a" * 40))


def test_a_definition_keeps_the_seals_of_the_live_one_and_adds_none() -> None:
    new = domain(1)
    render_hotplug_ports(new, {}, {})
    fresh = _define(new, None)
    assert fresh.seal_after_define  # a new domain: libvirt places every device
    assert fresh.held_ports == frozenset()
    assert "hotplug" not in fresh.xml
    live = placed(domain(1))  # disk on port 1, NIC on 2, unsealed (adopted, or an earlier version)
    kept = _define(new, live)
    assert not kept.seal_after_define  # every device keeps its address
    assert "hotplug" not in kept.xml  # no seal the plan does not show
    live_ports = placed(ET.fromstring(ET.tostring(new)))  # as libvirt holds it after a define
    seal_occupied_ports(live_ports)  # port 1 (the disk) sealed when it was placed
    assert sealed_ports(live_ports) == frozenset({1})
    assert port_targets(ET.fromstring(_define(new, live_ports).xml))[1] == "off"  # kept
    assert port_targets(ET.fromstring(_define(new, live_ports).xml))[2] is None  # the NIC's
    without_disk = domain(1)
    disks = without_disk.find("devices")
    assert disks is not None
    disks.remove(disks.findall("disk")[0])
    render_hotplug_ports(without_disk, {}, {})
    assert "hotplug" not in _define(without_disk, live_ports).xml  # the disk went: its port is free


def test_after_a_define_only_the_ports_of_newly_placed_devices_are_sealed() -> None:
    tree = placed(domain(2))  # disk on 1, NICs on 2 and 3
    render_hotplug_ports(tree, {}, {})
    devices = tree.find("devices")
    assert devices is not None
    added = ET.SubElement(devices, "disk")
    ET.SubElement(added, "target", {"dev": "vdb", "bus": "virtio"})
    assert seals_pending(tree, new=False)
    held = held_ports(tree)
    assert held >= {1, 2, 3}
    ET.SubElement(added, "address", {"type": "pci", "bus": "0x04", "slot": "0x00"})  # libvirt places it
    assert seal_occupied_ports(tree, skip=held) == 1
    assert sealed_ports(tree) == frozenset({4})  # the disk placed before keeps its port as it was


def test_ports_a_definition_lacks_are_one_plan_line_and_no_drift() -> None:
    """A VM above 2 GiB whose definition lacks the root ports KubeVirt reserves (defined by
    an earlier version, or adopted): the plan adds them to the definition in one line,
    says why, and calls it no drift."""
    old = domain(1, memory_mib=4096)
    new = domain(1, memory_mib=4096)
    render_hotplug_ports(new, {}, {})
    d = rendered("vm", ET.tostring(new, encoding="unicode"))
    live = live_of(
        d, persistent=ET.tostring(old, encoding="unicode"), running=ET.tostring(old, encoding="unicode")
    )
    (c,) = build_plan(REV, [d], [live], PlanPolicy(), cache=CompareCache()).changes
    assert not c.drift, said(c)
    assert c.action == Action.UPDATE
    assert "hotplug root port(s) reserved" in said(c)
    text = format_plan(build_plan(REV, [d], [live], PlanPolicy(), cache=CompareCache()))
    (line,) = [t for t in text.splitlines() if "controller" in t or "hotplug root ports" in t]
    assert "devices (hotplug root ports): (none) → " in line, text
