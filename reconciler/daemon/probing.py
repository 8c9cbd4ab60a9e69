"""The daemon's probes: the prober fed from each reconcile, its answers shown and acted on.

Input: the host runners after a reconcile (their plan: each VM's ``Probes``; their rows:
whether it runs), the daemon's clock, metrics and publisher. Output: ``Health``, which
owns the one ``Prober`` (``prober.py``) and its transport (``HostGuests``: one libvirt
connection per host of its own, ``host/guest.py``, never the reconcile's), and:

- ``readiness``: the snapshot the prober publishes, a frozen ``Mapping[VMKey,
  Readiness]`` replaced (never changed) each time a VM's Ready or its reason changes;
- ``health()``: each VM's ``VMHealth`` (status, the page, ``/api/status``);
- the metric ``reconciler_vm_ready``, read from that snapshot when scraped;
- on a transition: a log line, the ``not-ready``
  event (``resolved`` when Ready again) and the page refreshed;
- a failing liveness probe: the guest ended by the prober, the domain and the ID of
  the run it ends named to its host's runner first (``ended_by_probe``: that run's
  destroy reads as a failure, which the run strategy restarts under the crash-loop
  back-off; a listing before the destroy still sees it run), counted
  (``reconciler_vm_liveness_restarts``), logged, the ``liveness-failed`` event, and a
  reconcile asked for.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from reconciler.daemon import events
from reconciler.daemon.prober import Prober, Target, Transition
from reconciler.daemon.scheduler import HEALTH
from reconciler.errors import HypervisorError
from reconciler.host.guest import GuestProbes
from reconciler.model import PowerState
from reconciler.model.health import NO_PROBES, Answer, GuestAddress, Outcome, Probe, ReadyKind
from reconciler.model.rollout import ReadySource
from reconciler.wording import events as event_words
from reconciler.wording.health import answer_words, ready_words, reason_words

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from reconciler.context import Clock
    from reconciler.daemon.metrics import Metrics
    from reconciler.daemon.publish import Publisher
    from reconciler.daemon.runner import HostRunner
    from reconciler.model.changes import Plan
    from reconciler.model.health import Readiness, VMHealth
    from reconciler.model.keys import VMKey
    from reconciler.model.results import VMStatus

log = structlog.get_logger("reconciler.daemon")


class HostGuests:
    """The prober's transport: a connection of its own per host (opened when first
    needed, opened again after a failure)."""

    def __init__(
        self, uris: Callable[[], Mapping[str, str]], ending: Callable[[str, str, int], None] | None = None
    ) -> None:
        self.uris = uris
        self.ending = ending  # told (host, domain, run ID) before a guest is ended
        self._lock = threading.Lock()
        self._conns: dict[str, GuestProbes] = {}

    def _conn(self, host: str) -> GuestProbes:
        with self._lock:
            conn = self._conns.get(host)
            if conn is not None and conn.alive():
                return conn
            uri = self.uris().get(host)
            if uri is None:
                raise HypervisorError(f"host {host} is not configured")
            conn = GuestProbes(uri)
            self._conns[host] = conn
            return conn

    def run(self, host: str, domain: str, probe: Probe, address: GuestAddress | None) -> Answer:
        try:
            return self._conn(host).run(domain, probe, address)
        except HypervisorError:
            return Answer(Outcome.ERROR)

    def end(self, host: str, domain: str) -> None:
        conn = self._conn(host)
        if self.ending is not None:
            self.ending(host, domain, conn.run_id(domain))
        conn.end(domain)

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()


def targets_of(host: str, plan: Plan | None, rows: Iterable[VMStatus]) -> list[Target]:
    """The VMs a host's reconcile left: their probes (the plan), running or not (the rows)."""
    probes = {c.key: c.desired.probes for c in (plan.changes if plan else ()) if c.desired is not None}
    return [
        Target(r.key, host, r.name, probes.get(r.key, NO_PROBES), r.state == PowerState.RUNNING)
        for r in rows
        if r.key in probes
    ]


def restarted(plan: Plan | None, readiness: Mapping[VMKey, Readiness]) -> set[VMKey]:
    """The VMs whose guest started again since the prober's Ready of them (the domain's
    mark says when the reconciler last started it): their probes begin again, not Ready
    until they pass on the new run."""
    out = set()
    for c in plan.changes if plan is not None else ():
        mark = c.live.mark if c.live is not None else None
        r = readiness.get(c.key)
        if mark is not None and r is not None and r.ready and mark.last_start > r.since:
            out.add(c.key)
    return out


def with_health(row: VMStatus, vh: VMHealth | None) -> VMStatus:
    """A status row with the VM's Ready, its probes' last answers and its address."""
    if vh is None:
        return row
    said = [
        f"{kind} {answer_words(str(probe.action), state.last if state is not None else None)}"
        for kind, probe, state in (
            ("readiness", vh.probes.readiness, vh.ready_state),
            ("liveness", vh.probes.liveness, vh.live_state),
        )
        if probe is not None
    ]
    return replace(
        row,
        ready=vh.readiness.ready,
        ready_reason=sys.intern(str(vh.readiness.reason.kind)),  # one copy for every row
        ready_since=vh.readiness.since,
        probe="; ".join(said),
        address=vh.address.address if vh.address is not None else "",
        address_source=str(vh.address.source) if vh.address is not None else "",
        liveness_restarts=vh.liveness_restarts,
    )


