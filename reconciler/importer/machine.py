"""The machine of a live domain read back: identity, memory, CPU, OS and firmware,
features, clock.

Input: the parsed ``<domain>`` of ``importer.domain.read_domain`` and the read's state
(``importer.reading.DomainRead``). Output: the ``spec.template.spec.domain`` fields of
these elements (``firmware``, ``memory``, ``cpu``, ``machine``, ``features``,
``clock``) and the template's ``architecture``, with what they ask of the host and the
reasons they cannot be imported recorded in the read's state. For each element the field
is the one ``render/`` writes it from (docs/mapping.md). Pure: no libvirt, no files;
never guesses a value the XML does not hold.
"""

from __future__ import annotations

import posixpath
import uuid as uuidlib
import xml.etree.ElementTree as ET
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.importer.reading import int_or_none, quantity_kib, turned_on
from reconciler.model.identifiers import parse_uuid
from reconciler.model.units import memory_kib
from reconciler.render.caps import ARCH_TO_LIBVIRT
from reconciler.render.features import HYPERV
from reconciler.render.identity import KUBEVIRT_FIRMWARE_NS
from reconciler.render.testdriver import TEST_ARCH, TEST_DOMAIN_TYPE

if TYPE_CHECKING:
    from reconciler.importer.reading import DomainRead

LIBVIRT_TO_ARCH = MappingProxyType({v: k for k, v in ARCH_TO_LIBVIRT.items()})
TIMERS = MappingProxyType(
    {"rtc": "rtc", "pit": "pit", "kvmclock": "kvm", "hpet": "hpet", "hypervclock": "hyperv"}
)
HYPERV_FIELDS = MappingProxyType({tag: key for key, tag in HYPERV})


# -- identity, memory, CPU -------------------------------------------------------------


def read_identity(dom: ET.Element, domain: str, spec_domain: dict[str, Any], r: DomainRead) -> None:
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


def read_memory(dom: ET.Element, spec_domain: dict[str, Any], r: DomainRead) -> None:
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


def read_cpu(dom: ET.Element, spec_domain: dict[str, Any], r: DomainRead) -> None:
    vcpu_el = dom.find("vcpu")
    maximum = int_or_none(vcpu_el.text if vcpu_el is not None else "1") or 1
    current = int_or_none(vcpu_el.get("current")) if vcpu_el is not None else None
    current = current or maximum
    cpu_el = dom.find("cpu")
    cpu: dict[str, Any] = {}
    topo = cpu_el.find("topology") if cpu_el is not None else None
    if topo is not None:
        cores = int_or_none(topo.get("cores")) or 1
        threads = int_or_none(topo.get("threads")) or 1
        if (int_or_none(topo.get("dies")) or 1) != 1 or (int_or_none(topo.get("clusters")) or 1) != 1:
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


def _cputune(dom: ET.Element, cpu: dict[str, Any], r: DomainRead) -> None:
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


def read_os(
    dom: ET.Element, domain: str, tmpl: dict[str, Any], spec_domain: dict[str, Any], r: DomainRead
) -> None:
    os_el = dom.find("os")
    if os_el is None:
        r.refuse("<os>", "the domain has no <os>")
        return
    type_el = os_el.find("type")
    if type_el is None or (type_el.text or "").strip() != "hvm":
        r.refuse("<os><type>", "only hvm guests")
        return
    arch = type_el.get("arch", "")
    if arch == TEST_ARCH and dom.get("type") == TEST_DOMAIN_TYPE:
        pass  # the test driver's one architecture: what a host of domainType test renders
    elif arch:
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
        _efi(os_el, loader, domain, firmware, r)
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


def _efi(os_el: ET.Element, loader: ET.Element, domain: str, firmware: dict[str, Any], r: DomainRead) -> None:
    """An OVMF loader and its NVRAM: the host's firmware settings, the VM's EFI bootloader."""
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


def _kernel_boot(os_el: ET.Element, firmware: dict[str, Any], r: DomainRead) -> None:
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


def read_features(dom: ET.Element, spec_domain: dict[str, Any], r: DomainRead) -> None:
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
            features["smm"] = {} if turned_on(smm) else {"enabled": False}
        pv = el.find("pvspinlock")
        if pv is not None:
            features["pvspinlock"] = {} if turned_on(pv) else {"enabled": False}
        hidden = el.find("kvm/hidden")
        if hidden is not None:
            features["kvm"] = {"hidden": bool(turned_on(hidden))}
        hv = el.find("hyperv")
        if hv is not None:
            if hv.get("mode") == "passthrough":
                features["hypervPassthrough"] = {}
            else:
                features["hyperv"] = _hyperv(hv, r)
    if features:
        spec_domain["features"] = features


def _hyperv(hv: ET.Element, r: DomainRead) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for child in hv:
        key = HYPERV_FIELDS.get(child.tag)
        if key is None:
            if not r.keep:  # kept: the proof adds it to the rendered <hyperv>
                r.refuse(f"<hyperv><{child.tag}>", "a Hyper-V enlightenment KubeVirt does not name")
            continue
        node: dict[str, Any] = {} if turned_on(child) else {"enabled": False}
        if key == "spinlocks" and child.get("retries"):
            node["spinlocks"] = int_or_none(child.get("retries"))
        elif key == "vendorid" and child.get("value"):
            node["vendorid"] = child.get("value")
        elif key in ("synictimer", "tlbflush"):
            for sub_key in ("direct", "extended"):
                sub_el = child.find(sub_key)
                if sub_el is not None:
                    node[sub_key] = {} if turned_on(sub_el) else {"enabled": False}
        out[key] = node
    return out


def read_clock(dom: ET.Element, spec_domain: dict[str, Any], r: DomainRead) -> None:
    el = dom.find("clock")
    if el is None:
        return
    clock: dict[str, Any] = {}
    offset = el.get("offset", "utc")
    if offset == "utc":
        adjustment = el.get("adjustment")
        if adjustment and adjustment != "reset":
            clock["utc"] = {"offsetSeconds": int_or_none(adjustment)}
        else:
            clock["utc"] = {}
    elif offset == "variable" and el.get("basis", "utc") == "utc" and el.get("adjustment"):
        clock["utc"] = {"offsetSeconds": int_or_none(el.get("adjustment"))}
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
