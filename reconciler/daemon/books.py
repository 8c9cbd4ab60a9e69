"""What the daemon keeps of each host between reconciles, and reads of it: the prune
guard's memory (the managed set, a refusal), the host's copies (host moves), warnings
and drift logged once, the events a plan itself causes, the domains after an apply.

Input: a host's runner as ``Booked`` says (its state, target, clock, connection; the
runner, ``daemon/runner.py``, is one and imports this module), plans, statuses,
``state.json`` rows. Output: that runner's state replaced by what its steps return, a
guarded target, log lines. Reads libvirt (through the runner's connection) only to list
domains; never plans or applies.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from reconciler import ownership
from reconciler.daemon import hoststate, rollouts
from reconciler.desired import PipelineCache
from reconciler.errors import HypervisorError, HypervisorUnavailable, ReconcilerError, SignatureError
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.results import Reason, ReconcileStatus, Sync, VMStatus
from reconciler.plan.moves import RECHECK_S
from reconciler.settings.policy import Elsewhere
from reconciler.status import refused as kept_refusal
from reconciler.wording import outcome, problems, refusal
from reconciler.wording import plan_lines as plan_words
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from reconciler.context import Clock
    from reconciler.daemon.hoststate import HostState
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model import LiveDomain
    from reconciler.settings.targets import HostTarget

log = structlog.get_logger("reconciler.daemon")


class Runner(Protocol):
    """A host's runner as the modules below it name it: its name, target and clock."""

    @property
    def name(self) -> str: ...

    @property
    def target(self) -> HostTarget: ...

    @property
    def clock(self) -> Clock: ...


class Booked(Runner, Protocol):
    """What the bookkeeping needs of a host's runner: its state (replaced, never written
    field by field), name, target, clock, the prune window's length, its last plan and its
    connection."""

    state: HostState

    @property
    def window_s(self) -> float: ...

    @property
    def plan(self) -> Plan | None: ...

    def connect(self) -> Hypervisor: ...

    def close(self) -> None: ...


def restore_guard(h: Booked, recorded: Any) -> None:
    """The prune guard's memory from state.json: the managed set, the window and a refusal."""
    h.state = hoststate.guard_restored(h.state, recorded)


def window_base(h: Booked) -> tuple[str, ...] | None:
    """The managed set the prune guard counts against: the window's, while it holds. The
    window runs on the wall clock (kept in state.json across restarts): one stepped back
    before its start keeps it, starting now (its prunes still counted, not a new window
    opened by the step); one at or past its end ends it (a refusal does not hold it open):
    the managed set of the last apply counts, and the next apply opens a new window."""
    h.state = hoststate.window_at(h.state, h.clock.time(), h.window_s)
    return h.state.window[1] if h.state.window is not None else h.state.managed


def guarded(h: Booked, hosts: Sequence[Booked]) -> HostTarget:
    """The target with the guard's inputs (the managed set at the prune window's start, a
    refusal) and, with several hosts, where the other hosts hold copies (host moves)."""
    refused = h.state.prune_refused
    held = (refused["revision"], refused["limit"]) if refused else None
    managed = window_base(h)
    base = frozenset(managed) if managed is not None else None
    elsewhere = None
    if len(hosts) > 1:
        others = [o for o in hosts if o is not h]
        elsewhere = Elsewhere(
            {name: o.name for o in others for name in sorted(o.state.copies or ())},
            frozenset(o.name for o in others if not o.state.reachable),
            frozenset(o.name for o in others),
        )
    policy = replace(h.target.policy, prune_base=base, prune_held=held, elsewhere=elsewhere)
    return replace(h.target, policy=policy)


def unguarded(target: HostTarget) -> HostTarget:
    """``target`` without the guard's inputs, which ``guarded`` makes again for each pass:
    the managed set at the window's start and the other hosts' copies (a fleet's names)
    are not held between passes."""
    policy = target.policy
    if policy.prune_base is None and policy.elsewhere is None:
        return target
    return replace(target, policy=replace(policy, prune_base=None, elsewhere=None))


