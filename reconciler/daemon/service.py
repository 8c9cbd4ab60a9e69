"""The daemon: triggers in, one reconcile at a time, state out.

Input: a ``DaemonConfig`` (and a way to re-read it on SIGHUP) and a ``Clock`` (wall time
for what people read, monotonic time for every timer; the daemon reads no other). Output:
converged hosts, ``state.json``, metrics, sd_notify messages, structlog lines, and what
``publish`` reports (commit statuses, notifications, the status page's document). I/O, and
only a loop around the pipeline: it never renders, plans or applies anything itself.

Level-based: every trigger (a ref changed on disk, a fetch tick, an authenticated
webhook, a libvirt lifecycle event, the resync timer, SIGHUP) only means "state may
have changed". Triggers coalesce into one pending set; the loop thread is the only
one that touches git or libvirt, so one reconcile runs at a time. It never
busy-polls: it blocks on an event with a timeout set by the next timer.

A revision is applied only when it builds, expands, renders and (when configured)
every commit since the last applied one verifies; otherwise nothing of it is applied and
the host keeps the last good state, enforced: two loops, one truth (runner.py). While
the head has errors, is a refused rollback, or the source fails, each host plans and
applies its last applied revision again on every trigger (crash restarts, run
strategies, self-heal, restart windows), and status says both revisions. Last
attempted and last applied revisions are kept apart, per host and overall. Transient
failures (source unreachable, a host down, a failed action) are retried with
exponential backoff; one host's outage never blocks the others, and no VM waits for another's
graceful stop (it runs on in the host's work in flight). What it records and shows (state.json's
hosts, /healthz, the status line, plans) is worded in record.py; Ready: probing.py; holds: held.py.

Under faults (see health.py, status/state.py, rollback.py): one daemon per state
directory (a lock; a second one refuses to start, naming the first); a bad state file
is set aside and rebuilt from the domains' marks, and one that cannot be written is
said in ``/healthz`` and the metrics and written again; a head that does not descend
from the last applied commit is a rollback, and one of an unrelated history is refused
unless confirmed; an unreadable git object re-clones the mirror; a dropped host
connection is a trigger, the host is probed until it answers and the reconnect
reconciles at once; while a failing source backs off, the fetch and resync timers wait
for its retry; ``/livez`` fails when the loop itself has not moved for ``LOOP_STUCK_S``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import structlog

from reconciler.context import Context
from reconciler.daemon import health, hoststate, liveness, memory, probing, record, reload, rollback, rollouts
from reconciler.daemon.books import (
    expected_events,
    failed_commit,
    read_copies,
    requeue_waits,
    restore_copies,
    restore_guard,
    retryable,
)
from reconciler.daemon.hoststate import Blocked
from reconciler.daemon.listeners import Listeners
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.notify import Notifier
from reconciler.daemon.once import run_once
from reconciler.daemon.publish import Publisher
from reconciler.daemon.runner import RECHECK_ALL, RECHECK_HOST, HostRunner, make_runner
from reconciler.daemon.scheduler import DISCONNECT, LIFECYCLE, RELOAD, RESYNC, START, TIMED, WORK, Schedule
from reconciler.daemon.statefile import StateFile, backoff_of
from reconciler.daemon.triggers import Triggers
from reconciler.desired.pins import rest_documents
from reconciler.errors import ConfigError, ReconcilerError, SignatureError, SourceError
from reconciler.host.apply import InFlight
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot, VMKey
from reconciler.model.results import Reason, ReconcileStatus
from reconciler.source.mirror import GitSource
from reconciler.wording.problems import headline, joined

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.config.daemon import DaemonConfig, HostEntry
    from reconciler.context import Clock

log = structlog.get_logger("reconciler.daemon")

LIFECYCLE_SETTLE_S = 0.3
OWN_EVENT_GRACE_S = 2.0
LOOP_STUCK_S = health.LOOP_STUCK_S  # /livez fails when the loop has not moved for this long


class Daemon:
    def __init__(
        self,
        config: DaemonConfig,
        loader: Callable[[], DaemonConfig] | None = None,
        notifier: Notifier | None = None,
        out: TextIO | None = None,
        *,
        clock: Clock,
        context: Context | None = None,
    ) -> None:
        self.config = config
        self.clock = clock  # wall time for what people read, monotonic time for every timer
        # Caches shared by the hosts, kept between reconciles; work runs in this process.
        self.context = context if context is not None else Context(clock=clock)
        # Documents rest from the first build's end (not the first plan's): the first reconcile
        # fills no allocator pools around its unpacked trees (bench/daemon-phases).
        rest_documents(self.context)
        self.loader = loader
        self.notify = notifier or Notifier()
        self.out = out if out is not None else sys.stdout  # the process's, when the daemon starts
        self.metrics = Metrics()
        self.publish = Publisher(config, clock, self.metrics)  # commit statuses, notifications, status page
        self.probes = probing.Health(lambda: self.hosts, clock, self.metrics, self.publish, self.poke)
        self.source = GitSource(config.source, config.state_dir)
        self.hosts = [self.runner(h) for h in config.hosts]
        self.triggers = Triggers(clock)
        self.schedule = Schedule(config.fetch_interval_s, config.resync_interval_s, self.source.remote)
        self.listeners = Listeners(
            self.poke, self._health, self._live, self.metrics, lambda: self.config.webhook_secret,
            lambda: self.publish.document, clock,
        )  # fmt: skip
        self.reconciles = 0
        self.keep_plans = False  # --once prints them
        self.show_plans = False  # --show-plans: print each plan that changes something, and the table
        self._shown = ""  # what --show-plans printed last (printed again only when it changes)
        self.state = StateFile(config.state_dir, clock, self.metrics)  # state.json, its lock
        state = self.publish.restore(self.state.doc)  # what was announced stays announced
        self._rollback: rollback.Rollback | None = None
        self._looping = False
        self._beat = clock.monotonic()  # the loop's last sign of life (/livez)
        self.attempted: str = str(state.get("attempted_revision", ""))
        self.applied: str = str(state.get("applied_revision", ""))
        self.reason: str = str(state.get("last", {}).get("reason", ""))
        self.message: str = str(state.get("last", {}).get("message", ""))
        self.schedule.failures, self.schedule.source_failing = backoff_of(state)  # not reset by a restart
        for h in liveness.restored(self.hosts, state, self.probes.prober):  # guests ended, counts
            h.state = hoststate.recorded(h.state, state.get("hosts", {}).get(h.name, {}))
            restore_guard(h, state.get("hosts", {}).get(h.name, {}))
            h.state = hoststate.paced_by(h.state, rollouts.restore(state.get("hosts", {}).get(h.name, {})))
            restore_copies(h, state.get("vms"))

    def runner(self, entry: HostEntry) -> HostRunner:
        runner = make_runner(self.config, entry, self.clock, probed=self.probes.probed)  # rows with Ready
        runner.on_event = self.on_lifecycle
        runner.on_close = self._on_close
        runner.inflight = InFlight(on_done=lambda: self.poke(WORK))  # a stop ended: plan again
        runner.ready = self.probes.ready_source()  # paced restarts wait for the prober's Ready
        return runner

    def _on_close(self, host: str, why: str) -> None:
        """From libvirt's event thread: a host connection dropped (between triggers too)."""
        if not self.triggers.stop_requested:
            log.warning("host connection lost", host=host, why=why)
            self.poke(DISCONNECT)

    def on_lifecycle(self, host: str, domain: str, event: str, detail: str) -> None:
        """From libvirt's event thread: a domain's lifecycle event (a trigger unless ours)."""
        log.debug(
            "lifecycle event",
            host=host,
            subject=VMKey.from_domain(domain).subject,
            lifecycle=event,
            detail=detail,
        )
        self.triggers.lifecycle((host, domain, event), detail)

    def _end_reconcile(self) -> None:
        self.triggers.reconciled(expected_events(self.hosts, self.clock.monotonic() + OWN_EVENT_GRACE_S))

    def poke(self, kind: str) -> None:
        """Ask for a reconcile; safe from any thread and from signal handlers."""
        self.triggers.poke(kind)

    def stop(self, why: str = "") -> None:
        self.triggers.stop(why)

    def _should_stop(self) -> bool:
        """Checked by apply between actions: also keeps the watchdog fed during long applies."""
        self._beat = self.clock.monotonic()
        self.notify.watchdog(self._beat)
        return self.triggers.stop_requested

    def _health(self) -> tuple[bool, dict[str, Any]]:
        stopping = self.triggers.stop_requested
        return record.healthz(
            self.hosts, self.attempted, self.applied, self.reason, self.message, stopping, self._rollback,
            self.state.error,
        )  # fmt: skip

    def _live(self) -> tuple[bool, dict[str, Any]]:
        return health.liveness(
            self._looping, self.triggers.stop_requested, self.clock.monotonic() - self._beat
        )

    # -- one reconcile --------------------------------------------------------------------

    def _source_failed(self, err: ReconcilerError, head: str, started: float, t0: float) -> None:
        kind = "signature" if isinstance(err, SignatureError) else "source"
        self.metrics.source_errors.labels(kind).inc()
        self.reason, self.message = str(Reason.SOURCE_FAILED), str(err)
        if head:
            self.attempted = head
        log.error("source failed", error=str(err), revision=head[:12] if head else "")
        why = Blocked(head or self.attempted, Reason.SOURCE_FAILED, str(err), first=headline(str(err)))
        self._hold(why)
        self._record_held(why, started, t0, failed_commit(err))
        if err.transient:
            self._schedule_retry(source=True)

    def _snapshot_of(self, commit: str) -> SourceSnapshot | None:
        """The revision ``commit`` read again (the last applied one, to enforce); None: unreadable."""
        try:
            return self.source.snapshot(commit)
        except SourceError as err:
            log.error("cannot read a revision", revision=commit[:12], error=str(err))
            return None

    def _hold(self, why: Blocked) -> None:
        """Every host enforces its last applied revision while ``why.revision`` is blocked."""
        if self.triggers.stop_requested or not why.revision:
            return
        self.triggers.reconciling()
        try:
            for h in self.hosts:
                h.plan = None
                h.hold(
                    why, self.config.source.path, self.hosts, self.metrics, self._should_stop,
                    self._snapshot_of, self.context, self.config.keys, self.source.reader(),
                )  # fmt: skip
        finally:
            self._end_reconcile()
        self._replan()

    def cycle(self, fetch: bool, force: bool, recheck: str = RECHECK_ALL) -> None:
        """Fetch (remote), read the head, verify, reconcile every host (a head known to be
        blocked is planned again as ``recheck`` says). Never raises ReconcilerError."""
        t0, started = self.clock.monotonic(), self.clock.time()
        try:
            if fetch:
                self.source.fetch()
            head = self.source.head()
        except SourceError as err:
            self._source_failed(err, "", started, t0)
            return
        if not force and head == self.attempted:
            return
        with structlog.contextvars.bound_contextvars(revision=head[:12]):
            if self.state.rebuild:
                self.state.rebuild = False
                self.applied = record.rebuild_from_marks(self.hosts, self.applied)
            try:
                if self._check_ancestry(head, started, t0):
                    return
                self.source.verify(self.applied, head)
                snapshot = self.source.mended_snapshot(head)
            except SourceError as err:
                self._source_failed(err, head, started, t0)
                return
            if self.triggers.stop_requested:
                return  # SIGTERM while fetching or verifying: start nothing new
            self.attempted = head
            self.triggers.reconciling()
            self.publish.started(head, self.hosts)
            unreadable: SourceError | None = None
            try:
                try:
                    self._reconcile_hosts(snapshot, recheck)
                except SourceError as err:
                    # An object of the commit git cannot read (GitPython raises ValueError
                    # and others for a corrupt blob): clone the mirror again, once.
                    if not self.source.recover(unreadable=str(err)):
                        raise
                    snapshot = self.source.snapshot(head)
                    self._reconcile_hosts(snapshot, recheck)
            except SourceError as err:
                unreadable = err
            finally:
                self._end_reconcile()
            if unreadable is not None:
                self._source_failed(unreadable, head, started, t0)
                return
            self._finish(snapshot, started, t0)
            if self.show_plans:
                self._shown = record.show_changed_plans(
                    self.hosts, self.reason, self.message, self.out, self.clock.time(), self._shown
                )
        if not self.keep_plans:
            for h in self.hosts:
                h.plan = None  # the desired and live XML of every domain: not needed until the next plan
        memory.release()

    def _reconcile_hosts(self, snapshot: SourceSnapshot, recheck: str = RECHECK_ALL) -> None:
        if len(self.hosts) > 1:  # host moves: where each host holds copies, read before any plan
            for h in self.hosts:
                read_copies(h)
        for h in self.hosts:
            h.plan = None
            h.reconcile(
                snapshot, self.config.source.path, self.hosts, self.metrics, self._should_stop,
                self._snapshot_of, recheck, self.context, self.config.keys, self.source.reader(),
            )  # fmt: skip

    def _check_ancestry(self, head: str, started: float, t0: float) -> bool:
        """Log and record a rollback; True when the policy refuses it (nothing is applied)."""
        if self._rollback is not None and self._rollback.to_revision != head:
            self._rollback = None  # the branch moved on
        descends = related = None
        if self.applied and head != self.applied:
            descends = self.source.is_ancestor(self.applied, head)
            related = self.source.related(self.applied, head) if descends is False else True
        found = rollback.decide(
            self.applied, head, descends, self.config.policy, self.clock.time(), related=related
        )
        if found is None:
            return False
        known = self._rollback
        if known is None or (known.to_revision, known.decision) != (found.to_revision, found.decision):
            self._rollback = found
            self.metrics.rollbacks.labels(found.decision).inc()
            log.warning(
                "ROLLBACK: the branch moved to a commit that does not descend from the last applied one",
                applied=self.applied[:12],
                head=head[:12],
                decision=found.decision,
                why=found.why,
            )
        if not found.refused:
            return False
        self.attempted = head
        self.reason, self.message = str(Reason.ROLLBACK_REFUSED), found.message()
        why = Blocked(head, Reason.ROLLBACK_REFUSED, found.message(), first=headline(found.message()))
        self._hold(why)
        self._record_held(why, started, t0)
        return True

    def _record_held(self, why: Blocked, started: float, t0: float, failed: str = "") -> None:
        """Record ``why.revision`` not applied (``self.message`` says why), the hosts' rows as
        their enforcement of the last applied revision left them."""
        rows = tuple(r for h in self.hosts for r in h.rows)
        ms = int((self.clock.monotonic() - t0) * 1000)
        self._record(
            ReconcileStatus(why.reason, why.revision, "", started, ms, vms=rows, message=self.message,
                            first_error=why.first, failed_commit=failed, hosts=record.hosts_state(self.hosts))
        )  # fmt: skip

    def _finish(self, snapshot: SourceSnapshot, started: float, t0: float) -> None:
        statuses = [h.status for h in self.hosts if h.status is not None]
        failed = [s for s in statuses if s.reason != Reason.SUCCEEDED]
        ok = not failed
        if ok:
            self.applied = snapshot.commit
            self.metrics.applied_ts.set(snapshot.committed_at)
            self.metrics.applied_at.set(self.clock.time())
        self.reason = str(failed[0].reason if failed else Reason.SUCCEEDED)
        self.message = joined(s.message for s in failed)
        status = ReconcileStatus(
            reason=failed[0].reason if failed else Reason.SUCCEEDED,
            attempted_revision=snapshot.commit,
            applied_revision=snapshot.commit if ok else "",
            started_at=started,
            duration_ms=int((self.clock.monotonic() - t0) * 1000),
            results=tuple(r for s in statuses for r in s.results),
            vms=tuple(r for h in self.hosts for r in h.rows),
            message=self.message,
            first_error=next((s.first_error for s in failed if s.message), ""),
            hosts=record.hosts_state(self.hosts),
        )
        self._record(status)
        self.schedule.source_failing = False
        if retryable(self.hosts):
            self._schedule_retry()
        else:
            self.schedule.succeeded()
        self._replan()

    def _replan(self) -> None:
        """Plan again when the first wait of the plans ends (a crash-loop back-off, a
        restart window opening, a host move), and say which it is."""
        waits = requeue_waits(h.plan for h in self.hosts)
        wait = self.schedule.replan(self.clock.monotonic(), [w for w, _ in waits])
        if wait is not None:
            log.info("plan again later", in_s=round(wait, 1), why=min(waits)[1])

    def _record(self, status: ReconcileStatus) -> None:
        self.reconciles += 1
        if self._rollback is not None and self._rollback.to_revision == status.attempted_revision:
            status = dataclasses.replace(status, rollback=self._rollback.to_json())
        self.state.record(status)
        self.metrics.set_revision(self.attempted, self.applied)
        self.publish.recorded(self.hosts, status, self.state.doc, self._rollback)
        self.notify.status(self.status_line())

    def _schedule_retry(self, source: bool = False) -> None:
        delay = self.schedule.failed(self.clock.monotonic(), source)
        log.info("retry scheduled", in_s=round(delay, 1), failures=self.schedule.failures)
        self.state.backoff(self.schedule.failures, self.schedule.source_failing)  # kept across a restart

    def status_line(self) -> str:
        return record.status_line(self.hosts, self.attempted, self.applied, self.reason)

    def reload(self) -> bool:
        """Re-read the config (``reload.py``); a bad one is logged and the current one kept."""
        return reload.reload(self)

    # -- the loop -------------------------------------------------------------------------

    def take(self) -> set[str]:
        """The trigger kinds queued since the last take (each counted in the metrics)."""
        kinds = self.triggers.take()
        for kind in kinds:
            self.metrics.triggers.labels(kind).inc()
        return set(kinds)

    def timeout(self) -> float:
        """How long the loop may sleep now: until the first timer, host probe, state file
        retry or watchdog ping."""
        probes = [h.next_probe for h in self.hosts if h.unreachable]
        if self.state.retry_at is not None:
            probes.append(self.state.retry_at)
        return self.schedule.timeout(self.clock.monotonic(), probes, self.notify.watchdog_interval_s)

    def step(self, kinds: set[str]) -> None:
        """Run what the pending triggers and the timers ask for (at most one reconcile)."""
        if kinds == {LIFECYCLE}:
            self.triggers.settle(LIFECYCLE_SETTLE_S)  # events come in bursts: gather them first
            kinds |= self.take()
        now = self._beat = self.clock.monotonic()
        if RELOAD in kinds:
            self.reload()
        self.state.retry(now)
        self.listeners.hosts(self.hosts)
        health.probe_hosts(self.hosts, now, kinds, self.metrics)
        due = self.schedule.due(now, kinds)
        for kind in due.kinds & TIMED - kinds:
            self.metrics.triggers.labels(kind).inc()  # timer triggers; queued ones were counted in take
        if not due.kinds:
            return
        recheck = RECHECK_ALL if due.kinds & {RELOAD, START} else RECHECK_HOST if RESYNC in due.kinds else ""
        self.cycle(fetch=due.fetch, force=due.force, recheck=recheck)
        self.schedule.ran(self.clock.monotonic(), due)

    def run(self, once: bool = False, timeout_s: float = rollouts.ONCE_TIMEOUT_S) -> int:
        Path(self.config.state_dir).mkdir(parents=True, exist_ok=True)
        self.state.lock(self.config.path, starting=True)  # a second daemon on it stops here
        memory.limit_arenas()
        if once:  # the head's work finished: paced restarts (up to ``timeout_s``), host moves
            return run_once(self, timeout_s)
        try:
            self.listeners.listen(self.config.listen)
        except OSError as err:
            where = self.config.path or "--listen"
            raise ConfigError(
                f"listen: cannot listen on {self.config.listen}: {err.strerror}", where
            ) from err
        self.listeners.watch(self.source)
        self.publish.start()
        try:
            Hypervisor.start_event_loop()
        except ReconcilerError as err:
            log.warning("no libvirt lifecycle events", error=str(err))
        log.info(
            "started",
            repo=self.config.source.shown,
            branch=self.config.source.branch or "HEAD",
            path=self.config.source.path,
            hosts=[h.entry.uri for h in self.hosts],
            state_dir=self.config.state_dir,
        )
        self.notify.ready(self.status_line())
        self.poke(START)
        self._looping = True
        try:
            while not self.triggers.stop_requested:
                self._beat = self.clock.monotonic()
                self.triggers.sleep(self.timeout())
                self._beat = self.clock.monotonic()
                self.notify.watchdog(self.clock.monotonic())
                if self.triggers.stop_requested:
                    break
                self.step(self.take())
                self.notify.watchdog(self.clock.monotonic())
        finally:
            self._looping = False
            if self.triggers.why:
                log.info("signal", signal=self.triggers.why)
            self.notify.stopping()
            self.listeners.unwatch()
            self.publish.close()
            self.close_hosts()
            log.info("stopped", attempted=self.attempted[:12], applied=self.applied[:12])
        return 0

    def close_hosts(self) -> None:
        """Stops in flight end first (forced after their grace period), the watchdog fed."""
        self.probes.close()
        for h in self.hosts:
            h.shutdown(lambda: self.notify.watchdog(self.clock.monotonic()))
        self.state.release()
