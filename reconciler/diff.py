"""Compare a desired domain with a live one: the only user of deepdiff.

Input: two domain XML strings (or essences). Output: project-owned ``FieldChange``
records, one per changed field or per added/removed owned device, each with its
change class; for a running domain also the ``LiveOp`` list that applies the live
class without a restart. Pure.

The desired essence is compared as a subset of the live one (libvirt adds defaults on
read-back); extra live devices of the owned kinds are removals.

Change classes (DESIGN §5):

- ``live``: title, description, metadata; memory and online vCPUs within the maximum
  the running domain has; hotplug / unplug of disks on a hotpluggable bus (virtio,
  scsi, usb) and of interfaces; cdrom / floppy media; interface link state;
- ``restart``: everything else (machine, firmware, cpu model / topology, a maximum
  above the running one, bus changes, non-hotpluggable devices, ...).

``diff_domains(old_xml, new_xml)`` classes the changes between two desired renderings
with no host at all (PR CI): the old rendering stands for the live domain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from reconciler.model import ChangeClass, FieldChange, LiveOp, LiveOpKind
from reconciler.normalize import (
    Essence,
    device_kind,
    device_root,
    device_roots,
    essence,
    readback_equivalent,
    same_value,
)

# Field paths (regex on the essence path) that can change on a running domain whatever
# their values. Paths that depend on values or on the device (memory, vCPUs, hotplug,
# media) are classed by ``classify``.
LIVE_FIELDS: tuple[tuple[str, str], ...] = (
    (r"^currentMemory$", "balloon target within the maximum memory"),
    (r"^vcpu@current$", "online vCPUs within the maximum"),
    (r"^(title|description)$", "descriptive text"),
    (r"^metadata/", "metadata"),
    (r"^devices/(disk|interface)\[[^\]]+\]$", "device hotplug / unplug"),
    (r"^devices/disk\[[^\]]+\]/source@(file|dev|volume|pool)$", "removable media"),
    (r"^devices/interface\[[^\]]+\]/link@state$", "interface link state"),
)
_LIVE_RE = [re.compile(p) for p, _ in LIVE_FIELDS]

HOTPLUG_DISK_BUSES = ("virtio", "scsi", "usb")
REMOVABLE_MEDIA = ("cdrom", "floppy")
_METADATA_TEXT = ("title", "description")


def change_class(path: str) -> ChangeClass:
    """The class of a change at ``path`` without looking at values (the upper bound)."""
    return ChangeClass.LIVE if any(rx.match(path) for rx in _LIVE_RE) else ChangeClass.RESTART


def _int(ess: Essence, path: str) -> int | None:
    v = ess.get(path)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _within(ess_new: Essence, path: str, *maxima: Essence) -> bool:
    new = _int(ess_new, path)
    tops = [m for m in (_int(e, path) for e in maxima) if m is not None]
    return new is not None and bool(tops) and new <= max(tops)


def hotpluggable(ess: Essence, root: str) -> bool:
    """Whether the device ``root`` (``devices/disk[vdb]``) of ``ess`` can be (un)plugged live."""
    kind = device_kind(root)
    if kind == "interface":
        return True
    if kind == "disk":
        device = ess.get(f"{root}@device", "disk")
        bus = ess.get(f"{root}/target@bus", "")
        return bus in HOTPLUG_DISK_BUSES and device != "floppy"
    return False


def _removable_media(root: str, *sides: Essence) -> bool:
    return device_kind(root) == "disk" and any(s.get(f"{root}@device") in REMOVABLE_MEDIA for s in sides)


def classify(path: str, desired: Essence, live: Essence, running: Essence | None = None) -> ChangeClass:
    """The class of a change at ``path`` from ``live`` to ``desired``.

    ``running``: the running domain's essence, whose maxima (memory, vCPUs) bound what
    can change live; without it the live (old) definition's maxima are used.
    """
    bound = (live, running) if running is not None else (live,)
    root = device_root(path)
    if path in _METADATA_TEXT or path.startswith("metadata/"):
        return ChangeClass.LIVE
    if path in ("memory", "currentMemory"):
        # Live when the new maximum is no higher than the running one and the balloon
        # target fits under that running maximum.
        mem_ok = _within(desired, "memory", *bound) or "memory" not in desired
        target = _int(desired, "currentMemory")
        tops = [m for m in (_int(e, "memory") for e in bound) if m is not None]
        fits = target is None or (bool(tops) and target <= max(tops))
        return ChangeClass.LIVE if mem_ok and fits else ChangeClass.RESTART
    if path in ("vcpu", "vcpu@current"):
        return ChangeClass.LIVE if _within(desired, "vcpu", *bound) else ChangeClass.RESTART
    if root is not None:
        if path == root:  # the whole device added or removed
            side = desired if root in device_roots(desired) else live
            return ChangeClass.LIVE if hotpluggable(side, root) else ChangeClass.RESTART
        rest = path[len(root) :]
        if rest.startswith("/source") and _removable_media(root, desired, live):
            return ChangeClass.LIVE
        if rest == "/link@state":
            return ChangeClass.LIVE
    return ChangeClass.RESTART


def _dd_key(key: str) -> str:
    # deepdiff reports "root['path']"
    m = re.fullmatch(r"root\['(.*)'\]", key)
    return m.group(1) if m else key


def _describe(ess: Mapping[str, str], dev: str) -> str:
    wanted = ("source", "target@bus", "model@type", "@device")
    parts = [
        f"{p[len(dev) :].lstrip('/')}={v}"
        for p, v in sorted(ess.items())
        if p.startswith(dev) and any(w in p[len(dev) :] for w in wanted)
    ]
    return dev.split("/", 1)[1] + (" " + " ".join(parts) if parts else "")


def _value_changes(
    desired: Essence, live: Essence, skip: AbstractSet[str]
) -> list[tuple[str, str | None, str]]:
    """``(path, old, new)`` for every desired value that live lacks or has otherwise."""
    if skip:
        live_view = {p: live[p] for p in desired if p in live and device_root(p) not in skip}
        desired_view = {p: v for p, v in desired.items() if device_root(p) not in skip}
    else:
        live_view = {p: live[p] for p in desired if p in live}
        desired_view = dict(desired)
    if live_view == desired_view:  # the common, in-sync case: no deepdiff needed
        return []
    from deepdiff import DeepDiff  # imported on first use: an in-sync daemon never loads it (~3 MiB)

    dd = DeepDiff(live_view, desired_view, verbose_level=2)
    out: list[tuple[str, str | None, str]] = []
    for key, detail in dd.get("values_changed", {}).items():
        path = _dd_key(key)
        old, new = str(detail["old_value"]), str(detail["new_value"])
        if not same_value(path, new, old) and not readback_equivalent(path, desired, live):
            out.append((path, old, new))
    for key, value in dd.get("dictionary_item_added", {}).items():
        path = _dd_key(key)
        if not readback_equivalent(path, desired, live):
            out.append((path, None, str(value)))
    return out


def diff_essences(desired: Essence, live: Essence, running: Essence | None = None) -> tuple[FieldChange, ...]:
    """Every difference from ``live`` to ``desired``, classed (see ``classify``)."""
    desired_devices = device_roots(desired)
    live_devices = device_roots(live)
    added = desired_devices - live_devices
    removed = live_devices - desired_devices
    changes = [
        FieldChange(path, old, new, classify(path, desired, live, running))
        for path, old, new in _value_changes(desired, live, added)
    ]
    for dev in sorted(added):
        changes.append(FieldChange(dev, None, _describe(desired, dev), classify(dev, desired, live, running)))
    for dev in sorted(removed):
        changes.append(FieldChange(dev, _describe(live, dev), None, classify(dev, desired, live, running)))
    return tuple(sorted(changes, key=lambda c: c.path))


def diff_domains(desired_xml: str, live_xml: str, running_xml: str = "") -> tuple[FieldChange, ...]:
    """Field changes from ``live_xml`` (a persistent definition, or an old rendering) to ``desired_xml``."""
    running = essence(running_xml) if running_xml else None
    return diff_essences(essence(desired_xml), essence(live_xml), running)


@dataclass(frozen=True, slots=True)
class RunningDiff:
    """How a running domain differs from the desired definition."""

    live: tuple[FieldChange, ...] = ()  # fixed by ``ops`` without a restart
    restart: tuple[FieldChange, ...] = ()  # need a cold boot
    ops: tuple[LiveOp, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.live and not self.restart


def running_diff(desired: Essence, running: Essence) -> RunningDiff:
    """Compare the running domain's (live) XML with the desired definition.

    The balloon's actual size (live ``currentMemory``) depends on the guest's driver
    and is not compared: the balloon target is set from the persistent diff (see
    ``memory_op``). A maximum (``memory``, ``vcpu``) at or below the running one is
    met. Devices and media are turned into attach / detach / update operations.
    """
    live_fields: list[FieldChange] = []
    restart: list[FieldChange] = []
    ops: list[LiveOp] = []
    for f in diff_essences(desired, running, running):
        path = f.path
        root = device_root(path)
        if path == "currentMemory":
            continue
        if path in ("memory", "vcpu") and _within(desired, path, running):
            continue
        if f.change_class == ChangeClass.RESTART:
            restart.append(f)
            continue
        live_fields.append(f)
        if path == "vcpu@current":
            ops.append(LiveOp(LiveOpKind.SET_VCPUS, "", str(desired[path])))
        elif path in _METADATA_TEXT:
            ops.append(LiveOp(LiveOpKind.SET_METADATA, path, desired.get(path, "")))
        elif path.startswith("metadata/"):
            ns = path.split("/", 2)[1]
            op = LiveOp(LiveOpKind.SET_METADATA, f"metadata/{ns}")
            if op not in ops:
                ops.append(op)
        elif root is not None and path == root:
            kind = LiveOpKind.ATTACH if f.new is not None else LiveOpKind.DETACH
            ops.append(LiveOp(kind, root.split("/", 1)[1]))
        elif root is not None:
            op = LiveOp(LiveOpKind.UPDATE, root.split("/", 1)[1])
            if op not in ops:
                ops.append(op)
    order = {LiveOpKind.DETACH: 0, LiveOpKind.UPDATE: 1, LiveOpKind.ATTACH: 2}
    ops.sort(key=lambda o: order.get(o.kind, 3))
    return RunningDiff(tuple(live_fields), tuple(restart), tuple(ops))


def memory_op(fields: tuple[FieldChange, ...], desired: Essence, running: Essence) -> LiveOp | None:
    """The balloon change for a definition change of ``currentMemory`` within the running maximum."""
    if not any(f.path in ("memory", "currentMemory") for f in fields):
        return None
    target = _int(desired, "currentMemory")
    top = _int(running, "memory")
    if target is None or top is None or target > top:
        return None
    return LiveOp(LiveOpKind.SET_MEMORY, "", str(target))
