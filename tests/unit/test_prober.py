"""The daemon's one prober, driven by a fake clock and a fake transport.

Covers: the first run after ``initialDelaySeconds``, then one every ``periodSeconds``;
Ready without a readiness probe as soon as the VM runs, with one only once it passes,
lost after ``failureThreshold`` failures and back after ``successThreshold`` passes, each
change a ``Transition`` and a new readiness snapshot (a frozen mapping, replaced, never
changed); a VM without probes kept as its readiness alone, moved from host to host, given
a probe and losing it; a VM that stops is not Ready, and starts its probes again when it runs; a
failing liveness probe ends the guest once (``Transport.end``), told to ``on_liveness``
first and counted, a listing that still sees it run before the destroy lands does not
probe it again, its next run does; boundedness: a guest whose probe never returns is answered
``Timeout`` at its deadline, its worker replaced by a spare, the other VMs' probes run
on time, and the threads never exceed ``workers + spare``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from reconciler.daemon.prober import GRACE_S, Prober, Target, Transition
from reconciler.model.health import (
    NO_PROBES,
    Answer,
    GuestAddress,
    Outcome,
    Probe,
    ProbeAction,
    Probes,
    ReadyKind,
    VMHealth,
)
from reconciler.model.keys import VMKey
from tests.helpers.clock import FakeClock

if TYPE_CHECKING:
    from collections.abc import Iterator

HANG_GUARD_S = 10.0  # waits for worker threads: a hang guard, never a timing assertion
PING = Probe(ProbeAction.GUEST_AGENT_PING, initial_delay_s=5, period_s=10, failure_threshold=2)
LIVE = Probe(ProbeAction.EXEC, command=("test", "-e", "/tmp/healthy"), period_s=10, failure_threshold=3)


@dataclass
class FakeGuests:
    """Answers per domain (``ok``); a domain in ``hang`` blocks until ``release`` is set."""

    ok: dict[str, bool] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)
    calls: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    landing: threading.Event = field(default_factory=threading.Event)  # set: a destroy returns at once
    cond: threading.Condition = field(default_factory=threading.Condition)

    def run(self, host: str, domain: str, probe: Probe, address: GuestAddress | None) -> Answer:
        if domain in self.hang:
            self.release.wait(HANG_GUARD_S)
        with self.cond:
            self.calls.append(domain)
            self.cond.notify_all()
        return Answer(Outcome.PASSED if self.ok.get(domain, True) else Outcome.NO_AGENT)

    def end(self, host: str, domain: str) -> None:
        self.landing.wait(HANG_GUARD_S)
        with self.cond:
            self.ended.append(domain)
            self.cond.notify_all()


def target(name: str, probes: Probes = NO_PROBES, running: bool = True) -> Target:
    key = VMKey("default", name)
    return Target(key, "h1", key.domain, probes, running)


class Rig:
    def __init__(self, workers: int = 2, spare: int = 2) -> None:
        self.clock = FakeClock()
        self.guests = FakeGuests()
        self.changes: list[Transition] = []
        self.liveness: list[str] = []
        self.prober = Prober(
            self.guests, self.clock, workers=workers, spare=spare, on_change=self.changes.extend,
            on_liveness=lambda t, a: self.liveness.append(t.domain),
        )  # fmt: skip

    def answered(self, runs: int) -> None:
        """Wait until the transport answered ``runs`` runs in all, then take them in."""
        assert self.prober.wait_answered(runs, HANG_GUARD_S)
        self.prober.tick()

    def at(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.prober.tick()

    def ready(self, name: str) -> bool:
        return self.prober.readiness[VMKey("default", name)].ready


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    r.guests.landing.set()
    yield r
    r.guests.release.set()
    r.prober.close()


def test_ready_without_a_probe_when_running(rig: Rig) -> None:
    rig.prober.watch("h1", [target("plain"), target("off", running=False)])
    assert rig.ready("plain")
    assert not rig.ready("off")
    assert rig.prober.readiness[VMKey("default", "off")].reason.kind == ReadyKind.NOT_RUNNING
    assert rig.prober.thread_count() == 0  # nothing to probe: no thread


def test_vms_seen_alike_in_one_listing_share_one_readiness_record(rig: Rig) -> None:
    rig.prober.watch("h1", [target("a"), target("b"), target("c", running=False), target("d", running=False)])
    a, b, c, d = (rig.prober.readiness[VMKey("default", n)] for n in "abcd")
    assert (a.ready, c.ready) == (True, False)
    assert a is b  # a fleet's records: one per distinct readiness, not one per VM
    assert c is d
    assert a is not c
    rig.clock.advance(5)
    rig.prober.watch("h1", [target("a"), target("b", running=False), target("c"), target("d", running=False)])
    assert rig.prober.readiness[VMKey("default", "b")].reason is d.reason  # one record of each reason
    assert rig.prober.readiness[VMKey("default", "d")] is d  # unchanged: kept
    assert rig.prober.readiness[VMKey("default", "b")].since == d.since + 5


def test_vms_without_probes_move_hosts_and_gain_and_lose_probes(rig: Rig) -> None:
    a, b = VMKey("default", "a"), VMKey("default", "b")
    rig.prober.watch("h1", [target("a"), target("b", Probes(readiness=PING))])
    assert rig.prober.keys_on("h1") == {a, b}
    assert rig.prober.health()[a] == VMHealth(rig.prober.readiness[a])  # nothing but its Ready
    assert not rig.prober.health()[b].readiness.ready
    rig.prober.watch("h2", [Target(a, "h2", "a", NO_PROBES, True)])  # moved to h2 (h1 not listed yet)
    assert (rig.prober.keys_on("h1"), rig.prober.keys_on("h2")) == ({b}, {a})
    assert [(host, list(ready)) for host, ready in rig.prober.readiness.by_host()] == [
        ("h1", [b]),
        ("h2", [a]),
    ]
    assert rig.ready("a")
    assert len(rig.prober.readiness) == 2
    rig.prober.watch("h1", [target("b")])  # its probe removed: Ready as it runs
    assert rig.ready("b")
    assert not rig.prober.probing()
    rig.prober.watch("h2", [Target(a, "h2", "a", Probes(readiness=PING), True)])  # a probe added: pending
    assert not rig.ready("a")
    assert rig.prober.probing()
    rig.at(5)
    rig.answered(1)
    assert rig.ready("a")
    assert rig.guests.calls == ["a"]  # b's probe, removed before it was due, never ran
    rig.prober.watch("h1", [])
    assert list(rig.prober.readiness) == [a]
    assert b not in rig.prober.readiness
    assert rig.prober.readiness.get(b) is None


def test_readiness_follows_the_probe(rig: Rig) -> None:
    rig.changes += rig.prober.watch("h1", [target("web", Probes(readiness=PING))])
    snapshot = rig.prober.readiness
    assert not rig.ready("web")
    assert snapshot[VMKey("default", "web")].reason.kind == ReadyKind.PROBE_PENDING
    rig.at(4)
    assert rig.guests.calls == []  # initialDelaySeconds: 5
    rig.at(1)
    rig.answered(1)
    assert rig.ready("web")
    assert rig.prober.readiness is not snapshot  # a new snapshot, the old one unchanged
    assert not snapshot[VMKey("default", "web")].ready
    assert [(t.before.ready if t.before else None, t.after.ready) for t in rig.changes] == [
        (None, False),
        (False, True),
    ]
    rig.guests.ok["web"] = False
    rig.at(9)
    assert len(rig.guests.calls) == 1  # the next run is a period after the answer
    rig.at(1)
    rig.answered(2)
    assert rig.ready("web")  # one failure of failureThreshold 2
    rig.at(10)
    rig.answered(3)
    assert not rig.ready("web")
    why = rig.prober.readiness[VMKey("default", "web")].reason
    assert (why.kind, why.answer.outcome if why.answer else None) == (
        ReadyKind.PROBE_FAILED,
        Outcome.NO_AGENT,
    )
    rig.guests.ok["web"] = True
    rig.at(10)
    rig.answered(4)
    assert rig.ready("web")


def test_a_stop_and_a_start_begin_again(rig: Rig) -> None:
    rig.prober.watch("h1", [target("web", Probes(readiness=PING))])
    rig.at(5)
    rig.answered(1)
    assert rig.ready("web")
    rig.prober.watch("h1", [target("web", Probes(readiness=PING), running=False)])
    assert not rig.ready("web")
    rig.prober.watch("h1", [target("web", Probes(readiness=PING))])
    assert not rig.ready("web")  # pending again: the initial delay counts from the start
    rig.prober.watch("h1", [])
    assert VMKey("default", "web") not in rig.prober.readiness


def test_a_failing_liveness_probe_ends_the_guest_once(rig: Rig) -> None:
    rig.guests.ok["web"] = False
    rig.guests.landing.clear()  # the destroy waits until the test lets it land
    rig.prober.watch("h1", [target("web", Probes(liveness=LIVE))])
    for n in (1, 2):
        rig.at(0 if n == 1 else 10)
        rig.answered(n)
    assert rig.liveness == []
    rig.at(10)
    rig.answered(3)
    assert rig.liveness == ["web"]
    rig.prober.watch("h1", [target("web", Probes(liveness=LIVE))])  # a listing before the destroy landed
    rig.at(10)
    assert len(rig.guests.calls) == 3  # ended: no more runs until it runs again
    rig.guests.landing.set()
    with rig.guests.cond:
        assert rig.guests.cond.wait_for(lambda: rig.guests.ended == ["web"], HANG_GUARD_S)
    assert rig.prober.wait_idle(HANG_GUARD_S)
    (health,) = rig.prober.health().values()
    assert health.liveness_restarts == 1
    assert health.live_state is not None
    assert health.live_state.last is not None
    assert health.live_state.last.outcome == Outcome.NO_AGENT
    rig.prober.watch("h1", [target("web", Probes(liveness=LIVE))])  # its next run: probed again
    rig.guests.ok["web"] = True
    rig.at(0)
    rig.answered(5)  # three probe runs, the destroy, this run
    (health,) = rig.prober.health().values()
    assert health.live_state is not None
    assert health.live_state.last == Answer(Outcome.PASSED, at=rig.clock.mono)
    assert (health.liveness_restarts, rig.guests.ended) == (1, ["web"])


def test_a_hung_guest_delays_no_other_probe() -> None:
    rig = Rig(workers=2, spare=2)
    try:
        rig.guests.hang = {"stuck-0", "stuck-1", "stuck-2"}
        vms = [target(f"stuck-{i}", Probes(readiness=PING)) for i in range(3)]
        vms += [target(f"web-{i}", Probes(readiness=PING)) for i in range(4)]
        rig.prober.watch("h1", vms)
        rig.at(5)
        rig.answered(4)  # the 4 web VMs answer though 2 workers hang
        assert all(rig.ready(f"web-{i}") for i in range(4))
        rig.at(1 + GRACE_S)  # the hung runs pass their deadline: answered Timeout
        for i in range(3):
            answer = rig.prober.readiness[VMKey("default", f"stuck-{i}")].reason.answer
            assert answer is not None
            assert answer.outcome == Outcome.TIMEOUT
        rig.at(10 - 1 - GRACE_S)
        rig.answered(8)  # the next period of every web VM, on time
        for i in range(3):  # the stuck ones keep failing without taking more workers
            rig.at(10)
            rig.answered(12 + 4 * i)
            assert rig.prober.thread_count() <= 2 + 2
        stuck = rig.prober.health()[VMKey("default", "stuck-0")]
        assert stuck.ready_state is not None
        assert stuck.ready_state.failures == 5  # runs due at 5 (answered at its deadline), 15, 25, 35, 45
        assert not rig.ready("stuck-0")
        assert all(rig.ready(f"web-{i}") for i in range(4))
        rig.guests.release.set()  # the hung guests answer at last: their answers are dropped
        assert rig.prober.wait_idle(HANG_GUARD_S)
        assert rig.prober.answered == 20
        rig.at(10)
        rig.answered(27)  # their next runs go to a worker again, and pass
        assert all(rig.ready(f"stuck-{i}") for i in range(3))
    finally:
        rig.guests.release.set()
        rig.prober.close()
