"""One live domain read back into a KubeVirt VirtualMachine: the renderer in reverse.

Input: a domain's persistent XML (``VIR_DOMAIN_XML_INACTIVE``), its power state and
autostart flag. Output: a ``Reading``: the VirtualMachine object (a plain mapping, as
a YAML file holds it), what the domain asks of the host configuration (``HostAsk``:
the settings one host has once, such as the emulator, and the entries it lists, such
as disk directories and networks), and the reasons it cannot be imported, each naming
the element. Pure: no libvirt, no files.

For each element the field is the one ``render/`` writes it from (docs/mapping.md); an
element this module does not read is left for ``importer.verify`` to find: the VM is
rendered again and compared with the live definition, so nothing is imported that the
plan would change or a redefinition would drop. This module never guesses a value the
XML does not hold.
"""

from __future__ import annotations

import posixpath
import re
import uuid as uuidlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.model import PowerState, RunStrategy
from reconciler.model.identifiers import (
    PciAddress,
    is_dns_label,
    is_dns_subdomain,
    parse_mac,
    parse_usb,
    parse_uuid,
)
from reconciler.model.units import memory_kib
from reconciler.render.caps import ARCH_TO_LIBVIRT
from reconciler.render.devices import PANIC_MODELS, SOUND_MODELS, VIDEO_TYPES, WATCHDOG_ACTIONS
from reconciler.render.disks import letters
from reconciler.render.features import HYPERV
from reconciler.render.identity import ANNOTATION_ADOPT, KUBEVIRT_FIRMWARE_NS
from reconciler.render.interfaces import MODELS
from reconciler.render.passthrough import ANNOTATION as PASSTHROUGH
from reconciler.render.passthrough import OMIT, fragment_text
from reconciler.render.volumes import format_for

if TYPE_CHECKING:
    from collections.abc import Mapping

LIBVIRT_TO_ARCH = MappingProxyType({v: k for k, v in ARCH_TO_LIBVIRT.items()})
GUEST_AGENT = "org.qemu.guest_agent.0"
DISK_BUSES = MappingProxyType({"virtio": "vd", "sata": "sd", "scsi": "sd", "usb": "sd"})
CACHE = ("none", "writethrough", "writeback")
IO = ("native", "threads")
ERROR_POLICIES = ("stop", "ignore", "report", "enospace")
TIMERS = MappingProxyType(
    {"rtc": "rtc", "pit": "pit", "kvmclock": "kvm", "hpet": "hpet", "hypervclock": "hyperv"}
)
HYPERV_FIELDS = MappingProxyType({tag: key for key, tag in HYPERV})


@dataclass(frozen=True, slots=True)
class HostAsk:
    """What one domain needs the host configuration to say.

    ``settings``: host-wide values (``domainType``, ``emulator``, ``graphicsListen``,
    ``nvramDirectory``, ``storagePool``, ``storagePoolFormat``, the four ``firmware``
    paths): one value per host, so domains that disagree cannot all be imported.
    The rest are entries the host config lists, merged over all domains.
    """

    settings: tuple[tuple[str, str], ...] = ()
    directories: tuple[str, ...] = ()  # allowedDirectories (the directories of disk files)
    networks: tuple[tuple[str, str, str], ...] = ()  # (multus name, kind, target)
    pod: tuple[str, str] | None = None  # (kind, target) of the pod network
    host_devices: tuple[tuple[str, str, str], ...] = ()  # (deviceName, kind, address)
    dedicated_cpus: tuple[int, ...] = ()
    images: tuple[tuple[str, str], ...] = ()  # (image name, directory): kernelBoot


@dataclass(frozen=True, slots=True)
class Reading:
    """One domain read back: the VM it would be, what it asks of the host, why not."""

    domain: str
    name: str  # the VM's name ("" when the domain name maps to none)
    namespace: str
    vm: dict[str, Any]
    ask: HostAsk
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # adjustments made (a name mapped, ...)
    # The pass-through (a <domain> fragment, render.passthrough) keeping what the YAML
    # cannot express, when the import was asked to keep it; None: none.
    fragment: ET.Element | None = None
    prefixes: Mapping[str, str] = field(default_factory=dict)  # namespace URI -> prefix

    @property
    def ok(self) -> bool:
        return not self.reasons


