"""One VM of a PR diff in words: what merging creates, deletes or changes, and what a host does.

Input: one ``Change`` of the plan built over the simulated host, the rendered domain it
concerns (head's, or base's for a VM that left git), its change class and notes. Output:
a ``VMEntry`` (kind, change class, consequence in words, fields, notes) and the wording
of each kind (``created``, ``deleted``, ``changed``; host moves, volume sizes). Pure: it
words the plan's verdict and decides nothing of its own; ``compare`` pairs the VMs.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from reconciler.model import RunStrategy
from reconciler.model.changes import Action, ChangeClass
from reconciler.model.units import format_bytes
from reconciler.plan.build import KEEP_RUNNING
from reconciler.records import dataclass
from reconciler.wording import refusal
from reconciler.wording.reasons import arrow, said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.compare import provenance
    from reconciler.model import RenderedDomain
    from reconciler.model.changes import Change, FieldChange
    from reconciler.model.refusal import PruneRefusal


class EntryKind(enum.StrEnum):
    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"


# Change class of one VM entry: the field classes of the plan, or "none" when the
# expanded spec moved but the domain definition did not.
NO_DOMAIN_CHANGE = "none"


@dataclass(frozen=True, slots=True)
class VMEntry:
    """One VM that merging creates, deletes or changes."""

    subject: str
    name: str  # libvirt domain name
    kind: EntryKind
    run_strategy: str
    change_class: str  # "live" | "restart" | "none" for changed VMs, "" otherwise
    consequence: str  # what a host does, in words (run strategy and rollout applied)
    action: str  # the plan's action on a host holding base
    reason: str  # the plan's reason
    fields: tuple[FieldChange, ...] = ()
    spec_diff: str = ""  # unified diff of the expanded VM as YAML, base vs head
    source_path: str = ""
    host: str = ""  # nodeSelector kubernetes.io/hostname at head ("" = any claiming host)
    notes: tuple[str, ...] = ()
    changes: tuple[provenance.UserChange, ...] = ()  # ``fields`` in KubeVirt terms, with origins
    attributes: tuple[str, ...] = ()  # a created VM: what it will be (``plan.text.create_attributes``)


def vm_entry(
    c: Change,
    kind: EntryKind,
    d: RenderedDomain,
    cls: str,
    consequence: str,
    spec_diff: str,
    notes: tuple[str, ...],
    changes: tuple[provenance.UserChange, ...] = (),
) -> VMEntry:
    return VMEntry(
        subject=c.subject,
        name=c.name,
        kind=kind,
        run_strategy=str(d.run_strategy),
        change_class=cls,
        consequence=consequence,
        action=str(c.action),
        reason=said(c),
        fields=c.fields,
        spec_diff=spec_diff,
        source_path=d.source_path,
        host=d.hostname,
        notes=notes,
        changes=changes,
    )


def entry_class(fields: Sequence[FieldChange]) -> str:
    if any(f.change_class == ChangeClass.RESTART for f in fields):
        return ChangeClass.RESTART.value
    if fields:
        return ChangeClass.LIVE.value
    return NO_DOMAIN_CHANGE


def created(c: Change, d: RenderedDomain) -> str:
    if c.start:
        return f"new domain: defined and started (runStrategy {d.run_strategy})"
    return f"new domain: defined, not started (runStrategy {d.run_strategy})"


_PRUNED = (
    "left git: pruned (shut down gracefully and undefined, disks kept) on hosts with pruning on; "
    "kept on hosts with pruning off (the default)"
)


def deleted(c: Change, guard: PruneRefusal | None, pruning: bool | None = None) -> str:
    """``pruning``: the host's policy.prune where the report speaks for one host (``None``:
    any host, with pruning on or off)."""
    if c.action == Action.DELETE:
        return (
            _PRUNED
            if pruning is None
            else "left git: pruned (shut down gracefully and undefined, disks kept)"
        )
    if c.live is not None and c.live.mark is not None and not c.live.mark.prune:
        return said(c)  # kept by its reconciler.kubevirt.io/prune annotation
    if pruning is False:
        return "left git: kept, the domain stays defined (pruning is off in the daemon's policy)"
    # The prune guard tripped on the whole repository taken as one host; the real
    # guard counts per host, so say what a host holding all of them does.
    refused = refusal.said(guard) if guard is not None else ""
    if pruning:
        return f"left git: to be pruned, but a host holding all of base's VMs refuses: {refused}"
    return f"{_PRUNED}; but a host holding all of base's VMs refuses: {refused}"


def changed(c: Change, d: RenderedDomain) -> str:
    strategy = RunStrategy(d.run_strategy)
    maybe = "" if strategy in KEEP_RUNNING else " (if running)"
    restart = any(f.change_class == ChangeClass.RESTART for f in c.fields)
    ops = ", ".join(str(op) for op in c.live_ops)
    parts: list[str] = []
    if c.action == Action.RESTART:
        parts.append(f"{strategy} VM: restart-class change: will be restarted (rollout Restart)")
    elif c.restart_required and c.restart_window:
        parts.append(
            f"{strategy} VM: restart-class change: will be restarted in the next restart window "
            f"({c.restart_window})"
        )
        if ops:
            parts.append(f"applied live now: {ops}")
    elif c.restart_required:
        parts.append(
            f"{strategy} VM{maybe}: restart-class change staged, RestartRequired until the next cold boot"
        )
        if ops:
            parts.append(f"applied live now: {ops}")
    elif restart:
        parts.append(f"{strategy} VM: definition updated; the change takes effect at the next start")
    elif c.fields:
        if strategy == RunStrategy.HALTED:
            parts.append(f"{strategy} VM: definition updated")
        else:
            parts.append(f"{strategy} VM{maybe}: applied live{f' ({ops})' if ops else ''}, no restart")
    elif c.action == Action.UPDATE or c.redefine:
        parts.append("ownership record refreshed, no field of the definition differs")
    if c.start:
        parts.append(f"will be started (runStrategy {strategy})")
    if c.stop:
        parts.append(f"will be stopped (runStrategy {strategy})")
    return "; ".join(parts)


def host_move(old: str, new: str) -> tuple[str, ...]:
    if old == new:
        return ()
    return (
        f"{arrow(old, new)}: stopped gracefully and undefined on the old host (disks kept) "
        "before it starts on the new one; not started while the old host is unreachable",
    )


def volume_notes(old: RenderedDomain, new: RenderedDomain) -> tuple[str, ...]:
    """Host resources that differ where the domain XML may not show it (sizes; the content
    of generated ISOs is a ``config/<volume>`` field of the plan, by name only)."""
    before = {v.path: v for v in old.volumes}
    notes: list[str] = []
    for v in new.volumes:
        b = before.get(v.path)
        if b is None:
            continue
        if b.capacity != v.capacity:
            notes.append(
                f"volume {v.path}: capacity {format_bytes(b.capacity)} -> {format_bytes(v.capacity)} "
                "(an existing disk is never resized: this takes effect only where it is created)"
            )
    return tuple(notes)


def passthrough_notes(old: RenderedDomain | None, new: RenderedDomain) -> tuple[str, ...]:
    """What the VM's pass-through (``reconciler.kubevirt.io/domain-xml-passthrough``) keeps
    in its definition beside the spec, for a reviewer: on a new VM, or where it moved."""
    before = (old.passthrough, old.passthrough_omitted) if old is not None else ((), ())
    after = (new.passthrough, new.passthrough_omitted)
    if after == before or after == ((), ()):
        return ()
    text = "domain XML kept beside the spec (passthrough annotation)"
    parts = []
    if new.passthrough:
        parts.append("keeps " + ", ".join(new.passthrough))
    if new.passthrough_omitted:
        parts.append("omits " + ", ".join(new.passthrough_omitted))
    return (f"{text}: {'; '.join(parts)}",)
