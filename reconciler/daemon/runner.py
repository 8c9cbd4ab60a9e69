"""One host the daemon drives: its connection, events, guard and copies, and what it
logs and records after each reconcile.

Input: a host entry of the daemon config, the daemon's clock, plans and statuses of its
reconciles. Output: a ``HostRunner`` (connection kept between reconciles, per-host caches) and the
per-host bookkeeping the daemon's loop calls. I/O: libvirt through ``host``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from reconciler import ownership, source
from reconciler.config import targets
from reconciler.daemon import health
from reconciler.desired import PipelineCache
from reconciler.errors import (
    HypervisorError,
    HypervisorUnavailable,
    ReconcilerError,
    SignatureError,
    SourceError,
)
from reconciler.host.hypervisor import Hypervisor
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.results import Reason, ReconcileStatus, VMStatus
from reconciler.plan.moves import Elsewhere
from reconciler.reconcile import apply_planned, plan_revision
from reconciler.status import vm_statuses
from reconciler.wording import problems

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.config.daemon import DaemonConfig, HostEntry
    from reconciler.config.targets import HostTarget
    from reconciler.context import Clock, Context
    from reconciler.daemon.metrics import Metrics
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import LiveDomain, SourceSnapshot

log = structlog.get_logger("reconciler.daemon")


@dataclass
class HostRunner:
    """One libvirt host: its connection (opened lazily, reopened after an outage) and last outcome."""

    entry: HostEntry
    target: HostTarget
    clock: Clock  # the daemon's: wall time for records, monotonic time for durations and probes
    hv: Hypervisor | None = None
    status: ReconcileStatus | None = None
    rows: tuple[VMStatus, ...] = ()
    applied_at: dict[str, float] = field(default_factory=dict)  # by VM, from state.json at start
    applied: str = ""
    plan: Plan | None = None
    cache: PipelineCache | None = None  # the pipeline's cache for this host (expansion, render, plan)
    requeue_s: float = 0.0
    managed: tuple[str, ...] | None = None  # our domains at the last applied revision (prune guard)
    prune_refused: dict[str, Any] | None = None  # the recorded refusal: revision, limit, message
    drift_logged: frozenset[tuple[str, str]] = frozenset()  # (domain, reason) of drift already logged
    copies: frozenset[str] | None = None  # our domains on this host, as last read (host moves)
    warned: frozenset[str] = frozenset()  # plan warnings already logged (each once while it holds)
    elsewhere_logged: frozenset[tuple[str, str]] = frozenset()  # VMs on other hosts last logged
    other_hosts: tuple[tuple[str, str], ...] = ()  # (subject, host) the last plan left to other hosts
    reachable: bool = True
    down: HypervisorError | None = None  # this cycle's connection error (not tried twice)

    on_event: Callable[[str, str, str, str], None] | None = None
    on_close: Callable[[str, str], None] | None = None
    unreachable: str = ""  # why the host cannot be reached ("" = reachable)
    next_probe: float = 0.0  # while unreachable: when to try connecting again
    _unsubscribe: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return self.entry.config.name

    def connect(self) -> Hypervisor:
        if self.hv is not None and not self.hv.alive():
            self.close()
        if self.hv is None:
            self.hv = Hypervisor(self.entry.uri)
            self._subscribe(self.hv)
            self._watch_connection(self.hv)
        return self.hv

    def _watch_connection(self, hv: Hypervisor) -> None:
        """A dropped connection becomes a trigger at once (close callback, keepalive)."""
        if self.on_close is None:
            return
        on_close, host = self.on_close, self.name
        try:
            hv.watch_connection(
                lambda why: on_close(host, why), health.KEEPALIVE_INTERVAL_S, health.KEEPALIVE_COUNT
            )
        except HypervisorError as err:
            log.warning("cannot watch the host connection", host=host, error=str(err))

    def _subscribe(self, hv: Hypervisor) -> None:
        """Lifecycle events of this host's domains become triggers (where the binding offers them)."""
        if self.on_event is None:
            return
        on_event, host = self.on_event, self.name
        try:
            self._unsubscribe = hv.watch_lifecycle(
                lambda dom, event, detail: on_event(host, dom, event, detail)
            )
        except HypervisorError as err:
            log.warning("no lifecycle events from this host", host=host, error=str(err))

    def close(self) -> None:
        if self.hv is not None:
            if self._unsubscribe is not None:
                with contextlib.suppress(HypervisorError):
                    self._unsubscribe()
                self._unsubscribe = None
            self.hv.close()
            self.hv = None

    def reconcile(
        self,
        snapshot: SourceSnapshot,
        path: str,
        hosts: list[HostRunner],
        metrics: Metrics,
        should_stop: Callable[[], bool],
        context: Context | None = None,
        keys: Keys | None = None,
    ) -> None:
        """One reconcile of this host at ``snapshot``: connect, plan, apply, bookkeeping
        (``context``: the daemon's, its caches shared by the hosts and the serial mapper;
        ``keys``: the daemon's SOPS keys). A host error marks it unreachable (probed
        again); nothing raises but the source's."""
        t0 = self.clock.monotonic()
        started = self.clock.time()
        log.debug("reconciling", host=self.name, uri=self.entry.uri)
        try:
            if self.down is not None:
                raise self.down
            hv = self.connect()
            if self.cache is None:
                self.cache = new_cache()
            self.unreachable = ""
            metrics.hosts_up.labels(self.name).set(1)
            self.target = guarded(self, hosts)
            planned = plan_revision(
                snapshot,
                path,
                self.target,
                hv,
                clock=self.clock.time,
                cache=self.cache,
                context=context,
                keys=keys,
            )
            status = apply_planned(  # the plan as made, at once
                planned, hv, should_stop=should_stop, clock=self.clock.time
            )
            plan = planned.plan
            if not hv.alive():  # dropped during the apply: counted as unreachable, probed again
                self.close()
                self.unreachable = f"connection lost: {status.message}"[:300]
            self.requeue_s = min(
                (
                    c.requeue_after_s
                    for c in plan.changes
                    if c.requeue_after_s > 0 and c.action != Action.WAIT
                ),
                default=0.0,
            )
            self.plan = plan
            after = live_after(hv, plan, self.name, self.target.policy.owner)
            self.rows = vm_statuses(
                plan,
                status.results,
                after,
                self.name,
                applied={**self.applied_at, **{r.name: r.applied_at for r in self.rows}},
                now=self.clock.time(),
            )
            record_guard(self, plan, status, after)
            self.copies, self.reachable = (
                frozenset(d.name for d in after if ownership.claimable(d.mark, self.target.policy.owner)),
                True,
            )
            log_drift(self, plan)
            log_plan_warnings(self, plan)
            metrics.observe_plan(self.name, len(plan.other_hosts))
            self.other_hosts = tuple((k.subject, host) for k, host in plan.other_hosts)
            log_other_hosts(self, plan)
        except SourceError:
            raise  # an unreadable object of the commit: the caller repairs the source
        except HypervisorError as err:
            alive = self.hv is not None and self.hv.alive()
            self.close()
            if isinstance(err, HypervisorUnavailable) or not alive:
                self.unreachable = str(err)[:300]
                self.reachable = False
            status = ReconcileStatus(
                Reason.APPLY_FAILED, snapshot.commit, "", started, int((self.clock.monotonic() - t0) * 1000),
                message=f"{self.entry.uri}: {err}",
            )  # fmt: skip
            self.rows = tuple(with_sync(r, "Unknown", f"host unreachable: {err}") for r in self.rows)
        except Exception as err:  # a bug in one stage must not take the daemon down
            log.exception("reconcile crashed", host=self.name)
            status = ReconcileStatus(
                Reason.APPLY_FAILED, snapshot.commit, "", started, int((self.clock.monotonic() - t0) * 1000),
                message=f"internal error: {type(err).__name__}: {err}",
            )  # fmt: skip
        self.status = status
        if self.unreachable:
            metrics.hosts_up.labels(self.name).set(0)
            self.next_probe = self.clock.monotonic() + health.PROBE_INTERVAL_S
        if status.applied_revision:
            self.applied = status.applied_revision
        metrics.observe(self.name, str(status.reason), self.clock.monotonic() - t0, self.rows)
        changes = sum(1 for c in self.plan.changes if not c.is_noop) if self.plan is not None else 0
        level = log.info if status.reason == Reason.SUCCEEDED else log.error
        level(
            "reconciled",
            host=self.name,
            reason=str(status.reason),
            duration_ms=int((self.clock.monotonic() - t0) * 1000),
            changes=changes,
            **({"error": status.message} if status.message else {}),
        )


