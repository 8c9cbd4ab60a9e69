"""Pair desired and live domains by VM key, classify, order -> Plan.

Input: rendered domains (every VM in git, any host), live domains of one host, the
host's policy, and optionally the current time (crash-loop back-off), a
``CompareCache`` (results of earlier comparisons, keyed by the compared XML) and a
mapper (``context.Mapper``: one that spreads its work makes the comparisons not cached
first). Output: a ``Plan`` with one ``Change`` per domain, each with a one-line reason, its changed
fields and their class, the live operations apply will run and, when apply defines the
domain, its final ``Definition`` (rendered XML, addresses carried from the live
definition, ownership mark: ``compare.definition``), which apply defines as it is; its
errors and warnings are ``Problem`` records.
Pure: ``plan`` prints exactly what ``apply`` will run; no libvirt, no clock (``now`` is
passed in). A domain's rendered and live XML are each parsed at most once, shared by
the comparison and the definition (none when the comparison is cached and nothing is
defined).

Per VM assigned to this host (DESIGN §5):
- not on the host: ``create`` (started under Always / RerunOnFailure / Once);
- on the host without our mark: ``skipped`` with an error, or ``adopt`` when the VM
  says ``reconciler.kubevirt.io/adopt: "true"``;
- otherwise the persistent definition is compared (``update`` when it differs, live
  fields become live operations on a running domain), the running domain too
  (restart-class differences: ``restart`` under rollout Restart, else RestartRequired),
  and the run strategy decides ``start`` / ``stop`` (see ``power.py``);
- a difference the reconciler did not make (the mark's spec hash is current) is drift:
  reverted with ``selfHeal``, reported otherwise; judged on the definition it happened
  to (a persistent-only edit is corrected in the persistent definition, and the guest
  is restarted only when what it runs differs from git).
Managed domains whose VM left git are pruned when enabled, within ``maxPrunePercent``
and ``maxPrune`` (counted over the daemon's prune window: see ownership/guard.py).

This module pairs and decides which case a VM is; the plan of a domain that exists
(comparison, drift, restart and power) is ``plan/existing.py``'s, the prunes
``plan/prune.py``'s.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.compare.cache import CompareCache, compare_all
from reconciler.compare.definition import Documents
from reconciler.context import SERIAL
from reconciler.model import (
    LiveDomain,
    OwnershipMark,
    Problem,
    RenderedDomain,
    Severity,
    VMKey,
)
from reconciler.model.changes import (
    Action,
    Change,
    Plan,
)
from reconciler.model.plan_errors import PlanError, Unplanned
from reconciler.model.problems import Notice
from reconciler.model.reasons import ChangeReason, Why
from reconciler.plan import moves
from reconciler.plan.autoheal import autohealed
from reconciler.plan.existing import plan_existing
from reconciler.plan.power import KEEP_RUNNING, START_ON_CREATE, Backoff
from reconciler.plan.prune import prune_changes
from reconciler.wording import plan_errors

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.context import Mapper
    from reconciler.settings.policy import PlanPolicy

__all__ = [
    "KEEP_RUNNING",
    "START_ON_CREATE",
    "build_plan",
]


def build_plan(
    revision: str,
    desired: Sequence[RenderedDomain],
    live: Sequence[LiveDomain],
    policy: PlanPolicy,
    errors: Sequence[Problem] = (),
    failed: Sequence[VMKey] = (),
    *,
    now: float | None = None,
    cache: CompareCache | None = None,
    mapper: Mapper = SERIAL,
    define: bool = True,
    away: Sequence[VMKey] = (),
) -> Plan:
    """Plan one host. ``failed``: VMs in git whose rendering failed (never pruned);
    ``away``: of those, VMs that select another host (no row of this host's).

    ``now`` (epoch seconds) enables the crash-loop back-off; ``cache`` reuses earlier
    comparisons (pass the same object on every plan of this host); with a ``mapper``
    that spreads its work, the comparisons it does not hold are made through it first.
    ``define=False`` leaves out the final definitions (a plan nothing applies: the PR
    diff's simulated host).
    """
    cache = cache if cache is not None else CompareCache()
    try:
        return _build_plan(revision, desired, live, policy, errors, failed, now, cache, mapper, define, away)
    finally:
        cache.end_run()


def _refused(d: RenderedDomain, cur: LiveDomain, error: PlanError, errors: list[Problem]) -> Change:
    """A VM not planned: its plan error (``errors``), and the skipped change that says it."""
    problem = Problem(plan_errors.said(error), vm=d.key)
    errors.append(problem)
    return Change(d.key, Action.SKIPPED, (ChangeReason(Why.PROBLEM, problem=problem),), desired=d, live=cur)


def _build_plan(
    revision: str,
    desired: Sequence[RenderedDomain],
    live: Sequence[LiveDomain],
    policy: PlanPolicy,
    errors: Sequence[Problem],
    failed: Sequence[VMKey],
    now: float | None,
    cache: CompareCache,
    mapper: Mapper,
    define: bool,
    away: Sequence[VMKey],
) -> Plan:
    live, renamed = _former_owners_renamed(live, policy)
    live_by_key = {d.key: d for d in live}
    if mapper.spreads:
        _compare_first(desired, live_by_key, policy, cache, mapper)
    changes: list[Change] = []
    warnings: list[Problem] = []
    plan_errors = list(errors)
    moving: list[Change] = []
    elsewhere: list[tuple[VMKey, str]] = []
    for d in sorted(desired, key=lambda d: d.name):
        cur = live_by_key.get(d.key)
        if not d.runs_on(policy.host, policy.claim_unselected):
            if cur is not None and d.hostname and ownership.claimable(cur.mark, policy.owner):
                moving.append(moves.move_out(d, cur, policy.host))  # selected onto another host
            else:
                elsewhere.append((d.key, d.hostname))
            continue
        held = moves.hold(d, policy.host, policy.elsewhere) if policy.elsewhere is not None else None
        if cur is None:
            changes.append(held if held is not None else _created(d, revision, policy, define))
        elif (refusal := _refusal(d, cur, policy)) is not None:
            changes.append(_refused(d, cur, refusal, plan_errors))  # adoption: one-time, not taken back
        else:
            warnings.extend(_adoption_warnings(d, cur, policy))
            existing = _planned_existing(d, cur, held, policy, cache, now, revision, define, renamed)
            changes.append(
                existing if isinstance(existing, Change) else _refused(d, cur, existing, plan_errors)
            )
    # Prunes first: a VM renamed in git frees its old domain's disks and MACs before
    # the new one is created.
    in_git = {d.key for d in desired} | set(failed)
    pruned, refused = prune_changes(live_by_key, in_git, policy, warnings, revision, moving)
    changes[:0] = pruned
    planned = {c.key for c in changes}
    failed_here = tuple(
        (k, live_by_key.get(k)) for k in sorted(set(failed) - planned - set(away), key=lambda k: k.domain)
    )
    return Plan(
        revision=revision,
        changes=tuple(changes),
        errors=tuple(plan_errors),
        warnings=tuple(warnings),
        owner=policy.owner,
        prune_refused=refused,
        failed=failed_here,
        other_hosts=tuple(elsewhere),
    )


def _compare_first(
    desired: Sequence[RenderedDomain],
    live_by_key: Mapping[VMKey, LiveDomain],
    policy: PlanPolicy,
    cache: CompareCache,
    mapper: Mapper,
) -> None:
    """The comparisons the plan will make, made all at once first through ``mapper``."""
    pairs = [
        (d, cur)
        for d in desired
        if (cur := live_by_key.get(d.key)) is not None and _compared_here(d, cur, policy)
    ]
    compare_all(cache, pairs, mapper)


def _created(d: RenderedDomain, revision: str, policy: PlanPolicy, define: bool) -> Change:
    """The change that creates ``d`` (not on the host), started as its run strategy says."""
    start = d.run_strategy in START_ON_CREATE
    mark = ownership.mark_for(d, revision, None, policy.owner)
    return Change(
        key=d.key,
        action=Action.CREATE,
        reasons=(ChangeReason(Why.CREATE, text=str(d.run_strategy), flag=start),),
        desired=d,
        start=start,
        definition=Documents(d, None).definition(mark) if define else None,
    )


def _refusal(d: RenderedDomain, cur: LiveDomain, policy: PlanPolicy) -> PlanError | None:
    """Why the plan may not manage the domain ``cur`` of ``d`` (None when it may): one its
    owner adopted and keeps, or one unmanaged or another's that ``d`` does not adopt."""
    if d.adopt:
        return ownership.adoption_refused(cur.mark, policy.owner)
    if cur.mark is None:
        return PlanError(Unplanned.UNMANAGED)
    if ownership.foreign(cur.mark, policy.owner):
        return PlanError(Unplanned.OTHER_OWNER, owner=cur.mark.owner)
    return None


def _adoption_warnings(d: RenderedDomain, cur: LiveDomain, policy: PlanPolicy) -> list[Problem]:
    """The warnings of a domain the plan manages: an adopt annotation left after the
    adoption, and disks whose size in git is not the size they were made with."""
    warnings: list[Problem] = []
    if d.adopt and ownership.owned_by(cur.mark, policy.owner) and cur.mark and cur.mark.adopted_from:
        adopted = PlanError(Unplanned.ADOPTED, came=cur.mark.adopted_from)
        warnings.append(
            Problem(
                plan_errors.said(adopted),
                vm=d.key,
                severity=Severity.WARNING,
            )
        )
    if cur.mark is not None:
        warnings.extend(unresized_disks(d, cur.mark))
    return warnings


def _planned_existing(
    d: RenderedDomain,
    cur: LiveDomain,
    held: Change | None,
    policy: PlanPolicy,
    cache: CompareCache,
    now: float | None,
    revision: str,
    define: bool,
    renamed: frozenset[str],
) -> Change | PlanError:
    """The change of a domain the plan manages (``plan/existing.py``), healed after crashes
    and not started while another host ``held`` a copy; or why it cannot be compared (one
    VM's bad XML never stops the others)."""
    try:
        change = plan_existing(d, cur, policy, cache, now, revision, define, cur.name in renamed)
        backoff = Backoff(policy.crash_backoff_s, policy.crash_backoff_max_s, policy.crash_reset_s)
        change = autohealed(change, now=now, backoff=backoff, revision=revision, owner=policy.owner)
    except (ValueError, ET.ParseError) as err:
        return PlanError(Unplanned.NOT_COMPARED, detail=str(err))
    if held is not None and change.start:  # never two running copies
        change = replace(
            change,
            action=Action.WAIT if change.action == Action.START else change.action,
            start=False,
            reasons=(*change.reasons, ChangeReason(Why.NOT_STARTED, of=held.reasons)),
            requeue_after_s=held.requeue_after_s,
        )
    return change


def _compared_here(d: RenderedDomain, cur: LiveDomain, policy: PlanPolicy) -> bool:
    """Whether the plan compares ``d`` with the live domain of its key (as ``_build_plan``
    decides): one assigned to this host, ours or one the VM adopts (another's is a plan
    error, never compared)."""
    return d.runs_on(policy.host, policy.claim_unselected) and (
        d.adopt or not (cur.mark is None or ownership.foreign(cur.mark, policy.owner))
    )


def unresized_disks(d: RenderedDomain, mark: OwnershipMark) -> list[Problem]:
    """A warning per disk whose size in git differs from the size it was created with (an
    existing disk is never resized, grown or shrunk: the plan says so, and how)."""
    if not mark.volumes or d.sizes_made(mark.volumes):  # what most plans find: no volume read
        return []
    made = dict(mark.volumes)
    out: list[Problem] = []
    for v in d.volumes:
        was = made.get(v.path)
        if was is None or v.capacity <= 0 or v.capacity == was:
            continue
        unresized = PlanError(Unplanned.DISK_NOT_RESIZED, path=v.path, size=v.capacity, was=was)
        out.append(
            Problem(
                plan_errors.said(unresized),
                vm=d.key,
                severity=Severity.WARNING,
                notice=Notice.DISK_NOT_RESIZED,
            )
        )
    return out


def _former_owners_renamed(
    live: Sequence[LiveDomain], policy: PlanPolicy
) -> tuple[Sequence[LiveDomain], frozenset[str]]:
    """The live domains with the marks of a former owner (``policy.former_owners``) read
    as this owner's, and the names of those domains (planned to be marked again)."""
    if not policy.former_owners:
        return live, frozenset()
    former = set(policy.former_owners)
    out: list[LiveDomain] = []
    renamed: set[str] = set()
    for d in live:
        if d.mark is not None and d.mark.owner in former:
            d = replace(d, mark=replace(d.mark, owner=policy.owner))
            renamed.add(d.name)
        out.append(d)
    return out, frozenset(renamed)
