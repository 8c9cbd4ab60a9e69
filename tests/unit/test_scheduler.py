"""The daemon's schedule, with the clock passed in (no daemon, no sleeping).

Covers: timers due at their time (resync always, fetch only for a remote); a retry
after an exponential back-off capped by the resync interval; a failing source holds
every timer until its retry, a failed apply holds none; a host coming back ends the
back-off unless the source is failing; the sleep lasts until the first deadline or
watchdog ping; a re-plan fires once.
"""

from __future__ import annotations

from reconciler.daemon.scheduler import (
    FETCH,
    LIFECYCLE,
    RECONNECT,
    REFS,
    REQUEUE,
    RESYNC,
    RETRY,
    Schedule,
)


def schedule(remote: bool = True) -> Schedule:
    s = Schedule(fetch_interval_s=60.0, resync_interval_s=30.0, remote=remote)
    s.ran(0.0, s.due(0.0, ()))  # the first reconcile at t=0 starts both intervals
    return s


def test_timers_fall_due_and_restart() -> None:
    s = schedule()
    assert s.due(10.0, ()).kinds == frozenset()
    due = s.due(30.0, ())
    assert due.kinds == {RESYNC}
    assert (due.fetch, due.force) == (False, True)
    s.ran(30.0, due)
    due = s.due(60.0, ())
    assert due.kinds == {RESYNC, FETCH}
    assert due.fetch
    assert Schedule(60.0, 30.0, remote=False).due(0.0, ()).kinds == {RESYNC}  # a local repo is never fetched


def test_queued_refs_alone_do_not_force() -> None:
    due = schedule().due(1.0, [REFS])
    assert due.kinds == {REFS}
    assert not due.force
    assert schedule().due(1.0, [LIFECYCLE]).force


def test_back_off_doubles_up_to_the_resync_interval() -> None:
    s = schedule()
    assert [s.failed(100.0) for _ in range(5)] == [5.0, 10.0, 20.0, 30.0, 30.0]
    assert s.retry_at == 130.0
    s.succeeded()
    assert s.failures == 0
    assert s.retry_at is None
    assert s.failed(200.0) == 5.0


def test_a_failing_source_holds_every_timer_a_failed_apply_none() -> None:
    s = schedule()
    s.failed(25.0, source=True)  # retry at 30
    s.retry_at = 100.0  # a long back-off, as after several failures
    assert s.due(90.0, ()).kinds == frozenset()  # resync and fetch are due, but wait for the retry
    assert s.timeout(90.0) == 10.0
    assert s.due(100.0, ()).kinds == {RETRY, RESYNC, FETCH}
    apply_failed = schedule()
    apply_failed.failed(25.0)
    apply_failed.retry_at = 100.0
    assert apply_failed.due(31.0, ()).kinds == {RESYNC}


def test_a_host_coming_back_ends_the_back_off_unless_the_source_fails() -> None:
    s = schedule()
    s.failed(1.0)
    s.due(2.0, [RECONNECT])
    assert (s.failures, s.retry_at) == (0, None)
    s.failed(3.0, source=True)
    s.due(4.0, [RECONNECT])
    assert s.retry_at is not None


def test_sleep_until_the_first_deadline_or_the_watchdog() -> None:
    s = schedule()
    assert s.timeout(0.0) == 30.0
    assert s.timeout(0.0, probes=[12.0]) == 12.0
    assert s.timeout(0.0, watchdog_s=5.0) == 5.0
    assert s.timeout(100.0) == 0.0
    assert s.replan(0.0, [7.0, 3.0]) == 3.0
    assert s.timeout(0.0) == 3.0
    assert s.due(3.0, ()).kinds == {REQUEUE}
    assert s.requeue_at is None  # used up
