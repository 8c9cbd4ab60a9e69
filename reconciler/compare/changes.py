"""Compare a desired domain with a live one, path by path (the one module allowed deepdiff).

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

The change-class table is ``LIVE_RULES``: one row per live-updatable field; which
device kinds hotplug and which of their fields change live come from the device
kinds' descriptors (``model.devices``).

A change is classed live only if the running domain can take it (``compare.capacity``:
spare hotplug slots, unpluggable vCPUs, a balloon, no sealed root port under a device
to unplug); what it cannot take is restart-class, said with the reason
(``RunningDiff.notes``: ``Note`` records, said by ``wording.reasons``). A free ``pcie-root-port``
of the desired definition (``render.ports``) that a domain defined earlier lacks is
added to its definition without a restart and reaches the guest at its next cold boot
(``reserved_port``: "N hotplug ports reserved at next boot").

The content of a generated ISO (cloud-init data, a ConfigMap or Secret of the build)
is no part of the XML: ``config_changes`` compares the digests recorded in an
ownership mark with the desired ones, one restart-class ``config/<volume>`` change per
ISO whose content moved, worded by the objects' names only (the guest reads the ISO
at its next cold boot).
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from reconciler.compare.essence import (
    Essence,
    device_kind,
    device_root,
    device_roots,
    readback_equivalent,
    same_value,
)
from reconciler.model.changes import ChangeClass, FieldChange, LiveOp, LiveOpKind
from reconciler.model.devices import DEVICE_KINDS, KINDS, DeviceKind, LiveField
from reconciler.model.reasons import Note, Noted
from reconciler.records import dataclass
from reconciler.render.ports import PORT_MODEL

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from collections.abc import Set as AbstractSet

    from reconciler.model import ConfigDigest

# Dedicated-CPU placement (render.cputune): never a libvirt default, so a pin the live
# definition has and the desired one lacks is a change (a removal), not a read-back extra.
OWNED_PINNING = (
    "cputune/vcpupin",
    "cputune/emulatorpin",
    "cputune/iothreadpin",
    "cputune/vcpusched",
    "numatune/",
)
_METADATA_TEXT = ("title", "description")


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
    """Whether the device ``root`` (``devices/disk[vdb]``) of ``ess`` can be (un)plugged live
    (its kind's descriptor: hotplug, on which buses, never for which ``@device``)."""
    kind = KINDS.get(device_kind(root))
    if kind is None or not kind.hotplug:
        return False
    if kind.hotplug_buses and ess.get(f"{root}/target@bus", "") not in kind.hotplug_buses:
        return False
    return ess.get(f"{root}@device", "") not in kind.no_hotplug_devices


@dataclass(frozen=True, slots=True)
class At:
    """One changed field and what decides its class: the desired and live essences, and
    the maxima a running domain can grow to (its own, or the live definition's)."""

    path: str
    root: str | None  # the device the path lies in (``devices/disk[vdb]``), if any
    desired: Essence
    live: Essence
    bound: tuple[Essence, ...]
    new: str | None = None  # the desired value (None: removed)

    @property
    def rest(self) -> str:
        return self.path[len(self.root) :] if self.root else self.path


def _memory_live(at: At) -> bool:
    # Live when the new maximum is no higher than the running one and the balloon target
    # fits under that running maximum.
    mem_ok = _within(at.desired, "memory", *at.bound) or "memory" not in at.desired
    target = _int(at.desired, "currentMemory")
    tops = [m for m in (_int(e, "memory") for e in at.bound) if m is not None]
    return mem_ok and (target is None or (bool(tops) and target <= max(tops)))


def _plugged(at: At) -> bool:
    side = at.desired if at.root in device_roots(at.desired) else at.live
    return at.root is not None and hotpluggable(side, at.root)


def _device(at: At) -> str:
    return (at.root or "").split("/", 1)[1]


@dataclass(frozen=True, slots=True)
class LiveRule:
    """One row of the change-class table: the fields it covers, when a change there can
    be made on the running domain, and the operation that makes it (``host.apply`` runs
    one function per ``LiveOpKind``). A field no row covers is restart-class."""

    what: str
    covers: Callable[[At], bool]
    live: Callable[[At], bool]
    op: Callable[[At], LiveOp | None]


def _live_field(kind: DeviceKind, f: LiveField) -> LiveRule:
    def covers(at: At) -> bool:
        if at.root is None or device_kind(at.root) != kind.element:
            return False
        return at.rest == f.path if f.exact else at.rest.startswith(f.path)

    def live(at: At) -> bool:
        return not f.devices or any(
            side.get(f"{at.root}@device") in f.devices for side in (at.desired, at.live)
        )

    return LiveRule(f.what, covers, live, lambda at: LiveOp(LiveOpKind.UPDATE, _device(at)))


_HOTPLUG_KINDS = "; ".join(
    k.element + (f" on {', '.join(k.hotplug_buses)}" if k.hotplug_buses else "")
    for k in DEVICE_KINDS
    if k.hotplug
)

# The change-class table (DESIGN §5). Adding a live-updatable field: one row here (a
# device's field: a ``LiveField`` of its kind in ``model.devices``), plus its operation
# in ``host.apply`` when it needs a new ``LiveOpKind``.
LIVE_RULES: tuple[LiveRule, ...] = (
    LiveRule(
        "descriptive text",
        lambda at: at.path in _METADATA_TEXT,
        lambda at: True,
        lambda at: LiveOp(LiveOpKind.SET_METADATA, at.path, at.desired.get(at.path, "")),
    ),
    LiveRule(
        "metadata",
        lambda at: at.path.startswith("metadata/"),
        lambda at: True,
        lambda at: LiveOp(LiveOpKind.SET_METADATA, "metadata/" + at.path.split("/", 2)[1]),
    ),
    LiveRule(
        "memory and balloon target within the running maximum",
        lambda at: at.path in ("memory", "currentMemory"),
        _memory_live,
        # The balloon target is set from the definition's change (see ``memory_op``): the
        # balloon's actual size depends on the guest's driver and is never compared.
        lambda at: None,
    ),
    LiveRule(
        "online vCPUs within the maximum",
        lambda at: at.path in ("vcpu", "vcpu@current"),
        lambda at: _within(at.desired, "vcpu", *at.bound),
        lambda at: (
            LiveOp(LiveOpKind.SET_VCPUS, "", str(at.desired[at.path])) if at.path == "vcpu@current" else None
        ),
    ),
    LiveRule(
        f"device hotplug / unplug ({_HOTPLUG_KINDS})",
        lambda at: at.root is not None and at.path == at.root,
        _plugged,
        lambda at: LiveOp(LiveOpKind.ATTACH if at.new is not None else LiveOpKind.DETACH, _device(at)),
    ),
    # The fields of a device that change on the running domain, from the device kinds'
    # descriptors (removable media, an interface's link state): an update of the device.
    *(_live_field(kind, f) for kind in DEVICE_KINDS for f in kind.live),
)


def _rule(at: At) -> LiveRule | None:
    for rule in LIVE_RULES:
        if rule.covers(at):
            return rule if rule.live(at) else None
    return None


def classify(path: str, desired: Essence, live: Essence, running: Essence | None = None) -> ChangeClass:
    """The class of a change at ``path`` from ``live`` to ``desired``: live when a row of
    ``LIVE_RULES`` covers it and its values allow it, restart otherwise.

    ``running``: the running domain's essence, whose maxima (memory, vCPUs) bound what
    can change live; without it the live (old) definition's maxima are used.
    """
    bound = (live, running) if running is not None else (live,)
    at = At(path, device_root(path), desired, live, bound)
    return ChangeClass.LIVE if _rule(at) is not None else ChangeClass.RESTART


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
    if live_view == desired_view:  # the common, in-sync case
        return []
    # One value per path on both sides (flat essences): compared path by path, so a
    # difference is always one path with its two values, never a whole document.
    out: list[tuple[str, str | None, str]] = []
    for path, new in desired_view.items():
        old = live_view.get(path)
        if old is None:
            if not readback_equivalent(path, desired, live):
                out.append((path, None, str(new)))
        elif (
            old != new
            and not same_value(path, str(new), str(old))
            and not readback_equivalent(path, desired, live)
        ):
            out.append((path, str(old), str(new)))
    return out


def diff_essences(desired: Essence, live: Essence, running: Essence | None = None) -> tuple[FieldChange, ...]:
    """Every difference from ``live`` to ``desired``, classed (see ``classify``)."""
    desired_devices = device_roots(desired)
    live_devices = device_roots(live)
    added = desired_devices - live_devices
    removed = live_devices - desired_devices
    changes = [
        FieldChange(
            path, old, new, _port_class(path, desired, live) or classify(path, desired, live, running)
        )
        for path, old, new in _value_changes(desired, live, added)
    ]
    for dev in sorted(added):
        changes.append(FieldChange(dev, None, _describe(desired, dev), classify(dev, desired, live, running)))
    for dev in sorted(removed):
        changes.append(FieldChange(dev, _describe(live, dev), None, classify(dev, desired, live, running)))
    # CPU pinning is ours alone (libvirt adds none): pins the definition no longer has go.
    changes += [
        FieldChange(p, live[p], None, ChangeClass.RESTART)
        for p in live
        if p.startswith(OWNED_PINNING) and p not in desired
    ]
    return tuple(sorted(changes, key=lambda c: c.path))


@dataclass(frozen=True, slots=True)
class RunningDiff:
    """How a running domain differs from the desired definition."""

    live: tuple[FieldChange, ...] = ()  # fixed by ``ops`` without a restart
    restart: tuple[FieldChange, ...] = ()  # need a cold boot
    ops: tuple[LiveOp, ...] = ()
    notes: tuple[Note, ...] = field(default=(), compare=False)  # why a live change waits for a restart

    @property
    def empty(self) -> bool:
        return not self.live and not self.restart


def running_diff(desired: Essence, running: Essence, defined: tuple[FieldChange, ...] = ()) -> RunningDiff:
    """Compare the running domain's (live) XML with the desired definition.

    The balloon's actual size (live ``currentMemory``) depends on the guest's driver
    and is not compared: the balloon target is set from ``defined``, the changes of the
    persistent definition (see ``memory_op``). A maximum (``memory``, ``vcpu``) at or below the running one is
    met. Devices and media are turned into attach / detach / update operations.
    """
    live_fields: list[FieldChange] = []
    restart: list[FieldChange] = []
    ops: list[LiveOp] = []
    ports: set[str] = set()
    for f in diff_essences(desired, running, running):
        path = f.path
        if path == "currentMemory":
            continue
        root = device_root(path)
        if root is not None and reserved_port(desired, running, root):
            ports.add(root)
            continue
        if path in ("memory", "vcpu") and _within(desired, path, running):
            continue
        if f.change_class == ChangeClass.RESTART:
            restart.append(f)
            continue
        live_fields.append(f)
        at = At(path, device_root(path), desired, running, (running,), f.new)
        rule = _rule(at)
        op = rule.op(at) if rule is not None else None
        if op is not None and op not in ops:
            ops.append(op)
    order = {LiveOpKind.DETACH: 0, LiveOpKind.UPDATE: 1, LiveOpKind.ATTACH: 2}
    ops.sort(key=lambda o: order.get(o.kind, 3))
    mem = memory_op(defined, desired, running)  # the balloon first, as the definition changed it
    if mem is not None:
        ops.insert(0, mem)
    notes = (Note(Noted.PORTS_RESERVED, count=len(ports)),) if ports else ()
    return RunningDiff(tuple(live_fields), tuple(restart), tuple(ops), notes)


def _port_class(path: str, desired: Essence, live: Essence) -> ChangeClass | None:
    """A reserved root port the definition lacks is added to it without any restart: the
    guest gets it at its next cold boot (``reserved_port``)."""
    root = device_root(path)
    return ChangeClass.LIVE if root is not None and reserved_port(desired, live, root) else None


def reserved_port_field(f: FieldChange) -> bool:
    """Whether ``f`` adds a reserved root port to a definition that lacks it (what
    ``_port_class`` classes live: no controller is hotplugged otherwise). Expected, not
    drift, and no reason to leave an import out: the guest gets it at its next boot."""
    return (
        f.path.startswith("devices/controller[pci:") and f.old is None and f.change_class == ChangeClass.LIVE
    )


def reserved_port(desired: Essence, running: Essence, root: str) -> bool:
    """Whether ``root`` is a free ``pcie-root-port`` of the desired definition (``render.ports``)
    the running domain lacks: a domain defined before the ports were reserved gets them at
    its next cold boot, never through a restart of their own."""
    return (
        root.startswith("devices/controller[pci:")
        and desired.get(f"{root}@model") == PORT_MODEL
        and f"{root}@model" not in running
    )


def memory_op(fields: tuple[FieldChange, ...], desired: Essence, running: Essence) -> LiveOp | None:
    """The balloon change for a definition change of ``currentMemory`` within the running maximum."""
    if not any(f.path in ("memory", "currentMemory") for f in fields):
        return None
    target = _int(desired, "currentMemory")
    top = _int(running, "memory")
    if target is None or top is None or target > top:
        return None
    return LiveOp(LiveOpKind.SET_MEMORY, "", str(target))


CONFIG_PREFIX = "config/"


def config_changes(
    recorded: tuple[ConfigDigest, ...], desired: tuple[ConfigDigest, ...]
) -> tuple[FieldChange, ...]:
    """Generated ISOs whose payload moved since ``recorded`` (a mark's), by volume.

    A mark that records none (written before digests were kept) tells nothing, and an
    ISO added or removed is a disk change the XML already shows: only ISOs on both
    sides are compared. Neither does a digest of another kind drawing on the same
    objects (``sha256:`` recorded before Secrets were digested with scrypt, against
    ``sha256+scrypt:``): the record is refreshed, the VM not restarted. Old and new
    values are the objects' names, never content."""
    if not recorded:
        return ()
    before = {c.volume: c for c in recorded}
    out = []
    for c in desired:
        b = before.get(c.volume)
        if b is None or b.digest == c.digest:
            continue
        if b.label == c.label and _digest_kind(b.digest) != _digest_kind(c.digest):
            continue
        out.append(FieldChange(CONFIG_PREFIX + c.volume, b.label, c.label, ChangeClass.RESTART))
    return tuple(out)


def _digest_kind(digest: str) -> str:
    return digest.partition(":")[0]
