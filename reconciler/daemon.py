"""The daemon: triggers in, one reconcile at a time, state out.

Input: a ``DaemonConfig`` (and a way to re-read it on SIGHUP). Output: converged
hosts, ``state.json``, metrics, sd_notify messages, structlog lines. I/O, and only a
loop around the pipeline: it never renders, plans or applies anything itself.

Level-based: every trigger (a ref changed on disk, a fetch tick, an authenticated
webhook, a libvirt lifecycle event, the resync timer, SIGHUP) only means "state may
have changed". Triggers coalesce into one pending set; the loop thread is the only
one that touches git or libvirt, so one reconcile runs at a time. It never
busy-polls: it blocks on an event with a timeout set by the next timer.

A revision is applied only when it builds, expands, renders and (when configured)
every commit since the last applied one verifies; otherwise nothing is applied and the
host keeps the last good state. Last attempted and last applied revisions are kept
apart, per host and overall. Transient failures (source unreachable, a host down,
a failed action) are retried with exponential backoff; one host's outage never
blocks the others.

Under faults (see health.py, state_store.py, rollback.py): a bad state file is set
aside and rebuilt from the domains' marks; a head that does not descend from the last
applied commit is a rollback, applied or refused by policy; an unreadable git object
re-clones the mirror; a dropped host connection is a trigger, the host is probed until
it answers and the reconnect reconciles at once; while a failing source backs off,
the fetch and resync timers wait for its retry.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import dataclasses
import gc
import inspect
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import structlog
import watchfiles

from reconciler import health, ownership, rollback, state_store, targets
from reconciler.config import DaemonConfig, HostEntry, Overrides, load_config
from reconciler.errors import (
    ConfigError,
    HypervisorError,
    HypervisorUnavailable,
    ReconcilerError,
    SignatureError,
    SourceError,
)
from reconciler.gitsource import GitSource
from reconciler.hypervisor import Hypervisor
from reconciler.metrics import CONTENT_TYPE, Metrics
from reconciler.model import (
    Action,
    Change,
    LiveDomain,
    Plan,
    Reason,
    ReconcileStatus,
    SourceSnapshot,
    VMStatus,
)
from reconciler.moves import RECHECK_S, Elsewhere
from reconciler.notify import Notifier
from reconciler.plan import format_plan
from reconciler.reconcile import HostTarget, reconcile_once
from reconciler.status import format_table, vm_statuses, write_state

log = structlog.get_logger("reconciler.daemon")

BACKOFF_BASE_S = 5.0
BACKOFF_MAX_S = 300.0
LIFECYCLE_SETTLE_S = 0.3
OWN_EVENT_GRACE_S = 2.0

# Trigger kinds. Only "refs" skips the reconcile when the head did not move.
REFS, FETCH, WEBHOOK, LIFECYCLE, RESYNC, RELOAD, RETRY, REQUEUE, START = (
    "refs",
    "fetch",
    "webhook",
    "lifecycle",
    "resync",
    "reload",
    "retry",
    "requeue",
    "start",
)
DISCONNECT, RECONNECT = "disconnect", "reconnect"  # a host's connection dropped / came back
FORCING = frozenset({LIFECYCLE, RESYNC, RETRY, RELOAD, REQUEUE, START, DISCONNECT, RECONNECT})
_ACCEPTS_CACHE = "cache" in inspect.signature(reconcile_once).parameters


def _ref_filter(change: watchfiles.Change, path: str) -> bool:
    name = Path(path).name
    if name.endswith(".lock") or "/objects/" in path or "/logs/" in path:
        return False
    return "/refs/" in path or name in ("HEAD", "packed-refs")


@dataclass
class HostRunner:
    """One libvirt host: its connection (opened lazily, reopened after an outage) and last outcome."""

    entry: HostEntry
    target: HostTarget
    hv: Hypervisor | None = None
    status: ReconcileStatus | None = None
    rows: tuple[VMStatus, ...] = ()
    applied_at: dict[str, float] = field(default_factory=dict)  # by VM, from state.json at start
    applied: str = ""
    plan: Plan | None = None
    cache: Any = None  # the pipeline's cache for this host, when reconcile_once takes one
    requeue_s: float = 0.0
    managed: tuple[str, ...] | None = None  # our domains at the last applied revision (prune guard)
    prune_refused: dict[str, Any] | None = None  # the recorded refusal: revision, limit, message
    drift_logged: frozenset[tuple[str, str]] = frozenset()  # (domain, reason) of drift already logged
    copies: frozenset[str] | None = None  # our domains on this host, as last read (host moves)
    warned: frozenset[str] = frozenset()  # plan warnings already logged (each once while it holds)
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
        if self.on_close is None or not hasattr(hv, "watch_connection"):
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
        if self.on_event is None or not hasattr(hv, "watch_lifecycle"):
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


def make_runner(config: DaemonConfig, entry: HostEntry) -> HostRunner:
    return HostRunner(entry, targets.host_target(config, entry))


@dataclass
class _Timers:
    next_fetch: float = 0.0
    next_resync: float = 0.0
    retry_at: float | None = None
    requeue_at: float | None = None
    failures: int = 0
    source_failing: bool = False  # the back-off is the source's: fetch and resync wait for it


class Daemon:
    def __init__(
        self,
        config: DaemonConfig,
        loader: Callable[[], DaemonConfig] | None = None,
        notifier: Notifier | None = None,
        out: TextIO = sys.stdout,
    ) -> None:
        self.config = config
        self.loader = loader
        self.notify = notifier or Notifier()
        self.out = out
        self.metrics = Metrics()
        self.source = GitSource(config.source, config.state_dir)
        self.hosts = [self._runner(h) for h in config.hosts]
        # Wake-ups: a deque of trigger kinds plus a self-pipe the loop selects on. Both are
        # safe from other threads and from signal handlers (no lock is taken).
        self._stop_requested = False
        self._signal_name = ""
        self._events_lock = threading.Lock()
        self._reconciling = False
        self._held: set[tuple[str, str, str]] = set()
        self._ours: dict[tuple[str, str, str], float] = {}
        self._queue: collections.deque[str] = collections.deque()
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._t = _Timers()
        self._watch_stop: threading.Event | None = None
        self._http: Any = None
        self.reconciles = 0
        self._failed_build = ""  # a revision that failed to build: not retried until it changes
        self.keep_plans = False  # --once prints them
        self.show_plans = False  # --show-plans: print each plan that changes something, and the table
        state, self._rebuild = state_store.load(config.state_dir)
        self._state_doc: dict[str, Any] = state  # what state.json holds now
        self._rollback: rollback.Rollback | None = None
        self._looping = False
        self.attempted: str = str(state.get("attempted_revision", ""))
        self.applied: str = str(state.get("applied_revision", ""))
        self.reason: str = str(state.get("last", {}).get("reason", ""))
        self.message: str = str(state.get("last", {}).get("message", ""))
        for h in self.hosts:
            h.applied = str(state.get("hosts", {}).get(h.name, {}).get("applied_revision", ""))
            _restore_guard(h, state.get("hosts", {}).get(h.name, {}))
            _restore_copies(h, state.get("vms"))

    def _runner(self, entry: HostEntry) -> HostRunner:
        runner = make_runner(self.config, entry)
        runner.on_event = self._on_lifecycle
        runner.on_close = self._on_close
        return runner

    def _on_close(self, host: str, why: str) -> None:
        """From libvirt's event thread: a host connection dropped (between triggers too)."""
        if not self._stop_requested:
            log.warning("host connection lost", host=host, why=why)
            self.poke(DISCONNECT)

    # -- triggers -------------------------------------------------------------------------

    def _on_lifecycle(self, host: str, domain: str, event: str, detail: str) -> None:
        """From libvirt's event thread. Events caused by our own actions are not triggers:
        while a reconcile runs, events are held; afterwards those of domains it changed
        (and any for them within OWN_EVENT_GRACE_S, as delivery lags) are dropped."""
        log.debug("lifecycle event", host=host, subject=f"vm/{domain}", lifecycle=event, detail=detail)
        if not _event_matters(event, detail):
            return
        key = (host, domain, event)
        with self._events_lock:
            if self._reconciling:
                self._held.add(key)
                return
            if time.monotonic() < self._ours.get(key, 0.0):
                return
        self.poke(LIFECYCLE)

    def _begin_reconcile(self) -> None:
        with self._events_lock:
            self._reconciling = True

    def _end_reconcile(self) -> None:
        until = time.monotonic() + OWN_EVENT_GRACE_S
        ours = {
            (h.name, c.name, event): until
            for h in self.hosts
            if h.plan is not None
            for c in h.plan.changes
            for event in _expected_events(c)
        }
        with self._events_lock:
            self._reconciling = False
            self._ours = ours
            foreign = self._held - ours.keys()
            self._held = set()
        if foreign:
            self.poke(LIFECYCLE)

    def poke(self, kind: str) -> None:
        """Ask for a reconcile; safe from any thread and from signal handlers."""
        self._queue.append(kind)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe already means "wake up"
            os.write(self._wfd, b"\0")

    @property
    def stopping(self) -> bool:
        return self._stop_requested

    def stop(self, why: str = "") -> None:
        self._signal_name = why
        self._stop_requested = True
        self._wake()

    def _should_stop(self) -> bool:
        """Checked by apply between actions: also keeps the watchdog fed during long applies."""
        self.notify.watchdog()
        return self._stop_requested

    def _watch_refs(self, git_dir: Path, stop: threading.Event) -> None:
        try:
            for _changes in watchfiles.watch(
                git_dir,
                watch_filter=_ref_filter,
                stop_event=stop,
                debounce=400,
                step=100,
                rust_timeout=0,
                raise_interrupt=False,
            ):
                log.debug("refs changed", repo=str(git_dir))
                self.poke(REFS)
        except Exception as err:  # a vanished directory must not kill the daemon silently
            log.error("watching refs stopped", error=str(err), repo=str(git_dir))

    def _start_watcher(self) -> None:
        self._stop_watcher()
        try:
            git_dir = self.source.watch_dir()
        except SourceError as err:
            log.error("cannot watch the repository", error=str(err))
            return
        if git_dir is None:
            return
        stop = threading.Event()
        self._watch_stop = stop
        threading.Thread(
            target=self._watch_refs, args=(git_dir, stop), name="watch-refs", daemon=True
        ).start()

    def _stop_watcher(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None

    def _start_http(self) -> None:
        from reconciler.webhook import HttpServer

        if not self.config.listen:
            return
        self._http = HttpServer(
            self.config.listen,
            secret=lambda: self.config.webhook_secret,
            on_push=lambda: self.poke(WEBHOOK),
            health=self._health,
            metrics=lambda: (self.metrics.render(), CONTENT_TYPE),
            on_webhook=lambda result: self.metrics.webhooks.labels(result).inc(),
            live=self._live,
        )
        self._http.start()
        log.info("listening", address=self._http.address)

    def _rebind_http(self, old: DaemonConfig) -> None:
        """Bind the new address first; only then close the old listener (a reload that
        cannot bind keeps health, metrics and the webhook where they were)."""
        previous = self._http
        self._http = None
        try:
            self._start_http()
        except OSError as err:
            self._http = previous
            log.error(
                "cannot listen on the new address: keeping the old listener",
                address=self.config.listen,
                kept=previous.address if previous is not None else "",
                error=str(err),
            )
            self.config = dataclasses.replace(self.config, listen=old.listen)
            return
        if previous is not None:
            threading.Thread(target=previous.close, daemon=True).start()

    def _stop_http(self) -> None:
        if self._http is not None:
            threading.Thread(target=self._http.close, daemon=True).start()
            self._http = None

    def _health(self) -> tuple[bool, dict[str, Any]]:
        hosts = [
            health.HostHealth(
                h.name,
                h.entry.uri,
                h.unreachable,
                str(h.status.reason) if h.status else "",
                h.status.message if h.status else "",
                h.applied,
            )
            for h in self.hosts
        ]
        ok, problems = health.readiness(hosts, self.reason, self.message, self._stop_requested)
        info = {
            "attempted_revision": self.attempted,
            "applied_revision": self.applied,
            "reason": self.reason,
            "hosts": health.host_body(hosts),
            "problems": problems,
            **({"rollback": self._rollback.to_json()} if self._rollback else {}),
        }
        return ok, info

    def _live(self) -> tuple[bool, dict[str, Any]]:
        ok = self._looping and not self._stop_requested
        return ok, {"loop": "running" if ok else "stopped"}

    # -- one reconcile --------------------------------------------------------------------

    def _reconcile_host(self, h: HostRunner, snapshot: SourceSnapshot) -> None:
        t0 = time.monotonic()
        started = time.time()
        path = self.config.source.path
        log.debug("reconciling", host=h.name, uri=h.entry.uri)
        try:
            if h.down is not None:
                raise h.down
            hv = h.connect()
            kw: dict[str, Any] = {}
            if _ACCEPTS_CACHE:
                if h.cache is None:
                    h.cache = _new_cache()
                kw["cache"] = h.cache
            h.unreachable = ""
            self.metrics.hosts_up.labels(h.name).set(1)
            h.target = _guarded(h, self.hosts)
            plan, status = reconcile_once(snapshot, path, h.target, hv, should_stop=self._should_stop, **kw)
            if not hv.alive():  # dropped during the apply: counted as unreachable, probed again
                h.close()
                h.unreachable = f"connection lost: {status.message}"[:300]
            h.requeue_s = min(
                (
                    c.requeue_after_s
                    for c in plan.changes
                    if c.requeue_after_s > 0 and c.action != Action.WAIT
                ),
                default=0.0,
            )
            h.plan = plan
            after = _live_after(hv, plan, h.name, h.target.policy.owner)
            h.rows = vm_statuses(
                plan,
                status.results,
                after,
                h.name,
                applied={**h.applied_at, **{r.name: r.applied_at for r in h.rows}},
            )
            _record_guard(h, plan, status, after)
            h.copies, h.reachable = (
                frozenset(d.name for d in after if ownership.claimable(d.mark, h.target.policy.owner)),
                True,
            )
            _log_drift(h, plan)
            _log_plan_warnings(h, plan)
        except SourceError:
            raise  # an unreadable object of the commit: the caller repairs the source
        except HypervisorError as err:
            alive = h.hv is not None and h.hv.alive()
            h.close()
            if isinstance(err, HypervisorUnavailable) or not alive:
                h.unreachable = str(err)[:300]
                h.reachable = False
            status = ReconcileStatus(
                Reason.APPLY_FAILED, snapshot.commit, "", started, int((time.monotonic() - t0) * 1000),
                message=f"{h.entry.uri}: {err}",
            )  # fmt: skip
            h.rows = tuple(_with_sync(r, "Unknown", f"host unreachable: {err}") for r in h.rows)
        except Exception as err:  # a bug in one stage must not take the daemon down
            log.exception("reconcile crashed", host=h.name)
            status = ReconcileStatus(
                Reason.APPLY_FAILED, snapshot.commit, "", started, int((time.monotonic() - t0) * 1000),
                message=f"internal error: {type(err).__name__}: {err}",
            )  # fmt: skip
        h.status = status
        if h.unreachable:
            self.metrics.hosts_up.labels(h.name).set(0)
            h.next_probe = time.monotonic() + health.PROBE_INTERVAL_S
        if status.applied_revision:
            h.applied = status.applied_revision
        self.metrics.observe(h.name, str(status.reason), time.monotonic() - t0, h.rows)
        changes = sum(1 for c in h.plan.changes if not c.is_noop) if h.plan is not None else 0
        level = log.info if status.reason == Reason.SUCCEEDED else log.error
        level(
            "reconciled",
            host=h.name,
            reason=str(status.reason),
            duration_ms=int((time.monotonic() - t0) * 1000),
            changes=changes,
            **({"error": status.message} if status.message else {}),
        )

    def _retryable(self) -> bool:
        for h in self.hosts:
            st = h.status
            if st is None or st.reason == Reason.SUCCEEDED:
                continue
            if st.reason == Reason.APPLY_FAILED or any(not r.ok and r.transient for r in st.results):
                return True
        return False

    def _source_failed(self, err: ReconcilerError, head: str, started: float, t0: float) -> None:
        kind = "signature" if isinstance(err, SignatureError) else "source"
        self.metrics.source_errors.labels(kind).inc()
        self.reason, self.message = str(Reason.SOURCE_FAILED), str(err)
        if head:
            self.attempted = head
        log.error("source failed", error=str(err), revision=head[:12] if head else "")
        rows = tuple(r for h in self.hosts for r in h.rows)
        status = ReconcileStatus(
            Reason.SOURCE_FAILED, head or self.attempted, "", started, int((time.monotonic() - t0) * 1000),
            vms=rows, message=str(err), extra={"hosts": self._hosts_state(), "failed_commit": _failed_commit(err)},
        )  # fmt: skip
        self._record(status)
        if err.transient:
            self._schedule_retry()
            self._t.source_failing = True

    def cycle(self, fetch: bool, force: bool) -> None:
        """Fetch (remote), read the head, verify, reconcile every host. Never raises ReconcilerError."""
        t0, started = time.monotonic(), time.time()
        head = ""
        try:
            if fetch:
                self.source.fetch()
            head = self.source.head()
        except SourceError as err:
            self._source_failed(err, "", started, t0)
            return
        if not force and head == self.attempted:
            return
        if head == self._failed_build == self.attempted:
            log.debug("not retried: this revision failed to build", revision=head[:12])
            return  # the same input fails the same way: wait for a new commit or a reload
        with structlog.contextvars.bound_contextvars(revision=head[:12]):
            if self._rebuild:
                self._rebuild_from_marks()
            try:
                if self._check_ancestry(head, started, t0):
                    return
                self.source.verify(self.applied, head)
                try:
                    snapshot = self.source.snapshot(head)
                except SourceError:
                    self.source.recover()
                    snapshot = self.source.snapshot(head)
            except SourceError as err:
                self._source_failed(err, head, started, t0)
                return
            if self._stop_requested:
                return  # SIGTERM while fetching or verifying: start nothing new
            self.attempted = head
            self._begin_reconcile()
            unreadable: SourceError | None = None
            try:
                try:
                    self._reconcile_hosts(snapshot)
                except SourceError as err:
                    # An object of the commit git cannot read (GitPython raises ValueError
                    # and others for a corrupt blob): clone the mirror again, once.
                    if not self.source.recover(unreadable=str(err)):
                        raise
                    snapshot = self.source.snapshot(head)
                    self._reconcile_hosts(snapshot)
            except SourceError as err:
                unreadable = err
            finally:
                self._end_reconcile()
            if unreadable is not None:
                self._source_failed(unreadable, head, started, t0)
                return
            self._finish(snapshot, started, t0)
            if self.show_plans and any(
                h.plan is not None and (h.plan.has_changes or h.plan.errors) for h in self.hosts
            ):
                self._print()
        if not self.keep_plans:
            for h in self.hosts:
                h.plan = None  # the desired and live XML of every domain: not needed until the next plan
        _release_memory()

    def _reconcile_hosts(self, snapshot: SourceSnapshot) -> None:
        if len(self.hosts) > 1:  # host moves: where each host holds copies, read before any plan
            for h in self.hosts:
                _read_copies(h)
        for h in self.hosts:
            h.plan = None
            self._reconcile_host(h, snapshot)

    def _rebuild_from_marks(self) -> None:
        """No usable state file: the last applied commit is what the domains' marks say."""
        self._rebuild = False
        for h in self.hosts:
            if h.applied:
                continue
            try:
                owner = h.target.policy.owner  # another owner's marks say nothing of our commits
                ours = [d for d in h.connect().list_domains() if ownership.claimable(d.mark, owner)]
                h.applied = state_store.applied_from_marks(ours)
            except HypervisorError as err:
                log.warning("cannot read the host's marks to rebuild the state", host=h.name, error=str(err))
        if not self.applied:
            known = [h.applied for h in self.hosts if h.applied]
            self.applied = max(set(known), key=known.count) if known else ""
        if self.applied:
            log.info("state rebuilt from the domains' marks", applied=self.applied[:12])

    def _check_ancestry(self, head: str, started: float, t0: float) -> bool:
        """Log and record a rollback; True when the policy refuses it (nothing is applied)."""
        if self._rollback is not None and self._rollback.to_revision != head:
            self._rollback = None  # the branch moved on
        descends = (
            self.source.is_ancestor(self.applied, head) if self.applied and head != self.applied else None
        )
        found = rollback.decide(self.applied, head, descends, self.config.policy)
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
        rows = tuple(r for h in self.hosts for r in h.rows)
        status = ReconcileStatus(
            Reason.ROLLBACK_REFUSED, head, "", started, int((time.monotonic() - t0) * 1000),
            vms=rows, message=self.message, extra={"hosts": self._hosts_state()},
        )  # fmt: skip
        self._record(status)
        return True

    def _finish(self, snapshot: SourceSnapshot, started: float, t0: float) -> None:
        statuses = [h.status for h in self.hosts if h.status is not None]
        failed = [s for s in statuses if s.reason != Reason.SUCCEEDED]
        ok = not failed
        if ok:
            self.applied = snapshot.commit
            self.metrics.applied_ts.set(snapshot.committed_at)
            self.metrics.applied_at.set(time.time())
        build_failed = bool(failed) and all(s.reason == Reason.BUILD_FAILED for s in failed)
        self._failed_build = snapshot.commit if build_failed else ""
        self.reason = str(failed[0].reason if failed else Reason.SUCCEEDED)
        self.message = "; ".join(s.message for s in failed if s.message)
        status = ReconcileStatus(
            reason=failed[0].reason if failed else Reason.SUCCEEDED,
            attempted_revision=snapshot.commit,
            applied_revision=snapshot.commit if ok else "",
            started_at=started,
            duration_ms=int((time.monotonic() - t0) * 1000),
            results=tuple(r for s in statuses for r in s.results),
            vms=tuple(r for h in self.hosts for r in h.rows),
            message=self.message,
            extra={"hosts": self._hosts_state()},
        )
        self._record(status)
        self._t.source_failing = False
        if self._retryable():
            self._schedule_retry()
        else:
            self._t.failures, self._t.retry_at = 0, None
        waits = [h.requeue_s for h in self.hosts if h.requeue_s > 0]
        changes = [c for h in self.hosts if h.plan is not None for c in h.plan.changes]
        if any(c.action == Action.WAIT for c in changes) and any(
            c.action == Action.DELETE and c.desired is not None for c in changes
        ):
            waits.append(RECHECK_S)  # a host move half done: the new host may start its copy now
        self._t.requeue_at = time.monotonic() + min(waits) if waits else None
        if waits:
            log.info("plan again later", in_s=round(min(waits), 1), why="crash-loop back-off or a host move")

    def _hosts_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for h in self.hosts:
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
            }
        return out

    def _record(self, status: ReconcileStatus) -> None:
        self.reconciles += 1
        if self._rollback is not None and self._rollback.to_revision == status.attempted_revision:
            status = dataclasses.replace(status, extra={**status.extra, "rollback": self._rollback.to_json()})
        try:
            self._state_doc = write_state(self.config.state_dir, status, self._state_doc)
        except OSError as err:
            log.error("cannot write the state file", error=str(err), state_dir=self.config.state_dir)
        self.metrics.set_revision(self.attempted, self.applied)
        self.notify.status(self.status_line())

    def _schedule_retry(self) -> None:
        self._t.failures += 1
        delay = min(
            BACKOFF_BASE_S * 2 ** (self._t.failures - 1), BACKOFF_MAX_S, self.config.resync_interval_s
        )
        self._t.retry_at = time.monotonic() + delay
        log.info("retry scheduled", in_s=round(delay, 1), failures=self._t.failures)

    def status_line(self) -> str:
        rows = [r for h in self.hosts for r in h.rows]
        synced = sum(1 for r in rows if r.sync == "Synced")
        failed = sum(1 for r in rows if r.sync == "Failed")
        applied = self.applied[:12] or "none"
        text = f"applied {applied}; {len(rows)} VMs, {synced} synced, {failed} failed"
        if self.reason and self.reason != Reason.SUCCEEDED:
            text += f"; {self.attempted[:12]} {self.reason}"
        return text

    # -- reload ---------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the config; a bad one is logged and the current one kept."""
        if self.loader is None:
            return False
        self.notify.reloading()
        try:
            new = self.loader()
        except (ConfigError, OSError, ValueError) as err:
            log.error("reload failed: keeping the current configuration", error=str(err))
            self.notify.send("READY=1", f"STATUS=reload failed: {err}")
            return False
        old, self.config = self.config, new
        self._failed_build = ""
        if (new.source, new.state_dir) != (old.source, old.state_dir):
            self.source = GitSource(new.source, new.state_dir)
            self._state_doc, self._rebuild = state_store.load(new.state_dir)
            self.attempted = ""
            self._start_watcher()
        if (new.hosts, new.policy) != (old.hosts, old.policy):
            for h in self.hosts:
                h.close()
            self.hosts = [self._runner(e) for e in new.hosts]
            for gone in {e.config.name for e in old.hosts} - {e.config.name for e in new.hosts}:
                self.metrics.forget_host(gone)
            self.attempted = ""
        if new.listen != old.listen:
            self._rebind_http(old)
        if (new.log_format, new.log_level) != (old.log_format, old.log_level):
            from reconciler.log import setup_logging

            setup_logging(new.log_format, new.log_level)
        log.info("configuration reloaded", config=new.path)
        self.notify.send("READY=1", f"STATUS={self.status_line()}")
        return True

    # -- the loop -------------------------------------------------------------------------

    def _sleep(self, timeout: float) -> None:
        """Block until a trigger arrives or ``timeout`` passes (no polling)."""
        if self._queue or self._stop_requested:
            return
        with contextlib.suppress(InterruptedError):
            select.select([self._rfd], [], [], timeout)

    def _take(self) -> set[str]:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._rfd, 4096):
                pass
        kinds: set[str] = set()
        while self._queue:
            kind = self._queue.popleft()
            kinds.add(kind)
            self.metrics.triggers.labels(kind).inc()
        return kinds

    def _timeout(self, now: float) -> float:
        deadlines = [self._t.next_resync]
        if self.source.remote:
            deadlines.append(self._t.next_fetch)
        if self._t.retry_at is not None:
            if self._t.source_failing:  # the fetch and resync timers wait for the retry too
                deadlines = [max(d, self._t.retry_at) for d in deadlines]
            deadlines.append(self._t.retry_at)
        deadlines += [h.next_probe for h in self.hosts if h.unreachable]
        if self._t.requeue_at is not None:
            deadlines.append(self._t.requeue_at)
        wait = max(0.0, min(deadlines) - now)
        if self.notify.watchdog_interval_s is not None:
            wait = min(wait, self.notify.watchdog_interval_s)
        return wait

    def step(self, kinds: set[str]) -> None:
        """Run what the pending triggers and the timers ask for (at most one reconcile)."""
        if kinds == {LIFECYCLE}:
            # Events come in bursts (a guest stopping emits several): gather them first.
            deadline = time.monotonic() + LIFECYCLE_SETTLE_S
            while not self._stop_requested and (left := deadline - time.monotonic()) > 0:
                self._sleep(left)
                kinds |= self._take()
        queued = set(kinds)
        now = time.monotonic()
        if RELOAD in kinds:
            self.reload()
        self._probe_hosts(now, kinds)
        source_backoff = self._t.source_failing and self._t.retry_at is not None and now < self._t.retry_at
        if self._t.retry_at is not None and now >= self._t.retry_at:
            kinds.add(RETRY)
            self._t.retry_at = None
        if self._t.requeue_at is not None and now >= self._t.requeue_at:
            kinds.add(REQUEUE)
            self._t.requeue_at = None
        # A failing source's back-off is honoured by every timer: it is not fetched and read
        # again at every fetch or resync interval while the log says "retry in 300 s".
        # (A failed apply does not hold the timers: a fix may arrive with the next fetch.)
        if now >= self._t.next_resync and not source_backoff:
            kinds.add(RESYNC)
        remote = self.source.remote
        if remote and now >= self._t.next_fetch and not source_backoff:
            kinds.add(FETCH)
        for kind in kinds & {RETRY, REQUEUE, RESYNC, FETCH} - queued:
            self.metrics.triggers.labels(kind).inc()  # timer triggers; queued ones were counted in _take
        if not kinds:
            return
        if RECONNECT in kinds and not self._t.source_failing:
            self._t.failures, self._t.retry_at = 0, None  # the host is back: no back-off to wait out
        # The resync (every 30 s by default) re-reads the hosts, not the remote: fetches keep their interval.
        fetch = remote and bool(kinds & {FETCH, WEBHOOK, RETRY, RELOAD, START})
        force = bool(kinds & FORCING)
        self.cycle(fetch=fetch, force=force)
        now = time.monotonic()
        if fetch:
            self._t.next_fetch = now + self.config.fetch_interval_s
        if force:
            self._t.next_resync = now + self.config.resync_interval_s

    def _probe_hosts(self, now: float, kinds: set[str]) -> None:
        """Try to reach unreachable hosts again (cheap: one connection attempt each); a host
        that answers triggers a reconcile at once."""
        for h in self.hosts:
            if not h.unreachable or now < h.next_probe:
                continue
            try:
                h.connect()
            except HypervisorError as err:
                h.next_probe = time.monotonic() + health.PROBE_INTERVAL_S
                log.debug("host still unreachable", host=h.name, error=str(err))
                continue
            log.info("host reconnected", host=h.name, uri=h.entry.uri, was=h.unreachable)
            h.unreachable = ""
            self.metrics.hosts_up.labels(h.name).set(1)
            kinds.add(RECONNECT)
            self.metrics.triggers.labels(RECONNECT).inc()

    def run(self, once: bool = False) -> int:
        Path(self.config.state_dir).mkdir(parents=True, exist_ok=True)
        if once:
            self.keep_plans = True
            self.cycle(fetch=True, force=True)
            self._print()
            self._close_hosts()
            return 0 if self.reason == Reason.SUCCEEDED else 1
        try:
            self._start_http()
        except OSError as err:
            where = self.config.path or "--listen"
            raise ConfigError(
                f"listen: cannot listen on {self.config.listen}: {err.strerror}", where
            ) from err
        self._start_watcher()
        if hasattr(Hypervisor, "start_event_loop"):
            try:
                Hypervisor.start_event_loop()
            except ReconcilerError as err:
                log.warning("no libvirt lifecycle events", error=str(err))
        log.info(
            "started",
            repo=self.config.source.repo,
            branch=self.config.source.branch or "HEAD",
            path=self.config.source.path,
            hosts=[h.entry.uri for h in self.hosts],
            state_dir=self.config.state_dir,
        )
        self.notify.ready(self.status_line())
        self.poke(START)
        self._looping = True
        try:
            while not self._stop_requested:
                self._sleep(self._timeout(time.monotonic()))
                self.notify.watchdog()
                if self._stop_requested:
                    break
                self.step(self._take())
                self.notify.watchdog()
        finally:
            self._looping = False
            if self._signal_name:
                log.info("signal", signal=self._signal_name)
            self.notify.stopping()
            self._stop_watcher()
            self._close_hosts()
            log.info("stopped", attempted=self.attempted[:12], applied=self.applied[:12])
        return 0

    def _close_hosts(self) -> None:
        for h in self.hosts:
            h.close()

    def _print(self) -> None:
        for h in self.hosts:
            if h.plan is not None:
                print(format_plan(h.plan), file=self.out)
                print(file=self.out)
            if h.rows:
                print(format_table(h.rows), file=self.out)
                print(file=self.out)
        if self.message:
            print(f"{self.reason}: {self.message}", file=self.out)
        self.out.flush()


