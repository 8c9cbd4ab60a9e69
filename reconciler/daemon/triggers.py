"""The daemon loop's wake-ups: trigger kinds queued from any thread or signal handler,
a self-pipe the loop sleeps on, and the filter that keeps a reconcile's own libvirt
events from triggering the next one.

Input: ``poke(kind)`` (refs watcher, webhook, signals, timers), lifecycle events from
libvirt's event thread, the start and end of each reconcile with the events it expects
to cause, and the clock (the grace given to those events and the window a burst of
them settles in run on its monotonic time). Output: the kinds queued since the last
``take``; ``sleep`` returns when one arrives (a real wait on the self-pipe). Safe from
other threads and from signal handlers (no lock on the poke path).
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import threading
from typing import TYPE_CHECKING

from reconciler.daemon.scheduler import LIFECYCLE
from reconciler.plan.power import reconcile_on_event

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.context import Clock

EventKey = tuple[str, str, str]  # (host, domain, event)


class Triggers:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.queue: collections.deque[str] = collections.deque()
        self.stop_requested = False
        self.why = ""  # the signal that asked to stop, for the log
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._lock = threading.Lock()
        self._reconciling = False
        self._held: set[EventKey] = set()
        self._ours: dict[EventKey, float] = {}

    def poke(self, kind: str) -> None:
        """Ask for a reconcile; safe from any thread and from signal handlers."""
        self.queue.append(kind)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe already means "wake up"
            os.write(self._wfd, b"\0")

    def stop(self, why: str = "") -> None:
        self.why = why
        self.stop_requested = True
        self._wake()

    def sleep(self, timeout: float) -> bool:
        """Block until a trigger arrives or ``timeout`` seconds pass (no polling); False
        when the time passed with nothing to wake for."""
        if self.queue or self.stop_requested:
            return True
        return self._wait(timeout)

    def settle(self, seconds: float) -> None:
        """Let a burst of triggers queue up (a guest stopping emits several events): wait
        until ``seconds`` have passed on the clock, or a wait passes with nothing new.
        What arrived stays queued for ``take``."""
        deadline = self.clock.monotonic() + seconds
        while not self.stop_requested and (left := deadline - self.clock.monotonic()) > 0:
            if not self._wait(left):
                return

    def _wait(self, timeout: float) -> bool:
        """A real wait on the self-pipe; True when something was written to it."""
        try:
            ready, _, _ = select.select([self._rfd], [], [], timeout)
        except InterruptedError:  # a signal: its handler may have poked
            return True
        self._drain()
        return bool(ready)

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._rfd, 4096):
                pass

    def take(self) -> list[str]:
        """Every kind queued since the last call, in order (repeats included)."""
        self._drain()
        kinds = []
        while self.queue:
            kinds.append(self.queue.popleft())
        return kinds

    def lifecycle(self, key: EventKey, detail: str) -> None:
        """From libvirt's event thread. Events caused by our own actions are not triggers:
        while a reconcile runs, events are held; afterwards those of domains it changed
        (and any for them within the grace the reconcile gave, as delivery lags) are dropped."""
        if not reconcile_on_event(key[2], detail):
            return
        with self._lock:
            if self._reconciling:
                self._held.add(key)
                return
            if self.clock.monotonic() < self._ours.get(key, 0.0):
                return
        self.poke(LIFECYCLE)

    def reconciling(self) -> None:
        with self._lock:
            self._reconciling = True

    def reconciled(self, ours: Mapping[EventKey, float]) -> None:
        """The reconcile ended; ``ours``: the events it expects to have caused, with the
        time until which they are ignored. A held event of anything else triggers."""
        with self._lock:
            self._reconciling = False
            self._ours = dict(ours)
            foreign = self._held - ours.keys()
            self._held = set()
        if foreign:
            self.poke(LIFECYCLE)
