"""The devices of a live domain read back, kind by kind: disks and their volumes,
interfaces and their networks, host devices here, the others in ``importer.others``;
``READERS``, the reader of each device kind render writes (``model.devices``).

Input: the parsed ``<devices>`` of ``importer.domain.read_domain`` and the read's state
(``importer.reading.DomainRead``). Output: the ``devices`` fields of
``spec.template.spec.domain`` with the template's ``volumes`` and ``networks``
(``importer.reading.Found``), and, in
the read's state, the directories, networks, pod network and host devices the host
configuration must list, the elements kept for a pass-through and the reasons a device
cannot be imported. For each element the field is the one ``render/`` writes it from
(docs/mapping.md). Pure: no libvirt, no files; never guesses a value the XML does not
hold.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.importer.others import (
    read_balloon,
    read_display,
    read_elsewhere,
    read_emulator,
    read_inputs,
    read_panics,
    read_rng,
    read_serial_console,
    read_sound,
    read_tpm,
    read_vsock,
    read_watchdog,
)
from reconciler.importer.reading import Found, int_or_none
from reconciler.model.devices import DEVICE_KINDS
from reconciler.model.identifiers import PciAddress, parse_mac, parse_usb, parse_uuid
from reconciler.render.disks import letters
from reconciler.render.interfaces import MODELS
from reconciler.render.volumes import format_for

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

    from reconciler.importer.reading import DomainRead

DISK_BUSES = MappingProxyType({"virtio": "vd", "sata": "sd", "scsi": "sd", "usb": "sd"})
CACHE = ("none", "writethrough", "writeback")
IO = ("native", "threads")
ERROR_POLICIES = ("stop", "ignore", "report", "enospace")


# -- disks -----------------------------------------------------------------------------


def read_disks(
    dev_el: ET.Element, devices: dict[str, Any], volumes: list[dict[str, Any]], namespace: str, r: DomainRead
) -> None:
    found: list[tuple[str, int, dict[str, Any], dict[str, Any]]] = []
    for el in dev_el.findall("disk"):
        read = _read_disk(el, namespace, r)
        if read is not None:
            found.append(read)
    found.sort(key=lambda f: (f[0], f[1]))
    expected: dict[str, int] = {}
    for prefix, index, disk, _ in found:
        want = expected.get(prefix, 0)
        if index != want:
            r.refuse(
                f"<disk target={disk['name']!r}>",
                f"targets are named in disk order here ({prefix}{letters(want)} first): "
                f"the {prefix}X names leave a gap",
            )
        expected[prefix] = index + 1
    devices["disks"] = [f[2] for f in found]
    volumes.extend(f[3] for f in found)


def _read_disk(
    el: ET.Element, namespace: str, r: DomainRead
) -> tuple[str, int, dict[str, Any], dict[str, Any]] | None:
    """One ``<disk>``: its target's prefix and index (``vdb``: ``vd``, 1), its disk and
    its volume; None when it is kept for the pass-through or refused."""
    target = el.find("target")
    dev = target.get("dev", "") if target is not None else ""
    bus = target.get("bus", "") if target is not None else ""
    where = f"<disk target={dev!r}>"
    if r.keep and el.get("device") in ("cdrom", "floppy") and el.find("source") is None:
        r.kept.append((("devices",), el))  # an empty drive: kept as it is, on any bus
        return None
    prefix = DISK_BUSES.get(bus)
    if prefix is None:
        r.refuse(
            where,
            f"bus {bus!r} (the reconciler's disks are on virtio, sata, scsi or usb): move it to bus "
            "'sata' (virsh edit, target bus='sata'; the guest finds it on an AHCI controller at its "
            "next boot) and import again",
        )
        return None
    if not dev.startswith(prefix) or not dev[len(prefix) :].isalpha():
        r.refuse(where, f"a {bus} disk is named {prefix}X here")
        return None
    device = el.get("device", "disk")
    if device not in ("disk", "cdrom", "lun"):
        r.refuse(where, f"device {device!r} (disk, cdrom or lun)")
        return None
    disk: dict[str, Any] = {"name": dev, device: _disk_target(el, target, device, bus)}
    driver = el.find("driver")
    disk.update(_disk_options(el, driver))
    volume = _volume(el, dev, where, device, namespace, driver, r)
    if volume is None:
        return None
    return prefix, _letters_index(dev[len(prefix) :]), disk, volume


def _disk_target(el: ET.Element, target: ET.Element | None, device: str, bus: str) -> dict[str, Any]:
    """The disk's ``disk``, ``cdrom`` or ``lun`` field: its bus, read-only and tray."""
    target_node: dict[str, Any] = {"bus": bus}
    readonly = el.find("readonly") is not None
    if device == "cdrom":
        if not readonly:
            target_node["readonly"] = False
        if target is not None and target.get("tray") in ("open",):
            target_node["tray"] = "open"
    elif readonly:
        target_node["readonly"] = True
    return target_node


