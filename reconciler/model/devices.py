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
- the host facts it is checked against (``hostfacts.check``, ``render.placement``);
- the keys of ``domain.devices`` it is written from (``render.devices.DEVICE_KEYS``);
- its place on the PCI buses of a q35 machine (``pci``, a record of ``model.pci``):
  the root ports it fills, KubeVirt's count and seals (``render.ports``), the spare
  slot a hot-add takes (``compare.capacity``);
- what a pass-through fragment may do with it: add one, merge into a rendered one, or
  nothing, and why (``render.allowlist``, ``importer.keep``); what its identity reads
  (``render.passthrough``, ``importer.keep``);
- the rows of KubeVirt's admission table about it, which name its render module
  (``catalog.device_rules``);
- which kinds the importer reads back, in this order (``importer.devices.READERS``);
- the device table of ``docs/mapping.md`` (``mapping_table``; ``python -m
  reconciler.model.devices`` prints it, a test keeps the doc equal to it).

A new device kind is its row here, its render module and its importer's reader
(docs/architecture.md, "Where to add"; ``tests/unit/test_recipes.py`` follows it).
Pure: no I/O; reads an element, never changes one.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.model import pci as on_pci
from reconciler.records import dataclass

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Callable, Mapping


@dataclass(frozen=True, slots=True)
class Identity:
    """How one device is told from another of its kind: ``key`` returns what goes in
    the brackets of ``disk[vda]``, or None to fall back to the position among its kind;
    ``attrs`` and ``child`` (element, attribute) are what it reads, all a copy needs to
    be matched (``importer.keep``)."""

    text: str  # in words, for docs/mapping.md
    key: Callable[[ET.Element, int], str | None]
    attrs: tuple[str, ...] = ()
    child: tuple[str, str] | None = None


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
TARGET_DEV = Identity("target dev (`vda`)", _target_dev, child=("target", "dev"))
MAC = Identity("MAC address", _mac, child=("mac", "address"))
TYPE_INDEX = Identity("type and index (a USB companion: and its start port)", _type_index, ("type", "index"))
TYPE_BUS = Identity("type and bus", _type_bus, ("type", "bus"))
TARGET_NAME = Identity(
    "target name (`org.qemu.guest_agent.0`), else position", _target_name, child=("target", "name")
)