@dataclass(slots=True)
class _Read:
    """Mutable state while one domain is read."""

    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    directories: list[str] = field(default_factory=list)
    networks: list[tuple[str, str, str]] = field(default_factory=list)
    pod: tuple[str, str] | None = None
    host_devices: list[tuple[str, str, str]] = field(default_factory=list)
    dedicated: list[int] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    keep: bool = False  # keep what the YAML cannot express in a pass-through
    kept: list[tuple[tuple[str, ...], ET.Element]] = field(default_factory=list)  # (container, element)

    def refuse(self, where: str, why: str) -> None:
        self.reasons.append(f"{where}: {why}")

    def keep_or_refuse(self, where: str, why: str, container: tuple[str, ...], *els: ET.Element) -> None:
        """Keep ``els`` (whole, under the fragment's ``container``) when asked to, else refuse."""
        if not self.keep:
            self.refuse(where, why)
            return
        self.kept.extend((container, el) for el in els)

    def setting(self, key: str, value: str) -> None:
        self.settings[key] = value


def quantity_kib(kib: int) -> str:
    """KiB as the shortest exact binary quantity: 1048576 -> ``1Gi``."""
    for suffix, power in (("Ti", 3), ("Gi", 2), ("Mi", 1)):
        if kib % (1024**power) == 0:
            return f"{kib // 1024**power}{suffix}"
    return f"{kib}Ki"


def vm_name(domain: str) -> tuple[str, str, str]:
    """(namespace, name, "") of the VM a domain name is; ("", mapped, why) when the
    domain name is no VM's (``team-a_web`` is ``web`` in namespace ``team-a``)."""
    ns, sep, rest = domain.partition("_")
    if sep and is_dns_label(ns) and is_dns_subdomain(rest) and ns != "default":
        return ns, rest, ""
    if not sep and is_dns_subdomain(domain):
        return "default", domain, ""
    mapped = re.sub(r"[^a-z0-9.-]+", "-", domain.lower()).strip("-.") or "vm"
    mapped = re.sub(r"-{2,}", "-", mapped)[:63].strip("-.") or "vm"
    return "", mapped, f"{domain!r} is not a KubeVirt name (the domain name is the VM's name)"


def run_strategy(state: PowerState, autostart: bool) -> RunStrategy:
    """The run strategy that keeps a domain as it is: a running one running (``Always``
    when libvirt starts it with the host, else ``RerunOnFailure``: a clean stop stays
    stopped), a stopped one stopped (``Manual`` when libvirt autostarts it, so it still
    comes up with the host and the reconciler leaves its power alone, else ``Halted``)."""
    if state in (PowerState.RUNNING, PowerState.PAUSED):
        return RunStrategy.ALWAYS if autostart else RunStrategy.RERUN_ON_FAILURE
    return RunStrategy.MANUAL if autostart else RunStrategy.HALTED


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _on(el: ET.Element | None) -> bool | None:
    """``state="on"|"off"`` (absent: on) of a feature element; None when there is none."""
    if el is None:
        return None
    return el.get("state", "on") != "off"


