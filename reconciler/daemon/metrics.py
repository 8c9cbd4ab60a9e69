"""Prometheus metrics of one daemon, in their own registry.

Input: reconcile outcomes from the daemon. Output: metric families rendered by
prometheus-client for ``GET /metrics``. No I/O of its own; it never decides anything.
Names are load-bearing (dashboards and alerts use them): ``reconciler_*`` below.
"""

from __future__ import annotations

import contextlib
from collections import Counter as Tally
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reconciler.daemon.vmseries import VMGauge, VMSeries
from reconciler.model.problems import Notice
from reconciler.model.results import Sync

if TYPE_CHECKING:
    from collections.abc import Iterable

    from reconciler.model.results import VMStatus

NOTICES = tuple(str(n) for n in Notice)
SYNC_STATES = tuple(str(s) for s in Sync)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self._sync_seen: dict[str, set[str]] = {}
        self._vm_seen: dict[str, dict[str, str]] = {}  # host -> VM name -> its sync series
        self.registry = CollectorRegistry()
        self._reconcile_families(self.registry)
        self._source_families(self.registry)
        self._delivery_families(self.registry)
        self._host_families(self.registry)
        self._vm_families(self.registry)

    def _reconcile_families(self, r: CollectorRegistry) -> None:
        """Each reconcile of a host: its result, errors, wall time, VMs by sync state, and
        the revisions attempted and applied."""
        self.reconciles = Counter(
            "reconciler_reconciles",
            "Reconciles run, by host and result (reason)",
            ["host", "result"],
            registry=r,
        )
        self.errors = Counter(
            "reconciler_reconcile_errors", "Reconciles that did not succeed, by host and reason", ["host", "reason"],
            registry=r,
        )  # fmt: skip
        self.duration = Histogram(
            "reconciler_reconcile_duration_seconds",
            "Wall time of one reconcile of one host",
            ["host"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.vms = Gauge("reconciler_vms", "Managed VMs by host and sync state", ["host", "sync"], registry=r)
        self.applied_ts = Gauge(
            "reconciler_last_applied_revision_timestamp_seconds",
            "Commit time of the last revision applied to every host",
            registry=r,
        )
        self.applied_at = Gauge(
            "reconciler_last_applied_timestamp_seconds", "When the last revision was applied", registry=r
        )
        self.revision = Gauge(
            "reconciler_revision_info", "Last attempted and applied revision (value is always 1)",
            ["attempted", "applied"], registry=r,
        )  # fmt: skip

    def _source_families(self, r: CollectorRegistry) -> None:
        """What reaches the loop: source failures, webhooks, HTTP clients dropped or refused,
        rollbacks and wake-ups."""
        self.source_errors = Counter(
            "reconciler_source_errors",
            "Fetch, read or signature failures of the source",
            ["kind"],
            registry=r,
        )
        self.webhooks = Counter(
            "reconciler_webhook_requests", "Webhook requests by result", ["result"], registry=r
        )
        self.http_dropped = Counter(
            "reconciler_http_dropped", "HTTP clients that closed or stalled before their answer", registry=r
        )
        self.http_refused = Counter(
            "reconciler_http_refused", "HTTP requests refused unread: busy (too many connections) or "
            "rate-limited (one client too often)", ["why"], registry=r,
        )  # fmt: skip
        self.rollbacks = Counter(
            "reconciler_rollbacks", "Heads that did not descend from the last applied commit, by decision",
            ["decision"], registry=r,
        )  # fmt: skip
        self.triggers = Counter(
            "reconciler_triggers", "Wake-ups of the loop by trigger kind", ["kind"], registry=r
        )

    def _delivery_families(self, r: CollectorRegistry) -> None:
        """Deliveries (commit statuses, notifications), their outbox, and the writes of state.json."""
        self.notifications = Counter(
            "reconciler_notifications", "Commit statuses and notifications by destination and result "
            "(sent, retry, unanswered, unauthorized, rejected, gave-up, superseded, dropped, suppressed)",
            ["destination", "result"], registry=r,
        )  # fmt: skip
        self.outbox_depth = Gauge(
            "reconciler_outbox_depth", "Requests waiting per destination", ["destination"], registry=r
        )
        self.outbox_oldest = Gauge(
            "reconciler_outbox_oldest_seconds", "How long the oldest request waiting per destination has waited",
            ["destination"], registry=r,
        )  # fmt: skip
        self.outbox_failures = Counter(
            "reconciler_outbox_failures", "Failed deliveries per destination (retried, unanswered, given up)",
            ["destination"], registry=r,
        )  # fmt: skip
        self.state_write_errors = Counter(
            "reconciler_state_write_errors", "Failed writes of state.json (each retried)", registry=r
        )
        self.state_written = Gauge(
            "reconciler_state_file_ok", "1 when the last write of state.json succeeded, 0 while it fails",
            registry=r,
        )  # fmt: skip
        self.state_written.set(1)

    def _host_families(self, r: CollectorRegistry) -> None:
        """Per host: its connection, its revision applied, notices, VMs left to other hosts,
        images downloaded and the prune guard."""
        self.hosts_up = Gauge(
            "reconciler_host_up", "1 when the host's libvirt connection is open, 0 when unreachable", ["host"],
            registry=r,
        )  # fmt: skip
        self.revision_applied = Gauge(
            "reconciler_revision_applied", "1 when the host's last attempted revision is applied there, else 0",
            ["host"], registry=r,
        )  # fmt: skip
        self.notices = Gauge(
            "reconciler_vm_notices",
            "VMs whose last plan says something will not happen, by host and notice "
            "(pinned-revision, disk-not-resized)",
            ["host", "notice"],
            registry=r,
        )
        self.other_hosts = Gauge(
            "reconciler_vms_other_hosts",
            "VMs of the revision that select another host (or none, on a host not claiming those)",
            ["host"],
            registry=r,
        )
        self.image_bytes = Counter(
            "reconciler_image_bytes_downloaded",
            "Bytes of images downloaded into the host's image store (http sources), by host",
            ["host"],
            registry=r,
        )
        self.prune_refused = Gauge(
            "reconciler_prune_refused",
            "1 while the prune guard refuses the host's revision",
            ["host"],
            registry=r,
        )

    def _vm_families(self, r: CollectorRegistry) -> None:
        """Per VM (labels host and vm: one series per VM and family; a VM's series go when it does)."""
        self.vm_rows = VMSeries()  # reconciler_vm_sync, reconciler_vm_restart_required, from the rows
        r.register(self.vm_rows)
        self.vm_crash_restarts = Counter(
            "reconciler_vm_crash_restarts", "Starts of the VM after a crash (its run strategy)",
            ["host", "vm"], registry=r,
        )  # fmt: skip
        self.vm_ready = VMGauge(
            "reconciler_vm_ready",
            "1 when the VM is Ready (running, and its readiness probe passes when it has one), else 0",
        )
        r.register(self.vm_ready)
        self.liveness_restarts = Counter(
            "reconciler_vm_liveness_restarts",
            "Guests a failing liveness probe ended (their run strategy restarts them)",
            ["host", "vm"],
            registry=r,
        )

    def observe_vms(self, host: str, rows: Iterable[VMStatus]) -> None:
        """Each VM's series set; those of a VM no longer listed, or of a state it left, removed."""
        for name in self.vm_rows.observe(host, rows):
            for family in (self.vm_crash_restarts, self.liveness_restarts):  # vm_ready: the prober's (by key)
                with contextlib.suppress(KeyError):
                    family.remove(host, name)

    def crash_restarted(self, host: str, vm: str) -> None:
        self.vm_crash_restarts.labels(host, vm).inc()

    def observe(self, host: str, reason: str, duration_s: float, rows: Iterable[VMStatus]) -> None:
        self.reconciles.labels(host, reason).inc()
        if reason != "Succeeded":
            self.errors.labels(host, reason).inc()
        self.duration.labels(host).observe(duration_s)
        counts = Tally(str(r.sync) for r in rows)
        # Every state this host ever reported is set again (to 0 when gone): the series of
        # one host always sum to its number of VMs.
        seen = self._sync_seen.setdefault(host, set(SYNC_STATES))
        seen |= set(counts)
        for sync in sorted(seen):
            self.vms.labels(host, sync).set(counts.get(sync, 0))
        self.observe_vms(host, rows)
        noticed = Tally(kind for r in rows for kind in {k for k, _ in r.notes})
        for kind in NOTICES:
            self.notices.labels(host, kind).set(noticed.get(kind, 0))

    def observe_plan(self, host: str, other_hosts: int) -> None:
        """What the host's last plan left to other hosts."""
        self.other_hosts.labels(host).set(other_hosts)

    def forget_host(self, host: str) -> None:
        """A host left the configuration: its series go (the totals stay true)."""
        self.observe_vms(host, ())
        self.vm_rows.forget(host)
        for sync in self._sync_seen.pop(host, set()):
            self.vms.remove(host, sync)
        for kind in NOTICES:
            with contextlib.suppress(KeyError):
                self.notices.remove(host, kind)
        for gauge in (self.hosts_up, self.revision_applied, self.prune_refused, self.other_hosts):
            with contextlib.suppress(KeyError):
                gauge.remove(host)

    def set_revision(self, attempted: str, applied: str) -> None:
        self.revision.clear()
        self.revision.labels(attempted[:12], applied[:12]).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)