def _disk_options(el: ET.Element, driver: ET.Element | None) -> dict[str, Any]:
    """The disk's other fields, in their order: boot order, serial, shareable, the
    driver's cache, io and error policy, and the block sizes."""
    disk: dict[str, Any] = {}
    boot = el.find("boot")
    if boot is not None and boot.get("order"):
        disk["bootOrder"] = int_or_none(boot.get("order"))
    serial = el.findtext("serial")
    if serial:
        disk["serial"] = serial
    if el.find("shareable") is not None:
        disk["shareable"] = True
    if driver is not None:
        if driver.get("cache") in CACHE:
            disk["cache"] = driver.get("cache")
        if driver.get("io") in IO:
            disk["io"] = driver.get("io")
        if driver.get("error_policy") in ERROR_POLICIES:
            disk["errorPolicy"] = driver.get("error_policy")
    blockio = el.find("blockio")
    if blockio is not None:
        disk["blockSize"] = {
            "custom": {
                "logical": int_or_none(blockio.get("logical_block_size")),
                "physical": int_or_none(blockio.get("physical_block_size")),
            }
        }
    return disk


def _letters_index(text: str) -> int:
    n = 0
    for ch in text:
        n = n * 26 + (ord(ch) - ord("a") + 1)
    return n - 1


def _volume(
    el: ET.Element,
    dev: str,
    where: str,
    device: str,
    namespace: str,
    driver: ET.Element | None,
    r: DomainRead,
) -> dict[str, Any] | None:
    kind = el.get("type", "file")
    source = el.find("source")
    fmt = driver.get("type", "") if driver is not None else ""
    if kind == "file":
        path = source.get("file", "") if source is not None else ""
        if not path:
            r.refuse(where, "an empty drive (every KubeVirt disk has a volume)")
            return None
        if not path.startswith("/"):
            r.refuse(where, f"{path!r} is not an absolute path")
            return None
        if fmt and fmt != format_for(path):
            r.refuse(
                where,
                f"{path} holds {fmt}, but a hostDisk's format is read from its name "
                "(.img, .raw, .iso raw, else qcow2)",
            )
            return None
        r.directories.append(posixpath.dirname(posixpath.normpath(path)))
        return {"name": dev, "hostDisk": {"path": path, "type": "Disk"}}
    if kind == "volume":
        pool = source.get("pool", "") if source is not None else ""
        volume = source.get("volume", "") if source is not None else ""
        prefix = "" if namespace in ("", "default") else f"{namespace}_"
        if not pool or not volume.startswith(prefix) or "/" in volume or len(volume) == len(prefix):
            r.refuse(where, f"pool volume {volume!r} is no claim of namespace {namespace or 'default'}")
            return None
        r.setting("storagePool", pool)
        if fmt:
            r.setting("storagePoolFormat", fmt)
        if device == "lun":
            return {"name": dev, "persistentVolumeClaim": {"claimName": volume[len(prefix) :]}}
        return {"name": dev, "persistentVolumeClaim": {"claimName": volume[len(prefix) :]}}
    r.refuse(where, f"a {kind} disk (hostDisk files and storage pool volumes only)")
    return None