def read_domain(
    xml: str, state: PowerState = PowerState.SHUTOFF, autostart: bool = False, keep: bool = False
) -> Reading:
    """The VirtualMachine a domain's persistent definition is, or the reasons it is none.

    ``keep``: what KubeVirt's fields cannot say and a pass-through may hold (SPICE
    graphics, a clock in local time, firmware auto-selection, a boot device list, no
    guest agent channel) goes into the VM's pass-through instead of being a reason."""
    dom = ET.fromstring(xml)
    r = _Read(keep=keep)
    name_el = dom.find("name")
    domain = (name_el.text or "") if name_el is not None else ""
    namespace, name, bad_name = vm_name(domain)
    if bad_name:
        r.refuse(
            "<name>",
            f"{bad_name}; rename the domain first (virsh domrename {domain!r} {name}) and import again",
        )
        r.notes.append(f"name {domain!r} maps to {name!r}")
    r.setting("domainType", dom.get("type", ""))
    tmpl: dict[str, Any] = {}
    spec_domain: dict[str, Any] = {}
    devices: dict[str, Any] = {}
    _identity(dom, domain, spec_domain, r)
    _memory(dom, spec_domain, r)
    _cpu(dom, spec_domain, r)
    _os(dom, domain, tmpl, spec_domain, r)
    _features(dom, spec_domain, r)
    _clock(dom, spec_domain, r)
    volumes: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    dev_el = dom.find("devices")
    if dev_el is not None:
        emulator = dev_el.find("emulator")
        if emulator is not None and emulator.text:
            r.setting("emulator", emulator.text.strip())
        _disks(dev_el, devices, volumes, namespace, r)
        _interfaces(dev_el, devices, networks, r)
        _devices(dev_el, devices, r)
    spec_domain["devices"] = devices
    tmpl["domain"] = spec_domain
    if networks:
        tmpl["networks"] = networks
    if volumes:
        tmpl["volumes"] = volumes
    metadata: dict[str, Any] = {"name": name, "annotations": {ANNOTATION_ADOPT: "true"}}
    if namespace not in ("", "default"):
        metadata["namespace"] = namespace
    vm: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": {"runStrategy": run_strategy(state, autostart).value, "template": {"spec": tmpl}},
    }
    fragment = _fragment(r, dev_el) if keep else None
    ask = HostAsk(
        settings=tuple(sorted(r.settings.items())),
        directories=tuple(dict.fromkeys(r.directories)),
        networks=tuple(dict.fromkeys(r.networks)),
        pod=r.pod,
        host_devices=tuple(r.host_devices),
        dedicated_cpus=tuple(r.dedicated),
        images=tuple(r.images),
    )
    reading = Reading(domain, name, namespace or "default", vm, ask, tuple(r.reasons), tuple(r.notes))
    if fragment is not None:
        reading = with_fragment(reading, fragment, prefixes_in(xml))
    return reading


_NS_DECL = re.compile(r'xmlns:([A-Za-z_][\w.-]*)="([^"]*)"')


def prefixes_in(xml: str) -> dict[str, str]:
    """``namespace URI -> prefix`` as a domain's XML declares them (libvirt keeps the
    prefix each application gave its metadata)."""
    out: dict[str, str] = {}
    for prefix, uri in _NS_DECL.findall(xml):
        out.setdefault(uri, prefix)
    return out


def _clean(el: ET.Element) -> ET.Element:
    """A live device or element without libvirt's bookkeeping (aliases, addresses)."""
    out = ET.Element(el.tag, dict(el.attrib))
    out.text = el.text.strip() if el.text and el.text.strip() else None
    for child in el:
        if child.tag not in ("alias", "address"):
            out.append(_clean(child))
    return out


def _fragment(r: _Read, dev_el: ET.Element | None) -> ET.Element | None:
    """The pass-through of what ``r`` kept, and the guest agent channel omitted when the
    live domain has none (the render always writes one, as KubeVirt does)."""
    frag = ET.Element("domain")
    for container, el in r.kept:
        node = frag
        for tag in container:
            found = node.find(tag)
            node = found if found is not None else ET.SubElement(node, tag)
        node.append(_clean(el))
    agent = dev_el is not None and any(c.get("name") == GUEST_AGENT for c in dev_el.findall("channel/target"))
    if not agent:
        devices = frag.find("devices")
        devices = devices if devices is not None else ET.SubElement(frag, "devices")
        channel = ET.SubElement(devices, "channel", {OMIT: "yes"})
        ET.SubElement(channel, "target", {"name": GUEST_AGENT})
    return frag if len(frag) else None


