"""One descriptor per libvirt device kind: everything the stages know about a child of
``<devices>``.

Input: nothing. Output: ``DEVICE_KINDS`` (in libvirt's order of ``<devices>``) and the
tables derived from it, which the stages use instead of lists of their own:

- render's order of ``<devices>`` (``DEVICES_ORDER``; ``ALL_DEVICES_ORDER`` with the
  kinds only a pass-through adds, ``render.xml``);
- the kinds whose set the spec owns, so an extra one on the host is removed
  (``OWNED_DEVICES``), and those libvirt adds by itself, whose addresses are carried
  whole into a redefinition (``IMPLICIT_DEVICES``, both ``compare.essence``);
- how one device is told from another of its kind (``device_key``, ``compare.essence``);
- whether adding or removing one, or changing a field of it, is live on a running
  domain (``compare.changes``);
- the KubeVirt field the plan words a change of it by, and where a preference can set
  it (``compare.provenance``);
- the host facts it is checked against (``hostfacts.check``);
- the device table of ``docs/mapping.md`` (``mapping_table``; ``python -m
  reconciler.model.devices`` prints it, a test keeps the doc equal to it).

A new device kind is its render module and its row here. Pure: no I/O; reads an
element, never changes one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping


@dataclass(frozen=True, slots=True)
class Identity:
    """How one device is told from another of its kind: ``key`` returns what goes in
    the brackets of ``disk[vda]``, or None to fall back to the position among its kind."""

    text: str  # in words, for docs/mapping.md
    key: Callable[[ET.Element, int], str | None]


def _position(el: ET.Element, index: int) -> str | None:
    return None


def _target_dev(el: ET.Element, index: int) -> str | None:
    target = el.find("target")
    return target.get("dev") or None if target is not None else None


def _mac(el: ET.Element, index: int) -> str | None:
    mac = el.find("mac")
    return mac.get("address", "").lower() or None if mac is not None else None


def _type_index(el: ET.Element, index: int) -> str | None:
    # USB companion controllers share their master's index: told apart by start port.
    master = el.find("master")
    port = f"+{master.get('startport', '')}" if master is not None else ""
    return f"{el.get('type', '')}:{el.get('index', index)}{port}"


def _type_bus(el: ET.Element, index: int) -> str | None:
    # libvirt adds its own ps2 inputs ahead of the spec's: identity by type and bus.
    return f"{el.get('type', '')}:{el.get('bus', '')}"


def _target_name(el: ET.Element, index: int) -> str | None:
    # A channel is told apart by the port's name (the guest agent's, SPICE's, ...).
    target = el.find("target")
    return target.get("name") or None if target is not None else None


POSITION = Identity("position among its kind", _position)
TARGET_DEV = Identity("target dev (`vda`)", _target_dev)
MAC = Identity("MAC address", _mac)
TYPE_INDEX = Identity("type and index (a USB companion: and its start port)", _type_index)
TYPE_BUS = Identity("type and bus", _type_bus)
TARGET_NAME = Identity("target name (`org.qemu.guest_agent.0`), else position", _target_name)


@dataclass(frozen=True, slots=True)
class LiveField:
    """A field of a device that changes on the running domain (an update of the device)."""

    what: str  # the row's name in the change-class table
    path: str  # below the device: "/source" (and everything under it), or "/link@state"
    exact: bool = False  # the path itself only, nothing below it
    devices: tuple[str, ...] = ()  # only devices whose @device is one of these (on either side)


Attrs = Callable[[str], str]
"""A device's value at a path below it (``@model``, ``target@bus``, ``model@type``); ""
when absent. Read from an element (``element_attrs``) or from an essence."""

PCIE = "pcie"  # a root port of its own
CONVENTIONAL = "pci"  # a slot of a pcie-to-pci-bridge (itself on a root port)


def element_attrs(el: ET.Element) -> Attrs:
    """The ``Attrs`` of one device element."""

    def get(path: str) -> str:
        below, _, attr = path.partition("@")
        node = el.find(below) if below else el
        return (node.get(attr) or "") if node is not None else ""

    return get


def _no_port(a: Attrs, index: int) -> str:
    return ""


def _never(a: Attrs, index: int = 0) -> bool:
    return False


def _always(a: Attrs, index: int = 0) -> bool:
    return True


def _virtio_bus(a: Attrs, index: int = 0) -> bool:
    return a("target@bus") == "virtio"


def _virtio_input(a: Attrs, index: int = 0) -> bool:
    return a("@bus") == "virtio"


def _pci_hostdev(a: Attrs, index: int = 0) -> bool:
    return a("@type") == "pci"


def _first(a: Attrs, index: int = 0) -> bool:
    return index == 0


def _virtio_port(a: Attrs, index: int) -> str:
    # virtio-transitional is a conventional PCI device; the others are PCIe.
    return CONVENTIONAL if a("@model") == "virtio-transitional" else PCIE


def _disk_port(a: Attrs, index: int) -> str:
    return _virtio_port(a, index) if _virtio_bus(a) else ""


_CONVENTIONAL_NIC_MODELS = frozenset({"e1000", "ne2k_pci", "pcnet", "rtl8139", "virtio-transitional"})
_CONVENTIONAL_SOUND = frozenset({"ich6", "ac97", "es1370"})
_NOT_SEALING_CONTROLLERS = frozenset({"pci-root", "pcie-root", "pcie-root-port", "pcie-expander-bus"})


def _interface_port(a: Attrs, index: int) -> str:
    return CONVENTIONAL if a("model@type") in _CONVENTIONAL_NIC_MODELS else PCIE


def _controller_port(a: Attrs, index: int) -> str:
    kind = a("@type")
    return PCIE if kind == "scsi" or (kind == "usb" and a("@model") not in ("none", "")) else ""


def _controller_sealed(a: Attrs, index: int = 0) -> bool:
    return a("@model") not in _NOT_SEALING_CONTROLLERS


def _hostdev_port(a: Attrs, index: int) -> str:
    return PCIE if a("@type") in ("pci", "mdev") else ""


def _input_port(a: Attrs, index: int) -> str:
    return PCIE if _virtio_input(a) else ""


def _watchdog_port(a: Attrs, index: int) -> str:
    return CONVENTIONAL if a("@model") == "i6300esb" else ""


def _sound_port(a: Attrs, index: int) -> str:
    return CONVENTIONAL if a("@model") in _CONVENTIONAL_SOUND else ""


def _video_port(a: Attrs, index: int) -> str:
    return PCIE if index else ""  # the first sits on the root bus


def _balloon_port(a: Attrs, index: int) -> str:
    return "" if a("@model") == "none" else _virtio_port(a, index)


@dataclass(frozen=True, slots=True)
class Pci:
    """What a device of the kind does to the PCI buses of a q35 machine (``index``: its
    position among its kind): the port libvirt 9.0 puts it in when it has no address
    (``PCIE``, ``CONVENTIONAL`` or "" for none: ``render.ports.ports_in_use``), whether
    KubeVirt's ``converter.CountPCIDevices`` counts it (``render.ports``), whether
    KubeVirt seals the root port holding it (``pci.DisableHotplugOnOccupiedRootPorts``,
    ``render.ports``), and whether hot-adding it takes a spare slot
    (``compare.capacity``)."""

    port: Callable[[Attrs, int], str] = _no_port
    counted: Callable[[Attrs, int], bool] = _never
    sealed: Callable[[Attrs, int], bool] = _never
    hot_slot: Callable[[Attrs, int], bool] = _never


ADD = "add"  # a pass-through fragment may add one (render.allowlist)
MERGE = "merge"  # a pass-through fragment may only merge into a rendered one


@dataclass(frozen=True, slots=True)
class DeviceKind:
    """One libvirt device kind (a child element of ``<devices>``)."""

    element: str
    module: str = ""  # the render module writing it ("" = render never writes it)
    owned: bool = False  # the spec owns the set: an extra live one is a difference (a removal)
    implicit: bool = False  # libvirt adds it by itself: carried whole, with its address, unless named
    identity: Identity = POSITION
    hotplug: bool = False  # attached / detached on a running domain
    hotplug_buses: tuple[str, ...] = ()  # ... only on these buses (``target@bus``), when given
    no_hotplug_devices: tuple[str, ...] = ()  # ... never for these ``@device`` values
    live: tuple[LiveField, ...] = ()  # its fields that change on the running domain
    field: str = ""  # the KubeVirt field (under spec.template.spec.domain) a plan names it by
    keyed: bool = False  # the plan adds the identity: "devices.disks (vda)"
    preference: tuple[str, ...] = ()  # where a preference sets it (path under its spec)
    facts: tuple[str, ...] = ()  # the HostFacts a host is checked against for it
    pci: Pci = Pci()  # its place on the PCI buses (ports, KubeVirt's count and seals, hot-add slots)
    passthrough: str = ""  # ADD, MERGE, or "": a fragment may not hold one (render.allowlist)
    refused: str = ""  # why a fragment may not add one, where a reason helps
    admission: tuple[str, ...] = ()  # the rows of KubeVirt's admission table about it (catalog.device_rules)

    @property
    def rendered(self) -> bool:
        return bool(self.module)


# The order is libvirt's order of <devices> (virDomainDefFormat); render writes its
# kinds in it, a stable sort keeping the VM's order within a kind.
DEVICE_KINDS: tuple[DeviceKind, ...] = (
    DeviceKind("emulator", module="render/__init__.py", refused="the emulator is the host config's"),
    DeviceKind(
        "disk",
        module="render/disks.py",
        owned=True,
        identity=TARGET_DEV,
        hotplug=True,
        hotplug_buses=("virtio", "scsi", "usb"),
        no_hotplug_devices=("floppy",),
        live=(LiveField("removable media (cdrom, floppy)", "/source", devices=("cdrom", "floppy")),),
        field="devices.disks",
        keyed=True,
        preference=("devices", "preferredDiskBus"),
        facts=("disk_buses", "pools", "images"),
        pci=Pci(_disk_port, counted=_virtio_bus, sealed=_virtio_bus, hot_slot=_virtio_bus),
        passthrough=MERGE,
        refused="disks come from the spec's volumes (inside allowedDirectories); only merged into, "
        "or an empty CD-ROM or floppy drive added",
        admission=("disk-volume", "lun-source"),
    ),
    DeviceKind(
        "controller",
        module="render/devices.py",
        implicit=True,
        identity=TYPE_INDEX,
        pci=Pci(_controller_port, sealed=_controller_sealed),
        passthrough=ADD,
    ),
    DeviceKind("lease"),
    DeviceKind(
        "filesystem",
        owned=True,
        pci=Pci(hot_slot=_always),
        refused="a host directory is never passed through",
    ),
    DeviceKind(
        "interface",
        module="render/interfaces.py",
        owned=True,
        identity=MAC,
        hotplug=True,
        live=(LiveField("interface link state", "/link@state", exact=True),),
        field="devices.interfaces",
        keyed=True,
        preference=("devices", "preferredInterfaceModel"),
        facts=("networks", "hostdev_networks", "interfaces", "passt"),
        pci=Pci(_interface_port, counted=_always, hot_slot=_always),
        passthrough=MERGE,
        refused="interfaces come from the spec's networks and the host config; only merged into",
        admission=(
            "one-binding",
            "binding-plugin",
            "passt-binding-pod",
            "discontinued-bindings",
            "iface-network-pairs",
            "iface-model",
            "iface-mac",
            "network-source",
            "iface-state",
        ),
    ),
    DeviceKind("smartcard", owned=True, passthrough=ADD),
    DeviceKind(
        "serial",
        module="render/devices.py",
        field="devices.autoattachSerialConsole",
        preference=("devices", "preferredAutoattachSerialConsole"),
        passthrough=ADD,
    ),
    DeviceKind("parallel"),
    DeviceKind(
        "console",
        module="render/devices.py",
        field="devices.autoattachSerialConsole",
        preference=("devices", "preferredAutoattachSerialConsole"),
        passthrough=ADD,
    ),
    DeviceKind(
        "channel",
        module="render/devices.py",
        identity=TARGET_NAME,
        field="guest agent channel",
        passthrough=ADD,
    ),
    DeviceKind(
        "input",
        module="render/devices.py",
        identity=TYPE_BUS,
        field="devices.inputs",
        preference=("devices", "preferredInputBus"),
        pci=Pci(_input_port, counted=_virtio_input, sealed=_virtio_input),
        passthrough=ADD,
        admission=("input",),
    ),
    DeviceKind(
        "tpm",
        module="render/devices.py",
        owned=True,
        field="devices.tpm",
        preference=("devices", "preferredTPM"),
        facts=("tpm_models", "tpm_backends", "tpm_versions"),
        passthrough=ADD,
    ),
    DeviceKind(
        "graphics",
        module="render/devices.py",
        owned=True,
        field="devices.autoattachGraphicsDevice",
        preference=("devices", "preferredAutoattachGraphicsDevice"),
        passthrough=ADD,
    ),
    DeviceKind(
        "sound",
        module="render/devices.py",
        owned=True,
        pci=Pci(_sound_port),
        passthrough=ADD,
        admission=("sound",),
    ),
    DeviceKind("audio", passthrough=ADD),
    DeviceKind(
        "video",
        module="render/devices.py",
        field="devices.autoattachGraphicsDevice",
        preference=("devices", "preferredAutoattachGraphicsDevice"),
        facts=("video_models",),
        pci=Pci(_video_port),
        passthrough=ADD,
        admission=("video",),
    ),
    DeviceKind(
        "hostdev",
        module="render/devices.py",
        owned=True,
        field="devices.hostDevices",
        facts=("pci_devices", "usb_devices", "mdevs"),
        pci=Pci(_hostdev_port, counted=_pci_hostdev, sealed=_pci_hostdev, hot_slot=_always),
        refused="host devices come from devices.hostDevices and the host config's hostDevices",
    ),
    DeviceKind("redirdev", owned=True, passthrough=ADD),
    DeviceKind("redirfilter", passthrough=ADD),
    DeviceKind("hub", passthrough=ADD),
    DeviceKind(
        "watchdog",
        module="render/devices.py",
        owned=True,
        field="devices.watchdog",
        pci=Pci(_watchdog_port, counted=_always, sealed=_always, hot_slot=_always),
        passthrough=ADD,
        admission=("watchdog",),
    ),
    DeviceKind(
        "memballoon",
        module="render/devices.py",
        implicit=True,
        field="devices.autoattachMemBalloon",
        preference=("devices", "preferredAutoattachMemBalloon"),
        pci=Pci(_balloon_port, sealed=_always),  # KubeVirt counts its balloon whatever ours is
        passthrough=ADD,
    ),
    DeviceKind(
        "rng",
        module="render/devices.py",
        owned=True,
        field="devices.rng",
        preference=("devices", "preferredRng"),
        pci=Pci(_virtio_port, counted=_first, sealed=_always, hot_slot=_always),
    ),
    DeviceKind("panic", module="render/devices.py", passthrough=ADD, admission=("panic-devices",)),
    DeviceKind("shmem", owned=True),
    DeviceKind("memory", pci=Pci(sealed=_always)),
    DeviceKind("iommu", passthrough=ADD),
    DeviceKind("vsock", module="render/devices.py", owned=True, pci=Pci(_virtio_port, hot_slot=_always)),
    DeviceKind("crypto"),
)

KINDS: Mapping[str, DeviceKind] = MappingProxyType({k.element: k for k in DEVICE_KINDS})

# -- the tables the stages use ---------------------------------------------------------

DEVICES_ORDER: tuple[str, ...] = tuple(k.element for k in DEVICE_KINDS if k.rendered)
# Every kind, in libvirt's order: a definition's pass-through (``render.passthrough``)
# may add kinds render never writes.
ALL_DEVICES_ORDER: tuple[str, ...] = tuple(k.element for k in DEVICE_KINDS)
OWNED_DEVICES: frozenset[str] = frozenset(k.element for k in DEVICE_KINDS if k.owned)
IMPLICIT_DEVICES: frozenset[str] = frozenset(k.element for k in DEVICE_KINDS if k.implicit)


def device_key(el: ET.Element, index: int, repeated: bool) -> str:
    """The identity of one child of ``<devices>`` (``index``: its position among its tag):
    ``disk[vda]``, ``interface[52:54:00:...]``, ``controller[pci:0]``,
    ``channel[org.qemu.guest_agent.0]``, ``rng`` (the only one of its kind), ``serial[1]``."""
    tag = el.tag
    kind = KINDS.get(tag)
    key = kind.identity.key(el, index) if kind is not None else None
    if key is not None:
        return f"{tag}[{key}]"
    return f"{tag}[{index}]" if repeated else tag


# -- docs/mapping.md -------------------------------------------------------------------

MAPPING_BEGIN = (
    "<!-- device kinds: generated from reconciler/model/devices.py (python -m reconciler.model.devices) -->"
)
MAPPING_END = "<!-- end of device kinds -->"


def _changes(k: DeviceKind) -> str:
    parts = []
    if k.hotplug:
        where = f" on {', '.join(k.hotplug_buses)}" if k.hotplug_buses else ""
        never = f" (not {', '.join(k.no_hotplug_devices)})" if k.no_hotplug_devices else ""
        parts.append(f"hotplug / unplug{where}{never}")
    parts += [f.what for f in k.live]
    return "; ".join(parts) + ", else restart" if parts else "restart"


def _compared(k: DeviceKind) -> str:
    if k.owned:
        return "owned: an extra one on the host is removed"
    if k.implicit:
        return "where the spec names it; libvirt's own kept with their addresses"
    return "where the spec names it"


def mapping_table() -> str:
    """The device table of docs/mapping.md, between its markers."""
    rows = [
        MAPPING_BEGIN,
        "| Element | Written by | Compared | Identity | On a running domain | Plan names it | Host facts |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in DEVICE_KINDS:
        field = k.field + (" (<identity>)" if k.keyed else "")
        field = f"`{field}`" if k.field.startswith("devices.") else field or "`domain (<libvirt path>)`"
        pref = f"; a preference's `{'.'.join(k.preference)}`" if k.preference else ""
        rows.append(
            f"| `<{k.element}>` | {f'`{k.module}`' if k.module else 'never rendered'} | {_compared(k)} "
            f"| {k.identity.text} | {_changes(k)} | {field}{pref} "
            f"| {', '.join(f'`{f}`' for f in k.facts) or '—'} |"
        )
    rows.append(MAPPING_END)
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(mapping_table(), end="")
