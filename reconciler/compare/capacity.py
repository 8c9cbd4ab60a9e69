"""What a running domain can take without a restart, and the live changes it cannot.

Input: the running domain's tree and a ``RunningDiff`` (``compare.changes``). Output: its
``Capacity`` (spare hotplug slots, unpluggable vCPUs, balloon, devices on sealed root
ports) and the diff with what exceeds it moved to restart-class, each with a note
saying why: a hot-added PCI device needs a spare hotplug slot (an empty
``pcie-root-port`` on q35, a free slot of the root bus on i440fx; the note says how
many remain); a device on a root port KubeVirt sealed (``hotplug='off'``,
``render.ports``) cannot be unplugged; a vCPU decrease needs vCPUs the guest can
unplug (hot-plugged ones, ``<vcpus>``); a balloon change needs a balloon. Pure.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.compare.changes import RunningDiff
from reconciler.compare.essence import device_index, device_kind
from reconciler.model.changes import ChangeClass, FieldChange, LiveOp, LiveOpKind
from reconciler.model.devices import KINDS
from reconciler.model.reasons import Note, Noted
from reconciler.records import dataclass
from reconciler.render.ports import PORT_MODEL, sealed_ports

if TYPE_CHECKING:
    from reconciler.compare.essence import Essence


@dataclass(frozen=True, slots=True)
class Capacity:
    """What a running domain can take without a restart, read from its definition."""

    spare_slots: int | None = None  # empty hotplug slots for PCI devices (None: unknown)
    unpluggable_vcpus: int = 0  # online vCPUs the guest can unplug (hot-plugged ones)
    balloon: bool = True  # a balloon device: the memory target can change live
    sealed: frozenset[str] = frozenset()  # devices on root ports with hotplug off (``render.ports``)


def _needs_slot(ess: Essence, root: str) -> bool:
    """Whether hot-adding the device at ``root`` takes a PCI slot of its own (its kind's
    ``Pci.hot_slot``: disks on other buses than virtio plug into an existing controller)."""
    kind = KINDS.get(device_kind(root))
    hot_slot = kind.pci.hot_slot if kind is not None else None
    return hot_slot is not None and hot_slot(_device_element(ess, root), 0)


def _device_element(ess: Essence, root: str) -> ET.Element:
    """The device at ``root`` with its attributes and those of its direct children, from
    an essence (what a kind's ``Pci`` reads)."""
    el = ET.Element(device_kind(root))
    for path, value in ess.items():
        if path.startswith(f"{root}@"):
            el.set(path[len(root) + 1 :], value)
        elif path.startswith(f"{root}/"):
            child, _, attr = path[len(root) + 1 :].partition("@")
            if attr and "/" not in child and "[" not in child:
                node = el.find(child)
                (node if node is not None else ET.SubElement(el, child)).set(attr, value)
    return el


def capacity(running: ET.Element) -> Capacity:
    """The running domain's spare hotplug slots, unpluggable vCPUs and balloon."""
    machine = running.find("os/type")
    machine_name = machine.get("machine", "") if machine is not None else ""
    devices = running.find("devices")
    spare: int | None = None
    sealed: frozenset[str] = frozenset()
    if devices is not None:
        addresses = [a for a in devices.iter("address") if a.get("type") == "pci"]
        used_buses = {int(a.get("bus") or "0", 0) for a in addresses}
        pci = [c for c in devices.findall("controller") if c.get("type") == "pci"]
        if "q35" in machine_name and pci:  # libvirt lists its PCI controllers (none: not read from libvirt)
            off = sealed_ports(running)
            ports = [int(c.get("index") or "0") for c in pci if c.get("model") == PORT_MODEL]
            spare = sum(1 for i in ports if i not in used_buses and i not in off)
        elif addresses:  # i440fx: free slots of the root bus (slot 0 is the host bridge)
            slots = {int(a.get("slot") or "0", 0) for a in addresses if int(a.get("bus") or "0", 0) == 0}
            spare = max(0, 31 - len(slots - {0}))
        sealed = _on_sealed_ports(running, devices)
    vcpus = running.find("vcpus")
    unpluggable = (
        sum(1 for v in vcpus.findall("vcpu") if v.get("enabled") == "yes" and v.get("hotpluggable") == "yes")
        if vcpus is not None
        else 0
    )
    balloons = devices.findall("memballoon") if devices is not None else []
    balloon = not balloons or any(b.get("model") != "none" for b in balloons)
    return Capacity(spare, unpluggable, balloon, sealed)


def _on_sealed_ports(running: ET.Element, devices: ET.Element) -> frozenset[str]:
    """The identities (``device_key``) of the devices on root ports with hotplug off:
    libvirt cannot unplug them from the running guest."""
    ports = sealed_ports(running)
    if not ports:
        return frozenset()
    return frozenset(
        key
        for key, el in device_index(devices).items()
        if (a := el.find("address")) is not None
        and a.get("type") == "pci"
        and int(a.get("bus") or "0", 0) in ports
    )


def within_capacity(rd: RunningDiff, desired: Essence, running: Essence, room: Capacity) -> RunningDiff:
    """``rd`` with the live changes the running domain cannot take moved to restart-class,
    each with a note saying why (and how many hotplug slots remain after the others)."""
    live, restart, ops, notes = list(rd.live), list(rd.restart), list(rd.ops), list(rd.notes)

    def to_restart(paths: set[str], op: LiveOp | None, why: Note) -> None:
        moved = [f for f in live if f.path in paths]
        for f in moved:
            live.remove(f)
            restart.append(FieldChange(f.path, f.old, f.new, ChangeClass.RESTART))
        if not moved:  # a definition change the running diff does not list (the balloon target)
            restart.extend(FieldChange(p, running.get(p), desired.get(p), ChangeClass.RESTART) for p in paths)
        if op is not None and op in ops:
            ops.remove(op)
        notes.append(why)

    spare = room.spare_slots
    for op in [o for o in ops if o.kind == LiveOpKind.ATTACH]:
        root = f"devices/{op.target}"
        if spare is None or not _needs_slot(desired, root):
            continue
        if spare > 0:
            spare -= 1
            notes.append(Note(Noted.SPARE_SLOT, op.target, count=spare))
        else:
            to_restart({root}, op, Note(Noted.NO_SPARE_SLOT, op.target))
    for op in [o for o in ops if o.kind == LiveOpKind.DETACH and o.target in room.sealed]:
        to_restart({f"devices/{op.target}"}, op, Note(Noted.PORT_SEALED, op.target))
    for op in [o for o in ops if o.kind == LiveOpKind.SET_VCPUS]:
        now = int(running.get("vcpu@current") or running.get("vcpu") or "0")
        fewer = now - int(op.value)
        if fewer > room.unpluggable_vcpus:
            why = Note(Noted.VCPUS_UNPLUG, value=op.value, count=now, total=room.unpluggable_vcpus)
            to_restart({"vcpu@current"}, op, why)
    for op in [o for o in ops if o.kind == LiveOpKind.SET_MEMORY]:
        if not room.balloon:
            to_restart({"currentMemory"}, op, Note(Noted.NO_BALLOON))
    if (live, restart, ops, notes) == (list(rd.live), list(rd.restart), list(rd.ops), list(rd.notes)):
        return rd
    return RunningDiff(tuple(live), tuple(restart), tuple(ops), tuple(notes))