def with_fragment(reading: Reading, fragment: ET.Element | None, prefixes: Mapping[str, str]) -> Reading:
    """``reading`` with its VM's pass-through annotation set to ``fragment`` (None: none)."""
    tmpl = reading.vm["spec"]["template"]
    meta = tmpl.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    if fragment is None or not len(fragment):
        annotations.pop(PASSTHROUGH, None)
        if not annotations:
            del meta["annotations"]
        if not meta:
            del tmpl["metadata"]
        return replace(reading, fragment=None, prefixes=dict(prefixes))
    annotations[PASSTHROUGH] = fragment_text(fragment, prefixes)
    # The template's metadata goes before its spec, as KubeVirt's examples write it.
    reading.vm["spec"]["template"] = {"metadata": tmpl.pop("metadata"), **tmpl}
    return replace(reading, fragment=fragment, prefixes=dict(prefixes))


# -- identity, memory, CPU -------------------------------------------------------------


def _identity(dom: ET.Element, domain: str, spec_domain: dict[str, Any], r: _Read) -> None:
    firmware: dict[str, Any] = {}
    uuid_el = dom.find("uuid")
    given = parse_uuid(uuid_el.text) if uuid_el is not None else None
    if given and given != str(uuidlib.uuid5(KUBEVIRT_FIRMWARE_NS, domain)):
        firmware["uuid"] = given
    sysinfo = dom.find("sysinfo")
    if sysinfo is not None:
        entries = {e.get("name"): (e.text or "") for e in sysinfo.findall("system/entry")}
        serial = entries.get("serial")
        if sysinfo.get("type") == "smbios" and serial:
            firmware["serial"] = serial
    if firmware:
        spec_domain["firmware"] = firmware


def _memory(dom: ET.Element, spec_domain: dict[str, Any], r: _Read) -> None:
    mem = dom.find("memory")
    cur = dom.find("currentMemory")
    text = (mem.text or "").strip() if mem is not None else ""
    if mem is None or not text:
        r.refuse("<memory>", "the domain has no memory size")
        return
    total = memory_kib(text, mem.get("unit"))
    current = memory_kib(cur.text.strip(), cur.get("unit")) if cur is not None and cur.text else total
    memory: dict[str, Any] = {"guest": quantity_kib(current)}
    if total != current:
        memory["maxGuest"] = quantity_kib(total)
    backing = dom.find("memoryBacking")
    if backing is not None and backing.find("hugepages") is not None:
        pages = backing.findall("hugepages/page")
        hp: dict[str, Any] = {}
        if len(pages) == 1 and pages[0].get("size"):
            hp["pageSize"] = quantity_kib(memory_kib(pages[0].get("size", "0"), pages[0].get("unit")))
        elif pages:
            r.refuse("<memoryBacking><hugepages>", "more than one page size (KubeVirt takes one pageSize)")
        memory["hugepages"] = hp
    spec_domain["memory"] = memory