class Health:
    def __init__(
        self,
        hosts: Callable[[], Sequence[HostRunner]],
        clock: Clock,
        metrics: Metrics,
        publish: Publisher,
        poke: Callable[[str], None],
        transport: HostGuests | None = None,
    ) -> None:
        self.hosts, self.clock, self.metrics, self.publish, self.poke = hosts, clock, metrics, publish, poke
        self.transport = transport or HostGuests(
            lambda: {h.name: h.entry.uri for h in self.hosts()}, self._ending
        )
        self.prober = Prober(self.transport, clock, on_change=self._changed, on_liveness=self._ended)
        metrics.vm_ready.follow(lambda: self.prober.readiness.by_host())  # read when scraped
        self._failing: set[VMKey] = set()  # VMs the not-ready event was sent for (the prober's thread)

    @property
    def readiness(self) -> Mapping[VMKey, Readiness]:
        """The readiness snapshot (replaced as a whole on each change, never changed)."""
        return self.prober.readiness

    def ready(self, key: VMKey) -> bool:
        """Whether ``key`` is Ready now (a VM no host's reconcile reported: not Ready)."""
        readiness = self.prober.readiness.get(key)
        return readiness is not None and readiness.ready

    def health(self) -> dict[VMKey, VMHealth]:
        return self.prober.health()

    def ready_source(self) -> ReadySource:
        """What paced restarts wait for (``plan/pace.py``): the prober's Ready (a VM no
        reconcile reported yet: not known), its reason in words, its readiness probe's kind
        ("running" without one)."""

        def ready(key: VMKey) -> bool | None:
            readiness = self.prober.readiness.get(key)
            return None if readiness is None else readiness.ready

        def cause(key: VMKey) -> str:
            readiness = self.prober.readiness.get(key)
            return "no answer yet" if readiness is None else reason_words(readiness.reason)

        def waits_for(key: VMKey) -> str:
            readiness = self.prober.readiness.get(key)
            action = None if readiness is None else readiness.reason.action
            return "running" if action is None else str(action)

        def since(key: VMKey) -> float:
            readiness = self.prober.readiness.get(key)
            return 0.0 if readiness is None else readiness.since

        return ReadySource(ready, cause, waits_for, since)

    def probed(self, h: HostRunner, rows: tuple[VMStatus, ...]) -> tuple[VMStatus, ...]:
        """A host's reconcile ended (the runner's hook): the prober watches its VMs as it
        left them, and its rows say their health."""
        targets = targets_of(h.name, h.plan, rows)
        gone = self.prober.keys_on(h.name) - {t.key for t in targets}
        self.prober.watch(h.name, targets, restarted(h.plan, self.prober.readiness))
        for key in gone:  # deleted, or moved to another host: its series go
            with contextlib.suppress(KeyError):
                self.metrics.liveness_restarts.remove(h.name, key.subject)
        health = self.prober.health()
        if self.prober.probing():
            self.prober.start()
        return tuple(with_health(r, health.get(r.key)) for r in rows)

    def close(self) -> None:
        self.prober.close()
        self.transport.close()

    def _changed(self, transitions: list[Transition]) -> None:
        """From the prober's thread, its answers' changes: the metric, the log, a
        reconcile asked for (the rows, ``state.json`` and the page say it; what waits
        for Ready goes on). A readiness probe that starts failing is the ``not-ready``
        event (a VM merely stopped or still starting is not), its passing again the
        event resolved."""
        now = self.clock.time()
        found = []
        for t in transitions:
            words = ready_words(t.after)
            log.info("readiness", host=t.host, subject=t.key.subject, ready=t.after.ready, why=words)
            failing = t.after.reason.kind == ReadyKind.PROBE_FAILED
            if failing and (t.before is None or t.before.reason.kind != ReadyKind.PROBE_FAILED):
                self._failing.add(t.key)
            elif t.after.ready and t.key in self._failing:
                self._failing.discard(t.key)
            else:
                continue
            found.append(
                events.Event(
                    "not-ready", t.host, "", "info" if t.after.ready else "warning",
                    event_words.readiness(t.key.subject, t.host, words), now, subject=t.key.subject,
                    reason=str(t.after.reason.kind), resolved=t.after.ready,
                )
            )  # fmt: skip
        self.publish.health_changed(found)
        self.poke(HEALTH)

    def _ending(self, host: str, domain: str, run: int) -> None:
        """Before the prober ends a guest: its host's runner reads that run's end as a failure."""
        for h in self.hosts():
            if h.name == host:
                h.ended_by_probe[domain] = run

    def _ended(self, target: Target, answer: Answer | None) -> None:
        probe = target.probes.liveness
        words = answer_words(str(probe.action), answer) if probe is not None else ""
        log.warning(
            "liveness probe failed: guest ended", host=target.host, subject=target.key.subject, why=words
        )
        self.metrics.liveness_restarts.labels(target.host, target.key.subject).inc()
        event = events.Event(
            "liveness-failed", target.host, "", "error",
            event_words.liveness_failed(target.key.subject, target.host, words),
            self.clock.time(), subject=target.key.subject,
        )  # fmt: skip
        self.publish.health_changed([event])
        self.poke(HEALTH)
