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

A libvirt that answers may still fail every start: QEMU's output goes through
``virtlogd``, and a start while it is down fails with a system error of that domain
(the host stays reachable, the start is retried on the back-off, up to 5 min after a
long outage). On a local QEMU host (``qemu:///system``, ``qemu:///session``) the
watcher also connects to virtlogd's socket at each question: when it accepts again
after refusing, the loop is poked the same way. A remote host's virtlogd is not seen
from here: its starts wait for the retry.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import TYPE_CHECKING

import structlog

from reconciler.daemon.scheduler import RECONNECT
from reconciler.errors import HypervisorError
from reconciler.host.hypervisor import Hypervisor, is_local

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

log = structlog.get_logger("reconciler.daemon")


def log_socket(uri: str) -> str:
    """The socket of the local QEMU host's virtlogd ("" for another host or driver)."""
    if not uri.startswith("qemu") or not is_local(uri):
        return ""
    if uri.rstrip("/").endswith("/session"):
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        return f"{runtime}/libvirt/virtlogd-sock" if runtime else ""
    return "/run/libvirt/virtlogd-sock"


def accepts(path: str) -> bool:
    """Whether a service listens on the unix socket ``path`` (connected, then closed)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(PING_EVERY_S)
        try:
            s.connect(path)
        except OSError:
            return False
    return True


PING_EVERY_S = 1.0
HUNG_AFTER_S = 4.0  # a question unanswered this long: libvirt does not answer


class _Watched:
    """One host's watcher thread and what it last saw."""

    def __init__(self, name: str, uri: str, now: Callable[[], float], poke: Callable[[str], None]) -> None:
        self.name, self.uri, self.now, self.poke = name, uri, now, poke
        self.asked_at: float | None = None  # monotonic: the outstanding question's start
        self.failed = ""  # why the last question got no answer ("" = it answered)
        self.logd = log_socket(uri)  # virtlogd's socket on a local QEMU host ("" = not watched)
        self.logd_down = False  # virtlogd refused the last connection
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
            logd_back = False
            if self.logd:
                down = not accepts(self.logd)
                logd_back, self.logd_down = self.logd_down and not down, down
            if came_back:
                log.info("host answers again", host=self.name)
            elif logd_back:
                log.info("host's log service answers again", host=self.name, socket=self.logd)
            if came_back or logd_back:
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
