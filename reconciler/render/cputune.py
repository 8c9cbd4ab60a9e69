"""Dedicated CPUs placed on one host: which of its ``dedicatedCpus`` each VM pins.

Input: the rendered domains of one revision for one host (those with a ``CpuNeed``),
the host config's dedicated set, the CPUs each domain already holds on the host (read
back from its live definition's ``<cputune>``, the record of a placement), and the
host's NUMA cells when known. Output: each VM's CPUs, and (``pin``, called by
``render.finish`` on the domain's element tree before it is serialized) its
``<cputune>`` (a ``vcpupin`` per vCPU, ``emulatorpin`` and ``iothreadpin`` as KubeVirt
pins them, ``vcpusched`` FIFO for realtime vCPUs), ``<numatune>`` and guest NUMA cells
for NUMA passthrough, KVM's dedicated hint, the PMU off for realtime; or, for a VM that
does not fit, an error naming the VMs that hold the set. Never parses or serializes a
whole domain: what a live domain pins is read from its ``<cputune>`` alone. Pure and deterministic
(``render.allocate``, shared with mediated devices): a VM keeps the CPUs it holds while
they stay in the set and no other VM kept them; the others take the lowest free CPUs
(within one NUMA cell when one has room), by name. Two VMs never share a CPU.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.model.units import memory_kib
from reconciler.records import dataclass
from reconciler.render.allocate import allocate
from reconciler.render.xml import sub
from reconciler.settings.cpuset import format_cpuset

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.model import CpuNeed

_SINGLE = re.compile(r"^\d+$")


@dataclass(frozen=True, slots=True)
class Placement:
    """The outcome for one host: CPUs per domain name, and the domains that did not fit."""

    cpus: Mapping[str, tuple[int, ...]]
    errors: Mapping[str, str]


def held_cpus(xml: str) -> tuple[int, ...]:
    """The CPUs a domain definition pins: its vCPUs' in order, then the emulator's
    (``()`` when it pins none, or pins anything but single CPUs). Only the
    ``<cputune>`` element is parsed, never the whole domain."""
    start = xml.find("<cputune>")
    end = xml.find("</cputune>", start)
    if start < 0 or end < 0:
        return ()
    try:
        tune = ET.fromstring(xml[start : end + len("</cputune>")])
    except ET.ParseError:
        return ()
    pins = sorted(tune.findall("vcpupin"), key=lambda p: int(p.get("vcpu", "0")))
    sets = [p.get("cpuset", "") for p in pins]
    emulator = tune.find("emulatorpin")
    if emulator is not None:
        sets.append(emulator.get("cpuset", ""))
    if not sets or not all(_SINGLE.match(s) for s in sets):
        return ()
    return tuple(int(s) for s in sets)


def place(
    needs: Sequence[tuple[str, CpuNeed]],
    dedicated: Sequence[int],
    held: Mapping[str, tuple[int, ...]],
    cells: Sequence[tuple[int, tuple[int, ...]]] = (),
    host: str = "",
) -> Placement:
    """Give every VM of ``needs`` its CPUs from ``dedicated`` (see the module doc, and
    ``render.allocate``). ``held``: the CPUs each domain of the host pins now, by domain
    name; those of domains not in ``needs`` stay theirs."""
    pool = sorted(set(dedicated))
    got = allocate(
        [(name, need.count) for name, need in needs], pool, held, lambda free, n: _fit(free, n, cells)
    )
    counts = {name: need.count for name, need in needs}
    errors: dict[str, str] = {}
    for name, short in got.short.items():
        where = f"host {host}" if host else "the host"
        holders = short.held_by()
        errors[name] = (
            f"dedicatedCpuPlacement needs {counts[name]} of {where}'s dedicated CPUs "
            f"({format_cpuset(pool)}); {short.free} are free"
            + (f", the others held by {holders}" if holders else "")
        )
    return Placement(got.items, errors)


def _fit(free: list[int], count: int, cells: Sequence[tuple[int, tuple[int, ...]]]) -> tuple[int, ...]:
    for _cell, cpus in cells:
        here = [c for c in free if c in cpus]
        if len(here) >= count:
            return tuple(here[:count])
    return tuple(free[:count])


def pin(
    domain: ET.Element,
    need: CpuNeed,
    cpus: tuple[int, ...],
    cells: Sequence[tuple[int, tuple[int, ...]]] = (),
) -> None:
    """Pin the domain's CPUs in its element tree, in place (see the module doc)."""
    vcpu_cpus = cpus[: need.vcpus]
    emulator = cpus[need.vcpus] if need.emulator else None
    old = domain.find("cputune")
    if old is not None:
        domain.remove(old)
    tune = sub(domain, "cputune")
    for vcpu, cpu in enumerate(vcpu_cpus):
        sub(tune, "vcpupin", vcpu=str(vcpu), cpuset=str(cpu))
    if emulator is not None:
        sub(tune, "emulatorpin", cpuset=str(emulator))
    iothreads = int(domain.findtext("iothreads") or 0)
    for thread, cpuset in _iothread_pins(iothreads, vcpu_cpus, emulator):
        sub(tune, "iothreadpin", iothread=str(thread), cpuset=cpuset)
    if need.realtime:
        sub(tune, "vcpusched", vcpus=format_cpuset(need.realtime), scheduler="fifo", priority="1")
    features = domain.find("features")
    if features is None:
        features = sub(domain, "features")
    if domain.get("type") == "kvm":
        kvm = features.find("kvm")
        if kvm is None:
            kvm = sub(features, "kvm")
        if kvm.find("hint-dedicated") is None:
            sub(kvm, "hint-dedicated", state="on")
    if need.realtime and features.find("pmu") is None:
        sub(features, "pmu", state="off")
    if need.numa and cells:
        _numa(domain, vcpu_cpus, cells)


