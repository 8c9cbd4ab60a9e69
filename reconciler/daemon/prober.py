"""One prober for the whole daemon: every VM's readiness and liveness probes, bounded.

Input: the VMs of each host as its last reconcile left them (``Target``: key, domain,
``Probes``, running or not), a ``Transport`` that runs one probe (``host/guest.py``
through ``probing.py``), the daemon's clock. Output: each VM's ``VMHealth`` and the
readiness snapshot (``readiness``: a frozen ``Mapping[VMKey, Readiness]``, a new one
published each time a VM's Ready or its reason changes), transitions handed to
``on_change``; a liveness probe that fails ``failureThreshold`` times ends the guest
(``Transport.end``) and is handed to ``on_liveness``.

Bounded: no thread per VM. One scheduler thread keeps a heap of due probes (driven by
the injected clock: ``tick(now)`` is the whole decision, the thread only sleeps until
the next due time or an answer); a fixed pool of ``workers`` threads runs them. Each
run has a deadline (its timeout plus ``GRACE_S``): a run past it is answered
``Timeout`` at once. While every worker is busy (a guest that answers slowly or never),
one more is started for a waiting run, up to ``workers + spare`` threads, and those
beyond the pool end once nothing waits: a hung guest delays neither another VM's probe
nor a reconcile (the reconcile never waits on the prober). Runs of one probe never overlap.
The thresholds are ``model.health.step``, pure.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import queue
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import structlog

from reconciler.daemon.probeentry import Entry, Job
from reconciler.daemon.readiness import Snapshot
from reconciler.model.health import (
    NO_PROBES,
    Answer,
    GuestAddress,
    Outcome,
    Probe,
    ProbeKind,
    Probes,
    ProbeState,
    Readiness,
    ReadyReason,
    VMHealth,
    first_state,
    readiness_of,
    step,
)
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Set

    from reconciler.context import Clock
    from reconciler.model.keys import VMKey

log = structlog.get_logger("reconciler.daemon")

GRACE_S = 2.0  # a run's deadline: its timeout and this (the transport bounds itself by the timeout)
WORKERS = 4
SPARE = 16  # workers started in place of stuck ones, at most
IDLE_WAKE_S = 5.0  # the scheduler wakes at least this often


class Transport(Protocol):
    """Runs probes on the hosts (never raises for what a guest does)."""

    def run(self, host: str, domain: str, probe: Probe, address: GuestAddress | None) -> Answer: ...

    def end(self, host: str, domain: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Target:
    """A VM as its host's last reconcile left it."""

    key: VMKey
    host: str
    domain: str
    probes: Probes
    running: bool


@dataclass(frozen=True, slots=True)
class Transition:
    key: VMKey
    host: str
    before: Readiness | None
    after: Readiness


def _target(e: Entry) -> Target:
    """The VM as its host's last reconcile left it (made when asked)."""
    return Target(e.key, e.host, e.domain, e.probes, e.running)


