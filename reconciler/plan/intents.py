"""Intents: an action the reconciler decided and has not finished, kept in the domain's
mark so that a daemon killed half-way resumes it.

Input: the ownership mark of a live domain (``intent``), its power state, the VM's run
strategy and rollout, the host's plan policy, what the running domain still differs in
and the power decision. Output: a ``Resumed`` verdict (restart it now, start it again,
or forget an intent that no longer holds) and the mark a new definition carries. Pure.

A restart-class rollout defines the new definition first and then stops the guest
gracefully, which may take its whole grace period: killed in between, a daemon would
find the persistent definition already in git's state and only the running domain
behind, which it reads as a difference staged for the next cold boot and never acts
on. So the definition written for a restart carries ``intent: restart`` in its mark,
in the same ``defineXML`` (libvirt writes a definition atomically), and the start that
ends the restart writes the mark without it. A mark holding the intent means:

- the domain runs and still differs from its definition: the restart was not made,
  restart it now, inside a restart window or not (it was decided in one);
- the domain is off: the restart stopped it and did not start it, start it now,
  whatever a clean stop would mean to its run strategy;
- the domain runs as defined (the start happened, its mark write did not), or the VM
  is no longer restarted by a rollout (Halted, Manual, Once, rollout ``Stage``): the
  intent is stale, and the mark is written again without it.

Stops, prunes and moves need no intent: each is decided again from what the host
shows (a running domain of a ``Halted`` VM, a domain whose VM left git or moved), so a
daemon restarted half-way takes it up again by itself (``tests/faults/test_stops_and_moves.py``:
killed during a graceful stop and during a move's first phase). A stop taken up again
gives the guest its whole grace period again; one that a newer commit no longer asks
for (the VM ``Always`` again) is rightly not made, which a recorded intent would get wrong.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.model import Rollout
from reconciler.model.changes import Action
from reconciler.model.reasons import ChangeReason, Why
from reconciler.plan.power import RESTARTABLE
from reconciler.records import dataclass

if TYPE_CHECKING:
    from reconciler.model import LiveDomain, OwnershipMark, RenderedDomain
    from reconciler.plan.power import PowerDecision
    from reconciler.settings.policy import PlanPolicy

RESTART = "restart"


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a recorded intent asks of this plan."""

    reason: ChangeReason
    restart: bool = False  # restart the running domain now
    start: bool = False  # start the domain the restart left off
    stale: bool = False  # the intent no longer holds: the mark is written again without it


def resumed(
    mark: OwnershipMark | None,
    live: LiveDomain,
    d: RenderedDomain,
    policy: PlanPolicy,
    behind: bool,
    power: PowerDecision,
) -> Resumed | None:
    """The verdict on ``mark``'s intent (None: it records none). ``behind``: the running
    domain still differs from its definition in a restart-class way."""
    if mark is None or mark.intent != RESTART:
        return None
    rollout = d.rollout or policy.rollout
    restarted = (rollout == Rollout.RESTART or policy.restart_now) and d.run_strategy in RESTARTABLE
    if not restarted or power.stop:
        return Resumed(stale=True, reason=ChangeReason(Why.INTENT_GONE))
    if live.active and behind:
        return Resumed(restart=True, reason=ChangeReason(Why.INTENT_RESTART))
    if not live.active:
        return Resumed(start=True, reason=ChangeReason(Why.INTENT_START))
    return Resumed(stale=True, reason=ChangeReason(Why.INTENT_MADE))


def carried(mark: OwnershipMark, action: Action) -> OwnershipMark:
    """The mark a definition carries: a restart's records the intent until its start."""
    return replace(mark, intent=RESTART if action == Action.RESTART else "")