def _iothread_pins(count: int, cpus: tuple[int, ...], emulator: int | None) -> list[tuple[int, str]]:
    """KubeVirt's IOThread pinning: on the emulator's CPU when it has one; else one CPU
    each when there are as many vCPUs as threads or fewer; else balanced slices."""
    if count == 0 or not cpus:
        return []
    if emulator is not None:
        return [(1, str(emulator))]
    n = len(cpus)
    if count >= n:
        return [(t, str(cpus[t % n])) for t in range(1, count + 1)]
    out = []
    start = 0
    for t in range(1, count + 1):
        size = n // count + (1 if t <= n % count else 0)
        out.append((t, ",".join(str(c) for c in cpus[start : start + size])))
        start += size
    return out


def _numa(domain: ET.Element, cpus: tuple[int, ...], cells: Sequence[tuple[int, tuple[int, ...]]]) -> None:
    """Guest NUMA cells mirroring the host cells the vCPUs are pinned in, memory split
    evenly and bound strictly (KubeVirt's guestMappingPassthrough)."""
    involved = [(cell, [v for v, c in enumerate(cpus) if c in host_cpus]) for cell, host_cpus in cells]
    involved = [(cell, vcpus) for cell, vcpus in involved if vcpus]
    if not involved:
        return
    memory = domain.find("memory")
    total = memory_kib(memory.text or 0, memory.get("unit")) if memory is not None else 0
    per_cell = total // len(involved)
    cpu = domain.find("cpu")
    if cpu is None:
        cpu = sub(domain, "cpu")
    old = cpu.find("numa")
    if old is not None:
        cpu.remove(old)
    numa = sub(cpu, "numa")
    numatune = sub(domain, "numatune")
    sub(numatune, "memory", mode="strict", nodeset=",".join(str(cell) for cell, _ in involved))
    for guest, (cell, vcpus) in enumerate(involved):
        sub(numa, "cell", id=str(guest), cpus=format_cpuset(vcpus), memory=str(per_cell), unit="KiB")
        sub(numatune, "memnode", cellid=str(guest), mode="strict", nodeset=str(cell))
