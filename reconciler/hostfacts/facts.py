"""Host facts: what one libvirt host offers.

Input: the XML of ``getCapabilities()`` / ``getDomainCapabilities()``, of its node
devices, and a few plain figures read by the hypervisor module (``parse_host_facts``),
or the JSON written by ``reconciler host-facts`` (``facts_from_json``). Output: a
frozen ``HostFacts`` (``hostfacts.check`` tells whether a domain can run on it). Pure:
it never opens a connection, a file or a clock.

A fact that could not be read is ``None`` and is not checked: an unknown fact never
turns into an error. Volatile figures (free hugepages, free memory) are kept apart
from the stable ones so a repository's copy of the facts can be compared with the
host (``stable_view``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import field, fields, replace
from typing import TYPE_CHECKING, Any

from reconciler.errors import ReconcilerError
from reconciler.model.identifiers import PciAddress, UsbId
from reconciler.records import dataclass
from reconciler.render.caps import HostCaps, parse_host_caps

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

FACTS_VERSION = 1


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
        kw.update(_domain_caps(domcaps_xml))
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


def _domain_caps(domcaps_xml: str) -> dict[str, Any]:
    """The facts of the domain capabilities: the most vCPUs, the firmware, secure boot,
    TPM, CPU modes and models, disk buses, video models and the passt backend."""
    kw: dict[str, Any] = {}
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
    return kw


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
                parts = [node_number(cap.findtext(k)) for k in ("domain", "bus", "slot", "function")]
                if None not in parts:
                    d, b, s, f = (int(p or 0) for p in parts)
                    pci.add(PciAddress(d, b, s, f).text)
            elif kind == "usb_device":
                vendor, product = cap.find("vendor"), cap.find("product")
                ids = [node_number(e.get("id")) if e is not None else None for e in (vendor, product)]
                if None not in ids:
                    usb.add(UsbId(ids[0] or 0, ids[1] or 0).text)
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


def node_number(text: str | None) -> int | None:
    """A node device number: decimal, or hexadecimal with 0x."""
    text = (text or "").strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


# -- JSON -------------------------------------------------------------------------------

_VOLATILE = ("hugepages_free", "host_memory_kib")


def facts_to_obj(facts: HostFacts) -> dict[str, Any]:
    out: dict[str, Any] = {"schemaVersion": FACTS_VERSION}
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
        raise FactsError(f"{path}: not a host-facts JSON file: {str(err)[:200]}") from err
    except RecursionError as err:  # 100k nested brackets: no facts file nests like that
        raise FactsError(f"{path}: not a host-facts JSON file: nested too deeply") from err
    # ``schemaVersion`` as every JSON of the CLI; ``version`` in files written before
    if not isinstance(obj, dict) or obj.get("schemaVersion", obj.get("version")) != FACTS_VERSION:
        raise FactsError(
            f"{path}: not a host-facts file of version {FACTS_VERSION} "
            "(write one with `reconciler host-facts --connect URI --out FILE`)"
        )
    kw: dict[str, Any] = {}
    known = {_camel(f.name): f.name for f in fields(HostFacts)}
    for key, value in obj.items():
        if key in ("schemaVersion", "version"):
            continue
        if key not in known:
            raise FactsError(f"{path}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        name = known[key]
        try:
            kw[name] = _typed(name, value)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as err:
            raise FactsError(f"{path}: {key}: {str(err)[:300]}") from err
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
                kw[k] = tuple((str(a), b) for a, b in _pairs(v, int))  # (machine type, max CPUs)
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