def read_copies(h: Booked) -> None:
    """Our domains on ``h`` now; when it cannot be reached, the last known ones stand."""
    h.state = hoststate.unread(h.state, None)
    try:
        live = h.connect().list_domains()
    except HypervisorError as err:
        h.close()
        h.state = hoststate.unread(h.state, err)
        log.warning("host unreachable: its domains are taken as last known", host=h.name, error=str(err))
        return
    h.state = hoststate.read(
        h.state, frozenset(d.name for d in live if ownership.claimable(d.mark, h.target.policy.owner))
    )


def restore_copies(h: Booked, rows: Any) -> None:
    """The last known domains of ``h`` from state.json (until the host is read)."""
    if not isinstance(rows, list):
        return
    copies = frozenset(
        str(r.get("name"))
        for r in rows
        if isinstance(r, dict)
        and r.get("host") == h.name
        and r.get("state") not in ("deleted", "absent", None)
        and r.get("sync") != Sync.UNMANAGED
    )
    applied_at = {
        str(r.get("name")): float(r["applied_at"])
        for r in rows
        if isinstance(r, dict) and r.get("host") == h.name and isinstance(r.get("applied_at"), int | float)
    }
    h.state = hoststate.restored(hoststate.last_copies(h.state, copies), h.state.applied, applied_at)


def record_guard(h: Booked, plan: Plan, status: ReconcileStatus, after: list[LiveDomain]) -> None:
    policy = h.target.policy
    if plan.prune_refused is not None:
        before = h.state.prune_refused
        would_prune = sorted(c.name for c in plan.changes if held_by_guard(c, policy.owner, policy.prune))
        h.state = hoststate.refusal(
            h.state, kept_refusal.kept(plan.prune_refused, policy.max_prune_percent, would_prune)
        )
        if before is not None and kept_refusal.recorded(before) == plan.prune_refused:
            return  # logged when it first happened; the state file and status keep saying it
        log.warning(
            "prune refused",
            host=h.name,
            revision=plan.revision[:12],
            would_prune=would_prune,
            message=refusal.said(plan.prune_refused),
        )
    elif status.reason == Reason.SUCCEEDED:
        h.state = hoststate.refusal(h.state, None)
    if status.reason == Reason.SUCCEEDED and status.applied_revision:
        # Interned: one copy of each name for this tuple and the prune window's (state.json)
        managed = tuple(sorted(sys.intern(d.name) for d in after if ownership.owned_by(d.mark, policy.owner)))
        h.state = hoststate.applied_managed(h.state, managed, h.clock.time(), h.window_s)


def held_by_guard(c: Change, owner: str, prune: bool) -> bool:
    """A domain that left git and would be pruned, but for the prune guard (plan.build)."""
    mark = c.live.mark if c.live is not None else None
    return (
        c.desired is None
        and c.action == Action.SKIPPED
        and prune
        and mark is not None
        and ownership.owned_by(mark, owner)
        and mark.prune
    )


def log_plan_warnings(h: Booked, plan: Plan) -> None:
    """Each plan warning (stale facts file, pod network fallback, deprecations, ...), one
    line per cause as ``plan`` prints it, once while it holds."""
    current = frozenset(problems.group(plan.warnings))
    for warning in sorted(current - h.state.warned):
        log.warning("plan warning", host=h.name, warning=warning)
    h.state = hoststate.logged(h.state, warned=current)


def log_other_hosts(h: Booked, plan: Plan) -> None:
    """The VMs of the revision this host leaves to others, when that list changes."""
    now = frozenset((k.subject, host) for k, host in plan.other_hosts)
    if now != h.state.elsewhere_logged and now:
        log.info(
            "VMs on other hosts",
            host=h.name,
            count=len(now),
            vms=[plan_words.elsewhere(s, o) for s, o in sorted(now)][:50],
        )
    h.state = hoststate.logged(h.state, elsewhere=now)


def log_drift(h: Booked, plan: Plan) -> None:
    """One event per drift reported and not reverted (selfHeal off), when it first appears."""
    now = frozenset((c.name, said(c)) for c in plan.changes if c.drift and c.action == Action.UNCHANGED)
    for name, reason in sorted(now - h.state.drift_logged):
        c = next(c for c in plan.changes if c.name == name)
        log.warning(
            "drift",
            host=h.name,
            subject=c.subject,
            fields=[f.path for f in c.fields],
            reason=reason,
            self_heal=h.target.policy.self_heal,
        )
    h.state = hoststate.logged(h.state, drift=now)


