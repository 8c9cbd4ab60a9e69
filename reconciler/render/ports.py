"""Hotplug ports: the free ``pcie-root-port`` controllers KubeVirt leaves on a PCIe machine.

Input: the drafted ``<domain>`` tree (machine type, memory, devices, pass-through
included) and the VM's template annotations. Output: ``pcie-root-port`` controllers
appended under ``<devices>``, one for every port libvirt will fill with a device plus
the free ones KubeVirt would leave for hotplug. Pure and deterministic: the count
comes from the tree alone, never from the host. Never touches a machine without PCIe
root ports (i440fx, s390x), nor a VM that asks for devices on the root complex
(``kubevirt.io/placePCIDevicesOnRootComplex: "true"``).

KubeVirt (``pkg/virt-launcher/virtwrap/manager.go``, ``allocateHotplugPorts``):
on a machine with PCIe hotplug (``defaults.SupportsPCIeHotplug``: q35 or virt on
amd64 / arm64) it leaves ``max(placeholders, free)`` empty root ports, where
``placeholders = max(0, 4 - interfaces)`` for a VM with interfaces
(``calculateHotplugPortCountV1``) and ``free = max(total - in use, minimum)``
(``calculateHotplugPortCountV2``: total 8 and minimum 3, or 16 and 6 above 2 GiB of
memory; "in use" is ``converter.CountPCIDevices`` of its domain: interfaces, PCI host
devices, controllers but the PCI roots (its converter always has a USB controller,
a SCSI controller unless ``disableHotplug``, a virtio-serial one unless
``autoattachSerialConsole: false``), virtio disks and inputs, watchdogs, rng and the
balloon); appended ports stop at bus index 31 (``maxPCIBusIndex``).

libvirt assigns the addresses here (``carry_addresses`` keeps them afterwards), and it
puts a device without an address into an empty root port before it adds one: so the
ports rendered are those libvirt 9.0 fills on q35 (one per PCIe device, one for a
``pcie-to-pci-bridge`` when a conventional PCI device needs one) followed by the free
ones, numbered from 1 (``ports_in_use`` predicts the first number; a QEMU test checks
it against libvirt). A domain defined before the ports existed gets them at its next
cold boot: the running domain lacks them, which is no reason to restart it
(``compare.changes``).

``seal_occupied_ports`` is KubeVirt's ``pci.DisableHotplugOnOccupiedRootPorts``: once the
devices have addresses, the ports that hold one other than a NIC get ``hotplug='off'``
(the guest cannot eject its disks or controllers). The final definition seals them from
the carried addresses (``compare.definition``); when libvirt has yet to place devices
(``seals_pending``), apply seals them after the define (``host.apply``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.model.devices import KINDS
from reconciler.model.pci import PCIE
from reconciler.model.units import memory_bytes
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping
    from collections.abc import Set as AbstractSet
    from typing import Any

ANNOTATION_ROOT_COMPLEX = "kubevirt.io/placePCIDevicesOnRootComplex"
PORT_MODEL = "pcie-root-port"
# KubeVirt's constants (manager.go).
LARGE_MEMORY_BYTES = 2 * 1024 * 1024 * 1024
LARGE_MEMORY_TOTAL_PORTS = 16
LARGE_MEMORY_MIN_FREE_PORTS = 6
DEFAULT_TOTAL_PORTS = 8
DEFAULT_MIN_FREE_PORTS = 3
PLACEHOLDER_PORTS = 4
MAX_PCI_BUS_INDEX = 31

# What libvirt 9.0 does with a device on q35 when the device has no address (a PCIe
# device takes a root port of its own, a conventional PCI one a slot of a
# pcie-to-pci-bridge, the rest sits on the root bus or on no PCI bus at all), what
# KubeVirt counts and what it seals: each kind's ``Pci`` in ``model.devices``.


@dataclass(frozen=True, slots=True)
class HotplugPorts:
    """The root ports of a domain: ``occupied`` filled by its devices, ``free`` left for hotplug."""

    occupied: int
    free: int


def supports_pcie_hotplug(machine: str, arch: str) -> bool:
    """``defaults.SupportsPCIeHotplug``: q35 (or aarch64 virt) on amd64 / arm64."""
    if arch not in ("x86_64", "aarch64", ""):
        return False
    return "q35" in machine or (arch == "aarch64" and machine.startswith("virt"))


def _has_address(el: ET.Element) -> bool:
    return el.find("address") is not None


def _by_tag(devices: ET.Element) -> dict[str, list[ET.Element]]:
    """The children of ``<devices>`` by tag, in document order (one pass over them)."""
    out: dict[str, list[ET.Element]] = {}
    for el in devices:
        out.setdefault(el.tag, []).append(el)
    return out


def ports_in_use(devices: ET.Element, tags: Mapping[str, list[ET.Element]] | None = None) -> int:
    """The root ports libvirt fills when it addresses ``devices`` on q35 (those with an
    address of their own excepted): one per PCIe device, controllers libvirt adds by
    itself (qemu-xhci, virtio-serial, the balloon) included, plus one for a
    pcie-to-pci-bridge when a conventional PCI device needs it."""
    by_tag = _by_tag(devices) if tags is None else tags
    ports = 0
    conventional = False
    for tag, els in by_tag.items():
        kind = KINDS.get(tag)
        port_of = kind.pci.port if kind is not None else None
        if port_of is None:
            continue
        for i, el in enumerate(els):
            port = port_of(el, i)
            if not port or _has_address(el):
                continue
            if port == PCIE:
                ports += 1
            else:
                conventional = True
    controllers = {(c.get("type"), c.get("index") or "0") for c in by_tag.get("controller", [])}
    if ("usb", "0") not in controllers:
        ports += 1  # libvirt's default USB controller on q35: qemu-xhci
    virtio_serial = any(
        (t := el.find("target")) is not None and t.get("type") == "virtio"
        for el in (*by_tag.get("channel", []), *by_tag.get("console", []))
    )
    if virtio_serial and ("virtio-serial", "0") not in controllers:
        ports += 1
    if not by_tag.get("memballoon"):
        ports += 1  # libvirt's default balloon
    return ports + (1 if conventional else 0)


def kubevirt_pci_devices(
    devices: ET.Element, spec_devices: Mapping[str, Any], tags: Mapping[str, list[ET.Element]] | None = None
) -> int:
    """``converter.CountPCIDevices`` of the domain KubeVirt's converter would write for
    this VM, counted on ours: its USB controller (always one), SCSI controller (unless
    ``disableHotplug`` and no SCSI disk), virtio-serial controller (unless
    ``autoattachSerialConsole: false``) and balloon (always, ``model none`` included)
    are counted whether or not our domain names them."""
    by_tag = _by_tag(devices) if tags is None else tags
    count = 0
    for tag, els in by_tag.items():
        kind = KINDS.get(tag)
        counted = kind.pci.counted if kind is not None else None
        if counted is not None:
            count += sum(1 for i, el in enumerate(els) if counted(el, i))
    disks = by_tag.get("disk", [])
    scsi_disk = any((t := d.find("target")) is not None and t.get("bus") == "scsi" for d in disks)
    controllers = 1  # usb
    controllers += 1 if spec_devices.get("disableHotplug") is not True or scsi_disk else 0
    controllers += 1 if spec_devices.get("autoattachSerialConsole") is not False else 0
    balloon = 1
    return count + controllers + balloon


def hotplug_ports(
    domain: ET.Element, spec_devices: Mapping[str, Any], annotations: Mapping[str, Any]
) -> HotplugPorts | None:
    """The root ports KubeVirt's domain would have (``None``: the machine has none to reserve)."""
    found = _pcie_devices(domain, annotations)
    return None if found is None else _count(domain, found[0], found[1], spec_devices)


