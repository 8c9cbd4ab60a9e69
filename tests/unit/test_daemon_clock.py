"""The daemon's time comes from the clock it is given (reconciler/daemon/).

Covers: no daemon module reads the system's clock or sleeps on it (only the systemd
reload stamp, which systemd compares with its own CLOCK_MONOTONIC); the events a
reconcile caused are ignored until its grace has passed on the given clock; the
trigger wait tells a wake-up from a timeout; a burst settles (what arrived stays queued,
a quiet wait ends it, no time left on the clock ends it at once); the watchdog is paced
by the time passed in.
"""

from __future__ import annotations

import ast
from pathlib import Path

from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import LIFECYCLE
from reconciler.daemon.triggers import Triggers
from tests.helpers.clock import FakeClock

DAEMON = Path(__file__).resolve().parents[2] / "reconciler" / "daemon"
# module -> the one use of the real clock it keeps, and why
REAL_CLOCK = {"notify.py": "time.clock_gettime_ns"}  # RELOADING's MONOTONIC_USEC, read by systemd


def clock_reads(path: Path) -> list[str]:
    """``time.<name>`` uses and ``from time import`` / ``datetime`` imports in one module."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "time":
            found.append(f"time.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "datetime"):
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Import) and any(a.name == "datetime" for a in node.names):
            found.append("import datetime")
    return found


def test_no_daemon_module_reads_the_system_clock() -> None:
    reads = {
        p.name: sorted(set(clock_reads(p)) - {"time.CLOCK_MONOTONIC", REAL_CLOCK.get(p.name, "")})
        for p in sorted(DAEMON.glob("*.py"))
    }
    assert {name: r for name, r in reads.items() if r} == {}
    assert all(clock_reads(DAEMON / name) for name in REAL_CLOCK)  # no stale exception


def test_own_events_are_ignored_until_the_grace_passes_on_the_given_clock() -> None:
    clock = FakeClock()
    t = Triggers(clock)
    ours = ("h", "web", "started")
    t.reconciling()
    t.lifecycle(ours, "booted")  # held while the reconcile runs
    t.reconciled({ours: clock.monotonic() + 2.0})
    assert t.take() == []
    clock.advance(1.9)
    t.lifecycle(ours, "booted")  # delivery lag: still ours
    assert t.take() == []
    clock.advance(0.2)
    t.lifecycle(ours, "booted")  # after the grace: someone else started it
    assert t.take() == [LIFECYCLE]


def test_the_wait_tells_a_trigger_from_a_timeout() -> None:
    t = Triggers(FakeClock())
    assert t.sleep(0.0) is False
    t.poke(LIFECYCLE)
    assert t.sleep(10.0) is True  # returns at once: a trigger is queued
    assert t.take() == [LIFECYCLE]
    assert t.sleep(0.0) is False


def test_a_burst_settles_on_the_given_clock() -> None:
    clock = FakeClock()
    t = Triggers(clock)
    t.poke(LIFECYCLE)
    t.settle(0.05)  # woken by the poke, then a quiet wait of 0.05 s ends the window
    t.poke(LIFECYCLE)
    t.settle(0.0)  # no time left: returns at once
    assert t.take() == [LIFECYCLE, LIFECYCLE]
    t.stop("SIGTERM")
    t.settle(10.0)  # a stop ends the window
    assert t.stop_requested


def test_the_watchdog_is_paced_by_the_time_passed_in(tmp_path: Path) -> None:
    import socket

    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(0)
        n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "10000000"})  # pings every 2.5 s at most
        sent = []
        for now in (0.0, 1.0, 2.5, 3.0, 5.0, 5.1):
            n.watchdog(now)
            try:
                sock.recv(64)
                sent.append(now)
            except BlockingIOError:
                pass
        n.close()
    assert sent == [0.0, 2.5, 5.0]
