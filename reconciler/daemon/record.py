"""What the daemon records and shows of its reconciles, apart from the loop.

Input: the host runners after a reconcile (status, rows, plan, applied commit) and the
daemon's overall outcome (attempted and applied revision, reason, message, rollback).
Output: the hosts' part of ``state.json`` (a host that holds at its applied revision
says so: ``held``), the applied commit rebuilt from the domains' marks when the state
file was unusable, the ``/healthz`` answer, the one-line status for sd_notify, and the
plans and table printed by ``--once`` / ``--show-plans`` (the latter only when they
changed). Reads
the hosts' domains only to rebuild from their marks; never plans or applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from reconciler import ownership
from reconciler.daemon import health, hoststate, liveness, rollouts
from reconciler.errors import HypervisorError
from reconciler.model.results import Reason, Sync
from reconciler.plan.text import format_plan
from reconciler.status import state as state_store
from reconciler.status.table import format_table
from reconciler.wording import outcome

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TextIO

    from reconciler.daemon import rollback
    from reconciler.daemon.runner import HostRunner

log = structlog.get_logger("reconciler.daemon")


def hosts_state(hosts: Sequence[HostRunner]) -> dict[str, Any]:
    """Each host's last outcome, as ``state.json`` keeps it under ``hosts``."""
    out: dict[str, Any] = {}
    for h in hosts:
        st = h.status
        out[h.name] = {
            "uri": h.entry.uri,
            "reason": str(st.reason) if st else "",
            "message": st.message if st else "",
            "attempted_revision": st.attempted_revision if st else "",
            "applied_revision": h.applied,
            "duration_ms": st.duration_ms if st else 0,
            "owner": h.target.policy.owner,
            **({"managed": list(h.managed)} if h.managed is not None else {}),
            **({"prune_window": {"since": h.window[0], "managed": list(h.window[1])}} if h.window else {}),
            **({"prune_refused": h.prune_refused} if h.prune_refused else {}),
            **({"held": held(h)} if h.blocked is not None and h.applied else {}),
            **rollouts.state(h.paced),
            **liveness.state(h),
            **(
                {"other_hosts": [{"subject": s, "host": o} for s, o in h.other_hosts]}
                if h.other_hosts
                else {}
            ),
        }
    return out


def held(h: HostRunner) -> dict[str, str]:
    """Both truths of a host that holds: the revision it enforces and the newer one it
    does not apply, with why."""
    assert h.blocked is not None
    return {
        "enforced": h.applied,
        "blocked": h.blocked.revision,
        "reason": str(h.blocked.reason),
        "message": h.blocked.message[:500],
    }


def rebuild_from_marks(hosts: Sequence[HostRunner], applied: str) -> str:
    """No usable state file: each host's last applied commit is what its domains' marks
    say; returns the overall one (``applied`` if known, else the hosts' most common)."""
    for h in hosts:
        if h.applied:
            continue
        try:
            owner = h.target.policy.owner  # another owner's marks say nothing of our commits
            ours = [d for d in h.connect().list_domains() if ownership.claimable(d.mark, owner)]
            h.state = hoststate.restored(h.state, state_store.applied_from_marks(ours))
        except HypervisorError as err:
            log.warning("cannot read the host's marks to rebuild the state", host=h.name, error=str(err))
    if not applied:
        known = [h.applied for h in hosts if h.applied]
        applied = max(set(known), key=known.count) if known else ""
    if applied:
        log.info("state rebuilt from the domains' marks", applied=applied[:12])
    return applied


def healthz(
    hosts: Sequence[HostRunner],
    attempted: str,
    applied: str,
    reason: str,
    message: str,
    stopping: bool,
    known_rollback: rollback.Rollback | None,
    state_error: str = "",
) -> tuple[bool, dict[str, Any]]:
    """(ok, body) for ``/healthz`` (``state_error``: why state.json cannot be written)."""
    states = [
        health.HostHealth(
            h.name,
            h.entry.uri,
            h.unreachable,
            str(h.status.reason) if h.status else "",
            h.status.message if h.status else "",
            h.applied,
        )
        for h in hosts
    ]
    ok, problems = health.readiness(states, reason, message, stopping)
    if state_error:
        ok, problems = False, [*problems, outcome.state_file(state_error)]
    info = {
        "attempted_revision": attempted,
        "applied_revision": applied,
        "reason": reason,
        "hosts": health.host_body(states),
        "problems": problems,
        **({"rollback": known_rollback.to_json()} if known_rollback else {}),
        **({"held": {h.name: held(h) for h in hosts if h.blocked is not None and h.applied}}),
    }
    return ok, info


def status_line(hosts: Sequence[HostRunner], attempted: str, applied: str, reason: str) -> str:
    """One line for sd_notify's STATUS: the applied commit, VMs synced and failed."""
    rows = [r for h in hosts for r in h.rows]
    synced = sum(1 for r in rows if r.sync == Sync.SYNCED)
    failed = sum(1 for r in rows if r.sync == Sync.FAILED)
    failing = outcome.failing(attempted, reason) if reason and reason != Reason.SUCCEEDED else ""
    return outcome.status_line(applied, len(rows), synced, failed, failing)


def plans_text(hosts: Sequence[HostRunner]) -> str:
    """Each host's plan (a blocked revision's, with the revision it holds at)."""
    parts = []
    for h in hosts:
        plan = h.head_plan or h.plan
        if plan is not None:
            parts.append(format_plan(plan))
        if h.blocked is not None and h.applied:
            why = h.blocked
            parts.append(
                outcome.host_line(h.name, outcome.held_at(h.applied, why.revision, why.reason, why.message))
            )
    return "\n\n".join(parts)


def print_plans(hosts: Sequence[HostRunner], reason: str, message: str, out: TextIO, now: float) -> None:
    """Each host's plan and status table (ages as of ``now``, wall time), then the failure, if any."""
    text = plans_text(hosts)
    if text:
        print(text, file=out)
        print(file=out)
    for h in hosts:
        if h.rows:
            print(format_table(h.rows, now), file=out)
            print(file=out)
    if message:
        print(outcome.outcome_line(reason, message), file=out)
    out.flush()


def show_changed_plans(
    hosts: Sequence[HostRunner], reason: str, message: str, out: TextIO, now: float, shown: str
) -> str:
    """``--show-plans``: the plans and table when a plan changes something or has errors,
    and only when what it would print differs from ``shown`` (the last printed plans):
    an error that stays is not printed again at every resync. Returns what now counts as shown."""
    worth = any(
        p is not None and (p.has_changes or p.errors) for h in hosts for p in (h.head_plan or h.plan,)
    )
    text = plans_text(hosts) + "\n" + outcome.outcome_line(reason, message)
    if not worth or text == shown:
        return shown if worth else ""
    print_plans(hosts, reason, message, out, now)
    return text
