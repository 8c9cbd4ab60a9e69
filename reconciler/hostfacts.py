"""Host facts: what one libvirt host offers, and whether a rendered domain can run on it.

Input: the XML of ``getCapabilities()`` / ``getDomainCapabilities()`` and a few plain
figures read by the hypervisor module (``parse_host_facts``), or the JSON written by
``reconciler host-facts`` (``facts_from_json``). Output: a frozen ``HostFacts`` and,
per rendered domain, the list of ``FactProblem`` that would make the host refuse it
(``check_domain``). Pure: it never opens a connection, a file or a clock.

A fact that could not be read is ``None`` and is not checked: an unknown fact never
turns into an error. Volatile figures (free hugepages, free memory) are kept apart
from the stable ones so a repository's copy of the facts can be compared with the
host (``stable_view``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.render.caps import HostCaps, parse_host_caps

FACTS_VERSION = 1
SPEC = "spec.template.spec"
DOMAIN = f"{SPEC}.domain"


class FactsError(ReconcilerError):
    """A facts file (or the host's XML) could not be understood."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a host offers. ``None`` = not known (never checked)."""

    host: str = ""
    caps: HostCaps = field(default_factory=HostCaps)
    max_vcpus: int | None = None
    firmware: tuple[str, ...] | None = None  # loader paths the host offers
    secure_boot: bool | None = None
    tpm_models: tuple[str, ...] | None = None
    tpm_backends: tuple[str, ...] | None = None
    tpm_versions: tuple[str, ...] | None = None
    cpu_modes: tuple[str, ...] | None = None
    cpu_models: tuple[str, ...] | None = None
    disk_buses: tuple[str, ...] | None = None
    video_models: tuple[str, ...] | None = None
    passt: bool = False  # libvirt offers the passt backend for user-mode interfaces
    host_cpus: int | None = None
    host_memory_kib: int | None = None
    hugepage_sizes_kib: tuple[int, ...] | None = None  # sizes the host supports
    hugepages_free: tuple[tuple[int, int], ...] | None = None  # (size KiB, free pages) - volatile
    hugetlbfs_mounted: bool | None = None
    networks: tuple[tuple[str, bool], ...] | None = None  # (name, active)
    # libvirt networks with <forward mode="hostdev">: pools of SR-IOV virtual functions
    hostdev_networks: tuple[str, ...] | None = None
    interfaces: tuple[str, ...] | None = None  # host network interfaces, bridges included
    pci_devices: tuple[str, ...] | None = None  # PCI functions, "0000:65:00.0"
    usb_devices: tuple[str, ...] | None = None  # USB devices plugged in, "vendor:product"
    mdevs: tuple[tuple[str, str], ...] | None = None  # (UUID, mdev type) of the active mediated devices
    pools: tuple[tuple[str, bool], ...] | None = None  # (name, active)
    images: tuple[tuple[str, bool], ...] | None = None  # (path, exists) of the host config's image map
    # Image map entries that are directories (kernelBoot images): (directory, the regular
    # files below it, relative, whose real path lies inside allowedDirectories)
    image_dirs: tuple[tuple[str, tuple[str, ...]], ...] | None = None

    def network_active(self, name: str) -> bool | None:
        if self.networks is None:
            return None
        return dict(self.networks).get(name, False)


@dataclass(frozen=True, slots=True)
class FactProblem:
    """Why a domain cannot run on the host: the KubeVirt field and the missing fact."""

    field: str  # KubeVirt field path, "" when the whole VM is concerned
    message: str


def _values(el: ET.Element | None, enum: str) -> tuple[str, ...] | None:
    if el is None:
        return None
    if el.get("supported") == "no":
        return ()
    return tuple(sorted({(v.text or "").strip() for v in el.findall(f"enum[@name='{enum}']/value")}))


def parse_host_facts(
    caps_xml: str,
    domcaps_xml: str | None,
    *,
    host: str = "",
    host_cpus: int | None = None,
    host_memory_kib: int | None = None,
    hugepages_free: Mapping[int, int] | None = None,
    hugetlbfs_mounted: bool | None = None,
    networks: Mapping[str, bool] | None = None,
    hostdev_networks: Iterable[str] | None = None,
    interfaces: Iterable[str] | None = None,
    pools: Mapping[str, bool] | None = None,
    images: Mapping[str, bool] | None = None,
    image_dirs: Mapping[str, Iterable[str]] | None = None,
    node_devices: Iterable[str] | None = None,
) -> HostFacts:
    """Facts from the host's capability XML plus the figures the caller read
    (``node_devices``: the XML of the host's PCI, USB and mediated node devices)."""
    caps = parse_host_caps(caps_xml, domcaps_xml)
    try:
        root = ET.fromstring(caps_xml)
    except ET.ParseError as err:
        raise FactsError(f"host capabilities: not XML: {err}") from err
    sizes = sorted({int(p.get("size") or 0) for p in root.findall("host/topology/cells/cell/pages")} - {0})
    huge = tuple(s for s in sizes if s > 4)  # the base page is not a hugepage
    kw: dict[str, Any] = {}
    if domcaps_xml and caps.machines:  # the test driver has no real domain capabilities
        try:
            dc = ET.fromstring(domcaps_xml)
        except ET.ParseError as err:
            raise FactsError(f"domain capabilities: not XML: {err}") from err
        vcpu = dc.find("vcpu")
        if vcpu is not None and (vcpu.get("max") or "").isdigit():
            kw["max_vcpus"] = int(vcpu.get("max") or 0)
        loader = dc.find("os/loader")
        if loader is not None:
            kw["firmware"] = tuple(sorted((v.text or "").strip() for v in loader.findall("value")))
            secure = _values(loader, "secure") or ()
            kw["secure_boot"] = "yes" in secure
        tpm = dc.find("devices/tpm")
        kw["tpm_models"] = _values(tpm, "model") if tpm is not None else ()
        kw["tpm_backends"] = _values(tpm, "backendModel") if tpm is not None else ()
        kw["tpm_versions"] = _values(tpm, "backendVersion") if tpm is not None else None
        modes = [m for m in dc.findall("cpu/mode") if m.get("supported") == "yes"]
        kw["cpu_modes"] = tuple(sorted(str(m.get("name")) for m in modes))
        kw["cpu_models"] = tuple(
            sorted({(m.text or "").strip() for m in dc.findall("cpu/mode[@name='custom']/model")})
        )
        kw["disk_buses"] = _values(dc.find("devices/disk"), "bus")
        kw["video_models"] = _values(dc.find("devices/video"), "modelType")
        backends = _values(dc.find("devices/interface"), "backendType") or ()
        kw["passt"] = "passt" in backends
    if networks is not None:
        caps = replace(caps, networks=tuple(sorted(n for n, up in networks.items() if up)))
    caps = replace(caps, passt=bool(kw.get("passt")))
    if node_devices is not None:
        kw.update(parse_node_devices(node_devices))
    return HostFacts(
        host=host,
        caps=caps,
        host_cpus=host_cpus,
        host_memory_kib=host_memory_kib,
        hugepage_sizes_kib=huge if caps.machines else None,
        hugepages_free=tuple(sorted(hugepages_free.items())) if hugepages_free is not None else None,
        hugetlbfs_mounted=hugetlbfs_mounted,
        networks=tuple(sorted(networks.items())) if networks is not None else None,
        hostdev_networks=tuple(sorted(set(hostdev_networks))) if hostdev_networks is not None else None,
        interfaces=tuple(sorted(set(interfaces))) if interfaces is not None else None,
        pools=tuple(sorted(pools.items())) if pools is not None else None,
        images=tuple(sorted(images.items())) if images is not None else None,
        image_dirs=(
            tuple((d, tuple(sorted(set(f)))) for d, f in sorted(image_dirs.items()))
            if image_dirs is not None
            else None
        ),
        **kw,
    )


def parse_node_devices(xmls: Iterable[str]) -> dict[str, Any]:
    """``pci_devices``, ``usb_devices`` and ``mdevs`` from libvirt node device XML
    (``virsh nodedev-dumpxml``); devices of other kinds are skipped."""
    pci: set[str] = set()
    usb: set[str] = set()
    mdevs: dict[str, str] = {}
    for text in xmls:
        try:
            dev = ET.fromstring(text)
        except ET.ParseError as err:
            raise FactsError(f"node device: not XML: {err}") from err
        for cap in dev.findall("capability"):
            kind = cap.get("type")
            if kind == "pci":
                parts = [_number(cap.findtext(k)) for k in ("domain", "bus", "slot", "function")]
                if None not in parts:
                    d, b, s, f = (int(p or 0) for p in parts)
                    pci.add(f"{d:04x}:{b:02x}:{s:02x}.{f:x}")
            elif kind == "usb_device":
                vendor, product = cap.find("vendor"), cap.find("product")
                ids = [_number(e.get("id")) if e is not None else None for e in (vendor, product)]
                if None not in ids:
                    usb.add(f"{int(ids[0] or 0):04x}:{int(ids[1] or 0):04x}")
            elif kind == "mdev":
                uuid = (cap.findtext("uuid") or "").strip().lower()
                name = dev.findtext("name") or ""
                if not uuid and name.startswith("mdev_"):  # libvirt before 7.x: mdev_<uuid>[_parent]
                    uuid = "-".join(name[5:].split("_")[:5]).lower()
                mtype = cap.find("type")
                if uuid:
                    mdevs[uuid] = mtype.get("id", "") if mtype is not None else ""
    return {
        "pci_devices": tuple(sorted(pci)),
        "usb_devices": tuple(sorted(usb)),
        "mdevs": tuple(sorted(mdevs.items())),
    }


def _number(text: str | None) -> int | None:
    """A node device number: decimal, or hexadecimal with 0x."""
    text = (text or "").strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


# -- JSON -------------------------------------------------------------------------------

_VOLATILE = ("hugepages_free", "host_memory_kib")


def facts_to_obj(facts: HostFacts) -> dict[str, Any]:
    out: dict[str, Any] = {"version": FACTS_VERSION}
    for f in fields(HostFacts):
        value = getattr(facts, f.name)
        if f.name == "caps":
            value = {_camel(c.name): getattr(value, c.name) for c in fields(HostCaps)}
        out[_camel(f.name)] = _plain(value)
    return out


def facts_to_json(facts: HostFacts) -> str:
    return json.dumps(facts_to_obj(facts), indent=2, sort_keys=True) + "\n"


def stable_view(facts: HostFacts) -> dict[str, Any]:
    """The facts without the figures that change while a host runs (for comparisons)."""
    obj = facts_to_obj(facts)
    for name in _VOLATILE:
        obj.pop(_camel(name), None)
    return obj


def facts_from_json(text: str | bytes, path: str) -> HostFacts:
    """Read a facts file; every problem names the file."""
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError) as err:
        raise FactsError(f"{path}: not a host-facts JSON file: {err}") from err
    if not isinstance(obj, dict) or obj.get("version") != FACTS_VERSION:
        raise FactsError(
            f"{path}: not a host-facts file of version {FACTS_VERSION} "
            "(write one with `reconciler host-facts --connect URI -o FILE`)"
        )
    kw: dict[str, Any] = {}
    known = {_camel(f.name): f.name for f in fields(HostFacts)}
    for key, value in obj.items():
        if key == "version":
            continue
        if key not in known:
            raise FactsError(f"{path}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        name = known[key]
        try:
            kw[name] = _typed(name, value)
        except (TypeError, ValueError) as err:
            raise FactsError(f"{path}: {key}: {err}") from err
    return HostFacts(**kw)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("expected a list of strings")
    return tuple(value)


def _pairs(value: Any, second: type) -> tuple[tuple[Any, Any], ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, list) and len(v) == 2 and isinstance(v[1], second) for v in value
    ):
        raise TypeError(f"expected a list of [name, {second.__name__}] pairs")
    return tuple((v[0], v[1]) for v in value)


