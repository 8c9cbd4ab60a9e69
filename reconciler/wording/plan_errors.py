"""A plan's own errors and warnings in words: the one place a ``PlanError`` becomes text.

Input: a ``PlanError`` (``model.plan_errors``). Output: the cause as ``Problem.message``
holds it (no subject, no location: those are the problem's fields). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.plan_errors import UNMANAGED, Unplanned
from reconciler.model.units import format_bytes

if TYPE_CHECKING:
    from reconciler.model.plan_errors import PlanError

_ADOPT_HINT = 'set annotation reconciler.kubevirt.io/adopt: "true" to take it over'


def said(e: PlanError) -> str:
    """The error's cause in words."""
    match e.kind:
        case Unplanned.UNMANAGED:
            return f"a domain of this name exists and is not managed by the reconciler; {_ADOPT_HINT}"
        case Unplanned.OTHER_OWNER:
            return f"a domain of this name exists and belongs to another owner ({e.owner}); {_ADOPT_HINT}"
        case Unplanned.ADOPTION_REFUSED:
            came = "an unmanaged domain" if e.came == UNMANAGED else f"it from owner {e.came}"
            return (
                f"conflict: the domain belongs to owner {e.owner}, which adopted {came}; adoption is "
                f"one-time: {e.owner} must release it first (remove the VM from its repository and keep "
                "the domain), and the other owner remove its adopt annotation"
            )
        case Unplanned.NOT_COMPARED:
            return f"cannot compare with the domain on this host: {e.detail}"
        case Unplanned.ADOPTED:
            came = "an unmanaged domain" if e.came == UNMANAGED else "owner " + e.came
            return (
                f"conflict: adopted from {came}; adoption is one-time: remove the "
                "reconciler.kubevirt.io/adopt annotation (another owner whose repository still asks "
                "for this VM cannot take it back)"
            )
        case Unplanned.DISK_NOT_RESIZED:
            how = (
                "grow it by hand (`qemu-img resize` while the VM is stopped, `virsh blockresize` while it "
                "runs), then the guest's partition"
                if e.size > e.was
                else "a disk is never shrunk"
            )
            return (
                f"disk {e.path}: capacity {format_bytes(e.size)} in git, created with "
                f"{format_bytes(e.was)}: not applied, an existing disk is never resized; {how}"
            )
        case Unplanned.HOST_UNKNOWN:
            hosts = ", ".join(e.names) or "none"
            return (
                f"kubernetes.io/hostname {e.owner!r} names no host of {e.path} (hosts: {hosts}): "
                "no daemon of it runs this VM"
            )
        case Unplanned.NO_HOST_CLAIMS:
            return (
                f"selects no host and no host of {e.path} claims such VMs (claimUnselected): "
                "no daemon of it runs this VM"
            )
        case Unplanned.FACTS_MISSING:
            return f"factsFile {e.path} is not in the repository; {_refresh(e.path)}"
        case Unplanned.FACTS_UNREADABLE:
            return f"{e.detail}; {_refresh(e.path)}"
        case Unplanned.FACTS_STALE:
            return (
                f"{e.path} no longer matches this host (differs in {', '.join(e.names)}): "
                f"CI checks against stale facts; {_refresh(e.path)}"
            )


def _refresh(path: str) -> str:
    return f"refresh it with `reconciler host-facts --connect URI --out {path}`"
