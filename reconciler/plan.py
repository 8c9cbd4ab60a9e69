"""Pair desired and live domains by name, classify, order -> Plan.

Input: rendered domains (every VM in git, any host), live domains of one host, and
the host's policy. Output: a ``Plan`` with one ``Change`` per domain, each with a
one-line reason. Pure: ``plan`` prints exactly what ``apply`` will run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.diff import diff_domains
from reconciler.model import (
    Action,
    Change,
    ChangeClass,
    LiveDomain,
    Plan,
    RenderedDomain,
    Rollout,
    RunStrategy,
)


@dataclass(frozen=True, slots=True)
class PlanPolicy:
    host: str = ""  # this host's name (kubernetes.io/hostname)
    claim_unselected: bool = True
    prune: bool = False
    max_prune_percent: int = 30
    self_heal: bool = True
    rollout: Rollout = Rollout.STAGE


# Strategies under which the reconciler keeps the domain running.
KEEP_RUNNING = (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE)
# Strategies started when the domain is first created.
START_ON_CREATE = (RunStrategy.ALWAYS, RunStrategy.RERUN_ON_FAILURE, RunStrategy.ONCE)


def assigned(d: RenderedDomain, policy: PlanPolicy) -> bool:
    if d.hostname:
        return d.hostname == policy.host
    return policy.claim_unselected


def _plan_existing(d: RenderedDomain, live: LiveDomain, policy: PlanPolicy) -> Change:
    fields = diff_domains(d.xml, live.persistent_xml)
    mark = live.mark
    spec_moved = mark is None or mark.spec_hash != d.spec_hash
    drift = bool(fields) and not spec_moved

    want_running = d.run_strategy in KEEP_RUNNING
    want_stopped = d.run_strategy == RunStrategy.HALTED
    start = want_running and not live.active
    stop = want_stopped and live.active

    restart_fields = [f for f in fields if f.change_class == ChangeClass.RESTART]
    rollout = d.rollout or policy.rollout
    restart_required = False
    action = Action.UPDATE if (fields or spec_moved) else Action.UNCHANGED
    if drift and not policy.self_heal:
        action = Action.UNCHANGED
    reason_parts: list[str] = []

    if mark is None:
        action = Action.ADOPT
        reason_parts.append("adopting an existing domain (reconciler.kubevirt.io/adopt)")
    elif fields:
        what = ", ".join(f.path for f in fields[:4]) + (f" (+{len(fields) - 4} more)" if len(fields) > 4 else "")
        if drift:
            heal = "reverting" if policy.self_heal else "reporting only (selfHeal off)"
            reason_parts.append(f"drift from git in {what}: {heal}")
        else:
            reason_parts.append(f"spec changed: {what}")
    elif spec_moved:
        reason_parts.append("ownership record refreshed (rendering changed, no field differs)")

    if live.active and restart_fields and action != Action.UNCHANGED and not stop:
        if rollout == Rollout.RESTART and d.run_strategy in KEEP_RUNNING:
            action = Action.RESTART
            reason_parts.append("restart-class change: restarting (rollout Restart)")
        else:
            restart_required = True
            reason_parts.append("restart-class change staged: RestartRequired until the next cold boot")

    if start:
        reason_parts.append(f"runStrategy {d.run_strategy}: domain is {live.state}, starting")
        if action == Action.UNCHANGED:
            action = Action.START
    if stop:
        reason_parts.append(f"runStrategy {d.run_strategy}: domain is {live.state}, stopping")
        if action == Action.UNCHANGED:
            action = Action.STOP

    if not reason_parts:
        reason_parts.append(f"in sync ({d.run_strategy}, {live.state})")
    return Change(
        subject=d.subject,
        name=d.name,
        action=action,
        reason="; ".join(reason_parts),
        fields=fields,
        desired=d,
        live=live,
        start=start,
        stop=stop,
        restart_required=restart_required,
    )


def build_plan(
    revision: str,
    desired: Sequence[RenderedDomain],
    live: Sequence[LiveDomain],
    policy: PlanPolicy,
    errors: Sequence[str] = (),
    failed_names: Sequence[str] = (),
) -> Plan:
    """Plan one host. ``failed_names``: VMs in git whose rendering failed (never pruned)."""
    live_by_name = {d.name: d for d in live}
    in_git = {d.name for d in desired} | set(failed_names)
    changes: list[Change] = []
    warnings: list[str] = []

    for d in sorted(desired, key=lambda d: d.name):
        if not assigned(d, policy):
            continue
        cur = live_by_name.get(d.name)
        if cur is None:
            start = d.run_strategy in START_ON_CREATE
            changes.append(
                Change(
                    subject=d.subject,
                    name=d.name,
                    action=Action.CREATE,
                    reason=f"not defined on this host; runStrategy {d.run_strategy}"
                    + (": define and start" if start else ": define only"),
                    desired=d,
                    start=start,
                )
            )
        elif cur.mark is None and not d.adopt:
            changes.append(
                Change(
                    subject=d.subject,
                    name=d.name,
                    action=Action.SKIPPED,
                    reason="a domain of this name exists and is not managed by the reconciler; "
                    'set annotation reconciler.kubevirt.io/adopt: "true" to take it over',
                    desired=d,
                    live=cur,
                )
            )
        else:
            changes.append(_plan_existing(d, cur, policy))

    orphans = sorted((ld for ld in live if ld.mark is not None and ld.name not in in_git), key=lambda d: d.name)
    managed = sum(1 for ld in live if ld.mark is not None)
    prunable = [ld for ld in orphans if ld.mark is not None and ld.mark.prune]
    guard_tripped = bool(prunable) and managed > 0 and len(prunable) * 100 > policy.max_prune_percent * managed
    if guard_tripped:
        warnings.append(
            f"prune refused: {len(prunable)} of {managed} managed domains would be deleted, "
            f"more than maxPrunePercent={policy.max_prune_percent}"
        )
    for ld in orphans:
        subject = f"vm/{ld.name}"
        if not policy.prune:
            action, reason = Action.SKIPPED, "VM left git; pruning is disabled, domain kept"
        elif ld.mark is not None and not ld.mark.prune:
            action, reason = Action.SKIPPED, "VM left git; kept (reconciler.kubevirt.io/prune: false)"
        elif guard_tripped:
            action, reason = Action.SKIPPED, f"VM left git; not pruned: {warnings[-1]}"
        else:
            action, reason = Action.DELETE, "VM left git: stop gracefully and undefine (disks kept)"
        changes.append(Change(subject=subject, name=ld.name, action=action, reason=reason, live=ld))

    return Plan(revision=revision, changes=tuple(changes), errors=tuple(errors), warnings=tuple(warnings))


def format_plan(plan: Plan, verbose: bool = False) -> str:
    """Human-readable plan: one line per domain, then the changed fields."""
    lines = [f"plan for revision {plan.revision[:12]}:"]
    for c in plan.changes:
        if c.is_noop and not verbose and c.action == Action.UNCHANGED:
            continue
        lines.append(f"  {c.subject}: {c.action} - {c.reason}")
        for f in c.fields:
            lines.append(f"      {f.change_class:<7} {f.path}: {f.old!r} -> {f.new!r}")
    unchanged = sum(1 for c in plan.changes if c.action == Action.UNCHANGED)
    if unchanged and not verbose:
        lines.append(f"  ({unchanged} unchanged)")
    for w in plan.warnings:
        lines.append(f"  warning: {w}")
    for e in plan.errors:
        lines.append(f"  error: {e}")
    return "\n".join(lines)