def _cells(value: Any) -> tuple[tuple[int, tuple[int, ...]], ...]:
    if not isinstance(value, list) or not all(
        isinstance(c, list)
        and len(c) == 2
        and isinstance(c[0], int)
        and isinstance(c[1], list)
        and all(isinstance(x, int) for x in c[1])
        for c in value
    ):
        raise TypeError("caps.numaCells: expected a list of [cell id, [cpu ids]]")
    return tuple((c[0], tuple(c[1])) for c in value)


def _typed(name: str, value: Any) -> Any:
    if value is None and name not in ("host", "caps", "passt"):
        return None
    if name == "caps":
        if not isinstance(value, dict):
            raise TypeError("expected an object")
        names = {_camel(c.name): c.name for c in fields(HostCaps)}
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}")
        kw: dict[str, Any] = {}
        for key, v in value.items():
            k = names[key]
            if k in ("machines", "networks"):
                kw[k] = None if v is None else _strings(v)
            elif k == "max_cpus":
                kw[k] = _pairs(v, int)
            elif k == "numa_cells":
                kw[k] = _cells(v)
            elif k == "passt":
                if not isinstance(v, bool):
                    raise TypeError("caps.passt: expected true or false")
                kw[k] = v
            else:
                kw[k] = str(v)
        return replace(HostCaps(), **kw)
    if name == "host":
        return str(value)
    if name in ("secure_boot", "passt", "hugetlbfs_mounted"):
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if name in ("max_vcpus", "host_cpus", "host_memory_kib"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError("expected an integer")
        return value
    if name == "hugepage_sizes_kib":
        if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
            raise TypeError("expected a list of integers")
        return tuple(value)
    if name == "hugepages_free":
        return tuple((int(a), int(b)) for a, b in _pairs(value, int))
    if name in ("networks", "pools", "images"):
        return tuple((str(a), b) for a, b in _pairs(value, bool))
    if name == "mdevs":
        if not isinstance(value, list) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v) for v in value
        ):
            raise TypeError("expected a list of [uuid, mdev type] pairs")
        return tuple((str(a), str(b)) for a, b in value)
    if name == "image_dirs":
        return tuple((str(d), _strings(files)) for d, files in _pairs(value, list))
    return _strings(value)


