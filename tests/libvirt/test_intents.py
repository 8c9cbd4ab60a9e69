"""A restart decided and not finished, resumed from the domain's mark (test:///default).

Covers:
- the definition a rollout restart writes carries ``intent: restart`` in its mark, and
  the start that ends the restart clears it;
- a daemon killed between that define and the stop (the persistent definition new,
  the running domain behind): the next plan restarts the VM, where without the intent
  it would only stage the difference (RestartRequired), and applied it converges;
- killed after the stop (the guest off): the next plan starts it, even under
  ``RerunOnFailure``, to which a clean stop means "leave it off";
- an intent that no longer holds (the VM ``Halted`` now, or the start made and only its
  mark write lost) is written away, never acted on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from reconciler import ownership
from reconciler.host.apply import apply_plan
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState, Rollout, RunStrategy
from reconciler.model.changes import Action
from reconciler.plan.intents import RESTART
from reconciler.wording.reasons import said
from tests.helpers.testdriver import PREFIX, plan_for, rendered, xml

if TYPE_CHECKING:
    from collections.abc import Iterator

    from reconciler.model import RenderedDomain


@pytest.fixture
def hv() -> Iterator[Hypervisor]:
    with Hypervisor("test:///default") as h:
        yield h
        for d in h.list_domains():
            if d.name.startswith(f"{PREFIX}intent-"):
                if d.active:
                    h.destroy(d.name)
                h.undefine(d.name)


def _intent(hv: Hypervisor, name: str) -> str:
    mark = ownership.read_mark(hv.persistent_xml(name))
    assert mark is not None
    return mark.intent


def _rolled_out(
    hv: Hypervisor, name: str, strategy: RunStrategy = RunStrategy.ALWAYS
) -> tuple[RenderedDomain, str]:
    """``name`` running at 128 MiB, then a restart-class change (256 MiB maximum)
    defined the way apply starts a restart, and no further: the daemon killed there."""
    first = rendered(name, xml(name), strategy, rollout=Rollout.RESTART)
    assert all(r.ok for r in apply_plan(plan_for(hv, name, [first]), hv))
    assert hv.state(name) == PowerState.RUNNING
    assert _intent(hv, name) == ""
    second = rendered(name, xml(name, memory=256), strategy, rollout=Rollout.RESTART)
    (c,) = plan_for(hv, name, [second]).changes
    assert c.action == Action.RESTART, said(c)
    assert c.definition is not None
    assert c.definition.mark.intent == RESTART
    hv.define(c.definition.xml, name)  # the restart's first step; the stop never came
    return second, c.definition.xml


def test_a_restart_cut_short_after_its_define_is_made_by_the_next_plan(hv: Hypervisor) -> None:
    name = f"{PREFIX}intent-run"
    desired, defined = _rolled_out(hv, name)
    assert _intent(hv, name) == RESTART
    (c,) = plan_for(hv, name, [desired]).changes
    assert c.action == Action.RESTART, said(c)
    assert "restart decided before the daemon stopped" in said(c)
    assert not c.restart_required

    # Without the intent (what a daemon found before): staged, never made.
    mark = ownership.read_mark(defined)
    assert mark is not None
    hv.define(ownership.with_mark(defined, replace(mark, intent="")), name)
    (staged,) = plan_for(hv, name, [desired]).changes
    assert staged.action != Action.RESTART, said(staged)
    assert staged.restart_required, said(staged)
    hv.define(defined, name)

    assert all(r.ok for r in apply_plan(plan_for(hv, name, [desired]), hv))
    assert hv.state(name) == PowerState.RUNNING
    assert _intent(hv, name) == ""
    (after,) = plan_for(hv, name, [desired]).changes
    assert after.action == Action.UNCHANGED, said(after)
    assert not after.restart_required, said(after)


def test_a_restart_cut_short_after_its_stop_starts_the_guest(hv: Hypervisor) -> None:
    name = f"{PREFIX}intent-off"
    desired, _ = _rolled_out(hv, name, RunStrategy.RERUN_ON_FAILURE)
    hv.stop(name, 1.0)  # the stop made; the start never came
    assert hv.state(name) == PowerState.SHUTOFF
    (c,) = plan_for(hv, name, [desired]).changes
    assert c.action == Action.START, said(c)
    assert c.start, said(c)
    assert "the guest is off, starting it" in said(c)
    assert all(r.ok for r in apply_plan(plan_for(hv, name, [desired]), hv))
    assert hv.state(name) == PowerState.RUNNING
    assert _intent(hv, name) == ""


def test_an_intent_that_no_longer_holds_is_written_away(hv: Hypervisor) -> None:
    name = f"{PREFIX}intent-stale"
    desired, _ = _rolled_out(hv, name)
    halted = replace(desired, run_strategy=RunStrategy.HALTED)
    (c,) = plan_for(hv, name, [halted]).changes
    assert c.action == Action.STOP, said(c)
    assert c.definition is not None, said(c)
    assert c.definition.mark.intent == ""
    assert "no longer applies" in said(c)

    hv.destroy(name)
    hv.start(name)  # the start made (running the new definition), its mark write lost
    (c,) = plan_for(hv, name, [desired]).changes
    assert c.action == Action.UPDATE, said(c)
    assert c.definition is not None, said(c)
    assert c.definition.mark.intent == ""
    assert all(r.ok for r in apply_plan(plan_for(hv, name, [desired]), hv))
    assert _intent(hv, name) == ""
    assert hv.state(name) == PowerState.RUNNING
