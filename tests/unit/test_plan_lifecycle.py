"""Run-strategy decisions and crash-loop back-off (reconciler.plan.power), pure.

Covers the DESIGN §5 table row by row: Always / RerunOnFailure / Once / Manual /
Halted against a guest power-off ("shutdown"), a crash ("crashed" / "failed"), an
out-of-band stop ("destroyed") with and without selfHeal, a never-started domain;
the back-off sequence (0, 10, 20, 40 ... capped at 300 s), its reset after a long
run, a wall clock stepped back (served, not stretched), and running without a clock; which lifecycle events trigger a reconcile.
"""

from __future__ import annotations

import pytest

from reconciler.model import LiveDomain, OwnershipMark, PowerState, RunStrategy
from reconciler.plan.power import Backoff, decide_power, reconcile_on_event
from reconciler.render.identity import strategy_from_restart_policy
from reconciler.wording.reasons import one

A, R, ONCE, M, H = (
    RunStrategy.ALWAYS,
    RunStrategy.RERUN_ON_FAILURE,
    RunStrategy.ONCE,
    RunStrategy.MANUAL,
    RunStrategy.HALTED,
)
T0 = 1_000_000.0


def dom(
    state: PowerState = PowerState.SHUTOFF,
    reason: str = "",
    started: bool = True,
    restarts: int = 0,
    strategy: RunStrategy = A,
) -> LiveDomain:
    mark = OwnershipMark(
        commit="c",
        path="p",
        spec_hash="h",
        run_strategy=str(strategy),
        started=started,
        last_start=T0 if started else 0.0,
        restarts=restarts,
    )
    return LiveDomain(name="a", uuid="", state=state, persistent_xml="", mark=mark, state_reason=reason)


@pytest.mark.parametrize(
    ("strategy", "reason", "start"),
    [
        (A, "shutdown", True),  # guest powers off: start again
        (A, "crashed", True),
        (A, "failed", True),
        (R, "shutdown", False),  # clean stop: leave off
        (R, "crashed", True),
        (ONCE, "shutdown", False),
        (ONCE, "crashed", False),
        (M, "shutdown", False),
        (M, "crashed", False),
        (H, "crashed", False),
    ],
)
def test_table(strategy: RunStrategy, reason: str, start: bool) -> None:
    d = decide_power(strategy, dom(reason=reason, strategy=strategy), now=T0 + 1000)
    assert d.start is start
    assert not d.stop


@pytest.mark.parametrize("strategy", [A, R, ONCE])
def test_never_started_is_started(strategy: RunStrategy) -> None:
    assert decide_power(strategy, dom(started=False)).start


def test_manual_never_started() -> None:
    assert not decide_power(M, dom(started=False)).start


@pytest.mark.parametrize("self_heal", [True, False])
@pytest.mark.parametrize("strategy", [A, R])
def test_destroyed_out_of_band_is_drift(strategy: RunStrategy, self_heal: bool) -> None:
    d = decide_power(strategy, dom(reason="destroyed"), self_heal=self_heal)
    assert d.drift
    assert d.start is self_heal
    assert d.reason is not None
    assert ("reporting only" in one(d.reason)) is not self_heal


def test_halted() -> None:
    running = dom(PowerState.RUNNING, "booted", strategy=A)
    d = decide_power(H, running)
    assert d.stop
    assert not d.drift
    started_oob = dom(PowerState.RUNNING, "booted", strategy=H)
    assert decide_power(H, started_oob).drift
    d = decide_power(H, started_oob, self_heal=False)
    assert d.drift
    assert not d.stop
    assert decide_power(H, dom(PowerState.RUNNING, strategy=M)).stop


def test_running_domains_are_left_alone() -> None:
    for s in (A, R, ONCE, M):
        d = decide_power(s, dom(PowerState.RUNNING, "booted"))
        assert not d.start
        assert not d.stop


def test_back_off_sequence() -> None:
    b = Backoff()
    assert [b.delay(n) for n in range(1, 9)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_crash_loop_back_off_waits_then_starts() -> None:
    crashed = dom(reason="crashed", restarts=2)  # third restart is due 20 s after the last start
    wait = decide_power(A, crashed, now=T0 + 5)
    assert not wait.start
    assert wait.wait_s == pytest.approx(15)
    assert wait.restarts == 2
    assert wait.reason is not None
    assert "crash loop back-off: restart 3 in 15s" in one(wait.reason)
    go = decide_power(A, crashed, now=T0 + 21)
    assert go.start
    assert go.restarts == 3


def test_a_clock_stepped_back_does_not_stretch_the_back_off() -> None:
    """Two hours back: the previous start lies in the future; the crashed VM starts now
    (its new start is stamped with the new time, so the back-off counts from there)."""
    crashed = dom(reason="crashed", restarts=2)
    d = decide_power(A, crashed, now=T0 - 7200)
    assert d.start
    assert d.wait_s == 0
    assert d.restarts == 3


def test_back_off_resets_after_a_long_run() -> None:
    crashed = dom(reason="crashed", restarts=6)
    d = decide_power(A, crashed, now=T0 + 601)
    assert d.start
    assert d.restarts == 1


def test_no_clock_no_back_off() -> None:
    d = decide_power(R, dom(reason="crashed", restarts=5), now=None)
    assert d.start
    assert d.restarts == 6


def test_events_that_trigger_a_reconcile() -> None:
    assert reconcile_on_event("stopped", "failed")
    assert reconcile_on_event("crashed", "panicked")
    assert reconcile_on_event("defined", "updated")
    assert not reconcile_on_event("suspended", "paused")


def test_restart_policy_maps_to_run_strategies() -> None:
    assert strategy_from_restart_policy("always") == A
    assert strategy_from_restart_policy("Never") == ONCE
    assert strategy_from_restart_policy("OnFailure") == RunStrategy.RERUN_ON_FAILURE
    assert strategy_from_restart_policy(" ONFAILURE ") == RunStrategy.RERUN_ON_FAILURE
    with pytest.raises(ValueError, match="unsupported restartPolicy 'sometimes'"):
        strategy_from_restart_policy("sometimes")
    with pytest.raises(ValueError, match="unsupported restartPolicy True"):
        strategy_from_restart_policy(True)