def make_runner(config: DaemonConfig, entry: HostEntry, clock: Clock) -> HostRunner:
    """A host's runner; its owner names the repository, not this checkout of it (a local
    repository: its remote's URL or root commit, read here; a remote: its URL)."""
    repo = config.source.repo
    identity = source.repository_identity(repo) if repo and not config.source.remote else ""
    return HostRunner(entry, targets.host_target(config, entry, repository=identity), clock)


def restore_guard(h: HostRunner, recorded: Any) -> None:
    """The prune guard's memory from state.json: the managed set and a refusal."""
    if not isinstance(recorded, dict):
        return
    managed = recorded.get("managed")
    if isinstance(managed, list) and all(isinstance(n, str) for n in managed):
        h.managed = tuple(managed)
    refused = recorded.get("prune_refused")
    if (
        isinstance(refused, dict)
        and isinstance(refused.get("revision"), str)
        and isinstance(refused.get("limit"), int)
    ):
        h.prune_refused = refused


def guarded(h: HostRunner, hosts: list[HostRunner]) -> HostTarget:
    """The target with the guard's inputs (the managed set of the last applied revision, a
    refusal) and, with several hosts, where the other hosts hold copies (host moves)."""
    from dataclasses import replace

    held = (h.prune_refused["revision"], h.prune_refused["limit"]) if h.prune_refused else None
    base = frozenset(h.managed) if h.managed is not None else None
    elsewhere = None
    if len(hosts) > 1:
        others = [o for o in hosts if o is not h]
        elsewhere = Elsewhere(
            {name: o.name for o in others for name in sorted(o.copies or ())},
            frozenset(o.name for o in others if not o.reachable),
            frozenset(o.name for o in others),
        )
    policy = replace(h.target.policy, prune_base=base, prune_held=held, elsewhere=elsewhere)
    return replace(h.target, policy=policy)


