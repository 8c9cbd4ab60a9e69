"""Apply an instancetype spec to a VMI spec and template metadata (kubevirt-semantics §b).

Input: the instancetype ``spec`` (v1beta1 field names; alpha versions parse the
same), the preference spec (for the CPU topology) and the template spec and
metadata, which are edited in place (the caller passes its own copy). Output:
the conflict paths, KubeVirt's order; when any exist the caller rejects the VM.
Never reads anything else; never touches the instancetype.
"""

from __future__ import annotations

import struct
from types import MappingProxyType
from typing import TYPE_CHECKING

from reconciler.expand.topology import guest_topology
from reconciler.expand.tree import clone, dig, empty, ensure
from reconciler.model import units

if TYPE_CHECKING:
    from reconciler.model import Obj

BASE = "spec.template.spec"


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def overcommit_request(guest: object, percent: int) -> str:
    """``requests.memory`` for ``overcommitPercent``: KubeVirt's float32 arithmetic, guest's format."""
    amount, fmt = units.parse_quantity(guest)
    guest_bytes = int(amount) if amount.denominator == 1 else -((-amount.numerator) // amount.denominator)
    factor = _f32(1.0 - _f32(_f32(float(percent)) / _f32(100.0)))
    requested = int(_f32(_f32(float(guest_bytes)) * factor))
    return units.canonical(requested, fmt)


def _apply_cpu(it: Obj, pref: Obj | None, spec: Obj) -> list[str]:
    domain = ensure(spec, "domain")
    cpu = ensure(domain, "cpu")
    it_cpu = it.get("cpu") or {}
    conflicts: list[str] = []
    for section in ("requests", "limits"):
        if isinstance(dig(domain, "resources", section), dict) and "cpu" in domain["resources"][section]:
            conflicts.append(f"{BASE}.domain.resources.{section}.cpu")
    for field in ("sockets", "cores", "threads"):
        if not empty(cpu.get(field)):
            conflicts.append(f"{BASE}.domain.cpu.{field}")
    if not empty(cpu.get("model")) and it_cpu.get("model") is not None:
        conflicts.append(f"{BASE}.domain.cpu.model")
    if cpu.get("dedicatedCpuPlacement") is True and it_cpu.get("dedicatedCPUPlacement") is not None:
        conflicts.append(f"{BASE}.domain.cpu.dedicatedCPUPlacement")
    if cpu.get("isolateEmulatorThread") is True and it_cpu.get("isolateEmulatorThread") is not None:
        conflicts.append(f"{BASE}.domain.cpu.isolateEmulatorThread")
    for field in ("numa", "realtime"):
        if cpu.get(field) is not None and it_cpu.get(field) is not None:
            conflicts.append(f"{BASE}.domain.cpu.{field}")
    if conflicts:
        return conflicts
    # Go writes "" / false here, which its JSON omits: only a real value is written.
    if it_cpu.get("model"):
        cpu["model"] = it_cpu["model"]
    if it_cpu.get("dedicatedCPUPlacement"):
        cpu["dedicatedCpuPlacement"] = True
    if it_cpu.get("isolateEmulatorThread"):
        cpu["isolateEmulatorThread"] = True
    for field in ("numa", "realtime"):
        if it_cpu.get(field) is not None:
            cpu[field] = clone(it_cpu[field])
    if it_cpu.get("maxSockets") is not None:
        cpu["maxSockets"] = it_cpu["maxSockets"]
    sockets, cores, threads = guest_topology(int(it_cpu.get("guest") or 0), pref)
    cpu["sockets"], cpu["cores"], cpu["threads"] = sockets, cores, threads
    return []


def _apply_memory(it: Obj, spec: Obj) -> list[str]:
    domain = ensure(spec, "domain")
    memory = ensure(domain, "memory")
    it_mem = it.get("memory") or {}
    if memory.get("guest") is not None:
        return [f"{BASE}.domain.memory.guest"]
    for field in ("hugepages", "maxGuest"):
        if memory.get(field) is not None and it_mem.get(field) is not None:
            return [f"{BASE}.domain.memory.{field}"]
    for section in ("requests", "limits"):
        if isinstance(dig(domain, "resources", section), dict) and "memory" in domain["resources"][section]:
            return [f"{BASE}.domain.resources.{section}.memory"]
    guest = it_mem.get("guest")
    if guest is not None:
        memory["guest"] = clone(guest)
    percent = int(it_mem.get("overcommitPercent") or 0)
    if percent > 0 and guest is not None:
        resources = ensure(domain, "resources")
        ensure(resources, "requests")["memory"] = overcommit_request(guest, percent)
    for field in ("hugepages", "maxGuest"):
        if it_mem.get(field) is not None:
            memory[field] = clone(it_mem[field])
    return []


def _apply_annotations(it: Obj, meta: Obj) -> list[str]:
    wanted = it.get("annotations") or {}
    if not wanted:
        return []
    annotations = ensure(meta, "annotations")
    conflicts = []
    for key, val in wanted.items():
        if key in annotations:
            if annotations[key] != val:
                conflicts.append(f"annotations.{key}")
            continue
        annotations[key] = val
    return conflicts


def apply_instancetype(it: Obj, pref: Obj | None, spec: Obj, meta: Obj) -> list[str]:
    """Apply ``it`` to ``spec``/``meta`` in place; return the conflicting field paths."""
    conflicts: list[str] = []
    if it.get("nodeSelector") is not None:
        if spec.get("nodeSelector") is not None:
            conflicts.append(f"{BASE}.nodeSelector")
        else:
            spec["nodeSelector"] = clone(it["nodeSelector"])
    if not empty(it.get("schedulerName")):
        if not empty(spec.get("schedulerName")):
            conflicts.append(f"{BASE}.schedulerName")
        else:
            spec["schedulerName"] = it["schedulerName"]
    conflicts += _apply_cpu(it, pref, spec)
    conflicts += _apply_memory(it, spec)
    domain = ensure(spec, "domain")
    it_io = it.get("ioThreads")
    if isinstance(it_io, dict) and it_io.get("supplementalPoolThreadCount") is not None:
        if dig(domain, "ioThreads", "supplementalPoolThreadCount") is not None:
            conflicts.append(f"{BASE}.domain.ioThreads.supplementalPoolThreadCount")
        else:
            ensure(domain, "ioThreads")["supplementalPoolThreadCount"] = it_io["supplementalPoolThreadCount"]
    if it.get("ioThreadsPolicy") is not None:
        if domain.get("ioThreadsPolicy") is not None:
            conflicts.append(f"{BASE}.domain.ioThreadsPolicy")
        else:
            domain["ioThreadsPolicy"] = it["ioThreadsPolicy"]
    if it.get("launchSecurity") is not None:
        if domain.get("launchSecurity") is not None:
            conflicts.append(f"{BASE}.domain.launchSecurity")
        else:
            domain["launchSecurity"] = clone(it["launchSecurity"])
    for field in ("gpus", "hostDevices"):
        if it.get(field):
            devices = ensure(domain, "devices")
            if devices.get(field):
                conflicts.append(f"{BASE}.domain.devices.{field}")
            else:
                devices[field] = clone(it[field])
    conflicts += _apply_annotations(it, meta)
    return conflicts


# Instancetype fields a libvirt host cannot honour (scheduling / device-plugin / confidential
# computing); they are carried into the expanded spec and reported.
UNHONOURED = MappingProxyType(
    {
        "nodeSelector": "node selection is a scheduler concept; only kubernetes.io/hostname picks a host",
        "schedulerName": "there is no scheduler on a libvirt host",
        "launchSecurity": "launch security (SEV/SNP/TDX) is not configured by this reconciler",
    }
)


def unhonoured_fields(it: Obj) -> list[tuple[str, str]]:
    out = []
    for field, why in UNHONOURED.items():
        val = it.get(field)
        if field == "nodeSelector" and isinstance(val, dict) and not set(val) - {"kubernetes.io/hostname"}:
            continue
        if val is None or val in ("", [], {}):
            continue
        out.append((field, why))
    return out