# -- interfaces ------------------------------------------------------------------------


def read_interfaces(
    dev_el: ET.Element, devices: dict[str, Any], networks: list[dict[str, Any]], r: DomainRead
) -> None:
    interfaces: list[dict[str, Any]] = []
    pod_taken = False
    for i, el in enumerate(dev_el.findall("interface")):
        mac = parse_mac(el.find("mac").get("address") if el.find("mac") is not None else "")  # type: ignore[union-attr]
        where = f"<interface mac={mac!r}>"
        name = f"nic{i}"
        iface: dict[str, Any] = {"name": name}
        if mac:
            iface["macAddress"] = mac
        binding = _binding(el, pod_taken, where, r)
        if binding is None:
            continue
        network, how = binding
        pod_taken = pod_taken or "pod" in network
        iface.update(how)
        iface.update(_interface_options(el, where, r))
        interfaces.append(iface)
        networks.append({"name": name, **network})
    if interfaces:
        devices["interfaces"] = interfaces
    else:
        devices["autoattachPodInterface"] = False


def _binding(
    el: ET.Element, pod_taken: bool, where: str, r: DomainRead
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An ``<interface>``'s network (pod or multus) and its binding (masquerade, bridge,
    macvtap or passt), the host's network recorded in ``r``; None when refused. The
    first default network or user-mode interface is the pod network (``pod_taken``:
    one was already)."""
    kind = el.get("type", "")
    source = el.find("source")
    backend = el.find("backend")
    if kind == "network" and source is not None and source.get("network"):
        target = source.get("network", "")
        if target == "default" and not pod_taken:
            r.pod = ("network", target)
            return {"pod": {}}, {"masquerade": {}}
        r.networks.append((_net_name(target), "network", target))
        return {"multus": {"networkName": _net_name(target)}}, {"bridge": {}}
    if kind == "bridge" and source is not None and source.get("bridge"):
        target = source.get("bridge", "")
        r.networks.append((_net_name(f"bridge-{target}"), "bridge", target))
        return {"multus": {"networkName": _net_name(f"bridge-{target}")}}, {"bridge": {}}
    if kind == "direct" and source is not None and source.get("dev"):
        target = source.get("dev", "")
        if source.get("mode", "vepa") != "bridge":
            r.refuse(where, f"macvtap mode {source.get('mode', 'vepa')!r} (render writes mode bridge)")
        r.networks.append((_net_name(f"direct-{target}"), "direct", target))
        return {"multus": {"networkName": _net_name(f"direct-{target}")}}, {"macvtap": {}}
    if kind == "user" and not pod_taken:
        if backend is not None and backend.get("type") == "passt":
            return {"pod": {}}, {"passt": {}}
        r.pod = ("user", "")
        return {"pod": {}}, {"masquerade": {}}
    r.refuse(where, f"a {kind or 'typeless'} interface (network, bridge, direct or user-mode)")
    return None


def _interface_options(el: ET.Element, where: str, r: DomainRead) -> dict[str, Any]:
    """An interface's other fields, in their order: model (virtio left out), boot order,
    link state and ACPI index."""
    iface: dict[str, Any] = {}
    model_el = el.find("model")
    model = model_el.get("type", "") if model_el is not None else ""
    if model:
        if model not in MODELS and model != "virtio-transitional":
            r.refuse(where, f"NIC model {model!r} (KubeVirt models: {', '.join(MODELS)})")
        elif model != "virtio":
            iface["model"] = model
    boot = el.find("boot")
    if boot is not None and boot.get("order"):
        iface["bootOrder"] = int_or_none(boot.get("order"))
    link = el.find("link")
    if link is not None and link.get("state") == "down":
        iface["state"] = "down"
    acpi = el.find("acpi")
    if acpi is not None and acpi.get("index"):
        iface["acpiIndex"] = int_or_none(acpi.get("index"))
    return iface


def _net_name(text: str) -> str:
    """A multus network name (a DNS label) for a libvirt network, bridge or device."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "net"
    return name[:63].strip("-")