class Prober:
    def __init__(
        self,
        transport: Transport,
        clock: Clock,
        *,
        workers: int = WORKERS,
        spare: int = SPARE,
        on_change: Callable[[list[Transition]], None] | None = None,
        on_liveness: Callable[[Target, Answer | None], None] | None = None,
    ) -> None:
        self.transport = transport
        self.clock = clock
        self.workers, self.spare = workers, spare
        self.on_change, self.on_liveness = on_change, on_liveness
        self._lock = threading.Condition()
        self._vms: dict[VMKey, Entry] = {}  # the VMs with more to keep than their readiness (``bare``)
        self._ready: dict[str, dict[VMKey, Readiness]] = {}  # by host: every VM's, replaced, never changed
        self._heap: list[tuple[float, int, VMKey, ProbeKind, int]] = []
        self._seq = itertools.count()
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._answers: list[tuple[Job, Answer]] = []
        self._busy: set[Job] = set()
        self._threads = 0  # workers alive
        self._running = 0  # runs under way (a run past its deadline too, until it returns)
        self._queued = 0  # runs handed over, not yet taken by a worker
        self.answered = 0  # runs answered by the transport in all (not those past their deadline)
        self._stopping = False
        self._scheduler: threading.Thread | None = None
        self.readiness: Snapshot = Snapshot()
        self._kept: dict[VMKey, int] = {}  # liveness restarts a former daemon counted (state.json)
        self._reasons: dict[ReadyReason, ReadyReason] = {}  # those without an answer, one of each

    # -- what the daemon tells it ---------------------------------------------------------

    def keep_restarts(self, counts: Mapping[VMKey, int]) -> None:
        """Liveness restarts counted before the daemon started: a VM seen first counts on from them."""
        with self._lock:
            self._kept.update(counts)

    def watch(
        self, host: str, targets: Iterable[Target], restarted: Set[VMKey] = frozenset()
    ) -> list[Transition]:
        """The VMs of ``host`` now (its other VMs are forgotten): a VM that started (or,
        ``restarted``, started again between two listings), or whose probes changed,
        starts its probes again (initialDelaySeconds from now), not Ready until they pass.
        Returns the changes of readiness this made (``on_change`` gets the prober's own)."""
        now, wall, changes = self.clock.monotonic(), self.clock.time(), []
        alike: dict[Readiness, Readiness] = {}  # this listing's, made alike: one record each
        with self._lock:
            seen = set()
            ready = dict(self._ready.get(host, {}))  # the host's readiness, replaced below
            left: dict[str, dict[VMKey, Readiness]] = {}  # the other hosts a VM of this one left
            for t in targets:
                seen.add(t.key)
                r = ready.get(t.key)
                bare = r is not None and t.key not in self._vms and not t.probes and r.ready == t.running
                if bare and t.key not in restarted:
                    continue  # a bare VM as it was (running or not)
                e, was = self._find(t.key, host, r)
                if e is not None and e.ended and t.running:
                    continue  # its liveness probe ends it: a listing from before the destroy landed
                if was is not None and was != host:  # moved here: off the host it was on
                    left.setdefault(was, dict(self._ready[was])).pop(t.key, None)
                if e is None or e.running != t.running or e.probes != t.probes or t.key in restarted:
                    before = e.readiness if e is not None else None
                    e = self._fresh(t, now, wall, e)
                    changes += self._refresh(e, wall, before, force=before is None, alike=alike)
                else:
                    e.took_over(t.host, t.domain)
                ready[t.key] = e.readiness
                if e.bare():
                    self._vms.pop(t.key, None)
                else:
                    self._vms[t.key] = e
            for key in [k for k in ready if k not in seen]:
                del ready[key]
                self._vms.pop(key, None)
            if ready or host in self._ready:
                self._ready[host] = ready
            self._ready.update(left)
            self._publish()
            self._lock.notify_all()
        return changes

    def _find(self, key: VMKey, host: str, r: Readiness | None) -> tuple[Entry | None, str | None]:
        """``key``'s entry (its own, or made from its readiness for a bare VM: ``r`` on
        ``host``, else searched on the others) and the host it is on (``None``: none)."""
        e = self._vms.get(key)
        if e is not None:
            return e, e.host
        if r is None:
            host, r = next(((h, rs[key]) for h, rs in self._ready.items() if key in rs), ("", None))
        if r is None:
            return None, None
        return Entry(key, host, "", NO_PROBES, r.ready, r), host

    def _fresh(self, t: Target, now: float, wall: float, old: Entry | None) -> Entry:
        """A VM seen first, started or stopped, or whose probes changed: its probes begin
        again (the last answers of an unchanged probe kept to be shown)."""
        before = old.readiness if old is not None else None
        ready, reason = self._readiness_of(t.running, t.probes.readiness, None)
        since = before.since if before is not None and before.ready == ready else wall
        e = Entry(
            t.key, t.host, t.domain, t.probes, t.running, Readiness(ready, reason, since), run=next(self._seq)
        )
        if old is not None:
            e.restarts, e.address = old.restarts, old.address
        else:
            e.restarts = self._kept.pop(t.key, 0)
        for kind in ProbeKind:
            probe = e.probe(kind)
            kept = old.state(kind) if old is not None and old.probe(kind) == probe else None
            if probe is not None and (t.running or kept is not None):
                state = replace(first_state(kind, probe, now), last=kept.last if kept is not None else None)
                self._set(e, kind, state)
                if t.running:
                    heapq.heappush(self._heap, (state.next_at, next(self._seq), t.key, kind, e.run))
        return e

    # -- the scheduler ----------------------------------------------------------------------

    def tick(self) -> float:
        """One pass at the clock's time: answers taken in, runs past their deadline
        answered ``Timeout``, due probes handed to the workers. Returns when the next is
        due (monotonic). The scheduler thread calls it; tests call it with a fake clock."""
        now, wall = self.clock.monotonic(), self.clock.time()
        changes: list[Transition] = []
        ended: list[tuple[Target, Answer | None]] = []
        with self._lock:
            answers, self._answers = self._answers, []
            # a destroy has no deadline of its own: libvirt bounds it, and it must land
            for job in [j for j in self._busy if now >= j.deadline and j.kind is not None]:
                answers.append((job, Answer(Outcome.TIMEOUT, at=now)))
                self._abandon(job)
            for job, answer in answers:
                changes += self._answered(job, answer, now, wall, ended)
            while self._heap and self._heap[0][0] <= now:
                _, _, key, kind, run = heapq.heappop(self._heap)
                e = self._vms.get(key)
                if e is None or e.run != run:
                    continue
                hung = e.job(kind)
                if hung is not None:  # its last run never returned: no answer again, no worker taken
                    if hung.abandoned:
                        changes += self._answered(hung, Answer(Outcome.TIMEOUT, at=now), now, wall, ended)
                    continue
                probe = e.probe(kind)
                if probe is not None:
                    self._submit(e, kind, now + probe.timeout_s + GRACE_S)
            if changes:
                self._publish()
            nxt = min([self._heap[0][0]] if self._heap else [now + IDLE_WAKE_S])
            nxt = min([nxt, *(j.deadline for j in self._busy if j.kind is not None)])
        self._tell(changes)
        for target, last in ended:  # told first: the guest's end is then known as the probe's
            if self.on_liveness is not None:
                self.on_liveness(target, last)
            with self._lock:
                e = self._vms.get(target.key)
                if e is not None and e.job(None) is None:
                    self._submit(e, None, now + GRACE_S)
        return nxt

    def _submit(self, e: Entry, kind: ProbeKind | None, deadline: float) -> None:
        job = Job(e.key, kind, e.run, deadline)
        e.took(kind, job)
        self._busy.add(job)
        self._queued += 1
        self._jobs.put(job)
        if self._queued > self._threads - self._running and self._threads < self.workers + self.spare:
            self._threads += 1  # every worker busy (a slow guest): one more, up to the bound
            threading.Thread(target=self._work, name="prober", daemon=True).start()

    def _answered(
        self, job: Job, answer: Answer, now: float, wall: float, ended: list[tuple[Target, Answer | None]]
    ) -> list[Transition]:
        self._busy.discard(job)
        e = self._vms.get(job.key)
        if e is None or e.run != job.run or e.job(job.kind) is not job:
            return []
        if not job.abandoned:  # else it stays busy until its worker returns
            e.done(job.kind)
        if job.kind is None:
            return []
        kind, probe, state = job.kind, e.probe(job.kind), e.state(job.kind)
        if probe is None or state is None:
            return []
        answer = Answer(answer.outcome, now, answer.code, answer.address)
        if probe.action.networked and answer.outcome == Outcome.TIMEOUT:
            e.address = None  # nothing answered there: looked up again next time (a new lease)
        elif answer.address is not None:
            e.address = answer.address  # shown; the transport looks the guest's up again for a spec one
        state = step(probe, state, answer, now)
        self._set(e, kind, state)
        heapq.heappush(self._heap, (state.next_at, next(self._seq), e.key, kind, e.run))
        if kind == ProbeKind.LIVENESS and not state.passing:
            e.restarts += 1
            e.ended = True
            e.run = next(self._seq)  # no more answers of this run
            e.running = False
            ended.append((_target(e), answer))
        before = e.readiness
        return self._refresh(e, wall, before)

    def _set(self, e: Entry, kind: ProbeKind, state: ProbeState) -> None:
        if kind == ProbeKind.READINESS:
            e.ready_state = state
        else:
            e.live_state = state

    def _refresh(
        self,
        e: Entry,
        wall: float,
        before: Readiness | None,
        force: bool = False,
        alike: dict[Readiness, Readiness] | None = None,
    ) -> list[Transition]:
        """``e``'s readiness now (``alike``: the records a listing made so far, one of each
        without an answer: the VMs it saw start together share it)."""
        ready, reason = self._readiness_of(e.running, e.probes.readiness, e.ready_state)
        if before is not None and not force and (ready, reason.kind) == (before.ready, before.reason.kind):
            e.readiness = Readiness(ready, reason, before.since)  # the last answer, the same state
            return []
        since = before.since if before is not None and before.ready == ready else wall
        e.readiness = Readiness(ready, reason, since)
        if alike is not None and reason.answer is None:
            e.readiness = alike.setdefault(e.readiness, e.readiness)
        return [Transition(e.key, e.host, before, e.readiness)]

    def _readiness_of(
        self, running: bool, probe: Probe | None, state: ProbeState | None
    ) -> tuple[bool, ReadyReason]:
        """``readiness_of``, a reason without an answer (not running, running without a
        probe, pending) one record for every VM it holds for."""
        ready, reason = readiness_of(running, probe, state)
        if reason.answer is None:
            reason = self._reasons.setdefault(reason, reason)
        return ready, reason

    def _publish(self) -> None:
        """A new snapshot: each host's readiness with its entries' now (a host's mapping
        replaced, never changed: the last snapshot may be read meanwhile)."""
        vms = self._vms
        if vms:
            self._ready = {
                h: {k: vms[k].readiness if k in vms else r for k, r in rs.items()}
                for h, rs in self._ready.items()
            }
        self.readiness = Snapshot(tuple(self._ready.items()))

    def _tell(self, changes: list[Transition]) -> None:
        if changes and self.on_change is not None:
            self.on_change(changes)

    # -- the workers ----------------------------------------------------------------------

    def _abandon(self, job: Job) -> None:
        """A run past its deadline: answered for here. Its worker, if it started, is busy
        until the transport returns (its answer is then dropped); until then the probe's
        later runs are answered ``Timeout`` without taking another worker."""
        self._busy.discard(job)
        job.abandoned = True

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            with self._lock:
                self._queued -= 1
                e = self._vms.get(job.key)
                if job.abandoned:  # waited past its deadline: answered for, its next run may go
                    if e is not None and e.job(job.kind) is job:
                        e.done(job.kind)
                    self._lock.notify_all()
                    continue
                job.running = True
                self._running += 1
                target = _target(e) if e is not None else None
                probe = e.probe(job.kind) if e is not None and job.kind is not None else None
                address = e.address if e is not None else None
            answer = self._run(job, target, probe, address)
            with self._lock:
                self._running -= 1
                e = self._vms.get(job.key)
                if job.kind is None and e is not None and e.run == job.run:
                    e.ended = False  # the destroy returned: a listing from now on sees its next run
                if job.abandoned and e is not None and e.job(job.kind) is job:
                    e.done(job.kind)  # answered Timeout long ago: its next run may go
                if not job.abandoned:
                    self._answers.append((job, answer))
                    self.answered += 1
                self._lock.notify_all()
                if self._threads > self.workers and not self._queued:
                    self._threads -= 1  # a worker beyond the pool, no longer needed
                    return
        with self._lock:
            self._threads -= 1

    def _run(
        self, job: Job, target: Target | None, probe: Probe | None, address: GuestAddress | None
    ) -> Answer:
        if target is None:
            return Answer(Outcome.ERROR)
        try:
            if job.kind is None:
                self.transport.end(target.host, target.domain)
                return Answer(Outcome.PASSED)
            if probe is None:
                return Answer(Outcome.ERROR)
            return self.transport.run(target.host, target.domain, probe, address)
        except Exception as err:  # a transport's bug must not end the worker
            log.warning("probe failed to run", subject=target.key.subject, error=str(err)[:300])
            return Answer(Outcome.ERROR)

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        """The scheduler thread (once; a closed prober starts no more)."""
        with self._lock:
            if self._scheduler is not None or self._stopping:
                return
            self._scheduler = threading.Thread(target=self._loop, name="prober-scheduler", daemon=True)
        self._scheduler.start()

    def keys_on(self, host: str) -> set[VMKey]:
        """The VMs it watches on ``host``."""
        with self._lock:
            return set(self._ready.get(host, ()))

    def probing(self) -> bool:
        """Whether a VM it watches has a probe."""
        with self._lock:
            return any(e.probes for e in self._vms.values())

    def _loop(self) -> None:
        while True:
            nxt = self.tick()
            with self._lock:
                if self._stopping:
                    return
                if not self._answers:
                    self._lock.wait(max(0.0, min(nxt - self.clock.monotonic(), IDLE_WAKE_S)))

    def close(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(None)
        if self._scheduler is not None:
            with contextlib.suppress(RuntimeError):
                self._scheduler.join(IDLE_WAKE_S)

    def health(self) -> dict[VMKey, VMHealth]:
        """Every VM's health now (status, the page, ``/api/status``)."""
        with self._lock:
            out = {}
            for ready in self._ready.values():
                for k, r in ready.items():
                    e = self._vms.get(k)
                    out[k] = (
                        VMHealth(r)
                        if e is None
                        else VMHealth(
                            e.readiness, e.probes, e.ready_state, e.live_state, e.address, e.restarts
                        )
                    )
            return out

    def wait_answered(self, count: int, timeout_s: float) -> bool:
        """Wait until the transport answered ``count`` runs in all (tests, the bench)."""
        with self._lock:
            return self._lock.wait_for(lambda: self.answered >= count, timeout_s)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no run is under way or waiting for a worker (tests)."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._running and not self._queued, timeout_s)

    def thread_count(self) -> int:
        with self._lock:
            return self._threads