@dataclass(frozen=True, slots=True)
class LiveField:
    """A field of a device that changes on the running domain (an update of the device)."""

    what: str  # the row's name in the change-class table
    path: str  # below the device: "/source" (and everything under it), or "/link@state"
    exact: bool = False  # the path itself only, nothing below it
    devices: tuple[str, ...] = ()  # only devices whose @device is one of these (on either side)


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
    spec: tuple[str, ...] = ()  # the keys of domain.devices render writes it from (render.devices)
    field: str = ""  # the KubeVirt field (under spec.template.spec.domain) a plan names it by
    keyed: bool = False  # the plan adds the identity: "devices.disks (vda)"
    preference: tuple[str, ...] = ()  # where a preference sets it (path under its spec)
    facts: tuple[str, ...] = ()  # the HostFacts a host is checked against for it
    pci: on_pci.Pci = (
        on_pci.NONE
    )  # its place on the PCI buses (ports, KubeVirt's count and seals, hot-add slots)
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
        pci=on_pci.DISK,
        passthrough=MERGE,
        refused="disks come from the spec's volumes (inside allowedDirectories); only merged into, "
        "or an empty CD-ROM or floppy drive added",
        admission=("disk-volume", "lun-source", "iothreads-policy"),
        spec=("disks", "blockMultiQueue"),
    ),
    DeviceKind(
        "controller",
        module="render/devices.py",
        implicit=True,
        identity=TYPE_INDEX,
        pci=on_pci.CONTROLLER,
        passthrough=ADD,
    ),
    DeviceKind("lease"),
    DeviceKind(
        "filesystem",
        owned=True,
        pci=on_pci.FILESYSTEM,
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
        pci=on_pci.INTERFACE,
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
        spec=("interfaces", "autoattachPodInterface", "networkInterfaceMultiqueue"),
    ),
    DeviceKind("smartcard", owned=True, passthrough=ADD),
    DeviceKind(
        "serial",
        module="render/devices.py",
        field="devices.autoattachSerialConsole",
        preference=("devices", "preferredAutoattachSerialConsole"),
        passthrough=ADD,
        spec=("autoattachSerialConsole",),
    ),
    DeviceKind("parallel"),
    DeviceKind(
        "console",
        module="render/devices.py",
        field="devices.autoattachSerialConsole",
        preference=("devices", "preferredAutoattachSerialConsole"),
        passthrough=ADD,
        spec=("autoattachSerialConsole",),
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
        pci=on_pci.INPUT,
        passthrough=ADD,
        admission=("input",),
        spec=("inputs", "autoattachInputDevice"),
    ),
    DeviceKind(
        "tpm",
        module="render/devices.py",
        owned=True,
        field="devices.tpm",
        preference=("devices", "preferredTPM"),
        facts=("tpm_models", "tpm_backends", "tpm_versions"),
        passthrough=ADD,
        spec=("tpm",),
    ),
    DeviceKind(
        "graphics",
        module="render/devices.py",
        owned=True,
        field="devices.autoattachGraphicsDevice",
        preference=("devices", "preferredAutoattachGraphicsDevice"),
        passthrough=ADD,
        spec=("autoattachGraphicsDevice",),
    ),
    DeviceKind(
        "sound",
        module="render/devices.py",
        owned=True,
        pci=on_pci.SOUND,
        passthrough=ADD,
        admission=("sound",),
        spec=("sound",),
    ),
    DeviceKind("audio", passthrough=ADD),
    DeviceKind(
        "video",
        module="render/devices.py",
        field="devices.autoattachGraphicsDevice",
        preference=("devices", "preferredAutoattachGraphicsDevice"),
        facts=("video_models",),
        pci=on_pci.VIDEO,
        passthrough=ADD,
        admission=("video",),
        spec=("video", "autoattachGraphicsDevice"),
    ),
    DeviceKind(
        "hostdev",
        module="render/devices.py",
        owned=True,
        field="devices.hostDevices",
        facts=("pci_devices", "usb_devices", "mdevs"),
        pci=on_pci.HOSTDEV,
        refused="host devices come from devices.hostDevices and the host config's hostDevices",
        spec=("hostDevices", "gpus"),
    ),
    DeviceKind("redirdev", owned=True, passthrough=ADD),
    DeviceKind("redirfilter", passthrough=ADD),
    DeviceKind("hub", passthrough=ADD),
    DeviceKind(
        "watchdog",
        module="render/devices.py",
        owned=True,
        field="devices.watchdog",
        pci=on_pci.WATCHDOG,
        passthrough=ADD,
        admission=("watchdog",),
        spec=("watchdog",),
    ),
    DeviceKind(
        "memballoon",
        module="render/devices.py",
        implicit=True,
        field="devices.autoattachMemBalloon",
        preference=("devices", "preferredAutoattachMemBalloon"),
        pci=on_pci.MEMBALLOON,
        passthrough=ADD,
        spec=("autoattachMemBalloon",),
    ),
    DeviceKind(
        "rng",
        module="render/devices.py",
        owned=True,
        field="devices.rng",
        preference=("devices", "preferredRng"),
        pci=on_pci.RNG,
        spec=("rng",),
    ),
    DeviceKind(
        "panic",
        module="render/devices.py",
        passthrough=ADD,
        admission=("panic-devices",),
        spec=("panicDevices",),
    ),
    DeviceKind("shmem", owned=True),
    DeviceKind("memory", pci=on_pci.MEMORY),
    DeviceKind("iommu", passthrough=ADD),
    DeviceKind(
        "vsock",
        module="render/devices.py",
        owned=True,
        pci=on_pci.VSOCK,
        spec=("autoattachVSOCK",),
    ),
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
