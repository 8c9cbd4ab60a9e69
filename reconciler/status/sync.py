"""A planned change's sync verdict, as its status row shows it.

Input: the plan, one of its changes and that change's apply result (None: not
applied). Output: the row's ``Sync`` and its message (a change's reasons worded by
``wording.reasons``); which results a reconcile's record keeps (``worth_reading``). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.changes import Action
from reconciler.model.results import Sync
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from reconciler.model.changes import Change, Plan
    from reconciler.model.results import ApplyResult


def planned_sync(plan: Plan, c: Change, result: ApplyResult | None) -> tuple[Sync, str]:
    """A planned change's sync and message, after its apply (``result``; None: not applied)."""
    if result is not None and not result.ok:
        return Sync.FAILED, result.message
    if result is not None and result.pending:  # a graceful stop under way in the background
        return Sync.OUT_OF_SYNC, result.message
    if c.action == Action.WAIT:  # a host move waiting for the old copy to go
        return Sync.OUT_OF_SYNC, said(c)
    if c.action == Action.SKIPPED:
        return (Sync.UNMANAGED if c.desired is not None else Sync.ORPHANED), said(c)
    if plan.errors:
        return Sync.OUT_OF_SYNC, "revision not applied: it has errors"
    if c.requeue_after_s > 0 and c.restarts:
        return Sync.CRASH_LOOP, said(c)  # KubeVirt's printable status
    if c.drift and c.action == Action.UNCHANGED:  # reported, not reverted (selfHeal off)
        return Sync.OUT_OF_SYNC, said(c)
    if c.restart_required:  # staged: the reason says what waits for a restart
        return Sync.SYNCED, said(c)
    if result is not None and result.ok and c.reprovision:  # autohealed: why, the disks made again
        return Sync.SYNCED, result.message
    if result is not None and result.ok and not c.is_noop:
        return Sync.SYNCED, c.action.past  # what this reconcile did, not why it planned it
    return Sync.SYNCED, (said(c) if c.action != Action.UNCHANGED else "")


def worth_reading(r: ApplyResult) -> bool:
    """A result ``state.json`` keeps: a change made or a failure (not a VM left as it was)."""
    return not r.ok or r.action not in (Action.UNCHANGED, Action.SKIPPED)
