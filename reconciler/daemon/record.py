"""What the daemon records and shows of its reconciles, apart from the loop.

Input: the host runners after a reconcile (status, rows, plan, applied commit) and the
daemon's overall outcome (attempted and applied revision, reason, message, rollback).
Output: the hosts' part of ``state.json``, the applied commit rebuilt from the domains'
marks when the state file was unusable, the ``/healthz`` answer, the one-line status
for sd_notify, and the plans and table printed by ``--once`` / ``--show-plans``. Reads
the hosts' domains only to rebuild from their marks; never plans or applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from reconciler import ownership
from reconciler.daemon import health
from reconciler.errors import HypervisorError
from reconciler.model.results import Reason
from reconciler.plan.text import format_plan
from reconciler.status import format_table
from reconciler.status import state as state_store

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
            **({"managed": list(h.managed)} if h.managed is not None else {}),
            **({"prune_refused": h.prune_refused} if h.prune_refused else {}),
            **(
                {"other_hosts": [{"subject": s, "host": o} for s, o in h.other_hosts]}
                if h.other_hosts
                else {}
            ),
        }
    return out


def rebuild_from_marks(hosts: Sequence[HostRunner], applied: str) -> str:
    """No usable state file: each host's last applied commit is what its domains' marks
    say; returns the overall one (``applied`` if known, else the hosts' most common)."""
    for h in hosts:
        if h.applied:
            continue
        try:
            owner = h.target.policy.owner  # another owner's marks say nothing of our commits
            ours = [d for d in h.connect().list_domains() if ownership.claimable(d.mark, owner)]
            h.applied = state_store.applied_from_marks(ours)
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
) -> tuple[bool, dict[str, Any]]:
    """(ok, body) for ``/healthz``."""
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
    info = {
        "attempted_revision": attempted,
        "applied_revision": applied,
        "reason": reason,
        "hosts": health.host_body(states),
        "problems": problems,
        **({"rollback": known_rollback.to_json()} if known_rollback else {}),
    }
    return ok, info


def status_line(hosts: Sequence[HostRunner], attempted: str, applied: str, reason: str) -> str:
    """One line for sd_notify's STATUS: the applied commit, VMs synced and failed."""
    rows = [r for h in hosts for r in h.rows]
    synced = sum(1 for r in rows if r.sync == "Synced")
    failed = sum(1 for r in rows if r.sync == "Failed")
    shown = applied[:12] or "none"
    text = f"applied {shown}; {len(rows)} VMs, {synced} synced, {failed} failed"
    if reason and reason != Reason.SUCCEEDED:
        text += f"; {attempted[:12]} {reason}"
    return text


def print_plans(hosts: Sequence[HostRunner], reason: str, message: str, out: TextIO, now: float) -> None:
    """Each host's plan and status table (ages as of ``now``, wall time), then the failure, if any."""
    for h in hosts:
        if h.plan is not None:
            print(format_plan(h.plan), file=out)
            print(file=out)
        if h.rows:
            print(format_table(h.rows, now), file=out)
            print(file=out)
    if message:
        print(f"{reason}: {message}", file=out)
    out.flush()