def _restore_guard(h: HostRunner, recorded: Any) -> None:
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


def _guarded(h: HostRunner, hosts: list[HostRunner]) -> HostTarget:
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


def _read_copies(h: HostRunner) -> None:
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


def _restore_copies(h: HostRunner, rows: Any) -> None:
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


def _record_guard(h: HostRunner, plan: Plan, status: ReconcileStatus, after: list[LiveDomain]) -> None:
    policy = h.target.policy
    if plan.prune_refused:
        before = h.prune_refused
        h.prune_refused = {
            "revision": plan.revision,
            "limit": policy.max_prune_percent,
            "message": plan.prune_refused,
            "would_prune": sorted(
                c.name for c in plan.changes if c.desired is None and "not pruned: prune refused" in c.reason
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


def _log_plan_warnings(h: HostRunner, plan: Plan) -> None:
    """Each plan warning (stale facts file, pod network fallback, ...) once while it holds."""
    current = frozenset(plan.warnings)
    for warning in sorted(current - h.warned):
        log.warning("plan warning", host=h.name, warning=warning)
    h.warned = current


def _log_drift(h: HostRunner, plan: Plan) -> None:
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


def _release_memory() -> None:
    """Hand the transient memory of a full reconcile back to the system (glibc keeps freed
    heap pages otherwise, so the idle daemon would sit at its peak RSS)."""
    gc.collect(1)  # the young generations only: a full pass over the caches costs ~70 ms with 1000 VMs
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _expected_events(c: Change) -> frozenset[str]:
    """The lifecycle events applying ``c`` itself causes (a crash never is one of them)."""
    if c.is_noop:
        return frozenset()
    words = {"defined"} if c.action in (Action.CREATE, Action.UPDATE, Action.ADOPT, Action.RESTART) else set()
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


def _event_matters(event: str, detail: str) -> bool:
    try:
        from reconciler.lifecycle import reconcile_on_event
    except ImportError:
        return True
    return reconcile_on_event(event, detail)


def _new_cache() -> Any:
    """The cache reconcile_once keeps between reconciles of one host (expansion, render, plan).
    The daemon only plans and applies: it keeps rendered domains, not expanded VMs."""
    from reconciler.reconcile import PipelineCache

    return PipelineCache(keep_expanded=False)


def _live_after(hv: Hypervisor, plan: Plan, host: str, owner: str = "") -> list[LiveDomain]:
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


def _with_sync(row: VMStatus, sync: str, message: str) -> VMStatus:
    from dataclasses import replace

    return replace(row, sync=sync, message=message)


def _failed_commit(err: ReconcilerError) -> str:
    text = str(err)
    if isinstance(err, SignatureError) and text.startswith("commit "):
        return text.split()[1].rstrip(":")
    return ""


def overrides_from_args(args: argparse.Namespace) -> Overrides:
    return Overrides(
        repo=args.repo,
        branch=args.branch,
        path=args.path,
        connect=args.connect,
        host_config=args.host_config,
        state_dir=args.state_dir,
        listen=args.listen,
        prune=args.prune,
    )


@contextlib.contextmanager
def _signals(daemon: Daemon) -> Iterator[None]:
    def on_stop(signum: int, _frame: object) -> None:
        # Only lock-free work in a handler: a flag and a byte on the self-pipe.
        daemon.stop(signal.Signals(signum).name)

    def on_hup(_signum: int, _frame: object) -> None:
        daemon.poke(RELOAD)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(args: argparse.Namespace) -> int:
    overrides = overrides_from_args(args)

    def loader() -> DaemonConfig:
        return load_config(args.config, overrides)

    config = loader()
    if config.path:  # the file's log settings, unless a flag gave another
        from reconciler.log import setup_logging

        fmt = args.log_format if args.log_format != "auto" else config.log_format
        level = args.log_level if args.log_level != "info" else config.log_level
        setup_logging(fmt, level, color=not getattr(args, "no_color", False))
    daemon = Daemon(config, loader)
    daemon.show_plans = bool(args.show_plans)
    with _signals(daemon):
        return daemon.run(once=bool(args.once))
