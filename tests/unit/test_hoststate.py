"""The daemon's per-host state is a value: each step returns a new one and leaves the
old as it was; the runner holds one and replaces it (tests/libvirt/test_daemon*.py run
the runner against test:///default)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from reconciler.daemon import hoststate
from reconciler.daemon.hoststate import Blocked, HostState
from reconciler.errors import HypervisorUnavailable
from reconciler.model import VMKey
from reconciler.model.changes import Plan
from reconciler.model.results import Reason, ReconcileStatus, Sync, VMStatus
from reconciler.model.rollout import Paced

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
    plan = Plan(NEW, ())
    held = hoststate.held_back(hoststate.restored(HostState(), OLD), why, plan)
    assert (held.applied, held.blocked, held.head_plan) == (OLD, why, plan)
    again = hoststate.held_back(held, replace(why, planned=False))  # the same revision, before a plan
    assert again.head_plan is plan
    other = hoststate.held_back(held, Blocked("c" * 40, Reason.SOURCE_FAILED, "x"))  # another revision
    assert other.head_plan is None
    assert (hoststate.cleared(held).blocked, hoststate.cleared(held).head_plan) == (None, plan)  # a reload
    assert (hoststate.converged(held).blocked, hoststate.converged(held).head_plan) == (None, None)
    assert held.blocked == why


def test_a_plan_that_paces_nothing_keeps_the_last_pacing() -> None:
    paced = Paced(waiting=(VMKey("default", "web-1"),))
    s = hoststate.paced_by(HostState(), paced)
    assert hoststate.paced_by(s, None).paced is paced


def test_a_reload_keeps_what_the_host_knew_and_blocks_nothing() -> None:
    why = Blocked(NEW, Reason.BUILD_FAILED, "bad")
    before = HostState(
        OLD,
        why,
        status=status(Reason.BUILD_FAILED),
        applied_at={"web": 5.0},
        unreachable="down",
        next_probe=9.0,
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
    back = hoststate.read(hoststate.reconnected(lost), frozenset({"web"}))
    assert (back.unreachable, back.reachable, back.copies) == ("", True, ("web",))


def test_the_copies_read_are_the_managed_sets_own_names_when_the_same() -> None:
    s = hoststate.applied_managed(HostState(), ("a", "b"), 1.0, 60.0)
    same = hoststate.read(s, frozenset({"b", "a"}))
    assert same.copies is s.managed  # one tuple of the fleet's names, not two
    other = hoststate.read(s, ["c", "a"])
    assert other.copies == ("a", "c")
    assert hoststate.last_copies(HostState(), {"z", "y"}).copies == ("y", "z")


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


def test_restored_applied_times_are_kept_only_for_the_vms_the_rows_do_not_list() -> None:
    s = hoststate.restored(HostState(), OLD, {"web": 1.0, "db": 2.0})
    row = VMStatus(VMKey("default", "web"), "h", "Always", "running", Sync.SYNCED, OLD, applied_at=1.0)
    after = hoststate.with_rows(s, (row,))
    assert (after.rows, after.applied_at) == ((row,), {"db": 2.0})  # the row says web's from now on
    assert hoststate.with_rows(after, ()).applied_at == {"db": 2.0}


def test_state_json_says_the_revision_applied() -> None:
    assert hoststate.recorded(HostState(), {"applied_revision": OLD}).applied == OLD
    assert hoststate.recorded(HostState(applied=NEW), {}).applied == ""


def test_the_guard_memory_is_restored_only_when_well_formed() -> None:
    recorded = {
        "managed": ["a", "b"],
        "prune_window": {"since": 100, "managed": ["a", "b", "c"]},
        "prune_refused": {"revision": NEW, "limit": 50, "message": "too many"},
    }
    s = hoststate.guard_restored(HostState(), recorded)
    assert (s.managed, s.window) == (("a", "b"), (100.0, ("a", "b", "c")))
    assert s.prune_refused == recorded["prune_refused"]
    bad = {"managed": ["a", 1], "prune_window": {"since": "x", "managed": []}, "prune_refused": {"limit": 1}}
    assert hoststate.guard_restored(HostState(), bad) == HostState()
    assert hoststate.guard_restored(s, "not a mapping") is s


def test_the_prune_window_follows_the_wall_clock() -> None:
    s = HostState(window=(1000.0, ("a",)))
    assert hoststate.window_at(s, 1500.0, 3600.0).window == (1000.0, ("a",))  # open
    assert hoststate.window_at(s, 900.0, 3600.0).window == (900.0, ("a",))  # a step back: starts now
    assert hoststate.window_at(s, 4600.0, 3600.0).window is None  # at its end: gone


def test_an_apply_opens_a_window_against_what_was_managed_before() -> None:
    first = hoststate.applied_managed(HostState(), ("a", "b"), 1000.0, 3600.0)
    assert (first.managed, first.window) == (("a", "b"), (1000.0, ("a", "b")))
    later = hoststate.applied_managed(first, ("a", "b", "c"), 2000.0, 3600.0)  # the window holds
    assert (later.managed, later.window) == (("a", "b", "c"), (1000.0, ("a", "b")))
    after = hoststate.applied_managed(later, ("a",), 5000.0, 3600.0)  # a new window: before this apply
    assert after.window == (5000.0, ("a", "b", "c"))


def test_logged_keeps_what_it_is_not_given() -> None:
    s = hoststate.logged(HostState(), warned=frozenset({"w"}))
    s = hoststate.logged(s, drift=frozenset({("web", "drift")}))
    assert (s.warned, s.drift_logged, s.elsewhere_logged) == (
        frozenset({"w"}),
        frozenset({("web", "drift")}),
        frozenset(),
    )


def test_a_reload_keeps_the_guard_memory_and_copies_but_logs_again() -> None:
    s = HostState(
        copies=("a",), managed=("a",), window=(1.0, ("a",)), prune_refused={"revision": NEW},
        warned=frozenset({"w"}), other_hosts=(("default/web", "h2"),),
    )  # fmt: skip
    r = hoststate.reloaded(s)
    assert (r.copies, r.managed, r.window, r.prune_refused) == (
        s.copies,
        s.managed,
        s.window,
        s.prune_refused,
    )
    assert (r.warned, r.other_hosts) == (frozenset(), ())