# -- the check ----------------------------------------------------------------------------


def check_domain(
    rendered_xml: str, spec: Mapping[str, Any], facts: HostFacts, image_paths: Mapping[str, str]
) -> tuple[FactProblem, ...]:
    """Every reason the host would refuse this domain. ``spec`` is the expanded VM
    (for field paths); ``image_paths`` maps image files to the containerDisk/DataVolume
    reference that named them."""
    dom = ET.fromstring(rendered_xml)
    out: list[FactProblem] = []
    tmpl: Mapping[str, Any] = ((spec.get("spec") or {}).get("template") or {}).get("spec") or {}
    out += _check_machine(dom, facts)
    out += _check_cpu(dom, facts)
    out += _check_memory(dom, facts)
    out += _check_firmware(dom, facts)
    out += _check_tpm(dom, facts)
    out += _check_devices(dom, facts)
    out += _check_host_devices(dom, tmpl, facts)
    out += _check_networks(dom, tmpl, facts)
    out += _check_storage(dom, tmpl, facts, image_paths)
    out += _check_kernel_boot(dom, facts)
    return tuple(out)


def _check_machine(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    machine = dom.find("os/type")
    name = machine.get("machine") if machine is not None else None
    if name and facts.caps.machines and name not in facts.caps.machines:
        return [
            FactProblem(
                f"{DOMAIN}.machine.type",
                f"machine type {name!r} is not offered by this host's QEMU "
                f"(offered: {_few(facts.caps.machines)})",
            )
        ]
    return []


def _check_cpu(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    out: list[FactProblem] = []
    vcpus = int((dom.findtext("vcpu") or "0").strip() or 0)
    if facts.max_vcpus is not None and vcpus > facts.max_vcpus:
        out.append(
            FactProblem(
                f"{DOMAIN}.cpu",
                f"{vcpus} vCPUs exceed the {facts.max_vcpus} this host's QEMU allows for machine "
                f"{(dom.find('os/type') or ET.Element('x')).get('machine', '')!r}",
            )
        )
    cpu = dom.find("cpu")
    if cpu is None:
        return out
    mode = cpu.get("mode") or "custom"
    if facts.cpu_modes is not None and mode not in facts.cpu_modes:
        out.append(FactProblem(f"{DOMAIN}.cpu.model", f"CPU mode {mode} is not supported by this host"))
    model = (cpu.findtext("model") or "").strip()
    if mode == "custom" and model and facts.cpu_models is not None and model not in facts.cpu_models:
        out.append(
            FactProblem(f"{DOMAIN}.cpu.model", f"CPU model {model!r} is not known to this host's QEMU")
        )
    return out


def _kib(el: ET.Element | None) -> int:
    if el is None or not (el.text or "").strip():
        return 0
    factor = {"b": 1 / 1024, "bytes": 1 / 1024, "k": 1, "kib": 1, "m": 1024, "mib": 1024, "g": 1 << 20}
    return int(int((el.text or "0").strip()) * factor.get((el.get("unit") or "KiB").lower(), 1))


def _check_memory(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    # Guest memory beyond the host's is overcommit, which libvirt and QEMU accept: the
    # host's memory is a fact for the reader, not a reason to refuse.
    out: list[FactProblem] = []
    memory = _kib(dom.find("memory"))
    page = dom.find("memoryBacking/hugepages/page")
    if dom.find("memoryBacking/hugepages") is None:
        return out
    where = f"{DOMAIN}.memory.hugepages.pageSize"
    size = _kib(page) if page is not None else 2048
    if page is not None and page.get("size"):
        size = _kib(ET.fromstring(f"<p unit='{page.get('unit') or 'KiB'}'>{page.get('size')}</p>"))
    if facts.hugetlbfs_mounted is False:
        out.append(FactProblem(where, "hugepages requested but no hugetlbfs is mounted on this host"))
        return out
    if facts.hugepage_sizes_kib is not None and size not in facts.hugepage_sizes_kib:
        offered = ", ".join(_size(s) for s in facts.hugepage_sizes_kib) or "none"
        out.append(FactProblem(where, f"hugepages of {_size(size)} are not offered by this host ({offered})"))
        return out
    if facts.hugepages_free is not None:
        free = dict(facts.hugepages_free).get(size, 0)
        need = -(-memory // size) if size else 0
        if need > free:
            out.append(
                FactProblem(
                    where,
                    f"needs {need} free hugepages of {_size(size)}, this host has {free} free",
                )
            )
    return out


def _check_firmware(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    loader = dom.find("os/loader")
    if loader is None:
        return []
    where = f"{DOMAIN}.firmware.bootloader.efi"
    out: list[FactProblem] = []
    path = (loader.text or "").strip()
    if facts.firmware is not None and path and path not in facts.firmware:
        offered = _few(facts.firmware) if facts.firmware else "none (install OVMF)"
        out.append(FactProblem(where, f"firmware {path} is not offered by this host (offered: {offered})"))
    if loader.get("secure") == "yes" and facts.secure_boot is False:
        out.append(FactProblem(f"{where}.secureBoot", "secure boot is not supported by this host"))
    return out


def _check_tpm(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    out: list[FactProblem] = []
    for tpm in dom.findall("devices/tpm"):
        where = f"{SPEC}.domain.devices.tpm"
        model = tpm.get("model") or "tpm-tis"
        backend = tpm.find("backend")
        kind = backend.get("type", "") if backend is not None else ""
        version = backend.get("version", "") if backend is not None else ""
        if facts.tpm_models is not None and model not in facts.tpm_models:
            out.append(FactProblem(where, f"TPM model {model} is not supported by this host"))
        if facts.tpm_backends is not None and kind and kind not in facts.tpm_backends:
            hint = " (install swtpm)" if kind == "emulator" else ""
            out.append(FactProblem(where, f"TPM backend {kind!r} is not available on this host{hint}"))
        elif facts.tpm_versions is not None and version and version not in facts.tpm_versions:
            out.append(
                FactProblem(where, f"TPM version {version} is not supported by this host (install swtpm)")
            )
    return out


def _check_devices(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    out: list[FactProblem] = []
    if facts.disk_buses is not None:
        for bus in sorted({t.get("bus", "") for t in dom.findall("devices/disk/target")} - {""}):
            if bus not in facts.disk_buses:
                out.append(
                    FactProblem(f"{DOMAIN}.devices.disks", f"disk bus {bus} is not offered by this host")
                )
    if facts.video_models is not None:
        for model in sorted({v.get("type", "") for v in dom.findall("devices/video/model")} - {"", "none"}):
            if model not in facts.video_models:
                out.append(
                    FactProblem(f"{DOMAIN}.devices.video", f"video model {model} is not offered by this host")
                )
    return out


def _check_host_devices(dom: ET.Element, tmpl: Mapping[str, Any], facts: HostFacts) -> list[FactProblem]:
    """PCI and USB devices passed through must be on the host (mediated devices are
    checked when their pool hands them out, ``render.mdev``)."""
    devices = (tmpl.get("domain") or {}).get("devices") or {}
    fields = [
        f"{DOMAIN}.devices.{key}[{i}].deviceName"
        for key in ("gpus", "hostDevices")
        for i, _ in enumerate(devices.get(key) or ())
    ]
    out: list[FactProblem] = []
    for i, hostdev in enumerate(dom.findall("devices/hostdev")):
        where = fields[i] if i < len(fields) else f"{DOMAIN}.devices.hostDevices"
        kind = hostdev.get("type")
        if kind == "pci" and facts.pci_devices is not None:
            a = hostdev.find("source/address")
            if a is None:
                continue
            parts = [_number(a.get(k)) for k in ("domain", "bus", "slot", "function")]
            d, b, s, f = (int(p or 0) for p in parts)
            address = f"{d:04x}:{b:02x}:{s:02x}.{f:x}"
            if address not in facts.pci_devices:
                out.append(FactProblem(where, f"PCI device {address} does not exist on this host"))
        elif kind == "usb" and facts.usb_devices is not None:
            vendor, product = hostdev.find("source/vendor"), hostdev.find("source/product")
            if vendor is None or product is None:
                continue
            usb = f"{int(_number(vendor.get('id')) or 0):04x}:{int(_number(product.get('id')) or 0):04x}"
            if usb not in facts.usb_devices:
                out.append(FactProblem(where, f"USB device {usb} is not plugged into this host"))
    return out


def _interface_field(tmpl: Mapping[str, Any], iface_index: int, key: str) -> str:
    """``domain.devices.interfaces[k].KEY`` of the i-th rendered interface."""
    ifaces = ((tmpl.get("domain") or {}).get("devices") or {}).get("interfaces") or ()
    shown = [k for k, i in enumerate(ifaces) if isinstance(i, Mapping) and i.get("state") != "absent"]
    if iface_index < len(shown):
        return f"{SPEC}.domain.devices.interfaces[{shown[iface_index]}].{key}"
    return f"{SPEC}.domain.devices.interfaces"


def _network_field(tmpl: Mapping[str, Any], iface_index: int) -> str:
    """The ``networks[i]`` entry behind the i-th rendered interface."""
    ifaces = [
        i
        for i in ((tmpl.get("domain") or {}).get("devices") or {}).get("interfaces") or ()
        if isinstance(i, Mapping) and i.get("state") != "absent"
    ]
    if iface_index < len(ifaces):
        name = ifaces[iface_index].get("name")
        for j, net in enumerate(tmpl.get("networks") or ()):
            if isinstance(net, Mapping) and net.get("name") == name:
                return f"{SPEC}.networks[{j}]"
    return f"{SPEC}.networks"


def _interface_spec(tmpl: Mapping[str, Any], iface_index: int) -> Mapping[str, Any]:
    """The spec of the i-th rendered interface (``{}`` when it cannot be found)."""
    ifaces = [
        i
        for i in ((tmpl.get("domain") or {}).get("devices") or {}).get("interfaces") or ()
        if isinstance(i, Mapping) and i.get("state") != "absent"
    ]
    return ifaces[iface_index] if iface_index < len(ifaces) else {}


def _check_sriov(tmpl: Mapping[str, Any], i: int, name: str, facts: HostFacts) -> list[FactProblem]:
    """An ``sriov`` interface needs a network pooling virtual functions (forward mode
    hostdev); any other binding on such a network would be handed a VF it cannot use."""
    if facts.hostdev_networks is None:
        return []
    sriov = _interface_spec(tmpl, i).get("sriov") is not None
    pool = name in facts.hostdev_networks
    if sriov and not pool:
        return [
            FactProblem(
                _interface_field(tmpl, i, "sriov"),
                f"libvirt network {name!r} is not an SR-IOV pool on this host "
                "(it needs <forward mode='hostdev' managed='yes'><pf dev='NIC'/></forward>)",
            )
        ]
    if pool and not sriov:
        return [
            FactProblem(
                _network_field(tmpl, i),
                f"libvirt network {name!r} hands out SR-IOV virtual functions (forward mode hostdev) "
                "on this host: give the interface sriov: {}",
            )
        ]
    return []


def _check_networks(dom: ET.Element, tmpl: Mapping[str, Any], facts: HostFacts) -> list[FactProblem]:
    out: list[FactProblem] = []
    for i, iface in enumerate(dom.findall("devices/interface")):
        source = iface.find("source")
        kind = iface.get("type")
        if kind == "network" and source is not None:
            name = source.get("network", "")
            active = facts.network_active(name)
            if active is False:
                exists = name in dict(facts.networks or ())
                what = "is not active" if exists else "does not exist"
                out.append(
                    FactProblem(_network_field(tmpl, i), f"libvirt network {name!r} {what} on this host")
                )
            else:
                out += _check_sriov(tmpl, i, name, facts)
        elif kind == "bridge" and source is not None and facts.interfaces is not None:
            name = source.get("bridge", "")
            if name not in facts.interfaces:
                out.append(
                    FactProblem(_network_field(tmpl, i), f"bridge {name!r} does not exist on this host")
                )
        elif kind == "user" and iface.find("backend[@type='passt']") is not None and not facts.passt:
            out.append(
                FactProblem(
                    _interface_field(tmpl, i, "passt"),
                    "this host's libvirt offers no passt backend (install the passt package)",
                )
            )
        elif kind == "direct" and source is not None and facts.interfaces is not None:
            name = source.get("dev", "")
            if name not in facts.interfaces:
                out.append(
                    FactProblem(
                        _network_field(tmpl, i), f"host interface {name!r} does not exist on this host"
                    )
                )
    return out


def _volume_field(tmpl: Mapping[str, Any], match: Sequence[tuple[str, str]]) -> str:
    """``volumes[i]`` whose source has one of (kind, key=value) - for field paths."""
    for i, vol in enumerate(tmpl.get("volumes") or ()):
        if not isinstance(vol, Mapping):
            continue
        for kind, value in match:
            src = vol.get(kind)
            if isinstance(src, Mapping) and value in (
                src.get("claimName"),
                src.get("name"),
                src.get("image"),
            ):
                return f"{SPEC}.volumes[{i}].{kind}"
    return f"{SPEC}.volumes"


def _check_storage(
    dom: ET.Element, tmpl: Mapping[str, Any], facts: HostFacts, image_paths: Mapping[str, str]
) -> list[FactProblem]:
    out: list[FactProblem] = []
    pools = dict(facts.pools) if facts.pools is not None else None
    for disk in dom.findall("devices/disk"):
        source = disk.find("source")
        if source is None or disk.get("type") != "volume" or pools is None:
            continue
        pool, volume = source.get("pool", ""), source.get("volume", "")
        claim = volume
        where = _volume_field(
            tmpl, (("persistentVolumeClaim", claim), ("dataVolume", claim), ("persistentVolumeClaim", volume))
        )
        if pool not in pools:
            out.append(FactProblem(where, f"storage pool {pool!r} does not exist on this host"))
        elif not pools[pool]:
            out.append(FactProblem(where, f"storage pool {pool!r} is not active on this host"))
    images = dict(facts.images) if facts.images is not None else None
    if images is not None:
        for path, ref in sorted(image_paths.items()):
            if images.get(path) is False:
                where = _volume_field(tmpl, (("containerDisk", ref), ("dataVolume", ref)))
                out.append(FactProblem(where, f"image file {path} (for {ref}) does not exist on this host"))
    return out


def _check_kernel_boot(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    """The kernel and initrd of a direct kernel boot: regular files of the mapped image
    directory (inside allowedDirectories) on this host."""
    out: list[FactProblem] = []
    where = f"{DOMAIN}.firmware.kernelBoot.container"
    listed = dict(facts.image_dirs) if facts.image_dirs is not None else None
    known = dict(facts.images) if facts.images is not None else {}
    for tag, key in (("kernel", "kernelPath"), ("initrd", "initrdPath")):
        path = (dom.findtext(f"os/{tag}") or "").strip()
        if not path:
            continue
        dirs = [d for d in (listed or {}) if path.startswith(d.rstrip("/") + "/")]
        dirs += [d for d, ok in known.items() if not ok and path.startswith(d.rstrip("/") + "/")]
        if not dirs:
            continue  # nothing known about the directory holding it
        top = max(dirs, key=len)
        if known.get(top) is False:
            out.append(FactProblem(f"{where}.image", f"image directory {top} does not exist on this host"))
        elif listed is not None and path[len(top.rstrip("/")) + 1 :] not in listed[top]:
            out.append(
                FactProblem(
                    f"{where}.{key}",
                    f"{tag} {path} is not a regular file inside allowedDirectories on this host",
                )
            )
    return out


def _size(kib: int) -> str:
    for unit, factor in (("Ti", 1 << 30), ("Gi", 1 << 20), ("Mi", 1 << 10)):
        if kib >= factor and kib % factor == 0:
            return f"{kib // factor}{unit}"
    return f"{kib}Ki"


def _few(values: Sequence[str], n: int = 4) -> str:
    shown = ", ".join(values[:n])
    return shown + (f" and {len(values) - n} more" if len(values) > n else "")
