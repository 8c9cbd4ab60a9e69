"""Whether a rendered domain can run on a host: every fact it lacks, at its KubeVirt field.

Input: the rendered domain's element tree (as rendering built it, never a parse of its
XML; read only), the expanded VM (for field paths), the host's ``HostFacts`` and the
image files the domain's volumes use. Output: the list of ``FactProblem`` that would
make the host refuse it (``check_domain``). Pure. A fact that is not known (``None``)
is never checked.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.hostfacts.facts import HostFacts, node_number
from reconciler.model.identifiers import PciAddress, UsbId
from reconciler.model.units import format_bytes, memory_kib
from reconciler.records import dataclass

SPEC = "spec.template.spec"
DOMAIN = f"{SPEC}.domain"


@dataclass(frozen=True, slots=True)
class FactProblem:
    """Why a domain cannot run on the host: the KubeVirt field and the missing fact."""

    field: str  # KubeVirt field path, "" when the whole VM is concerned
    message: str


def check_domain(
    dom: ET.Element, spec: Mapping[str, Any], facts: HostFacts, image_paths: Mapping[str, str]
) -> tuple[FactProblem, ...]:
    """Every reason the host would refuse this domain (``dom``: its ``<domain>`` element,
    before placement: what placement adds is checked as it is handed out). ``spec`` is
    the expanded VM (for field paths); ``image_paths`` maps image files to the
    containerDisk/DataVolume reference that named them."""
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


def _kib(text: str | None, unit: str | None) -> int:
    if not (text or "").strip():
        return 0
    try:
        return memory_kib(text or "", unit)
    except ValueError:
        return 0  # not a size: nothing to check


def _check_memory(dom: ET.Element, facts: HostFacts) -> list[FactProblem]:
    # Guest memory beyond the host's is overcommit, which libvirt and QEMU accept: the
    # host's memory is a fact for the reader, not a reason to refuse.
    out: list[FactProblem] = []
    mem = dom.find("memory")
    memory = _kib(mem.text, mem.get("unit")) if mem is not None else 0
    page = dom.find("memoryBacking/hugepages/page")
    if dom.find("memoryBacking/hugepages") is None:
        return out
    where = f"{DOMAIN}.memory.hugepages.pageSize"
    size = _kib(page.get("size") or page.text, page.get("unit")) if page is not None else 2048
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
            parts = [node_number(a.get(k)) for k in ("domain", "bus", "slot", "function")]
            d, b, s, f = (int(p or 0) for p in parts)
            address = PciAddress(d, b, s, f).text
            if address not in facts.pci_devices:
                out.append(FactProblem(where, f"PCI device {address} does not exist on this host"))
        elif kind == "usb" and facts.usb_devices is not None:
            vendor, product = hostdev.find("source/vendor"), hostdev.find("source/product")
            if vendor is None or product is None:
                continue
            usb = UsbId(node_number(vendor.get("id")) or 0, node_number(product.get("id")) or 0).text
            if usb not in facts.usb_devices:
                out.append(FactProblem(where, f"USB device {usb} is not plugged into this host"))
    return out


def _binding_key(iface: Mapping[str, Any]) -> str:
    """The field an interface's binding is written in (``passtBinding``, ``binding``, ...)."""
    for key in ("passtBinding", "binding", "passt"):
        if iface.get(key) is not None:
            return key
    return "passtBinding"


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
                    _interface_field(tmpl, i, _binding_key(_interface_spec(tmpl, i))),
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
    return format_bytes(kib * 1024)


def _few(values: Sequence[str], n: int = 4) -> str:
    shown = ", ".join(values[:n])
    return shown + (f" and {len(values) - n} more" if len(values) > n else "")
