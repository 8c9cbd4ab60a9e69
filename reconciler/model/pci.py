"""Where a device sits on the PCI buses of a q35 machine, per device kind: the ``Pci``
record of each kind's descriptor (``model.devices``) and the rules it is made of.

Input: one device element (``compare.capacity`` builds one from an essence). Output: the port libvirt 9.0 puts it in when it has no address (a PCIe
device a root port of its own, a conventional PCI one a slot of a pcie-to-pci-bridge,
the rest the root bus or no PCI bus at all), whether KubeVirt's
``converter.CountPCIDevices`` counts it, whether KubeVirt seals the root port holding
it, whether hot-adding it takes a spare slot. ``render.ports`` and
``compare.capacity`` read them through the descriptors. Pure: reads an element, never
changes one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.records import dataclass

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Callable

PCIE = "pcie"  # a root port of its own
CONVENTIONAL = "pci"  # a slot of a pcie-to-pci-bridge (itself on a root port)


def _below(el: ET.Element, child: str, attr: str) -> str | None:
    node = el.find(child)
    return node.get(attr) if node is not None else None


def _always(el: ET.Element, index: int = 0) -> bool:
    return True


def _virtio_bus(el: ET.Element, index: int = 0) -> bool:
    return _below(el, "target", "bus") == "virtio"


def _virtio_input(el: ET.Element, index: int = 0) -> bool:
    return el.get("bus") == "virtio"


def _pci_hostdev(el: ET.Element, index: int = 0) -> bool:
    return el.get("type") == "pci"


def _first(el: ET.Element, index: int = 0) -> bool:
    return index == 0


def _virtio_port(el: ET.Element, index: int) -> str:
    # virtio-transitional is a conventional PCI device; the others are PCIe.
    return CONVENTIONAL if el.get("model") == "virtio-transitional" else PCIE


def _disk_port(el: ET.Element, index: int) -> str:
    return _virtio_port(el, index) if _virtio_bus(el) else ""


_CONVENTIONAL_NIC_MODELS = frozenset({"e1000", "ne2k_pci", "pcnet", "rtl8139", "virtio-transitional"})
_CONVENTIONAL_SOUND = frozenset({"ich6", "ac97", "es1370"})
_NOT_SEALING_CONTROLLERS = frozenset({"pci-root", "pcie-root", "pcie-root-port", "pcie-expander-bus"})


def _interface_port(el: ET.Element, index: int) -> str:
    return CONVENTIONAL if _below(el, "model", "type") in _CONVENTIONAL_NIC_MODELS else PCIE


def _controller_port(el: ET.Element, index: int) -> str:
    kind = el.get("type")
    return PCIE if kind == "scsi" or (kind == "usb" and el.get("model") not in ("none", None)) else ""


def _controller_sealed(el: ET.Element, index: int = 0) -> bool:
    return el.get("model") not in _NOT_SEALING_CONTROLLERS


def _hostdev_port(el: ET.Element, index: int) -> str:
    return PCIE if el.get("type") in ("pci", "mdev") else ""


def _input_port(el: ET.Element, index: int) -> str:
    return PCIE if _virtio_input(el) else ""


def _watchdog_port(el: ET.Element, index: int) -> str:
    return CONVENTIONAL if el.get("model") == "i6300esb" else ""


def _sound_port(el: ET.Element, index: int) -> str:
    return CONVENTIONAL if el.get("model") in _CONVENTIONAL_SOUND else ""


def _video_port(el: ET.Element, index: int) -> str:
    return PCIE if index else ""  # the first sits on the root bus


def _balloon_port(el: ET.Element, index: int) -> str:
    return "" if el.get("model") == "none" else _virtio_port(el, index)


@dataclass(frozen=True, slots=True)
class Pci:
    """What a device of the kind does to the PCI buses of a q35 machine (``index``: its
    position among its kind): the port libvirt 9.0 puts it in when it has no address
    (``PCIE``, ``CONVENTIONAL`` or "" for none: ``render.ports.ports_in_use``), whether
    KubeVirt's ``converter.CountPCIDevices`` counts it (``render.ports``), whether
    KubeVirt seals the root port holding it (``pci.DisableHotplugOnOccupiedRootPorts``,
    ``render.ports``), and whether hot-adding it takes a spare slot
    (``compare.capacity``)."""

    port: Callable[[ET.Element, int], str] | None = None  # None: never on a PCI bus
    counted: Callable[[ET.Element, int], bool] | None = None  # None: never
    sealed: Callable[[ET.Element, int], bool] | None = None
    hot_slot: Callable[[ET.Element, int], bool] | None = None


# The kinds' records (``model.devices``); a kind not named here is on no PCI bus.
NONE = Pci()
DISK = Pci(_disk_port, counted=_virtio_bus, sealed=_virtio_bus, hot_slot=_virtio_bus)
CONTROLLER = Pci(_controller_port, sealed=_controller_sealed)
FILESYSTEM = Pci(hot_slot=_always)
INTERFACE = Pci(_interface_port, counted=_always, hot_slot=_always)  # its port stays hotpluggable
INPUT = Pci(_input_port, counted=_virtio_input, sealed=_virtio_input)
SOUND = Pci(_sound_port)
VIDEO = Pci(_video_port)
HOSTDEV = Pci(_hostdev_port, counted=_pci_hostdev, sealed=_pci_hostdev, hot_slot=_always)
WATCHDOG = Pci(_watchdog_port, counted=_always, sealed=_always, hot_slot=_always)
MEMBALLOON = Pci(_balloon_port, sealed=_always)  # KubeVirt counts its balloon whatever ours is
RNG = Pci(_virtio_port, counted=_first, sealed=_always, hot_slot=_always)  # KubeVirt counts one
MEMORY = Pci(sealed=_always)
VSOCK = Pci(_virtio_port, hot_slot=_always)
