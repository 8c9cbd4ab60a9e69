"""Health: what ``/healthz`` (readiness) and ``/livez`` (liveness) answer, and host probing.

Input: per-host connection state and the last reconcile's outcome, kept by the daemon.
Output: (ok, body) pairs for the HTTP listener. Pure, except ``probe_hosts`` (opens a
libvirt connection per unreachable host that is due).

- ``/healthz`` is 503 while any host is unreachable or the last reconcile did not
  succeed; the body lists why, one line per problem. A monitor alerts on it.
- ``/livez`` stays 200 while the loop runs (a reconcile that fails is not a reason to
  restart the daemon; a restart would not fix libvirtd or git). A supervisor restarts
  on it only when the loop stopped.

Hosts are watched between triggers: libvirt keepalives and a close callback report a
dropped connection at once, and ``watch.py`` asks each host's libvirt a question off
the loop (a frozen libvirt is unreachable within seconds; the listener adds it to both
answers); while a host is unreachable it is probed every ``PROBE_INTERVAL_S`` (a
connection attempt, made only once the watcher heard libvirt answer), and the first
successful probe triggers a reconcile at once instead of waiting out the retry back-off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import structlog

from reconciler.daemon import hoststate
from reconciler.daemon.scheduler import RECONNECT
from reconciler.errors import HypervisorError
from reconciler.records import dataclass
from reconciler.wording import outcome

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.config.daemon import HostEntry
    from reconciler.context import Clock
    from reconciler.daemon.hoststate import HostState
    from reconciler.daemon.metrics import Metrics
    from reconciler.host.hypervisor import Hypervisor

log = structlog.get_logger("reconciler.daemon")

PROBE_INTERVAL_S = 1.0
LOOP_STUCK_S = 120.0  # /livez fails when the loop has not moved for this long
KEEPALIVE_INTERVAL_S = (
    3  # with the count: a connection to a libvirt that stopped answering dropped within 10 s
)
KEEPALIVE_COUNT = 2


@dataclass(frozen=True, slots=True)
class HostHealth:
    name: str
    uri: str
    unreachable: str  # "" when the connection is open (or was never needed yet)
    reason: str  # the host's last reconcile reason ("" before the first)
    message: str
    applied: str


def readiness(
    hosts: Sequence[HostHealth], reason: str, message: str, stopping: bool
) -> tuple[bool, list[str]]:
    """(ok, problems) for ``/healthz``."""
    problems: list[str] = []
    if stopping:
        problems.append(outcome.STOPPING)
    for h in hosts:
        if h.unreachable:
            problems.append(outcome.host_down(h.name, h.unreachable))
        elif h.reason and h.reason != "Succeeded":
            problems.append(outcome.host_failing(h.name, h.reason, h.message))
    if reason and reason != "Succeeded" and not any(h.reason == reason for h in hosts):
        problems.append(outcome.last_failed(reason, message))
    return not problems, problems


def liveness(looping: bool, stopping: bool, waiting_s: float) -> tuple[bool, dict[str, Any]]:
    """(ok, body) for ``/livez``: the loop runs and has not waited ``LOOP_STUCK_S`` in one
    step (``waiting_s``: since it last moved)."""
    if looping and waiting_s > LOOP_STUCK_S:
        return False, {"loop": "stuck", "stuck_s": round(waiting_s)}
    ok = looping and not stopping
    return ok, {"loop": "running" if ok else "stopped", "waiting_s": round(waiting_s, 1)}


def host_body(hosts: Sequence[HostHealth]) -> dict[str, Any]:
    return {
        h.name: {
            "uri": h.uri,
            "reachable": not h.unreachable,
            "reason": h.reason,
            "applied": h.applied[:12],
            **({"error": h.unreachable} if h.unreachable else {}),
        }
        for h in hosts
    }


class Probed(Protocol):
    """What probing needs of a host's runner (``daemon/runner.py``): its state (replaced
    by what a step returns), name, entry, clock and a way to connect."""

    state: HostState

    @property
    def name(self) -> str: ...

    @property
    def entry(self) -> HostEntry: ...

    @property
    def clock(self) -> Clock: ...

    def connect(self) -> Hypervisor: ...


def probe_hosts(hosts: Sequence[Probed], now: float, kinds: set[str], metrics: Metrics) -> None:
    """Try to reach unreachable hosts again (cheap: one connection attempt each); a host
    that answers triggers a reconcile at once."""
    answered = RECONNECT in kinds  # a host's watcher heard it answer (daemon/watch.py): probe now
    for h in hosts:
        if not h.state.unreachable or (now < h.state.next_probe and not answered):
            continue
        try:
            h.connect()
        except HypervisorError as err:
            h.state = hoststate.probe_at(h.state, h.clock.monotonic() + PROBE_INTERVAL_S)
            log.debug("host still unreachable", host=h.name, error=str(err))
            continue
        log.info("host reconnected", host=h.name, uri=h.entry.uri, was=h.state.unreachable)
        h.state = hoststate.reconnected(h.state)
        metrics.hosts_up.labels(h.name).set(1)
        if RECONNECT not in kinds:
            kinds.add(RECONNECT)
            metrics.triggers.labels(RECONNECT).inc()
