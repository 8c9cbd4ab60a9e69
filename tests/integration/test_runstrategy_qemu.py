"""Run strategies against a real libvirtd + QEMU (DESIGN §5 table).

Covers, each with a guest power-off (QEMU quits as a powered-off guest does: libvirt
reason "shutdown") and a killed QEMU process (reason "crashed"):
- Always: started again after a power-off; after a crash started again, with the
  crash-loop back-off delaying the second restart;
- RerunOnFailure: left off after a clean power-off, started again after a crash;
- Once: started once, never again (the mark remembers it);
- Manual: never started or stopped;
- Halted: a domain started out of band is stopped gracefully, forced after the grace
  period (no guest OS answers ACPI);
- the lifecycle event for a killed QEMU reaches a subscriber.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from reconciler import ownership
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState, RunStrategy
from reconciler.model.changes import Action
from reconciler.wording.reasons import said
from tests.helpers.qemu import (
    URI,
    converge,
    domain_xml,
    guest_power_off,
    kill_qemu,
    only,
    plan,
    rendered,
    sweep_prefix,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

RS = "rtest-apply-rs-"  # swept by test_apply_qemu too


@pytest.fixture(scope="module")
def hv() -> Iterator[Hypervisor]:
    Hypervisor.start_event_loop()
    sweep_prefix(URI, RS)
    with Hypervisor(URI) as h:
        yield h
    sweep_prefix(URI, RS)


def test_always_restarts_after_power_off_and_crash_with_back_off(hv: Hypervisor) -> None:
    name = f"{RS}always"
    d = rendered(name, domain_xml(name), RunStrategy.ALWAYS)
    converge(hv, name, [d])
    assert hv.state(name) == PowerState.RUNNING

    guest_power_off(hv, name)
    c = only(plan(hv, name, [d]), name)
    assert c.action == Action.START
    assert "powered off" in said(c)
    converge(hv, name, [d])
    assert hv.state(name) == PowerState.RUNNING

    kill_qemu(hv, name)
    first = hv.get_domain(name)
    assert first is not None
    assert first.state_reason == "crashed"
    c = only(plan(hv, name, [d], now=first.mark.last_start + 1), name)  # type: ignore[union-attr]
    assert c.action == Action.START
    assert c.restarts == 1
    converge(hv, name, [d])
    mark = ownership.read_mark(hv.persistent_xml(name))
    assert mark is not None
    assert mark.restarts == 1

    kill_qemu(hv, name)
    c = only(plan(hv, name, [d], now=mark.last_start + 2), name)
    assert c.action == Action.UNCHANGED
    assert not c.start
    assert 7 < c.requeue_after_s <= 8
    assert "back-off" in said(c)
    c = only(plan(hv, name, [d], now=mark.last_start + 11), name)
    assert c.action == Action.START
    assert c.restarts == 2


def test_rerun_on_failure(hv: Hypervisor) -> None:
    name = f"{RS}rerun"
    d = rendered(name, domain_xml(name), RunStrategy.RERUN_ON_FAILURE)
    converge(hv, name, [d])
    kill_qemu(hv, name)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.START
    assert hv.state(name) == PowerState.RUNNING

    guest_power_off(hv, name)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.UNCHANGED
    assert hv.state(name) == PowerState.SHUTOFF  # a clean stop is left alone


def test_once_is_started_once(hv: Hypervisor) -> None:
    name = f"{RS}once"
    d = rendered(name, domain_xml(name), RunStrategy.ONCE)
    p, _ = converge(hv, name, [d])
    assert only(p, name).start
    assert hv.state(name) == PowerState.RUNNING
    mark = ownership.read_mark(hv.persistent_xml(name))
    assert mark is not None
    assert mark.started

    guest_power_off(hv, name)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.UNCHANGED
    assert hv.state(name) == PowerState.SHUTOFF

    hv.start(name)
    kill_qemu(hv, name)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.UNCHANGED
    assert hv.state(name) == PowerState.SHUTOFF


def test_manual_is_never_started_or_stopped(hv: Hypervisor) -> None:
    name = f"{RS}manual"
    d = rendered(name, domain_xml(name), RunStrategy.MANUAL)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.CREATE
    assert not only(p, name).start
    assert hv.state(name) == PowerState.SHUTOFF

    hv.start(name)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.UNCHANGED
    kill_qemu(hv, name)
    p, _ = converge(hv, name, [d])
    assert only(p, name).action == Action.UNCHANGED
    assert hv.state(name) == PowerState.SHUTOFF


def test_halted_stops_gracefully_then_forced(hv: Hypervisor) -> None:
    name = f"{RS}halted"
    d = rendered(name, domain_xml(name), RunStrategy.HALTED)
    converge(hv, name, [d])
    assert hv.state(name) == PowerState.SHUTOFF
    hv.start(name)  # out of band
    c = only(plan(hv, name, [d]), name)
    assert c.action == Action.STOP
    assert c.stop
    assert c.drift
    converge(hv, name, [d])
    assert hv.state(name) == PowerState.SHUTOFF
    stopped = hv.get_domain(name)
    assert stopped is not None
    assert stopped.state_reason == "destroyed"


def test_lifecycle_event_for_a_killed_qemu(hv: Hypervisor) -> None:
    name = f"{RS}events"
    d = rendered(name, domain_xml(name), RunStrategy.ALWAYS)
    converge(hv, name, [d])
    seen: list[tuple[str, str, str]] = []
    got = threading.Event()

    def on_event(domain: str, event: str, detail: str) -> None:
        if domain == name:
            seen.append((domain, event, detail))
            if event == "stopped":
                got.set()

    unsubscribe = hv.watch_lifecycle(on_event)
    try:
        kill_qemu(hv, name)
        assert got.wait(10), seen
    finally:
        unsubscribe()
    assert (name, "stopped", "failed") in seen  # libvirt: STOPPED_FAILED; state reason "crashed"
