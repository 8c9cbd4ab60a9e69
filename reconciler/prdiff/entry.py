"""One VM of a PR diff: what merging creates, deletes or changes, and what a host does.

Input: one ``Change`` of the plan built over the simulated host, the rendered domain it
concerns (head's, or base's for a VM that left git), its change class and notes. Output:
a ``VMEntry`` (kind, change class, consequence, fields, notes), with what of the records
each kind's words need (``created``, ``changed``; host moves, volumes resized, what a
pass-through keeps) found here and said by ``wording.prdiff`` (a VM that left git:
``wording.prdiff.deleted``). Pure: it carries the plan's verdict and decides nothing of
its own; ``compare`` pairs the VMs.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from reconciler.model import RunStrategy
from reconciler.model.changes import ChangeClass
from reconciler.plan.build import KEEP_RUNNING
from reconciler.records import dataclass
from reconciler.wording import prdiff as words
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.compare import provenance
    from reconciler.model import RenderedDomain
    from reconciler.model.changes import Change, FieldChange


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
    return words.created(c.start, d.run_strategy)


def changed(c: Change, d: RenderedDomain) -> str:
    strategy = RunStrategy(d.run_strategy)
    return words.changed(c, strategy, strategy in KEEP_RUNNING)


def host_move(old: str, new: str) -> tuple[str, ...]:
    return () if old == new else (words.host_move(old, new),)


def volume_notes(old: RenderedDomain, new: RenderedDomain) -> tuple[str, ...]:
    """Host resources that differ where the domain XML may not show it (sizes; the content
    of generated ISOs is a ``config/<volume>`` field of the plan, by name only)."""
    before = {v.path: v for v in old.volumes}
    return tuple(
        words.volume_resized(v.path, b.capacity, v.capacity)
        for v in new.volumes
        if (b := before.get(v.path)) is not None and b.capacity != v.capacity
    )


def passthrough_notes(old: RenderedDomain | None, new: RenderedDomain) -> tuple[str, ...]:
    """What the VM's pass-through (``reconciler.kubevirt.io/domain-xml-passthrough``) keeps
    in its definition beside the spec, for a reviewer: on a new VM, or where it moved."""
    before = (old.passthrough, old.passthrough_omitted) if old is not None else ((), ())
    after = (new.passthrough, new.passthrough_omitted)
    if after == before or after == ((), ()):
        return ()
    return (words.passthrough_kept(new.passthrough, new.passthrough_omitted),)
