"""Hosts watched off the loop: a libvirt that hangs is noticed within seconds, and a host
that comes back is noticed at once, without the loop ever waiting on either.

Input: the daemon's hosts (name and URI), the real monotonic clock and the loop's ``poke``. Output: per host
whether libvirt answers now (``answers``), why not (``hung``: for ``/healthz`` and
``/livez``), and a ``reconnect`` trigger when a host that did not answer answers again.
I/O: one thread and one libvirt connection of its own per host (through ``host``).

Each host's thread asks its libvirt a cheap question (the host's name) every
``PING_EVERY_S`` on a connection of its own, so it never waits behind the loop's calls
and the loop never waits behind it. A question or a connection attempt outstanding for
``HUNG_AFTER_S`` means libvirt does not answer: a frozen libvirtd accepts connections
and answers nothing, and the keepalive of the loop's connection notices it only after
its count of intervals. A host that does not answer is not connected to by the loop
(``HostRunner.connect`` fails at once instead of waiting out the open's deadline);
when it answers again, the loop is poked at once (the host coming back triggers the
recovery, not the next scheduled retry).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import structlog

from reconciler.daemon.scheduler import RECONNECT
from reconciler.errors import HypervisorError
from reconciler.host.hypervisor import Hypervisor

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

log = structlog.get_logger("reconciler.daemon")

PING_EVERY_S = 1.0
HUNG_AFTER_S = 4.0  # a question unanswered this long: libvirt does not answer


class _Watched:
    """One host's watcher thread and what it last saw."""

    def __init__(self, name: str, uri: str, now: Callable[[], float], poke: Callable[[str], None]) -> None:
        self.name, self.uri, self.now, self.poke = name, uri, now, poke
        self.asked_at: float | None = None  # monotonic: the outstanding question's start
        self.failed = ""  # why the last question got no answer ("" = it answered)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"watch {name}", daemon=True)

    def _run(self) -> None:
        hv: Hypervisor | None = None
        while not self.stop.is_set():
            self.asked_at = self.now()
            try:
                if hv is None:
                    hv = Hypervisor(self.uri)
                hv.hostname()
                why = ""
            except HypervisorError as err:
                why = str(err)[:300]
                if hv is not None:  # a dead connection: closed off the loop, opened again next time
                    threading.Thread(target=hv.close, daemon=True).start()
                    hv = None
            came_back = bool(self.failed or self.silent()) and not why
            self.failed, self.asked_at = why, None
            if came_back:
                log.info("host answers again", host=self.name)
                self.poke(RECONNECT)
            self.stop.wait(PING_EVERY_S)
        if hv is not None:
            hv.close()

    def silent(self) -> float:
        """Seconds the outstanding question has waited beyond ``HUNG_AFTER_S`` allows (0: none)."""
        at = self.asked_at
        waited = self.now() - at if at is not None else 0.0
        return waited if waited >= HUNG_AFTER_S else 0.0


class HostWatch:
    """The watchers of the daemon's hosts (``sync`` keeps them to the configured hosts)."""

    def __init__(self, now: Callable[[], float], poke: Callable[[str], None]) -> None:
        self.now, self.poke = now, poke  # now: the real monotonic clock (a wait on a socket)
        self._watched: dict[tuple[str, str], _Watched] = {}

    def sync(self, hosts: Iterable[tuple[str, str]]) -> None:
        """Watch exactly these (name, URI) pairs: new ones started, gone ones stopped."""
        want = set(hosts)
        for key in set(self._watched) - want:
            self._watched.pop(key).stop.set()
        for name, uri in sorted(want - set(self._watched)):
            w = self._watched[(name, uri)] = _Watched(name, uri, self.now, self.poke)
            w.thread.start()

    def hung(self) -> dict[str, str]:
        """Why each host whose libvirt does not answer does not (the others left out)."""
        out: dict[str, str] = {}
        for (name, _), w in list(self._watched.items()):
            waited = w.silent()
            if waited:
                out[name] = f"libvirt does not answer (a question waiting for {waited:.0f} s)"
            elif w.failed:
                out[name] = w.failed
        return out

    def answers(self, name: str) -> bool:
        """Whether ``name``'s libvirt answers as far as its watcher knows (unknown: yes)."""
        return name not in self.hung()

    def close(self) -> None:
        for w in self._watched.values():
            w.stop.set()
        self._watched.clear()
