"""What the libvirt host offers, as far as rendering needs to know.

Input: the XML of ``virConnect.getCapabilities()`` and optionally of
``getDomainCapabilities()`` (passed in by the hypervisor module). Output: a frozen
``HostCaps``. Pure: parsing only; the domain type is read from the capabilities
(``kvm`` where the host offers it, else ``qemu``), never guessed.
``HostCaps.default()`` serves hostless use (render, diff, PR CI).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import MappingProxyType

from reconciler.errors import ReconcilerError
from reconciler.records import dataclass

DEFAULT_EMULATOR = "/usr/bin/qemu-system-x86_64"
DEFAULT_OVMF = (
    "/usr/share/OVMF/OVMF_CODE_4M.fd",
    "/usr/share/OVMF/OVMF_VARS_4M.fd",
    "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd",
    "/usr/share/OVMF/OVMF_VARS_4M.ms.fd",
)

# KubeVirt architecture names -> libvirt's.
ARCH_TO_LIBVIRT = MappingProxyType(
    {"amd64": "x86_64", "arm64": "aarch64", "s390x": "s390x", "ppc64le": "ppc64le"}
)


class CapsError(ReconcilerError):
    """The capabilities XML could not be understood."""


@dataclass(frozen=True, slots=True)
class HostCaps:
    domain_type: str = "qemu"  # "kvm" | "qemu"
    emulator: str = DEFAULT_EMULATOR
    arch: str = "x86_64"
    machines: tuple[str, ...] = ()  # names and canonical names; () = unknown, not checked
    max_cpus: tuple[tuple[str, int], ...] = ()  # (machine name, maxCpus) where the host says
    ovmf_code: str = DEFAULT_OVMF[0]
    ovmf_vars: str = DEFAULT_OVMF[1]
    ovmf_secure_code: str = DEFAULT_OVMF[2]
    ovmf_secure_vars: str = DEFAULT_OVMF[3]
    # Active libvirt networks (None: not known, as with no host) and whether libvirt
    # offers passt: where the pod network goes when the host config does not say.
    networks: tuple[str, ...] | None = None
    passt: bool = False
    # The host's NUMA cells and their CPU ids (() = not known): dedicated CPUs are
    # placed within one cell when one has room, and NUMA passthrough mirrors them.
    numa_cells: tuple[tuple[int, tuple[int, ...]], ...] = ()

    @classmethod
    def default(cls) -> HostCaps:
        return cls()


def _vars_for(code: str, secure: bool) -> str:
    v = code.replace("CODE", "VARS")
    return v.replace(".secboot", ".ms") if secure else v


def parse_host_caps(caps_xml: str, domcaps_xml: str | None = None) -> HostCaps:
    """Read domain type, emulator, machine types and OVMF paths from the host's XML."""
    try:
        caps = ET.fromstring(caps_xml)
    except ET.ParseError as err:
        raise CapsError(f"host capabilities: not XML: {err}") from err
    host_arch = (caps.findtext("host/cpu/arch") or "x86_64").strip()
    arch_el = _hvm_guest_arch(caps, host_arch)
    types = {d.get("type") for d in arch_el.findall("domain")}
    if not types & {"kvm", "qemu"}:
        # libvirt's test driver (type "test", a fake i686 emulator): no real
        # hypervisor to describe, so render as for a default emulated host.
        return HostCaps.default()
    domain_type = "kvm" if "kvm" in types else "qemu"
    emulator = (arch_el.findtext("emulator") or "").strip()
    for d in arch_el.findall("domain"):
        if d.get("type") == domain_type and d.findtext("emulator"):
            emulator = (d.findtext("emulator") or "").strip()
    machines, max_cpus = _machines(arch_el)
    ovmf = list(DEFAULT_OVMF)
    if domcaps_xml:
        emulator = _read_domcaps(domcaps_xml, ovmf, emulator)
    return HostCaps(
        domain_type=domain_type,
        emulator=emulator or DEFAULT_EMULATOR,
        arch=host_arch,
        machines=tuple(sorted(set(machines))),
        max_cpus=tuple(sorted(max_cpus.items())),
        ovmf_code=ovmf[0],
        ovmf_vars=ovmf[1],
        ovmf_secure_code=ovmf[2],
        ovmf_secure_vars=ovmf[3],
        numa_cells=_numa_cells(caps),
    )


def _hvm_guest_arch(caps: ET.Element, host_arch: str) -> ET.Element:
    """The ``<arch>`` of the capabilities' hvm guest for the host's architecture."""
    for g in caps.findall("guest"):
        arch = g.find("arch")
        if (
            (g.findtext("os_type") or "").strip() == "hvm"
            and arch is not None
            and arch.get("name") == host_arch
        ):
            return arch
    raise CapsError(f"host capabilities: no hvm guest for the host architecture {host_arch}")


def _machines(arch_el: ET.Element) -> tuple[list[str], dict[str, int]]:
    """The machine types the guest offers (names and canonical names) and the vCPUs each takes at most."""
    machines: list[str] = []
    max_cpus: dict[str, int] = {}
    for m in arch_el.findall("machine"):
        names = [n for n in ((m.text or "").strip(), str(m.get("canonical") or "")) if n]
        machines.extend(names)
        if (m.get("maxCpus") or "").isdigit():
            max_cpus.update(dict.fromkeys(names, int(str(m.get("maxCpus")))))
    return machines, max_cpus


def _numa_cells(caps: ET.Element) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """The host's NUMA cells and the CPUs of each (cells or CPUs without a numeric id left out)."""
    return tuple(
        (int(cell.get("id", "0")), tuple(sorted(int(c.get("id", "0")) for c in cell.findall("cpus/cpu"))))
        for cell in caps.findall("host/topology/cells/cell")
        if (cell.get("id") or "").isdigit()
        and all((c.get("id") or "").isdigit() for c in cell.findall("cpus/cpu"))
    )


def _read_domcaps(domcaps_xml: str, ovmf: list[str], emulator: str) -> str:
    """The domain capabilities' OVMF loaders put into ``ovmf`` (plain code and vars,
    secure code and vars); the emulator: ``emulator``, else the one they name."""
    try:
        dc = ET.fromstring(domcaps_xml)
    except ET.ParseError as err:
        raise CapsError(f"domain capabilities: not XML: {err}") from err
    path = (dc.findtext("path") or "").strip()
    if path and not emulator:
        emulator = path
    values = [(v.text or "").strip() for v in dc.findall("os/loader/value")]
    plain = [v for v in values if "CODE" in v and not any(t in v for t in (".secboot", ".ms.", "snakeoil"))]
    secure = [v for v in values if ".secboot" in v]
    if plain:
        ovmf[0], ovmf[1] = plain[0], _vars_for(plain[0], secure=False)
    if secure:
        ovmf[2], ovmf[3] = secure[0], _vars_for(secure[0], secure=True)
    return emulator
