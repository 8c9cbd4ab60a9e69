"""The daemon's per-host state is a value: each step returns a new one and leaves the
old as it was; the runner holds one and replaces it (tests/libvirt/test_daemon*.py run
the runner against test:///default)."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.daemon import hoststate
from reconciler.daemon.hoststate import Blocked, HostState
from reconciler.errors import HypervisorUnavailable
from reconciler.model.results import Reason, ReconcileStatus

OLD, NEW = "a" * 40, "b" * 40


def status(reason: Reason, applied: str = "", attempted: str = NEW) -> ReconcileStatus:
    return ReconcileStatus(reason, attempted, applied, 1000.0, 12)


def test_the_state_is_frozen() -> None:
    s = HostState()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.applied = NEW  # type: ignore[misc]


def test_a_success_applies_its_revision_and_a_failure_keeps_the_last() -> None:
    start = hoststate.restored(HostState(), OLD)
    done = hoststate.concluded(start, status(Reason.SUCCEEDED, applied=NEW))
    assert (done.applied, done.status) == (NEW, status(Reason.SUCCEEDED, applied=NEW))
    failed = hoststate.concluded(done, status(Reason.APPLY_FAILED))
    assert failed.applied == NEW
    assert failed.status is not None
    assert failed.status.reason == Reason.APPLY_FAILED
    assert start.applied == OLD  # each step a new value: the old one is untouched
    assert start.status is None


def test_a_blocked_revision_is_held_until_cleared() -> None:
    why = Blocked(NEW, Reason.BUILD_FAILED, "vm/web: bad", planned=True)
    held = hoststate.held_back(hoststate.restored(HostState(), OLD), why)
    assert (held.applied, held.blocked) == (OLD, why)
    assert hoststate.cleared(held).blocked is None
    assert held.blocked == why


def test_a_reload_keeps_what_the_host_knew_and_blocks_nothing() -> None:
    why = Blocked(NEW, Reason.BUILD_FAILED, "bad")
    before = HostState(
        OLD, why, status(Reason.BUILD_FAILED), (), {"web": 5.0}, unreachable="down", next_probe=9.0
    )
    after = hoststate.reloaded(before)
    assert (after.applied, after.blocked, after.status, after.applied_at) == (
        OLD,
        None,
        before.status,
        {"web": 5.0},
    )
    assert (after.unreachable, after.next_probe) == ("", 0.0)  # the connection is found again


def test_a_lost_host_is_probed_again_until_it_answers() -> None:
    lost = hoststate.probe_at(hoststate.lost(HostState(), "no route", unread=True), 30.0)
    assert (lost.unreachable, lost.reachable, lost.next_probe) == ("no route", False, 30.0)
    back = hoststate.read(hoststate.reconnected(lost))
    assert (back.unreachable, back.reachable) == ("", True)


def test_a_connection_lost_after_an_apply_keeps_the_domains_it_read() -> None:
    s = hoststate.lost(HostState(), "connection lost: x")
    assert (s.unreachable, s.reachable) == ("connection lost: x", True)


def test_a_read_that_fails_is_this_cycles_error_until_the_next() -> None:
    err = HypervisorUnavailable("test:///x: refused")
    down = hoststate.unread(HostState(), err)
    assert (down.reachable, down.down) == (False, err)
    cycle = hoststate.unread(down, None)  # a new cycle: nothing tried yet, the host still unread
    assert (cycle.reachable, cycle.down) == (False, None)


def test_restored_applied_times_are_a_copy() -> None:
    times = {"web": 1.0}
    s = hoststate.restored(HostState(), OLD, times)
    times["web"] = 2.0
    assert s.applied_at == {"web": 1.0}
    assert hoststate.restored(s, NEW).applied_at == {"web": 1.0}  # None: as it was


def test_state_json_says_the_revision_applied() -> None:
    assert hoststate.recorded(HostState(), {"applied_revision": OLD}).applied == OLD
    assert hoststate.recorded(HostState(applied=NEW), {}).applied == ""
