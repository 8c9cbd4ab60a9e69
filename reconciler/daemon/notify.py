"""systemd notification protocol (sd_notify) over ``$NOTIFY_SOCKET``.

Input: state strings (``READY=1``, ``STATUS=...``, ``WATCHDOG=1``, ``STOPPING=1``,
``RELOADING=1``) and, for the watchdog's pace, the daemon's monotonic time. Output: one
datagram each on the socket systemd passed in the environment. I/O. A no-op when the
service was not started by systemd (no ``NOTIFY_SOCKET``); errors sending are
swallowed: notification must never stop the daemon.
"""

from __future__ import annotations

import os
import socket
import time


class Notifier:
    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        addr = env.get("NOTIFY_SOCKET", "")
        self.address = "\0" + addr[1:] if addr.startswith("@") else addr
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        enabled = usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid()))
        # Ping at half the watchdog period, as sd_watchdog_enabled(3) recommends.
        self.watchdog_interval_s: float | None = int(usec) / 2e6 if enabled else None
        self._last_ping: float | None = None
        self._sock: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, *lines: str) -> bool:
        if not self.address:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto("\n".join(lines).encode(), self.address)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> None:
        self.send("READY=1", *((f"STATUS={status}",) if status else ()))

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def reloading(self) -> None:
        # systemd compares this stamp with its own CLOCK_MONOTONIC: the real clock, always.
        self.send("RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def watchdog(self, now: float, force: bool = False) -> None:
        """Ping the watchdog (``now``: the daemon's monotonic time), at most once per half
        period unless ``force``."""
        if self.watchdog_interval_s is None:
            return
        if force or self._last_ping is None or now - self._last_ping >= self.watchdog_interval_s / 2:
            self._last_ping = now
            self.send("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
