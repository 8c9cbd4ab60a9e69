"""Prunes and moves out: this owner's domains whose VM left git, and copies moving to
another host, within the prune guard.

Input: one host's live domains by VM key, the keys in git, the host's ``PlanPolicy``
(prune on or off, the guard's limits and its window's base, a recorded refusal, a
confirmation, where the other hosts hold copies), the revision and the planned moves
out. Output: the ``Change`` of each such domain (``delete``; ``skipped`` with why: not
ours to prune, pruning off, kept by annotation, refused by the guard; a kept domain
once adopted is ``released`` in its mark so another owner may adopt it) and the guard's
refusal, if any (a warning too). Pure: the guard's arithmetic lives in
``ownership.guard``; nothing here reads a host or a clock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.model import LiveDomain, Problem, Severity, VMKey
from reconciler.model.changes import Action, Change, Definition
from reconciler.model.reasons import ChangeReason, Why
from reconciler.settings.policy import Elsewhere
from reconciler.wording import refusal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.model.refusal import PruneRefusal
    from reconciler.settings.policy import PlanPolicy


def prune_changes(
    live_by_key: Mapping[VMKey, LiveDomain],
    in_git: set[VMKey],
    policy: PlanPolicy,
    warnings: list[Problem],
    revision: str,
    moving: Sequence[Change] = (),
) -> tuple[list[Change], PruneRefusal | None]:
    """Prunes of this owner's domains that left git, and moves to other hosts, within the
    guard (see ownership/guard.py): a move undefines a domain here just as a prune does."""
    owner = policy.owner
    live = list(live_by_key.values())
    orphans = _orphans(live_by_key, in_git, owner)
    prunable = [
        ld for ld in orphans if ownership.owned_by(ld.mark, owner) and ld.mark is not None and ld.mark.prune
    ]
    elsewhere = policy.elsewhere or Elsewhere()
    counted = [c for c in moving if not (c.live and elsewhere.known(_target_host(c)))]
    deleting = (len(prunable) if policy.prune else 0) + len(counted)
    verdict = _guard_verdict(deleting, live, policy, revision) if deleting else ownership.PruneVerdict()
    guard = verdict.refused
    if guard is not None:
        warnings.append(Problem(refusal.said(guard), severity=Severity.WARNING))
    out = [_orphan_change(ld, policy, verdict) for ld in orphans]
    for c in moving:
        if guard is not None and c in counted:
            refused = ChangeReason(Why.MOVE_REFUSED, policy.host, _target_host(c), refusal=guard)
            c = replace(c, action=Action.SKIPPED, reasons=(refused,))
        out.append(c)
    return out, guard


def _orphans(live_by_key: Mapping[VMKey, LiveDomain], in_git: set[VMKey], owner: str) -> list[LiveDomain]:
    """The domains of ``owner`` (or that it may claim) whose VM left git, by name."""
    return sorted(
        (
            ld
            for key, ld in live_by_key.items()
            if key not in in_git
            and (ownership.owned_by(ld.mark, owner) or ownership.claimable(ld.mark, owner))
        ),
        key=lambda d: d.name,
    )


def _guard_verdict(
    deleting: int, live: list[LiveDomain], policy: PlanPolicy, revision: str
) -> ownership.PruneVerdict:
    """The guard's verdict on undefining ``deleting`` of the owner's managed domains."""
    owner = policy.owner
    managed = ownership.managed_count(live, owner, revision, policy.prune_base)
    guard_policy = ownership.GuardPolicy(
        policy.max_prune_percent,
        policy.prune_base,
        policy.prune_held,
        policy.confirm_prune,
        policy.max_prune,
        ownership.gone_count(live, owner, policy.prune_base),
    )
    return ownership.judge(deleting, managed, revision, guard_policy)


def _orphan_change(ld: LiveDomain, policy: PlanPolicy, verdict: ownership.PruneVerdict) -> Change:
    """What becomes of a domain whose VM left git: deleted, kept, or skipped with why."""
    if not ownership.owned_by(ld.mark, policy.owner):
        return Change(key=ld.key, action=Action.SKIPPED, reasons=(ChangeReason(Why.LEFT_NO_OWNER),), live=ld)
    if not policy.prune or (ld.mark is not None and not ld.mark.prune):
        return _kept(ld, ChangeReason(Why.LEFT_KEPT, flag=not policy.prune))
    if verdict.refused is not None:
        reason = ChangeReason(Why.LEFT_GUARDED, refusal=verdict.refused)
        return Change(key=ld.key, action=Action.SKIPPED, reasons=(reason,), live=ld)
    eph = ld.mark.ephemeral if ld.mark is not None else ()
    reason = ChangeReason(Why.LEFT_DELETE, count=len(eph), flag=verdict.confirmed)
    return Change(key=ld.key, action=Action.DELETE, reasons=(reason,), live=ld)


def _kept(ld: LiveDomain, reason: ChangeReason) -> Change:
    """A domain whose VM left git, kept: an adopted one is released (its mark says so, so
    another owner may adopt it), everything else is left as it is."""
    mark = ld.mark
    if mark is None or not mark.adopted_from or mark.released:
        return Change(key=ld.key, action=Action.SKIPPED, reasons=(reason,), live=ld)
    released = replace(mark, released=True)
    return Change(
        key=ld.key,
        action=Action.UPDATE,
        reasons=(reason, ChangeReason(Why.RELEASED)),
        live=ld,
        definition=Definition(ownership.with_mark(ld.persistent_xml, released), released),
    )


def _target_host(c: Change) -> str:
    return c.desired.hostname if c.desired is not None else ""