def _cpu(dom: ET.Element, spec_domain: dict[str, Any], r: _Read) -> None:
    vcpu_el = dom.find("vcpu")
    maximum = _int(vcpu_el.text if vcpu_el is not None else "1") or 1
    current = _int(vcpu_el.get("current")) if vcpu_el is not None else None
    current = current or maximum
    cpu_el = dom.find("cpu")
    cpu: dict[str, Any] = {}
    topo = cpu_el.find("topology") if cpu_el is not None else None
    if topo is not None:
        cores = _int(topo.get("cores")) or 1
        threads = _int(topo.get("threads")) or 1
        if (_int(topo.get("dies")) or 1) != 1 or (_int(topo.get("clusters")) or 1) != 1:
            r.refuse("<cpu><topology>", "dies or clusters (KubeVirt has sockets, cores and threads)")
    else:
        cores = threads = 1
    per_socket = cores * threads
    if maximum % per_socket or current % per_socket:
        r.refuse("<vcpu>", f"{current} of {maximum} vCPUs are no whole number of {per_socket}-vCPU sockets")
        per_socket = 1
        cores = threads = 1
    cpu["sockets"] = current // per_socket
    cpu["cores"] = cores
    cpu["threads"] = threads
    if maximum != current:
        cpu["maxSockets"] = maximum // per_socket
    if cpu_el is not None:
        mode = cpu_el.get("mode", "custom")
        if mode in ("host-model", "host-passthrough"):
            cpu["model"] = mode
        elif mode == "custom":
            model = cpu_el.find("model")
            if model is not None and model.text:
                cpu["model"] = model.text.strip()
        features = []
        for feat in cpu_el.findall("feature"):
            features.append({"name": feat.get("name", ""), "policy": feat.get("policy", "require")})
        if features:
            cpu["features"] = features
        if cpu_el.find("numa") is not None and not r.keep:  # kept: the proof adds the cells
            r.refuse("<cpu><numa>", "guest NUMA cells are written only by numa.guestMappingPassthrough")
    elif dom.findtext("os/type") is not None and _arch(dom) in ("x86_64", "i686"):
        cpu["model"] = "qemu64"  # QEMU's default x86 CPU, the one a domain without <cpu> has
    else:
        r.refuse(
            "<cpu>", "the domain names no CPU model; the reconciler always writes <cpu> (domain.cpu.model)"
        )
    _cputune(dom, cpu, r)
    spec_domain["cpu"] = cpu


def _arch(dom: ET.Element) -> str:
    el = dom.find("os/type")
    return el.get("arch", "") if el is not None else ""


def _cputune(dom: ET.Element, cpu: dict[str, Any], r: _Read) -> None:
    tune = dom.find("cputune")
    if tune is None:
        return
    pins = tune.findall("vcpupin")
    if pins:
        cpu["dedicatedCpuPlacement"] = True
        for pin in pins:
            cpus = pin.get("cpuset", "")
            if not cpus.isdigit():
                r.refuse(f"<cputune><vcpupin vcpu={pin.get('vcpu')!r}>", "not pinned to one CPU")
                continue
            r.dedicated.append(int(cpus))
    emulator = tune.find("emulatorpin")
    if emulator is not None:
        cpu["isolateEmulatorThread"] = True
        if emulator.get("cpuset", "").isdigit():
            r.dedicated.append(int(emulator.get("cpuset", "")))
    if tune.find("vcpusched") is not None:
        sched = tune.find("vcpusched")
        assert sched is not None
        vcpus = sched.get("vcpus")
        cpu["realtime"] = {"mask": vcpus} if vcpus else {}


# -- machine, firmware, features, clock ------------------------------------------------


