"""A pool's autohealing (plan/autoheal.py through plan/build.py), on a fake clock.

Covers: a replica of a pool with ``autohealing`` that crashed again after
``startUpFailureThreshold - 1`` crash restarts is planned as a reprovision (a start
that defines it anew, its restart count at 0, the disks recreated: ``reprovision``),
the plan saying why; before the threshold it is a crash restart under the back-off; a
replica that has failed to start for ``minFailingToStartDuration`` is reprovisioned
from its back-off wait; a replica whose last run outlived the back-off's reset counts
from one again; the same replica of a pool without ``autohealing`` never is.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.model import PowerState, RenderedDomain
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.rollout import Autohealing, PaceGroup
from reconciler.ownership import mark_for
from reconciler.plan.build import build_plan
from reconciler.plan.text import format_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.wording.reasons import said
from tests.helpers.clock import FakeClock
from tests.helpers.plans import REV, live_of, one, rendered

XML = (
    "<domain type='kvm'><name>web-0</name><memory unit='KiB'>65536</memory><os><type>hvm</type></os></domain>"
)
HEAL = Autohealing(threshold=3, min_failing_s=300.0)


def replica(heal: Autohealing | None = HEAL) -> RenderedDomain:
    return rendered("web-0", XML, pace=PaceGroup("pool/web", "1", 3, autohealing=heal))


def planned(d: RenderedDomain, clock: FakeClock, *, restarts: int, started_ago: float) -> Change:
    """The plan for ``d`` crashed ``started_ago`` seconds after its last start, which was
    crash restart number ``restarts``."""
    mark = replace(mark_for(d, REV), started=True, last_start=clock.time() - started_ago, restarts=restarts)
    live = replace(live_of(d, state=PowerState.SHUTOFF, mark=mark), state_reason="crashed")
    plan = build_plan(REV, [d], [live], PlanPolicy(host="h1", owner="me"), now=clock.time())
    return one(plan, "web-0")


def test_the_third_failed_start_in_a_row_reprovisions_the_replica() -> None:
    clock = FakeClock()
    second = planned(replica(), clock, restarts=1, started_ago=30)  # failure 2: a crash restart
    assert (second.action, second.reprovision, second.restarts) == (Action.START, False, 2)
    third = planned(replica(), clock, restarts=2, started_ago=30)  # failure 3: the threshold
    assert (third.action, third.start, third.reprovision, third.restarts) == (Action.START, True, True, 0)
    assert third.requeue_after_s == 0.0  # at once, not after the back-off
    assert third.definition is not None
    assert said(third) == (
        "autohealing: 3 failed starts in a row (startUpFailureThreshold 3): "
        "reprovisioned from the pool's template, its disks recreated from their sources"
    )
    assert "vm/web-0: start - autohealing: 3 failed starts in a row" in format_plan(Plan(REV, (third,)))


def test_a_replica_failing_to_start_long_enough_is_reprovisioned_from_its_back_off() -> None:
    clock = FakeClock()
    heal = Autohealing(threshold=10, min_failing_s=120.0)
    waiting = planned(replica(heal), clock, restarts=3, started_ago=30)  # in the back-off: 40 s
    assert (waiting.start, waiting.reprovision) == (False, False)
    assert waiting.requeue_after_s > 0
    clock.advance(90)  # failing for 120 s since its last start
    healed = planned(replica(heal), clock, restarts=3, started_ago=120)
    assert (healed.start, healed.reprovision) == (True, True)
    assert "failing to start for 2m (minFailingToStartDuration 2m)" in said(healed)


def test_a_run_longer_than_the_reset_counts_from_one_again() -> None:
    clock = FakeClock()
    c = planned(replica(), clock, restarts=2, started_ago=601)  # ran past crash_reset_s (600 s)
    assert (c.start, c.reprovision, c.restarts) == (True, False, 1)


def test_without_autohealing_a_replica_only_restarts() -> None:
    clock = FakeClock()
    c = planned(replica(None), clock, restarts=2, started_ago=30)  # as the third failure above
    assert (c.action, c.start, c.reprovision, c.restarts) == (Action.START, True, False, 3)
    assert "autohealing" not in said(c)