def expected_events(hosts: Iterable[Booked], until: float) -> dict[tuple[str, str, str], float]:
    """(host, domain, event) of every lifecycle event the hosts' last plans cause
    themselves, each ignored until ``until`` (monotonic)."""
    return {
        (h.name, c.name, event): until
        for h in hosts
        if h.plan is not None
        for c in h.plan.changes
        for event in caused_events(c)
    }


def retryable(hosts: Iterable[Booked]) -> bool:
    """Whether a host's last reconcile failed in a way worth retrying with back-off."""
    for h in hosts:
        st = h.state.status
        if st is None or st.reason == Reason.SUCCEEDED:
            continue
        if st.reason == Reason.APPLY_FAILED or any(not r.ok and r.transient for r in st.results):
            return True
    return False


def caused_events(c: Change) -> frozenset[str]:
    """The lifecycle events applying ``c`` itself causes (a crash never is one of them)."""
    if c.is_noop:
        return frozenset()
    words = {"defined"} if c.defines else set()
    if c.start or c.action == Action.RESTART:
        words |= {"started", "resumed"}
    if c.stop or c.action in (Action.RESTART, Action.DELETE):
        words |= {"shutdown", "stopped"}
    if c.action == Action.DELETE:
        words |= {"undefined"}
    if c.live_ops:
        words |= {"device-added", "device-removed", "metadata-change"}
    if c.start or c.live_ops or c.action == Action.RESTART:
        words |= {"metadata-change"}  # the mark's run bookkeeping / unplugs written through the API
    return frozenset(words)


def new_cache() -> PipelineCache:
    """The cache plan_revision keeps between reconciles of one host (expansion, render, plan).
    The daemon only plans and applies: it keeps rendered domains, not expanded VMs."""
    return PipelineCache(keep_expanded=False)


def live_after(hv: Hypervisor, plan: Plan, host: str, owner: str = "") -> list[LiveDomain]:
    """Domains after apply, for the status rows: what the plan read for untouched domains,
    a fresh read of the ones it changed (their states and marks: not their running XML,
    which nothing after the apply reads). A domain that vanished is simply absent."""
    if plan.errors and not plan.changes:  # a broken revision touched nothing: list what is there
        try:
            return [d for d in hv.list_domains() if ownership.claimable(d.mark, owner)]
        except HypervisorError as err:
            log.warning("cannot read domains after apply", host=host, error=str(err))
            return []
    changed = {c.name for c in plan.changes if not c.is_noop}
    live = {c.name: c.live for c in plan.changes if c.live is not None and c.name not in changed}
    for name in sorted(changed):
        try:
            domain = hv.get_domain(name, live=False)
        except HypervisorError as err:
            if isinstance(err, HypervisorUnavailable):
                log.warning("cannot read domains after apply", host=host, error=str(err))
                break
            continue
        if domain is not None:
            live[name] = domain
    return list(live.values())


def with_sync(row: VMStatus, sync: Sync, message: str) -> VMStatus:
    return replace(row, sync=sync, message=message)


def failed_commit(err: ReconcilerError) -> str:
    """The commit a source error refuses (one that does not verify); ``""`` if none."""
    return err.commit if isinstance(err, SignatureError) else ""


def requeue_waits(plans: Iterable[Plan | None]) -> list[tuple[float, str]]:
    """(seconds, why) of each wait the plans ask to be planned again after: a crash-loop
    back-off, a restart window opening, a host move half done (the new host may start
    its copy then)."""
    waits: list[tuple[float, str]] = []
    plans = list(plans)
    changes = [c for p in plans if p is not None for c in p.changes]
    for c in changes:
        if c.requeue_after_s > 0 and c.action != Action.WAIT:
            waits.append((c.requeue_after_s, outcome.replan_wait(c.subject, c.restart_window)))
    if any(c.action == Action.WAIT for c in changes) and any(
        c.action == Action.DELETE and c.desired is not None for c in changes
    ):
        waits.append((RECHECK_S, outcome.HOST_MOVE_WAIT))
    return waits + rollouts.requeue(p.pacing for p in plans if p is not None)