def _os(dom: ET.Element, domain: str, tmpl: dict[str, Any], spec_domain: dict[str, Any], r: _Read) -> None:
    os_el = dom.find("os")
    if os_el is None:
        r.refuse("<os>", "the domain has no <os>")
        return
    type_el = os_el.find("type")
    if type_el is None or (type_el.text or "").strip() != "hvm":
        r.refuse("<os><type>", "only hvm guests")
        return
    arch = type_el.get("arch", "")
    if arch:
        if arch not in LIBVIRT_TO_ARCH:
            r.refuse("<os><type arch>", f"{arch} has no KubeVirt architecture")
        else:
            tmpl["architecture"] = LIBVIRT_TO_ARCH[arch]
    machine = type_el.get("machine")
    if machine:
        spec_domain["machine"] = {"type": machine}
    firmware: dict[str, Any] = spec_domain.setdefault("firmware", {})
    loader = os_el.find("loader")
    if os_el.get("firmware"):
        # Kept: <os firmware> (and its feature list) merged into the <os> render writes.
        auto = ET.Element("os", {"firmware": os_el.get("firmware", "")})
        auto.extend(os_el.findall("firmware"))
        r.keep_or_refuse(
            "<os firmware>", "firmware auto-selection (render names the OVMF files itself)", (), auto
        )
    if loader is not None:
        secure = loader.get("secure") == "yes"
        if loader.get("type") != "pflash" or loader.get("readonly") != "yes" or not loader.text:
            r.refuse("<os><loader>", "only a read-only pflash loader (OVMF) is EFI here")
        else:
            r.setting("secureBootCode" if secure else "efiCode", loader.text.strip())
        nvram = os_el.find("nvram")
        if nvram is None or not nvram.text or not nvram.get("template"):
            r.refuse("<os><nvram>", "EFI without an NVRAM file made from a template")
        else:
            path = nvram.text.strip()
            if posixpath.basename(path) != f"{domain}_VARS.fd":
                r.refuse("<os><nvram>", f"{path}: the NVRAM file is named <domain>_VARS.fd here")
            r.setting("nvramDirectory", posixpath.dirname(path))
            r.setting("secureBootVars" if secure else "efiVars", nvram.get("template", ""))
        # The NVRAM the guest has is kept: never discarded per cold boot.
        firmware["bootloader"] = {"efi": {"secureBoot": secure, "persistent": True}}
    bios = os_el.find("bios")
    if bios is not None and bios.get("useserial") == "yes":
        if loader is not None:
            r.refuse("<os><bios>", "a BIOS setting on an EFI guest")
        firmware["bootloader"] = {"bios": {"useSerial": True}}
    _kernel_boot(os_el, firmware, r)
    boots = os_el.findall("boot")
    if any(b.get("dev") != "hd" for b in boots) or len(boots) > 1:
        r.keep_or_refuse(
            f"<os><boot dev={boots[0].get('dev')!r}>",
            "a boot device list (KubeVirt orders boot per disk and interface, bootOrder)",
            ("os",),
            *boots,
        )
    if not firmware:
        del spec_domain["firmware"]


def _kernel_boot(os_el: ET.Element, firmware: dict[str, Any], r: _Read) -> None:
    kernel = (os_el.findtext("kernel") or "").strip()
    initrd = (os_el.findtext("initrd") or "").strip()
    cmdline = (os_el.findtext("cmdline") or "").strip()
    if not kernel and not initrd:
        return
    dirs = {posixpath.dirname(p) for p in (kernel, initrd) if p}
    if len(dirs) != 1:
        r.refuse("<os><kernel>", "kernel and initrd in different directories (kernelBoot takes one image)")
        return
    directory = dirs.pop()
    image = f"kernel-boot:{directory}"
    container: dict[str, Any] = {"image": image}
    if kernel:
        container["kernelPath"] = "/" + posixpath.basename(kernel)
    if initrd:
        container["initrdPath"] = "/" + posixpath.basename(initrd)
    boot: dict[str, Any] = {"container": container}
    if cmdline:
        boot["kernelArgs"] = cmdline
    firmware["kernelBoot"] = boot
    r.images.append((image, directory))
    r.directories.append(posixpath.dirname(directory) or "/")


def _features(dom: ET.Element, spec_domain: dict[str, Any], r: _Read) -> None:
    el = dom.find("features")
    features: dict[str, Any] = {}
    if el is None or el.find("acpi") is None:
        features["acpi"] = {"enabled": False}
    if el is not None:
        apic = el.find("apic")
        if apic is not None:
            node: dict[str, Any] = {}
            if apic.get("eoi"):
                node["endOfInterrupt"] = apic.get("eoi") == "on"
            features["apic"] = node
        smm = el.find("smm")
        if smm is not None:
            features["smm"] = {} if _on(smm) else {"enabled": False}
        pv = el.find("pvspinlock")
        if pv is not None:
            features["pvspinlock"] = {} if _on(pv) else {"enabled": False}
        hidden = el.find("kvm/hidden")
        if hidden is not None:
            features["kvm"] = {"hidden": bool(_on(hidden))}
        hv = el.find("hyperv")
        if hv is not None:
            if hv.get("mode") == "passthrough":
                features["hypervPassthrough"] = {}
            else:
                features["hyperv"] = _hyperv(hv, r)
    if features:
        spec_domain["features"] = features


