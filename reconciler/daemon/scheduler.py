"""When the daemon reconciles: trigger kinds, timers, back-off. Pure: the clock is passed in.

Input: the trigger kinds that arrived (git refs moved, a webhook, a lifecycle event, a
host connection dropped or came back, a reload, ...), the time, and what the last
reconcile asked for (a retry after a failure, a re-plan after a crash-loop back-off or a
host move). Output: which triggers are due now, whether the next reconcile fetches and
whether it re-reads the hosts even when git did not move (``due``), and how long the
loop may sleep (``timeout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterable

BACKOFF_BASE_S = 5.0
BACKOFF_MAX_S = 300.0

# Trigger kinds. Only "refs" skips the reconcile when the head did not move.
REFS = "refs"
FETCH = "fetch"
WEBHOOK = "webhook"
LIFECYCLE = "lifecycle"
RESYNC = "resync"
RELOAD = "reload"
RETRY = "retry"
REQUEUE = "requeue"
START = "start"
DISCONNECT = "disconnect"  # a host's connection dropped
RECONNECT = "reconnect"  # a host's connection came back
WORK = "work"  # per-VM work in flight ended (a graceful stop): what waited for it goes on
HEALTH = "health"  # a VM's Ready changed, or its liveness probe ended it (the prober)
FORCING = frozenset({LIFECYCLE, RESYNC, RETRY, RELOAD, REQUEUE, START, DISCONNECT, RECONNECT, WORK, HEALTH})
TIMED = frozenset({RETRY, REQUEUE, RESYNC, FETCH})  # kinds the timers add (not queued by anyone)


@dataclass(frozen=True, slots=True)
class Due:
    """What one step of the loop runs: the trigger kinds, and what the reconcile does."""

    kinds: frozenset[str]
    fetch: bool  # fetch the remote first
    force: bool  # reconcile even when the head did not move


@dataclass
class Schedule:
    """The daemon's timers. A failing source's back-off holds every timer (it is not read
    again at each interval while the log says "retry in 300 s"); a failed apply holds
    none (a fix may arrive with the next fetch)."""

    fetch_interval_s: float
    resync_interval_s: float
    remote: bool
    next_fetch: float = 0.0
    next_resync: float = 0.0
    retry_at: float | None = None
    requeue_at: float | None = None
    failures: int = 0
    source_failing: bool = False

    def timeout(self, now: float, probes: Iterable[float] = (), watchdog_s: float | None = None) -> float:
        """How long the loop may sleep: until the first timer, host probe or watchdog ping."""
        deadlines = [self.next_resync]
        if self.remote:
            deadlines.append(self.next_fetch)
        if self.retry_at is not None:
            if self.source_failing:  # the fetch and resync timers wait for the retry too
                deadlines = [max(d, self.retry_at) for d in deadlines]
            deadlines.append(self.retry_at)
        deadlines += list(probes)
        if self.requeue_at is not None:
            deadlines.append(self.requeue_at)
        wait = max(0.0, min(deadlines) - now)
        return min(wait, watchdog_s) if watchdog_s is not None else wait

    def due(self, now: float, queued: Iterable[str]) -> Due:
        """The queued kinds plus the timers that are due at ``now`` (retry and re-plan
        timers are used up); a host back ends the back-off, unless the source failed."""
        kinds = set(queued)
        source_backoff = self.source_failing and self.retry_at is not None and now < self.retry_at
        if self.retry_at is not None and now >= self.retry_at:
            kinds.add(RETRY)
            self.retry_at = None
        if self.requeue_at is not None and now >= self.requeue_at:
            kinds.add(REQUEUE)
            self.requeue_at = None
        if now >= self.next_resync and not source_backoff:
            kinds.add(RESYNC)
        if self.remote and now >= self.next_fetch and not source_backoff:
            kinds.add(FETCH)
        if RECONNECT in kinds and not self.source_failing:
            self.failures, self.retry_at = 0, None  # the host is back: no back-off to wait out
        # The resync re-reads the hosts, not the remote: fetches keep their own interval.
        fetch = self.remote and bool(kinds & {FETCH, WEBHOOK, RETRY, RELOAD, START})
        return Due(frozenset(kinds), fetch, bool(kinds & FORCING))

    def ran(self, now: float, due: Due) -> None:
        """A reconcile of ``due`` finished at ``now``: the intervals start again."""
        if due.fetch:
            self.next_fetch = now + self.fetch_interval_s
        if due.force:
            self.next_resync = now + self.resync_interval_s

    def failed(self, now: float, source: bool = False) -> float:
        """A transient failure: retry after an exponential back-off (capped by the resync
        interval); returns the delay."""
        self.failures += 1
        delay = min(BACKOFF_BASE_S * 2.0 ** (self.failures - 1), BACKOFF_MAX_S, self.resync_interval_s)
        self.retry_at = now + delay
        self.source_failing = self.source_failing or source
        return delay

    def succeeded(self) -> None:
        """Nothing left to retry: the back-off starts from the beginning next time."""
        self.failures, self.retry_at, self.source_failing = 0, None, False

    def replan(self, now: float, waits: Iterable[float]) -> float | None:
        """Plan again after the shortest of ``waits`` (crash-loop back-off, a host move)."""
        waits = list(waits)
        self.requeue_at = now + min(waits) if waits else None
        return min(waits) if waits else None
