"""One host the daemon drives: its connection, events and work in flight, and its two
loops: convergence to a new revision and enforcement of the last applied one.

Input: a host entry of the daemon config, the daemon's clock, the revision to converge
to and a reader of the last applied one. Output: a ``HostRunner`` (connection kept
between reconciles, per-host caches, per-VM work in flight) whose status, rows and
plan the daemon records. I/O: libvirt through ``host``; never decides when to run.

Two loops, one truth (DESIGN §5). A revision this host cannot apply (its plan has
errors, or the daemon blocks it before planning: a refused rollback, a source that
fails, a commit that does not verify) is ``blocked``: the host keeps enforcing the
last revision it applied (run strategies, crash restarts, self-heal, restart windows:
that revision planned and applied again) and says both, the revision enforced and the
newer one blocked, with why. A blocked head is planned again only when asked to
recheck (a resync, a reload, a new head): a lifecycle event goes straight to
enforcement. Graceful stops run on in ``inflight`` after the apply that started them.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import structlog

from reconciler import ownership, source
from reconciler.config import targets
from reconciler.daemon import health, hoststate
from reconciler.daemon.books import (
    guarded,
    live_after,
    log_drift,
    log_other_hosts,
    log_plan_warnings,
    new_cache,
    record_guard,
    unguarded,
    with_sync,
)
from reconciler.daemon.held import Unenforced, enforceable, held_rows
from reconciler.daemon.hoststate import Blocked, HostState, StateView
from reconciler.daemon.revert import revert
from reconciler.errors import HypervisorError, HypervisorUnavailable, SourceError
from reconciler.host.apply import InFlight
from reconciler.host.hypervisor import Hypervisor
from reconciler.model.results import Reason, ReconcileStatus, Sync, VMStatus
from reconciler.plan.pace import assessed, reverting
from reconciler.reconcile import apply_planned, plan_revision, planned_status
from reconciler.status import vm_statuses
from reconciler.wording import outcome, problems

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.config.daemon import DaemonConfig, HostEntry
    from reconciler.context import Clock, Context
    from reconciler.daemon.metrics import Metrics
    from reconciler.desired import PipelineCache
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import SourceSnapshot
    from reconciler.model.changes import Plan
    from reconciler.model.rollout import ReadySource
    from reconciler.plan.planned import PlannedRevision
    from reconciler.settings.targets import HostTarget

log = structlog.get_logger("reconciler.daemon")

RECHECK_ALL = "all"  # plan a blocked head again
RECHECK_HOST = "host"  # only when its errors depend on the host


@dataclass
class HostRunner(StateView):
    """One libvirt host: its connection (opened lazily, reopened after an outage) and last outcome."""

    entry: HostEntry
    target: HostTarget
    clock: Clock  # the daemon's: wall time for records, monotonic time for durations and probes
    hv: Hypervisor | None = None
    state: HostState = field(default_factory=HostState)  # replaced by its steps (daemon/hoststate.py)
    plan: Plan | None = None  # the plan applied last (the held revision's while blocked)
    cache: PipelineCache | None = None  # the pipeline's cache for this host (expansion, render, plan)
    window_s: float = 3600.0  # the prune window's length (policy.pruneWindow)
    hold_cache: PipelineCache | None = None  # while blocked: the held revision's pipeline cache
    inflight: InFlight | None = None  # graceful stops running on after their apply
    ended_by_probe: dict[str, int] = field(default_factory=dict)  # domain -> run ID a liveness probe ended
    stage: str = "build"  # the stage a reconcile is in: an internal error's reason (build, apply)
    ready: ReadySource | None = None  # the readiness source (a prober's answers; None: Ready = running)
    image_bytes: Callable[[int], None] | None = None  # counts image bytes downloaded (the metric)

    on_event: Callable[[str, str, str, str], None] | None = None
    on_close: Callable[[str, str], None] | None = None
    probed: Callable[[HostRunner, tuple[VMStatus, ...]], tuple[VMStatus, ...]] | None = None  # Ready
    answers: Callable[[], bool] | None = None  # whether its libvirt answers, watched off the loop (watch)
    _unsubscribe: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return self.entry.config.name

    def connect(self) -> Hypervisor:
        if self.answers is not None and not self.answers():  # never wait on a libvirt that does not answer
            hv, self.hv = self.hv, None
            if hv is not None:  # closed off the loop: closing waits on libvirt too
                threading.Thread(target=hv.close, daemon=True).start()
            raise HypervisorUnavailable(outcome.not_answering(self.entry.uri))
        if self.hv is not None and not self.hv.alive():
            self.close()
        if self.hv is None:
            self.hv = Hypervisor(self.entry.uri)
            self.hv.ended_by_probe = self.ended_by_probe
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

    def shutdown(self, tick: Callable[[], object] = lambda: None) -> None:
        """The daemon stops: the work in flight ends first (stops forced after their grace)."""
        if self.inflight is not None:
            self.inflight.wait(tick)
            self.inflight.close()
            self.inflight = None
        self.close()

    # -- the two loops ----------------------------------------------------------------------

    def reconcile(
        self,
        snapshot: SourceSnapshot,
        path: str,
        hosts: list[HostRunner],
        metrics: Metrics,
        should_stop: Callable[[], bool],
        held: Callable[[str], SourceSnapshot | None],
        recheck: str = RECHECK_ALL,
        context: Context | None = None,
        keys: Keys | None = None,
        read: Callable[[str], SourceSnapshot] | None = None,
    ) -> None:
        """Converge to ``snapshot``; when this host cannot apply it (its plan has errors),
        enforce the last applied revision (``held`` reads it) instead. ``read``: the
        source's reader of other commits (``git:<commit>`` pins), from its mirror. A head already known
        to be blocked is planned again only as ``recheck`` says: ``RECHECK_ALL`` (a reload,
        a start), ``RECHECK_HOST`` when its errors depend on the host (a resync), else not
        (the same input fails the same way): the host goes straight to enforcement.
        ``context``: the daemon's, its caches shared by the hosts and the serial mapper;
        ``keys``: the daemon's SOPS keys."""
        known = self.blocked is not None and self.blocked.planned and self.blocked.revision == snapshot.commit
        if (
            known
            and self.blocked is not None
            and not (recheck == RECHECK_ALL or (recheck == RECHECK_HOST and self.blocked.host_dependent))
        ):
            self.hold(self.blocked, path, hosts, metrics, should_stop, held, context, keys, read)
            return

        def converge(hv: Hypervisor) -> tuple[PlannedRevision, ReconcileStatus]:
            planned = self._plan(snapshot, path, hv, self.cache, context, keys, read)
            if not planned.errors:
                self.state, self.hold_cache = hoststate.converged(self.state), None
                status = self._apply(planned, hv, should_stop)
                if (back := reverting(planned.plan, self.target.policy.pacing)) is not None:
                    how = (path, held, context, keys, read)
                    planned = revert(self, planned, back, hv, how, lambda p: self._apply(p, hv, should_stop))
                return planned, status
            shown = planned_status(planned)  # its errors in words, and the first of them
            why = Blocked(snapshot.commit, planned.reason, shown.message, True, bool(planned.host_errors),
                          shown.first_error)  # fmt: skip
            self.state = hoststate.held_back(self.state, why, planned.plan)
            if self.applied == snapshot.commit:  # the applied revision itself meets errors now
                enforced: tuple[PlannedRevision, ReconcileStatus] | None = (
                    planned,
                    self._apply(enforceable(planned), hv, should_stop),
                )
            else:
                enforced = (
                    self._enforce(hv, path, held, should_stop, context, keys, read) if self.applied else None
                )
            if enforced is None:
                return planned, shown
            return enforced[0], self._held(enforced[1], why)

        self._pass(converge, snapshot.commit, hosts, metrics)

    def hold(
        self,
        why: Blocked,
        path: str,
        hosts: list[HostRunner],
        metrics: Metrics,
        should_stop: Callable[[], bool],
        held: Callable[[str], SourceSnapshot | None],
        context: Context | None = None,
        keys: Keys | None = None,
        read: Callable[[str], SourceSnapshot] | None = None,
    ) -> None:
        """Enforce the last applied revision while ``why.revision`` is blocked before any
        plan of it (a refused rollback, a failing source, a commit that does not verify)."""
        self.state = hoststate.held_back(self.state, why)  # a plan of another revision is dropped

        def enforce(hv: Hypervisor) -> tuple[PlannedRevision, ReconcileStatus] | None:
            enforced = self._enforce(hv, path, held, should_stop, context, keys, read)
            return None if enforced is None else (enforced[0], self._held(enforced[1], why))

        if not self.applied:
            log.warning("nothing to enforce: no revision applied on this host yet", host=self.name)
            return
        self._pass(enforce, why.revision, hosts, metrics)

    def _enforce(
        self,
        hv: Hypervisor,
        path: str,
        held: Callable[[str], SourceSnapshot | None],
        should_stop: Callable[[], bool],
        context: Context | None,
        keys: Keys | None,
        read: Callable[[str], SourceSnapshot] | None = None,
    ) -> tuple[PlannedRevision, ReconcileStatus] | None:
        """The last applied revision planned and applied again (None: it cannot be read)."""
        snapshot = held(self.applied)
        if snapshot is None:
            log.error(
                "cannot read the last applied revision to enforce it",
                host=self.name,
                applied=self.applied[:12],
            )
            return None
        if self.hold_cache is None:
            self.hold_cache = new_cache()  # the head keeps its own: no thrashing between the two
        planned = self._plan(snapshot, path, hv, self.hold_cache, context, keys, read)
        return planned, self._apply(enforceable(planned), hv, should_stop)

    def _plan(
        self,
        snapshot: SourceSnapshot,
        path: str,
        hv: Hypervisor,
        cache: PipelineCache | None,
        context: Context | None,
        keys: Keys | None,
        read: Callable[[str], SourceSnapshot] | None,
    ) -> PlannedRevision:
        """``snapshot`` planned for this host with ``cache`` (the head's or the held revision's)."""
        return plan_revision(
            snapshot,
            path,
            self.target,
            hv,
            clock=self.clock.time,
            cache=cache,
            context=context,
            keys=keys,
            read=read,
            progress=self.paced.progress if self.paced is not None else None,
            ready=self.ready,
            on_image_bytes=self.image_bytes,
        )

    def _held(self, status: ReconcileStatus, why: Blocked) -> ReconcileStatus:
        """The enforcement's status said as this host's outcome: the blocked revision
        attempted and not applied, the applied one enforced (its apply failures kept)."""
        # the hold itself: ``held`` in state.json, rows, the log
        message = outcome.held(why.message, self.applied, status.message)
        return replace(
            status,
            reason=why.reason,
            attempted_revision=why.revision,
            applied_revision="",
            message=message,
            first_error=why.first,
        )

    def _apply(
        self, planned: PlannedRevision, hv: Hypervisor, should_stop: Callable[[], bool]
    ) -> ReconcileStatus:
        self.stage = "apply"
        if self.inflight is None:
            self.inflight = InFlight()
        status = apply_planned(
            planned, hv, should_stop=should_stop, clock=self.clock.time, inflight=self.inflight
        )
        late = self.inflight.failures()  # work that ended badly since the last reconcile
        if not late:
            return status
        message = outcome.with_late(status.message, late)
        return replace(
            status,
            reason=Reason.APPLY_FAILED,
            applied_revision="",
            results=status.results + late,
            message=message,
            problems=status.problems + tuple(r.problem for r in late if r.problem is not None),
            first_error=status.first_error or problems.first_cause(late),
        )

    def _pass(
        self,
        work: Callable[[Hypervisor], tuple[PlannedRevision, ReconcileStatus] | None],
        revision: str,
        hosts: list[HostRunner],
        metrics: Metrics,
    ) -> None:
        """Connect, run ``work`` (plan and apply), then the bookkeeping. A host error marks
        it unreachable (probed again); nothing raises but the source's."""
        t0 = self.clock.monotonic()
        started = self.clock.time()
        log.debug("reconciling", host=self.name, uri=self.entry.uri)
        self.stage = "build"  # which stage an internal error is the reason of: build, or apply
        try:
            hv = self._connected(hosts, metrics)
            done = work(hv)
            if done is None:  # nothing could be enforced: the blocked revision's outcome alone
                raise Unenforced(self.blocked or Blocked(revision, Reason.APPLY_FAILED, ""))
            status = self._booked(hv, *done, metrics)
        except SourceError:
            raise  # an unreadable object of the commit: the caller repairs the source
        except Exception as err:  # a host error, or a bug in one stage: it must not take the daemon down
            status = self._failed(err, revision, started, t0)
        self.state = hoststate.concluded(self.state, status)
        if self.unreachable:
            metrics.hosts_up.labels(self.name).set(0)
            self.state = hoststate.probe_at(self.state, self.clock.monotonic() + health.PROBE_INTERVAL_S)
        metrics.observe(self.name, str(status.reason), self.clock.monotonic() - t0, self.rows)
        changes = sum(1 for c in self.plan.changes if not c.is_noop) if self.plan is not None else 0
        level = log.info if status.reason == Reason.SUCCEEDED else log.error
        level(
            "reconciled",
            host=self.name,
            reason=str(status.reason),
            duration_ms=int((self.clock.monotonic() - t0) * 1000),
            changes=changes,
            **({"held": self.applied[:12]} if self.blocked is not None and self.applied else {}),
            **({"error": status.message} if status.message else {}),
        )
        self.target = unguarded(self.target)

    def _connected(self, hosts: list[HostRunner], metrics: Metrics) -> Hypervisor:
        """The connection for this pass (this cycle's error raised again), the target guarded."""
        if self.down is not None:
            raise self.down
        hv = self.connect()
        if self.cache is None:
            self.cache = new_cache()
        self.state = hoststate.reconnected(self.state)
        metrics.hosts_up.labels(self.name).set(1)
        self.image_bytes = metrics.image_bytes.labels(self.name).inc
        self.target = guarded(self, hosts)
        return hv

    def _booked(
        self, hv: Hypervisor, planned: PlannedRevision, status: ReconcileStatus, metrics: Metrics
    ) -> ReconcileStatus:
        """What the host holds after the apply, booked: the plan, rows, guard, copies, logs."""
        plan = planned.plan
        if not hv.alive():  # dropped during the apply: counted as unreachable, probed again
            self.close()
            self.state = hoststate.lost(self.state, outcome.connection_lost(status.message))
        self.plan = plan
        after = live_after(hv, plan, self.name, self.target.policy.owner)
        self.plan = plan = assessed(plan, after, self.ready)  # health on the host after the apply
        self.state = hoststate.paced_by(self.state, plan.pacing)
        enforced = self.blocked is not None and planned.revision == self.applied
        rows = vm_statuses(
            replace(plan, errors=()) if enforced else plan,  # held there: not "not applied"
            status.results,
            after,
            self.name,
            applied={**self.applied_at, **{r.name: r.applied_at for r in self.rows}},
            now=self.clock.time(),
        )
        if enforced and self.blocked is not None:
            rows = held_rows(rows, self.applied, self.blocked)
        rows = rows if self.probed is None else self.probed(self, rows)  # the prober watches
        self.state = hoststate.with_rows(self.state, rows)
        record_guard(self, plan, status, after)
        ours = frozenset(d.name for d in after if ownership.claimable(d.mark, self.target.policy.owner))
        self.state = hoststate.read(self.state, ours)
        log_drift(self, plan)
        log_plan_warnings(self, plan)
        metrics.observe_plan(self.name, len(plan.other_hosts))
        others = tuple((k.subject, host) for k, host in plan.other_hosts)
        self.state = hoststate.left_to_others(self.state, others)
        log_other_hosts(self, plan)
        return status

    def _failed(self, err: Exception, revision: str, started: float, t0: float) -> ReconcileStatus:
        """The outcome of a pass that raised ``err`` (called while it is handled)."""
        ms = int((self.clock.monotonic() - t0) * 1000)
        if isinstance(err, Unenforced):
            return ReconcileStatus(
                err.why.reason, revision, "", started, ms,
                message=outcome.unenforced(err.why.message), first_error=err.why.first,
            )  # fmt: skip
        if isinstance(err, HypervisorError):
            alive = self.hv is not None and self.hv.alive()
            self.close()
            if isinstance(err, HypervisorUnavailable) or not alive:
                self.state = hoststate.lost(self.state, outcome.unreachable(err), unread=True)
            row = outcome.host_unreachable_row(err)
            self.state = hoststate.with_rows(
                self.state, tuple(with_sync(r, Sync.UNKNOWN, row) for r in self.rows)
            )
            said = outcome.host_error(self.entry.uri, err)
            return ReconcileStatus(
                Reason.APPLY_FAILED,
                revision,
                "",
                started,
                ms,
                message=said,
                first_error=problems.headline(said),
            )
        # The stage that failed is the reason: a build that fails so fails again on the
        # same commit (BuildFailed, not retried); an apply may not (ApplyFailed, retried).
        stage = self.stage
        log.exception(outcome.internal_error_event(stage), host=self.name)
        said = outcome.internal_error(stage, err)
        reason = Reason.APPLY_FAILED if stage == "apply" else Reason.BUILD_FAILED
        return ReconcileStatus(
            reason, revision, "", started, ms, message=said, first_error=problems.headline(said)
        )


def make_runner(
    config: DaemonConfig,
    entry: HostEntry,
    clock: Clock,
    probed: Callable[[HostRunner, tuple[VMStatus, ...]], tuple[VMStatus, ...]] | None = None,
) -> HostRunner:
    """A host's runner; its owner names the repository, not this checkout of it (a local
    repository: its remote's URL or root commit, read here; a remote: its URL). ``probed``:
    the prober's hook, given each reconcile's rows (``daemon/probing.py``)."""
    repo = config.source.repo
    local = bool(repo) and not config.source.remote
    identity = source.repository_identity(repo) if local else ""
    formerly = source.former_identity(repo) if local else ""
    target = targets.host_target(config, entry, repository=identity, formerly=formerly)
    return HostRunner(entry, target, clock, window_s=config.policy.prune_window_s, probed=probed)