def _hyperv(hv: ET.Element, r: _Read) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for child in hv:
        key = HYPERV_FIELDS.get(child.tag)
        if key is None:
            if not r.keep:  # kept: the proof adds it to the rendered <hyperv>
                r.refuse(f"<hyperv><{child.tag}>", "a Hyper-V enlightenment KubeVirt does not name")
            continue
        node: dict[str, Any] = {} if _on(child) else {"enabled": False}
        if key == "spinlocks" and child.get("retries"):
            node["spinlocks"] = _int(child.get("retries"))
        elif key == "vendorid" and child.get("value"):
            node["vendorid"] = child.get("value")
        elif key in ("synictimer", "tlbflush"):
            for sub_key in ("direct", "extended"):
                sub_el = child.find(sub_key)
                if sub_el is not None:
                    node[sub_key] = {} if _on(sub_el) else {"enabled": False}
        out[key] = node
    return out


def _clock(dom: ET.Element, spec_domain: dict[str, Any], r: _Read) -> None:
    el = dom.find("clock")
    if el is None:
        return
    clock: dict[str, Any] = {}
    offset = el.get("offset", "utc")
    if offset == "utc":
        adjustment = el.get("adjustment")
        if adjustment and adjustment != "reset":
            clock["utc"] = {"offsetSeconds": _int(adjustment)}
        else:
            clock["utc"] = {}
    elif offset == "variable" and el.get("basis", "utc") == "utc" and el.get("adjustment"):
        clock["utc"] = {"offsetSeconds": _int(el.get("adjustment"))}
    elif offset == "timezone" and el.get("timezone"):
        clock["timezone"] = el.get("timezone")
    else:
        # KubeVirt has no clock in the host's local time: the whole <clock> is kept.
        r.keep_or_refuse(
            f"<clock offset={offset!r}>", "KubeVirt's clock is utc (with an offset) or a timezone", (), el
        )
        return
    timers: dict[str, Any] = {}
    for t in el.findall("timer"):
        key = TIMERS.get(t.get("name", ""))
        if key is None:
            if not r.keep:  # kept: the proof adds it to the rendered clock
                r.refuse(f"<clock><timer name={t.get('name')!r}>", "a timer KubeVirt does not name")
            continue
        node: dict[str, Any] = {}
        if t.get("tickpolicy"):
            node["tickPolicy"] = t.get("tickpolicy")
        if t.get("track"):
            node["track"] = t.get("track")
        if t.get("present") == "no":
            node["present"] = False
        timers[key] = node
    if timers:
        clock["timer"] = timers
    spec_domain["clock"] = clock


# -- disks -----------------------------------------------------------------------------


def _disks(
    dev_el: ET.Element, devices: dict[str, Any], volumes: list[dict[str, Any]], namespace: str, r: _Read
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
            r.refuse(where, f"bus {bus!r} (the reconciler's disks are on virtio, sata, scsi or usb)")
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
            disk["bootOrder"] = _int(boot.get("order"))
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
                    "logical": _int(blockio.get("logical_block_size")),
                    "physical": _int(blockio.get("physical_block_size")),
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
    r: _Read,
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


def _interfaces(
    dev_el: ET.Element, devices: dict[str, Any], networks: list[dict[str, Any]], r: _Read
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
            iface["bootOrder"] = _int(boot.get("order"))
        link = el.find("link")
        if link is not None and link.get("state") == "down":
            iface["state"] = "down"
        acpi = el.find("acpi")
        if acpi is not None and acpi.get("index"):
            iface["acpiIndex"] = _int(acpi.get("index"))
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


def _devices(dev_el: ET.Element, devices: dict[str, Any], r: _Read) -> None:
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


def _host_devices(dev_el: ET.Element, devices: dict[str, Any], r: _Read) -> None:
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