def read_copies(h: HostRunner) -> None:
    """Our domains on ``h`` now; when it cannot be reached, the last known ones stand."""
    h.down = None
    try:
        live = h.connect().list_domains()
    except HypervisorError as err:
        h.close()
        h.reachable, h.down = False, err
        log.warning("host unreachable: its domains are taken as last known", host=h.name, error=str(err))
        return
    h.copies, h.reachable = (
        frozenset(d.name for d in live if ownership.claimable(d.mark, h.target.policy.owner)),
        True,
    )


def restore_copies(h: HostRunner, rows: Any) -> None:
    """The last known domains of ``h`` from state.json (until the host is read)."""
    if not isinstance(rows, list):
        return
    h.copies = frozenset(
        str(r.get("name"))
        for r in rows
        if isinstance(r, dict)
        and r.get("host") == h.name
        and r.get("state") not in ("deleted", "absent", None)
        and r.get("sync") != "Unmanaged"
    )
    h.applied_at = {
        str(r.get("name")): float(r["applied_at"])
        for r in rows
        if isinstance(r, dict) and r.get("host") == h.name and isinstance(r.get("applied_at"), int | float)
    }


def record_guard(h: HostRunner, plan: Plan, status: ReconcileStatus, after: list[LiveDomain]) -> None:
    policy = h.target.policy
    if plan.prune_refused:
        before = h.prune_refused
        h.prune_refused = {
            "revision": plan.revision,
            "limit": policy.max_prune_percent,
            "message": plan.prune_refused,
            "would_prune": sorted(
                c.name for c in plan.changes if held_by_guard(c, policy.owner, policy.prune)
            ),
        }
        if before is not None and (before.get("revision"), before.get("message")) == (
            plan.revision,
            plan.prune_refused,
        ):
            return  # logged when it first happened; the state file and status keep saying it
        log.warning(
            "prune refused",
            host=h.name,
            revision=plan.revision[:12],
            would_prune=h.prune_refused["would_prune"],
            message=plan.prune_refused,
        )
    elif status.reason == Reason.SUCCEEDED:
        h.prune_refused = None
    if status.reason == Reason.SUCCEEDED and status.applied_revision:
        h.managed = tuple(sorted(d.name for d in after if ownership.owned_by(d.mark, policy.owner)))


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


def log_plan_warnings(h: HostRunner, plan: Plan) -> None:
    """Each plan warning (stale facts file, pod network fallback, deprecations, ...), one
    line per cause as ``plan`` prints it, once while it holds."""
    current = frozenset(problems.group(plan.warnings))
    for warning in sorted(current - h.warned):
        log.warning("plan warning", host=h.name, warning=warning)
    h.warned = current


def log_other_hosts(h: HostRunner, plan: Plan) -> None:
    """The VMs of the revision this host leaves to others, when that list changes."""
    now = frozenset((k.subject, host) for k, host in plan.other_hosts)
    if now != h.elsewhere_logged and now:
        log.info(
            "VMs on other hosts",
            host=h.name,
            count=len(now),
            vms=[f"{s} ({('on ' + o) if o else 'selects no host'})" for s, o in sorted(now)][:50],
        )
    h.elsewhere_logged = now


def log_drift(h: HostRunner, plan: Plan) -> None:
    """One event per drift reported and not reverted (selfHeal off), when it first appears."""
    now = frozenset((c.name, c.reason) for c in plan.changes if c.drift and c.action == Action.UNCHANGED)
    for name, reason in sorted(now - h.drift_logged):
        c = next(c for c in plan.changes if c.name == name)
        log.warning(
            "drift",
            host=h.name,
            subject=c.subject,
            fields=[f.path for f in c.fields],
            reason=reason,
            self_heal=h.target.policy.self_heal,
        )
    h.drift_logged = now


def expected_events(c: Change) -> frozenset[str]:
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
    a fresh read of the ones it changed. A domain that vanished is simply absent."""
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
            domain = hv.get_domain(name)
        except HypervisorError as err:
            if isinstance(err, HypervisorUnavailable):
                log.warning("cannot read domains after apply", host=host, error=str(err))
                break
            continue
        if domain is not None:
            live[name] = domain
    return list(live.values())


def with_sync(row: VMStatus, sync: str, message: str) -> VMStatus:
    from dataclasses import replace

    return replace(row, sync=sync, message=message)


def failed_commit(err: ReconcilerError) -> str:
    text = str(err)
    if isinstance(err, SignatureError) and text.startswith("commit "):
        return text.split()[1].rstrip(":")
    return ""
