"""The devices of a live domain read back: disks and their volumes, interfaces and
their networks, the display and other devices, host devices.

Input: the parsed ``<devices>`` of ``importer.domain.read_domain`` and the read's state
(``importer.reading.DomainRead``). Output: the ``devices`` fields of
``spec.template.spec.domain`` with the template's ``volumes`` and ``networks``, and, in
the read's state, the directories, networks, pod network and host devices the host
configuration must list, the elements kept for a pass-through and the reasons a device
cannot be imported. For each element the field is the one ``render/`` writes it from
(docs/mapping.md). Pure: no libvirt, no files; never guesses a value the XML does not
hold.
"""

from __future__ import annotations

import posixpath
import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.importer.reading import int_or_none
from reconciler.model.identifiers import PciAddress, parse_mac, parse_usb, parse_uuid
from reconciler.render.devices import PANIC_MODELS, SOUND_MODELS, VIDEO_TYPES, WATCHDOG_ACTIONS
from reconciler.render.disks import letters
from reconciler.render.interfaces import MODELS
from reconciler.render.volumes import format_for

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

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
        target = el.find("target")
        dev = target.get("dev", "") if target is not None else ""
        bus = target.get("bus", "") if target is not None else ""
        where = f"<disk target={dev!r}>"
        if r.keep and el.get("device") in ("cdrom", "floppy") and el.find("source") is None:
            r.kept.append((("devices",), el))  # an empty drive: kept as it is, on any bus
            continue
        prefix = DISK_BUSES.get(bus)
        if prefix is None:
            r.refuse(
                where,
                f"bus {bus!r} (the reconciler's disks are on virtio, sata, scsi or usb): move it to bus "
                "'sata' (virsh edit, target bus='sata'; the guest finds it on an AHCI controller at its "
                "next boot) and import again",
            )
            continue
        if not dev.startswith(prefix) or not dev[len(prefix) :].isalpha():
            r.refuse(where, f"a {bus} disk is named {prefix}X here")
            continue
        device = el.get("device", "disk")
        if device not in ("disk", "cdrom", "lun"):
            r.refuse(where, f"device {device!r} (disk, cdrom or lun)")
            continue
        disk: dict[str, Any] = {"name": dev}
        target_node: dict[str, Any] = {"bus": bus}
        readonly = el.find("readonly") is not None
        if device == "cdrom":
            if not readonly:
                target_node["readonly"] = False
            if target is not None and target.get("tray") in ("open",):
                target_node["tray"] = "open"
        elif readonly:
            target_node["readonly"] = True
        disk[device] = target_node
        boot = el.find("boot")
        if boot is not None and boot.get("order"):
            disk["bootOrder"] = int_or_none(boot.get("order"))
        serial = el.findtext("serial")
        if serial:
            disk["serial"] = serial
        if el.find("shareable") is not None:
            disk["shareable"] = True
        driver = el.find("driver")
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
        volume = _volume(el, dev, where, device, namespace, driver, r)
        if volume is None:
            continue
        index = _letters_index(dev[len(prefix) :])
        found.append((prefix, index, disk, volume))
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
        kind = el.get("type", "")
        source = el.find("source")
        mac = parse_mac(el.find("mac").get("address") if el.find("mac") is not None else "")  # type: ignore[union-attr]
        where = f"<interface mac={mac!r}>"
        name = f"nic{i}"
        iface: dict[str, Any] = {"name": name}
        if mac:
            iface["macAddress"] = mac
        model_el = el.find("model")
        model = model_el.get("type", "") if model_el is not None else ""
        backend = el.find("backend")
        network: dict[str, Any] = {"name": name}
        if kind == "network" and source is not None and source.get("network"):
            target = source.get("network", "")
            if target == "default" and not pod_taken:
                network["pod"] = {}
                iface["masquerade"] = {}
                pod_taken = True
                r.pod = ("network", target)
            else:
                network["multus"] = {"networkName": _net_name(target)}
                iface["bridge"] = {}
                r.networks.append((_net_name(target), "network", target))
        elif kind == "bridge" and source is not None and source.get("bridge"):
            target = source.get("bridge", "")
            network["multus"] = {"networkName": _net_name(f"bridge-{target}")}
            iface["bridge"] = {}
            r.networks.append((_net_name(f"bridge-{target}"), "bridge", target))
        elif kind == "direct" and source is not None and source.get("dev"):
            target = source.get("dev", "")
            if source.get("mode", "vepa") != "bridge":
                r.refuse(where, f"macvtap mode {source.get('mode', 'vepa')!r} (render writes mode bridge)")
            network["multus"] = {"networkName": _net_name(f"direct-{target}")}
            iface["macvtap"] = {}
            r.networks.append((_net_name(f"direct-{target}"), "direct", target))
        elif kind == "user" and not pod_taken:
            network["pod"] = {}
            pod_taken = True
            if backend is not None and backend.get("type") == "passt":
                iface["passt"] = {}
            else:
                iface["masquerade"] = {}
                r.pod = ("user", "")
        else:
            r.refuse(where, f"a {kind or 'typeless'} interface (network, bridge, direct or user-mode)")
            continue
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
        interfaces.append(iface)
        networks.append(network)
    if interfaces:
        devices["interfaces"] = interfaces
    else:
        devices["autoattachPodInterface"] = False