# -- the device kinds --------------------------------------------------------------


def _disks(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    read_disks(dev_el, found.devices, found.volumes, found.namespace, r)
    if dev_el.find("disk[@model='virtio-transitional']") is not None:
        found.devices["useVirtioTransitional"] = True


def _interfaces(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    read_interfaces(dev_el, found.devices, found.networks, r)


def _host_devices(dev_el: ET.Element, found: Found, r: DomainRead) -> None:
    out = []
    for i, el in enumerate(dev_el.findall("hostdev")):
        kind = el.get("type", "")
        where = f"<hostdev type={kind!r}>"
        if el.get("mode", "subsystem") != "subsystem":
            r.refuse(where, "only subsystem host devices")
            continue
        if kind == "pci":
            a = el.find("source/address")
            try:
                pci = (
                    PciAddress(*(int(a.get(k, "0"), 16) for k in ("domain", "bus", "slot", "function")))
                    if a is not None
                    else None
                )
            except ValueError:
                pci = None
            if pci is None:
                r.refuse(where, "a PCI device without its address")
                continue
            address = pci.text
            name = f"host.local/pci-{address.replace(':', '-').replace('.', '-')}"
        elif kind == "usb":
            vendor = el.find("source/vendor")
            product = el.find("source/product")
            if vendor is None or product is None:
                r.refuse(where, "a USB device without vendor and product")
                continue
            usb = parse_usb(f"{vendor.get('id', '')[2:]:0>4}:{product.get('id', '')[2:]:0>4}")
            if usb is None:
                r.refuse(where, "a USB device without vendor and product")
                continue
            address = usb.text
            name = f"host.local/usb-{address.replace(':', '-')}"
        elif kind == "mdev":
            a = el.find("source/address")
            uid = parse_uuid(a.get("uuid") if a is not None else None)
            if uid is None:
                r.refuse(where, "a mediated device without its UUID")
                continue
            address = uid
            name = f"host.local/mdev-{uid}"
        else:
            r.refuse(where, "host devices are PCI, USB or mediated here")
            continue
        r.host_devices.append((name, kind, address))
        out.append({"name": f"hostdev{i}", "deviceName": name})
    if out:
        found.devices["hostDevices"] = out


Reader = Callable[["ET.Element", Found, "DomainRead"], None]

# The reader of each device kind render writes (``model.devices``: a kind with its
# ``module``), the others left to the pass-through the proof grows (``importer.keep``).
READERS: Mapping[str, Reader] = MappingProxyType(
    {
        "emulator": read_emulator,
        "disk": _disks,
        "controller": read_elsewhere,
        "interface": _interfaces,
        "serial": read_serial_console,
        "console": read_elsewhere,
        "channel": read_elsewhere,
        "input": read_inputs,
        "tpm": read_tpm,
        "graphics": read_display,
        "sound": read_sound,
        "video": read_elsewhere,
        "hostdev": _host_devices,
        "watchdog": read_watchdog,
        "memballoon": read_balloon,
        "rng": read_rng,
        "panic": read_panics,
        "vsock": read_vsock,
    }
)


def read_devices(dev_el: ET.Element, namespace: str, r: DomainRead) -> Found:
    """The devices fields, volumes and networks of ``<devices>``, read kind by kind in
    the order of the device kinds (``model.devices``)."""
    found = Found(namespace)
    for kind in DEVICE_KINDS:
        reader = READERS.get(kind.element)
        if reader is not None:
            reader(dev_el, found, r)
    return found