def _pcie_devices(
    domain: ET.Element, annotations: Mapping[str, Any]
) -> tuple[ET.Element, dict[str, list[ET.Element]]] | None:
    """``<devices>`` and its children by tag, on a machine with root ports to reserve."""
    # ``find("os/type")`` by plain finds (a path goes through ElementPath, in Python).
    os_type = next((t for o in domain.findall("os") if (t := o.find("type")) is not None), None)
    machine = os_type.get("machine", "") if os_type is not None else ""
    arch = os_type.get("arch", "") if os_type is not None else ""
    devices = domain.find("devices")
    if devices is None or not supports_pcie_hotplug(machine, arch):
        return None
    if str(annotations.get(ANNOTATION_ROOT_COMPLEX, "")).lower() == "true":
        return None
    return devices, _by_tag(devices)


def _pci_indices(tags: Mapping[str, list[ET.Element]]) -> set[int]:
    return {int(c.get("index") or "0") for c in tags.get("controller", []) if c.get("type") == "pci"}


def _count(
    domain: ET.Element,
    devices: ET.Element,
    tags: Mapping[str, list[ET.Element]],
    spec_devices: Mapping[str, Any],
) -> HotplugPorts:
    mem = domain.find("memory")
    memory = memory_bytes(mem.text or "0", mem.get("unit")) if mem is not None else 0
    large = memory > LARGE_MEMORY_BYTES
    total = LARGE_MEMORY_TOTAL_PORTS if large else DEFAULT_TOTAL_PORTS
    minimum = LARGE_MEMORY_MIN_FREE_PORTS if large else DEFAULT_MIN_FREE_PORTS
    free = max(total - kubevirt_pci_devices(devices, spec_devices, tags), minimum)
    interfaces = len(tags.get("interface", []))
    placeholders = max(0, PLACEHOLDER_PORTS - interfaces) if interfaces else 0
    occupied = ports_in_use(devices, tags)
    free = max(free, placeholders)
    first = max([*_pci_indices(tags), 0, occupied]) + 1
    free = max(0, min(free, MAX_PCI_BUS_INDEX - first + 1))
    return HotplugPorts(occupied, free)