def _net_name(text: str) -> str:
    """A multus network name (a DNS label) for a libvirt network, bridge or device."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "net"
    return name[:63].strip("-")


# -- other devices ---------------------------------------------------------------------


def read_devices(dev_el: ET.Element, devices: dict[str, Any], r: DomainRead) -> None:
    serial = dev_el.find("serial")
    console = dev_el.find("console")
    if serial is None and console is None:
        devices["autoattachSerialConsole"] = False
    inputs: list[dict[str, Any]] = []
    for el in dev_el.findall("input"):
        if el.get("type") == "tablet" and el.get("bus") in ("usb", "virtio"):
            inputs.append({"name": f"tablet{len(inputs)}", "type": "tablet", "bus": el.get("bus")})
    if inputs:
        devices["inputs"] = inputs
    graphics = dev_el.findall("graphics")
    video = dev_el.find("video/model")
    vtype = video.get("type", "") if video is not None else ""
    native = all(g.get("type") == "vnc" for g in graphics[:1]) and (video is None or vtype in VIDEO_TYPES)
    if r.keep and not native:
        # SPICE, or a video model KubeVirt lacks: every display device is kept as it is.
        devices["autoattachGraphicsDevice"] = False
        r.kept.extend((("devices",), el) for el in (*graphics, *dev_el.findall("video")))
        graphics, video = [], None
    elif not graphics:
        devices["autoattachGraphicsDevice"] = False
    else:
        g = graphics[0]
        if g.get("type") != "vnc":
            r.refuse(f"<graphics type={g.get('type')!r}>", "graphics are VNC here")
        listen = g.find("listen")
        address = (listen.get("address") if listen is not None else None) or g.get("listen")
        if address:
            r.setting("graphicsListen", address)
    if video is not None:
        if vtype not in VIDEO_TYPES:
            r.refuse(f"<video><model type={vtype!r}>", f"video models here: {', '.join(VIDEO_TYPES)}")
        elif vtype != "vga" or not graphics:
            devices["video"] = {"type": vtype}
    balloon = dev_el.find("memballoon")
    if balloon is not None and balloon.get("model") == "none":
        devices["autoattachMemBalloon"] = False
    wd = dev_el.find("watchdog")
    if wd is not None:
        action = wd.get("action", "reset")
        if wd.get("model") != "i6300esb" or action not in WATCHDOG_ACTIONS:
            r.keep_or_refuse(
                f"<watchdog model={wd.get('model')!r}>", "the watchdog is an i6300esb here", ("devices",), wd
            )
        else:
            devices["watchdog"] = {"name": "watchdog", "i6300esb": {"action": action}}
    rng = dev_el.find("rng")
    if rng is not None:
        devices["rng"] = {}
    tpm = dev_el.find("tpm")
    if tpm is not None:
        backend = tpm.find("backend")
        persistent = backend is not None and backend.get("persistent_state") == "yes"
        # KubeVirt's TPM: tpm-tis, or tpm-crb when its state persists.
        if r.keep and tpm.get("model", "tpm-tis") != ("tpm-crb" if persistent else "tpm-tis"):
            r.kept.append((("devices",), tpm))
        else:
            devices["tpm"] = {"persistent": True} if persistent else {}
    sound = dev_el.find("sound")
    if sound is not None:
        model = sound.get("model", "")
        if model not in SOUND_MODELS:
            r.keep_or_refuse(
                f"<sound model={model!r}>",
                f"sound models here: {', '.join(SOUND_MODELS)}",
                ("devices",),
                sound,
            )
        else:
            devices["sound"] = {"name": "sound", "model": model}
    panics = []
    for p in dev_el.findall("panic"):
        model = p.get("model", "isa")
        if model not in PANIC_MODELS:
            r.keep_or_refuse(
                f"<panic model={model!r}>", f"panic models here: {', '.join(PANIC_MODELS)}", ("devices",), p
            )
        else:
            panics.append({"model": model})
    if panics:
        devices["panicDevices"] = panics
    vsock = dev_el.find("vsock")
    if vsock is not None:
        devices["autoattachVSOCK"] = True
    if dev_el.find("disk[@model='virtio-transitional']") is not None:
        devices["useVirtioTransitional"] = True
    _host_devices(dev_el, devices, r)


def _host_devices(dev_el: ET.Element, devices: dict[str, Any], r: DomainRead) -> None:
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
        devices["hostDevices"] = out