def render_hotplug_ports(
    domain: ET.Element, spec_devices: Mapping[str, Any], annotations: Mapping[str, Any]
) -> HotplugPorts | None:
    """Append the root ports of ``hotplug_ports`` to the domain's devices (indices above the
    PCI controllers the domain names already): ``occupied`` ones libvirt fills, then the free."""
    found = _pcie_devices(domain, annotations)
    if found is None:
        return None
    devices, tags = found
    ports = _count(domain, devices, tags, spec_devices)
    taken = _pci_indices(tags)
    index = 1
    for _ in range(ports.occupied + ports.free):
        while index in taken:
            index += 1
        ET.SubElement(devices, "controller", {"type": "pci", "index": str(index), "model": PORT_MODEL})
        index += 1
    return ports


def _seals(el: ET.Element) -> bool:
    """Whether KubeVirt seals the root port holding ``el`` (``pci.DisableHotplugOnOccupiedRootPorts``:
    a device other than a NIC, so the guest cannot eject its disks, controllers, balloon
    or rng; a NIC's port stays hotpluggable); its kind's ``Pci.sealed``."""
    kind = KINDS.get(el.tag)
    sealed = kind.pci.sealed if kind is not None else None
    return sealed is not None and sealed(el, 0)


def sealed_buses(devices: ET.Element) -> frozenset[int]:
    """The PCI buses (root port indices) that hold a device KubeVirt seals (see ``_seals``),
    read from the devices' addresses (libvirt's placement, or carried from it)."""
    buses = set()
    for el in devices:
        if not _seals(el):
            continue
        address = el.find("address")
        if address is not None and address.get("type") == "pci":
            buses.add(int(address.get("bus") or "0", 0))
    return frozenset(buses)


def sealed_ports(domain: ET.Element) -> frozenset[int]:
    """The indices of the domain's root ports with hotplug off."""
    return frozenset(
        int(c.get("index") or "0")
        for c in domain.iterfind("devices/controller")
        if c.get("model") == PORT_MODEL and (t := c.find("target")) is not None and t.get("hotplug") == "off"
    )


def seal_occupied_ports(
    domain: ET.Element, only: AbstractSet[int] | None = None, skip: AbstractSet[int] = frozenset()
) -> int:
    """Set ``<target hotplug='off'/>`` on the ``pcie-root-port`` controllers that hold a
    device other than a NIC, as KubeVirt does once libvirt has placed the devices (those
    in ``only`` when given, none in ``skip``); the number of ports sealed by this call
    (0: nothing to change). A rendered port carries no ``<target>``, so a definition built
    from the render seals only the ports its devices hold now."""
    devices = domain.find("devices")
    if devices is None:
        return 0
    buses = sealed_buses(devices) - skip
    if only is not None:
        buses &= only
    if not buses:
        return 0
    sealed = 0
    for c in devices.findall("controller"):
        if c.get("model") != PORT_MODEL or int(c.get("index") or "0") not in buses:
            continue
        target = c.find("target")
        if target is None:
            target = ET.Element("target")
            model = c.find("model")
            c.insert(list(c).index(model) + 1 if model is not None else 0, target)
        if target.get("hotplug") != "off":
            target.set("hotplug", "off")
            sealed += 1
    return sealed


def seals_pending(domain: ET.Element, new: bool) -> bool:
    """Whether libvirt still has to place a device whose root port ``seal_occupied_ports``
    would seal: the domain has root ports, and it is ``new`` (libvirt adds its USB and
    virtio-serial controllers and balloon) or has such a device without a PCI address
    beside devices with one (a host whose libvirt gives no addresses, as its test
    driver, places nothing)."""
    devices = domain.find("devices")
    if devices is None:
        return False
    if not any(c.get("model") == PORT_MODEL for c in devices.findall("controller")):
        return False
    if new:
        return True
    unplaced = placed = False
    for el in devices:
        if el.find("address") is not None:
            placed = True
        elif _seals(el):
            unplaced = True
    return unplaced and placed


def held_ports(domain: ET.Element) -> frozenset[int]:
    """The PCI buses the domain's devices hold by the addresses it names (a port's own
    address is on the root bus, 0, which is no port)."""
    return frozenset(
        int(a.get("bus") or "0", 0) for a in domain.iterfind("devices/*/address") if a.get("type") == "pci"
    )
